"""The Cohere v2 chat checker: its rules beyond the fixtures, its bounds and detection."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS, SPECS
from streamguard.protocols.auto import protocol_for_event, protocol_for_path
from streamguard.protocols.cohere import MAX_OPEN, MAX_UNKNOWN_TYPES, CohereChecker
from streamguard.sse import Event
from streamguard.testing import collect_bytes

from .sse_fixtures import fixtures

START = {"type": "message-start", "id": "m", "delta": {}}
END = {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": {}}}


def body(*events: Any) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def found(*events: Any) -> list[tuple[str, int | None]]:
    report = check_stream(body(*events), protocol="cohere")
    return [(f.rule, f.event_index) for f in report.findings]


def block(kind: str, i: int, does: str) -> dict[str, Any]:
    return {"type": f"{kind}-{does}", "index": i, "delta": {"message": {}}}


def test_the_checker_is_registered() -> None:
    assert CHECKERS["cohere"] is CohereChecker
    assert SPECS["cohere"].rules == ()  # every rule it raises is the catalog's


@pytest.mark.parametrize("kind", ["content", "tool-call", "citation"])
def test_each_kind_of_block_is_tracked_apart(kind: str) -> None:
    """Content blocks, tool calls and citations number their indices each on their own."""
    events = [
        START,
        block("content", 0, "start"),
        block(kind, 1 if kind == "content" else 0, "start"),
    ]
    events += [block(kind, 1 if kind == "content" else 0, "end"), block("content", 0, "end"), END]
    assert found(*events) == []


def test_a_start_may_skip_indices() -> None:
    """The look-alike of a used index: content block 2 first, then 5 (the SDK hands each
    event on, and the caller joins deltas by index)."""
    events = [START, block("content", 2, "start"), block("content", 2, "end")]
    events += [block("content", 5, "start"), block("content", 5, "end"), END]
    assert found(*events) == []
    again = [START, block("content", 2, "start"), block("content", 2, "end")]
    again += [block("content", 2, "start"), block("content", 2, "end"), END]
    assert found(*again) == [("block_index_out_of_order", 3)]


def test_blocks_open_at_message_end_are_one_finding_per_kind() -> None:
    """As every numbered tracker words it: each kind's open entries in one finding."""
    events = [START, block("content", 0, "start"), block("citation", 0, "start"), END]
    report = check_stream(body(*events), protocol="cohere")
    assert [(f.rule, f.message) for f in report.findings] == [
        ("block_not_stopped", "event 3 (message-end): 1 content block(s) were never ended: 0"),
        ("block_not_stopped", "event 3 (message-end): 1 citation(s) were never ended: 0"),
    ]


def test_a_delta_for_another_kinds_index_is_not_started() -> None:
    """Tool call 0's delta while only content block 0 is open."""
    events = [START, block("content", 0, "start"), block("tool-call", 0, "delta"), END]
    assert found(*events) == [("block_not_started", 2), ("block_not_stopped", 3)]


def test_open_blocks_are_bounded() -> None:
    """Past MAX_OPEN open blocks nothing more is kept, and no false finding comes of it."""
    checker = CohereChecker()
    events = [START, *(block("content", i, "start") for i in range(MAX_OPEN + 9))]
    events += [block("content", MAX_OPEN + 5, "delta"), block("content", MAX_OPEN + 5, "end")]
    rules = []
    for index, event in enumerate(events):
        rules += [
            f.rule for f in checker.on_event(Event("content-start", json.dumps(event)), index)
        ]
    assert rules == []
    assert len(checker._open["content block"].open) == MAX_OPEN


def test_unknown_types_are_reported_once_each_and_bounded() -> None:
    events = [START, *({"type": f"x-{i % 40}"} for i in range(200)), END]
    assert [rule for rule, _ in found(*events)] == ["unknown_event_type"] * MAX_UNKNOWN_TYPES


