"""What the agent protocols (AG-UI, the AI SDK UI message stream, A2A) share besides their
payload shapes (``_fields``): parts keyed by ids that a start opens and an end closes.

Ids come from the wire, so they are kept by a bounded key (long ones by a digest) in sets
of bounded size; a set that overflows stops answering "not open" (``IdSet.known``), so a
check is skipped, never the bound. ``OpenIds`` holds a stream's sets, one per kind of thing
an id names, and is the one place the id rules are decided: ``id_already_open``,
``id_not_open`` and ``id_not_closed``.
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

    def clear(self) -> None:
        self._open.clear()
        self.overflowed = False


class OpenIds:
    """The ids a stream opened and has not closed yet, by the kind of thing they name (a
    text message, a tool call, ...), each kind in an ``IdSet`` of at most ``limit`` made when
    its first id opens (an idle stream keeps none).

    The one owner of the id rules: a start for an id still open is ``id_already_open``, a
    continuation or an end for an id not open is ``id_not_open``, and ids still open when
    the message or run ends are ``id_not_closed``. ``nouns`` names each kind in messages,
    in the order ``check_closed`` counts them; ``on_reopen`` says what the client does with
    a second start.
    """

    __slots__ = ("_limit", "_nouns", "_on_reopen", "_sets")

    def __init__(self, nouns: Mapping[str, str], limit: int, on_reopen: str) -> None:
        self._nouns = nouns
        self._limit = limit
        self._on_reopen = on_reopen
        self._sets: dict[str, IdSet] = {}

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
        if ids is None or ids.known(key) is False:
            found.add(
                rules.ID_NOT_OPEN,
                f" ({where}): {self._nouns[kind]} {shown(value)} is not open (never started, "
                "or already ended); the client throws",
            )
        elif closes:
            ids.discard(key)

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
        """How many ids of each kind are held (kinds that never opened one are absent)."""
        return {kind: len(ids) for kind, ids in self._sets.items()}

    def clear(self) -> None:
        self._sets.clear()
