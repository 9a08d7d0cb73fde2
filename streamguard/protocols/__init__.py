"""Protocol checkers, one module per wire protocol, and the registry that names them.

``"auto"`` is not a checker: the monitor holds an auto-detected stream's first events and
builds the checker its protocol names (``streamguard.monitor``; the signals are in
``streamguard.protocols.auto``).

Request facts that hold only the request's head (the HTTP method, ``Last-Event-ID``; see
``streamguard.request.add_http_facts``) reach only the checkers that read the head (MCP):
to the others, a request whose body was not read is an unknown request, as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamguard.protocols._base import Checker
from streamguard.protocols.ag_ui import AGUIChecker
from streamguard.protocols.ai_sdk_ui import AISDKUIChecker
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.protocols.gemini import GeminiChecker
from streamguard.protocols.mcp import MCPChecker
from streamguard.protocols.openai_chat import OpenAIChatChecker
from streamguard.protocols.openai_responses import OpenAIResponsesChecker
from streamguard.protocols.sse import PlainSSEChecker
from streamguard.request import RequestFacts

__all__ = [
    "AUTO",
    "CHECKERS",
    "AnthropicChecker",
    "Checker",
    "GeminiChecker",
    "PlainSSEChecker",
    "make_checker",
]

#: The protocol setting that asks the monitor to detect the protocol of each stream.
AUTO = "auto"

CHECKERS: dict[str, type[Checker]] = {
    PlainSSEChecker.name: PlainSSEChecker,
    OpenAIChatChecker.name: OpenAIChatChecker,
    OpenAIResponsesChecker.name: OpenAIResponsesChecker,
    AnthropicChecker.name: AnthropicChecker,
    GeminiChecker.name: GeminiChecker,
    AISDKUIChecker.name: AISDKUIChecker,
    AGUIChecker.name: AGUIChecker,
    MCPChecker.name: MCPChecker,
}

#: The protocols whose checkers read the request's head (``http_method``, ``last_event_id``).
_READS_HEAD = frozenset({MCPChecker.name})


def make_checker(
    protocol: str,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    *,
    json_data: bool = False,
) -> Checker:
    """A checker for ``protocol``, one of ``CHECKERS``.

    ``"auto"`` is a ``ValueError``: detection needs the stream's first events, which the
    monitor holds (``StreamMonitor("auto", ...)``). ``json_data`` is a plain-SSE route's
    promise that its data is JSON (``{"protocol": "sse", "json": true}`` in the route's
    configuration): the plain checker then reports data that does not parse. The other
    protocols define their payloads themselves and ignore it.
    """
    if type(request) is RequestFacts and not request.body_read and protocol not in _READS_HEAD:
        request = None  # no body was read: the request is unknown to a body-reading check
    try:
        checker_class = CHECKERS[protocol]
    except KeyError:
        if protocol == AUTO:
            raise ValueError(
                "protocol 'auto' is detected per stream by StreamMonitor, not a checker"
            ) from None
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}") from None
    if issubclass(checker_class, PlainSSEChecker):
        return checker_class(request, path, json_data=json_data)
    return checker_class(request, path)