def test_messages_never_quote_wire_values() -> None:
    secret = "SECRET-VALUE-42"
    report = check_stream(
        body(START, {"type": secret}, {"type": "content-delta", "index": secret}, END),
        protocol="cohere",
    )
    assert len(report.findings) == 2
    assert not any(secret in f.message for f in report.findings)


def test_the_transcript_joins_the_text_and_the_finish_reason() -> None:
    """What the test helpers and the CLI read of a stream: its text and finish reason."""
    fixture = next(f for f in fixtures("cohere") if f.name == "ok_text")
    said = collect_bytes(fixture.body, protocol="cohere")
    assert (said.texts, said.finish_reasons) == (("Hello, world",), ("COMPLETE",))


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/v2/chat", True), ("/cohere/v2/chat", True), ("/v1/chat", False), ("/v2/chats", False)],
)
def test_the_v2_chat_path(path: str, expected: bool) -> None:
    assert (protocol_for_path(path) == "cohere") is expected


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("message-start", "{}", True),
        ("content-delta", "not json", True),
        ("message", '{"type":"content-delta","index":0}', True),
        ("message", '{"type":"message_start","message":{}}', False),
        ("debug", '{"type":"debug"}', False),
        ("message", '{"type":"debug"}', False),
    ],
)
def test_a_first_event_decides_by_its_hyphenated_name_or_type(
    name: str, data: str, expected: bool
) -> None:
    assert (protocol_for_event(Event(name, data)) == "cohere") is expected


@pytest.mark.parametrize("fixture", fixtures("cohere"), ids=lambda f: f.name)
def test_every_fixture_is_detected_under_auto(fixture: Any) -> None:
    configured = fixture.check()
    auto = check_stream(fixture.body, protocol="auto", request=fixture.request)
    assert (auto.protocol, auto.rules(), auto.outcome) == (
        "cohere",
        configured.rules(),
        configured.outcome,
    )


def test_every_raised_rule_has_a_fixture() -> None:
    raised = {r.name for r in CohereChecker.RAISES | CohereChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("cohere") for rule in fixture.check().rules()}
    assert raised <= seen


def test_a_gateways_done_is_no_event_of_the_protocol() -> None:
    """[DONE] is where the SDK stops reading: never invalid JSON; before message-end the
    stream still lacks its terminal, after it nothing follows the end."""
    early = body(START) + b"data: [DONE]\n\n"
    report = check_stream(early, protocol="cohere")
    assert [(f.rule, f.event_index) for f in report.findings] == [("missing_terminal", 2)]
    late = body(START, END) + b"data: [DONE]\n\n"
    assert check_stream(late, protocol="cohere").findings == ()


def test_what_follows_an_early_done_is_lost_to_the_client() -> None:
    """The SDK stops at the first [DONE]: a message-end after it never reaches the caller,
    so the stream is as unfinished as one cut there (issue 46's silent loss)."""
    cut = body(START) + b"data: [DONE]\n\n" + body(END)
    report = check_stream(cut, protocol="cohere")
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("event_after_terminal", 2),
        ("missing_terminal", 3),
    ]
    assert report.outcome == "unclosed"
    kept_alive = body(START) + b"data: \n\n" + body(END) + b"data: [DONE]\n\n"
    assert check_stream(kept_alive, protocol="cohere").findings == ()


def test_usage_is_optional_but_of_no_other_type() -> None:
    """``ChatMessageEndEventDelta.usage`` is optional: absent or null, the SDK yields
    message-end; of another type it cannot build the event and skips it, finish reason and
    all (both read with cohere 7.3)."""
    for usage in ({}, {"usage": None}):
        end = {"type": "message-end", "delta": {"finish_reason": "COMPLETE", **usage}}
        assert check_stream(body(START, end), protocol="cohere").findings == ()
    end = {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": "x"}}
    report = check_stream(body(START, end), protocol="cohere")
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]
