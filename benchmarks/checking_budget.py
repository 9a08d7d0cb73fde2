"""What the checking-time budget (issue 44) costs a healthy frame, in one run.

The same OpenAI chat stream as ``benchmarks.check_openai`` (5,004 frames, one per chunk),
fed with the budget on and off in the same process, interleaved, 25 times each; µs per
frame of thread CPU time, the least and the first quartile of each:

* ``monitor``: ``StreamMonitor.feed`` per chunk, ``checking_budget_s`` unlimited or not;
* ``middleware``: an ASGI app sending each chunk as a body message to a ``send`` that does
  nothing, under ``StreamGuardMiddleware`` (metrics and logs off), ``checking_budget_ms``
  0 (off) or 500 (the default).

The difference is one clock read per chunk and the arithmetic around it. Not part of
``make bench``: it measures one change, not a budget. Run:
``python -m benchmarks.checking_budget``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from benchmarks._timing import build
from benchmarks.check_openai import REQUEST, openai_chat_frames
from streamguard import StreamGuardMiddleware, StreamMonitor

__all__ = ["main"]

ROUNDS = 25


def _monitor(frames: list[bytes], budget_s: float) -> float:
    monitor = StreamMonitor("openai_chat", request=REQUEST, checking_budget_s=budget_s)
    started = time.thread_time()
    for frame in frames:
        monitor.feed(frame)
    return (time.thread_time() - started) / len(frames) * 1e6


def _middleware(frames: list[bytes], budget_ms: float) -> float:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        start = {"type": "http.response.start", "status": 200,
                 "headers": [(b"content-type", b"text/event-stream")]}  # fmt: skip
        await send(start)
        for frame in frames:
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    guarded = StreamGuardMiddleware(
        app,
        protocol="openai_chat",
        metrics=False,
        logs={"enabled": False},
        checking_budget_ms=budget_ms,
    )

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}

    async def one() -> float:
        started = time.thread_time()
        await guarded(scope, receive, send)
        return (time.thread_time() - started) / len(frames) * 1e6

    return asyncio.run(one())


def main() -> None:
    frames = list(openai_chat_frames())
    cases: list[tuple[str, Callable[[list[bytes], float], float], float, float]] = [
        ("monitor", _monitor, 0.0, 1e9),
        ("middleware", _middleware, 0.0, 500.0),
    ]
    print(f"[streamguard core: {build()} build] µs per frame, {len(frames)} frames")
    for name, run, off, on in cases:
        without: list[float] = []
        with_budget: list[float] = []
        for _ in range(ROUNDS):
            without.append(run(frames, off))
            with_budget.append(run(frames, on))
        without.sort()
        with_budget.sort()
        quartile = ROUNDS // 4
        print(
            f"{name}: off {without[0]:.3f} (q1 {without[quartile]:.3f}), "
            f"on {with_budget[0]:.3f} (q1 {with_budget[quartile]:.3f}); "
            f"cost {with_budget[0] - without[0]:+.3f} "
            f"(q1 {with_budget[quartile] - without[quartile]:+.3f})"
        )


if __name__ == "__main__":
    main()
