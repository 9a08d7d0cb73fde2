"""The CPU cost of the liveness timers with many streams open.

1,000 (``--streams``) watched streams are opened through the middleware in one event loop
and left idle; the process CPU time over a fixed window is measured with the timers on
(one sweeper task polls every open stream each interval) and, as the anchor in the same
run, with the timers off. Run: ``python -m benchmarks.timers``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from benchmarks._timing import print_table, write_results
from streamguard import StreamGuardMiddleware


async def idle_cpu(streams: int, window: float, timers: dict[str, Any]) -> tuple[float, float]:
    """CPU seconds used while ``streams`` watched streams sit open for ``window`` seconds."""
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": b"data: hi\n\n", "more_body": True})
        await release.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    middleware = StreamGuardMiddleware(app, metrics=False, logs={"enabled": False}, timers=timers)
    scope = {"type": "http", "method": "GET", "path": "/stream", "headers": []}

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        return None

    tasks = [asyncio.create_task(middleware(dict(scope), receive, send)) for _ in range(streams)]
    await asyncio.sleep(0.2)  # all streams open
    assert middleware.in_flight == streams
    start = time.process_time()
    await asyncio.sleep(window)
    used = time.process_time() - start
    release.set()
    await asyncio.gather(*tasks)
    return used, middleware.poll_interval


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--window", type=float, default=3.0)
    args = parser.parse_args()

    rows = []
    anchor, _ = asyncio.run(idle_cpu(args.streams, args.window, {"enabled": False}))
    for label, timers in (
        ("default timers (grace 5 s, idle 60 s)", {}),
        ("short timers (grace 0.2 s)", {"body_end_grace_s": 0.2}),
    ):
        used, interval = asyncio.run(idle_cpu(args.streams, args.window, timers))
        sweeps = args.window / interval
        rows.append(
            {
                "case": label,
                "streams": args.streams,
                "poll_interval_s": interval,
                "cpu_share_of_a_core": used / args.window,
                "anchor_cpu_share": anchor / args.window,
                "us_per_stream_per_sweep": max(used - anchor, 0.0) / sweeps / args.streams * 1e6,
            }
        )
    print_table(rows)
    path = write_results("timers", rows)
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
