"""Where the load run's cost goes (issue 26): 1,000 concurrent paced streams, as in
``benchmarks/e2e.py``'s scale row, served under each of these, every server running side
by side and taken in turn each round (``benchmarks.e2e.sample_scale``); the CPU added and
the share are medians over the rounds of the paired difference with the app alone's sample
of the same round, ``server_cpu_s`` the median of the samples themselves:

* ``none``: the app alone (the anchor); ``noop``: a pure ASGI middleware that forwards;
* ``streamguard-excluded``: streamguard on a route it excludes (its shell: the ``send``
  wrapper and the decision), sinks and timers off;
* ``streamguard-quiet-sse``: the route checked as plain SSE (frames parsed, no JSON read),
  sinks and timers off;
* ``streamguard-quiet``: the route checked as OpenAI chat, sinks and timers off;
* ``streamguard``: the default configuration (metrics, logs and timers on).

Each row gives the CPU added per stream over ``none`` and per frame (a stream is
``STREAMGUARD_BENCH_PACED_EVENTS`` frames, 100 by default). No budget is read from here:
it says which part to work on. Run: ``python -m benchmarks.load_parts``.
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any

from benchmarks._timing import print_table, write_results
from benchmarks.e2e import sample_scale, share

__all__ = ["CONFIGS", "main"]

CONFIGS = (
    "none",
    "noop",
    "streamguard-excluded",
    "streamguard-quiet-sse",
    "streamguard-quiet",
    "streamguard",
)


def main() -> int:
    streams = int(os.environ.get("STREAMGUARD_BENCH_STREAMS", "1000"))
    events = int(os.environ.get("STREAMGUARD_BENCH_PACED_EVENTS", "100"))
    rounds = int(os.environ.get("STREAMGUARD_BENCH_ROUNDS", "6"))
    cpu, _metrics = sample_scale(CONFIGS, streams, rounds)
    none = cpu["none"]

    rows: list[dict[str, Any]] = []
    for name in CONFIGS:
        added = [mine - theirs for mine, theirs in zip(cpu[name], none, strict=True)]
        shares = [share(mine, theirs) for mine, theirs in zip(cpu[name], none, strict=True)]
        rows.append(
            {
                "middleware": name,
                "server_cpu_s": statistics.median(cpu[name]),
                "added_us_per_stream": statistics.median(added) / streams * 1e6,
                "added_us_per_frame": statistics.median(added) / (streams * events) * 1e6,
                "share_of_cpu": statistics.median(shares),
            }
        )
    print_table(rows)
    print(f"results in {write_results('load_parts', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
