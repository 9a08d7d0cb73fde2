"""Hostile requests and streams: nothing a client or an app sends sizes what streamguard keeps."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from streamguard import Outcome, StreamGuardMiddleware, StreamReport, check_stream
from streamguard.monitor import MAX_KEPT_FINDINGS
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS
from streamguard.protocols.openai_chat import MAX_CHECKED_N
from streamguard.request import (
    MAX_REQUEST_CONTAINERS,
    RequestFacts,
    add_http_facts,
    request_facts,
)
from streamguard.rules import RULES

from .asgi_driver import Recorder, body, http_scope, run, sse_start
from .helpers import (
    ResponsesFeeder,
    chat_tool_calls_of_60_kb,
    held_memory,
    peak_memory,
)
from .slope import peak_slope

CHUNK = (
    '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    '"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}'
)


# -- the request ---------------------------------------------------------------------------


def test_request_facts_keep_only_what_checks_read() -> None:
    """Of a request, only a few small, well-typed facts survive."""
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * 1000}],
        "n": 2,
        "stream": True,
        "stream_options": {"include_usage": True, "other": ["x"] * 100},
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    facts = RequestFacts(request)
    assert dict(facts) == {"n": 2, "stream": True, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize(
    "n",
    [10_000_000, MAX_CHECKED_N + 1, 0, -1, 2.0, "2", 10**5000],
    ids=["ten-million", "over-the-bound", "zero", "negative", "float", "string", "huge"],
)
def test_an_unbelievable_n_is_unknown(n: object) -> None:
    """An ``n`` a client could size a loop with is kept as unknown, never as a number."""
    assert RequestFacts({"n": n}).get("n", 1) is None


@pytest.mark.parametrize("value", [{}, [], {"a": []}, 1.5, True, None, "GET"])
@pytest.mark.parametrize(
    "key", ["http_method", "last_event_id", "stream", "n", "stream_options", "starting_after"]
)
def test_a_request_field_of_any_json_type_is_read_without_failing(key: str, value: Any) -> None:
    """Any JSON type in a field the facts read, from a body or as a head's method: no exception."""
    facts, note = request_facts(json.dumps({key: value}).encode(), 64 * 1024)
    assert note is None
    assert facts is not None
    assert "http_method" not in facts  # a body never stands in for the head
    head = add_http_facts(facts, value, [])
    assert head is not None
    assert head.get("http_method") == ("GET" if value == "GET" else None)


def test_a_client_sized_n_does_not_size_the_checks() -> None:
    """``n=10,000,000`` on a route that ignores it: checked like an unknown n, at once."""
    stream = f"data: {CHUNK}\n\n".encode() + b"data: [DONE]\n\n"
    report, peak = peak_memory(
        lambda: check_stream(stream, protocol="openai_chat", request={"n": 10_000_000})
    )
    assert peak < 256 * 1024
    assert all(len(finding.message) < 500 for finding in report.findings)


def test_a_request_of_many_containers_is_not_parsed() -> None:
    """1 MiB of ``[{},{},…]`` is refused by counting, before any object is built."""
    hostile = b"[" + b",".join([b"{}"] * (MAX_REQUEST_CONTAINERS + 1)) + b"]"
    facts, why = request_facts(hostile, 1024 * 1024)
    assert facts is None
    assert why is not None
    assert "request checks skipped" in why
    assert request_facts(b'{"n": 2}', 1024 * 1024) == (RequestFacts({"n": 2}), None)


