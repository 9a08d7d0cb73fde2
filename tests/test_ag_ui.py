"""The AG-UI checker: its rules beyond the fixtures, its bounds, its docs and the detection
helpers the monitor wires into auto-detection."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS
from streamguard.protocols.ag_ui import (
    MAX_LANES,
    MAX_OPEN_IDS,
    MAX_UNKNOWN_TYPES,
    AGUIChecker,
)
from streamguard.protocols.auto import protocol_for_event, protocol_for_path
from streamguard.rule_docs import ag_ui
from streamguard.rules import RULES
from streamguard.sse import Event
from tests.chunking import chunkings

from .sse_fixtures import fixtures

START = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISH = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def body(*events: Any, eol: str = "\n") -> bytes:
    return b"".join(
        f"data: {json.dumps(e, separators=(',', ':'))}{eol}{eol}".encode() for e in events
    )


def found(*events: Any) -> list[tuple[str, int | None]]:
    report = check_stream(body(*events), protocol="ag_ui")
    return [(f.rule, f.event_index) for f in report.findings]


def text(message_id: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant", **extra},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": "a", **extra},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id, **extra},
    ]


def test_the_checker_is_registered() -> None:
    """``ag_ui`` names this checker in the registry the config, CLI and auto use."""
    assert CHECKERS["ag_ui"] is AGUIChecker


def test_a_new_run_forgets_what_the_last_one_left_open() -> None:
    """After RUN_ERROR, a new RUN_STARTED starts clean: the open message is not carried over."""
    assert (
        found(
            START,
            {"type": "TEXT_MESSAGE_START", "messageId": "m"},
            {"type": "RUN_ERROR", "message": "x"},
            START,
            *text("m"),
            FINISH,
        )
        == []
    )


def test_a_chunk_stream_is_closed_by_the_next_event_of_another_kind() -> None:
    """TEXT_MESSAGE_CONTENT for an id a chunk stream holds: the expansion ends it first."""
    assert found(
        START,
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "b"},
        FINISH,
    ) == [("id_not_open", 2)]


def test_events_that_keep_a_chunk_stream_open() -> None:
    """RAW and ACTIVITY_* pass through the expansion: the chunk stream goes on after them."""
    assert (
        found(
            START,
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"},
            {"type": "RAW", "event": {}},
            {"type": "TEXT_MESSAGE_CHUNK", "delta": "b"},
            FINISH,
        )
        == []
    )


def test_a_chunk_opening_an_open_message_is_a_second_start() -> None:
    """A chunk with the id of a message opened by TEXT_MESSAGE_START starts it again."""
    assert found(
        START,
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "a"},
        FINISH,
    ) == [("id_already_open", 2)]


def test_steps_are_keyed_by_subagent_lane() -> None:
    """A step finished in another lane than it started in is not open there."""
    assert found(
        START,
        {"type": "STEP_STARTED", "stepName": "s"},
        {"type": "STEP_FINISHED", "stepName": "s", "subagentRunId": "sub"},
        {"type": "STEP_FINISHED", "stepName": "s"},
        FINISH,
    ) == [("id_not_open", 2)]


def test_subagents_open_and_close() -> None:
    """A subagent still running at RUN_FINISHED is open; finishing one never started is not."""
    assert found(
        START,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "a", "name": "x"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "b"},
        FINISH,
    ) == [("id_not_open", 2), ("id_not_closed", 3)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("subagentRunId", None),
        ("metadata", None),
        ("metadata", []),
        ("timestamp", "1764460800"),
        ("timestamp", 1.5),
    ],
)
def test_base_fields_have_the_schema_types(field: str, value: Any) -> None:
    """Every event's optional base fields: no null, an object metadata, an integer time."""
    assert found(START, {"type": "CUSTOM", "name": "n", "value": 1, field: value}, FINISH) == [
        ("schema_mismatch", 1)
    ]


def test_an_integral_float_timestamp_is_an_integer() -> None:
    """1764460800000.0 is an integer to JavaScript's schema."""
    assert found({**START, "timestamp": 1764460800000.0}, FINISH) == []


