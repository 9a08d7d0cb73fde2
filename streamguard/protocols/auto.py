"""How a stream that was not configured with a protocol (``protocol="auto"``) tells it.

A ``Detector`` decides for ``StreamMonitor``: it holds the undecided events (within the
bounds below), builds the chosen checker and replays the held events into it, once, in
order and with their own indices; from then on the monitor feeds that checker directly.
A detector makes no finding of its own, so it is no ``Checker``: after the decision
nothing of it stays on the per-event path. The signals are the protocols' own (each
spec's ``headers``, ``paths`` and ``events``, merged by rank in the registry,
``streamguard.protocols``). A stream is decided once, by the first signal that settles it:

1. the response headers (``protocol_source = "header"``): the AI SDK's UI message stream
   declares itself (``x-vercel-ai-ui-message-stream: v1``); no other built-in protocol does;
2. the request path (``protocol_source = "path"``), without its trailing slashes:
   ``…:streamGenerateContent`` → ``gemini``, ``…/chat/completions`` (OpenAI's and Azure's)
   → ``openai_chat``, ``/v1/responses`` → ``openai_responses``, ``…/v2/chat`` →
   ``cohere``, ``/v1/messages`` → ``anthropic``, ``…/runs/stream`` → ``langgraph``,
   ``…/mcp`` → ``mcp``, a segment ``a2a`` → ``a2a``, a segment such as ``ag-ui`` →
   ``ag_ui``, and last, the weakest, ``/api/chat`` → ``ai_sdk_ui``;
3. otherwise the first *decisive* event (``protocol_source = "event"``), per protocols.md
   §0, the event tests taking the event and its data parsed as JSON (``NOT_JSON`` when it is
   not): Anthropic's event names; an event name only Cohere uses; LangGraph's ``metadata``
   event; MCP's legacy ``endpoint`` event; data ``[DONE]`` (chat); an A2A JSON-RPC response;
   any other JSON-RPC 2.0 message (MCP); Anthropic's ``message_start`` or error object; a
   JSON ``type`` starting with ``response.`` (Responses); a ``type`` only Cohere sends; a
   chat chunk by its ``object`` or its shape; Gemini's top-level keys; an AG-UI event type;
   an event named after a LangGraph stream mode; a type only the AI SDK's UI stream sends.
   Azure's first chat chunk (``"object": ""``, ``choices: []``) and anything else decide
   nothing;
4. otherwise, after ``MAX_UNDECIDED_EVENTS`` events, once the held events carry more than
   ``MAX_UNDECIDED_CHARS`` characters, or at the end of the body, plain SSE
   (``protocol_source = "default"``), which still reports data plainly meant as JSON that
   does not parse (a Python ``repr`` of a dict, or broken JSON in a stream of JSON events;
   ``PlainSSEChecker``'s ``looks_at_json``, see ``streamguard.protocols.sse``).

A signal that raises (a plugin's bug) is no match for that stream, and detection goes on
with the next one: the fault is kept on the detector (``Detector.faults``) for the seam to
count as an internal error, and the stream is still checked and reported.

Frames run together with single line endings reach the checker as one event whose data
holds several payloads: its first line decides. A body never ended by a blank line
dispatches nothing at all; at its end the parser's unfinished event is judged by its first
data line the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from streamguard._faults import error_name, is_cancellation
from streamguard.protocols import (
    CHECKERS,
    PlainSSEChecker,
    event_signals,
    header_signals,
    load_plugins,
    make_checker,
    path_signals,
)
from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._payload import parse_json
from streamguard.protocols._spec import NOT_JSON
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = [
    "MAX_UNDECIDED_CHARS",
    "MAX_UNDECIDED_EVENTS",
    "Detector",
    "protocol_for_event",
    "protocol_for_headers",
    "protocol_for_path",
]

#: How many events a stream may send before its protocol is known; then it is plain SSE.
MAX_UNDECIDED_EVENTS = 8
#: How many characters of event names and data may be held while undecided (256 KiB of
#: ASCII); an event that would take the held total past it decides plain SSE at once.
MAX_UNDECIDED_CHARS = 256 * 1024


#: A signal that raised on a stream: ``(where, error)``, ``where`` naming the kind of
#: signal and the protocol (``"path signal of job_progress"``), ``error`` the exception's
#: type and place (``_faults.error_name``), never its message, which may quote the wire.
Fault = tuple[str, str]


def protocol_for_headers(
    headers: Iterable[tuple[bytes, bytes]], faults: list[Fault] | None = None
) -> str | None:
    """The protocol the response headers declare, or ``None``. A test that raises is no
    match (``faults``, when given, is told; see ``_failed``)."""
    load_plugins()
    if not header_signals:
        return None
    held = list(headers)  # each test reads them all
    for _rank, test, protocol in header_signals:
        try:
            if test(held):
                return protocol
        except BaseException as exc:
            _failed(exc, protocol, "header", faults)
    return None


def protocol_for_path(path: str | None, faults: list[Fault] | None = None) -> str | None:
    """The protocol a request path names, or ``None``; a test that raises is no match."""
    load_plugins()
    if not path:
        return None
    path = path.rstrip("/")
    for _rank, test, protocol in path_signals:
        try:
            if test(path):
                return protocol
        except BaseException as exc:
            _failed(exc, protocol, "path", faults)
    return None


def protocol_for_event(event: Event, faults: list[Fault] | None = None) -> str | None:
    """The protocol one event proves, or ``None`` when it proves nothing; a test that raises
    is no match."""
    load_plugins()
    payload = _payload(event.data)
    for _rank, test, protocol in event_signals:
        try:
            if test(event, payload):
                return protocol
        except BaseException as exc:
            _failed(exc, protocol, "event", faults)
    return None


def _failed(exc: BaseException, protocol: str, kind: str, faults: list[Fault] | None) -> None:
    """A protocol's signal raised: for this stream it is no match, and detection goes on
    with the next signal (a plugin's bug must not cost the built-in protocols their
    detection, nor the stream its report), told to ``faults`` if given. Cancellation is
    the task's: it propagates."""
    if is_cancellation(exc):
        raise exc
    if faults is not None:
        faults.append((f"{kind} signal of {protocol}", error_name(exc)))


