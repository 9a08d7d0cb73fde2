"""Auto-detection: the protocol of a stream from its request path or its first decisive event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard import StreamGuardMiddleware, StreamMonitor, StreamReport, check_stream
from streamguard.protocols import CHECKERS, make_checker
from streamguard.protocols.auto import (
    MAX_UNDECIDED_CHARS,
    MAX_UNDECIDED_EVENTS,
    protocol_for_event,
    protocol_for_path,
)
from streamguard.sse import Event
from tests.asgi_driver import ScriptedApp, body, run, sse_start
from tests.chunking import chunkings

FIXTURES = Path(__file__).parent / "fixtures"


def _data(*payloads: object) -> bytes:
    return b"".join(
        f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n".encode() for p in payloads
    )


def _named(*events: tuple[str, object]) -> bytes:
    return b"".join(f"event: {n}\ndata: {json.dumps(p)}\n\n".encode() for n, p in events)


_CHUNK = {
    "id": "chatcmpl-AB1",
    "object": "chat.completion.chunk",
    "created": 1727346171,
    "model": "gpt-4o-2024-08-06",
    "system_fingerprint": "fp_1",
}
OPENAI_CHAT = _data(
    {
        **_CHUNK,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": "", "refusal": None},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    },
    {
        **_CHUNK,
        "choices": [
            {"index": 0, "delta": {"content": "Hi"}, "logprobs": None, "finish_reason": None}
        ],
    },
    {**_CHUNK, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]},
    "[DONE]",
)
#: Azure's first chunk is a prompt annotation with an empty ``object``: not decisive.
AZURE_FIRST = {
    "choices": [],
    "created": 0,
    "id": "",
    "model": "",
    "object": "",
    "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}],
}
_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1741290958,
    "model": "gpt-4.1",
    "output": [],
    "usage": None,
}
_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
_DONE_MESSAGE = {
    **_MESSAGE,
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
}
OPENAI_RESPONSES = _named(
    (
        "response.created",
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {**_RESPONSE, "status": "in_progress"},
        },
    ),
    (
        "response.output_item.added",
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {**_MESSAGE, "status": "in_progress"},
        },
    ),
    (
        "response.content_part.added",
        {
            "type": "response.content_part.added",
            "sequence_number": 2,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        },
    ),
    (
        "response.output_text.delta",
        {
            "type": "response.output_text.delta",
            "sequence_number": 3,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": "Hi",
            "logprobs": [],
        },
    ),
    (
        "response.output_text.done",
        {
            "type": "response.output_text.done",
            "sequence_number": 4,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "text": "Hi",
            "logprobs": [],
        },
    ),
    (
        "response.content_part.done",
        {
            "type": "response.content_part.done",
            "sequence_number": 5,
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "output_text", "text": "Hi", "annotations": []},
        },
    ),
    (
        "response.output_item.done",
        {
            "type": "response.output_item.done",
            "sequence_number": 6,
            "output_index": 0,
            "item": _DONE_MESSAGE,
        },
    ),
    (
        "response.completed",
        {
            "type": "response.completed",
            "sequence_number": 7,
            "response": {
                **_RESPONSE,
                "status": "completed",
                "output": [_DONE_MESSAGE],
                "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
            },
        },
    ),
)
ANTHROPIC = (FIXTURES / "anthropic" / "ok_text_end_turn.sse").read_bytes()
GEMINI = (FIXTURES / "gemini" / "ok_text_stop.sse").read_bytes()
PLAIN = _data("tick 1", {"progress": 0.5}, "tick 2")

BODIES = {
    "openai_chat": OPENAI_CHAT,
    "openai_responses": OPENAI_RESPONSES,
    "anthropic": ANTHROPIC,
    "gemini": GEMINI,
}
PATHS = {
    "openai_chat": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
}
MODULES = {
    "openai_chat": "streamguard/protocols/openai_chat.py",
    "openai_responses": "streamguard/protocols/openai_responses.py",
}


def _require(protocol: str) -> None:
    if protocol not in CHECKERS:
        pytest.skip(f"{MODULES[protocol]} is not registered in CHECKERS yet")


def test_auto_is_undecided_without_a_path() -> None:
    """``protocol="auto"`` gives a monitor that has not decided yet without a path."""
    monitor = StreamMonitor("auto")
    assert (monitor.decided, monitor.protocol, monitor.protocol_source) == (False, "sse", "default")


def test_auto_is_not_a_checker() -> None:
    """Detection needs the stream's events, which the monitor holds: make_checker refuses."""
    with pytest.raises(ValueError, match="'auto' is detected per stream by StreamMonitor"):
        make_checker("auto")


