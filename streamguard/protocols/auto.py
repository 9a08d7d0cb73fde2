"""How a stream that was not configured with a protocol (``protocol="auto"``) tells it.

These are the signals only; ``StreamMonitor`` holds the undecided events, applies the
bounds below and builds the chosen checker (see ``streamguard.monitor``). A stream is
decided once, by the first signal that settles it:

1. the response headers (``protocol_source = "header"``): ``x-vercel-ai-ui-message-stream:
   v1`` declares the AI SDK's UI message stream → ``ai_sdk_ui`` (no other protocol names
   itself in a header);
2. the request path (``protocol_source = "path"``): ``/v1/chat/completions`` (and Azure's
   ``…/chat/completions``) → ``openai_chat``, ``/v1/responses`` → ``openai_responses``,
   ``/v1/messages`` → ``anthropic``, ``…:streamGenerateContent`` → ``gemini``, ``…/mcp``
   (the conventional MCP endpoint) → ``mcp``;
3. otherwise the first *decisive* event (``protocol_source = "event"``), per protocols.md
   §0: ``event: message_start`` (or another name only Anthropic uses, such as
   ``content_block_delta``) or JSON ``type: "message_start"`` → anthropic; data
   ``[DONE]`` or JSON ``object: "chat.completion.chunk"`` → openai_chat; a JSON ``type``
   starting with ``response.`` → openai_responses; JSON with ``candidates``,
   ``usageMetadata``, ``promptFeedback`` or ``modelVersion`` → gemini; JSON with
   ``"jsonrpc": "2.0"`` (or a batch array starting with such a message), or the legacy MCP
   transport's ``event: endpoint`` → mcp. The shape decides
   too, not only exact values: a ``choices`` entry with a ``delta`` object is OpenAI Chat
   whatever ``object`` says (a server sending ``"object": "text_completion"`` is a broken
   chat stream, and the chat checker then says so). Azure's first chat chunk
   (``"object": ""``, ``choices: []``) and anything else decide nothing;
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

from streamguard.protocols._base import ANTHROPIC_EVENT_NAMES
from streamguard.protocols._payload import parse_json
from streamguard.protocols.ag_ui import is_ag_ui_event, is_ag_ui_path
from streamguard.protocols.ai_sdk_ui import (
    is_ai_sdk_ui_chunk,
    is_ai_sdk_ui_header,
    is_ai_sdk_ui_path,
)
from streamguard.protocols.mcp import is_endpoint_event, is_jsonrpc_message, is_mcp_path
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

#: Path endings that name a protocol, most specific first.
_PATH_SUFFIXES = (
    ("/chat/completions", "openai_chat"),
    ("/v1/responses", "openai_responses"),
    ("/v1/messages", "anthropic"),
)
_GEMINI_METHOD = ":streamGenerateContent"
_GEMINI_KEYS = ("candidates", "usageMetadata", "promptFeedback", "modelVersion")


def protocol_for_headers(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The protocol the response headers declare, or ``None``: only the AI SDK's UI message
    stream declares itself (``x-vercel-ai-ui-message-stream: v1``)."""
    return "ai_sdk_ui" if is_ai_sdk_ui_header(headers) else None


def protocol_for_path(path: str | None) -> str | None:
    """The protocol a request path names, or ``None``."""
    if not path:
        return None
    path = path.rstrip("/")
    if path.endswith(_GEMINI_METHOD):
        return "gemini"
    for suffix, protocol in _PATH_SUFFIXES:
        if path.endswith(suffix):
            return protocol
    if is_mcp_path(path):
        return "mcp"
    if is_ag_ui_path(path):
        return "ag_ui"
    if is_ai_sdk_ui_path(path):  # useChat's default endpoint: the weakest sign, so last
        return "ai_sdk_ui"
    return None


def protocol_for_event(event: Event) -> str | None:
    """The protocol one event proves, or ``None`` when it proves nothing."""
    if event.event in ANTHROPIC_EVENT_NAMES:
        return "anthropic"
    data = event.data
    if is_endpoint_event(event):
        return "mcp"  # the legacy HTTP+SSE transport's first event: where to POST
    if data.startswith("[DONE]"):
        return "openai_chat"
    if not data.startswith(("{", "[")):
        return None
    try:
        payload = parse_json(data)
    except ValueError:
        # Frames run together with single line endings reach the parser as one event
        # whose data lines are several payloads: its first line still tells.
        first, newline, _ = data.partition("\n")
        if not newline:
            return None
        return protocol_for_event(Event(event.event, first))
    if is_jsonrpc_message(payload):
        return "mcp"
    if type(payload) is not dict:
        return None
    kind = payload.get("type")
    if kind == "message_start":
        return "anthropic"
    if kind == "error" and type(payload.get("error")) is dict:
        # Anthropic's error event (an overloaded error before message_start); the
        # Responses error event carries its code and message at the top level instead.
        return "anthropic"
    if isinstance(kind, str) and kind.startswith("response."):
        return "openai_responses"
    if payload.get("object") == "chat.completion.chunk":
        return "openai_chat"
    choices = payload.get("choices")
    if type(choices) is list and any(
        type(choice) is dict and type(choice.get("delta")) is dict for choice in choices
    ):  # the chat chunk's shape, whatever its object says; Azure's annotations have no delta
        return "openai_chat"
    if any(key in payload for key in _GEMINI_KEYS):
        return "gemini"
    if is_ag_ui_event(payload):
        return "ag_ui"
    if is_ai_sdk_ui_chunk(payload):
        return "ai_sdk_ui"
    return None
