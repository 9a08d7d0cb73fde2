"""A protocol's lifecycle as data: its phases, the kinds of event it tells apart, and what
each kind of event does in each phase.

Theory of operation
-------------------

Following h11's ``_state.py``, everything that decides a stream's lifecycle lives in one
table per protocol: ``(phase, kind) -> Step``. A step names the next phase and, when the
event breaks a lifecycle rule (a missing start, a second start, an event after the
terminal or after an in-band error, a second terminal, a body that ends too soon), the
rule and the message that says so. The table is total: every phase has a step for every
kind, and for ``END``, the body's end, either by name or through the phase's ``ANY`` row.
A checker classifies each event into a kind (its payload handlers do the rest) and
``Checker.advance`` looks the step up; that is the only place a checker's phase,
``terminal_index`` and ``error_index`` change once events arrive. Before the first, a
checker may start in another phase than ``initial`` when its request says so (MCP's
stream that owes no response, a resumed Responses stream).

Three kinds exist in every protocol: ``TERMINAL`` (the terminal signal), ``ERROR`` (an
in-band error) and ``OTHER`` (any other event); protocols add their own (``start``,
``usage``, ...). Phases listed as ``sealed`` have ended the stream: their events are
classified by ``Checker.sealed_kind`` alone, without parsing, and only lifecycle rules
apply to them.

``docs/lifecycles.md`` prints every protocol's table with ``describe()``; the page is
generated from the tables, and a test fails when it is out of date, so the prose cannot
drift from the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from streamguard.rules import Rule

__all__ = ["ANY", "END", "ERROR", "OTHER", "STAY", "TERMINAL", "Lifecycle", "Step", "broken", "go"]

#: The terminal signal.
TERMINAL: Final = "terminal"
#: An in-band error.
ERROR: Final = "error"
#: Any event the protocol does not tell apart.
OTHER: Final = "other"
#: Not an event: the body ended (the app finished sending).
END: Final = "end"
#: In a table key: every kind the phase does not list (END included).
ANY: Final = "*"


@dataclass(frozen=True, slots=True)
class Step:
    """What one kind of event does in one phase.

    ``then`` is the next phase (None: stay). ``rule`` is the lifecycle rule the event
    breaks, if any, and ``message`` its text, formatted with ``index`` (the event's, or at
    ``END`` the number of events), ``name`` (the event as a message may show it),
    ``terminal`` and ``error`` (the indices of the terminal and of the error), ``offset``
    (at ``END``, the body's size) and ``protocol``. ``checked``: whether the event's
    payload is still checked after the step (an event that breaks the lifecycle after the
    end is not).
    """

    then: str | None = None
    rule: Rule | None = None
    message: str = ""
    checked: bool = True


def go(phase: str) -> Step:
    """A clean transition to ``phase``."""
    return Step(then=phase)


STAY: Final = Step()


def broken(rule: Rule, message: str, then: str | None = None, *, checked: bool = True) -> Step:
    """A transition that breaks ``rule``."""
    return Step(then, rule, message, checked)


@dataclass(frozen=True)
class Lifecycle:
    """One protocol's phases, kinds and transition table; see the module docstring."""

    #: Phase name -> what it means, in the order the docs list them.
    phases: Mapping[str, str]
    #: The protocol's own kinds (besides TERMINAL, ERROR and OTHER) -> what they are.
    kinds: Mapping[str, str]
    #: The phase a stream starts in.
    initial: str
    #: (phase, kind) -> step, for every phase and every kind, END included.
    table: Mapping[tuple[str, str], Step]
    #: Phases reached by the terminal signal: entering one records ``terminal_index``.
    ended: frozenset[str]
    #: Phases reached by an in-band error: entering one records ``error_index``.
    errored: frozenset[str]
    #: Phases in which events are no longer parsed: only lifecycle rules apply.
    sealed: frozenset[str]

    def __post_init__(self) -> None:
        kinds = (*self.kinds, TERMINAL, ERROR, OTHER, END)
        missing = [
            (p, k)
            for p in self.phases
            for k in kinds
            if (p, k) not in self.table and (p, ANY) not in self.table
        ]
        if missing:
            raise ValueError(f"lifecycle table has no step for {missing}")
        known = set(self.phases)
        unknown = {p for p, _ in self.table} - known
        unknown |= {s.then for s in self.table.values() if s.then is not None} - known
        unknown |= (self.ended | self.errored | self.sealed | {self.initial}) - known
        if unknown:
            raise ValueError(f"lifecycle names unknown phases {sorted(unknown)}")

    def step(self, phase: str, kind: str) -> Step:
        step = self.table.get((phase, kind))
        return self.table[phase, ANY] if step is None else step

    @property
    def rules(self) -> frozenset[Rule]:
        """The lifecycle rules this table can raise."""
        return frozenset(step.rule for step in self.table.values() if step.rule is not None)

    def describe(self) -> str:
        """The table as text, one line per phase and kind (``docs/lifecycles.md`` prints it)."""
        kinds = (*self.kinds, TERMINAL, ERROR, OTHER, END, ANY)
        lines = []
        for phase in self.phases:
            tags = [
                tag
                for tag, phases in (
                    ("initial", {self.initial}),
                    ("terminal seen", self.ended),
                    ("error seen", self.errored),
                    ("sealed", self.sealed),
                )
                if phase in phases
            ]
            shown_tags = f" [{', '.join(tags)}]" if tags else ""
            lines.append(f"{phase}{shown_tags}: {self.phases[phase]}")
            for kind in kinds:
                step = self.table.get((phase, kind))
                if step is None:
                    continue
                then = step.then or phase
                if step.rule is not None:
                    what = f"{step.rule.name}, then {then}"
                    if not step.checked:
                        what += " (payload not checked)"
                elif step.then is None:
                    what = "stays"
                else:
                    what = f"-> {then}"
                shown_kind = "any other" if kind == ANY else kind
                lines.append(f"    {shown_kind:<14} {what}")
        return "\n".join(lines)
