"""Memory: a monitor holds O(1) state whatever the stream's length.

1. Peak traced allocations while one monitor checks a 1,000-event and a 100,000-event
   OpenAI chat stream (fed one frame per chunk, as a server sends it): the two peaks
   should be equal within a few KiB.
2. The memory of 10,000 open streams (each monitor has seen its first chunks), in bytes
   per stream.
3. What an idle open stream costs through the whole middleware: 2,000 and 10,000 requests
   to a raw ASGI app that sent its first two chunks and waits, traced with and without
   ``StreamGuardMiddleware`` in front; the difference per stream (budget: 2 KiB).
4. The peak of one monitor over each hostile stream of ``tests/test_hostile.py`` (fed in
   64 KiB chunks), against the documented per-stream ceiling.

Run: ``python -m benchmarks.memory``.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tracemalloc
from collections.abc import Iterator
from typing import Any

from benchmarks._timing import print_table, write_results
from benchmarks.e2e_app import _FINISH, _chunk
from streamguard import StreamEnd, StreamGuardMiddleware, StreamMonitor
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


_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream")],
}
_REQUEST = {"type": "http.request", "body": b'{"model":"m","stream":true,"messages":[]}'}


async def _idle_app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send(_START)
    for index in range(2):
        await send({"type": "http.response.body", "body": _chunk(index), "more_body": True})
    await asyncio.Event().wait()  # open and idle until cancelled


async def _traced_open_streams(app: Any, streams: int) -> float:
    """Traced bytes held per open stream, ``streams`` requests to ``app`` waiting at once."""

    async def receive() -> dict[str, Any]:
        return _REQUEST

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tasks = [asyncio.ensure_future(app(dict(scope), receive, send)) for _ in range(streams)]
        for _ in range(10):
            await asyncio.sleep(0)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return used / streams


def idle_stream_cost(streams: int) -> tuple[float, float]:
    """Bytes per idle open stream without and with the middleware, in one process."""

    async def measure() -> tuple[float, float]:
        bare = await _traced_open_streams(_idle_app, streams)
        guarded = StreamGuardMiddleware(_idle_app, metrics=False)
        return bare, await _traced_open_streams(guarded, streams)

    return asyncio.run(measure())


def hostile_peaks() -> list[tuple[str, int]]:
    """The traced peak of one stream's check over each hostile stream of the tests."""
    from streamguard import check_stream
    from tests.test_hostile import HOSTILE_STREAMS

    peaks = []
    for name, (protocol, make) in sorted(HOSTILE_STREAMS.items()):
        stream = make()
        chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
        del stream
        gc.collect()
        tracemalloc.start()
        try:
            check_stream(iter(chunks), protocol=protocol)
            peaks.append((name, tracemalloc.get_traced_memory()[1]))
        finally:
            tracemalloc.stop()
    return peaks


def main() -> int:
    small, large = peak_for(1_000), peak_for(100_000)
    per_stream = per_open_stream(10_000)
    rows = [
        {"measure": "peak, 1,000-event stream (KiB)", "value": small / 1024},
        {"measure": "peak, 100,000-event stream (KiB)", "value": large / 1024},
        {"measure": "difference (KiB)", "value": (large - small) / 1024},
        {"measure": "per open stream, 10,000 open (bytes)", "value": per_stream},
    ]
    for streams in (2_000, 10_000):
        bare, guarded = idle_stream_cost(streams)
        rows.append(
            {
                "measure": f"idle stream through the middleware, {streams:,} open: "
                "streamguard's share (bytes; budget 2048)",
                "value": guarded - bare,
            }
        )
    from tests.test_hostile import PER_STREAM_CEILING

    for name, peak in hostile_peaks():
        rows.append(
            {
                "measure": f"peak, {name} (MiB; ceiling {PER_STREAM_CEILING / 2**20:.0f})",
                "value": peak / 2**20,
            }
        )
    print_table(rows)
    path = write_results("memory", rows)
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
