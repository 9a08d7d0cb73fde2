"""Protocol checkers, one module per wire protocol, and how a stream picks one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamguard.protocols._base import Checker
from streamguard.protocols.sse import PlainSSEChecker

__all__ = ["AUTO", "CHECKERS", "Checker", "PlainSSEChecker", "make_checker"]

AUTO = "auto"

CHECKERS: dict[str, type[Checker]] = {
    PlainSSEChecker.name: PlainSSEChecker,
}


def make_checker(
    protocol: str, request: Mapping[str, Any] | None = None, path: str | None = None
) -> Checker:
    """A checker for ``protocol``; ``"auto"`` picks one (for now: plain SSE)."""
    if protocol == AUTO:
        checker: Checker = PlainSSEChecker(request, path)
        checker.protocol_source = "default"
        return checker
    try:
        checker_class = CHECKERS[protocol]
    except KeyError:
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}") from None
    return checker_class(request, path)
