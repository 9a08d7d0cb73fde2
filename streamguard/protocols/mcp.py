"""MCP Streamable HTTP (the Model Context Protocol's HTTP transport, spec revisions 2025-03-26
onward; the official ``mcp`` Python SDK serves it from Starlette).

A client POSTs one JSON-RPC 2.0 message to the MCP endpoint (2025-03-26 also allowed a batch
array). When the body holds requests, the server answers either with one JSON object or
with ``text/event-stream``: each SSE event carries one JSON-RPC message in its data (or, in
2025-03-26, a batch array), and the stream ends once the response to every request of the
POST was sent; server-to-client requests (sampling, elicitation, roots) and notifications
(progress, logs) may come before. A GET opens a standalone stream for server requests and
notifications that never carries a response, unless it resumes an earlier stream with
``Last-Event-ID``. The official clients (``mcp`` 2.3, ``@modelcontextprotocol/sdk``) read
events named ``message`` (or unnamed), skip one whose data is empty (the 2025-11-25 priming
event: an id and empty data, sent first so the client can resume), validate each message,
and stop reading a POST's stream at the response.

Theory of operation
-------------------

What is owed depends on the request, so the checker reads the request's facts: the head's
(``streamguard.request``: the HTTP method, whether a ``Last-Event-ID`` asked to resume),
and the one its spec declares, the ids of the POST's requests (``_jsonrpc.REQUEST_IDS``:
``jsonrpc_ids``, the first ``MAX_REQUEST_IDS`` requests; ids compare by JSON type and
value). A POST whose requests are known starts in ``waiting``:
each response is matched to an owed id, and the one that answers the last of them is the
terminal signal (the in-band error when it is a JSON-RPC error), after which the body must
end (``body_not_ended`` if it stays open; ``missing_terminal`` if it ends before). Every
other stream starts in ``open``, where nothing is owed and the body's end is a clean end: a
GET, a resumption, a POST of notifications or responses only, a POST whose body was not
read.

What the request rules out is said, never guessed. A request whose id is no JSON-RPC id
(``jsonrpc_invalid_ids``: ``true``, an object, an array, ``null``, which MCP forbids) is
owed nothing and is one ``invalid_jsonrpc`` finding, made before the first event's findings
(or at the body's end) with no event index; the other requests of its batch are still owed.
A batch of more than ``MAX_REQUEST_IDS`` requests (``jsonrpc_requests_unread`` counts the
rest) still owes the answers read, so a body that ends without one is ``missing_terminal``;
but an answer to an id not read may answer a request not read, so while any are unread no
response is ``unrequested_response`` or ``duplicate_response``, and the answer to the last
request read is no terminal (``last_read``: the stream goes on in ``open``). That skip, a
resumed GET's (``response_on_standalone_stream`` off) and a POST whose body was not read
are returned by ``checks_skipped`` (reasons from ``report.SKIP_REASONS``), which the
monitor puts on the report as notes and ``skipped_checks`` and the metrics count.

Each message's route (``ROUTES``) is what it is and, for a response, what it answers:
``classify`` matches a response to the owed ids (the match is the lifecycle kind: the
answer to the last one is the terminal), and the route's handler checks the message after
the step. The payload handlers check each message (``invalid_jsonrpc``: ``jsonrpc`` exactly "2.0", a
request's ``method`` a string and ``params`` an object, a response with exactly one of
``result`` (an object) and ``error`` (an object with an integer ``code`` and a string
``message``), an id a string or a number) and each response: an answer to an id the POST
did not carry is ``unrequested_response``, and any response on a standalone GET stream
``response_on_standalone_stream``. A second answer to one id is a ``repeat`` for the
lifecycle: ``duplicate_terminal`` once the POST's last request was answered (the terminal
sent again: with one request per POST, the usual case), ``duplicate_response`` before that
or where nothing is known to be owed (within a batch event, the handler reports it). A
response that is invalid in another way is still matched by its id, so one mistake is one
finding. An error response without an id (or with ``id: null``, JSON-RPC's answer when the
request could not be read) answers nothing and is never reported: the 2025-11-25 schema
allows it, and the Python SDK routes such errors to the GET stream. Event ids must not come
back: an id in effect that returns to a value it had before another one is
``duplicate_event_id``.

Results and params are checked by method (``schema_mismatch``, error: the mcp 2.3 client
raises a ValidationError on the result, answers the server request with an error, drops the
notification). The request's facts keep the method of each owed id when it is one of MCP's
client requests (``RequestFacts.jsonrpc_methods``); the answer to such an id has its
``result`` checked against ``RESULT_SHAPES[method]``, and a server request's or
notification's message against ``PARAMS_SHAPES[method]`` (the ones whose ``params`` the
client requires). The shapes are data in the shared vocabulary (``_fields.Shape``), declared
after the client's pydantic models as its lax mode reads JSON: open objects, optional fields
left out or null, numbers that may be strings. An answer to an id whose method is unknown
(another method, no request, an id two requests of a batch share with different methods),
an error answer, a repeat and a message already ``invalid_jsonrpc`` are not checked: the
lookup costs one dict probe, and nothing is walked. The walk is bounded
(``_fields.MAX_SHAPE_ITEMS`` items per list, ``MAX_SHAPE_OBJECTS`` objects per payload) and
its finding names the method (a key of the tables) and the path, never a value.

Deliberately clean: notifications and server requests before the response, events with
empty data (priming, keepalive), ``retry`` fields, events named other than ``message``
(clients skip them; the legacy HTTP+SSE transport's ``endpoint`` event marks a GET stream
that carries responses), string or integer ids, an error response as the answer, a body
that ends before the answers after an event carried an id (2025-11-25 lets the server close
the connection and the client resume with ``Last-Event-ID``).

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: at most ``MAX_REQUEST_IDS`` owed ids (from the request's facts), as many
answered ids and ``MAX_EVENT_IDS`` event ids are kept, long ones by a digest; past those
bounds the checks that need the rest are skipped (past ``MAX_REQUEST_IDS`` requests, with a
note: see above). Within one batch event each rule is
reported once, with a count. Messages never show an id or a method: ids by type, size and
hash, methods as "a request" or "a notification".

Under ``protocol="auto"`` (``SPEC``): the path ``/mcp`` (the conventional endpoint and the
SDK's default), an event whose data is a JSON-RPC 2.0 message (or a batch that starts with
one), or the legacy transport's ``endpoint`` event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import islice
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._entities import id_key
from streamguard.protocols._jsonrpc import (
    MAX_REQUEST_IDS,
    REQUEST_IDS,
    IdKey,
    jsonrpc_id_key,
    jsonrpc_problem,
)
from streamguard.protocols.engine import ANY as ANY_KIND
from streamguard.protocols.engine import (
    ANY_VALUE,
    ARRAY,
    ARRAY_OF_STRINGS,
    EACH,
    END,
    ERROR,
    LAX_BOOLEAN,
    LAX_FRACTION,
    LAX_INTEGER,
    LAX_NUMBER,
    LAX_STRING_OR_INTEGER,
    NO_FINDINGS,
    NO_PAYLOAD,
    OBJECT,
    OBJECT_OF_SCHEMAS,
    ONE_OR_EACH,
    OTHER,
    STAY,
    STRING,
    STRING_OR_EXACT_INTEGER,
    TERMINAL,
    Checker,
    EventFindings,
    Field,
    Lifecycle,
    Nested,
    ProtocolSpec,
    Route,
    Shape,
    Signal,
    broken,
    go,
    may,
    may_hold,
    nested_problem,
    opt,
    req,
    type_name,
)
from streamguard.report import (
    REQUEST_BODY_UNREAD,
    REQUEST_IDS_OVER_BOUND,
    RESUMED_STREAM,
    Finding,
)
from streamguard.request import RequestFacts
from streamguard.sse import Event

__all__ = [
    "ENDPOINT_EVENT",
    "LIFECYCLE",
    "MAX_BATCH_ITEMS",
    "MAX_EVENT_IDS",
    "MAX_REQUEST_IDS",
    "SPEC",
    "MCPChecker",
    "is_endpoint_event",
    "is_jsonrpc_message",
]

#: The legacy HTTP+SSE transport's (2024-11-05) first event: the URL to POST messages to.
ENDPOINT_EVENT: Final = "endpoint"
#: The event name clients read; any other is skipped.
_MESSAGE = "message"
#: The conventional MCP endpoint (``MCPServer.streamable_http_app``'s default path).
_DEFAULT_PATH = "/mcp"
#: Distinct event ids kept per stream for ``duplicate_event_id``.
MAX_EVENT_IDS = 256
#: The messages of one batch that are checked; the rest go unchecked. A batch answers the
#: POST's requests (at most ``MAX_REQUEST_IDS`` are tracked), while a 1 MiB event can hold
#: half a million items, each of which would make a finding: at this bound the checks cost
#: about what parsing that megabyte does, not a hundred times more.
MAX_BATCH_ITEMS = 4096

# -- the lifecycle ---------------------------------------------------------------------------

#: The first event in ``waiting`` whose SSE id in effect is not empty.
CURSOR: Final = "cursor"
#: A response that is not the terminal: one of several owed, or one its own rules judge.
RESPONSE: Final = "response"
#: An event the clients skip: empty data, or a name other than ``message``.
SKIPPED: Final = "skipped"
#: A second response to a request this stream already answered.
REPEAT: Final = "repeat"
#: The response to the last owed request whose id was read, when the POST carried more
#: requests than were read: the rest may still be answered, so it is no terminal.
LAST_READ: Final = "last_read"

_WAITING, _RESUMABLE, _ANSWERED, _FAILED, _OPEN, _CLOSED = (
    "waiting",
    "resumable",
    "answered",
    "failed",
    "open",
    "closed",
)
_AFTER = "event {index} ({name}) follows the %s that answered the POST's last owed request " + (
    "(event {terminal}); official clients stop reading the stream there"
)
_REPEATED = "event {index} is {name}; the client settled that call at the first"
_DUPLICATE_ANSWER = broken(rules.DUPLICATE_RESPONSE, _REPEATED)
_DUPLICATE_LAST = broken(
    rules.DUPLICATE_TERMINAL,
    "event {index} is {name}, after the POST's last owed request was answered (event "
    "{terminal}); the client settled that call at the first",
)

LIFECYCLE = Lifecycle(
    phases={
        _WAITING: "responses to the POST's requests are owed",
        _RESUMABLE: "responses are owed; an event id lets the client resume if the body ends",
        _ANSWERED: "the last owed request was answered; the body ends next",
        _FAILED: "answered with a JSON-RPC error; the body ends next",
        _OPEN: "nothing is known to be owed (a GET, a resumption, unknown requests; or the "
        "requests read were answered and the rest were not read)",
        _CLOSED: "the body ended a stream that owed nothing",
    },
    kinds={
        CURSOR: "the first event that carries an SSE id while responses are owed",
        RESPONSE: "a response other than the one that answers the last owed request",
        SKIPPED: "an event clients skip: empty data, or a name other than message",
        REPEAT: "a second response to a request this stream already answered",
        LAST_READ: "the answer to the last owed request read, when more were not read",
    },
    initial=_WAITING,
    table={
        (_WAITING, CURSOR): go(_RESUMABLE),
        (_WAITING, TERMINAL): go(_ANSWERED),
        (_WAITING, ERROR): go(_FAILED),
        (_WAITING, REPEAT): _DUPLICATE_ANSWER,
        (_WAITING, LAST_READ): go(_OPEN),
        (_WAITING, END): broken(
            rules.MISSING_TERMINAL,
            "the body ended after {index} event(s) with {owed} of the POST's {requests} "
            "request(s) unanswered",
        ),
        (_WAITING, ANY_KIND): STAY,
        (_RESUMABLE, TERMINAL): go(_ANSWERED),
        (_RESUMABLE, ERROR): go(_FAILED),
        (_RESUMABLE, REPEAT): _DUPLICATE_ANSWER,
        (_RESUMABLE, LAST_READ): go(_OPEN),
        (_RESUMABLE, END): go(_CLOSED),
        (_RESUMABLE, ANY_KIND): STAY,
        (_ANSWERED, REPEAT): _DUPLICATE_LAST,
        (_ANSWERED, OTHER): broken(rules.EVENT_AFTER_TERMINAL, _AFTER % "response"),
        (_ANSWERED, END): STAY,
        (_ANSWERED, ANY_KIND): STAY,
        (_FAILED, REPEAT): _DUPLICATE_LAST,
        (_FAILED, OTHER): broken(rules.EVENT_AFTER_TERMINAL, _AFTER % "error response"),
        (_FAILED, END): STAY,
        (_FAILED, ANY_KIND): STAY,
        (_OPEN, REPEAT): _DUPLICATE_ANSWER,
        (_OPEN, END): go(_CLOSED),
        (_OPEN, ANY_KIND): STAY,
        (_CLOSED, ANY_KIND): STAY,
    },
    ended=frozenset({_ANSWERED, _FAILED, _CLOSED}),
    errored=frozenset({_FAILED}),
    sealed=frozenset(),
)

# -- messages --------------------------------------------------------------------------------


# -- results and params by method ------------------------------------------------------------
#
# The shapes the mcp 2.3 client's models enforce (``mcp_types``' 2025-11-25 wire models,
# which the client validates every result, server request and notification against), as
# pydantic's lax mode reads JSON: an optional field may be null (``X | None = None``), a
# number may be a string that spells one, and unknown keys are always allowed (MCP objects
# are open; ``_meta`` everywhere). Only what the client rejects is declared.


_META: Final = may("_meta", OBJECT)
_ROLES: Final = ("assistant", "user")
_LOG_LEVELS: Final = (
    "alert",
    "critical",
    "debug",
    "emergency",
    "error",
    "info",
    "notice",
    "warning",
)
_ICONS: Final = may_hold(
    "icons",
    Shape((req("src"), may("mimeType"), may("sizes", ARRAY_OF_STRINGS), may("theme"))),
    EACH,
)
_ANNOTATIONS: Final = may_hold(
    "annotations",
    Shape((may("audience", ARRAY_OF_STRINGS), may("lastModified"), may("priority", LAX_FRACTION))),
)
#: A resource's contents: text or a base64 blob, each with its uri (an untagged union; the
#: first field of each alternative is the one that says which it meant to be).
_RESOURCE_CONTENTS: Final = Shape(
    alternatives=(
        Shape((req("text"), req("uri"), may("mimeType"), _META)),
        Shape((req("blob"), req("uri"), may("mimeType"), _META)),
    )
)
_TEXT: Final = Shape((req("text"), _META), (_ANNOTATIONS,))
_MEDIA: Final = Shape((req("data"), req("mimeType"), _META), (_ANNOTATIONS,))
#: A resource as ``resources/list`` lists it; a ``resource_link`` content block is one.
_RESOURCE: Final = Shape(
    (
        req("name"),
        req("uri"),
        may("title"),
        may("description"),
        may("mimeType"),
        may("size", LAX_INTEGER),
        _META,
    ),
    (_ANNOTATIONS, _ICONS),
)
#: A content block (a tool result's, a prompt message's), tagged by ``type``.
_CONTENT_BLOCK: Final = Shape(
    tag="type",
    variants={
        "text": _TEXT,
        "image": _MEDIA,
        "audio": _MEDIA,
        "resource_link": _RESOURCE,  # a resource as resources/list lists it
        "resource": Shape((_META,), (_ANNOTATIONS, Nested("resource", _RESOURCE_CONTENTS))),
    },
)
#: A sampling message's content block: text, media, and the tool use and result blocks.
_SAMPLING_BLOCK: Final = Shape(
    tag="type",
    variants={
        "text": _TEXT,
        "image": _MEDIA,
        "audio": _MEDIA,
        "tool_use": Shape((req("id"), req("name"), req("input", OBJECT), _META)),
        "tool_result": Shape(
            (
                req("toolUseId"),
                req("content", ARRAY),
                may("isError", LAX_BOOLEAN),
                may("structuredContent", OBJECT),
                _META,
            )
        ),
    },
)
#: A tool's input or output schema: a JSON Schema object whose root type is ``object``.
_TOOL_SCHEMA: Final = Shape(
    (
        req("type", STRING, ("object",)),
        may("$schema"),
        may("properties", OBJECT_OF_SCHEMAS),
        may("required", ARRAY_OF_STRINGS),
    )
)
_IMPLEMENTATION: Final = Shape(
    (req("name"), req("version"), may("title"), may("description"), may("websiteUrl")),
    (_ICONS,),
)
_LIST_CHANGED: Final = Shape((may("listChanged", LAX_BOOLEAN),))
_CAPABILITIES: Final = Shape(
    (
        may("completions", OBJECT),
        may("experimental", OBJECT),
        may("logging", OBJECT),
        may("tasks", OBJECT),
    ),
    (
        may_hold("prompts", _LIST_CHANGED),
        may_hold(
            "resources", Shape((may("listChanged", LAX_BOOLEAN), may("subscribe", LAX_BOOLEAN)))
        ),
        may_hold("tools", _LIST_CHANGED),
    ),
)
_TOOL: Final = Shape(
    (req("name"), may("title"), may("description"), _META),
    (
        Nested("inputSchema", _TOOL_SCHEMA),
        may_hold("outputSchema", _TOOL_SCHEMA),
        may_hold(
            "annotations",
            Shape(
                (
                    may("title"),
                    may("readOnlyHint", LAX_BOOLEAN),
                    may("destructiveHint", LAX_BOOLEAN),
                    may("idempotentHint", LAX_BOOLEAN),
                    may("openWorldHint", LAX_BOOLEAN),
                )
            ),
        ),
        _ICONS,
    ),
)
_RESOURCE_TEMPLATE: Final = Shape(
    (req("name"), req("uriTemplate"), may("title"), may("description"), may("mimeType"), _META),
    (_ANNOTATIONS, _ICONS),
)
_PROMPT: Final = Shape(
    (req("name"), may("title"), may("description"), _META),
    (
        may_hold(
            "arguments",
            Shape((req("name"), may("title"), may("description"), may("required", LAX_BOOLEAN))),
            EACH,
        ),
        _ICONS,
    ),
)
_PAGE: Final = (may("nextCursor"), _META)
_EMPTY: Final = Shape((_META,))

#: The shape of the ``result`` that answers each known request method (the keys are
#: ``_jsonrpc.JSONRPC_METHODS``), as the client validates it before the call returns.
RESULT_SHAPES: Final[dict[str, Shape]] = {
    "initialize": Shape(
        (req("protocolVersion"), may("instructions"), _META),
        (Nested("capabilities", _CAPABILITIES), Nested("serverInfo", _IMPLEMENTATION)),
    ),
    "ping": _EMPTY,
    "tools/list": Shape(_PAGE, (Nested("tools", _TOOL, EACH),)),
    "tools/call": Shape(
        # ``isError`` defaults to false in the client's model and may not be null.
        (opt("isError", LAX_BOOLEAN), may("structuredContent", OBJECT), _META),
        (Nested("content", _CONTENT_BLOCK, EACH),),
    ),
    "resources/list": Shape(_PAGE, (Nested("resources", _RESOURCE, EACH),)),
    "resources/templates/list": Shape(
        _PAGE, (Nested("resourceTemplates", _RESOURCE_TEMPLATE, EACH),)
    ),
    "resources/read": Shape((_META,), (Nested("contents", _RESOURCE_CONTENTS, EACH),)),
    "resources/subscribe": _EMPTY,
    "resources/unsubscribe": _EMPTY,
    "prompts/list": Shape(_PAGE, (Nested("prompts", _PROMPT, EACH),)),
    "prompts/get": Shape(
        (may("description"), _META),
        (
            Nested(
                "messages",
                Shape((req("role", STRING, _ROLES),), (Nested("content", _CONTENT_BLOCK),)),
                EACH,
            ),
        ),
    ),
    "completion/complete": Shape(
        (_META,),
        (
            Nested(
                "completion",
                Shape(
                    (
                        req("values", ARRAY_OF_STRINGS),
                        may("total", LAX_INTEGER),
                        may("hasMore", LAX_BOOLEAN),
                    )
                ),
            ),
        ),
    ),
    "logging/setLevel": _EMPTY,
}


def _params(*fields: Field, nested: tuple[Nested, ...] = ()) -> Shape:
    """A message whose ``params`` the client requires, with these fields (and ``_meta``)."""
    return Shape(nested=(Nested("params", Shape((*fields, _META), nested)),))


#: An elicitation's params: a URL to open, or a form (whose ``mode`` may be left out).
_ELICITATION: Final = Shape(
    alternatives=(
        Shape((req("elicitationId"), req("url"), req("mode", STRING, ("url",)), req("message"))),
        Shape(
            (req("message"), opt("mode", STRING, ("form",))),  # defaults to "form", never null
            (
                Nested(
                    "requestedSchema",
                    Shape(
                        (
                            req("type", STRING, ("object",)),
                            req("properties", OBJECT),
                            may("required", ARRAY_OF_STRINGS),
                            may("$schema"),
                        )
                    ),
                ),
            ),
        ),
    )
)
_SAMPLING_MESSAGE: Final = Shape(
    (req("role", STRING, _ROLES), _META), (Nested("content", _SAMPLING_BLOCK, ONE_OR_EACH),)
)

#: The shape of a server-to-client request or notification, by its method: the ones whose
#: ``params`` the client requires (it answers a server request it cannot read with an
#: error, and drops a notification it cannot read). The methods whose params are optional
#: (``ping``, ``roots/list``, the ``list_changed`` notifications) are not here.
PARAMS_SHAPES: Final[dict[str, Shape]] = {
    "sampling/createMessage": _params(
        req("maxTokens", LAX_INTEGER),
        may("systemPrompt"),
        may("includeContext", STRING, ("allServers", "none", "thisServer")),
        may("temperature", LAX_NUMBER),
        may("stopSequences", ARRAY_OF_STRINGS),
        may("metadata", OBJECT),
        may("tools", ARRAY),
        may("toolChoice", OBJECT),
        nested=(
            Nested("messages", _SAMPLING_MESSAGE, EACH),
            may_hold(
                "modelPreferences",
                Shape(
                    (
                        may("costPriority", LAX_FRACTION),
                        may("speedPriority", LAX_FRACTION),
                        may("intelligencePriority", LAX_FRACTION),
                    ),
                    (may_hold("hints", Shape((may("name"),)), EACH),),
                ),
            ),
        ),
    ),
    "elicitation/create": Shape(nested=(Nested("params", _ELICITATION),)),
    "notifications/progress": _params(
        req("progressToken", LAX_STRING_OR_INTEGER),
        req("progress", LAX_NUMBER),
        may("total", LAX_NUMBER),
        may("message"),
    ),
    "notifications/message": _params(
        req("level", STRING, _LOG_LEVELS), req("data", ANY_VALUE), may("logger")
    ),
    "notifications/resources/updated": _params(req("uri")),
    # A RequestId: a string or a strict int in the SDK (3.0 and true are refused).
    "notifications/cancelled": _params(may("requestId", STRING_OR_EXACT_INTEGER), may("reason")),
    "notifications/elicitation/complete": _params(req("elicitationId")),
}


def _shown_id(value: object) -> str:
    """An id as a message may show it: its JSON type, size and hash, never the id."""
    if type(value) is str:
        return f"string id {_wire.describe(value)}"
    key = jsonrpc_id_key(value)
    shown = _wire.describe(key) if type(key) is bytes else _wire.describe(repr(key))
    return f"number id {shown}"


class MCPChecker(Checker):
    """Checks one MCP Streamable HTTP event stream; see the module docstring."""

    __slots__ = (
        "_answered",
        "_batch",
        "_event_ids",
        "_invalid_ids",
        "_last_event_key",
        "_methods",
        "_owed",
        "_requests",
        "_standalone",
        "_unread",
        "_where",
    )

    name = "mcp"
    LIFECYCLE = LIFECYCLE
    RAISES = frozenset(
        {
            rules.INVALID_JSON,
            rules.INVALID_JSONRPC,
            rules.SCHEMA_MISMATCH,
            rules.DUPLICATE_RESPONSE,  # within a batch; else the table's
            rules.UNREQUESTED_RESPONSE,
            rules.RESPONSE_ON_STANDALONE_STREAM,
            rules.DUPLICATE_EVENT_ID,
        }
    )
    SKIPS = frozenset({REQUEST_IDS_OVER_BOUND, RESUMED_STREAM, REQUEST_BODY_UNREAD})

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        method: object = None
        ids: object = None
        invalid: object = None
        unread: object = None
        resuming = False
        if request is not None:
            method = request.get("http_method")
            ids = request.get("jsonrpc_ids")
            invalid = request.get("jsonrpc_invalid_ids")
            unread = request.get("jsonrpc_requests_unread")
            resuming = request.get("last_event_id") is True
        #: A GET that does not resume: no response belongs on it.
        self._standalone = method == "GET" and not resuming
        #: Owed request id -> how many responses it is still owed (a batch may repeat an
        #: id); None when what is owed is unknown.
        self._owed: dict[IdKey, int] | None = None
        #: How many requests the POST carried whose ids were read (for the end's message).
        self._requests = 0
        #: How many requests followed the ones read: their answers cannot be matched.
        self._unread = 0
        #: The types of the request ids that are no JSON-RPC id, until they are reported.
        self._invalid_ids: tuple[str, ...] = ()
        #: Owed request id -> the method it called, for the ids whose method has a result
        #: shape (``RESULT_SHAPES``); None when there are none.
        self._methods: dict[IdKey, str] | None = None
        if method != "GET" and type(ids) is tuple:
            owed: dict[IdKey, int] = {}
            for key in ids:
                owed[key] = owed.get(key, 0) + 1
            self._owed = owed
            if type(request) is RequestFacts:
                self._methods = _methods_by_id(ids, request.jsonrpc_methods)
            self._requests = len(ids)
            if type(unread) is int and unread > 0:
                self._unread = unread
            if type(invalid) is tuple and invalid:
                self._invalid_ids = tuple(str(name) for name in invalid)
        if not self._owed:
            # Nothing is owed: the request decides the phase the stream starts in.
            self.phase = _OPEN
        #: Ids already answered in this stream, at most MAX_REQUEST_IDS of them.
        self._answered: set[IdKey] | None = None
        #: The event ids seen, and the key of the one in effect at the last event.
        self._event_ids: set[str | bytes] | None = None
        self._last_event_key: str | bytes | None = None
        #: The messages of the batch event being checked and their routes, from
        #: ``classify`` (which matched them) to the batch's handler.
        self._batch: Sequence[tuple[Any, Route]] = ()
        #: Where the message being checked sits, as its findings say: "" for a message
        #: alone in its event, `` (batch item N)`` in a batch.
        self._where = ""

    def message_fields(self) -> Mapping[str, object]:
        owed = self._owed
        left = sum(owed.values()) if owed else 0
        if self._unread:  # the requests not read may be unanswered too
            return {"owed": f"at least {left}", "requests": self._requests + self._unread}
        return {"owed": left, "requests": self._requests}

    def checks_skipped(self) -> Sequence[tuple[str, str]]:
        skipped: list[tuple[str, str]] = []
        if self._unread:
            skipped.append(
                (
                    REQUEST_IDS_OVER_BOUND,
                    f"the POST carried {MAX_REQUEST_IDS + self._unread} JSON-RPC requests and "
                    f"only the first {MAX_REQUEST_IDS} were read: the answers to the other "
                    f"{self._unread} "
                    "were not matched (unrequested_response, duplicate_response and the "
                    "terminal response went unchecked; missing_terminal covers the ones read)",
                )
            )
        request = self.request
        if request is None:
            return skipped  # offline, without a request: nothing was promised
        method = request.get("http_method")
        if method == "GET" and request.get("last_event_id") is True:
            skipped.append(
                (
                    RESUMED_STREAM,
                    "a GET that resumes with Last-Event-ID may replay the responses of an "
                    "earlier stream: response_on_standalone_stream went unchecked",
                )
            )
        elif method == "POST" and type(request) is RequestFacts and not request.body_read:
            skipped.append(
                (
                    REQUEST_BODY_UNREAD,
                    "the POST's body was not read, so what it owes is unknown: "
                    "missing_terminal and the response checks (unrequested_response, "
                    "duplicate_response, the terminal response) went unchecked",
                )
            )
        return skipped

    # -- one event ------------------------------------------------------------------------

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # MCP's two steps: an event that carries an SSE id while answers are owed first takes
        # CURSOR (waiting -> resumable, never a finding), here; then its message's step,
        # whose kind is what matching the message to the POST's owed ids says (the answer to
        # the last one is the terminal). So the route is the match's outcome, found here
        # (a batch's messages are matched one by one), and the handlers report after the
        # step: the lifecycle's findings come first, the event id's last.
        if self._invalid_ids:
            found.items.append(self._invalid_request_ids())
        if event.id and self.phase == _WAITING:
            found.step(CURSOR)
        found.payload = NO_PAYLOAD
        if event.event != _MESSAGE:
            if event.event == ENDPOINT_EVENT:
                # The legacy transport's GET stream: the responses to POSTs come on it.
                self._standalone = False
            found.name = "a skipped event"
            return _SKIPPED
        if not event.data:
            found.name = "empty data"
            return _SKIPPED
        problems: list[Finding] = []  # invalid_json, placed after the step
        value = self.parse_value(event, found.index, problems)
        if type(value) is dict:
            found.payload = value
            route = self._route(value, False)
            if route is _REPEAT:
                found.name = f"a second response to the request with {_shown_id(value['id'])}"
            else:
                found.name = route.name or ""
            return route
        if type(value) is list:
            found.name = "a batch"
            return self._batch_route(value)
        # Settled here: data that is not JSON, or JSON that is no message or batch.
        if problems:
            found.step(OTHER, "not JSON")
            found.items.extend(problems)
        else:
            found.step(OTHER, "not JSON-RPC")
            problem = f"data is a JSON {type_name(value)}, not a JSON-RPC message or batch"
            found.add(rules.INVALID_JSONRPC, f": {problem}")
        self._check_event_id(found)
        return None

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        if self._invalid_ids:  # a body without events: the request is still reported
            return (self._invalid_request_ids(),)
        return NO_FINDINGS

    def _invalid_request_ids(self) -> Finding:
        """The finding on the request ids that are no JSON-RPC id, made once, before the
        first event's (it precedes the body: no event index)."""
        types, self._invalid_ids = self._invalid_ids, ()
        shown = " or a ".join(sorted(set(types)))
        if len(types) == 1:
            what = f"a request of the POST has an `id` that is a {shown}"
        else:
            what = f"{len(types)} requests of the POST have an `id` that is a {shown}"
        null = " (MCP forbids a null id)" if "null" in types else ""
        return rules.INVALID_JSONRPC.finding(
            f"request: {what}, not a string or a number{null}; a server answers such a "
            "request with an Invalid Request error (the official SDK with HTTP 400), not a "
            "stream, and no response can be matched to it"
        )

    def _route(self, message: dict[str, Any], in_batch: bool) -> Route:
        """The route of one message: a request's or a notification's, else by what the
        response answers (``in_batch``: a message of a batch, whose handler reports a
        repeat, where the lifecycle reports one alone)."""
        if "method" in message:
            return _REQUEST if "id" in message else _NOTIFICATION
        if "result" not in message and "error" not in message:
            return _NO_MESSAGE
        key = jsonrpc_id_key(message.get("id"))
        if key is None:
            return _RESPONSE  # answers nothing (or its id is invalid_jsonrpc)
        if self._standalone:
            return _STANDALONE
        owed = self._owed
        if owed is not None:
            left = owed.get(key)
            if left is not None:
                if left > 1:
                    owed[key] = left - 1
                else:
                    del owed[key]
                self._remember(key)
                if owed:
                    return _ANSWER
                if self._unread:
                    return _LAST_READ  # the requests not read may still be answered
                return _ERROR_ANSWER if "error" in message and "result" not in message else _LAST
            if self._unread:
                # It may answer a request that was not read, or repeat one whose id a
                # request not read repeats: neither rule can be judged.
                return _RESPONSE
        answered = self._answered
        if answered is not None and key in answered:
            return _REPEATED_IN_BATCH if in_batch else _REPEAT
        if owed is not None:
            return _UNREQUESTED
        self._remember(key)
        return _RESPONSE

    def _batch_route(self, batch: list[Any]) -> Route:
        """A 2025-03-26 batch: each message (the first ``MAX_BATCH_ITEMS``) matched, for the
        handler to check; the batch takes the weightiest of its messages' kinds."""
        if not batch:
            return _EMPTY_BATCH
        routes = [
            (message, self._route(message, True) if type(message) is dict else _NO_OBJECT)
            for message in islice(batch, MAX_BATCH_ITEMS)
        ]
        self._batch = routes
        kinds = {route.kind for _, route in routes}
        for kind in _BATCH_KINDS:
            if kind in kinds:
                return _BATCHES[kind]
        return _BATCHES[OTHER]

    # -- the handlers: each message's checks, after its step -------------------------------

    def _on_message(self, message: dict[str, Any], found: EventFindings) -> None:
        """A message whose only check is its JSON-RPC shape."""
        self._invalid(message, found)
        self._check_event_id(found)

    def _on_request(self, message: dict[str, Any], found: EventFindings) -> None:
        """A server request or a notification: its params, by its method."""
        if self._invalid(message, found) is None:  # one mistake, one finding
            shape = PARAMS_SHAPES.get(message["method"])
            if shape is not None:
                self._check_shape(found, message, shape, "", message["method"])
        self._check_event_id(found)

    def _on_answer(self, message: dict[str, Any], found: EventFindings) -> None:
        """The answer to an owed request: its result, by the method the request called."""
        methods = self._methods
        if self._invalid(message, found) is None and methods is not None and "result" in message:
            key = jsonrpc_id_key(message["id"])
            method = None if key is None else methods.get(key)
            if method is not None:
                shape = RESULT_SHAPES[method]
                self._check_shape(
                    found, message["result"], shape, "result", f"the result of {method}"
                )
        self._check_event_id(found)

    def _on_standalone(self, message: dict[str, Any], found: EventFindings) -> None:
        self._invalid(message, found)
        found.add(
            rules.RESPONSE_ON_STANDALONE_STREAM,
            f"{self._where}: a response ({_shown_id(message['id'])}) on a GET stream that "
            "resumes nothing; a response belongs on the stream of the POST that asked",
        )
        self._check_event_id(found)

    def _on_unrequested(self, message: dict[str, Any], found: EventFindings) -> None:
        self._invalid(message, found)
        found.add(
            rules.UNREQUESTED_RESPONSE,
            f"{self._where}: a response to {_shown_id(message['id'])}, which no request of "
            "this POST carried",
        )
        self._check_event_id(found)

    def _on_repeated_in_batch(self, message: dict[str, Any], found: EventFindings) -> None:
        self._invalid(message, found)
        found.add(
            rules.DUPLICATE_RESPONSE,
            f"{self._where}: a second response to the request with "
            f"{_shown_id(message['id'])}; the client settled that call at the first",
        )

    def _on_no_object(self, item: object, found: EventFindings) -> None:
        """A batch item that is not an object."""
        found.add(rules.INVALID_JSONRPC, f"{self._where}: a JSON {type_name(item)}, not a message")

    def _on_skipped(self, payload: dict[str, Any], found: EventFindings) -> None:
        self._check_event_id(found)

    def _on_empty_batch(self, payload: dict[str, Any], found: EventFindings) -> None:
        found.add(rules.INVALID_JSONRPC, ": an empty batch array")
        self._check_event_id(found)

    def _on_batch(self, payload: dict[str, Any], found: EventFindings) -> None:
        """Each message of the batch, by the route it was matched to; each rule reported
        once, with a count."""
        routes, self._batch = self._batch, ()
        items = EventFindings(self, found.event, found.index)
        try:
            for number, (message, route) in enumerate(routes):
                handler = route.handler
                if handler is not None:
                    self._where = f" (batch item {number})"
                    handler(self, message, items)
        finally:
            self._where = ""
        found.items.extend(_folded(items.items))
        self._check_event_id(found)

    def _invalid(self, message: dict[str, Any], found: EventFindings) -> str | None:
        """What makes the message invalid JSON-RPC (``invalid_jsonrpc``), or None."""
        problem = jsonrpc_problem(message)
        if problem is not None:
            found.add(rules.INVALID_JSONRPC, f"{self._where}: {problem}")
        return problem

    def _check_shape(
        self,
        found: EventFindings,
        payload: dict[str, Any],
        shape: Shape,
        path: str,
        what: str,
    ) -> None:
        """A ``schema_mismatch`` when ``payload`` (a response's ``result``, or a request's or
        notification's message) does not fit the shape its method's client model enforces.
        ``what`` names the method by a key of the shape tables (a known token, never the
        wire's string); ``path`` is where ``payload`` sits in the message."""
        problem = nested_problem(payload, shape, path)
        if problem is not None:
            found.add(
                rules.SCHEMA_MISMATCH,
                f"{self._where} ({what}): {problem}; the mcp client's model rejects it",
            )

    def _remember(self, key: IdKey) -> None:
        answered = self._answered
        if answered is None:
            answered = self._answered = set()
        if len(answered) < MAX_REQUEST_IDS:
            answered.add(key)

    def _check_event_id(self, found: EventFindings) -> None:
        """The event's SSE id, after its messages' checks (a batch's messages leave it to
        the batch): an id in effect that returns to a value it had before another one."""
        value = found.event.id
        if not value or self._where:
            return
        key = id_key(value)
        if key == self._last_event_key:
            return  # the same cursor: repeated, or carried over from the last event
        self._last_event_key = key
        seen = self._event_ids
        if seen is None:
            seen = self._event_ids = set()
        if key not in seen:
            if len(seen) < MAX_EVENT_IDS:
                seen.add(key)
            return
        if self.reported(rules.DUPLICATE_EVENT_ID):
            return
        found.add(
            rules.DUPLICATE_EVENT_ID,
            f": event id {_wire.describe(value)} was an earlier event's; a client that resumes "
            "from it with Last-Event-ID is replayed from the wrong place",
        )


