"""What a stream's request asked for: the few facts request-aware checks read.

A client sizes the request body, so it is parsed under bounds (its size, and how many
objects and arrays it may hold) and reduced at once to ``RequestFacts``: a handful of
small, type-checked values. The raw bytes and the parsed tree are dropped as soon as the
facts are out, so an open stream holds a few hundred bytes of request whatever was sent.
Every check that reads a fact treats a missing one as "unknown" and skips, never guesses.

Which facts are read is the protocols' to say: each protocol's spec declares the facts its
checker reads (``ProtocolSpec.request_facts``), each a ``RequestFact``: the keys it sets
and a reader that takes them from the parsed body under bounds of its own (no value a
client sends is kept unless it is well typed and small). This module knows none of them:
the registry (``streamguard.protocols``) hands it the union of the registered protocols'
readers (``share_request_facts``), which ``RequestFacts`` runs when it is not given the
readers of one protocol (``reads``). Until the registry is imported, only the facts of
this module are read: ``stream`` (a bool) and the request's head.

The middleware and the client-side helpers (``streamguard.testing``) both call
``request_facts``, so they read the same request the same way, and both add the two facts
of the request's head a protocol reads (``add_http_facts``): the HTTP method and whether a
``Last-Event-ID`` header asked to resume (MCP Streamable HTTP answers a POST and a GET
differently, and a resumed GET may replay responses).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from pydantic_core import from_json

from streamguard._faults import error_name, is_cancellation

__all__ = [
    "GENERIC_FACT_KEYS",
    "MAX_REQUEST_CONTAINERS",
    "NO_FIELDS",
    "RequestBody",
    "RequestFact",
    "RequestFacts",
    "add_http_facts",
    "is_jsonrpc_batch",
    "is_mapping",
    "request_facts",
    "share_request_facts",
]

#: A request body with more ``{`` and ``[`` bytes than this is not parsed: an agent's long
#: history has a few thousand objects, while 1 MiB of ``[{},{},…]`` has 350,000, and the
#: parse would build all of them.
MAX_REQUEST_CONTAINERS = 20_000

#: The HTTP methods kept as a fact; any other reads as unknown.
_HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The facts of the request's head: from ``add_http_facts``, never from a client's body.
_HEAD_KEYS: Final = ("http_method", "last_event_id")

#: What a fact reader is given: the body's object, or the list of a JSON-RPC batch (MCP
#: 2025-03-26), whose facts are its requests' ids alone.
RequestBody = Mapping[str, Any] | list[Any]
#: The fields of a request that has none (a batch): what a reader of fields reads then.
NO_FIELDS: Mapping[str, Any] = {}


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, at the cost of a type test for a ``dict`` or ``None``.

    The ABC's own test runs Python code (``ABCMeta.__instancecheck__``) even on ``None``,
    about 1,500 instructions from compiled code, and a request's readers ask it of several
    fields a stream, most of them ``dict`` (parsed JSON) or absent."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


@dataclass(frozen=True, slots=True)
class RequestFact:
    """Facts one reader takes from a request body, declared by the protocols that read them.

    ``read(body, facts, attributes)`` sets, in ``facts``, only the ``keys`` it finds well
    typed and small (a key it leaves out is unknown to the checks), and in ``attributes``
    what is read as an attribute of ``RequestFacts`` rather than a key (``jsonrpc_methods``).
    It must never keep a value whose size the client chose: a string only from a known set
    or under a length bound, a number under a bound, a list cut at a bound.
    """

    #: The keys ``read`` may set, in the order the facts list them.
    keys: tuple[str, ...]
    read: Callable[[RequestBody, dict[str, Any], dict[str, Any]], None]


#: The attribute under which ``RequestFacts`` keeps the readers that raised.
_READER_FAULTS: Final = "reader_faults"

#: The facts of every request, whatever its protocol: whether it asked for a stream (as
#: most streaming APIs ask), and the head's. No protocol's reader may set them.
GENERIC_FACT_KEYS: frozenset[str] = frozenset({"stream", *_HEAD_KEYS})
#: What ``RequestFacts`` reads, besides the generic facts, when it is not told: the
#: registered protocols' readers (``share_request_facts``).
_shared_facts: list[RequestFact] = []


def share_request_facts(facts: Iterable[RequestFact]) -> None:
    """Read the registered protocols' ``facts`` from every request whose readers are not
    named. Called by the protocol registry on every change."""
    _shared_facts.clear()
    _shared_facts.extend(facts)


class RequestFacts(Mapping[str, Any]):
    """The request's facts, read like the JSON object they came from (``facts.get("n")``).

    Only the keys the readers set are kept (``RequestFact``), and only when their types are
    right; everything else in the request is gone. A fact that is present but unusable (an
    ``n`` of ten million) reads as ``None``: the checks that need it go unchecked. Which
    facts a protocol reads, and their bounds, its spec's readers say (``request_facts`` of
    ``ProtocolSpec``: chat's ``n``, ``stream_options`` and answer-shape facts beside
    ``openai_chat.SPEC``, Responses' ``starting_after``, the JSON-RPC ids of MCP and A2A in
    ``protocols/_jsonrpc.py``).

    ``request`` is the body's object, or the list of a 2025-03-26 batch; ``reads`` names
    the readers to run (one protocol's, from ``streamguard.protocols.request_facts_read_by``),
    by default those of every registered protocol. The request's head adds ``http_method``
    (``"GET"``, ``"POST"``, ...) and ``last_event_id`` (``True`` when a ``Last-Event-ID``
    header asked to resume): from ``add_http_facts``, or from those keys in ``request`` (how
    a test or the command line says a stream answered a GET).
    """

    __slots__ = ("_attributes", "_body_read", "_facts")

    def __init__(self, request: RequestBody, reads: Iterable[RequestFact] | None = None) -> None:
        #: Whether the facts come from a request body (False: from the head alone).
        self._body_read = True
        facts: dict[str, Any] = {}
        attributes: dict[str, Any] = {}
        if not isinstance(request, list):
            stream = request.get("stream")
            if type(stream) is bool:
                facts["stream"] = stream
        for fact in _shared_facts if reads is None else reads:
            # A reader may be a plugin's: one that raises is left out (the keys it set
            # undone; a nested value it changed in place is not) and named in
            # ``reader_faults``; the other readers go on.
            kept_facts, kept_attributes = facts.copy(), attributes.copy()
            try:
                fact.read(request, facts, attributes)
            except BaseException as exc:
                if is_cancellation(exc):
                    raise
                facts, attributes = kept_facts, kept_attributes
                faults = attributes.get(_READER_FAULTS, ())
                attributes[_READER_FAULTS] = (*faults, (fact, error_name(exc)))
        if not isinstance(request, list):
            method = request.get("http_method")
            if type(method) is str and method in _HTTP_METHODS:  # (a dict is unhashable)
                facts["http_method"] = method
            if request.get("last_event_id") is True:
                facts["last_event_id"] = True
        self._facts = facts
        self._attributes = attributes or None  # (most requests have none: not held)

    @classmethod
    def restored(cls, saved: Mapping[str, Any]) -> RequestFacts:
        """The facts ``saved_form`` wrote (a capture's header), as they were read: the
        facts themselves, not a body to read them from again (``jsonrpc_ids`` is no body
        key). A JSON list comes back a tuple, as the readers keep one."""
        made = cls({}, reads=())
        facts = saved.get("facts")
        if isinstance(facts, Mapping):
            made._facts = {
                str(key): tuple(value) if isinstance(value, list) else value
                for key, value in facts.items()
            }
        methods = saved.get("jsonrpc_methods")
        if isinstance(methods, list):
            made._attributes = {"jsonrpc_methods": tuple(str(m) for m in methods)}
        made._body_read = saved.get("body_read") is not False
        return made

    def saved_form(self) -> dict[str, Any]:
        """The facts as JSON values, for ``restored`` (the reader faults are not kept)."""
        saved: dict[str, Any] = {"facts": dict(self._facts), "body_read": self._body_read}
        methods = self.jsonrpc_methods
        if methods is not None:
            saved["jsonrpc_methods"] = list(methods)
        return saved

    @property
    def body_read(self) -> bool:
        """Whether a request body was read: False when only the head's facts are known (a
        GET, or a body that could not be read), and a check that reads the body's facts
        must treat the request as unknown."""
        return self._body_read

    @property
    def reader_faults(self) -> tuple[tuple[RequestFact, str], ...]:
        """The readers that raised on this request, each with its exception's
        ``error_name`` (never its message): their facts are unknown, for the seam to count
        (``streamguard.protocols.reader_of`` names the protocol)."""
        attributes = self._attributes
        if attributes is None:
            return ()
        faults: tuple[tuple[RequestFact, str], ...] = attributes.get(_READER_FAULTS, ())
        return faults

    @property
    def jsonrpc_methods(self) -> tuple[str, ...] | None:
        """The method each request of ``jsonrpc_ids`` called, in the same order: one of
        MCP's known client requests (``streamguard.protocols.mcp.JSONRPC_METHODS``), else
        ``"other"``; None when the body was no JSON-RPC message or was not read for it. An
        attribute, not a key: the facts read as a mapping stay what they were."""
        attributes = self._attributes
        methods: tuple[str, ...] | None = (
            None if attributes is None else attributes.get("jsonrpc_methods")
        )
        return methods

    def __getitem__(self, key: str) -> Any:
        return self._facts[key]

    def get(self, key: str, default: Any = None) -> Any:
        # ``Mapping.get`` would raise and catch a ``KeyError`` for each fact the request
        # left out (most of them): a checker reads a few at every stream's start.
        return self._facts.get(key, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._facts)

    def __contains__(self, key: object) -> bool:
        return key in self._facts

    def __len__(self) -> int:
        return len(self._facts)

    def __repr__(self) -> str:
        return f"RequestFacts({self._facts!r})"


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
        facts = RequestFacts(NO_FIELDS, ())
        facts._body_read = False
    # The head says both, absent included: a body's keys never stand in for them.
    kept = facts._facts
    for key in _HEAD_KEYS:
        kept.pop(key, None)
    if known:
        kept["http_method"] = method
    if resuming:
        kept["last_event_id"] = True
    return facts


def request_facts(
    body: bytes | bytearray | memoryview, limit: int, reads: Iterable[RequestFact] | None = None
) -> tuple[RequestFacts | None, str | None]:
    """The facts of a JSON request body, or ``None`` and why they are not available.

    ``limit`` is the largest body parsed, in bytes; ``reads`` as for ``RequestFacts``. The
    note never quotes the body.
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
    if not isinstance(request, dict) and not is_jsonrpc_batch(request):
        return None, "request body is not a JSON object: request checks skipped"
    # A body a client sent: the head's facts come from the head alone, never from its keys.
    facts = RequestFacts(request, reads)
    for key in _HEAD_KEYS:
        facts._facts.pop(key, None)
    return facts, None


def is_jsonrpc_batch(value: object) -> bool:
    """Whether a parsed request body is a JSON-RPC batch (MCP 2025-03-26): an array that
    holds a JSON-RPC 2.0 message."""
    return type(value) is list and any(
        type(message) is dict and message.get("jsonrpc") == "2.0" for message in value
    )
