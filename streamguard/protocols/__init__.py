"""Protocol checkers, one module per wire protocol, and how a stream picks one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamguard.protocols._base import Checker
from streamguard.protocols.ag_ui import AGUIChecker
from streamguard.protocols.ai_sdk_ui import AISDKUIChecker
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.protocols.auto import AutoChecker, protocol_for_path
from streamguard.protocols.gemini import GeminiChecker
from streamguard.protocols.openai_chat import OpenAIChatChecker
from streamguard.protocols.openai_responses import OpenAIResponsesChecker
from streamguard.protocols.sse import PlainSSEChecker

__all__ = [
    "AUTO",
    "CHECKERS",
    "AnthropicChecker",
    "AutoChecker",
    "Checker",
    "GeminiChecker",
    "PlainSSEChecker",
    "make_checker",
]

AUTO = "auto"

CHECKERS: dict[str, type[Checker]] = {
    PlainSSEChecker.name: PlainSSEChecker,
    OpenAIChatChecker.name: OpenAIChatChecker,
    OpenAIResponsesChecker.name: OpenAIResponsesChecker,
    AnthropicChecker.name: AnthropicChecker,
    GeminiChecker.name: GeminiChecker,
    AISDKUIChecker.name: AISDKUIChecker,
    AGUIChecker.name: AGUIChecker,
}


def make_checker(
    protocol: str,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    *,
    json_data: bool = False,
) -> Checker:
    """A checker for ``protocol``; ``"auto"`` decides from the path or the first events.

    ``json_data`` is a plain-SSE route's promise that its data is JSON (``{"protocol":
    "sse", "json": true}`` in the route's configuration): the plain checker then reports
    data that does not parse. The other protocols define their payloads themselves and
    ignore it.
    """
    if protocol == AUTO:
        by_path = protocol_for_path(path)
        if by_path is None or by_path not in CHECKERS:
            return AutoChecker(request, path, CHECKERS)
        # Decided before any event: the chosen checker itself, without a wrapper.
        checker = CHECKERS[by_path](request, path)
        checker.protocol_source = "path"
        return checker
    if protocol == PlainSSEChecker.name:
        return PlainSSEChecker(request, path, json_data=json_data)
    try:
        checker_class = CHECKERS[protocol]
    except KeyError:
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}") from None
    return checker_class(request, path)