_C = MCPChecker
#: What a message alone in its event is, by what it is and, for a response, by what
#: ``_route`` matched it to: its lifecycle kind, its handler and how step messages name it.
_REQUEST: Final = Route(OTHER, _C._on_request, name="a request")
_NOTIFICATION: Final = Route(OTHER, _C._on_request, name="a notification")
_NO_MESSAGE: Final = Route(OTHER, _C._on_message, name="not a JSON-RPC message")
#: A response that answers nothing, may answer a request not read, or answers a request of
#: a stream where nothing is known to be owed.
_RESPONSE: Final = Route(RESPONSE, _C._on_message, name="a response")
#: The answer to an owed request: others still owed, the last one read (more were not
#: read), the last one (the terminal), the last one as a JSON-RPC error (the in-band error).
_ANSWER: Final = Route(RESPONSE, _C._on_answer, name="a response")
_LAST_READ: Final = Route(LAST_READ, _C._on_answer, name="a response")
_LAST: Final = Route(TERMINAL, _C._on_answer, name="a response")
_ERROR_ANSWER: Final = Route(ERROR, _C._on_answer, name="a response")
#: A second answer to one id: alone, the lifecycle's finding (named by the id); in a batch,
#: the handler's.
_REPEAT: Final = Route(REPEAT, _C._on_message)
_REPEATED_IN_BATCH: Final = Route(RESPONSE, _C._on_repeated_in_batch, name="a response")
_STANDALONE: Final = Route(RESPONSE, _C._on_standalone, name="a response")
_UNREQUESTED: Final = Route(RESPONSE, _C._on_unrequested, name="a response")
#: A batch item that is not an object (a batch's only).
_NO_OBJECT: Final = Route(OTHER, _C._on_no_object)
#: An event the clients skip (named by ``classify``: by its name, or its empty data).
_SKIPPED: Final = Route(SKIPPED, _C._on_skipped)
_EMPTY_BATCH: Final = Route(OTHER, _C._on_empty_batch, name="a batch")
#: A batch's step is the first of these kinds among its messages' (``OTHER`` if none).
_BATCH_KINDS: Final = (TERMINAL, ERROR, LAST_READ, OTHER, RESPONSE)
_BATCHES: Final = {kind: Route(kind, _C._on_batch, name="a batch") for kind in _BATCH_KINDS}
_C.ROUTES = {
    "request": _REQUEST,
    "notification": _NOTIFICATION,
    "no message": _NO_MESSAGE,
    "response": _RESPONSE,
    "answer": _ANSWER,
    "last answer read": _LAST_READ,
    "last answer": _LAST,
    "error answer": _ERROR_ANSWER,
    "repeat": _REPEAT,
    "repeat in a batch": _REPEATED_IN_BATCH,
    "response on a standalone stream": _STANDALONE,
    "unrequested response": _UNREQUESTED,
    "not an object": _NO_OBJECT,
    "skipped": _SKIPPED,
    "empty batch": _EMPTY_BATCH,
    **{f"batch ({kind})": route for kind, route in _BATCHES.items()},
}


