"""Timing helpers: every figure is a ratio against an anchor measured in the same run."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(function: Callable[[], object], repeats: int = 7) -> float:
    """The least CPU time of ``repeats`` runs, in seconds.

    CPU time of this thread, not wall time: on a shared two-core machine wall time counts
    the waits for a core too, which made same-run ratios swing by 1.5x; thread CPU time
    repeats within a few percent.
    """
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.thread_time()
        function()
        best = min(best, time.thread_time() - start)
    return best


def drive(streams: Iterable[Generator[Any, None, Any]], interleaved: bool) -> float:
    """CPU seconds to run ``streams`` (the ``__await__`` of each ASGI call, whose server
    ``send`` suspends it after every message) to their ends: taken in turn, one message
    each, as a server interleaves paced streams, or each run to its end before the next
    starts. Collected first, so that no earlier garbage is paid for here."""
    waiting = list(streams)
    gc.collect()
    started = time.thread_time()
    if interleaved:
        while waiting:
            still = []
            for stream in waiting:
                try:
                    stream.send(None)
                except StopIteration:
                    continue
                still.append(stream)
            waiting = still
    else:
        for stream in waiting:
            try:
                while True:
                    stream.send(None)
            except StopIteration:
                pass
    return time.thread_time() - started


def build() -> str:
    """Which build of the core this process runs: ``compiled`` or ``pure``."""
    import streamguard

    return "compiled" if streamguard.compiled else "pure"


def write_results(name: str, rows: list[dict[str, Any]]) -> Path:
    """Keep a benchmark's rows as ``results/<name>.<build>.json``, one file per build."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.{build()}.json"
    path.write_text(json.dumps(rows, indent=2) + "\n")
    return path


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"[streamguard core: {build()} build]")
    headers = list(rows[0])
    cells = [[_cell(row[h]) for h in headers] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
