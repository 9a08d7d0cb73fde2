"""Every performance budget, for both builds of the core, from the results the benchmarks wrote.

``make bench`` runs each benchmark once per build (``benchmarks/results/<name>.<build>.json``)
and then this, which prints one table: each budget of ``docs/performance.md``, the ratio
(or, for issue 45's budgets, the µs added to the app alone in the same run) measured under
the compiled and the pure-Python core, and whether it was met. A budget with
no result file says so (a benchmark that was not run), never passes by default.
Run: ``python -m benchmarks.budgets``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks._timing import RESULTS

__all__ = ["BUDGETS", "Budget", "main"]

Rows = list[dict[str, Any]]
BUILDS = ("compiled", "pure")


@dataclass(frozen=True)
class Budget:
    """One line of the table: what is measured, its limit, and how to read it from rows."""

    what: str
    benchmark: str
    limit: float
    measure: Callable[[Rows], float]
    #: "at most" (a ratio or a share) or "at least"; a figure exactly at the limit passes.
    at_most: bool = True


def _worst(key: str, prefix: str = "") -> Callable[[Rows], float]:
    def measure(rows: Rows) -> float:
        values = [
            float(row[key])
            for row in rows
            if key in row and str(row.get("case", "")).startswith(prefix)
        ]
        if not values:
            raise LookupError(f"no rows with {key} for {prefix or 'any case'}")
        return max(values)

    return measure


def _e2e(app: str) -> Callable[[Rows], float]:
    def measure(rows: Rows) -> float:
        for row in rows:
            if row.get("middleware") == "streamguard" and row.get("app", "raw") == app:
                return float(row["stream_vs_none"])
        raise LookupError(f"no streamguard row for the {app} app")

    return measure


def _json_endpoint(rows: Rows) -> float:
    for row in rows:
        if row.get("middleware") == "streamguard" and row.get("app", "raw") == "raw":
            return float(row["json_vs_none"])
    raise LookupError("no streamguard row for the JSON endpoint")


def _scale_share(rows: Rows) -> float:
    for row in rows:
        if "streamguard_share_of_cpu" in row:
            if not row.get("all_completed_and_gauge_zero"):
                raise LookupError("the load run's reports or gauge were wrong")
            return float(row["streamguard_share_of_cpu"])
    raise LookupError("no load-run row")


def _production(case: str, key: str) -> Callable[[Rows], float]:
    """A figure of ``benchmarks.production``: ``key`` of the row of ``case``."""

    def measure(rows: Rows) -> float:
        for row in rows:
            if row.get("case") == case:
                return float(row[key])
        raise LookupError(f"no row {case!r}")

    return measure


BUDGETS: tuple[Budget, ...] = (
    Budget("OpenAI full check vs split + orjson.loads (worst cut)", "check_openai", 1.0,
           _worst("vs_split")),
    Budget("OpenAI full check vs the SDK's decode + json.loads (worst cut)", "check_openai",
           0.2, _worst("vs_sdk")),
    Budget("OpenAI stream of malformed chunks vs the healthy stream", "check_openai", 2.0,
           _worst("malformed_vs_healthy")),
    Budget("Anthropic full check vs split + orjson.loads (worst cut)", "check_anthropic", 1.2,
           _worst("ratio_vs_anchor")),
    Budget("Responses full check vs split + orjson.loads (worst cut)", "check_responses", 1.2,
           _worst("ratio_vs_anchor")),
    Budget("parse only vs the blank-line split (worst of 12 cases)", "parse", 2.0,
           _worst("vs_floor")),
    Budget("end to end, bare ASGI app: server CPU per frame vs none", "e2e", 1.3, _e2e("raw")),
    Budget("end to end, FastAPI + model_dump_json: server CPU vs none", "e2e", 1.15,
           _e2e("fastapi")),
    Budget("1,000 concurrent streams: streamguard's share of server CPU", "e2e", 0.15,
           _scale_share),
    Budget("a JSON response (not watched): server CPU vs none, within noise", "e2e", 1.1,
           _json_endpoint),
    # Issue 45, in process, µs added to the app alone in the same run (compiled build).
    Budget("issue 45: µs added per chat frame by the shell alone (watched, not parsed, "
           "default sinks)", "production", 0.15,
           _production("chat stream: shell (watched, not parsed), default sinks",
                       "added_us_per_frame")),
    Budget("issue 45: µs added per chat frame, every-stream tier (sample_rate=0)",
           "production", 0.3,
           _production("chat stream: every-stream tier (sample_rate=0)", "added_us_per_frame")),
    Budget("issue 45: µs added per frame, full OpenAI chat check", "production", 0.5,
           _production("chat stream: full check", "added_us_per_frame")),
    Budget("issue 45: µs added per frame, full Anthropic check", "production", 0.7,
           _production("anthropic stream: full check", "added_us_per_frame")),
    Budget("issue 45: µs added per frame, full Responses check", "production", 0.7,
           _production("responses stream: full check", "added_us_per_frame")),
    Budget("issue 45: µs a stream's fixed cost (3-frame chat stream, default sinks, one JSON "
           "summary line: summaries=all)", "production", 40.0,
           _production("3 frames: summaries=all (one JSON line)", "added_us_per_stream")),
)  # fmt: skip


def _load(benchmark: str, build: str) -> Rows | None:
    path = RESULTS / f"{benchmark}.{build}.json"
    if not path.exists():
        return None
    rows: Rows = json.loads(path.read_text())
    return rows


def _cell(budget: Budget, rows: Rows | None) -> tuple[str, bool]:
    if rows is None:
        return "not run", False
    try:
        value = budget.measure(rows)
    except (LookupError, KeyError, ValueError) as error:
        return f"no figure ({error})", False
    met = value <= budget.limit if budget.at_most else value >= budget.limit
    return f"{value:.2f} {'met' if met else 'MISSED'}", met


def table(budgets: Iterable[Budget] = BUDGETS) -> tuple[list[list[str]], int]:
    """The rows of the budget table, and how many (budget, build) cells were missed."""
    lines = [["budget", "limit", *BUILDS]]
    missed = 0
    for budget in budgets:
        cells = []
        for build in BUILDS:
            text, met = _cell(budget, _load(budget.benchmark, build))
            missed += not met
            cells.append(text)
        lines.append([budget.what, f"{'<=' if budget.at_most else '>='} {budget.limit}", *cells])
    return lines, missed


def main() -> int:
    lines, missed = table()
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    for number, line in enumerate(lines):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if number == 0:
            print("  ".join("-" * width for width in widths))
    print(f"\n{missed} of {2 * (len(lines) - 1)} budget cells missed (or not measured)")
    return 0  # a report, not a gate: budgets are judged by reading the figures


if __name__ == "__main__":
    sys.exit(main())
