"""Numbered entities inside a stream: things that open at the next index, take events while
open and close (Anthropic content blocks, Responses output items and their parts). The
id-keyed twin, for entities named by ids from the wire, is ``_agent.OpenIds``.

A protocol declares each kind once (``EntityKind``): the nouns and verbs its messages use
and which of its rules each broken lifecycle is. ``Entities`` follows one kind in a stream
and decides its opening, closing and ordering checks (a protocol may still report one of
those rules for a case of its own: Responses' ``item_not_open`` for an id that does not
match, or a delta after ``.done``):

- ``check_opening``: an opening at another index than the next is ``out_of_order``; one
  while others are open ``overlap`` (a once-per-stream rule is reported once, and says so);
- ``not_open``: an event names an entity that is not open (never opened, or closed);
  while some are past the bound it is presumably one of those, and not judged;
- ``check_closed``: the entities still open when the unit that holds them ends are
  ``not_closed``, or ``open_at_limit`` when a length limit cut them off, in one message.

Bounded state: at most ``limit`` entries are open. Past it a new entity is counted
(``untracked``) and not followed or, with ``forget_oldest``, kept in place of the oldest.
An entry that leaves (replaced, pushed out, or still open at the end) goes to ``forget``,
which gives what it kept (``KeptText``) back to the stream's budget; ``close`` hands the
entry to the caller instead, for its closing event's checks. Messages show indices through
``_wire.number`` and lists cut short (``listing``). The per-delta path reads ``open``
directly: nothing here is called on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from streamguard._wire import number
from streamguard.protocols._base import Checker, EventFindings, listing
from streamguard.rules import Rule

__all__ = ["Entities", "EntityKind", "plain_label"]

T = TypeVar("T")


def plain_label(index: int, entry: object) -> str:
    """An entry as a list in a message shows it: its index."""
    return number(index)


class EntityKind(NamedTuple):
    """One kind of numbered entity as a protocol declares it: ``noun`` names one ("content
    block"), ``index_field`` the field that numbers it, ``opened`` and ``closed`` the verbs
    of its opening and closing events ("started", "stopped"); then the rule of each broken
    lifecycle (None: the protocol has no such rule, and the check is not made)."""

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
    (what the checker keeps about it; ``describe`` shows it in a list).

    ``opened`` is one past the highest index ever opened (the next one expected);
    ``in_order`` stays True while each opened index was the next one, so that every index
    below ``opened`` was used and a message may say "already used" or "already closed";
    ``untracked`` counts the open entities past the bound, which are not followed.
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
        self._describe = describe
        self._forget_oldest = forget_oldest
        self.opened = 0
        self.in_order = True
        self.untracked = 0
        self.open: dict[int, T] = {}

    def check_opening(self, found: EventFindings, where: str, index: int | None) -> None:
        """An event opens the entity at ``index`` (None: where it sits cannot be told, so
        only the overlap is judged). ``where`` follows ``event N`` in a message."""
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
        still_open = len(self.open) + self.untracked
        if still_open and kind.overlap is not None and not found.checker.reported(kind.overlap):
            what = f"a {kind.noun}" if index is None else f"{kind.noun} {number(index)}"
            detail = f"{where}: {what} opens while {still_open} other {kind.noun}(s) are still "
            found.add(kind.overlap, f"{detail}open{self._listed(still_open)}")

    def keep(self, checker: Checker, index: int, entry: T) -> bool:
        """Follow the entity at ``index`` with ``entry``; False when ``limit`` entries are
        open and it is only counted in ``untracked``. An entry open at that index is
        forgotten: the new one is the newest, or with ``forget_oldest`` takes its place in
        the order in which the oldest is pushed out."""
        if index >= self.opened:
            self.in_order = self.in_order and index == self.opened
            self.opened = index + 1
        open_now = self.open
        if self._forget_oldest and len(open_now) >= self.limit:
            self._forget(checker, open_now.pop(next(iter(open_now))))
        replaced = open_now.get(index)
        if replaced is not None:
            self._forget(checker, replaced)
            if not self._forget_oldest:
                del open_now[index]
        elif len(open_now) >= self.limit:
            self.untracked += 1
            return False
        open_now[index] = entry
        return True

    def close(self, index: int) -> T | None:
        """Close the entity at ``index``: its entry, or None when it was not open."""
        return self.open.pop(index, None)

    def not_open(
        self, found: EventFindings, where: str, index: int, label: str = "", closes: bool = False
    ) -> None:
        """An event (a closing one when ``closes``) names the entity at ``index`` (``label``
        in the message, if not ``noun index``), which is not open: ``not_open``, unless some
        are past the bound (then it is presumably one of them: a closing event uncounts it)."""
        if self.untracked:
            if closes:
                self.untracked -= 1
            return
        kind = self.kind
        if index >= self.opened:
            state = f"never {kind.opened}"
        elif index >= 0 and self.in_order:
            state = f"already {kind.closed}"
        else:
            state = f"never {kind.opened}, or already {kind.closed}"
        label = label or f"{kind.noun} {number(index)}"
        found.add(kind.not_open, f"{where}: {label} is not open ({state})")

    def check_closed(self, found: EventFindings, where: str, cut_off: str = "") -> None:
        """The unit that holds the entities ended: those still open are ``not_closed`` (or
        ``open_at_limit``, when ``cut_off`` names the limit that cut them off), then
        forgotten."""
        still_open = len(self.open) + self.untracked
        if still_open:
            kind = self.kind
            detail = f"{where}: {still_open} {kind.noun}(s) were never {kind.closed}"
            detail += self._listed(still_open)
            if cut_off and kind.open_at_limit is not None:
                found.add(kind.open_at_limit, f"{detail}, cut off by {cut_off}")
            else:
                found.add(kind.not_closed, detail)
        self.forget_all(found.checker)

    def forget_all(self, checker: Checker) -> None:
        """Nothing more is checked: forget every entry, and the count past the bound."""
        for entry in self.open.values():
            self._forget(checker, entry)
        self.open.clear()
        self.untracked = 0

    def _listed(self, total: int) -> str:
        """``: 0, 1, 2 and 5 more``, the open entries by index; nothing when all ``total``
        are past the bound."""
        labels = (self._describe(index, self.open[index]) for index in sorted(self.open))
        shown = listing(labels, total)
        return f": {shown}" if shown else ""
