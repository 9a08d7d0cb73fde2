"""A minimal protocol with a terminal signal, for tests of the shared machinery."""

from __future__ import annotations

from collections.abc import Sequence

from streamguard.protocols import Checker
from streamguard.report import Finding
from streamguard.sse import Event


class DoneChecker(Checker):
    """``data: END`` is the terminal signal and ``data: ERR`` an in-band error."""

    name = "test_done"

    def is_terminal(self, event: Event) -> bool:
        return event.data == "END"

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        if event.data == "END":
            self.terminal_index = index
        elif event.data == "ERR":
            self.error_index = index
        return ()
