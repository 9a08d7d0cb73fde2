"""The AI SDK UI message stream checker: its rules beyond the fixtures, its bounds, its docs
and the detection helpers the monitor wires into auto-detection."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS
from streamguard.protocols.ai_sdk_ui import (
    MAX_OPEN_IDS,
    MAX_UNKNOWN_TYPES,
    AISDKUIChecker,
)
from streamguard.protocols.auto import protocol_for_event, protocol_for_headers, protocol_for_path
from streamguard.rule_docs import RULE_DOCS, ag_ui, ai_sdk_ui
from streamguard.rules import RULES
from streamguard.sse import Event

from .helpers import source_docstring
from .sse_fixtures import fixtures


def body(*chunks: Any) -> bytes:
    return b"".join(
        b"data: "
        + (c.encode() if isinstance(c, str) else json.dumps(c, separators=(",", ":")).encode())
        + b"\n\n"
        for c in chunks
    )


def found(*chunks: Any) -> list[tuple[str, int | None]]:
    report = check_stream(body(*chunks), protocol="ai_sdk_ui")
    return [(f.rule, f.event_index) for f in report.findings]


START = {"type": "start", "messageId": "msg_1"}
FINISH = {"type": "finish", "finishReason": "stop"}


def test_the_checker_is_registered() -> None:
    """``ai_sdk_ui`` names this checker in the registry the config, CLI and auto use."""
    assert CHECKERS["ai_sdk_ui"] is AISDKUIChecker


def test_a_clean_stream_completes() -> None:
    """start, a text part, finish and [DONE]: completed, nothing to report."""
    report = check_stream(
        body(
            START,
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "Hi"},
            {"type": "text-end", "id": "t"},
            FINISH,
            "[DONE]",
        ),
        protocol="ai_sdk_ui",
    )
    assert (report.outcome.value, report.findings) == ("completed", ())


def test_an_error_chunk_is_the_in_band_error_and_the_stream_may_go_on() -> None:
    """finish-step, finish and [DONE] after an error chunk are what streamText sends."""
    report = check_stream(
        body(
            START,
            {"type": "start-step"},
            {"type": "error", "errorText": "x"},
            {"type": "finish-step"},
            FINISH,
            "[DONE]",
        ),
        protocol="ai_sdk_ui",
    )
    assert (report.outcome.value, report.findings) == ("error_event", ())


def test_chunks_after_finish_are_reported_once() -> None:
    """Every chunk after finish is the same mistake: one finding, on the first."""
    assert found(
        START, FINISH, {"type": "message-metadata", "messageMetadata": {}}, FINISH, "[DONE]"
    ) == [("chunk_after_finish", 2)]


def test_a_part_reopened_after_its_end_is_clean() -> None:
    """An id may be reused once its part ended (the client starts a new part)."""
    text = [
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "a"},
        {"type": "text-end", "id": "t"},
    ]
    assert found(START, *text, *text, FINISH, "[DONE]") == []


def test_reset_step_forgets_open_parts() -> None:
    """After reset-step a delta for a part opened before it has nothing to continue."""
    assert found(
        {"type": "text-start", "id": "t"},
        {"type": "reset-step"},
        {"type": "text-delta", "id": "t", "delta": "a"},
        "[DONE]",
    ) == [("id_not_open", 2)]


def test_a_missing_id_is_a_schema_mismatch_only() -> None:
    """A text-delta without its id is one schema_mismatch, not also id_not_open."""
    assert found(START, {"type": "text-delta", "delta": "a"}, FINISH, "[DONE]") == [
        ("schema_mismatch", 1)
    ]


def test_chunks_without_a_type_are_schema_mismatches() -> None:
    """A chunk must be typed; a non-object is invalid_json."""
    assert found(START, {"delta": "a"}, [1, 2], FINISH, "[DONE]") == [
        ("schema_mismatch", 1),
        ("invalid_json", 2),
    ]


def test_open_ids_are_bounded() -> None:
    """Past MAX_OPEN_IDS open parts, new ones are not kept and checks needing them skip."""
    chunks: list[Any] = [{"type": "text-start", "id": f"t{i}"} for i in range(MAX_OPEN_IDS + 50)]
    chunks.append({"type": "text-delta", "id": f"t{MAX_OPEN_IDS + 10}", "delta": "a"})
    checker = AISDKUIChecker()
    rules = []
    for index, chunk in enumerate(chunks):
        rules += [f.rule for f in checker.on_event(Event("message", json.dumps(chunk)), index)]
    assert rules == []
    assert checker._parts.counts() == {"text": MAX_OPEN_IDS}


def test_long_ids_are_kept_by_digest_and_never_shown() -> None:
    """A megabyte id costs a digest, and the message shows its size and hash only."""
    huge = "x" * 1_000_000
    report = check_stream(
        body({"type": "text-delta", "id": huge, "delta": "a"}, "[DONE]"), protocol="ai_sdk_ui"
    )
    (finding,) = report.findings
    assert finding.rule == "id_not_open"
    assert "xxxx" not in finding.message
    assert "<1000000 chars #" in finding.message


def test_unknown_types_are_reported_once_each_and_bounded() -> None:
    """Each unknown type once; at most MAX_UNKNOWN_TYPES of them per stream."""
    chunks = [{"type": f"custom-{i % 40}"} for i in range(200)]
    rules = [rule for rule, _ in found(*chunks, "[DONE]")]
    assert rules == ["unknown_chunk_type"] * MAX_UNKNOWN_TYPES


def test_messages_never_quote_wire_values() -> None:
    """Ids, unknown types and enum values appear by size and hash only."""
    secret = "SECRET-VALUE-42"
    report = check_stream(
        body(
            {"type": "text-delta", "id": secret, "delta": "a"},
            {"type": secret},
            {"type": "finish", "finishReason": secret},
            {"type": "data-" + secret, "data": 1},
            {"type": "data-" + secret, "data": 2},
            "[DONE]",
        ),
        protocol="ai_sdk_ui",
    )
    assert len(report.findings) >= 4
    assert not any(secret in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"x-vercel-ai-ui-message-stream", b"v1")], True),
        (
            [(b"content-type", b"text/event-stream"), (b"x-vercel-ai-ui-message-stream", b"V1 ")],
            True,
        ),
        ([(b"x-vercel-ai-ui-message-stream", b"v2")], False),
        ([(b"x-vercel-ai-data-stream", b"v1")], False),
        ([], False),
    ],
)
def test_the_response_header_marks_the_protocol(
    headers: list[tuple[bytes, bytes]], expected: bool
) -> None:
    """Only ``x-vercel-ai-ui-message-stream: v1`` names the UI message stream."""
    assert (protocol_for_headers(headers) == "ai_sdk_ui") is expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/chat", True),
        ("/app/api/chat/", True),
        ("/api/chat/completions", False),
        (None, False),
    ],
)
def test_the_default_endpoint_marks_the_protocol(path: str | None, expected: bool) -> None:
    """``/api/chat`` (DefaultChatTransport's default) is the UI message stream; chat
    completions are not."""
    assert (protocol_for_path(path) == "ai_sdk_ui") is expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ('{"type":"start","messageId":"m"}', True),
        ('{"type":"start-step"}', True),
        ('{"type":"text-delta","id":"t","delta":"a"}', True),
        ('{"type":"data-weather","data":{}}', True),
        ('{"type":"error","errorText":"x"}', True),
        ('{"type":"error","error":{"type":"overloaded_error","message":"x"}}', False),
        ('{"type":"error","code":"x","message":"y","sequence_number":1}', False),
        ('{"type":"message_start","message":{}}', False),
        ('{"type":"response.created","sequence_number":0}', False),
        ('{"type":"RUN_STARTED","threadId":"t","runId":"r"}', False),
        ('{"object":"chat.completion.chunk","choices":[]}', False),
        ("[DONE]", False),
        ("not json", False),
    ],
)
def test_a_first_chunk_decides_only_when_no_other_protocol_sends_it(
    data: str, expected: bool
) -> None:
    """Decisive first events: the SDK's own chunk types; ``error`` only with ``errorText``."""
    assert (protocol_for_event(Event("message", data)) == "ai_sdk_ui") is expected


def test_every_rule_is_documented_in_a_module_of_its_protocols() -> None:
    """This protocol's own rules live in rule_docs/ai_sdk_ui.py, the shared id rules in
    rule_docs/ag_ui.py (their first protocol)."""
    own = {doc.name for doc in ai_sdk_ui.DOCS}
    shared = {doc.name for doc in ag_ui.DOCS}
    for name in own:
        assert RULES[name].protocols == ("ai_sdk_ui",)
    for name in shared:
        assert RULES[name].protocols[0] == "ag_ui"
    raised = {r.name for r in AISDKUIChecker.RAISES | AISDKUIChecker.LIFECYCLE.rules}
    assert raised - {"invalid_json", "schema_mismatch", *RULE_DOCS} == set()


@pytest.mark.parametrize("doc", ai_sdk_ui.DOCS, ids=lambda doc: doc.name)
def test_each_example_fires_its_rule(doc: Any) -> None:
    """Every example in this protocol's rule docs is a whole stream that breaks its rule."""
    report = check_stream((doc.example + "\n\n").encode(), protocol="ai_sdk_ui")
    assert doc.name in report.rules()


def test_every_raised_rule_has_a_fixture() -> None:
    """Each rule the checker can raise fires on at least one of its fixtures (so RAISES
    lists nothing dead)."""
    raised = {r.name for r in AISDKUIChecker.RAISES | AISDKUIChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("ai_sdk_ui") for rule in fixture.check().rules()}
    assert raised <= seen


def test_the_docstring_names_its_tables() -> None:
    """The module docstring quotes the chunk types the checker reads, so the prose says
    what the code does."""
    doc = source_docstring(sys.modules[AISDKUIChecker.__module__])
    for phrase in ("data-*", "tool-input-delta", "reset-step", "[DONE]"):
        assert phrase in doc


# -- as the official clients read it (issue 27) --------------------------------------------

STEP, END_STEP = {"type": "start-step"}, {"type": "finish-step"}


def text(kind: str, part: str, delta: str | None = None) -> dict[str, str]:
    chunk = {"type": kind, "id": part}
    if delta is not None:
        chunk["delta"] = delta
    return chunk


@pytest.mark.parametrize("part", ["text", "reasoning"])
def test_a_part_continued_after_finish_step_is_not_open(part: str) -> None:
    """ai 5 and 6 forget the open text and reasoning parts at finish-step: a delta or an end
    for one after it throws there, and the message says why."""
    report = check_stream(
        body(
            START,
            STEP,
            text(f"{part}-start", "p"),
            text(f"{part}-delta", "p", "a"),
            END_STEP,
            STEP,
            text(f"{part}-delta", "p", "b"),
            text(f"{part}-end", "p"),
            END_STEP,
            FINISH,
            "[DONE]",
        ),
        protocol="ai_sdk_ui",
    )
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("id_not_open", 6),
        ("id_not_open", 7),
    ]
    assert all("finish-step" in f.message for f in report.findings)


