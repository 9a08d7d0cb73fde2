"""Memory: a monitor holds O(1) state whatever the stream's length.

1. Peak traced allocations while one monitor checks a 1,000-event and a 100,000-event
   OpenAI chat stream (fed one frame per chunk, as a server sends it): the two peaks
   should be equal within a few KiB.
2. The memory of 10,000 open streams (each monitor has seen its first chunks), in bytes
   per stream.

Run: ``python -m benchmarks.memory``.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Iterator

from benchmarks._timing import print_table, write_results
from benchmarks.e2e_app import _FINISH, _chunk
from streamguard import StreamEnd, StreamMonitor
from streamguard.liveness import LivenessLimits


def frames(events: int) -> Iterator[bytes]:
    for i in range(events - 2):
        yield _chunk(i)
    yield _FINISH
    yield b"data: [DONE]\n\n"


def peak_for(events: int) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        monitor = StreamMonitor("openai_chat", liveness=LivenessLimits())
        for frame in frames(events):
            monitor.feed(frame)  # each frame is built on the fly, so only the monitor accumulates
        report = monitor.finish(StreamEnd.BODY_ENDED)
        assert report.findings == (), report.findings
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def per_open_stream(streams: int) -> float:
    first = [_chunk(0), _chunk(1), _chunk(2)]
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        monitors = []
        for _ in range(streams):
            monitor = StreamMonitor("openai_chat", liveness=LivenessLimits())
            for frame in first:
                monitor.feed(frame)
            monitors.append(monitor)
        used = tracemalloc.get_traced_memory()[0] - baseline
        assert len(monitors) == streams
        return used / streams
    finally:
        tracemalloc.stop()


def main() -> int:
    small, large = peak_for(1_000), peak_for(100_000)
    per_stream = per_open_stream(10_000)
    rows = [
        {"measure": "peak, 1,000-event stream (KiB)", "value": small / 1024},
        {"measure": "peak, 100,000-event stream (KiB)", "value": large / 1024},
        {"measure": "difference (KiB)", "value": (large - small) / 1024},
        {"measure": "per open stream, 10,000 open (bytes)", "value": per_stream},
    ]
    print_table(rows)
    path = write_results("memory", rows)
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