def _streaming_app(
    request_body: bytes, during: Callable[[], None]
) -> Callable[..., Any]:  # an ASGI app that reads the body, then streams
    async def app(scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send(sse_start())
        await send(body(f"data: {CHUNK}\n\n".encode()))
        during()
        await send(body(b"data: [DONE]\n\n", more=False))

    return app


def test_an_open_stream_holds_no_copy_of_the_request() -> None:
    """A 1.05 MB request read by the app is not held for the stream's life."""
    request_body = json.dumps([{}] * 350_000).encode()[: 1024 * 1024 - 10] + b"{}]"
    held: list[int] = []

    def during() -> None:
        held.append(tracemalloc.get_traced_memory()[0])

    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        _streaming_app(request_body, during), on_report=reports.append, metrics=False
    )
    recorder = Recorder(
        incoming=[
            {"type": "http.request", "body": request_body[:500_000], "more_body": True},
            {"type": "http.request", "body": request_body[500_000:], "more_body": False},
        ]
    )
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        run(middleware, http_scope("POST", "/v1/chat/completions"), recorder)
    finally:
        tracemalloc.stop()
    [report] = reports
    assert report.outcome is Outcome.COMPLETED
    assert held[0] - before < 128 * 1024  # the 1 MB body and its parse are gone
    assert any("request checks skipped" in note for note in report.notes)


def test_a_request_field_of_an_unhashable_type_does_not_stop_the_checks() -> None:
    """A body ``{"http_method": {}}``: the stream is still checked, with no internal error."""
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        _streaming_app(b"", lambda: None), on_report=reports.append, metrics=False
    )
    recorder = Recorder(incoming=[{"type": "http.request", "body": b'{"http_method": {}}'}])
    run(middleware, http_scope("POST", "/v1/chat/completions"), recorder)
    [report] = reports
    assert report.internal_error is None
    assert report.outcome is Outcome.COMPLETED
    assert report.protocol == "openai_chat"


# -- findings ------------------------------------------------------------------------------


def test_findings_kept_per_stream_are_bounded_and_the_rest_counted() -> None:
    """[DONE] then 100,000 tiny events: 100 findings kept, every other one counted by rule."""
    extra = 100_000
    stream = b"data: [DONE]\n\n" + b"data: x\n\n" * extra
    chunks = [stream[i : i + 16384] for i in range(0, len(stream), 16384)]
    report, peak = peak_memory(lambda: check_stream(chunks, protocol="openai_chat"))
    assert len(report.findings) <= MAX_KEPT_FINDINGS + len(RULES)
    dropped = dict(report.findings_dropped)
    kept = report.rules().count("event_after_terminal")
    assert kept + dropped["event_after_terminal"] == extra
    assert peak < 4 * 1024 * 1024  # the stream itself is 1.8 MB of input
    assert report.malformed


def test_a_rule_first_broken_past_the_cap_is_still_kept() -> None:
    """Past the cap, the first finding of a rule not seen yet is kept, so nothing is hidden."""
    stream = b"data: [DONE]\n\n" + b"data: x\n\n" * (MAX_KEPT_FINDINGS + 50) + b"data: cut"
    report = check_stream(stream, protocol="openai_chat")
    assert "unterminated_frame" in report.rules()
    assert report.findings_dropped == (("event_after_terminal", 50),)


# -- text a checker keeps to compare ----------------------------------------------------------


def _responses_open_items_of_60_kb() -> ResponsesFeeder:
    feed = ResponsesFeeder()
    feed("response.created", response={"id": "resp_1", "status": "in_progress"})
    feed.open_hostile_items(0)
    return feed


#: protocol -> (300 pieces of 60 KB fed straight to its checker, the memory allowed past the
#: stream's kept-text budget).
KEPT_TEXT: dict[str, tuple[Callable[[], object], int]] = {
    "openai_chat": (chat_tool_calls_of_60_kb, 1024 * 1024),
    "openai_responses": (_responses_open_items_of_60_kb, 256 * 1024),
}


@pytest.mark.parametrize("protocol", sorted(KEPT_TEXT))
def test_300_texts_of_60_kb_hold_at_most_the_kept_text_budget(protocol: str) -> None:
    """300 tool calls or open items of 60 KB each hold the stream's budget, not 18 MB."""
    feed, slack = KEPT_TEXT[protocol]
    _, held = held_memory(feed)
    assert held < MAX_KEPT_TEXT_CHARS + slack, f"{held} bytes held"


