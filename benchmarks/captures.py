"""The event loop's lag while captures are written: issue 48's "p99 lag unchanged".

Failing chat streams (each sends a second chunk whose ``id`` differs from the first's:
``inconsistent_id``, an error, so every one qualifies for a capture) run through the
middleware on one asyncio loop, ``STREAMS`` of them over ``SECONDS`` of wall time (a
thousand a minute is the issue's attack; this is ten times that rate), each frame a body
message with a pause between frames, as a server paces a model's tokens. Beside them a
ticker asks the loop to wake it every millisecond and records how late each wake-up is:
the loop's lag. The same streams run with captures off (the anchor) and on (a directory
store in a temporary folder, the default rate and quota, redacted), in interleaved rounds;
the table gives each configuration's p50, p99 and maximum lag (least of the rounds, since
this machine is shared), and how many captures were written and rate-limited.

What moves the lag with captures on is the capture writer's thread (redaction is Python,
so it holds the interpreter's lock while it runs) and the recording of each frame in the
middleware's ``send``. Wall-clock figures on a shared machine: compare the two rows of one
run, never runs on different days. Run: ``python -m benchmarks.captures``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._timing import print_table, write_results
from benchmarks.check_openai import openai_chat_frames
from streamguard import StreamGuardMiddleware

__all__ = ["main"]

STREAMS = 1_000
SECONDS = 6.0
ROUNDS = 3
FRAMES = 20
#: The pause between two frames of a stream.
FRAME_GAP_S = 0.002
TICK_S = 0.001
CHAT = "/v1/chat/completions"
_REQUEST = json.dumps({"model": "gpt-5-mini", "stream": True, "messages": []}).encode()


def _failing_frames() -> list[bytes]:
    frames = openai_chat_frames(chunks=FRAMES)
    second = json.loads(frames[1][len(b"data: ") :])
    second["id"] = "chatcmpl-another"
    frames[1] = b"data: " + json.dumps(second, separators=(",", ":")).encode() + b"\n\n"
    return frames


FRAMES_SENT = _failing_frames()


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await receive()
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for frame in FRAMES_SENT:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        await asyncio.sleep(FRAME_GAP_S)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(app: Any) -> None:
    request = {"type": "http.request", "body": _REQUEST, "more_body": False}

    async def receive() -> dict[str, Any]:
        return request

    async def send(message: dict[str, Any]) -> None:
        return None

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": CHAT,
        "raw_path": CHAT.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)


async def _ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(TICK_S)
        lags.append(time.perf_counter() - asked - TICK_S)


async def _round(capture: bool, directory: Path) -> dict[str, float]:
    options: dict[str, Any] = {"routes": {CHAT: "openai_chat"}, "metrics": False}
    if capture:
        options["capture"] = {"directory": str(directory)}
    app = StreamGuardMiddleware(_app, **options)
    lags: list[float] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(lags, stop))
    tasks = []
    for _ in range(STREAMS):
        tasks.append(asyncio.create_task(_stream(app)))
        await asyncio.sleep(SECONDS / STREAMS)
    await asyncio.gather(*tasks)
    captures = app.captures
    if captures is not None:
        await asyncio.to_thread(captures.writer.flush)
    stop.set()
    await ticker
    lags.sort()
    return {
        "p50_ms": statistics.median(lags) * 1e3,
        "p99_ms": lags[int(len(lags) * 0.99)] * 1e3,
        "max_ms": lags[-1] * 1e3,
        "written": float(captures.writer.written) if captures is not None else 0.0,
        "rate_limited": float(captures.rate_limited) if captures is not None else 0.0,
    }


def captures_lag(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    import structlog

    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # no output
    best: dict[bool, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(rounds):
            for capture in (False, True):
                directory = Path(folder) / f"round-{number}"
                figures = asyncio.run(_round(capture, directory))
                kept = best.get(capture)
                if kept is None or figures["p99_ms"] < kept["p99_ms"]:
                    best[capture] = figures
    structlog.reset_defaults()
    names = {False: "captures off", True: "captures on (default, redacted)"}
    return [{"case": names[capture], **best[capture]} for capture in (False, True)]


def main(argv: list[str] | None = None) -> int:
    rows = captures_lag()
    print_table(rows)
    print(
        f"\n{STREAMS} failing streams of {len(FRAMES_SENT)} frames over {SECONDS:.0f} s a round, "
        f"{ROUNDS} rounds, the least p99 of each; results in "
        f"{write_results('captures', rows)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