@pytest.mark.parametrize(
    ("operation", "clean"),
    [
        ({"op": "add", "path": "/a", "value": None}, True),
        ({"op": "remove", "path": "/a"}, True),
        ({"op": "replace", "path": "", "value": {}}, True),
        ({"op": "move", "from": "/a", "path": "/b"}, True),
        ({"op": "test", "path": "/a", "value": 1}, True),
        ({"op": "add", "path": "/a"}, False),
        ({"op": "copy", "path": "/b"}, False),
        ({"op": "upsert", "path": "/a", "value": 1}, False),
        ({"op": "remove", "path": "a"}, False),
        ({"op": "remove", "path": 3}, False),
        ({"op": "remove", "path": "/a~2"}, False),
        ({"op": "_get", "path": "/a"}, False),
        ({"op": "move", "from": "a", "path": "/b"}, False),
        (["remove", "/a"], False),
        ({"op": {}, "path": "/a"}, False),
        ({"op": ["add"], "path": "/a", "value": 1}, False),
    ],
)
def test_state_patches_are_checked_as_the_schema_types_them(operation: Any, clean: bool) -> None:
    """The operations the 1.0 schema's JSON Patch type accepts, and those it refuses."""
    events = [START, {"type": "STATE_SNAPSHOT", "snapshot": {}}]
    events.append({"type": "STATE_DELTA", "delta": [operation]})
    assert found(*events, FINISH) == ([] if clean else [("invalid_state_patch", 2)])


@pytest.mark.parametrize(
    ("separator", "expected"),
    [
        ("\n", []),
        ("\r\n", [("crlf_framing", 1)]),
        ("\r", []),  # a blind spot: CR-only framing measures like LF
    ],
)
def test_crlf_framing_is_measured_from_event_offsets(
    separator: str, expected: list[tuple[str, int]]
) -> None:
    """LF framing is clean, CR LF is reported once, however the body is cut."""
    data = body(START, *text("m"), FINISH, eol=separator)
    for _, chunks in chunkings(data):
        report = check_stream(chunks, protocol="ag_ui")
        assert [(f.rule, f.event_index) for f in report.findings] == expected


def test_comments_and_missing_spaces_wait_for_a_clean_pair() -> None:
    """A comment or ``data:`` without its space says nothing; the next clean pair decides."""
    lf = b": ping\n\n".join(body(e) for e in [START, *text("m")]) + body(FINISH)
    assert check_stream(lf, protocol="ag_ui").findings == ()
    crlf = body(START, eol="\r\n").replace(b"data: ", b"data:") + body(
        *text("m"), FINISH, eol="\r\n"
    )
    report = check_stream(crlf, protocol="ag_ui")
    assert [(f.rule, f.event_index) for f in report.findings] == [("crlf_framing", 2)]


def test_a_single_event_is_never_judged_for_framing() -> None:
    """One event has no gap to measure (and the client reads a lone event anyway)."""
    report = check_stream(body({"type": "RUN_ERROR", "message": "x"}, eol="\r\n"), protocol="ag_ui")
    assert report.findings == ()


def test_open_ids_and_lanes_are_bounded() -> None:
    """Past the caps nothing more is kept, and no false finding comes of it."""
    checker = AGUIChecker()
    events: list[Any] = [START]
    events += [
        {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}"} for i in range(MAX_OPEN_IDS + 9)
    ]
    events += [
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": f"c{i}", "subagentRunId": f"s{i}"}
        for i in range(MAX_LANES + 9)
    ]
    events.append(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{MAX_OPEN_IDS + 5}", "delta": "x"}
    )
    rules = []
    for index, event in enumerate(events):
        rules += [f.rule for f in checker.on_event(Event("message", json.dumps(event)), index)]
    assert rules == []
    assert len(checker._pending) == MAX_LANES
    assert checker._ids.counts() == {"text": MAX_OPEN_IDS}


def test_unknown_types_are_reported_once_each_and_bounded() -> None:
    """Each unknown type once; at most MAX_UNKNOWN_TYPES of them per stream."""
    events = [START, *({"type": f"X_{i % 40}"} for i in range(200)), FINISH]
    assert [rule for rule, _ in found(*events)] == ["unknown_event_type"] * MAX_UNKNOWN_TYPES


@pytest.mark.parametrize("outcome", [{}, [], {"a": 1}, 7, None])
def test_an_outcome_type_of_any_json_type_is_a_finding(outcome: Any) -> None:
    """An outcome type that is not a string is schema_mismatch, never a failure of the check."""
    finish = {**FINISH, "outcome": {"type": outcome}}
    report = check_stream(body(START, finish), protocol="ag_ui")
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]


