"""Issue 45's in-process budgets: what a watched stream costs at production settings.

Issue 45 ("Every stream watched at production cost") sets budgets in µs, in process, for
the compiled build: what the middleware adds per frame (its shell alone, the every-stream
tier, full checking per protocol) and what a stream costs once (open, close, report, the
default sinks, one summary line through a JSON renderer). This benchmark measures all of
them in one process, against the same app with no middleware (the anchor) in the same run.

The app is a raw ASGI app that reads its request body (as a chat endpoint does, so that
streamguard's request-aware checks run) and sends one frame per body message, then waits
for its next token (it suspends, as an app waiting on its model does). A scripted driver
runs it. The server's ``send`` takes each message without waiting, as uvicorn's and
hypercorn's do while the client keeps up; the rows marked ``server's send waits`` run the
same with a ``send`` that suspends on every message, as one does under back-pressure (and
trio's always does). Nothing is written anywhere (no I/O). Each configuration's figure
is the least thread CPU time over ``ROUNDS`` interleaved rounds (every configuration once
per round, in turn). structlog is configured, for this benchmark only (restored after),
as a production service would: ``merge_contextvars``, ``add_log_level``, an ISO
``TimeStamper`` and ``structlog.processors.JSONRenderer()``, writing to a null sink that
counts the lines.

**Per frame** (``part`` ``frame``): a long stream (about 2,000 frames of
``benchmarks.check_openai``'s, ``check_anthropic``'s and ``check_responses``'s realistic
streams), run alone, and the same protocol's shortest healthy stream (one delta: 5, 7 and
9 frames), ``SHORT_STREAMS`` of them one after another. ``added_us_per_frame`` is the
configuration's time less the anchor's, the short stream's share taken out, over the frames
between the two: ``((long - none_long) - (short - none_short)) / (long frames - short
frames)``, so that a stream's fixed cost, which has its own budget, is not spread over the
frames. ``whole_added_us_per_frame`` is the plain ``(long - none_long) / frames``, with the
fixed cost in. On the chat stream:

* ``noop``: a pure ASGI middleware that only forwards (``benchmarks.e2e_app``'s), the
  floor of any middleware;
* ``shell``: streamguard on the same stream sent with ``Content-Encoding: gzip`` (the
  bytes are not compressed: nothing reads them): every stream is watched, counted, timed
  and reported, its frames neither parsed nor checked. ``default sinks`` (logs and metrics
  on, at their defaults) is the budget's "shell alone"; ``sinks off``
  (``logs={"enabled": False}``, ``metrics=False``) is reported beside it;
* ``every-stream tier``: the route as ``openai_chat`` with ``sample_rate=0``: every frame
  parsed, the end judged (``StreamMonitor.check_framing_only``), no payload rule; default
  sinks;
* ``sse``: the route checked as ``protocol="sse"``, plain SSE framing and no JSON, default
  sinks (the parser's own cost beside the tier's);
* ``full check``: the route as ``openai_chat``, default sinks;
* ``shell`` and ``full check`` again, with the server's ``send`` waiting on every message,
  against the app alone with that ``send``: the hand-over's way when the server does not
  take a message at once (``streamguard._forward``).

On the Anthropic and Responses streams: ``full check`` (``anthropic``,
``openai_responses``), default sinks, each against the app alone on the same stream.
Rows are named ``<stream> stream: <configuration>``.

**Per stream** (``part`` ``stream``): ``STREAMS`` chat streams of 3 frames (role, finish,
``[DONE]``, for a request without ``stream_options``) taken in turn, one message each, as a
server interleaves them (``benchmarks.streams``'s driver). ``added_us_per_stream`` is the
configuration's time less the app alone's, per stream; the 3 frames' checking is in it.

* ``noop``; ``sinks off`` (logs and metrics off: the stream's own open, check, close and
  report);
* ``default``: the default configuration. Its logs are ``summaries="notable"``, so a
  healthy stream logs no line;
* ``summaries=all``: the same with ``logs={"summaries": "all"}``, one summary line per
  stream through the JSON renderer: the budget's wording, so it is this row the budget
  reads (a default that skips the line does not meet it by skipping).

``summary_lines_per_stream`` is what the null sink received, per stream (checked: 1 and 0).
Every stream is checked once, before timing, to end ``completed`` with no finding (on the
gzip path, its ``compressed_stream`` only).
Budgets (issue 45), compiled build: the shell ≤ 0.15 µs a frame; the every-stream tier
≤ 0.3; full checking ≤ 0.5 (chat) and ≤ 0.7 (Anthropic,
Responses); a stream's fixed cost ≤ 40 µs. ``benchmarks.budgets`` reads them. Run:
``python -m benchmarks.production [--rounds N]`` (30 by default: well under a minute a
build on a two-core machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks._timing import drive, print_table, write_results
from benchmarks.check_anthropic import anthropic_frames
from benchmarks.check_openai import REQUEST, openai_chat_frames
from benchmarks.check_responses import responses_frames
from benchmarks.e2e_app import NoopMiddleware
from streamguard import StreamGuardMiddleware, StreamReport

__all__ = ["main", "production"]

ROUNDS = 30
#: The long streams' deltas: about 2,000 frames each.
DELTAS = 1_996
#: Short streams per sample, one after another, beside each long stream.
SHORT_STREAMS = 100
#: Streams of 3 frames per sample, taken in turn.
STREAMS = 1_000

CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
#: The chat stream again, sent with ``Content-Encoding: gzip``: watched, never parsed.
CHAT_GZIP = "/v1/chat/completions/gzip"
LONG, SHORT, THREE = b"", b"short", b"three"
_ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 4096,
    "stream": True,
    "messages": [{"role": "user", "content": "Write a long story."}],
}
_RESPONSES_REQUEST = {"model": "gpt-5-mini", "stream": True, "input": "Write a long story."}
#: A chat request that does not ask for usage: its healthy stream can be 3 frames.
_PLAIN_REQUEST = {key: value for key, value in REQUEST.items() if key != "stream_options"}


def _three_frames() -> list[bytes]:
    role, finish, _usage, done = openai_chat_frames(chunks=0)
    return [role, finish, done]


#: (path, query string) -> (the request body, the frames of the response).
STREAMS_SERVED: dict[tuple[str, bytes], tuple[bytes, list[bytes]]] = {
    (CHAT, LONG): (json.dumps(REQUEST).encode(), openai_chat_frames(chunks=DELTAS)),
    (CHAT, SHORT): (json.dumps(REQUEST).encode(), openai_chat_frames(chunks=1)),
    (CHAT, THREE): (json.dumps(_PLAIN_REQUEST).encode(), _three_frames()),
    (MESSAGES, LONG): (json.dumps(_ANTHROPIC_REQUEST).encode(), anthropic_frames(DELTAS)),
    (MESSAGES, SHORT): (json.dumps(_ANTHROPIC_REQUEST).encode(), anthropic_frames(1)),
    (RESPONSES, LONG): (json.dumps(_RESPONSES_REQUEST).encode(), responses_frames(deltas=DELTAS)),
    (RESPONSES, SHORT): (json.dumps(_RESPONSES_REQUEST).encode(), responses_frames(deltas=1)),
}
STREAMS_SERVED.update({(CHAT_GZIP, query): STREAMS_SERVED[CHAT, query] for query in (LONG, SHORT)})
_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_GZIP_HEADERS = [*_HEADERS, (b"content-encoding", b"gzip")]


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Read the request body, then send the stream of the path and query, a frame a
    message, waiting for the next token (the driver's next turn) after each."""
    await receive()
    _body, frames = STREAMS_SERVED[scope["path"], scope["query_string"]]
    headers = _GZIP_HEADERS if scope["path"] == CHAT_GZIP else _HEADERS
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for frame in frames:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        await _next_turn()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


