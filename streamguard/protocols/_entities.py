"""Numbered entities inside a stream (Anthropic content blocks, Responses output items and
their parts): things that open at the next index, take events while open and close, and
the one place their lifecycle rules are decided.

Theory of operation
-------------------

A protocol declares each kind of numbered entity once, as an ``EntityKind``: the nouns and
verbs its messages use ("content block", "started", "stopped") and which of its rules each
broken lifecycle is. ``Entities`` then follows a stream's entities of that kind and adds
the findings itself:

- ``check_opening``: an opening at another index than the next one is ``out_of_order``;
  one while others are open is ``overlap`` (a once-per-stream rule is reported once,
  ``Checker.report`` says so in the message);
- ``not_open``: an event that names an entity that is not open (never opened, or closed
  already) is ``not_open``; the checker decides when that is a finding (an entity past the
  bound, or opened before a resumed stream began, is not one);
- ``check_closed``: entities still open when the unit that holds them ends are
  ``not_closed``, or ``open_at_limit`` when a length limit cut them off, counted in one
  message; they are then forgotten.

The id-keyed twin, for entities named by ids from the wire, is ``_agent.OpenIds``.

Bounded state: at most ``limit`` entries are open at once. Past it a new entity is either
not followed but counted (``untracked``: an event that names one cannot be judged, so no
``not_open`` is reported while any is counted) or, for a kind declared ``forget_oldest``,
kept in place of the oldest open one. An entry that leaves (replaced, forgotten, or
still open at ``check_closed``) is handed to the tracker's ``forget`` function, which gives
back what it kept (``KeptText``) to the stream's budget; ``close`` hands the entry to the
caller instead, for the checks of the closing event, and the caller forgets it.
Messages show indices through
``_wire.number`` and at most ``SHOWN`` entries of a list.

The per-delta path reads ``open`` directly (one dict look-up): nothing here is called on
it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from streamguard._wire import number
from streamguard.protocols._base import Checker, EventFindings, listing
from streamguard.rules import Rule

__all__ = ["SHOWN", "Entities", "EntityKind", "plain_label"]

T = TypeVar("T")

#: Entries a message lists before "and N more".
SHOWN: int = 3


def plain_label(index: int, entry: object) -> str:
    """An entry as a list in a message shows it: its index."""
    return number(index)


class EntityKind(NamedTuple):
    """One kind of numbered entity as a protocol declares it: how its messages name it and
    which rule each broken lifecycle is (None: the protocol has no such rule, the check is
    not made).

    ``noun`` names one entity ("content block"), ``index_field`` the field that numbers it
    ("index"), ``opened`` and ``closed`` the verbs of its opening and closing events
    ("started", "stopped").
    """

    noun: str
    index_field: str
    opened: str
    closed: str
    not_open: Rule
    not_closed: Rule
    out_of_order: Rule | None = None
    overlap: Rule | None = None
    open_at_limit: Rule | None = None


class Entities(Generic[T]):
    """The open entities of one ``EntityKind`` in a stream, by index, each with its entry
    (what the checker keeps about it).

    ``opened`` is one past the highest index ever kept (the next index expected);
    ``in_order`` stays True while every kept index was the next one, so that every index
    below ``opened`` was used and a message may say "already used" or "already closed";
    ``untracked`` counts entities past the bound, opened and not followed.
    """

    __slots__ = (
        "_describe",
        "_forget",
        "_forget_oldest",
        "in_order",
        "kind",
        "limit",
        "open",
        "opened",
        "untracked",
    )

    def __init__(
        self,
        kind: EntityKind,
        limit: int,
        forget: Callable[[Checker, T], None],
        describe: Callable[[int, T], str] = plain_label,
        forget_oldest: bool = False,
    ) -> None:
        self.kind = kind
        self.limit = limit
        self._forget = forget
        self._describe = describe  # an entry as a message lists it
        self._forget_oldest = forget_oldest
        self.opened = 0
        self.in_order = True
        self.untracked = 0
        self.open: dict[int, T] = {}

    def still_open(self) -> int:
        """How many entities are open, those past the bound included."""
        return len(self.open) + self.untracked

    # -- opening -------------------------------------------------------------------------

    def check_opening(self, found: EventFindings, where: str, index: int | None) -> None:
        """An event opens the entity at ``index`` (None: its index cannot be told, so only
        the overlap is judged). ``where`` follows ``event N`` in a message."""
        kind = self.kind
        expected = self.opened
        if index is not None and index != expected and kind.out_of_order is not None:
            if index in self.open:
                how = "is already open (an index is used once)"
            elif 0 <= index < expected and self.in_order:
                how = f"was already used by an earlier {kind.noun} (an index is used once)"
            else:
                how = f"expected {number(expected)}"
            found.add(kind.out_of_order, f"{where}: {kind.index_field} {number(index)}, {how}")
        still_open = self.still_open()
        if still_open and kind.overlap is not None and not found.checker.reported(kind.overlap):
            what = f"a {kind.noun}" if index is None else f"{kind.noun} {number(index)}"
            detail = f"{where}: {what} opens while {still_open} other {kind.noun}(s) are still "
            found.add(kind.overlap, f"{detail}open{self._listed(still_open)}")

    def keep(self, checker: Checker, index: int, entry: T) -> bool:
        """Follow the entity at ``index`` from now on with ``entry``; whether it is followed.
        An entry open at that index is forgotten; when ``limit`` entries are open, the
        oldest is forgotten (``forget_oldest``) or the new one is counted in ``untracked``
        and not followed."""
        if index >= self.opened:
            if index > self.opened:
                self.in_order = False
            self.opened = index + 1
        open_now = self.open
        if self._forget_oldest and len(open_now) >= self.limit:
            self._forget(checker, open_now.pop(next(iter(open_now))))
        replaced = open_now.pop(index, None)
        if replaced is not None:
            self._forget(checker, replaced)
        if len(open_now) >= self.limit:
            self.untracked += 1
            return False
        open_now[index] = entry
        return True

    # -- events inside, and closing ------------------------------------------------------

    def not_open(self, found: EventFindings, where: str, index: int, label: str = "") -> None:
        """``not_open``: the event names the entity at ``index``, which is not open (its
        ``label`` in the message, if not ``noun index``)."""
        kind = self.kind
        if index >= self.opened:
            state = f"never {kind.opened}"
        elif index >= 0 and self.in_order:
            state = f"already {kind.closed}"
        else:
            state = f"never {kind.opened}, or already {kind.closed}"
        label = label or f"{kind.noun} {number(index)}"
        found.add(kind.not_open, f"{where}: {label} is not open ({state})")

    def close(self, index: int) -> T | None:
        """Close the entity at ``index``: its entry, for the checks of its closing event
        (the caller then forgets it), or None when it was not open."""
        return self.open.pop(index, None)

    def check_closed(self, found: EventFindings, where: str, cut_off: str = "") -> None:
        """The unit that holds the entities ended: those still open are ``not_closed`` (or
        ``open_at_limit`` when ``cut_off`` says which length limit cut them off), in one
        message; then all are forgotten."""
        still_open = self.still_open()
        if still_open:
            kind = self.kind
            detail = f"{where}: {still_open} {kind.noun}(s) were never {kind.closed}"
            detail += self._listed(still_open)
            rule = kind.not_closed
            if cut_off and kind.open_at_limit is not None:
                rule = kind.open_at_limit
                detail += f", cut off by {cut_off}"
            found.add(rule, detail)
        self.forget_all(found.checker)

    def forget_all(self, checker: Checker) -> None:
        """Nothing more is checked: forget every entry (and the count past the bound)."""
        for entry in self.open.values():
            self._forget(checker, entry)
        self.open.clear()
        self.untracked = 0

    def _listed(self, total: int) -> str:
        """``: 0, 1, 2 and 5 more`` for the open entries by index, or nothing when none is
        followed (all past the bound)."""
        describe = self._describe
        labels = (describe(index, self.open[index]) for index in sorted(self.open))
        shown = listing(labels, total, SHOWN)
        return f": {shown}" if shown else ""
