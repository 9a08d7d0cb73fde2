"""What a stream's request asked for: the few facts request-aware checks read.

A client sizes the request body, so it is parsed under bounds (its size, and how many
objects and arrays it may hold) and reduced at once to ``RequestFacts``: a handful of
small, type-checked values. The raw bytes and the parsed tree are dropped as soon as the
facts are out, so an open stream holds a few hundred bytes of request whatever was sent.
Every check that reads a fact treats a missing one as "unknown" and skips, never guesses.

The middleware and the client-side helpers (``streamguard.testing``) both call
``request_facts``, so they read the same request the same way, and both add the two facts
of the request's head a protocol reads (``add_http_facts``): the HTTP method and whether a
``Last-Event-ID`` header asked to resume (MCP Streamable HTTP answers a POST and a GET
differently, and a resumed GET may replay responses).

JSON-RPC request ids (MCP) are kept by a bounded key (``jsonrpc_id_key``): a string id of
at most 64 characters and a number as they are, anything longer as a 16-byte digest. The
first ``MAX_REQUEST_IDS`` requests of a body are read: a valid id gives its key, an id that
is no JSON-RPC id (``true``, ``{}``, ``null``...) its JSON type (``jsonrpc_invalid_ids``: a
finding for the checker); the requests past them are only counted
(``jsonrpc_requests_unread``), and the checks that need their ids are skipped, with a note.
Each valid id's method is kept beside it (``RequestFacts.jsonrpc_methods``) when it is one
of MCP's known client requests (``JSONRPC_METHODS``), else as ``"other"``: the checker
judges a result by the method it answers, and a method string never sizes what is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from hashlib import blake2b
from typing import Any

from pydantic_core import from_json

__all__ = [
    "JSONRPC_METHODS",
    "MAX_REQUESTED_CHOICES",
    "MAX_REQUEST_CONTAINERS",
    "MAX_REQUEST_IDS",
    "MAX_STOP_SEQUENCES",
    "OTHER_METHOD",
    "RequestFacts",
    "add_http_facts",
    "is_jsonrpc_batch",
    "jsonrpc_id_key",
    "request_facts",
]

#: A request body with more ``{`` and ``[`` bytes than this is not parsed: an agent's long
#: history has a few thousand objects, while 1 MiB of ``[{},{},…]`` has 350,000, and the
#: parse would build all of them.
MAX_REQUEST_CONTAINERS = 20_000

#: An ``n`` above this is not believed: per-choice checks are skipped rather than sized by a
#: client (``{"n": 10000000}`` would otherwise make the checker count ten million choices).
MAX_REQUESTED_CHOICES = 128

#: The largest value kept for an integer fact (``starting_after``): a JSON number can have
#: 100,000 digits.
_MAX_FACT_INT = 2**53

#: The JSON-RPC requests of one POST whose ids are read (a 2025-03-26 batch holds several);
#: the requests past them are counted, not read, so what is kept is never sized by the
#: client, and the checks that need their ids are skipped.
MAX_REQUEST_IDS = 64
#: The longest string id kept as it is; a longer one is kept as a digest.
_MAX_KEPT_ID_CHARS = 64
#: Integer ids kept as they are; a larger one (JSON numbers have no bound) by a digest.
_MAX_KEPT_ID_INT = 2**63
#: The stop sequences kept (``stop``): OpenAI takes at most 4 (vLLM and llama.cpp more);
#: a longer list, or a sequence longer than ``_MAX_STOP_CHARS``, reads as unknown, so the
#: facts of an open stream stay a few hundred bytes whatever the client sent.
MAX_STOP_SEQUENCES = 4
_MAX_STOP_CHARS = 64
#: The largest ``top_logprobs`` believed (OpenAI takes at most 20).
_MAX_TOP_LOGPROBS = 64
#: The longest forced function name kept (``tool_choice``; OpenAI's names are at most 64).
_MAX_FUNCTION_NAME_CHARS = 64
#: The ``tool_choice`` strings kept as they are; a ``{"type": "function", ...}`` object
#: reads as ``"function"`` (its name is ``tool_choice_function``).
_TOOL_CHOICES = frozenset({"none", "auto", "required"})
#: The ``response_format.type`` values kept; any other reads as unknown.
_RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})
#: The HTTP methods kept as a fact; any other reads as unknown.
_HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

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
OTHER_METHOD = "other"

_ABSENT: Any = object()
#: The fields of a request that has none (a batch's facts are its ids alone).
_NO_FIELDS: Mapping[str, Any] = {}

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


def _request_ids(
    messages: Iterable[object],
) -> tuple[tuple[IdKey, ...], tuple[str, ...], int, tuple[str, ...]]:
    """What the requests among JSON-RPC ``messages`` (a request has a ``method`` and an
    ``id``) say about their ids: the keys of the valid ids and the types of the invalid ones
    among the first ``MAX_REQUEST_IDS`` requests, in order, how many requests followed
    them unread, and the method of each valid id (``JSONRPC_METHODS`` or ``OTHER_METHOD``),
    in the order of the keys."""
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
    return tuple(ids), tuple(invalid), unread, tuple(methods)


class RequestFacts(Mapping[str, Any]):
    """The request's facts, read like the JSON object they came from (``facts.get("n")``).

    Only ``stream``, ``n``, ``stream_options.include_usage`` and ``starting_after`` are
    kept, and only when their types are right; everything else in the request is gone. An
    ``n`` that is present but unusable reads as ``None``: per-choice counts go unchecked.

    What a request asks of the answer's shape is kept too, for the checks that judge a
    stream against it (``streamguard conformance``), each only when well typed and small:
    ``max_tokens`` (``max_completion_tokens`` when both are sent, as OpenAI reads them),
    ``stop`` (a tuple of at most ``MAX_STOP_SEQUENCES`` strings; one string is a tuple of
    one), ``tool_choice`` (``"none"``, ``"auto"``, ``"required"``, or ``"function"`` for a
    forced function, whose name is ``tool_choice_function``), ``logprobs`` (a bool),
    ``top_logprobs`` and ``response_format`` (its ``type``: ``"text"``, ``"json_object"``
    or ``"json_schema"``).

    A JSON-RPC 2.0 body (MCP) gives ``jsonrpc_ids``: the keys of its requests' ids
    (``jsonrpc_id_key``) among the first ``MAX_REQUEST_IDS`` requests, ``()`` when it holds
    only notifications or responses. Two more facts say what those keys leave out, each
    present only when there is something to say: ``jsonrpc_invalid_ids``, the types
    (``bool``, ``dict``, ``list``, ``null``) of the ids among those requests that are no
    JSON-RPC id (MCP requests carry a string or a number), and ``jsonrpc_requests_unread``,
    how many requests followed the first ``MAX_REQUEST_IDS``. Beside the keys, the
    attribute ``jsonrpc_methods`` says which method each of those requests called (a known
    MCP method or ``"other"``). ``request`` is the body's
    object, or the list of a 2025-03-26 batch. The request's head adds ``http_method``
    (``"GET"``, ``"POST"``, ...) and ``last_event_id`` (``True`` when a ``Last-Event-ID``
    header asked to resume): from ``add_http_facts``, or from those keys in ``request`` (how
    a test or the command line says a stream answered a GET).
    """

    __slots__ = (
        "_body_read",
        "_http_method",
        "_include_usage",
        "_jsonrpc_ids",
        "_jsonrpc_invalid",
        "_jsonrpc_methods",
        "_jsonrpc_unread",
        "_last_event_id",
        "_logprobs",
        "_max_tokens",
        "_n",
        "_response_format",
        "_starting_after",
        "_stop",
        "_stream",
        "_tool_choice",
        "_tool_choice_function",
        "_top_logprobs",
    )

    def __init__(self, request: Mapping[str, Any] | list[Any]) -> None:
        #: Whether the facts come from a request body (False: from the head alone).
        self._body_read = True
        self._jsonrpc_ids: Any = _ABSENT
        self._http_method: Any = _ABSENT
        self._last_event_id: Any = _ABSENT
        self._jsonrpc_invalid: Any = _ABSENT
        self._jsonrpc_unread: Any = _ABSENT
        self._jsonrpc_methods: tuple[str, ...] | None = None
        messages: list[Any] | None = None
        if isinstance(request, list):  # a batch: only its request ids are facts
            messages = request
            request = _NO_FIELDS
        elif request.get("jsonrpc") == "2.0":
            messages = [request]
        if messages is not None:
            ids, invalid, unread, methods = _request_ids(messages)
            self._jsonrpc_ids = ids
            self._jsonrpc_methods = methods
            if invalid:
                self._jsonrpc_invalid = invalid
            if unread:
                self._jsonrpc_unread = unread
        method = request.get("http_method")
        if type(method) is str and method in _HTTP_METHODS:  # (a dict is unhashable)
            self._http_method = method
        if request.get("last_event_id") is True:
            self._last_event_id = True
        stream = request.get("stream")
        self._stream: Any = stream if type(stream) is bool else _ABSENT
        n = request.get("n", _ABSENT)
        if n is not _ABSENT and not (type(n) is int and 1 <= n <= MAX_REQUESTED_CHOICES):
            n = None
        self._n: Any = n
        options = request.get("stream_options")
        self._include_usage: Any = (
            options.get("include_usage") is True if isinstance(options, Mapping) else _ABSENT
        )
        starting_after = request.get("starting_after")
        self._starting_after: Any = (
            starting_after
            if type(starting_after) is int and 0 <= starting_after <= _MAX_FACT_INT
            else _ABSENT
        )
        self._read_answer_shape(request)

    def _read_answer_shape(self, request: Mapping[str, Any]) -> None:
        """The facts of what the answer may look like: its length, stops, tools, format."""
        self._max_tokens: Any = _ABSENT
        for key in ("max_tokens", "max_completion_tokens"):  # the newer name wins
            value = request.get(key)
            if type(value) is int and 0 <= value <= _MAX_FACT_INT:
                self._max_tokens = value
        self._stop: Any = _stop_sequences(request.get("stop", _ABSENT))
        self._tool_choice: Any = _ABSENT
        self._tool_choice_function: Any = _ABSENT
        choice = request.get("tool_choice")
        if type(choice) is str and choice in _TOOL_CHOICES:
            self._tool_choice = choice
        elif isinstance(choice, Mapping) and choice.get("type") == "function":
            self._tool_choice = "function"
            function = choice.get("function")
            name = function.get("name") if isinstance(function, Mapping) else None
            if type(name) is str and len(name) <= _MAX_FUNCTION_NAME_CHARS:
                self._tool_choice_function = name
        logprobs = request.get("logprobs")
        self._logprobs: Any = logprobs if type(logprobs) is bool else _ABSENT
        top = request.get("top_logprobs")
        self._top_logprobs: Any = (
            top if type(top) is int and 0 <= top <= _MAX_TOP_LOGPROBS else _ABSENT
        )
        self._response_format: Any = _ABSENT
        response_format = request.get("response_format")
        if isinstance(response_format, Mapping):
            kind = response_format.get("type")
            if type(kind) is str and kind in _RESPONSE_FORMATS:
                self._response_format = kind

    @property
    def body_read(self) -> bool:
        """Whether a request body was read: False when only the head's facts are known (a
        GET, or a body that could not be read), and a check that reads the body's facts
        must treat the request as unknown."""
        return self._body_read

    @property
    def jsonrpc_methods(self) -> tuple[str, ...] | None:
        """The method each request of ``jsonrpc_ids`` called, in the same order: one of
        ``JSONRPC_METHODS`` (what the MCP checker knows the result of), else
        ``OTHER_METHOD``; None when the body was no JSON-RPC message. An attribute, not a
        key: the facts read as a mapping stay what they were."""
        return self._jsonrpc_methods

    def __getitem__(self, key: str) -> Any:
        if key == "stream_options" and self._include_usage is not _ABSENT:
            return {"include_usage": self._include_usage}
        value = {
            "stream": self._stream,
            "n": self._n,
            "starting_after": self._starting_after,
            "jsonrpc_ids": self._jsonrpc_ids,
            "jsonrpc_invalid_ids": self._jsonrpc_invalid,
            "jsonrpc_requests_unread": self._jsonrpc_unread,
            "http_method": self._http_method,
            "last_event_id": self._last_event_id,
            "max_tokens": self._max_tokens,
            "stop": self._stop,
            "tool_choice": self._tool_choice,
            "tool_choice_function": self._tool_choice_function,
            "logprobs": self._logprobs,
            "top_logprobs": self._top_logprobs,
            "response_format": self._response_format,
        }.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for key in _KEYS:
            if key in self:
                yield key

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"RequestFacts({dict(self)!r})"


_KEYS = (
    "stream",
    "n",
    "stream_options",
    "starting_after",
    "jsonrpc_ids",
    "jsonrpc_invalid_ids",
    "jsonrpc_requests_unread",
    "http_method",
    "last_event_id",
    "max_tokens",
    "stop",
    "tool_choice",
    "tool_choice_function",
    "logprobs",
    "top_logprobs",
    "response_format",
)


def _stop_sequences(value: object) -> Any:
    """A request's ``stop`` as a tuple of strings; absent, or None when present but unusable
    (too many, too long, not strings): the checks that read it are then skipped."""
    if value is _ABSENT or value is None:
        return _ABSENT
    if type(value) is str:
        return (value,) if len(value) <= _MAX_STOP_CHARS else None
    if type(value) is not list or len(value) > MAX_STOP_SEQUENCES:
        return None
    kept: list[str] = []
    for item in value:
        if type(item) is not str or len(item) > _MAX_STOP_CHARS:
            return None
        kept.append(item)
    return tuple(kept)


def add_http_facts(
    facts: RequestFacts | None, method: object, headers: Iterable[tuple[bytes, bytes]]
) -> RequestFacts | None:
    """``facts`` with the request head's: its HTTP ``method`` and whether ``headers`` (raw,
    as ASGI and httpx hold them) carry a ``Last-Event-ID``. Without body facts, facts of the
    head alone (``body_read`` False); None when the head says nothing either."""
    resuming = any(name.lower() == b"last-event-id" for name, _ in headers)
    known = type(method) is str and method in _HTTP_METHODS
    if facts is None:
        if not known and not resuming:
            return None
        facts = RequestFacts({})
        facts._body_read = False
    # The head says both, absent included: a body's keys never stand in for them.
    facts._http_method = method if known else _ABSENT
    facts._last_event_id = True if resuming else _ABSENT
    return facts


def request_facts(
    body: bytes | bytearray | memoryview, limit: int
) -> tuple[RequestFacts | None, str | None]:
    """The facts of a JSON request body, or ``None`` and why they are not available.

    ``limit`` is the largest body parsed, in bytes. The note never quotes the body.
    """
    if not body:
        return None, None
    if len(body) > limit:
        return None, f"request body over request_peek_bytes={limit}: request checks skipped"
    raw = bytes(body)
    if raw.count(b"{") + raw.count(b"[") > MAX_REQUEST_CONTAINERS:
        return None, (
            f"request body holds over {MAX_REQUEST_CONTAINERS} JSON objects and arrays: "
            "request checks skipped"
        )
    try:
        request = from_json(raw, cache_strings=False)
    except ValueError:
        return None, "request body is not JSON: request checks skipped"
    if is_jsonrpc_batch(request):
        return _body_facts(request), None  # a JSON-RPC batch (MCP 2025-03-26)
    if not isinstance(request, dict):
        return None, "request body is not a JSON object: request checks skipped"
    return _body_facts(request), None


def is_jsonrpc_batch(value: object) -> bool:
    """Whether a parsed request body is a JSON-RPC batch (MCP 2025-03-26): an array that
    holds a JSON-RPC 2.0 message."""
    return type(value) is list and any(
        type(message) is dict and message.get("jsonrpc") == "2.0" for message in value
    )


def _body_facts(request: dict[str, Any] | list[Any]) -> RequestFacts:
    """The facts of a body a client sent: the head's facts (``http_method``,
    ``last_event_id``) come from the head alone, never from keys the client put in it."""
    facts = RequestFacts(request)
    facts._http_method = facts._last_event_id = _ABSENT
    return facts
