"""Where a healthy frame's cost goes, part by part, in one run (issue 26).

Per protocol, one frame per chunk, µs per frame, each the least CPU time of seven runs:

* ``loop``: iterating the chunks (the floor under every row);
* ``parse``: ``EventParser.feed`` per chunk;
* ``check`` / ``check_full``: the checker alone (``Checker.on_event``) over the parsed
  events, with the shape cache and without;
* ``monitor``: ``StreamMonitor.feed`` per chunk (parse, check and the bookkeeping);
  ``bookkeeping`` is what it costs beyond ``parse`` and ``check``;
* ``asgi_bare`` / ``asgi_guarded``: an ASGI app sending each chunk as a body message to a
  ``send`` that does nothing, alone and under ``StreamGuardMiddleware`` (metrics and logs
  off); ``middleware`` is the difference, ``wrapper`` what it adds beyond ``monitor``.

No budget is read from here: it says which part to work on. Run:
``python -m benchmarks.parts``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from benchmarks._anchors import without_shape_cache
from benchmarks._timing import best_of, print_table, write_results
from benchmarks.check_anthropic import anthropic_frames
from benchmarks.check_openai import REQUEST, openai_chat_frames
from benchmarks.check_responses import responses_frames
from streamguard import StreamGuardMiddleware, StreamMonitor
from streamguard.protocols import CHECKERS
from streamguard.sse import Event, EventParser

__all__ = ["main", "parts"]


def _asgi(chunks: list[bytes], protocol: str, guarded: bool) -> Callable[[], object]:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        start = {"type": "http.response.start", "status": 200,
                 "headers": [(b"content-type", b"text/event-stream")]}  # fmt: skip
        await send(start)
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    served = (
        StreamGuardMiddleware(app, protocol=protocol, metrics=False, logs={"enabled": False})
        if guarded
        else app
    )
    scope = {"type": "http", "method": "POST", "path": "/stream", "headers": []}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    def run() -> object:
        return asyncio.run(served(dict(scope), receive, send))

    return run


def parts(name: str, protocol: str, chunks: list[bytes], request: Any) -> dict[str, Any]:
    frames = len(chunks)
    parser = EventParser()
    events: list[Event] = [event for chunk in chunks for event in parser.feed(chunk)]

    def loop() -> None:
        for chunk in chunks:
            len(chunk)

    def parse() -> None:
        feed = EventParser().feed
        for chunk in chunks:
            feed(chunk)

    def check() -> None:
        checker = CHECKERS[protocol](request)
        on_event = checker.on_event
        for index, event in enumerate(events):
            on_event(event, index)

    def monitor() -> None:
        feed = StreamMonitor(protocol, request=request).feed
        for chunk in chunks:
            feed(chunk)

    us = {
        label: best_of(run) / frames * 1e6
        for label, run in (
            ("loop", loop),
            ("parse", parse),
            ("check", check),
            ("check_full", without_shape_cache(check)),
            ("monitor", monitor),
            ("asgi_bare", _asgi(chunks, protocol, guarded=False)),
            ("asgi_guarded", _asgi(chunks, protocol, guarded=True)),
        )
    }
    middleware = us["asgi_guarded"] - us["asgi_bare"]
    return {
        "case": name,
        "frames": frames,
        **us,
        "bookkeeping": us["monitor"] - us["parse"] - us["check"],
        "middleware": middleware,
        "wrapper": middleware - us["monitor"],
    }


def main() -> int:
    rows = [
        parts("openai_chat", "openai_chat", openai_chat_frames(), REQUEST),
        parts("anthropic", "anthropic", anthropic_frames(), None),
        parts("openai_responses", "openai_responses", responses_frames(), None),
    ]
    print_table(rows)
    path = write_results("parts", rows)
    print(f"\nµs per frame, one frame per chunk; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
