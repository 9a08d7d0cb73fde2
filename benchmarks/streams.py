"""What a short stream costs beyond its frames, in process (issue 26's 1,000 streams).

``benchmarks.e2e``'s load run serves 1,000 paced streams of 100 chat frames at once, and
streamguard's share of the server's CPU there is far above its per-frame cost on one long
stream. This benchmark takes the same streams apart without a server: the app of the load
run (``benchmarks.e2e_app``'s ``/paced`` frames and logging) is driven by a scripted
ASGI driver whose ``send`` suspends the app after every message, and 1,000 streams are
taken in turn, one message each, as a server interleaves paced streams (no sleep, no I/O).
Each configuration's figure is the least CPU time of five interleaved rounds, per stream
and per frame, against the app alone (the anchor) in the same run:

* ``noop``: a pure ASGI middleware that only forwards, the floor of any middleware;
* ``streamguard-bare``: streamguard with its logs and metrics off;
* ``+metrics``, ``+logs``: one of them on; ``streamguard``: the default (both on);
* ``+logs, every summary``: the logs with ``summaries="all"``, a line for every healthy
  stream (the default logs only notable ones; this row is what that default saves);
* ``streamguard-full``: the default with the shape cache off (every frame parsed);
* ``one-at-a-time``: the default, each stream run to its end before the next starts
  (what interleaving costs: a stream's state is cold when its next frame comes);
* ``... (busy)``: ``none``, ``noop``, ``streamguard-bare`` and the default again, with the
  driver doing about 20 µs of unrelated work (``server_work``: JSON in and out, a regular
  expression) after every message, as a server does between two frames of one stream
  (the load run's app alone costs about 20 µs of uvicorn's CPU a frame). Between two
  frames, that work takes streamguard's code and data out of the CPU's caches, as a real
  server's does: compared with ``none (busy)``, these rows show part of the gap between
  the plain rows and what ``benchmarks.load_parts`` measures under uvicorn, in about a
  minute.

No budget is read from here. Run: ``python -m benchmarks.streams``.
"""

from __future__ import annotations

import json
import re
import sys
import types
from collections.abc import Generator
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks._timing import drive, print_table, write_results
from benchmarks.e2e_app import PACED_EVENTS, STREAM, NoopMiddleware
from streamguard import StreamGuardMiddleware
from streamguard.protocols._skeleton import learning

__all__ = ["main", "streams"]

#: The frames of one paced stream, as ``benchmarks.e2e_app`` serves ``/paced``.
FRAMES = STREAM[: PACED_EVENTS - 2] + STREAM[-2:]
STREAMS = 1_000
ROUNDS = 5
_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_ROUTES = {"/paced": "openai_chat"}
#: What ``server_work`` reads and writes: a small JSON document and a pattern over it.
_DOCUMENT = json.dumps({f"k{i}": [i, str(i) * 5, {"x": i * 1.5}] for i in range(8)})
_PATTERN = re.compile(r'"k(\d+)": \[(\d+)')


def server_work() -> None:
    """About 20 µs of work that is not streamguard's: JSON and a pattern, mostly in C."""
    _PATTERN.findall(json.dumps(json.loads(_DOCUMENT)))


@types.coroutine
def _next_turn() -> Generator[None, None, None]:
    yield  # back to the driver: the other streams go first


async def _server_send(message: Message) -> None:
    await _next_turn()


async def _busy_server_send(message: Message) -> None:
    server_work()
    await _next_turn()


async def _receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    for frame in FRAMES:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _scope() -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/paced",
        "raw_path": b"/paced",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"bench")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def _run(served: ASGIApp, interleaved: bool = True, busy: bool = False) -> float:
    """CPU seconds for ``STREAMS`` streams through ``served``, taken in turn or one by one,
    with ``server_work`` after each message when ``busy``."""
    send = _busy_server_send if busy else _server_send
    return drive(
        (served(_scope(), _receive, send).__await__() for _ in range(STREAMS)), interleaved
    )


def streams() -> list[dict[str, Any]]:
    def guarded(**options: Any) -> ASGIApp:
        return StreamGuardMiddleware(_app, routes=_ROUTES, **options)

    quiet: dict[str, Any] = {"logs": {"enabled": False}}
    noop, bare, default = NoopMiddleware(_app), guarded(**quiet, metrics=False), guarded()
    # app, interleaved, learning, busy
    configurations: dict[str, tuple[ASGIApp, bool, bool, bool]] = {
        "none": (_app, True, True, False),
        "noop": (noop, True, True, False),
        "streamguard-bare": (bare, True, True, False),
        "+metrics": (guarded(**quiet), True, True, False),
        "+logs": (guarded(metrics=False), True, True, False),
        "+logs, every summary": (
            guarded(metrics=False, logs={"summaries": "all"}),
            True,
            True,
            False,
        ),
        "streamguard": (default, True, True, False),
        "streamguard-full": (guarded(), True, False, False),
        "one-at-a-time": (guarded(), False, True, False),
        "none (busy)": (_app, True, True, True),
        "noop (busy)": (noop, True, True, True),
        "streamguard-bare (busy)": (bare, True, True, True),
        "streamguard (busy)": (default, True, True, True),
    }
    best = dict.fromkeys(configurations, float("inf"))
    for _ in range(ROUNDS):
        for name, (served, interleaved, learns, busy) in configurations.items():
            learning(learns)
            try:
                best[name] = min(best[name], _run(served, interleaved, busy))
            finally:
                learning(True)
    frames = len(FRAMES) + 1  # and the message that ends the body

    def row(name: str, seconds: float) -> dict[str, Any]:
        anchor = best["none (busy)" if name.endswith("(busy)") else "none"]
        return {
            "middleware": name,
            "us_per_stream": seconds / STREAMS * 1e6,
            "us_per_frame": seconds / (STREAMS * frames) * 1e6,
            "added_us_per_stream": (seconds - anchor) / STREAMS * 1e6,
            "vs_none": seconds / anchor,
        }

    return [row(name, seconds) for name, seconds in best.items()]


def main() -> int:
    rows = streams()
    print_table(rows)
    path = write_results("streams", rows)
    print(f"\n{STREAMS} streams of {len(FRAMES)} frames; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