@pytest.mark.parametrize(
    ("path", "protocol"),
    [
        ("/v1/chat/completions", "openai_chat"),
        ("/openai/deployments/gpt-4o/chat/completions", "openai_chat"),
        ("/v1/responses", "openai_responses"),
        ("/v1/messages", "anthropic"),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini"),
        ("/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent", "gemini"),
        ("/v1/responses/resp_123", None),
        ("/api/messages", None),
        ("/events", None),
        (None, None),
    ],
)
def test_protocol_for_path(path: str | None, protocol: str | None) -> None:
    """Only the documented endpoint paths name a protocol."""
    assert protocol_for_path(path) == protocol


@pytest.mark.parametrize("protocol", sorted(BODIES))
def test_decided_by_path(protocol: str) -> None:
    """The request path decides the protocol before any event, and the report says so."""
    if protocol in MODULES:
        _require(protocol)
    report = check_stream(BODIES[protocol], path=PATHS[protocol])
    configured = check_stream(BODIES[protocol], protocol=protocol)
    assert (report.protocol, report.protocol_source) == (protocol, "path")
    assert report.outcome.value == "completed"
    assert report.findings == configured.findings


@pytest.mark.parametrize("protocol", sorted(BODIES))
def test_decided_by_first_event(protocol: str) -> None:
    """Without a telling path the first decisive event decides, whatever the chunking."""
    if protocol in MODULES:
        _require(protocol)
    configured = check_stream(BODIES[protocol], protocol=protocol)
    for chunking, chunks in chunkings(BODIES[protocol]):
        report = check_stream(chunks, path="/stream")
        assert (report.protocol, report.protocol_source) == (protocol, "event"), chunking
        assert report.outcome.value == "completed", chunking
        assert report.findings == configured.findings, chunking


def test_path_wins_over_the_events() -> None:
    """A Gemini body on the Anthropic path is checked, and flagged, as Anthropic."""
    report = check_stream(GEMINI, path="/v1/messages")
    assert (report.protocol, report.protocol_source) == ("anthropic", "path")
    assert report.outcome.value == "unclosed"
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 0),
        ("unknown_event_type", 0),
        ("schema_mismatch", 1),
        ("schema_mismatch", 2),
        ("missing_terminal", 3),
    ]


def test_azure_annotation_chunk_is_not_decisive() -> None:
    """Azure's empty-object first chunk is held, and the stream is decided by the next one."""
    _require("openai_chat")
    body = _data(AZURE_FIRST) + OPENAI_CHAT
    report = check_stream(body)
    configured = check_stream(body, protocol="openai_chat")
    assert (report.protocol, report.protocol_source) == ("openai_chat", "event")
    assert report.findings == configured.findings
    assert report.outcome.value == configured.outcome.value


def test_plain_sse_stays_plain() -> None:
    """A stream with no decisive event is checked as plain SSE, chosen by default."""
    report = check_stream(PLAIN)
    assert (report.protocol, report.protocol_source) == ("sse", "default")
    assert (report.outcome.value, report.rules()) == ("completed", [])


def test_undecided_events_are_bounded() -> None:
    """After MAX_UNDECIDED_EVENTS indecisive events the monitor settles on plain SSE."""
    monitor = StreamMonitor(path="/stream")
    for index in range(MAX_UNDECIDED_EVENTS - 1):
        assert not monitor.feed(f"data: tick {index}\n\n".encode())
        assert not monitor.decided
    monitor.feed(b"data: last tick\n\n")
    assert (monitor.decided, monitor.protocol, monitor.protocol_source) == (True, "sse", "default")
    # A decisive event after the bound changes nothing any more.
    monitor.feed(b'event: message_start\ndata: {"type":"message_start"}\n\n')
    assert monitor.protocol == "sse"


def test_held_events_are_replayed_into_the_chosen_checker() -> None:
    """Events held before the decision are checked once, with their own indices."""
    body = _named(("ping", {"type": "ping"})) + _data({"type": "ping"}) + ANTHROPIC
    report = check_stream(body)
    assert (report.protocol, report.protocol_source) == ("anthropic", "event")
    assert [(f.rule, f.event_index) for f in report.findings] == [("event_name_mismatch", 1)]


def test_terminal_and_error_come_from_the_chosen_checker() -> None:
    """An Anthropic error event under auto-detection ends the stream as error_event."""
    body = (FIXTURES / "anthropic" / "ok_error_overloaded_mid_block.sse").read_bytes()
    report = check_stream(body)
    assert (report.protocol, report.outcome.value, report.rules()) == (
        "anthropic",
        "error_event",
        [],
    )