def test_messages_never_quote_wire_values() -> None:
    """Ids, step names, unknown types and enum values appear by size and hash only."""
    secret = "SECRET-VALUE-42"
    report = check_stream(
        body(
            START,
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": secret, "delta": "a"},
            {"type": "STEP_FINISHED", "stepName": secret},
            {"type": secret},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": secret},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": secret}},
        ),
        protocol="ag_ui",
    )
    assert len(report.findings) >= 5
    assert not any(secret in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/ag-ui/agent", True),
        ("/awp", True),
        ("/agui/", True),
        ("/", False),
        ("/api/chat", False),
        ("/v1/messages", False),
        (None, False),
    ],
)
def test_paths_that_name_ag_ui(path: str | None, expected: bool) -> None:
    """A path segment that names the protocol; most AG-UI endpoints are found by event."""
    assert (protocol_for_path(path) == "ag_ui") is expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ('{"type":"RUN_STARTED","threadId":"t","runId":"r"}', True),
        ('{"type":"RUN_ERROR","message":"x"}', True),
        ('{"type":"TEXT_MESSAGE_CHUNK","delta":"a"}', True),
        ('{"type":"start","messageId":"m"}', False),
        ('{"type":"message_start","message":{}}', False),
        ('{"type":"error","error":{}}', False),
        ('{"type":"ON_CHAT_MODEL_STREAM"}', False),
        ('{"type":[]}', False),
        ('{"type":{"RUN_STARTED":1}}', False),
        ("[DONE]", False),
    ],
)
def test_a_first_event_decides_by_its_type(data: str, expected: bool) -> None:
    """An AG-UI event type (upper case, no other protocol uses them) decides."""
    assert (protocol_for_event(Event("message", data)) == "ag_ui") is expected


def test_docs_live_with_their_first_protocol() -> None:
    """rule_docs/ag_ui.py documents the AG-UI rules and the id rules it shares."""
    for doc in ag_ui.DOCS:
        assert RULES[doc.name].protocols[0] == "ag_ui", doc.name


@pytest.mark.parametrize("doc", ag_ui.DOCS, ids=lambda doc: doc.name)
def test_each_example_fires_its_rule(doc: Any) -> None:
    """Every example here is a whole stream that breaks its rule (CR LF written as escapes)."""
    example = doc.example.replace("\\r\\n", "\r\n").replace("\r\n\n", "\r\n")
    report = check_stream((example + "\n\n").encode(), protocol="ag_ui")
    assert doc.name in report.rules()


def test_every_raised_rule_has_a_fixture() -> None:
    """Each rule the checker can raise fires on at least one of its fixtures."""
    raised = {r.name for r in AGUIChecker.RAISES | AGUIChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("ag_ui") for rule in fixture.check().rules()}
    assert raised <= seen


# -- the deprecated THINKING_* events, as the client translates them (issue 27) -------------

THINK_START = {"type": "THINKING_START", "title": "Planning"}
THINK_END = {"type": "THINKING_END"}
THINK_MESSAGE = [
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "Think."},
    {"type": "THINKING_TEXT_MESSAGE_END"},
]


def test_legacy_thinking_blocks_one_after_another_are_clean() -> None:
    """The look-alike: each THINKING_START ended by its THINKING_END, a message in each,
    and a second run with its own block."""
    block = [THINK_START, *THINK_MESSAGE, THINK_END]
    assert found(START, *block, *block, FINISH, START, *block, FINISH) == []


def test_a_replayed_thinking_start_leaves_a_span_open() -> None:
    """The client's compatibility layer gives each THINKING_START a fresh id and the next
    THINKING_END the last one's: a replayed start leaves a reasoning span open, and the
    client fails RUN_FINISHED ("reasoning spans are still active")."""
    events = [START, THINK_START, THINK_START, *THINK_MESSAGE, THINK_END, FINISH]
    assert found(*events) == [("id_not_closed", 7)]
    report = check_stream(body(*events), protocol="ag_ui")
    assert "1 reasoning span(s) still open" in report.findings[0].message


def test_a_replayed_thinking_message_start_leaves_a_message_open() -> None:
    events = [START, THINK_START, THINK_MESSAGE[0], *THINK_MESSAGE, THINK_END, FINISH]
    assert found(*events) == [("id_not_closed", 7)]


