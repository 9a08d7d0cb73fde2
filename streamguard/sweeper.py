"""The sweeper: one task per event loop that polls every open stream's timers.

One task for thousands of streams: per-stream timer handles would have to be rescheduled
on every frame. A loop's sweeper task starts with its first open stream and is cancelled
when the last one ends, so nothing outlives the streams it watches. The streams
themselves are held in one set, shared by every loop of a middleware (each stream names
its ``sweeper``); a sweeper only counts its own, so an open stream is held in one place.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Collection
from typing import Protocol

__all__ = ["Polled", "Sweeper", "Sweepers"]


class Polled(Protocol):
    """An open stream, as the sweeper sees it."""

    #: The sweeper of the loop the stream runs on, while it is open.
    sweeper: Sweeper | None

    def poll(self) -> None:
        """Run the timing detectors now; never raises."""


class Sweeper:
    """Polls the open streams of one event loop every ``interval`` seconds."""

    __slots__ = ("_interval", "_open_streams", "_task", "count")

    def __init__(self, interval: float, open_streams: Collection[Polled]) -> None:
        self._interval = interval
        self._open_streams = open_streams
        self._task: asyncio.Task[None] | None = None
        #: The open streams of this loop.
        self.count = 0

    @property
    def running(self) -> bool:
        return self._task is not None

    @property
    def watches(self) -> list[Polled]:
        """The open streams this sweeper polls."""
        # list() copies the set in one step under the GIL: another loop's thread may be
        # adding to it meanwhile.
        return [watch for watch in list(self._open_streams) if watch.sweeper is self]

    def add(self, watch: Polled) -> None:
        self.count += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="streamguard-sweeper"
            )

    def discard(self, watch: Polled) -> None:
        self.count -= 1
        if not self.count and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            for watch in self.watches:
                watch.poll()


class Sweepers(weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Sweeper]):
    """The sweeper of each event loop a middleware serves, kept no longer than the loop."""

    def __init__(self, interval: float, open_streams: Collection[Polled]) -> None:
        super().__init__()
        self.interval = interval
        self._open_streams = open_streams

    def current(self) -> Sweeper | None:
        """The running loop's sweeper; ``None`` outside asyncio (under trio the timing
        detectors then judge only at the end of each stream)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        sweeper = self.get(loop)
        if sweeper is None:
            sweeper = self[loop] = Sweeper(self.interval, self._open_streams)
        return sweeper