def test_parts_ended_within_their_step_and_new_ones_after_finish_step_are_clean() -> None:
    """The look-alike: each step's parts end before its finish-step, and a later step opens
    new ones (the same id again, too, as the client makes a new record)."""
    assert not found(
        START,
        STEP,
        text("reasoning-start", "r"),
        text("reasoning-end", "r"),
        text("text-start", "t"),
        text("text-delta", "t", "a"),
        text("text-end", "t"),
        END_STEP,
        STEP,
        text("text-start", "t"),
        text("text-delta", "t", "b"),
        text("text-end", "t"),
        END_STEP,
        FINISH,
        "[DONE]",
    )


def test_a_part_left_open_across_finish_step_is_still_not_closed_at_finish() -> None:
    """Forgotten at finish-step, the part stays streaming for good: id_not_closed at finish."""
    assert found(START, STEP, text("text-start", "t"), END_STEP, FINISH, "[DONE]") == [
        ("id_not_closed", 4)
    ]


_ANSWERS = [
    {"type": "tool-output-available", "toolCallId": "c1", "output": 1},
    {"type": "tool-output-error", "toolCallId": "c1", "errorText": "boom"},
    {"type": "tool-output-denied", "toolCallId": "c1"},
    {"type": "tool-approval-request", "toolCallId": "c1", "approvalId": "a1"},
]