# -- the per-stream ceiling ---------------------------------------------------------------------

#: The documented ceiling of one stream's memory with the default limits (docs/reliability.md):
#: whatever the stream, the monitor's traced peak stays under it.
PER_STREAM_CEILING = 8 * 1024 * 1024


def _chat_tool_calls(calls: int, size: int) -> bytes:
    head = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    frames = []
    for number in range(calls):
        call = {"index": number, "id": f"call_{number}", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\": \"" + "x" * size}}  # fmt: skip
        choice = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}
        frames.append(f"data: {head}{json.dumps([choice])}}}\n\n")
    return "".join(frames).encode()


def _responses_open_items(items: int, size: int) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress"}}
    ]
    for number in range(items):
        item = {"id": f"msg_{number}", "type": "message", "status": "in_progress"}
        events.append({"type": "response.output_item.added", "output_index": number, "item": item})
        where = {"item_id": f"msg_{number}", "output_index": number, "content_index": 0}
        events.append({"type": "response.content_part.added", **where,
                       "part": {"type": "output_text", "text": ""}})  # fmt: skip
        events.append({"type": "response.output_text.delta", **where, "delta": "x" * size})
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': i})}\n\n".encode()
        for i, event in enumerate(events)
    )


HOSTILE_STREAMS: dict[str, tuple[str, Callable[[], bytes]]] = {
    "300 tool calls x 60 KB": ("openai_chat", lambda: _chat_tool_calls(300, 60_000)),
    "300 open Responses items x 60 KB": (
        "openai_responses",
        lambda: _responses_open_items(300, 60_000),
    ),
    "seven 1 MB undecided events": (
        "auto",
        lambda: (b"data: " + b"y" * 1_000_000 + b"\n\n") * 7,
    ),
    "a 1 MiB event of short data lines": (
        "sse",
        lambda: b"data:xy\n" * (1024 * 1024 // 8 - 1) + b"\n",
    ),
}


def _in_64_kib_chunks(stream: bytes) -> list[bytes]:
    return [stream[i : i + 65536] for i in range(0, len(stream), 65536)]


@pytest.mark.parametrize("name", sorted(HOSTILE_STREAMS))
def test_one_stream_stays_under_the_documented_ceiling(name: str) -> None:
    """Each hostile stream of issue 13, fed in 64 KiB chunks, peaks under the ceiling."""
    protocol, make = HOSTILE_STREAMS[name]
    chunks = _in_64_kib_chunks(make())
    report, peak = peak_memory(lambda: check_stream(iter(chunks), protocol=protocol))
    assert report.bytes == sum(map(len, chunks))
    assert peak < PER_STREAM_CEILING, f"{name}: {peak / 2**20:.1f} MiB"


def test_500_000_tiny_events_after_done_stay_under_the_documented_ceiling() -> None:
    """``[DONE]`` then 500,000 tiny events (issue 13: 135 MB held) peaks under the ceiling.

    Proven from the slope rather than by pushing half a million events under tracemalloc:
    the peaks after 10,000 and 50,000 events, extended to 500,000 along the line through
    them, stay under the ceiling. Every such event is an ``event_after_terminal``; the
    report keeps ``MAX_KEPT_FINDINGS`` of them (100, far below 10,000) and counts the rest,
    so nothing bounded starts growing past the measured range.
    """

    def stream(events: int) -> list[bytes]:
        return _in_64_kib_chunks(b"data: [DONE]\n\n" + b"data: x\n\n" * events)

    slope = peak_slope(
        stream, lambda chunks: check_stream(iter(chunks), protocol="openai_chat"), 10_000, 50_000
    )
    report = slope.result
    assert report.events == 50_001
    assert report.findings_dropped == (("event_after_terminal", 50_000 - MAX_KEPT_FINDINGS),)
    assert slope.extrapolated(500_000) < PER_STREAM_CEILING, str(slope)
