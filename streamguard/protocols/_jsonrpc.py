"""What MCP and A2A share of JSON-RPC 2.0: the request ids they read from a request, kept
under bounds, and the shape every message must have (``jsonrpc_problem``).

Both protocols answer JSON-RPC requests on an event stream, and both check that the answers
carry the ids of the requests that asked (``jsonrpc_ids``); both declare ``REQUEST_IDS``
among their request facts, so it is read once whichever of them is configured or detected.

Ids are kept by a bounded key (``jsonrpc_id_key``): a string id of at most 64 characters
and a number as they are, anything longer as a 16-byte digest. The first
``MAX_REQUEST_IDS`` requests of a body are read: a valid id gives its key, an id that is no
JSON-RPC id (``true``, ``{}``, ``null``...) its JSON type (``jsonrpc_invalid_ids``: a
finding for the checker); the requests past them are only counted
(``jsonrpc_requests_unread``), and the checks that need their ids are skipped, with a note.
Each valid id's method is kept beside it (``RequestFacts.jsonrpc_methods``) when it is one
of MCP's known client requests (``JSONRPC_METHODS``), else as ``"other"``: the MCP checker
judges a result by the method it answers, and a method string never sizes what is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from hashlib import blake2b
from typing import Any, Final

from streamguard.protocols._fields import INTEGER, OBJECT, STRING_OR_NUMBER, opt, req, shape_problem
from streamguard.request import RequestBody, RequestFact

__all__ = [
    "JSONRPC_METHODS",
    "MAX_REQUEST_IDS",
    "OTHER_METHOD",
    "REQUEST_IDS",
    "IdKey",
    "jsonrpc_id_key",
    "jsonrpc_problem",
]

#: The JSON-RPC requests of one POST whose ids are read (a 2025-03-26 batch holds several);
#: the requests past them are counted, not read, so what is kept is never sized by the
#: client, and the checks that need their ids are skipped.
MAX_REQUEST_IDS: Final = 64
#: The longest string id kept as it is; a longer one is kept as a digest.
_MAX_KEPT_ID_CHARS: Final = 64
#: Integer ids kept as they are; a larger one (JSON numbers have no bound) by a digest.
_MAX_KEPT_ID_INT: Final = 2**63

#: The JSON-RPC methods kept per request id (MCP's client-to-server requests, whose results
#: the checker knows the shape of); any other method string is kept as ``OTHER_METHOD``, so
#: what is kept is never a string the client chose.
JSONRPC_METHODS: frozenset[str] = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
    }
)
#: What a request's method outside ``JSONRPC_METHODS`` (or no string) is kept as.
OTHER_METHOD: Final = "other"

#: What a JSON-RPC id is kept by: see ``jsonrpc_id_key``.
IdKey = str | int | float | bytes


def jsonrpc_id_key(value: object) -> IdKey | None:
    """The key a JSON-RPC id is kept and compared by, or None when ``value`` is no id.

    Ids compare by JSON type and value: the string ``"1"`` and the number ``1`` differ,
    while ``1`` and ``1.0`` are the same JSON number. A short string and a number of sane
    size are their own key; a longer string or a huge integer is a 16-byte digest (tagged
    by type, so no string digest equals a number's), so an id never sizes what is kept.
    ``null``, ``true`` and ``false``, objects and arrays are no id.
    """
    if type(value) is str:
        if len(value) <= _MAX_KEPT_ID_CHARS:
            return value
        return blake2b(b"s" + value.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if type(value) is float:
        if not value.is_integer():
            return value  # a fraction (or inf, nan): rare, and compared as it is
        value = int(value)
    if type(value) is int:
        if -_MAX_KEPT_ID_INT < value < _MAX_KEPT_ID_INT:
            return value
        raw = value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)
        return blake2b(b"i" + raw, digest_size=16).digest()
    return None


def _id_type(value: object) -> str:
    """The JSON type of a value that is no JSON-RPC id, as messages name types."""
    return "null" if value is None else type(value).__name__


def _read_request_ids(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    """The facts of a JSON-RPC body (one message, or a batch's list): ``jsonrpc_ids``, the
    keys of its requests' ids among the first ``MAX_REQUEST_IDS`` requests (``()`` when it
    holds only notifications or responses); ``jsonrpc_invalid_ids``, the types of the ids
    among them that are no JSON-RPC id, and ``jsonrpc_requests_unread``, how many requests
    followed them, each only when there is something to say; and the attribute
    ``jsonrpc_methods``, the method of each valid id, in the order of the keys."""
    messages: Iterable[object]
    if isinstance(body, list):
        messages = body
    elif body.get("jsonrpc") == "2.0":
        messages = (body,)
    else:
        return
    ids: list[IdKey] = []
    methods: list[str] = []
    invalid: list[str] = []
    unread = 0
    for message in messages:
        if type(message) is not dict or "method" not in message or "id" not in message:
            continue  # a notification, a response, or no message at all
        if len(ids) + len(invalid) >= MAX_REQUEST_IDS:
            unread += 1
            continue
        value = message["id"]
        key = jsonrpc_id_key(value)
        if key is None:
            invalid.append(_id_type(value))
        else:
            ids.append(key)
            method = message["method"]
            known = type(method) is str and method in JSONRPC_METHODS
            methods.append(method if known else OTHER_METHOD)
    facts["jsonrpc_ids"] = tuple(ids)
    if invalid:
        facts["jsonrpc_invalid_ids"] = tuple(invalid)
    if unread:
        facts["jsonrpc_requests_unread"] = unread
    attributes["jsonrpc_methods"] = tuple(methods)


#: The request fact of every JSON-RPC protocol: the ids (and MCP methods) of its requests.
REQUEST_IDS: RequestFact = RequestFact(
    ("jsonrpc_ids", "jsonrpc_invalid_ids", "jsonrpc_requests_unread"), _read_request_ids
)


#: A request's or a notification's fields (a notification has no id; a request's id is never
#: null), a result response's, an error response's (its id null when the request's could not
#: be read) and its error object's.
_REQUEST_FIELDS = (req("method"), opt("params", OBJECT), opt("id", STRING_OR_NUMBER))
_RESULT_FIELDS = (req("id", STRING_OR_NUMBER), req("result", OBJECT))
_ERROR_RESPONSE_FIELDS = (req("error", OBJECT),)
_ERROR_FIELDS = (req("code", INTEGER), req("message"))
_ERROR_ID_FIELDS = (opt("id", STRING_OR_NUMBER, nullable=True),)


def jsonrpc_problem(message: Mapping[str, Any]) -> str | None:
    """What makes ``message`` invalid JSON-RPC 2.0 as MCP and A2A use it (the first problem),
    or None.

    The text names fields and types only, never a value.
    """
    if message.get("jsonrpc") != "2.0":
        if "jsonrpc" not in message:
            return 'field `jsonrpc` is missing; every message carries "jsonrpc": "2.0"'
        return 'field `jsonrpc` is not the string "2.0"'
    if "method" in message:
        if "result" in message or "error" in message:
            problem = shape_problem(message, _REQUEST_FIELDS[:1])
            return problem or "a request or notification carries `result` or `error`"
        return shape_problem(message, _REQUEST_FIELDS)
    has_result, has_error = "result" in message, "error" in message
    if has_result and has_error:
        return "a response carries both `result` and `error`"
    if not has_result and not has_error:
        return "neither `method` (a request or notification) nor `result` or `error` (a response)"
    if has_result:
        return shape_problem(message, _RESULT_FIELDS)
    problem = shape_problem(message, _ERROR_RESPONSE_FIELDS)
    if problem is None:
        problem = shape_problem(message["error"], _ERROR_FIELDS, "error")
        problem = problem or shape_problem(message, _ERROR_ID_FIELDS)
    return problem
