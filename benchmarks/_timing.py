"""Timing helpers: every figure is a ratio against an anchor measured in the same run."""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def best_of(function: Callable[[], object], repeats: int = 7) -> float:
    """The fastest of ``repeats`` runs, in seconds: the least disturbed by a noisy machine."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def write_results(name: str, rows: list[dict[str, Any]]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(rows, indent=2) + "\n")
    return path


def print_table(rows: list[dict[str, Any]]) -> None:
    headers = list(rows[0])
    cells = [[_cell(row[h]) for h in headers] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def _cell(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
