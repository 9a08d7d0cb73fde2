"""What the agent protocols (AG-UI, the AI SDK UI message stream, A2A) share besides their
payload shapes (``_fields``): parts keyed by ids that a start opens and an end closes.

Ids come from the wire, so they are kept by a bounded key (long ones by a digest) in sets
of bounded size; a set that overflows stops answering "not open" (``IdSet.known``), so a
check is skipped, never the bound. ``OpenIds`` holds a stream's sets, one per kind of thing
an id names, and is the one place the id rules are decided: ``id_already_open``,
``id_not_open`` and ``id_not_closed``. A client that forgets the open ids of some kinds at a
boundary (the AI SDK's ``finish-step``, in ``ai`` 5 and 6) has them ``set_aside``: a later
continuation of one is told apart in the message, and one never closed still counts as
open when the unit ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamguard import _wire, rules
from streamguard.protocols._base import EventFindings

__all__ = ["IdSet", "OpenIds", "id_key", "shown"]

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