def test_gemini_truncation_is_unclosed_under_auto() -> None:
    """A truncated Gemini stream found by auto-detection is unclosed, not completed."""
    body = (FIXTURES / "gemini" / "missing_finish_reason_truncated.sse").read_bytes()
    report = check_stream(body)
    assert (report.protocol, report.outcome.value, report.rules()) == (
        "gemini",
        "unclosed",
        ["missing_finish_reason"],
    )


@pytest.mark.parametrize(
    "fixture",
    sorted(
        str(path.relative_to(FIXTURES))
        for directory in ("anthropic", "gemini")
        for path in (FIXTURES / directory).glob("*.sse")
    ),
)
def test_auto_matches_the_configured_protocol_on_every_fixture(fixture: str) -> None:
    """Every Anthropic and Gemini fixture reads the same under auto-detection as configured."""
    protocol = fixture.split("/")[0]
    body = (FIXTURES / fixture).read_bytes()
    configured = check_stream(body, protocol=protocol)
    report = check_stream(body)
    assert report.protocol == protocol
    assert report.outcome == configured.outcome
    assert report.findings == configured.findings


def test_a_chat_chunk_is_recognised_by_its_shape_whatever_its_object() -> None:
    """choices[].delta makes a chunk OpenAI Chat even with object "text_completion"."""
    _require("openai_chat")
    wrong = {**_CHUNK, "object": "text_completion"}
    body = _data(
        {**wrong, "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
        {**wrong, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    report = check_stream(body)
    assert (report.protocol, report.protocol_source) == ("openai_chat", "event")
    assert report.rules() == ["schema_mismatch", "schema_mismatch", "missing_terminal"]
    assert report.findings == check_stream(body, protocol="openai_chat").findings


@pytest.mark.parametrize(
    "payload",
    [
        {"object": "text_completion", "choices": [{"index": 0, "text": "Hi"}]},  # Completions
        {**AZURE_FIRST, "choices": [{"index": 0, "content_filter_results": {}}]},  # no delta
        {"choices": [{"index": 0, "delta": "Hi"}]},
        {"choices": {"delta": {}}},
    ],
)
def test_chunks_without_a_delta_object_decide_nothing(payload: dict[str, object]) -> None:
    """Choices without a delta object (legacy Completions, Azure annotations) are not decisive."""
    assert protocol_for_event(Event("message", json.dumps(payload))) is None


def test_held_event_data_is_bounded() -> None:
    """Past MAX_UNDECIDED_CHARS of held data the monitor settles on plain SSE at once."""
    monitor = StreamMonitor(path="/stream")
    half = "x" * (MAX_UNDECIDED_CHARS // 2)
    assert not monitor.feed(f"data: {half}\n\n".encode())
    assert not monitor.decided
    monitor.feed(f"data: {half}x\n\n".encode())
    assert (monitor.decided, monitor.protocol, monitor.protocol_source) == (True, "sse", "default")


def test_one_large_decisive_event_still_decides() -> None:
    """An event past the held-data bound that names its protocol decides by that protocol."""
    _require("openai_chat")
    big = {
        **_CHUNK,
        "choices": [{"index": 0, "delta": {"content": "x" * MAX_UNDECIDED_CHARS}}],
    }
    report = check_stream(_data(big))
    assert (report.protocol, report.protocol_source) == ("openai_chat", "event")


def test_frames_run_together_are_detected_from_their_first_line() -> None:
    """Chat chunks joined by single newlines (one event of several payloads) still decide."""
    chunk = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
    )
    report = check_stream(f"data: {chunk}\ndata: {chunk}\ndata: [DONE]\n\n".encode())
    assert (report.protocol, report.protocol_source) == ("openai_chat", "event")
    assert "invalid_json" in report.rules()


def test_a_lone_non_json_line_decides_nothing() -> None:
    """Data that is not JSON on its first line either stays undecided."""
    report = check_stream(b"data: hello\ndata: {}\n\n")
    assert (report.protocol, report.protocol_source) == ("sse", "default")


def test_a_body_without_any_blank_line_is_detected_from_its_first_data_line() -> None:
    """Frames never ended by a blank line dispatch nothing; the pending first line decides."""
    chunk = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
    )
    body = f"data: {chunk}\ndata: {chunk}\ndata: [DONE]\n".encode()
    for chunks in ([body], [bytes([b]) for b in body]):
        report = check_stream(chunks)
        assert (report.protocol, report.protocol_source) == ("openai_chat", "event")
        assert report.rules() == ["unterminated_frame", "missing_terminal"]


def test_an_anthropic_error_first_decides_anthropic() -> None:
    """An overloaded error before message_start, on a gateway path, is Anthropic's error."""
    body = (
        b"event: error\ndata: "
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    report = check_stream(body, path="/gateway/stream")
    assert (report.protocol, report.protocol_source, report.outcome.value) == (
        "anthropic",
        "event",
        "error_event",
    )


def test_a_responses_error_first_is_not_anthropic() -> None:
    """The Responses error event carries code and message at the top level: not decisive."""
    body = b'data: {"type":"error","code":"server_error","message":"x","sequence_number":0}\n\n'
    assert check_stream(body, path="/gateway/stream").protocol != "anthropic"


def test_replayed_findings_do_not_depend_on_the_cutting() -> None:
    """Framing findings of held events and their replay's findings keep event order, however cut."""
    _require("openai_chat")
    chunk = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
    )
    held = b'data: {"x\n\nfoo: 1\ndata: \xff\n\n'  # not JSON; an unknown field, bad UTF-8
    body = held + f"data: {chunk}\n\ndata: [DONE]\n\n".encode()
    whole = check_stream([body])
    assert [(f.rule, f.event_index) for f in whole.findings] == [
        ("invalid_json", 0),
        ("unknown_field", 1),
        ("invalid_utf8", 1),
        ("invalid_json", 1),
        ("missing_finish_reason", 3),
    ]
    for chunks in ([held, body[len(held) :]], *(chunks for _, chunks in chunkings(body))):
        assert check_stream(chunks).findings == whole.findings


AGENT_FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    "fixture",
    sorted(
        path.relative_to(AGENT_FIXTURES).as_posix()
        for protocol in ("ai_sdk_ui", "ag_ui")
        for path in (AGENT_FIXTURES / protocol).glob("ok_*.sse")
    ),
)
def test_agent_protocols_are_decided_by_their_first_decisive_event(fixture: str) -> None:
    """A healthy AI SDK or AG-UI stream on an unknown path is detected and judged as configured."""
    protocol = fixture.split("/")[0]
    body = (AGENT_FIXTURES / fixture).read_bytes()
    configured = check_stream(body, protocol=protocol)
    report = check_stream(body, path="/stream")
    assert (report.protocol, report.protocol_source) == (protocol, "event")
    assert report.findings == configured.findings


@pytest.mark.parametrize(
    ("path", "protocol"),
    [("/api/chat", "ai_sdk_ui"), ("/agents/ag-ui", "ag_ui"), ("/awp", "ag_ui"), ("/chat", None)],
)
def test_agent_protocol_paths(path: str, protocol: str | None) -> None:
    """useChat's default endpoint and AG-UI's path segments name their protocols."""
    assert protocol_for_path(path) == protocol


_UI_HEADER = (b"X-Vercel-AI-UI-Message-Stream", b"v1")
_UI_STREAM = _data({"type": "start"}, {"type": "finish"}, "[DONE]")


def test_the_ui_message_stream_header_decides_before_the_path() -> None:
    """``x-vercel-ai-ui-message-stream: v1`` decides ai_sdk_ui, even on a chat path."""
    for path in (None, "/stream", "/v1/chat/completions"):
        monitor = StreamMonitor(path=path, headers=[_UI_HEADER])
        assert (monitor.protocol, monitor.protocol_source) == ("ai_sdk_ui", "header")


@pytest.mark.parametrize(
    "header", [(b"x-vercel-ai-ui-message-stream", b"v2"), (b"x-vercel-ai-data-stream", b"v1")]
)
def test_other_headers_decide_nothing(header: tuple[bytes, bytes]) -> None:
    """Another version or the older data-stream header leaves the path and events to decide."""
    monitor = StreamMonitor(path="/stream", headers=[header])
    assert (monitor.protocol_source, monitor.decided) == ("default", False)


def test_the_middleware_passes_the_response_headers() -> None:
    """An unlisted route whose response declares a UI message stream is checked as one."""
    reports: list[StreamReport] = []
    steps = [sse_start(_UI_HEADER), body(_UI_STREAM, more=False)]
    run(StreamGuardMiddleware(ScriptedApp(steps), on_report=reports.append, metrics=False))
    [report] = reports
    assert (report.protocol, report.protocol_source, report.findings) == (
        "ai_sdk_ui",
        "header",
        (),
    )


def test_a_decision_at_the_end_keeps_the_findings_in_event_order() -> None:
    """Decided by the unfinished last event, the held events' findings fall in event order."""
    body = (
        b"data: []\n\n"
        b"foo: bar\ndata: hello\n\n"
        b'data: {"jsonrpc":"2.0","method":"notifications/progress"}\n'
    )
    detected = check_stream([body], protocol="auto")
    configured = check_stream([body], protocol="mcp")
    assert (detected.protocol, detected.protocol_source) == ("mcp", "event")
    shown = [(f.rule, f.event_index) for f in detected.findings]
    assert shown == [(f.rule, f.event_index) for f in configured.findings]
    assert shown[0] == ("invalid_jsonrpc", 0)
