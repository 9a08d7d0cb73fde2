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
) -> tuple[Checker, str]:
    """A checker for ``protocol`` and how it was chosen (``configured`` or ``default``).

    ``"auto"`` falls back to plain SSE until protocol detection is added.
    """
    if protocol == AUTO:
        return PlainSSEChecker(request), "default"
    try:
        checker_class = CHECKERS[protocol]
    except KeyError:
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}") from None
    return checker_class(request), "configured"
