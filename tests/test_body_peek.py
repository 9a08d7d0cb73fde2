"""The request body the app reads is reduced to its facts as it arrives, never held.

Driven with the scripted ASGI driver: the body comes in the messages a server would send,
the app reads it, and the response (a stream or not) comes later.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from typing import Any

import pytest

from streamguard import Outcome, StreamGuardMiddleware, StreamReport

from .asgi_driver import Recorder, body, http_scope, sse_start
from .helpers import chat_choice, chat_chunk

#: An upload of 1 MiB in 16 messages, as a server hands a large body over.
UPLOAD = b'{"file": "' + b"a" * (1024 * 1024 - 40) + b'"}'
PARTS = 16
WAITING = 40


def messages(data: bytes, parts: int) -> list[dict[str, Any]]:
    size = -(-len(data) // parts)
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    return [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]


def waiting_app(read: list[int], release: asyncio.Event, stream: bool) -> Any:
    """Reads the whole body (keeping none of it), waits, then answers."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        read.append(1)
        await release.wait()
        if stream:
            await send(sse_start())
            await send(body(b"data: [DONE]\n\n", more=False))
        else:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send(body(b"{}", more=False))

    return app


def held_per_waiting_request(guard: bool, upload: bytes, **options: Any) -> float:
    """Traced memory per request while ``WAITING`` requests, their bodies read, wait."""
    read: list[int] = []
    incoming = messages(upload, PARTS)  # shared by every request: no copy of its own

    async def main() -> float:
        release = asyncio.Event()
        app = waiting_app(read, release, stream=False)
        if guard:
            app = StreamGuardMiddleware(app, metrics=False, **options)
        before = tracemalloc.get_traced_memory()[0]
        tasks = [
            asyncio.ensure_future(
                app(http_scope("POST", "/upload"), Recorder(list(incoming)).receive, _drop)
            )
            for _ in range(WAITING)
        ]
        while len(read) < WAITING:
            await asyncio.sleep(0.001)
        held = tracemalloc.get_traced_memory()[0] - before
        release.set()
        await asyncio.gather(*tasks)
        return held / WAITING

    tracemalloc.start()
    try:
        return asyncio.run(main())
    finally:
        tracemalloc.stop()


async def _drop(message: Any) -> None:
    pass


@pytest.mark.parametrize(
    ("upload", "options"),
    [
        (UPLOAD, {}),  # JSON, on a route that may stream: reduced to facts
        (b"--boundary\r\n" + UPLOAD, {}),  # not JSON: not kept at all
        (UPLOAD, {"exclude_paths": ["/upload"]}),  # never watched: not read at all
        (UPLOAD, {"watch_unlisted": False}),  # never watched: not read at all
    ],
)
def test_requests_waiting_after_an_upload_hold_no_copy(upload: bytes, options: Any) -> None:
    """Uploads of 1 MiB read by an app that answers later: the middleware adds a few
    hundred bytes per waiting request, not the body (it used to add about 1 MiB each)."""
    bare = held_per_waiting_request(False, upload)
    guarded = held_per_waiting_request(True, upload, **options)
    assert guarded - bare < 4 * 1024


def run_stream(request: bytes, parts: int, **options: Any) -> StreamReport:
    """A chat stream without a usage chunk, after ``request`` read in ``parts`` messages."""
    reports: list[StreamReport] = []
    stream = (
        chat_chunk(choices=[chat_choice(0, role="assistant", content="hi")])
        + chat_chunk(choices=[chat_choice(0, finish_reason="stop")])
        + b"data: [DONE]\n\n"
    )

    async def app(scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send(sse_start())
        await send(body(stream, more=False))

    middleware = StreamGuardMiddleware(
        app, protocol="openai_chat", on_report=reports.append, metrics=False, **options
    )

    async def main() -> None:
        recorder = Recorder(messages(request, parts))
        await middleware(http_scope("POST", "/v1/chat/completions"), recorder.receive, _drop)

    asyncio.run(main())
    [report] = reports
    return report


USAGE_ASKED = json.dumps(
    {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "pad": "x" * 300}
).encode()


@pytest.mark.parametrize("parts", [1, 3, len(USAGE_ASKED)])
def test_a_body_in_any_number_of_messages_gives_its_facts(parts: int) -> None:
    """``include_usage`` asked in a body of one, three or one-byte messages: the missing
    usage chunk is found every time."""
    report = run_stream(USAGE_ASKED, parts)
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, ["usage_missing"])


def test_a_body_that_does_not_ask_for_usage_is_clean() -> None:
    """The same request without ``include_usage``, in several messages: no finding."""
    request = json.dumps({"model": "m", "stream": True, "pad": "x" * 300}).encode()
    assert run_stream(request, 3).rules() == []


def test_whitespace_before_the_json_is_no_reason_to_stop() -> None:
    """A body that starts with blank lines, in several messages, is still read."""
    report = run_stream(b"\n  \n" + USAGE_ASKED, len(USAGE_ASKED) + 4)
    assert report.rules() == ["usage_missing"]


@pytest.mark.parametrize(
    ("request_body", "options", "note"),
    [
        (b"--boundary\r\n" + USAGE_ASKED, {}, "request body is not JSON"),
        (USAGE_ASKED, {"request_peek_bytes": 100}, "over request_peek_bytes=100"),
    ],
)
def test_a_body_that_cannot_give_facts_says_why(
    request_body: bytes, options: Any, note: str
) -> None:
    """A body that is no JSON, or larger than the peek, skips the request checks, and the
    report says why."""
    report = run_stream(request_body, 3, **options)
    assert report.rules() == []
    assert any(note in line for line in report.notes), report.notes


def test_a_failure_reading_the_body_is_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug while reading the request body never reaches the app's ``receive``: the
    stream is still checked, without request facts, and the failure is counted once."""
    import streamguard.middleware

    def broken(self: Any, message: Any) -> None:
        raise ZeroDivisionError("peek bug")

    monkeypatch.setattr(streamguard.middleware._Exchange, "_peek_request", broken)
    reports: list[StreamReport] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert (await receive())["body"] == USAGE_ASKED
        await send(sse_start())
        await send(body(b"data: [DONE]\n\n", more=False))

    middleware = StreamGuardMiddleware(
        app, protocol="openai_chat", on_report=reports.append, metrics=False
    )

    async def main() -> None:
        recorder = Recorder(messages(USAGE_ASKED, 1))
        await middleware(http_scope("POST", "/v1/chat/completions"), recorder.receive, _drop)

    asyncio.run(main())
    [report] = reports
    assert middleware.internal_errors == 1
    assert report.outcome is Outcome.COMPLETED
    assert any("reading the request body failed" in note for note in report.notes)