@pytest.mark.parametrize("answer", _ANSWERS, ids=lambda chunk: chunk["type"])
def test_an_answer_inside_a_step_for_a_call_never_introduced_is_not_open(
    answer: dict[str, Any],
) -> None:
    """Inside a step of this stream, an output, error, denial or approval request for a call
    no chunk introduced fails in the client ("No tool invocation found")."""
    findings = check_stream(
        body(START, STEP, answer, END_STEP, FINISH, "[DONE]"), protocol="ai_sdk_ui"
    ).findings
    assert [(f.rule, f.event_index) for f in findings] == [("id_not_open", 2)]
    assert "No tool invocation found" in findings[0].message


@pytest.mark.parametrize(
    "introduced",
    [
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "f"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "f", "input": {}},
        {
            "type": "tool-input-error",
            "toolCallId": "c1",
            "toolName": "f",
            "input": "{",
            "errorText": "bad input",
        },
    ],
    ids=lambda chunk: chunk["type"],
)
@pytest.mark.parametrize("answer", _ANSWERS, ids=lambda chunk: chunk["type"])
def test_an_answer_for_a_call_this_stream_introduced_is_clean(
    introduced: dict[str, Any], answer: dict[str, Any]
) -> None:
    """The look-alike: each chunk that gives the client a part for the call introduces it,
    in this step or an earlier one."""
    available = {"type": "tool-input-available", "toolCallId": "c1", "toolName": "f", "input": {}}
    closing = [available] if introduced["type"] == "tool-input-start" else []
    assert not found(START, STEP, introduced, *closing, answer, END_STEP, FINISH, "[DONE]")
    assert not found(
        START, STEP, introduced, *closing, END_STEP, STEP, answer, END_STEP, FINISH, "[DONE]"
    )