@pytest.mark.parametrize(
    ("events", "index"),
    [
        ([START, THINK_END, FINISH], 1),  # no THINKING_START at all
        ([START, THINK_START, THINK_END, THINK_END, FINISH], 3),  # a replayed end
        ([START, THINK_START, *THINK_MESSAGE, THINK_MESSAGE[1], THINK_END, FINISH], 5),
        ([START, THINK_START, *THINK_MESSAGE, THINK_MESSAGE[2], THINK_END, FINISH], 5),
        ([START, THINK_START, THINK_MESSAGE[1], THINK_END, FINISH], 2),  # content, no start
    ],
    ids=["end-without-start", "end-twice", "content-after-end", "end-message-twice", "no-start"],
)
def test_a_thinking_continuation_with_no_opener_open(events: list[Any], index: int) -> None:
    """With no opener left, the layer mints an id nothing opened and the client throws."""
    assert found(*events) == [("id_not_open", index)]
    report = check_stream(body(*events), protocol="ag_ui")
    assert "no THINKING_" in report.findings[0].message


def test_a_thinking_end_in_the_next_run_names_the_last_runs_span() -> None:
    """The layer keeps its ids for the whole run call, the verifier forgets them at each
    RUN_STARTED: a THINKING_END after RUN_STARTED ends a span that is no longer open."""
    events = [START, THINK_START, {"type": "RUN_ERROR", "message": "x"}, START, THINK_END, FINISH]
    assert found(*events) == [("id_not_open", 4)]
    report = check_stream(body(*events), protocol="ag_ui")
    assert "only an earlier run's THINKING_START" in report.findings[0].message


# -- RUN_FINISHED / RUN_ERROR usage entries (TokenUsageSchema) ------------------------------


@pytest.mark.parametrize(
    ("usage", "problem"),
    [
        ([7], "field `usage[0]` is int, not an object"),
        ([None], "field `usage[0]` is null, not an object"),
        ([{"inputTokens": 3}, "x"], "field `usage[1]` is str, not an object"),
        ([{"inputTokens": "3"}], "field `usage[0].inputTokens` is a str, not an integer"),
        ([{"provider": None}], "field `usage[0].provider` is null"),
    ],
)
@pytest.mark.parametrize("terminal", ["RUN_FINISHED", "RUN_ERROR"])
def test_a_usage_entry_the_schema_refuses(usage: Any, problem: str, terminal: str) -> None:
    """Each usage entry is a TokenUsage object: the client's zod schema rejects the event
    (ZodError) otherwise."""
    end = FINISH if terminal == "RUN_FINISHED" else {"type": "RUN_ERROR", "message": "x"}
    report = check_stream(body(START, {**end, "usage": usage}), protocol="ag_ui")
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]
    assert problem in report.findings[0].message


def test_usage_entries_of_the_schema_shape_are_clean() -> None:
    usage = [
        {"provider": "openai", "model": "gpt-5", "inputTokens": 3, "outputTokens": 4},
        {"totalTokens": 7.0, "reasoningTokens": 1, "vendorField": {"kept": True}},
    ]
    assert found(START, {**FINISH, "usage": usage}) == []
    assert found(START, {**FINISH, "usage": []}) == []


# -- as @ag-ui/client reads it (issue 27) ---------------------------------------------------


