"""streamguard.testing: collect / acollect against a real server, and assert_stream_ok."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from streamguard import Outcome, Severity, StreamGuardMiddleware, StreamReport, check_stream
from streamguard.testing import (
    CollectedStream,
    ReceivedEvent,
    acollect,
    assert_stream_ok,
    collect,
    collect_bytes,
    serve,
)
from tests.stream_apps import FIXTURES, build_fixture_app, fixture_bytes

CHUNK = (
    '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    '[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}'
)
NO_DONE = f"data: {CHUNK}\n\n".encode()  # 167 bytes, a finished choice, no [DONE]
ROLE_AGAIN = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"!"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    with serve(build_fixture_app(), log_level="critical") as url:
        yield url


# -- collect ------------------------------------------------------------------------------


def test_collect_reads_openai_chat_stream(app_url: str) -> None:
    """collect returns every event with its arrival time, the text, deltas and finish reasons."""
    before = time.monotonic()
    with httpx.stream("GET", app_url + "/fixture/openai_chat/clean-text-include-usage") as r:
        record = collect(r)
    after = time.monotonic()
    assert isinstance(record, CollectedStream)
    assert record.status_code == 200
    assert record.content_type == "text/event-stream; charset=utf-8"
    assert record.body == fixture_bytes("openai_chat", "clean-text-include-usage")
    assert record.text == "Hello! How can I help you today?"
    assert record.texts == ("Hello! How can I help you today?",)
    assert record.deltas == 9
    assert record.finish_reasons == ("stop",)
    assert record.terminal is True
    assert record.body_ended is True
    assert record.error is None
    assert record.protocol == "openai_chat"
    assert record.outcome is Outcome.COMPLETED
    assert record.findings == ()
    assert [event.index for event in record.events] == list(range(13))
    assert record.events[-1].data == "[DONE]"
    assert record.events[0].event == "message"
    times = [event.at for event in record.events]
    assert times == sorted(times)
    assert before <= times[0]
    assert times[-1] <= after
    assert record.report.events == 13
    assert record.report.bytes == len(record.body)


def test_event_arrival_time_is_not_before_it_was_sent() -> None:
    """An event's arrival time is read when its chunk arrives, not when collect returns."""
    app = build_fixture_app(delay=0.05)
    with serve(app, log_level="critical") as url:
        started = time.monotonic()
        with httpx.stream("GET", url + "/fixture/anthropic/ok_text_end_turn") as r:
            record = collect(r, started_at=started)
    sent_last = app.state.sent_last["/fixture/anthropic/ok_text_end_turn"]
    assert record.events[-1].at >= sent_last
    assert record.events[0].at < sent_last
    assert record.report.started_at == started
    assert record.report.first_byte_at is not None
    assert started < record.report.first_byte_at
    assert record.report.first_byte_at == record.events[0].at


def test_collect_uses_the_json_request_for_request_aware_checks(app_url: str) -> None:
    """The JSON body of the request enables request-aware rules such as usage_missing."""
    request = json.loads((FIXTURES / "openai_chat" / "usage_missing.request.json").read_text())
    url = app_url + "/fixture/openai_chat/usage_missing"
    with httpx.stream("POST", url, json=request) as r:
        implicit = collect(r)
    with httpx.stream("GET", url) as r:
        without = collect(r)
    with httpx.stream("GET", url) as r:
        explicit = collect(r, request=request)
    assert implicit.report.rules() == ["usage_missing"]
    assert without.report.rules() == []
    assert explicit.report.rules() == ["usage_missing"]


def test_collect_honours_a_forced_protocol(app_url: str) -> None:
    """protocol= checks the stream as that protocol instead of detecting it."""
    with httpx.stream("GET", app_url + "/fixture/anthropic/ok_text_end_turn") as r:
        record = collect(r, protocol="sse")
    assert record.protocol == "sse"
    assert record.report.protocol_source == "configured"
    assert record.deltas == 10
    assert record.terminal is False


