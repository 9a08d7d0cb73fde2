"""A minimal protocol with a terminal signal, for tests of the shared machinery."""

from __future__ import annotations

from collections.abc import Sequence

from streamguard.protocols import Checker
from streamguard.protocols._base import terminated_lifecycle
from streamguard.protocols._lifecycle import ERROR, OTHER, TERMINAL
from streamguard.report import Finding
from streamguard.sse import Event


class DoneChecker(Checker):
    """``data: END`` is the terminal signal and ``data: ERR`` an in-band error."""

    name = "test_done"
    LIFECYCLE = terminated_lifecycle()

    def is_terminal(self, event: Event) -> bool:
        return event.data == "END"

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        kind = {"END": TERMINAL, "ERR": ERROR}.get(event.data, OTHER)
        finding = self.advance(kind, event, index)
        return () if finding is None else (finding,)