def _methods_by_id(
    ids: tuple[IdKey, ...], methods: tuple[str, ...] | None
) -> dict[IdKey, str] | None:
    """Each request id whose method has a result shape, and that method; None when no id
    has one. An id that two requests of a batch share with different methods is left out:
    which of them an answer is for cannot be told."""
    if methods is None or len(methods) != len(ids):
        return None
    known: dict[IdKey, str] = {}
    ambiguous: set[IdKey] = set()
    for key, method in zip(ids, methods, strict=True):
        if key in ambiguous:
            continue
        if method not in RESULT_SHAPES or known.get(key, method) != method:
            known.pop(key, None)
            ambiguous.add(key)
            continue
        known[key] = method
    return known or None


def _folded(items: list[Finding]) -> list[Finding]:
    """The first finding of each rule among ``items`` (one batch event), with a count of
    the others in its message: a batch of many messages makes a bounded number."""
    counts: dict[str, int] = {}
    for finding in items:
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    first: list[Finding] = []
    for finding in items:
        count = counts.pop(finding.rule, 0)
        if count:
            more = f" (and {count - 1} more in this batch)" if count > 1 else ""
            first.append(replace(finding, message=finding.message + more) if more else finding)
    return first


# -- auto-detection --------------------------------------------------------------------------