def test_collect_records_a_connection_cut_mid_stream(app_url: str) -> None:
    """A body cut off by the server is response_not_finished, outcome connection_lost."""
    with httpx.stream("GET", app_url + "/cut") as r:
        record = collect(r)
    assert record.body_ended is False
    assert record.error is not None
    assert record.error.startswith("RemoteProtocolError: ")
    assert record.outcome is Outcome.CONNECTION_LOST
    assert record.report.rules() == ["response_not_finished"]
    finding = record.findings[0]
    assert finding.event_index == 1
    assert finding.byte_offset == 15
    assert finding.message.startswith(
        "the connection closed before the body ended, after 15 byte(s): RemoteProtocolError: "
    )
    assert record.text == "partial"


def test_collect_flags_a_compressed_stream_and_does_not_parse_it(app_url: str) -> None:
    """A Content-Encoding stream is compressed_stream and its bytes are not inspected."""
    with httpx.stream("GET", app_url + "/gzip") as r:
        record = collect(r)
    assert record.report.rules() == ["compressed_stream"]
    assert record.report.inspected is False
    assert record.report.events == 0


def test_collect_notes_a_response_that_is_not_an_event_stream(app_url: str) -> None:
    """A 500 JSON response is recorded, not checked as SSE, and noted."""
    with httpx.stream("GET", app_url + "/json-error") as r:
        record = collect(r)
    assert record.is_event_stream is False
    assert record.status_code == 500
    assert record.findings == ()
    assert record.report.notes == (
        "not an event stream (HTTP 500, content-type 'application/json'): the body was not checked",
    )


def test_collect_agrees_with_the_middleware() -> None:
    """The client-side record and the middleware's report name the same rules and counts."""
    reports: list[StreamReport] = []
    arrived = threading.Condition()

    def on_report(report: StreamReport) -> None:
        with arrived:
            reports.append(report)
            arrived.notify_all()

    app = StreamGuardMiddleware(build_fixture_app(), on_report=on_report, metrics=False)
    names = ["openai_chat/role_repeated", "anthropic/block_overlap", "gemini/usage_decreased"]
    records = []
    with serve(app, log_level="critical") as url:
        for name in names:
            with httpx.stream("GET", f"{url}/fixture/{name}") as r:
                records.append(collect(r))
            with arrived:
                assert arrived.wait_for(lambda: len(reports) == len(records), timeout=5)
    for record, report in zip(records, reports, strict=True):
        assert record.report.rules() == report.rules()
        assert record.report.protocol == report.protocol
        assert (record.report.events, record.report.bytes) == (report.events, report.bytes)
        assert record.report.outcome is report.outcome
    assert [r.rules() for r in reports] == [
        ["role_repeated"],
        ["block_overlap"],
        ["usage_decreased"],
    ]


def test_acollect_reads_an_async_response(app_url: str) -> None:
    """acollect gives an AsyncClient's response the same record as collect."""

    async def run() -> CollectedStream:
        async with (
            httpx.AsyncClient() as client,
            client.stream("GET", app_url + "/fixture/anthropic/ok_text_end_turn") as r,
        ):
            return await acollect(r)

    record = asyncio.run(run())
    assert record.protocol == "anthropic"
    assert record.text == "Hello! How can I help you today?"
    assert record.deltas == 4
    assert record.finish_reasons == ("end_turn",)
    assert record.terminal is True
    assert record.body_ended is True
    assert len(record.events) == 10
    assert record.events[0].event == "message_start"
    assert record.report.rules() == []


def test_collect_and_acollect_refuse_the_other_kind_of_response(app_url: str) -> None:
    """collect on an async response and acollect on a sync one raise a TypeError saying so."""
    with (
        httpx.stream("GET", app_url + "/fixture/anthropic/ok_text_end_turn") as r,
        pytest.raises(TypeError, match=r"^acollect\(\) needs an async response; use collect"),
    ):
        asyncio.run(acollect(r))

    async def run() -> None:
        async with (
            httpx.AsyncClient() as client,
            client.stream("GET", app_url + "/fixture/anthropic/ok_text_end_turn") as r,
        ):
            collect(r)

    with pytest.raises(TypeError, match=r"^collect\(\) needs a sync response; use `await acollect"):
        asyncio.run(run())


