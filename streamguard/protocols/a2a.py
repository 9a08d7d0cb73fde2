# ruff: noqa: E501 -- the wire examples in the rule docs are single long lines, as on the wire
"""A2A (Agent2Agent) streaming over JSON-RPC 2.0: ``message/stream`` and ``tasks/resubscribe``
(A2A 0.3), ``SendStreamingMessage`` and ``SubscribeToTask`` (A2A 1.0). The official Python
SDK (``a2a-sdk``) serves both from Starlette, through sse-starlette (CR LF framing).

Every event's data is one JSON-RPC response carrying the request's id. Its ``result`` is a
task, a message, a task status update or an artifact update: in 0.3 told by ``kind``
(``task``, ``message``, ``status-update``, ``artifact-update``, camelCase fields, states such
as ``working``), in 1.0 by the one member it holds (``task``, ``message``, ``statusUpdate``,
``artifactUpdate``, protobuf JSON: default values left out, states such as
``TASK_STATE_WORKING``). A typical stream: the task as submitted, ``working``, artifact
chunks (the first of each artifact starts it, later ones carry ``append: true``), then a
terminal state (``completed``, ``canceled``, ``failed``, ``rejected``) or an interrupted one
(``input-required``, ``auth-required``), after which the server ends the stream. A
message-only interaction is one ``message`` result. A JSON-RPC error response ends the
stream too (1.0 names its event ``error``).

The official client (``a2a-sdk`` 1.3, ``JsonRpcTransport``) skips events with empty data,
raises on data that is not JSON, on a response with neither ``result`` nor ``error``, and on
an error response (a domain error by its code); it reads the result leniently (1.0) or
validates it (0.3), and it reads until the stream ends, stopping early only at a message.

Theory of operation
-------------------

Each event is parsed once: ``invalid_json`` for data that is not a JSON object,
``invalid_jsonrpc`` for a message that is not a JSON-RPC 2.0 response (MCP's check, shared),
``schema_mismatch`` for a result of no known kind or without the fields its kind needs (0.3's
required fields; 1.0's types only, since protobuf JSON leaves defaults out; null where the
version's client reads it as left out is clean), with a value its version's client refuses
in the messages, artifacts and parts it holds (``_V1_HELD``, ``_V03_HELD``: a part's
``text`` that is no string fails both), with a state outside its version's set, or carried
by an SSE event named ``error`` (the client raises on every event so named). The lifecycle
kinds: ``settle`` (a status update or task in a terminal state), the terminal (an
interrupted state, ``final: true``, a message result), the in-band error (an error
response) and any other event. The route table (``ROUTES``) is the four results, each with
its handler (the checks across events below); ``classify`` finds the result and, by its
state, the route of a task or status update that ends the stream. After ``settle`` a status
that leaves the terminal state is ``terminal_state_left``; any other event after the end is
``event_after_terminal``, another terminal ``duplicate_terminal``; a body that ends first
``missing_terminal``.

Across events: the JSON-RPC id must be the request's (or, when the request is unknown, the
first event's): ``response_id_mismatch``. The task id and context id must stay those of the
stream's first task event: ``task_changed``. An artifact chunk with ``append: true`` must
continue an artifact this stream started (or the first task snapshot carried):
``artifact_not_started``; judged only once a task snapshot came, since a 0.3
resubscription starts with updates to artifacts it never showed.

The lifecycle is the table ``LIFECYCLE``, printed in ``docs/lifecycles.md`` (generated
from the table, so the page cannot drift from the machine).

Bounded state: the expected request id, one task id and context id (by ``id_key``: long ones
by a digest), at most ``MAX_ARTIFACTS`` artifact ids; artifacts of a task snapshot past that
bound are not read, and the set stops answering "not started" once it overflowed. Messages
name kinds, fields and documented states only; ids by size and hash.

Under ``protocol="auto"`` (``SPEC``): a path segment ``a2a``, or a first event whose
``result`` has the shape of one of the four kinds (a ``status`` or ``artifact`` object, or a
message's ``parts``), ranked before MCP's "any JSON-RPC 2.0 message": a JSON-RPC stream
whose first event shows no such result is left to MCP, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, Final

from streamguard import _wire, rules
from streamguard.protocols._entities import IdSet, id_key, shown
from streamguard.protocols._jsonrpc import REQUEST_IDS, IdKey, jsonrpc_id_key, jsonrpc_problem
from streamguard.protocols.engine import ANY as ANY_KIND
from streamguard.protocols.engine import (
    ARRAY,
    ARRAY_OF_STRINGS,
    BOOLEAN,
    EACH,
    END,
    ERROR,
    NO_PAYLOAD,
    NOT_JSON_DATA,
    OBJECT,
    OTHER,
    STAY,
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
    any_json,
    broken,
    go,
    may,
    may_hold,
    nested_problem,
    opt,
    req,
    shape_problem,
    terminated_lifecycle,
)
from streamguard.report import Severity
from streamguard.rule_docs._base import rule_doc
from streamguard.rules import Rule
from streamguard.sse import Event

__all__ = [
    "ARTIFACT_NOT_STARTED",
    "LIFECYCLE",
    "MAX_ARTIFACTS",
    "RESPONSE_ID_MISMATCH",
    "SPEC",
    "TASK_CHANGED",
    "TERMINAL_STATE_LEFT",
    "A2AChecker",
    "is_a2a_response",
]

#: Artifact ids kept per stream for ``artifact_not_started``.
MAX_ARTIFACTS = 256

RESPONSE_ID_MISMATCH = Rule(
    "response_id_mismatch",
    Severity.WARNING,
    "An A2A event's JSON-RPC id is not the request's; a client or gateway that matches "
    "responses by id drops or misroutes it.",
    once_per_stream=True,
)
TASK_CHANGED = Rule(
    "task_changed",
    Severity.ERROR,
    "An A2A event names another task or context than the stream's first; the client "
    "applies it to the wrong task.",
    once_per_stream=True,
)
ARTIFACT_NOT_STARTED = Rule(
    "artifact_not_started",
    Severity.ERROR,
    "An A2A artifact chunk appends to an artifact this stream never started; the SDK's task "
    "manager refuses it.",
)
TERMINAL_STATE_LEFT = Rule(
    "terminal_state_left",
    Severity.ERROR,
    "An A2A task moved out of the terminal state it reported (completed, canceled, failed, "
    "rejected).",
)

# -- the result kinds ----------------------------------------------------------------------

_TASK, _MESSAGE, _STATUS, _ARTIFACT = "task", "message", "status update", "artifact update"
#: 0.3's ``kind`` values, and 1.0's members, -> the kind.
_V03_KINDS: Final = {
    "task": _TASK,
    "message": _MESSAGE,
    "status-update": _STATUS,
    "artifact-update": _ARTIFACT,
}
_V1_MEMBERS: Final = {
    "task": _TASK,
    "message": _MESSAGE,
    "statusUpdate": _STATUS,
    "artifactUpdate": _ARTIFACT,
}
#: The field whose shape identifies each kind (and that detection looks for).
_MARK: Final = {_TASK: "status", _STATUS: "status", _ARTIFACT: "artifact", _MESSAGE: "parts"}

_V03_TERMINAL = frozenset({"completed", "canceled", "failed", "rejected"})
_V03_INTERRUPTED = frozenset({"input-required", "auth-required"})
_V03_STATES = _V03_TERMINAL | _V03_INTERRUPTED | {"submitted", "working", "unknown"}
_V1_TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_CANCELED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"}
)
_V1_INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
_V1_STATES = _V1_TERMINAL | _V1_INTERRUPTED | {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
_TERMINAL_STATES = _V03_TERMINAL | _V1_TERMINAL
_INTERRUPTED_STATES = _V03_INTERRUPTED | _V1_INTERRUPTED
#: The states a message may quote.
_STATES = _V03_STATES | _V1_STATES | {"TASK_STATE_UNSPECIFIED"}

#: Fields of each kind, per version: 0.3's pydantic models require them (and read null as
#: absent where they type a field ``X | None``); 1.0's protobuf JSON leaves defaults out and
#: reads null as absent, so only their types are checked.
_V03_SHAPES: Final[dict[str, tuple[Field, ...]]] = {
    _TASK: (req("id"), req("contextId"), req("status", OBJECT), may("artifacts", ARRAY)),
    _MESSAGE: (req("messageId"), req("role"), req("parts", ARRAY)),
    _STATUS: (req("taskId"), req("contextId"), req("status", OBJECT), req("final", BOOLEAN)),
    _ARTIFACT: (
        req("taskId"),
        req("contextId"),
        req("artifact", OBJECT),
        may("append", BOOLEAN),
        may("lastChunk", BOOLEAN),
    ),
}
_V1_SHAPES: Final[dict[str, tuple[Field, ...]]] = {
    _TASK: (may("id"), may("contextId"), req("status", OBJECT), may("artifacts", ARRAY)),
    _MESSAGE: (may("messageId"), may("role"), may("parts", ARRAY)),
    _STATUS: (may("taskId"), may("contextId"), req("status", OBJECT)),
    _ARTIFACT: (
        may("taskId"),
        may("contextId"),
        req("artifact", OBJECT),
        may("append", BOOLEAN),
        may("lastChunk", BOOLEAN),
    ),
}
#: An update's artifact, either version (0.3's required ``artifactId`` and ``parts``, never
#: null there, are ``_V03_HELD``'s).
_ARTIFACT_SHAPE: Final = (may("artifactId"), may("parts", ARRAY))


# What each kind holds, as each version's client reads it, beyond the fields above: the
# messages (a message result, a task's ``history``, a status's ``message``), the artifacts
# (an update's ``artifact``, a task's ``artifacts``) and their parts. A value the client
# refuses fails the stream (``schema_mismatch``); null stands for absent wherever the
# client reads it so.
#
# 1.0: protobuf JSON (``ParseDict``, unknown fields ignored): a string field takes a string
# only, a repeated one a list without nulls, ``metadata`` (a ``Struct``) an object only,
# ``timestamp`` a string (its RFC 3339 form is not checked), each of them null as absent;
# a part's ``data`` is any JSON value and ``raw`` is read leniently. Not declared: ``role``,
# an enum, which takes any scalar (an unknown name or number is ignored) and fails only on
# an object or a list, a kind the vocabulary lacks.
_V1_PART: Final = Shape(
    (may("text"), may("url"), may("filename"), may("mediaType"), may("metadata", OBJECT))
)
_V1_MESSAGE: Final = Shape(
    (
        may("messageId"),
        may("contextId"),
        may("taskId"),
        may("metadata", OBJECT),
        may("extensions", ARRAY_OF_STRINGS),
        may("referenceTaskIds", ARRAY_OF_STRINGS),
    ),
    (may_hold("parts", _V1_PART, EACH),),
)
_V1_ARTIFACT: Final = Shape(
    (
        may("artifactId"),
        may("name"),
        may("description"),
        may("metadata", OBJECT),
        may("extensions", ARRAY_OF_STRINGS),
    ),
    (may_hold("parts", _V1_PART, EACH),),
)
_V1_STATUS: Final = may_hold(
    "status", Shape((may("timestamp"),), (may_hold("message", _V1_MESSAGE),))
)
#: 0.3: pydantic models (lax), as ``CompatJsonRpcTransport`` validates each result. A part
#: is ``TextPart | FilePart | DataPart``, the first that fits (``kind`` may be left out): a
#: text a string, data an object, a file one with ``bytes`` or ``uri`` (the bytes' base64 is
#: decoded later, leniently, and not checked here).
_V03_METADATA: Final = may("metadata", OBJECT)
_V03_FILE: Final = Shape(
    alternatives=(
        Shape((req("bytes"), may("mimeType"), may("name"))),
        Shape((req("uri"), may("mimeType"), may("name"))),
    )
)
_V03_PART: Final = Shape(
    alternatives=(
        Shape((req("text"), opt("kind", values=("text",)), _V03_METADATA)),
        Shape((req("data", OBJECT), opt("kind", values=("data",)), _V03_METADATA)),
        Shape(
            (req("file", OBJECT), opt("kind", values=("file",)), _V03_METADATA),
            (may_hold("file", _V03_FILE),),
        ),
    )
)
_V03_MESSAGE: Final = Shape(
    (
        req("messageId"),
        req("role", values=("agent", "user")),
        opt("kind", values=("message",)),
        may("contextId"),
        may("taskId"),
        _V03_METADATA,
        may("extensions", ARRAY_OF_STRINGS),
        may("referenceTaskIds", ARRAY_OF_STRINGS),
    ),
    (Nested("parts", _V03_PART, EACH),),
)
_V03_ARTIFACT: Final = Shape(
    (
        req("artifactId"),
        may("name"),
        may("description"),
        _V03_METADATA,
        may("extensions", ARRAY_OF_STRINGS),
    ),
    (Nested("parts", _V03_PART, EACH),),
)
_V03_STATUS: Final = may_hold(
    "status", Shape((may("timestamp"),), (may_hold("message", _V03_MESSAGE),))
)
#: Kind -> what it holds, per version.
_V1_HELD: Final = {
    _TASK: Shape(
        (may("metadata", OBJECT),),
        (
            _V1_STATUS,
            may_hold("artifacts", _V1_ARTIFACT, EACH),
            may_hold("history", _V1_MESSAGE, EACH),
        ),
    ),
    _MESSAGE: _V1_MESSAGE,
    _STATUS: Shape((may("metadata", OBJECT),), (_V1_STATUS,)),
    _ARTIFACT: Shape((may("metadata", OBJECT),), (may_hold("artifact", _V1_ARTIFACT),)),
}
_V03_HELD: Final = {
    _TASK: Shape(
        (_V03_METADATA,),
        (
            _V03_STATUS,
            may_hold("artifacts", _V03_ARTIFACT, EACH),
            may_hold("history", _V03_MESSAGE, EACH),
        ),
    ),
    _MESSAGE: _V03_MESSAGE,
    _STATUS: Shape((_V03_METADATA,), (_V03_STATUS,)),
    _ARTIFACT: Shape((_V03_METADATA,), (may_hold("artifact", _V03_ARTIFACT),)),
}

# -- the lifecycle ---------------------------------------------------------------------

#: A status update or task in a terminal state: the stream's terminal signal.
SETTLE: Final = "settle"
#: After a terminal state: a status update or task in any other state.
REOPEN: Final = "reopen"
#: An event the client skips: empty data (a keepalive, a priming event).
SKIPPED: Final = "skipped"

_TERMINATED = terminated_lifecycle(
    terminal="a terminal or interrupted task state (or the message result)",
    after_error="follows the error response sent as event {error}",
    duplicate="ends the stream again (it ended at event {terminal})",
    after_terminal="follows the end of the stream at event {terminal}",
)
_STREAMING, _SETTLED = "streaming", "settled"
((_ENDED,), (_ERRORED,)) = (_TERMINATED.ended, _TERMINATED.errored)

LIFECYCLE: Final = Lifecycle(
    phases={
        _STREAMING: "task events arrive",
        _SETTLED: "the task reached a terminal state (completed, canceled, failed, rejected)",
        _ENDED: "the task reached an interrupted state (input or auth required), the status "
        "update said final, or the message result came",
        _ERRORED: "an error response arrived",
    },
    kinds={
        SETTLE: "a status update or task in a terminal state",
        REOPEN: "after a terminal state, a status update or task in another state",
        SKIPPED: "an event the client skips: empty data",
    },
    initial=_STREAMING,
    table={
        (_STREAMING, SETTLE): go(_SETTLED),
        (_STREAMING, REOPEN): STAY,
        **{(phase, SKIPPED): STAY for phase in (_STREAMING, _SETTLED, _ENDED, _ERRORED)},
        **{key: step for key, step in _TERMINATED.table.items() if key[0] == _STREAMING},
        (_SETTLED, SETTLE): _TERMINATED.table[_ENDED, TERMINAL],
        (_SETTLED, TERMINAL): _TERMINATED.table[_ENDED, TERMINAL],
        (_SETTLED, REOPEN): broken(
            TERMINAL_STATE_LEFT,
            "event {index} ({name}) moves the task out of the terminal state it reached at "
            "event {terminal}",
            checked=False,
        ),
        (_SETTLED, ANY_KIND): _TERMINATED.table[_ENDED, ANY_KIND],
        (_SETTLED, END): STAY,
        (_ENDED, SETTLE): _TERMINATED.table[_ENDED, TERMINAL],
        **{key: step for key, step in _TERMINATED.table.items() if key[0] != _STREAMING},
    },
    ended=frozenset({_SETTLED, _ENDED}),
    errored=_TERMINATED.errored,
    sealed=frozenset({_SETTLED, _ENDED, _ERRORED}),
)


def _result_kind(result: dict[str, Any]) -> tuple[str, dict[str, Any], bool] | None:
    """The kind of a result, the object that holds its fields and whether it is 0.3's; None
    when it is none of the four (the shape check says why)."""
    kind = result.get("kind")
    if type(kind) is str:
        known = _V03_KINDS.get(kind)
        return None if known is None else (known, result, True)
    if len(result) != 1:
        return None
    for member, value in result.items():
        known = _V1_MEMBERS.get(member)
        if known is not None and type(value) is dict:
            return known, value, False
    return None


def _state(body: Mapping[str, Any]) -> object:
    status = body.get("status")
    return status.get("state") if type(status) is dict else None


class A2AChecker(Checker):
    """Checks one A2A event stream; see the module docstring."""

    __slots__ = ("_artifacts", "_baseline", "_context", "_expected_id", "_task")

    name = "a2a"
    LIFECYCLE = LIFECYCLE
    RAISES = frozenset(
        {
            rules.INVALID_JSON,
            rules.INVALID_JSONRPC,
            rules.SCHEMA_MISMATCH,
            RESPONSE_ID_MISMATCH,
            TASK_CHANGED,
            ARTIFACT_NOT_STARTED,
        }
    )

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        expected: IdKey | None = None
        ids = None if request is None else request.get("jsonrpc_ids")
        if type(ids) is tuple and len(ids) == 1:
            expected = ids[0]
        #: The id every response must carry: the request's, else the first event's.
        self._expected_id: IdKey | None = expected
        #: The stream's task id and context id (kept keys), once a task event named them.
        self._task: str | bytes | None = None
        self._context: str | bytes | None = None
        #: Whether a task snapshot came: the artifacts it holds are the baseline that
        #: appends are judged against.
        self._baseline = False
        self._artifacts = IdSet(MAX_ARTIFACTS)

    # -- one event ------------------------------------------------------------------------

    def classify(self, event: Event, found: EventFindings) -> Route | None:
        # A2A's four results (a task, a message, a status update, an artifact update) are
        # told by 0.3's `kind` or by 1.0's one member, not by one type field, and a task's or
        # status update's lifecycle kind by its state. What every response gets (its
        # JSON-RPC shape, its id, its result's shape in its version) is judged here, before
        # the step, which makes no finding in the one phase whose events are checked.
        if not event.data:
            found.payload = NO_PAYLOAD
            found.name = "empty data"
            return _SKIPPED  # the client skips it
        message = self.parse_object(event, found.index, found.items, expected="a JSON-RPC response")
        if message is None:
            found.step(OTHER, "not JSON")
            return None
        problem = jsonrpc_problem(message)
        if problem is None and "method" in message:
            problem = "a request or notification, where the client reads only responses"
        if problem is not None:
            found.add(rules.INVALID_JSONRPC, f": {problem}")
        self._check_id(found, message)
        route, name, _state_value, result = _routed(message)
        found.name = name
        if result is None:
            found.payload = NO_PAYLOAD
            if route is _UNKNOWN_RESULT:
                found.add(
                    rules.SCHEMA_MISMATCH,
                    ": the result is neither a task, a message, a status update nor an "
                    "artifact update (0.3's `kind`, or one 1.0 member)",
                )
            return route
        kind, body, v03 = result
        found.payload = body
        problem = shape_problem(body, (_V03_SHAPES if v03 else _V1_SHAPES)[kind])
        if problem is None and kind in (_TASK, _STATUS):
            problem = self._state_problem(body, v03)
        if problem is None and kind == _ARTIFACT:
            problem = shape_problem(body["artifact"], _ARTIFACT_SHAPE)
            if problem is not None:
                problem = problem.replace("field `", "field `artifact.", 1)
        if problem is None:
            problem = nested_problem(body, (_V03_HELD if v03 else _V1_HELD)[kind])
        if problem is None and event.event == "error":
            # Both transports hand every event named `error` to their error handler, which
            # raises: the result's domain error if the data holds one, else A2AClientError.
            problem = (
                "the SSE event is named `error` but carries a result, not an error "
                "response; the client reads every event so named as an error and fails"
            )
        if problem is not None:
            version = "0.3" if v03 else "1.0"
            found.add(rules.SCHEMA_MISMATCH, f" (a {version} {kind}): {problem}")
        return route

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        """After the end: what the event is, judged without reporting anything."""
        data = event.data
        if not data:
            return SKIPPED, "empty data"
        message = any_json(data)
        if message is NOT_JSON_DATA:
            return OTHER, "not JSON"
        if type(message) is not dict:
            return OTHER, "not JSON-RPC"
        route, name, state, _result = _routed(message)
        kind = route.kind
        if self.phase == _SETTLED and state is not None and kind != SETTLE:
            return REOPEN, name
        return kind, name

    def _on_task(self, body: dict[str, Any], found: EventFindings) -> None:
        self._check_task(found, body, _TASK)
        self._baseline = True
        self._keep_artifacts(body.get("artifacts"))

    def _on_status(self, body: dict[str, Any], found: EventFindings) -> None:
        self._check_task(found, body, _STATUS)

    def _on_artifact(self, body: dict[str, Any], found: EventFindings) -> None:
        self._check_task(found, body, _ARTIFACT)
        self._check_artifact(found, body)

    def _check_id(self, found: EventFindings, message: Mapping[str, Any]) -> None:
        if "id" not in message or message["id"] is None:
            return  # no id: an error that answers nothing (or the shape check says so)
        key = jsonrpc_id_key(message["id"])
        if key is None:
            return  # not an id: invalid_jsonrpc already
        expected = self._expected_id
        if expected is None:
            self._expected_id = key
        elif key != expected and not self.reported(RESPONSE_ID_MISMATCH):
            found.add(
                RESPONSE_ID_MISMATCH,
                ": the response's JSON-RPC id is not the request's (the stream's first "
                "event's when the request is unknown); every event answers the one request",
            )

    @staticmethod
    def _state_problem(body: Mapping[str, Any], v03: bool) -> str | None:
        state = _state(body)
        if state is None:
            # 1.0 leaves out TASK_STATE_UNSPECIFIED (0); 0.3 requires the state.
            return "field `status.state` is missing" if v03 else None
        allowed = _V03_STATES if v03 else _V1_STATES
        if type(state) is str and state in allowed:
            return None
        return f"field `status.state` is {_wire.token(state, ())}, not a state of its version"

    def _check_task(self, found: EventFindings, body: Mapping[str, Any], kind: str) -> None:
        task_id = body.get("id" if kind == _TASK else "taskId")
        context_id = body.get("contextId")
        changed: list[str] = []
        if type(task_id) is str and task_id:
            key = id_key(task_id)
            if self._task is None:
                self._task = key
            elif key != self._task:
                changed.append(f"task id {shown(task_id)}")
        if type(context_id) is str and context_id:
            key = id_key(context_id)
            if self._context is None:
                self._context = key
            elif key != self._context:
                changed.append(f"context id {shown(context_id)}")
        if changed:
            found.add(
                TASK_CHANGED,
                f" (a {kind}) names {' and '.join(changed)}, not the stream's first; the "
                "client applies it to the task it holds",
            )

    def _keep_artifacts(self, artifacts: object) -> None:
        if type(artifacts) is not list:
            return
        for artifact in islice(artifacts, MAX_ARTIFACTS + 1):
            artifact_id = artifact.get("artifactId") if type(artifact) is dict else None
            if type(artifact_id) is str:
                self._artifacts.add(id_key(artifact_id))

    def _check_artifact(self, found: EventFindings, body: Mapping[str, Any]) -> None:
        artifact = body.get("artifact")
        artifact_id = artifact.get("artifactId") if type(artifact) is dict else None
        if type(artifact_id) is not str:
            return
        key = id_key(artifact_id)
        if body.get("append") is True and self._baseline and self._artifacts.known(key) is False:
            found.add(
                ARTIFACT_NOT_STARTED,
                f" (an artifact update) appends to artifact {shown(artifact_id)}, which this "
                "stream never started; the client has nothing to append it to",
            )
        self._artifacts.add(key)


_C = A2AChecker
#: The four results, each with its handler (what the stream's task and artifacts must
#: agree with) and the lifecycle kind it takes when its state ends nothing.
_C.ROUTES = {
    _TASK: Route(OTHER, _C._on_task),
    _MESSAGE: Route(TERMINAL),  # the message result ends the interaction
    _STATUS: Route(OTHER, _C._on_status),
    _ARTIFACT: Route(OTHER, _C._on_artifact),
}
#: A task or status update whose state ends the stream: its route by the kind it takes
#: (a terminal state settles it; an interrupted state, or 0.3's ``final``, ends it).
_ENDING: Final = {
    (kind, step): Route(step, _C.ROUTES[kind].handler)
    for kind in (_TASK, _STATUS)
    for step in (SETTLE, TERMINAL)
}
#: An error response (the in-band error), a response whose result is no object (or a
#: request, which the client does not read), a result of no known kind, empty data.
_ERROR_RESPONSE: Final = Route(ERROR)
_NO_RESULT: Final = Route(OTHER)
_UNKNOWN_RESULT: Final = Route(OTHER)
_SKIPPED: Final = Route(SKIPPED)


def _routed(
    message: Mapping[str, Any],
) -> tuple[Route, str, object, tuple[str, dict[str, Any], bool] | None]:
    """A response's route, how a message names it, the task state it carries (None: none)
    and, for one of the four results, ``_result_kind``'s answer (whose object the handler
    gets)."""
    if "error" in message and "result" not in message:
        return _ERROR_RESPONSE, "an error response", None, None
    result = message.get("result")
    if type(result) is not dict:
        return _NO_RESULT, "not a result", None, None
    known = _result_kind(result)
    if known is None:
        return _UNKNOWN_RESULT, "an unknown result", None, None
    kind, body, v03 = known
    route = A2AChecker.ROUTES[kind]
    if kind == _MESSAGE:
        return route, "a message", None, known
    if kind == _ARTIFACT:
        return route, "an artifact update", None, known
    state = _state(body)
    shown_state = _wire.token(state, _STATES) if state is not None else "no state"
    name = f"a {kind} ({shown_state})"
    if type(state) is str and state in _TERMINAL_STATES:
        return _ENDING[kind, SETTLE], name, state, known
    if type(state) is str and state in _INTERRUPTED_STATES:
        return _ENDING[kind, TERMINAL], name, state, known
    if v03 and kind == _STATUS and body.get("final") is True:
        return _ENDING[kind, TERMINAL], name + " marked final", state, known
    return route, name, state, known


# -- auto-detection ----------------------------------------------------------------------


def is_a2a_response(payload: object) -> bool:
    """Whether parsed data is a JSON-RPC 2.0 response whose result has the shape of an A2A
    task, message, status update or artifact update (by 0.3's ``kind`` or 1.0's member, and
    the field that marks the kind: a ``status`` or ``artifact`` object, a message's
    ``parts``). MCP results have none of them (an MCP task's ``status`` is a string)."""
    if type(payload) is not dict or payload.get("jsonrpc") != "2.0":
        return False
    result = payload.get("result")
    if type(result) is not dict:
        return False
    known = _result_kind(result)
    if known is None:
        return False
    kind, body, _ = known
    mark = body.get(_MARK[kind])
    if kind == _MESSAGE:
        return type(mark) is list
    return type(mark) is dict


def _is_a2a(event: Event, payload: object) -> bool:
    return is_a2a_response(payload)


def _named_in_path(path: str) -> bool:
    """A path segment ``a2a`` (A2A has no fixed path; the SDK's default is ``/``)."""
    return "a2a" in path.lower().split("/")


SPEC: ProtocolSpec = ProtocolSpec(
    name=A2AChecker.name,
    checker=A2AChecker,
    summary="A2A (Agent2Agent) JSON-RPC streams: task, status and artifact updates, 0.3 and 1.0",
    paths=(Signal(55, _named_in_path),),
    events=(Signal(35, _is_a2a),),
    rules=(RESPONSE_ID_MISMATCH, TASK_CHANGED, ARTIFACT_NOT_STARTED, TERMINAL_STATE_LEFT),
    request_facts=(REQUEST_IDS,),
    rule_docs=(
        rule_doc(
            "response_id_mismatch",
            meaning="""An event's JSON-RPC `id` differs from the request's (from the first
                event's when the request is unknown). Every event of an A2A stream is a
                response to the one `message/stream` or `SendStreamingMessage` request and
                carries its id. Reported once per stream.""",
            clients="""The Python SDK's client does not compare ids, but a JSON-RPC client or
                gateway that matches responses to requests by id (as JSON-RPC 2.0 has them)
                drops the event or hands it to another call.""",
            example="""
                data: {"jsonrpc":"2.0","id":"req-1","result":{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_WORKING"}}}}

                data: {"jsonrpc":"2.0","id":"req-2","result":{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_COMPLETED"}}}}
                """,
            fix="""Answer every event of the stream with the id of the request that opened it;
                a server that multiplexes several tasks onto one queue must keep each
                subscriber's request id.""",
        ),
        rule_doc(
            "task_changed",
            meaning="""A task, status update or artifact update names another task id (`id`
                of a task, `taskId` of an update) or another `contextId` than the stream's
                first task event did. A stream follows one task. Reported once per stream.""",
            clients="""Clients fold the stream into the one task they hold: an update of
                another task changes the wrong task's state or artifacts, and the A2A SDK's
                server refuses such an event from its own agent (the task id must match).""",
            example="""
                data: {"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"submitted"}}}

                data: {"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-2","contextId":"c-1","status":{"state":"working"},"final":false}}
                """,
            fix="""Send one task's events on its stream; an agent that starts another task
                answers with its own stream (or a message that names it).""",
        ),
        rule_doc(
            "artifact_not_started",
            meaning="""An artifact update with `append: true` names an artifact this stream
                never started: no earlier artifact update carried its `artifactId`, and no
                task snapshot of the stream holds it. Judged only once a task snapshot came
                (every 1.0 stream opens with one; a 0.3 resubscription does not).""",
            clients="""The A2A SDK's task manager (`append_artifact_to_task`, which servers and
                relays use to fold updates into a task) raises `InvalidAgentResponseError`
                on it; the SDK's client passes the chunk on, and code that builds the
                artifact from the chunks has nothing to append it to, so the artifact's
                start is lost.""",
            example="""
                data: {"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-1","contextId":"c-1","status":{"state":"submitted"}}}

                data: {"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t-1","contextId":"c-1","artifact":{"artifactId":"a-1","parts":[{"kind":"text","text":"world"}]},"append":true}}
                """,
            fix="""Send each artifact's first chunk without `append` (or `append: false`),
                and keep its `artifactId` on the chunks that follow.""",
        ),
        rule_doc(
            "terminal_state_left",
            meaning="""After a status update (or task) in a terminal state (`completed`,
                `canceled`, `failed`, `rejected`), another one reports a state that is not
                terminal: the task left a state it can never leave.""",
            clients="""The client settled the task at the terminal state (the server ends
                the stream there, and the SDK's own TaskUpdater refuses any update after
                it); a later `working` revives a finished task in the client's view, or is
                ignored, and either way the two disagree about the task.""",
            example="""
                data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_COMPLETED"}}}}

                data: {"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t-1","status":{"state":"TASK_STATE_WORKING"}}}}
                """,
            fix="""End the stream at the terminal state; follow-up work is a new task (or a
                new message in the same context).""",
        ),
    ),
)
