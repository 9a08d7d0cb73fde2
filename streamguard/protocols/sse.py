"""Plain SSE: framing rules only, no payload rules and no terminal signal."""

from __future__ import annotations

from collections.abc import Sequence

from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["PlainSSEChecker"]


class PlainSSEChecker(Checker):
    """Accepts every event; the end of the body is the end of the stream."""

    name = "sse"
    has_terminal = False

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        return NO_FINDINGS