@pytest.mark.parametrize(
    ("name", "protocol", "texts", "deltas", "finish_reasons"),
    [
        ("gemini/ok_two_candidates", "gemini", ("Aa.", "Bb."), 3, ("STOP", "STOP")),
        ("openai_chat/clean-n3-interleaved", "openai_chat", ("Hello there", "Hi", "Hey"), 4,
         ("stop", "stop", "stop")),
        ("openai_responses/clean-incomplete", "openai_responses", ("The answer is",), 3,
         ("max_output_tokens",)),
        ("openai_responses/clean-text", "openai_responses", ("Hello! How can I help?",), 7,
         ("completed",)),
        ("anthropic/ok_thinking_then_text", "anthropic", None, None, ("end_turn",)),
    ],
)  # fmt: skip
def test_collect_bytes_extracts_text_per_protocol(
    name: str,
    protocol: str,
    texts: tuple[str, ...] | None,
    deltas: int | None,
    finish_reasons: tuple[str, ...],
) -> None:
    """Each protocol's text deltas and finish reasons are read from its own JSON fields."""
    family, _, stem = name.partition("/")
    record = collect_bytes(fixture_bytes(family, stem))
    assert record.protocol == protocol
    if texts is not None:
        assert record.texts == texts
        assert record.deltas == deltas
    assert record.finish_reasons == finish_reasons
    assert record.report.rules() == []


def test_collect_bytes_skips_anthropic_thinking_deltas() -> None:
    """Only text_delta counts as text: thinking and signature deltas are not the answer."""
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":'
        b'"message","role":"assistant","model":"x","content":[],"stop_reason":null,'
        b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"thinking","thinking":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"thinking_delta","thinking":"hmm"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
        b'"delta":{"type":"text_delta","text":"42"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    record = collect_bytes(body)
    assert record.report.rules() == []
    assert record.texts == ("42",)
    assert record.deltas == 1


def test_collect_bytes_plain_sse_text_is_the_data() -> None:
    """For plain SSE every event is a delta and the text is the joined data."""
    record = collect_bytes([b"data: a\n", b"\ndata: b\n\n", b": ping\n\n"])
    assert record.protocol == "sse"
    assert record.texts == ("ab",)
    assert record.deltas == 2
    assert record.terminal is False
    assert record.events == (
        ReceivedEvent("message", "a", None, None, 0, 0, record.events[0].at),
        ReceivedEvent("message", "b", None, None, 9, 1, record.events[1].at),
    )


# -- assert_stream_ok ---------------------------------------------------------------------


def test_assert_stream_ok_lists_missing_terminal_exactly() -> None:
    """A stream without [DONE] fails with the rule, severity, location and message."""
    with pytest.raises(AssertionError) as excinfo:
        assert_stream_ok(NO_DONE)
    assert str(excinfo.value) == (
        "stream not ok: 1 finding(s) at warning or above (protocol openai_chat, outcome "
        "unclosed, 1 event(s), 167 byte(s))\n"
        "- missing_terminal [error] at event 1, byte 167: the body ended after 1 event(s) "
        "and 167 byte(s) without the openai_chat terminal signal"
    )


def test_assert_stream_ok_shows_the_offending_frame() -> None:
    """A finding inside the body shows its frame: a chat chunk whole, so the part that
    broke it (here the role sent again) is on the line."""
    with pytest.raises(AssertionError) as excinfo:
        assert_stream_ok(ROLE_AGAIN)
    assert str(excinfo.value) == (
        "stream not ok: 1 finding(s) at warning or above (protocol openai_chat, outcome "
        "completed, 3 event(s), 345 byte(s))\n"
        "- role_repeated [warning] at event 1, byte 165: event 1: choice 0 sends delta.role "
        "again (first at event 0)\n"
        '    frame: data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"role":"assistant","content":"!"},'
        '"finish_reason":"stop"}]}'
    )


def test_assert_stream_ok_shortens_a_long_frame() -> None:
    """A frame longer than ``FRAME_CHARS`` is cut there, with an ellipsis."""
    from streamguard._format import FRAME_CHARS

    with pytest.raises(AssertionError) as excinfo:
        assert_stream_ok(b"data: " + b"x" * 1000)
    frame = str(excinfo.value).splitlines()[-1]
    assert frame == "    frame: " + ("data: " + "x" * 1000)[:FRAME_CHARS] + "…"