@pytest.mark.parametrize("answer", _ANSWERS, ids=lambda chunk: chunk["type"])
def test_an_answer_outside_any_step_may_continue_the_previous_message(
    answer: dict[str, Any],
) -> None:
    """A continuation (streamText after a tool approval) answers the previous message's
    calls before its first start-step, with or without a start chunk: not reported."""
    assert not found(START, answer, STEP, END_STEP, FINISH, "[DONE]")
    assert not found(answer, STEP, END_STEP, "[DONE]")
    # Between two steps as well: the client looks calls up in the whole message.
    assert not found(START, STEP, END_STEP, answer, FINISH, "[DONE]")


def test_reset_step_drops_the_calls_its_step_introduced() -> None:
    """reset-step removes its step's parts, tool calls included; calls of earlier steps stay."""
    earlier = {"type": "tool-input-available", "toolCallId": "c0", "toolName": "f", "input": {}}
    reset = {"type": "tool-input-available", "toolCallId": "c1", "toolName": "f", "input": {}}
    outputs = [
        {"type": "tool-output-available", "toolCallId": call, "output": 1} for call in ("c0", "c1")
    ]
    assert found(
        START,
        STEP,
        earlier,
        END_STEP,
        STEP,
        reset,
        {"type": "reset-step"},
        *outputs,
        END_STEP,
        FINISH,
        "[DONE]",
    ) == [("id_not_open", 8)]


def test_introduced_calls_are_bounded() -> None:
    """Past MAX_OPEN_IDS introduced calls the set stops answering "not introduced": an
    answer for a call it could not keep is not reported."""
    calls = [
        {"type": "tool-input-available", "toolCallId": f"c{n}", "toolName": "f", "input": {}}
        for n in range(MAX_OPEN_IDS + 5)
    ]
    last = {"type": "tool-output-available", "toolCallId": f"c{MAX_OPEN_IDS + 4}", "output": 1}
    unknown = {"type": "tool-output-available", "toolCallId": "never", "output": 1}
    assert not found(START, STEP, *calls, last, unknown, END_STEP, FINISH, "[DONE]")
    checker = AISDKUIChecker()
    for index, chunk in enumerate([START, STEP, *calls]):
        checker.on_event(Event("message", json.dumps(chunk)), index)
    assert len(checker._calls) == MAX_OPEN_IDS


def test_a_started_message_without_finish_is_missing_finish() -> None:
    """start, then [DONE] with no finish: a warning at [DONE]; a step still open there is
    unbalanced too."""
    report = check_stream(body(START, STEP, END_STEP, "[DONE]"), protocol="ai_sdk_ui")
    assert [(f.rule, f.severity.value, f.event_index) for f in report.findings] == [
        ("missing_finish", "warning", 3)
    ]
    assert found(START, STEP, "[DONE]") == [("step_not_balanced", 2), ("missing_finish", 2)]


@pytest.mark.parametrize(
    "chunks",
    [
        [START, STEP, END_STEP, FINISH, "[DONE]"],
        [STEP, END_STEP, "[DONE]"],  # neither start nor finish: a writer's fragment
        [START, {"type": "error", "errorText": "boom"}, "[DONE]"],
        [START, STEP, {"type": "abort", "reason": "user"}, "[DONE]"],
    ],
    ids=["finish", "no-start", "error", "abort"],
)
def test_finish_or_its_explanations_leave_no_missing_finish(chunks: list[Any]) -> None:
    """The look-alikes: a finish, no start to announce a message, or an error or abort chunk
    that explains the missing finish."""
    rules = set(check_stream(body(*chunks), protocol="ai_sdk_ui").rules())
    assert not rules & {"missing_finish", "step_not_balanced"}


def test_a_cut_stream_is_missing_terminal_not_missing_finish() -> None:
    """Without [DONE] the stream was cut: missing_terminal says it, missing_finish does not
    pile on."""
    assert found(START, STEP) == [("missing_terminal", 2)]


def test_a_body_of_no_events_names_the_legacy_data_stream() -> None:
    """An AI SDK 4 data stream body dispatches no event: missing_terminal names the legacy
    protocol; a body with events is told nothing of it."""
    legacy = b'f:{"messageId":"m"}\n0:"Hello"\nd:{"finishReason":"stop"}\n'
    [missing] = [
        f
        for f in check_stream(legacy, protocol="ai_sdk_ui").findings
        if f.rule == "missing_terminal"
    ]
    assert "AI SDK 4 data stream" in missing.message
    [cut] = check_stream(body(START), protocol="ai_sdk_ui").findings
    assert cut.rule == "missing_terminal"
    assert "data stream" not in cut.message
