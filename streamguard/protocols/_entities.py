"""The entities inside a stream: things that open, take events while open and close. Two
trackers, one per way the wire names an entity, and one vocabulary: a protocol declares each
kind of entity once (its nouns, and which of its rules each broken lifecycle is), a tracker
decides those rules, and its state is bounded (past the bound a check is skipped, never the
bound).

By number
---------

Numbered entities open at the next index (Anthropic content blocks, Responses output items
and their parts), or at any index not used before (Cohere's content blocks, tool calls and
citations: ``EntityKind.gaps``). A protocol declares each kind once (``EntityKind``): the
nouns and verbs its messages use and which of its rules each broken lifecycle is.
``Entities`` follows one kind in a stream and decides its opening, closing and ordering
checks (a protocol may still report one of those rules for a case of its own: Responses'
``item_not_open`` for an id that does not match, or a delta after ``.done``):

- ``check_opening``: an opening at another index than the next (with ``gaps``, at one
  already used) is ``out_of_order``; one while others are open ``overlap`` (a
  once-per-stream rule is reported once, and says so);
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

By id
-----

Entities named by ids from the wire (the agent protocols' messages, tool calls, steps,
parts: AG-UI, the AI SDK UI stream; A2A's artifacts) are kept by a bounded key (``id_key``:
long ones by a digest) in sets of bounded size; a set that overflows stops answering "not
open" (``IdSet.known``), so a check is skipped, never the bound. ``OpenIds`` holds a
stream's sets, one per kind of thing an id names (each with its noun), and is the one
place the id rules are decided: ``id_already_open``, ``id_not_open`` and ``id_not_closed``.
A client that forgets the open ids of some kinds at a boundary (the AI SDK's
``finish-step``, in ``ai`` 5 and 6) has them ``set_aside``: a later continuation of one is
told apart in the message, and one never closed still counts as open when the unit ends.
Messages show an id by size and hash only (``shown``).

The two stay two classes because what they can tell differs: an index says where an entity
sits and whether it was used before (``out_of_order``, "already closed"); an id says neither,
only whether it is open, and a protocol's rules for ids are the agent protocols' three.

OpenAI chat's choices and tool calls, Gemini's candidates and MCP's owed ids are not things
an event opens and another closes, and keep their own bookkeeping (``docs/architecture.md``
says, for each, what a tracker would have to be taught).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple, TypeVar

from streamguard import _wire, rules
from streamguard._wire import number
from streamguard.protocols._base import Checker, EventFindings, listing
from streamguard.rules import Rule

__all__ = [
    "Entities",
    "EntityKind",
    "IdSet",
    "OpenIds",
    "id_key",
    "plain_label",
    "shown",
]

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
    #: An opening may skip indices, and only a used one is ``out_of_order``: a client that
    #: joins each entity's events by index loses nothing to a gap (Cohere's SDK hands each
    #: event to the caller, who joins deltas by ``index``).
    gaps: bool = False


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
        if (
            index is not None
            and index != expected
            and kind.out_of_order is not None
            and (index < expected or not kind.gaps)
        ):
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


# -- by id -----------------------------------------------------------------------------

#: The longest id kept as it is; longer ones are kept as a 16-byte digest.
_MAX_KEPT_ID = 64


def id_key(value: str) -> str | bytes:
    """The key an id is kept by: itself when short, else a digest (an id sizes no buffer)."""
    return _wire.kept_key(value, _MAX_KEPT_ID)


def shown(value: str) -> str:
    """An id as a message shows it: size and hash, never the id."""
    return _wire.describe(value)


class IdSet:
    """The ids of one kind of thing that are open, at most ``limit`` of them.

    Past the limit a new id is not kept and the set remembers that it overflowed: from then
    on an id it does not hold may still be open, so ``known`` answers None (unknown) instead
    of False, and the caller skips its check.
    """

    __slots__ = ("_open", "limit", "overflowed")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: set[str | bytes] = set()
        self.overflowed = False

    def __len__(self) -> int:
        return len(self._open)

    def add(self, key: str | bytes) -> bool:
        """Open ``key``; False when it was already open."""
        if key in self._open:
            return False
        if len(self._open) >= self.limit:
            self.overflowed = True
        else:
            self._open.add(key)
        return True

    def known(self, key: str | bytes) -> bool | None:
        """Whether ``key`` is open; None when it is not held but the set overflowed."""
        if key in self._open:
            return True
        return None if self.overflowed else False

    def discard(self, key: str | bytes) -> None:
        self._open.discard(key)

    def held(self) -> list[str | bytes]:
        """The keys held (a copy: the caller may change the set while it walks them)."""
        return list(self._open)

    def clear(self) -> None:
        self._open.clear()
        self.overflowed = False

    def move_to(self, other: IdSet) -> None:
        """Hand every key to ``other`` (bounded by its limit; its overflow noted) and empty
        this set."""
        for key in self._open:
            other.add(key)
        if self.overflowed:
            other.overflowed = True
        self.clear()


class OpenIds:
    """The ids a stream opened and has not closed yet, by the kind of thing they name (a
    text message, a tool call, ...), each kind in an ``IdSet`` of at most ``limit`` made when
    its first id opens (an idle stream keeps none).

    The one owner of the id rules: a start for an id still open is ``id_already_open``, a
    continuation or an end for an id not open is ``id_not_open``, and ids still open when
    the message or run ends are ``id_not_closed``. ``nouns`` names each kind in messages,
    in the order ``check_closed`` counts them; ``on_reopen`` says what the client does with
    a second start; ``on_aside`` ends the message on a continuation of an id the client
    forgot at a boundary (``set_aside``): where that was, and what the client does.
    """

    __slots__ = ("_aside", "_limit", "_nouns", "_on_aside", "_on_reopen", "_sets")

    def __init__(
        self, nouns: Mapping[str, str], limit: int, on_reopen: str, on_aside: str = ""
    ) -> None:
        self._nouns = nouns
        self._limit = limit
        self._on_reopen = on_reopen
        self._on_aside = on_aside
        self._sets: dict[str, IdSet] = {}
        #: Kind -> the ids the client forgot at a boundary while they were open.
        self._aside: dict[str, IdSet] = {}

    def open(
        self, found: EventFindings, kind: str, value: str, key: str | bytes, where: str
    ) -> None:
        """A start of the ``kind`` thing with id ``value`` (kept by ``key``)."""
        ids = self._sets.get(kind)
        if ids is None:
            ids = self._sets[kind] = IdSet(self._limit)
        if not ids.add(key):
            detail = f" ({where}): {self._nouns[kind]} {shown(value)} is already open; "
            found.add(rules.ID_ALREADY_OPEN, detail + self._on_reopen)

    def need_open(
        self,
        found: EventFindings,
        kind: str,
        value: str,
        key: str | bytes,
        where: str,
        closes: bool,
    ) -> None:
        """An event that continues the ``kind`` thing with id ``value`` (and ends it when
        ``closes``)."""
        ids = self._sets.get(kind)
        held = False if ids is None else ids.known(key)
        if held is True:
            if closes and ids is not None:
                ids.discard(key)
            return
        aside = self._aside.get(kind)
        set_aside = False if aside is None else aside.known(key)
        if set_aside is True and aside is not None:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({where}): {self._nouns[kind]} {shown(value)}{self._on_aside}",
            )
            if closes:
                aside.discard(key)
        elif held is False and set_aside is False:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({where}): {self._nouns[kind]} {shown(value)} is not open (never started, "
                "or already ended); the client throws",
            )

    def set_aside(self, kinds: tuple[str, ...]) -> None:
        """The client forgets the open ids of ``kinds`` at a boundary: they are kept aside
        (a later continuation of one is reported as such; one never closed still counts in
        ``check_closed``)."""
        for kind in kinds:
            ids = self._sets.pop(kind, None)
            if ids is None:
                continue
            aside = self._aside.get(kind)
            if aside is None:
                aside = self._aside[kind] = IdSet(self._limit)
            ids.move_to(aside)

    def discard(self, kind: str, key: str | bytes) -> None:
        ids = self._sets.get(kind)
        if ids is not None:
            ids.discard(key)

    def check_closed(
        self,
        found: EventFindings,
        where: str,
        ended: str,
        consequence: str,
        also: tuple[tuple[int, str], ...] = (),
    ) -> None:
        """The stream's unit ended (``ended``: "the run finished", say): the ids still open,
        each kind counted, none quoted, then forgotten. ``also`` counts open things kept
        elsewhere, as ``(count, noun)``."""
        counts = self.counts()
        open_now = [(counts[kind], noun) for kind, noun in self._nouns.items() if kind in counts]
        still = [f"{count} {noun}(s)" for count, noun in (*open_now, *also) if count]
        if still:
            detail = f" ({where}): {ended} with {', '.join(still)} still open; {consequence}"
            found.add(rules.ID_NOT_CLOSED, detail)
        self.clear()

    def counts(self) -> dict[str, int]:
        """How many ids of each kind are held, set aside ones included (kinds that never
        opened one are absent)."""
        counts = {kind: len(ids) for kind, ids in self._sets.items()}
        for kind, aside in self._aside.items():
            if len(aside):
                counts[kind] = counts.get(kind, 0) + len(aside)
        return counts

    def clear(self) -> None:
        self._sets.clear()
        self._aside.clear()