def call(call_id: str, args: str = "{}") -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def result(call_id: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_RESULT", "messageId": "m9", "toolCallId": call_id, "content": "x"}


@pytest.mark.parametrize(
    ("first", "again"),
    [
        (call("c1"), call("c1")),
        (text("m1"), text("m1")),
        (
            [{"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"}],
            call("c1"),
        ),
        (
            call("c1"),
            [{"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"}],
        ),
        (
            # The call closes the first chunk stream; the second chunk reopens m1.
            [{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"}, *call("c1")],
            [{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "b"}],
        ),
    ],
    ids=["tool", "text", "tool-chunk-then-start", "tool-start-then-chunk", "text-chunks"],
)
def test_a_start_replayed_after_its_end_in_the_run_is_already_open(
    first: list[Any], again: list[Any]
) -> None:
    """The client merges a message or a call started again after its end into the one it
    holds by that id (text and arguments run together): id_already_open, saying so."""
    report = check_stream(body(START, *first, *again, FINISH), protocol="ag_ui")
    [finding] = report.findings
    assert (finding.rule, finding.event_index) == ("id_already_open", 1 + len(first))
    assert "already started and ended in this run" in finding.message


def test_ids_ended_in_an_earlier_run_may_start_again() -> None:
    """The look-alike: a new run forgets the ids the last one ended (a replay of a stored
    thread), and distinct ids in one run are clean."""
    assert not found(
        START, *call("c1"), *text("m1"), FINISH, START, *call("c1"), *text("m1"), FINISH
    )
    assert not found(START, *call("c1"), *call("c2"), *text("m1"), *text("m2"), FINISH)


def test_ended_ids_are_bounded() -> None:
    """Past MAX_OPEN_IDS ended calls, one not kept starts again unreported."""
    calls = [event for n in range(MAX_OPEN_IDS + 5) for event in call(f"c{n}")]
    last = call(f"c{MAX_OPEN_IDS + 4}")
    assert not found(START, *calls, *last, FINISH)
    assert found(START, *calls, *call("c0"), FINISH) == [("id_already_open", len(calls) + 1)]


def test_a_result_for_a_call_never_started_is_reported_as_info() -> None:
    """No TOOL_CALL_START of the stream and no call in the echoed input: the client keeps an
    orphan tool message. An info, since a resumed run may answer the client's history."""
    report = check_stream(body(START, result("c9"), FINISH), protocol="ag_ui")
    [finding] = report.findings
    assert (finding.rule, finding.severity.value, finding.event_index) == (
        "tool_result_without_call",
        "info",
        1,
    )


#: An assistant message of the client's history that called tool c1 (``AssistantMessage``).
ASSISTANT_CALL = {
    "id": "a",
    "role": "assistant",
    "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}


def run_input(*messages: dict[str, Any]) -> dict[str, Any]:
    """A ``RunAgentInput`` as a server echoes it in ``RUN_STARTED.input``."""
    return {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": list(messages),
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def test_a_result_for_a_call_started_anywhere_in_the_stream_or_its_input_is_clean() -> None:
    """The look-alikes: the call started (ended or still open) in this run, in an earlier run
    of the stream, by a chunk, or is held by the run's echoed input."""
    chunk = {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"}
    echoed = dict(START, input=run_input(ASSISTANT_CALL))
    assert not found(START, *call("c1"), result("c1"), FINISH)
    assert not found(START, *call("c1")[:2], result("c1"), call("c1")[2], FINISH)
    assert not found(START, *call("c1"), FINISH, START, result("c1"), FINISH)
    assert not found(START, chunk, result("c1"), FINISH)
    assert not found(echoed, result("c1"), FINISH)


def test_echoed_input_is_read_within_bounds() -> None:
    """Only the first MAX_OPEN_IDS messages of the echoed input are read."""
    filler = [{"id": f"u{n}", "role": "user", "content": "x"} for n in range(MAX_OPEN_IDS)]
    echoed = dict(START, input=run_input(*filler, ASSISTANT_CALL))
    assert found(echoed, result("c1"), FINISH) == [("tool_result_without_call", 1)]


@pytest.mark.parametrize(
    ("end", "index"),
    [
        ({"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"}, 1),
        ({"type": "RUN_FINISHED", "threadId": "t2", "runId": "r"}, 1),
        ({"type": "RUN_ERROR", "message": "boom", "runId": "r2"}, 1),
    ],
    ids=["run-id", "thread-id", "run-error"],
)
def test_a_run_end_naming_another_run_is_a_mismatch(end: dict[str, Any], index: int) -> None:
    """RUN_FINISHED (or a RUN_ERROR that carries one) with another runId or threadId than
    its RUN_STARTED's: a warning, the ids shown by size and hash only."""
    report = check_stream(body(START, end), protocol="ag_ui")
    [finding] = [f for f in report.findings if f.rule == "run_id_mismatch"]
    assert (finding.severity.value, finding.event_index) == ("warning", index)
    assert "r2" not in finding.message
    assert "t2" not in finding.message


def test_run_ends_that_match_their_start_are_clean() -> None:
    """The look-alikes: matching ids, a RUN_ERROR without ids, two runs each ending with its
    own ids, and a nested RUN_STARTED (reported as such) that does not replace the run's."""
    second = {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"}
    second_end = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"}
    assert not found(START, FINISH)
    assert not found(START, {"type": "RUN_ERROR", "message": "boom"})
    assert not found(START, FINISH, second, second_end)
    assert found(START, second, FINISH) == [("duplicate_run_started", 1)]