def test_assert_stream_ok_escapes_control_characters_in_the_frame() -> None:
    """A multi-line frame is shown on one line, its line endings escaped."""
    with pytest.raises(AssertionError) as excinfo:
        assert_stream_ok(b"data: one\n\nevent: x\r\ndata: tw")
    assert str(excinfo.value).splitlines()[-1] == "    frame: event: x\\r\\ndata: tw"


def test_assert_stream_ok_fail_on_error_lets_warnings_pass() -> None:
    """fail_on="error" ignores warning findings and returns the record."""
    record = assert_stream_ok(ROLE_AGAIN, fail_on="error")
    assert record.report.rules() == ["role_repeated"]


def test_assert_stream_ok_allow_names_rules_that_do_not_fail() -> None:
    """A rule named in allow does not fail the assertion; others still do."""
    record = assert_stream_ok(ROLE_AGAIN, allow=["role_repeated"])
    assert record.text == "Hi!"
    with pytest.raises(AssertionError, match=r"^stream not ok: 1 finding"):
        assert_stream_ok(NO_DONE, allow=["role_repeated"])


def test_assert_stream_ok_rejects_unknown_rule_names() -> None:
    """A typo in allow is a ValueError that suggests the closest rule name."""
    with pytest.raises(ValueError, match=r"^unknown streamguard rule") as excinfo:
        assert_stream_ok(NO_DONE, allow=["missing_terminal", "role_repeat", "zzz"])
    assert str(excinfo.value) == (
        "unknown streamguard rule name(s) in allow: 'role_repeat' (did you mean "
        "'role_repeated'?), 'zzz'; `streamguard rules` lists them"
    )


def test_assert_stream_ok_accepts_a_report_and_a_record() -> None:
    """A StreamReport or a CollectedStream is checked as is and returned."""
    report = check_stream(NO_DONE)
    with pytest.raises(AssertionError, match=r"missing_terminal \[error\] at event 1, byte 167"):
        assert_stream_ok(report)
    assert assert_stream_ok(report, allow=["missing_terminal"]) is report
    record = collect_bytes(ROLE_AGAIN)
    assert assert_stream_ok(record, allow=["role_repeated"]) is record


def test_assert_stream_ok_refuses_protocol_for_a_checked_stream() -> None:
    """protocol= or request= with an already checked stream is a TypeError."""
    with pytest.raises(TypeError, match=r"^protocol= and request= apply only"):
        assert_stream_ok(check_stream(NO_DONE), protocol="openai_chat")


def test_assert_stream_ok_passes_protocol_and_request_for_bytes() -> None:
    """For bytes, protocol= and request= reach the checker."""
    body = fixture_bytes("openai_chat", "usage_missing")
    request = {"stream_options": {"include_usage": True}}
    with pytest.raises(AssertionError, match=r"- usage_missing \[error\] at event 4"):
        assert_stream_ok(body, request=request)
    assert assert_stream_ok(body).protocol == "openai_chat"
    assert assert_stream_ok(b"data: [DONE]\n\n", protocol="sse").protocol == "sse"


def test_assert_stream_ok_on_a_response(app_url: str) -> None:
    """A streaming response is collected and judged; a non-SSE response fails saying so."""
    with httpx.stream("GET", app_url + "/fixture/openai_chat/clean-text-include-usage") as r:
        record = assert_stream_ok(r)
    assert record.finish_reasons == ("stop",)
    with httpx.stream("GET", app_url + "/json-error") as r, pytest.raises(AssertionError) as exc:
        assert_stream_ok(r)
    assert str(exc.value) == (
        "stream not ok: 1 problem(s) and 0 finding(s) at warning or above (protocol sse, "
        "outcome completed, 0 event(s), 34 byte(s))\n"
        "- the response is not an event stream: HTTP 500, content-type 'application/json'"
    )


def test_severity_threshold_accepts_enum_values() -> None:
    """fail_on takes a Severity as well as its string value."""
    with pytest.raises(AssertionError, match=r"at info or above"):
        assert_stream_ok(b"data: x\nfoo: y\n\n", fail_on=Severity.INFO)