def _payload(data: str) -> object:
    """The data parsed as JSON, or ``NOT_JSON``. Frames run together with single line
    endings reach the parser as one event whose data lines are several payloads: its first
    line still tells."""
    if not data.startswith(("{", "[")):
        return NOT_JSON
    try:
        return parse_json(data)
    except ValueError:
        first, newline, _ = data.partition("\n")
        if not newline:
            return NOT_JSON
        try:
            return parse_json(first)
        except ValueError:
            return NOT_JSON


class Detector:
    """Decides one ``"auto"`` stream's protocol, once (see the module docstring).

    Made with the request, the path and the response headers: when the headers or the path
    decide, ``checker`` is built at once. Otherwise ``hold`` each event until one decides,
    or a bound does (plain SSE); at the body's end, ``decide_by`` the parser's unfinished
    event, and else ``decide_plain``. ``checker`` is the chosen protocol's checker once
    decided, ``source`` how it was chosen (``header``, ``path``, ``event`` or
    ``default``). ``excerpt`` shows an event's data on the findings of a replayed event, as
    the monitor shows it on others. ``faults``: the signals that raised on this stream
    (each no match), for the seam to count; ``None`` while none did.
    """

    __slots__ = (
        "_faulted",
        "chars",
        "checker",
        "events",
        "excerpt",
        "faults",
        "path",
        "request",
        "source",
    )

    def __init__(
        self,
        request: Mapping[str, Any] | None,
        path: str | None,
        headers: Iterable[tuple[bytes, bytes]],
        excerpt: Callable[[str], str] | None = None,
    ) -> None:
        self.request = request
        self.path = path
        self.excerpt = excerpt
        #: The events held, with their indices, and the characters of their names and data.
        self.events: list[tuple[Event, int]] = []
        self.chars = 0
        self.checker: Checker | None = None
        # Until decided, the stream reads as what it becomes when nothing decides it.
        self.source = "default"
        #: The faults not yet taken by the monitor (``StreamMonitor._keep_faults``).
        self.faults: list[Fault] | None = None
        #: Every signal that has raised on this stream (its ``where``), taken or not: a
        #: signal is told once, however many held events it raised on.
        self._faulted: set[str] | None = None
        faults: list[Fault] = []
        decided = protocol_for_headers(headers, faults)
        source = "header"
        if decided is None or decided not in CHECKERS:
            decided = protocol_for_path(path, faults)
            source = "path"
        self._note(faults)
        if decided is not None and decided in CHECKERS:
            self._decide(decided, source)

    def hold(self, event: Event, index: int) -> Sequence[Finding]:
        """Hold an undecided stream's event; when it, or a bound, decides, the findings of
        the held events replayed into the chosen checker."""
        self.events.append((event, index))
        self.chars += len(event.event) + len(event.data)
        faults: list[Fault] = []
        protocol = protocol_for_event(event, faults)
        self._note(faults)
        if protocol is not None and protocol in CHECKERS:
            return self._decide(protocol, "event")
        if len(self.events) >= MAX_UNDECIDED_EVENTS or self.chars > MAX_UNDECIDED_CHARS:
            return self._decide(PlainSSEChecker.name, "default")
        return NO_FINDINGS

    def decide_by(self, pending: Event) -> list[Finding]:
        """The body ended undecided: ``pending``, the event it never finished, decides by
        its first data line if it can. The replayed events' findings."""
        faults: list[Fault] = []
        protocol = protocol_for_event(pending, faults)
        self._note(faults)
        if protocol is not None and protocol in CHECKERS:
            return self._decide(protocol, "event")
        return []

    def _note(self, faults: list[Fault]) -> None:
        """Keep the signals' new ``faults``, once per signal kind and protocol (a raising
        event signal would otherwise add one per held event): at most one per signal."""
        if not faults:
            return
        faulted = self._faulted
        if faulted is None:
            faulted = self._faulted = set()
        for fault in faults:
            if fault[0] not in faulted:
                faulted.add(fault[0])
                if self.faults is None:
                    self.faults = []
                self.faults.append(fault)

    def decide_plain(self) -> list[Finding]:
        """Nothing decided by the body's end: plain SSE. The replayed events' findings."""
        return self._decide(PlainSSEChecker.name, "default")

    def _decide(self, protocol: str, source: str) -> list[Finding]:
        if source == "default":  # no protocol claimed it: data meant as JSON is still judged
            checker: Checker = PlainSSEChecker(self.request, self.path, looks_at_json=True)
        else:
            checker = make_checker(protocol, self.request, self.path)
        self.checker = checker
        self.source = source
        excerpt = self.excerpt
        found: list[Finding] = []
        for event, index in self.events:
            replayed = checker.on_event(event, index)
            if replayed and excerpt is not None:
                shown = excerpt(event.data)
                replayed = [replace(finding, excerpt=shown) for finding in replayed]
            found.extend(replayed)
        self.events = []
        return found
