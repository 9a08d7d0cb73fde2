"""How a stream that was not configured with a protocol (``protocol="auto"``) tells it.

These are the signals only; ``StreamMonitor`` holds the undecided events, applies the
bounds below and builds the chosen checker (see ``streamguard.monitor``). The signals are
the protocols' own (each spec's ``headers``, ``paths`` and ``events``, merged by rank in
the registry, ``streamguard.protocols``). A stream is decided once, by the first signal
that settles it:

1. the response headers (``protocol_source = "header"``): the AI SDK's UI message stream
   declares itself (``x-vercel-ai-ui-message-stream: v1``); no other built-in protocol does;
2. the request path (``protocol_source = "path"``), without its trailing slashes:
   ``…:streamGenerateContent`` → ``gemini``, ``…/chat/completions`` (OpenAI's and Azure's)
   → ``openai_chat``, ``/v1/responses`` → ``openai_responses``, ``/v1/messages`` →
   ``anthropic``, ``…/mcp`` → ``mcp``, a segment such as ``ag-ui`` → ``ag_ui``, and last,
   the weakest, ``/api/chat`` → ``ai_sdk_ui``;
3. otherwise the first *decisive* event (``protocol_source = "event"``), per protocols.md
   §0, the event tests taking the event and its data parsed as JSON (``NOT_JSON`` when it is
   not): Anthropic's event names; MCP's legacy ``endpoint`` event; data ``[DONE]`` (chat);
   a JSON-RPC 2.0 message (MCP); Anthropic's ``message_start`` or error object; a JSON
   ``type`` starting with ``response.`` (Responses); a chat chunk by its ``object`` or its
   shape; Gemini's top-level keys; an AG-UI event type; a type only the AI SDK's UI stream
   sends. Azure's first chat chunk (``"object": ""``, ``choices: []``) and anything else
   decide nothing;
4. otherwise, after ``MAX_UNDECIDED_EVENTS`` events, once the held events carry more than
   ``MAX_UNDECIDED_CHARS`` characters, or at the end of the body, plain SSE
   (``protocol_source = "default"``).

Frames run together with single line endings reach the checker as one event whose data
holds several payloads: its first line decides. A body never ended by a blank line
dispatches nothing at all; at its end the parser's unfinished event is judged by its first
data line the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamguard.protocols import event_signals, header_signals, load_plugins, path_signals
from streamguard.protocols._payload import parse_json
from streamguard.protocols._spec import NOT_JSON
from streamguard.sse import Event

__all__ = [
    "MAX_UNDECIDED_CHARS",
    "MAX_UNDECIDED_EVENTS",
    "protocol_for_event",
    "protocol_for_headers",
    "protocol_for_path",
]

#: How many events a stream may send before its protocol is known; then it is plain SSE.
MAX_UNDECIDED_EVENTS = 8
#: How many characters of event names and data may be held while undecided (256 KiB of
#: ASCII); an event that would take the held total past it decides plain SSE at once.
MAX_UNDECIDED_CHARS = 256 * 1024


def protocol_for_headers(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The protocol the response headers declare, or ``None``."""
    load_plugins()
    if not header_signals:
        return None
    held = list(headers)  # each test reads them all
    for _rank, test, protocol in header_signals:
        if test(held):
            return protocol
    return None


def protocol_for_path(path: str | None) -> str | None:
    """The protocol a request path names, or ``None``."""
    load_plugins()
    if not path:
        return None
    path = path.rstrip("/")
    for _rank, test, protocol in path_signals:
        if test(path):
            return protocol
    return None


def protocol_for_event(event: Event) -> str | None:
    """The protocol one event proves, or ``None`` when it proves nothing."""
    load_plugins()
    payload = _payload(event.data)
    for _rank, test, protocol in event_signals:
        if test(event, payload):
            return protocol
    return None


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