def is_jsonrpc_message(payload: object) -> bool:
    """Whether parsed data is a JSON-RPC 2.0 message, or a batch that starts with one."""
    if type(payload) is list and payload:
        payload = payload[0]
    return type(payload) is dict and payload.get("jsonrpc") == "2.0"


def is_endpoint_event(event: Event) -> bool:
    """Whether an event is the legacy HTTP+SSE transport's ``endpoint`` event: the URL (or
    path) the client is to POST its messages to."""
    return event.event == ENDPOINT_EVENT and event.data.startswith(("/", "http://", "https://"))


def _is_endpoint(event: Event, payload: object) -> bool:
    return is_endpoint_event(event)


def _is_jsonrpc(event: Event, payload: object) -> bool:
    return is_jsonrpc_message(payload)


SPEC: ProtocolSpec = ProtocolSpec(
    name=MCPChecker.name,
    checker=MCPChecker,
    summary="MCP's Streamable HTTP (and legacy HTTP+SSE) transport: JSON-RPC 2.0 messages",
    paths=(Signal(50, lambda path: path.endswith(_DEFAULT_PATH)),),
    events=(Signal(20, _is_endpoint), Signal(40, _is_jsonrpc)),
    event_names=frozenset({ENDPOINT_EVENT}),
    reads_request_head=True,
    request_facts=(REQUEST_IDS,),
)