@types.coroutine
def _next_turn() -> Generator[None, None, None]:
    yield  # back to the driver


async def _server_send(message: Message) -> None:
    """A server's ``send`` while the client keeps up: the message is taken at once."""


async def _waiting_server_send(message: Message) -> None:
    """A server's ``send`` under back-pressure (or trio's): it suspends on every message."""
    await _next_turn()


def _stream(served: ASGIApp, path: str, query: bytes, waits: bool = False) -> Awaitable[None]:
    body = STREAMS_SERVED[path, query][0]
    request = {"type": "http.request", "body": body, "more_body": False}

    async def receive() -> Message:
        return request

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"bench"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    return served(scope, receive, _waiting_server_send if waits else _server_send)


def _run(
    served: ASGIApp, path: str, query: bytes, streams: int, interleaved: bool, waits: bool = False
) -> float:
    """CPU seconds for ``streams`` streams through ``served``: taken in turn, one message
    each, or each run to its end before the next starts; ``waits``: the server's ``send``
    suspends on every message."""
    streamed = (_stream(served, path, query, waits).__await__() for _ in range(streams))
    return drive(streamed, interleaved)


class _NullSink:
    """Where the JSON lines go: counted, not kept."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += 1
        return len(text)

    def flush(self) -> None:
        return None


def _configure_structlog(sink: _NullSink) -> Callable[[], None]:
    """Configure structlog as a production service would, into ``sink``; returns the undo."""
    was_configured = structlog.is_configured()
    saved = structlog.get_config()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(20),  # INFO
        logger_factory=structlog.WriteLoggerFactory(file=sink),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )

    def restore() -> None:
        structlog.reset_defaults()
        if was_configured:
            structlog.configure(**saved)

    return restore


#: (name, path, middleware options or None for the app alone, "noop" for the no-op one).
_Setup = tuple[str, str, dict[str, Any] | str | None]
_SINKS_OFF: dict[str, Any] = {"logs": {"enabled": False}, "metrics": False}
#: The end of the name of a row whose server's ``send`` waits on every message.
WAITS = ", server's send waits"
PER_FRAME: tuple[_Setup, ...] = (
    ("none", CHAT, None),
    ("noop", CHAT, "noop"),
    ("shell (watched, not parsed), default sinks", CHAT_GZIP, {}),
    ("shell (watched, not parsed), sinks off", CHAT_GZIP, dict(_SINKS_OFF)),
    ("every-stream tier (sample_rate=0)", CHAT, {"sample_rate": 0.0}),
    ("sse (plain SSE framing, no JSON)", CHAT, {"protocol": "sse"}),
    ("full check", CHAT, {}),
    (f"none{WAITS}", CHAT, None),
    (f"shell (watched, not parsed), default sinks{WAITS}", CHAT_GZIP, {}),
    (f"full check{WAITS}", CHAT, {}),
    ("none", MESSAGES, None),
    ("full check", MESSAGES, {}),
    ("none", RESPONSES, None),
    ("full check", RESPONSES, {}),
)
PER_STREAM: tuple[_Setup, ...] = (
    ("none", CHAT, None),
    ("noop", CHAT, "noop"),
    ("sinks off", CHAT, _SINKS_OFF),
    ("default (summaries=notable: no line)", CHAT, {}),
    ("summaries=all (one JSON line)", CHAT, {"logs": {"summaries": "all"}}),
)
_PROTOCOLS = {
    CHAT: "openai_chat",
    CHAT_GZIP: "openai_chat",
    MESSAGES: "anthropic",
    RESPONSES: "openai_responses",
}
_STREAM_NAMES = {CHAT: "chat", CHAT_GZIP: "chat", MESSAGES: "anthropic", RESPONSES: "responses"}
#: The findings a healthy stream of the benchmark may carry: the gzip path's own.
_EXPECTED_RULES = {CHAT_GZIP: ["compressed_stream"]}


def _served(path: str, options: dict[str, Any] | str | None, **extra: Any) -> ASGIApp:
    if options is None:
        return app
    if options == "noop":
        return NoopMiddleware(app)
    assert isinstance(options, dict)
    options = dict(options)
    protocol = options.pop("protocol", _PROTOCOLS[path])
    return StreamGuardMiddleware(app, routes={path: protocol}, **options, **extra)


def _check_streams(setups: tuple[_Setup, ...], queries: tuple[bytes, ...]) -> None:
    """Every watched stream of the benchmark ends ``completed`` with no finding."""
    for name, path, options in setups:
        if not isinstance(options, dict):
            continue
        reports: list[StreamReport] = []
        served = _served(path, options, on_report=reports.append)
        for query in queries:
            _run(served, path, query, 1, interleaved=False, waits=name.endswith(WAITS))
        protocol = options.get("protocol", _PROTOCOLS[path])
        expected = _EXPECTED_RULES.get(path, [])
        for report in reports:
            rules = [finding.rule for finding in report.findings]
            if report.outcome.value != "completed" or rules != expected:
                raise AssertionError(f"{name}: {report.outcome} {report.findings[:3]}")
            if report.protocol != protocol:
                raise AssertionError(f"{name}: checked as {report.protocol}, not {protocol}")
        if len(reports) != len(queries):
            raise AssertionError(f"{name}: {len(reports)} reports for {len(queries)} streams")


def production(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    sink = _NullSink()
    restore = _configure_structlog(sink)
    try:
        return _measure(rounds, sink)
    finally:
        restore()


def _measure(rounds: int, sink: _NullSink) -> list[dict[str, Any]]:
    _check_streams(PER_FRAME, (LONG, SHORT))
    _check_streams(PER_STREAM, (THREE,))
    per_frame = [(name, path, _served(path, options)) for name, path, options in PER_FRAME]
    per_stream = [(name, path, _served(path, options)) for name, path, options in PER_STREAM]
    long_s = [float("inf")] * len(per_frame)
    short_s = [float("inf")] * len(per_frame)
    stream_s = [float("inf")] * len(per_stream)
    lines = [0] * len(per_stream)
    for _ in range(rounds):
        for i, (name, path, served) in enumerate(per_frame):
            before = sink.lines
            waits = name.endswith(WAITS)
            long_s[i] = min(long_s[i], _run(served, path, LONG, 1, False, waits))
            short = _run(served, path, SHORT, SHORT_STREAMS, False, waits)
            short_s[i] = min(short_s[i], short)
            # (A compressed stream logs its compressed_stream warning: the gzip rows' one
            # line a stream is part of the fixed cost the short streams take out.)
            if sink.lines != before and path != CHAT_GZIP:
                raise AssertionError(f"{name}: a healthy stream logged a line")
        for i, (_name, path, served) in enumerate(per_stream):
            before = sink.lines
            stream_s[i] = min(stream_s[i], _run(served, path, THREE, STREAMS, interleaved=True))
            lines[i] += sink.lines - before
    expected = [rounds * STREAMS if "summaries=all" in name else 0 for name, _, _ in per_stream]
    if lines != expected:
        raise AssertionError(f"summary lines {lines}, expected {expected}")

    rows: list[dict[str, Any]] = []
    anchor: dict[str, tuple[float, float]] = {}
    for i, (name, path, _served_app) in enumerate(per_frame):
        frames = len(STREAMS_SERVED[path, LONG][1])
        short_frames = len(STREAMS_SERVED[path, SHORT][1])
        long_one, short_one = long_s[i], short_s[i] / SHORT_STREAMS
        stream = _STREAM_NAMES[path]
        against = stream + (WAITS if name.endswith(WAITS) else "")  # (the anchor's key)
        if name.startswith("none"):
            anchor[against] = (long_one, short_one)
        none_long, none_short = anchor[against]
        added_long, added_short = long_one - none_long, short_one - none_short
        rows.append(
            {
                "part": "frame",
                "case": f"{stream} stream: {name}",
                "frames": f"{frames} / {short_frames}",
                "us_per_frame": long_one / frames * 1e6,
                "added_us_per_frame": (added_long - added_short) / (frames - short_frames) * 1e6,
                "whole_added_us_per_frame": added_long / frames * 1e6,
                "short_added_us_per_stream": added_short * 1e6,
            }
        )
    none_stream = stream_s[0] / STREAMS
    for i, (name, path, _served_app) in enumerate(per_stream):
        rows.append(
            {
                "part": "stream",
                "case": f"3 frames: {name}",
                "frames": str(len(STREAMS_SERVED[path, THREE][1])),
                "us_per_stream": stream_s[i] / STREAMS * 1e6,
                "added_us_per_stream": (stream_s[i] / STREAMS - none_stream) * 1e6,
                "summary_lines_per_stream": lines[i] / (rounds * STREAMS),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    rounds = parser.parse_args(argv).rounds
    started = time.perf_counter()
    rows = production(rounds)
    print_table([row for row in rows if row["part"] == "frame"])
    print()
    print_table([row for row in rows if row["part"] == "stream"])
    path = write_results("production", rows)
    print(
        f"\n{rounds} rounds, the least CPU time of each; per frame: one long stream and"
        f" {SHORT_STREAMS} short ones a sample; per stream: {STREAMS} streams of 3 frames"
        f" taken in turn; {time.perf_counter() - started:.0f} s; results in {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
