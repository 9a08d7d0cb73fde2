"""Memory bounds proven from the slope: two short runs instead of one very long one.

A test that "a million events keep memory flat" need not push a million events: memory
that grows with a stream grows between 10,000 and 50,000 events already. ``peak_slope``
measures the traced peak at two lengths, and ``extrapolated`` reads the peak at the long
length off the line through them, so a test asserts the same ceiling at the same length as
before, at a twentieth of the cost. Growth of a byte per event shows as 40 KB between the
two runs; the traced peaks are exact (tracemalloc counts bytes, not time), so nothing here
depends on the machine's speed or load.

What it cannot see: growth that starts only past the longer run (a cap on kept findings
above 50,000, say). The bounds the core keeps are all far smaller (``MAX_KEPT_FINDINGS`` is
100, the event-name cache 64 names), and the tests using this say which bound they lean on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .helpers import peak_memory

__all__ = ["Slope", "peak_slope"]

In = TypeVar("In")
T = TypeVar("T")


@dataclass(frozen=True)
class Slope(Generic[T]):
    """The traced peaks of one piece of work at two sizes, and the longer run's result."""

    small: int
    large: int
    small_peak: int
    large_peak: int
    result: T = field(repr=False)

    @property
    def per_unit(self) -> float:
        """Bytes of peak per unit of size (events, bytes...), never below zero."""
        return max(0, self.large_peak - self.small_peak) / (self.large - self.small)

    def extrapolated(self, size: int) -> int:
        """The peak at ``size``, on the line through the two measured peaks."""
        return int(self.large_peak + self.per_unit * max(0, size - self.large))

    def __str__(self) -> str:
        return (
            f"peak {self.small_peak:,} B at {self.small:,}, {self.large_peak:,} B at "
            f"{self.large:,} ({self.per_unit:.2f} B per unit)"
        )


def peak_slope(
    prepare: Callable[[int], In], work: Callable[[In], T], small: int, large: int
) -> Slope[T]:
    """``work(prepare(n))``'s traced peak for ``n`` = ``small`` and ``large``.

    ``prepare`` builds the input outside the traced region (the stream's bytes are the
    caller's, not what the code under test keeps).
    """
    _, small_peak = _traced(prepare, work, small)
    result, large_peak = _traced(prepare, work, large)
    return Slope(small, large, small_peak, large_peak, result)


def _traced(prepare: Callable[[int], In], work: Callable[[In], T], size: int) -> tuple[T, int]:
    given = prepare(size)  # freed when this returns, before the next run is traced
    return peak_memory(lambda: work(given))
