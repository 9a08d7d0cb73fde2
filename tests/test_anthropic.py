"""The Anthropic Messages checker: every fixture, every chunking, every rule and its look-alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard import Severity, check_stream
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.report import Finding
from streamguard.rules import RULES, rules_for
from streamguard.sse import Event, EventParser
from tests.chunking import chunkings
from tests.conftest import CANARY_MARKER

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"

#: fixture name -> (outcome, [(rule, event_index), ...]) for ``protocol="anthropic"``.
EXPECTED: dict[str, tuple[str, list[tuple[str, int]]]] = {
    # Healthy, including every legitimate oddity of protocols.md §3.5.
    "ok_text_end_turn": ("completed", []),
    "ok_ping_before_message_start": ("completed", []),
    "ok_refusal_zero_blocks": ("completed", []),
    "ok_tool_use_empty_first_json_delta": ("completed", []),
    "ok_thinking_then_text": ("completed", []),
    "ok_redacted_thinking_no_deltas": ("completed", []),
    "ok_web_search_server_tool": ("completed", []),
    "ok_stop_max_tokens": ("completed", []),
    "ok_stop_pause_turn": ("completed", []),
    "ok_stop_model_context_window_exceeded": ("completed", []),
    "ok_error_overloaded_mid_block": ("error_event", []),
    "ok_error_before_any_block": ("error_event", []),
    "ok_unknown_event_block_and_delta_types": ("completed", [("unknown_event_type", 1)]),
    # Real but irregular: warnings only.
    "warn_tool_use_open_at_max_tokens": ("completed", [("block_open_at_limit", 8)]),
    "warn_prepopulated_message_start": ("completed", [("prepopulated_message_start", 0)]),
    "warn_prepopulated_message_start_then_block": (
        "completed",
        [("prepopulated_message_start", 0)],
    ),
    # Broken: one per rule.
    "event_name_mismatch_unnamed_message_start": ("completed", [("event_name_mismatch", 0)]),
    "event_name_mismatch_wrong_name": ("completed", [("event_name_mismatch", 2)]),
    "missing_message_start": ("completed", [("missing_message_start", 0)]),
    "duplicate_message_start": ("completed", [("duplicate_message_start", 7)]),
    "block_index_out_of_order": ("completed", [("block_index_out_of_order", 1)]),
    "block_not_started": ("completed", [("block_not_started", 7)]),
    "block_not_started_after_stop": ("completed", [("block_not_started", 7)]),
    "block_overlap": ("completed", [("block_overlap", 3)]),
    "block_not_stopped": ("completed", [("block_not_stopped", 3)]),
    "block_after_message_delta": ("completed", [("block_after_message_delta", 2)]),
    "delta_type_mismatch": ("completed", [("delta_type_mismatch", 2)]),
    "signature_not_last": ("completed", [("signature_not_last", 3)]),
    "tool_input_invalid": ("completed", [("tool_input_invalid", 9)]),
    "missing_message_delta": ("completed", [("missing_message_delta", 7)]),
    "missing_message_delta_null_stop_reason": ("completed", [("missing_message_delta", 8)]),
    "unknown_stop_reason": ("completed", [("unknown_stop_reason", 7)]),
    "usage_decreased": ("completed", [("usage_decreased", 7)]),
    "missing_terminal_truncated_mid_block": ("unclosed", [("missing_terminal", 3)]),
    "duplicate_terminal": ("completed", [("duplicate_terminal", 9)]),
    "event_after_terminal_done_sentinel": ("completed", [("event_after_terminal", 9)]),
    "event_after_terminal_after_error": ("error_event", [("event_after_terminal", 8)]),
    "schema_mismatch_done_sentinel_before_stop": (
        "unclosed",
        [("schema_mismatch", 8), ("missing_terminal", 9)],
    ),
    "schema_mismatch_message_delta_without_usage": ("completed", [("schema_mismatch", 7)]),
    "invalid_json": ("completed", [("invalid_json", 2)]),
    "invalid_json_deeply_nested": ("completed", [("invalid_json", 2)]),
}

#: rule -> (a fixture that breaks it, a legitimate look-alike that must not trigger it).
PAIRS: dict[str, tuple[str, str]] = {
    "event_name_mismatch": ("event_name_mismatch_unnamed_message_start", "ok_text_end_turn"),
    "missing_message_start": ("missing_message_start", "ok_ping_before_message_start"),
    "duplicate_message_start": ("duplicate_message_start", "ok_error_before_any_block"),
    "prepopulated_message_start": ("warn_prepopulated_message_start", "ok_refusal_zero_blocks"),
    "block_index_out_of_order": (
        "block_index_out_of_order",
        "warn_prepopulated_message_start_then_block",
    ),
    "block_not_started": ("block_not_started", "ok_redacted_thinking_no_deltas"),
    "block_overlap": ("block_overlap", "ok_thinking_then_text"),
    "block_not_stopped": ("block_not_stopped", "warn_tool_use_open_at_max_tokens"),
    "block_open_at_limit": ("warn_tool_use_open_at_max_tokens", "ok_stop_max_tokens"),
    "block_after_message_delta": ("block_after_message_delta", "ok_refusal_zero_blocks"),
    "delta_type_mismatch": ("delta_type_mismatch", "ok_web_search_server_tool"),
    "signature_not_last": ("signature_not_last", "ok_thinking_then_text"),
    "tool_input_invalid": ("tool_input_invalid", "ok_tool_use_empty_first_json_delta"),
    "missing_message_delta": ("missing_message_delta", "warn_prepopulated_message_start"),
    "unknown_stop_reason": ("unknown_stop_reason", "ok_stop_model_context_window_exceeded"),
    "unknown_event_type": ("ok_unknown_event_block_and_delta_types", "ok_text_end_turn"),
    "usage_decreased": ("usage_decreased", "ok_refusal_zero_blocks"),
    "missing_terminal": ("missing_terminal_truncated_mid_block", "ok_error_overloaded_mid_block"),
    "duplicate_terminal": ("duplicate_terminal", "ok_stop_pause_turn"),
    "event_after_terminal": ("event_after_terminal_done_sentinel", "ok_error_before_any_block"),
    "schema_mismatch": (
        "schema_mismatch_message_delta_without_usage",
        "ok_tool_use_empty_first_json_delta",
    ),
    "invalid_json": ("invalid_json", "ok_unknown_event_block_and_delta_types"),
}


def _fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


def _cases() -> list[tuple[str, str]]:
    return [
        (path.stem, chunking)
        for path in sorted(FIXTURES.glob("*.sse"))
        for chunking, _ in chunkings(path.read_bytes())
    ]


def test_every_fixture_has_an_expectation() -> None:
    """Every fixture file is listed in EXPECTED, and every listed fixture exists."""
    assert {path.stem for path in FIXTURES.glob("*.sse")} == set(EXPECTED)


@pytest.mark.parametrize(("name", "chunking"), _cases())
def test_fixture(name: str, chunking: str) -> None:
    """Each fixture gives its expected outcome and findings, however its bytes are cut."""
    chunks = dict(chunkings(_fixture(name)))[chunking]
    report = check_stream(chunks, protocol="anthropic")
    outcome, findings = EXPECTED[name]
    assert report.protocol == "anthropic"
    assert report.outcome.value == outcome
    assert [(f.rule, f.event_index) for f in report.findings] == findings


@pytest.mark.parametrize("rule", sorted(PAIRS))
def test_rule_fires_on_its_fixture_and_not_on_the_look_alike(rule: str) -> None:
    """Each rule fires on the fixture that breaks it and stays silent on its look-alike."""
    broken, look_alike = PAIRS[rule]
    assert rule in check_stream(_fixture(broken), protocol="anthropic").rules()
    assert rule not in check_stream(_fixture(look_alike), protocol="anthropic").rules()


def test_every_anthropic_rule_has_a_pair() -> None:
    """Every rule specific to the anthropic protocol is exercised by PAIRS."""
    specific = {rule.name for rule in rules_for("anthropic") if "anthropic" in rule.protocols}
    assert specific <= set(PAIRS)


@pytest.mark.parametrize(
    ("rule", "severity"),
    [
        ("block_overlap", Severity.WARNING),
        ("block_open_at_limit", Severity.WARNING),
        ("signature_not_last", Severity.WARNING),
        ("tool_input_invalid", Severity.WARNING),
        ("prepopulated_message_start", Severity.WARNING),
        ("unknown_stop_reason", Severity.WARNING),
        ("usage_decreased", Severity.WARNING),
        ("unknown_event_type", Severity.INFO),
        ("block_not_stopped", Severity.ERROR),
        ("event_name_mismatch", Severity.ERROR),
        ("delta_type_mismatch", Severity.ERROR),
    ],
)
def test_should_level_rules_are_warnings(rule: str, severity: Severity) -> None:
    """Observed conventions are warnings (or info); documented guarantees are errors."""
    assert RULES[rule].severity is severity


def test_healthy_fixtures_are_not_malformed() -> None:
    """No healthy or warning-only fixture carries an error-severity finding."""
    for path in FIXTURES.glob("*.sse"):
        if path.stem.startswith(("ok_", "warn_")):
            assert not check_stream(path.read_bytes(), protocol="anthropic").malformed, path.stem


def _stream(*events: tuple[str, str]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


_START = (
    "message_start",
    '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    '"model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,'
    '"usage":{"input_tokens":3,"output_tokens":1}}}',
)
_DELTA = (
    "message_delta",
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
)
_STOP = ("message_stop", '{"type":"message_stop"}')


def test_ping_with_non_json_data_is_ignored() -> None:
    """A ping is skipped by name, as the SDK does, even when its data is not JSON."""
    report = check_stream(
        _stream(_START, ("ping", "keepalive"), _DELTA, _STOP), protocol="anthropic"
    )
    assert (report.outcome.value, report.rules()) == ("completed", [])


def test_error_event_with_non_json_data_still_ends_the_stream() -> None:
    """An ``event: error`` whose data is not JSON is an error_event with invalid_json at it."""
    report = check_stream(_stream(_START, ("error", "upstream overloaded")), protocol="anthropic")
    assert report.outcome.value == "error_event"
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_json_that_is_not_an_object_is_invalid_json() -> None:
    """A JSON array where an event object belongs is invalid_json at that event."""
    report = check_stream(
        _stream(_START, ("message_delta", "[1, 2]"), _DELTA, _STOP), protocol="anthropic"
    )
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_boolean_block_index_is_a_schema_mismatch() -> None:
    """A JSON ``true`` is not a block index, although Python's bool is an int."""
    block_start = (
        "content_block_start",
        '{"type":"content_block_start","index":true,"content_block":{"type":"text","text":""}}',
    )
    report = check_stream(_stream(_START, block_start, _DELTA, _STOP), protocol="anthropic")
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]


def test_unknown_event_types_are_reported_once_each() -> None:
    """Repeated undocumented event types give one info finding per distinct name."""
    hint = ("hint", '{"type":"hint"}')
    report = check_stream(_stream(_START, hint, hint, _DELTA, _STOP), protocol="anthropic")
    assert [(f.rule, f.event_index, f.severity) for f in report.findings] == [
        ("unknown_event_type", 1, Severity.INFO)
    ]


def test_many_overlapping_blocks_keep_the_checker_bounded() -> None:
    """A hundred blocks opened without stops give one overlap warning each, and no crash."""
    starts = [
        (
            "content_block_start",
            f'{{"type":"content_block_start","index":{i},"content_block":{{"type":"text","text":""}}}}',
        )
        for i in range(100)
    ]
    report = check_stream(_stream(_START, *starts, _DELTA, _STOP), protocol="anthropic")
    assert report.rules() == ["block_overlap"] * 99 + ["block_not_stopped"]
    assert report.findings[-1].event_index == 101


# -- no wire value in a message, bounded state (issue #13) ----------------------------------

CANARY = f"{CANARY_MARKER}-anthropic"
_TEXT_START = (
    "content_block_start",
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
)


def _events(body: bytes) -> list[Event]:
    parser = EventParser()
    return [*parser.feed(body), *parser.feed(b"")]


def _run(checker: AnthropicChecker, body: bytes) -> list[Finding]:
    found: list[Finding] = []
    for index, event in enumerate(_events(body)):
        found.extend(checker.on_event(event, index))
    return found


#: Streams that put a canary in every wire field a message used to quote.
CANARY_STREAMS: dict[str, tuple[bytes, str]] = {
    "unknown event name": (
        _stream(_START, (CANARY, f'{{"type":"{CANARY}"}}')),
        "unknown_event_type",
    ),
    "name differs from type": (
        _stream(_START, ("content_block_delta", f'{{"type":"{CANARY}"}}')),
        "event_name_mismatch",
    ),
    "unnamed event": (
        _stream(_START) + f'data: {{"type":"{CANARY}"}}\n\n'.encode(),
        "event_name_mismatch",
    ),
    "type missing, odd name": (_stream(_START, (CANARY, "{}")), "schema_mismatch"),
    "not JSON, odd name": (_stream(_START, (CANARY, CANARY)), "invalid_json"),
    "not an object, odd name": (_stream(_START, (CANARY, "[1]")), "invalid_json"),
    "unknown stop reason": (
        _stream(
            _START,
            (
                "message_delta",
                f'{{"type":"message_delta","delta":{{"stop_reason":"{CANARY}"}},'
                '"usage":{"output_tokens":2}}',
            ),
            _STOP,
        ),
        "unknown_stop_reason",
    ),
    "prepopulated stop reason": (
        _stream(
            (
                "message_start",
                '{"type":"message_start","message":{"id":"m","type":"message","role":'
                '"assistant","model":"c","content":[],"stop_reason":"' + CANARY + '",'
                '"usage":{"input_tokens":1,"output_tokens":1}}}',
            ),
            _STOP,
        ),
        "prepopulated_message_start",
    ),
    "block type of an unstopped block": (
        _stream(
            _START,
            (
                "content_block_start",
                '{"type":"content_block_start","index":0,"content_block":{"type":"'
                + CANARY
                + '"}}',
            ),
            _DELTA,
            _STOP,
        ),
        "block_not_stopped",
    ),
}


@pytest.mark.parametrize("case", sorted(CANARY_STREAMS))
def test_messages_quote_no_wire_value(case: str) -> None:
    """An event name, JSON type, block type or stop reason from the wire never reaches a
    finding message, only its size and hash."""
    body, rule = CANARY_STREAMS[case]
    report = check_stream(body, protocol="anthropic")
    assert rule in report.rules()
    for finding in report.findings:
        assert CANARY_MARKER not in finding.message, finding


def test_documented_tokens_are_still_named() -> None:
    """A documented stop reason and block type stay readable in the message."""
    start = (
        "content_block_start",
        '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use",'
        '"id":"t","name":"f","input":{}}}',
    )
    limit = (
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":2}}',
    )
    [finding] = check_stream(_stream(_START, start, limit, _STOP), protocol="anthropic").findings
    assert finding.rule == "block_open_at_limit"
    assert "stop_reason 'max_tokens'" in finding.message
    assert "0 ('tool_use')" in finding.message


def test_huge_wire_integers_are_shown_by_size() -> None:
    """A block index or token count of forty digits is named by its size, not written out."""
    huge = 10**40
    start = (
        "content_block_start",
        f'{{"type":"content_block_start","index":{huge},"content_block":{{"type":"text","text":""}}}}',
    )
    delta = (
        "message_delta",
        f'{{"type":"message_delta","delta":{{"stop_reason":"end_turn"}},"usage":{{"output_tokens":{huge}}}}}',
    )
    lower = (
        "message_delta",
        '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}',
    )
    report = check_stream(_stream(_START, start, delta, lower, _STOP), protocol="anthropic")
    assert {"block_index_out_of_order", "usage_decreased"} <= set(report.rules())
    for finding in report.findings:
        assert str(huge) not in finding.message, finding


def test_long_lists_in_messages_are_cut_short() -> None:
    """Sixty-four open blocks are listed as three and a count, not one by one."""
    starts = [
        (
            "content_block_start",
            f'{{"type":"content_block_start","index":{i},"content_block":{{"type":"text","text":""}}}}',
        )
        for i in range(100)
    ]
    report = check_stream(_stream(_START, *starts, _DELTA, _STOP), protocol="anthropic")
    unstopped = report.findings[-1]
    assert unstopped.rule == "block_not_stopped"
    assert "and 61 more" in unstopped.message
    assert max(len(f.message) for f in report.findings) < 200


def test_names_the_stream_chose_are_kept_as_short_digests() -> None:
    """Long unknown event names and block types cost the checker a digest each, not
    their length."""
    checker = AnthropicChecker()
    long_name = "x" * 100_000
    body = _stream(
        _START,
        *((f"{long_name}{i}", f'{{"type":"{long_name}{i}"}}') for i in range(20)),
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"' + long_name + '"}}',
        ),
    )
    found = _run(checker, body)
    assert [f.rule for f in found] == ["unknown_event_type"] * 8
    assert sum(map(len, checker._unknown_reported)) < 8 * 40
    [block] = checker._blocks.open.values()
    assert block.kind is None
    assert len(block.label) < 40


def test_a_hundred_thousand_block_indices_keep_the_state_bounded() -> None:
    """A hostile stream opening 100,000 blocks leaves at most 64 tracked."""
    checker = AnthropicChecker()
    checker.on_event(Event("message_start", _START[1]), 0)
    for i in range(100_000):
        checker.on_event(Event(*_block_start(str(i), '{"type":"text","text":""}')), i + 1)
    assert len(checker._blocks.open) <= 64


# -- a shape problem does not hide the lifecycle (issue #12) --------------------------------


def _block_start(index: str, block: str) -> tuple[str, str]:
    return (
        "content_block_start",
        f'{{"type":"content_block_start","index":{index},"content_block":{block}}}',
    )


SHAPE_AND_LIFECYCLE: dict[str, tuple[list[tuple[str, str]], str, list[tuple[str, int]]]] = {
    "block start without content_block, out of order": (
        [
            _START,
            _block_start("1", "null"),
            ("content_block_stop", '{"type":"content_block_stop","index":1}'),
            _DELTA,
            _STOP,
        ],
        "completed",
        [("schema_mismatch", 1), ("block_index_out_of_order", 1)],
    ),
    "block start with a string type, overlapping": (
        [
            _START,
            _TEXT_START,
            _block_start("1", '{"type":7}'),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ("content_block_stop", '{"type":"content_block_stop","index":1}'),
            _DELTA,
            _STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("block_overlap", 2)],
    ),
    "block start with a string index, overlapping": (
        [
            _START,
            _TEXT_START,
            _block_start('"1"', '{"type":"text","text":""}'),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            _DELTA,
            _STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("block_overlap", 2)],
    ),
    "delta without an object, to a block never started": (
        [
            _START,
            ("content_block_delta", '{"type":"content_block_delta","index":3,"delta":"hi"}'),
            _DELTA,
            _STOP,
        ],
        "completed",
        [("schema_mismatch", 1), ("block_not_started", 1)],
    ),
    "delta with a wrong field, into the wrong block": (
        [
            _START,
            _TEXT_START,
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":5}}',
            ),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            _DELTA,
            _STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("delta_type_mismatch", 2)],
    ),
    "error named error with another type": (
        [_START, ("error", '{"type":"overloaded_error","message":"Overloaded"}')],
        "error_event",
        [("event_name_mismatch", 1), ("schema_mismatch", 1)],
    ),
    "error whose data is a JSON list": (
        [_START, ("error", "[]")],
        "error_event",
        [("invalid_json", 1)],
    ),
}


@pytest.mark.parametrize("case", sorted(SHAPE_AND_LIFECYCLE))
def test_shape_problems_come_with_the_lifecycle_rules(case: str) -> None:
    """An event of the wrong shape is reported as such and still checked for its place in
    the stream, on the fields it carries with the right type."""
    events, outcome, expected = SHAPE_AND_LIFECYCLE[case]
    report = check_stream(_stream(*events), protocol="anthropic")
    assert report.outcome.value == outcome
    assert [(f.rule, f.event_index) for f in report.findings] == expected


def test_error_event_with_the_wrong_field_types_is_a_schema_mismatch() -> None:
    """An error object whose message is a number is reported; the stream still ends in
    error_event."""
    error = ("error", '{"type":"error","error":{"type":"overloaded_error","message":529}}')
    report = check_stream(_stream(_START, error), protocol="anthropic")
    assert report.outcome.value == "error_event"
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]


# -- a tool block's input, within the stream's kept-text budget ------------------------------


def _tool_start(index: int) -> tuple[str, str]:
    return _block_start(str(index), '{"type":"tool_use","id":"t","name":"f","input":{}}')


def _json_delta(index: int, fragment: str) -> tuple[str, str]:
    delta = {"type": "input_json_delta", "partial_json": fragment}
    data = {"type": "content_block_delta", "index": index, "delta": delta}
    return ("content_block_delta", json.dumps(data))


def _block_stop(index: int) -> tuple[str, str]:
    return ("content_block_stop", f'{{"type":"content_block_stop","index":{index}}}')


@pytest.mark.parametrize(
    ("fragments", "rules"),
    [
        ([], []),
        (["", '{"a": ', "1}"], []),
        (['{"a": 1'], ["tool_input_invalid"]),
        (["[1, 2]"], ["tool_input_invalid"]),
        ([f'{{"secret": {CANARY}}}'], ["tool_input_invalid"]),
    ],
)
def test_tool_input_must_join_into_an_object(fragments: list[str], rules: list[str]) -> None:
    """The fragments of a stopped tool block are one JSON object (none at all is {}); the
    message gives their size, never their text."""
    body = _stream(
        _START,
        _tool_start(0),
        *(_json_delta(0, f) for f in fragments),
        _block_stop(0),
        _DELTA,
        _STOP,
    )
    report = check_stream(body, protocol="anthropic")
    assert report.rules() == rules
    for finding in report.findings:
        assert CANARY_MARKER not in finding.message


def test_kept_tool_input_is_given_back_to_the_budget() -> None:
    """Three hundred tool inputs of 60 KB, stopped, left open at max_tokens or pushed out
    by overlapping blocks, all give their room back."""
    checker = AnthropicChecker()
    fragment = '{"pad": "' + "x" * 60_000 + '"}'
    events = [_START]
    for i in range(300):
        events += [_tool_start(i), _json_delta(i, fragment), _block_stop(i)]
    overlapping = range(300, 400)  # more than the open blocks the checker tracks
    for i in overlapping:
        events += [_tool_start(i), _json_delta(i, "{")]
    limit = (
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}'
    )
    found = _run(checker, _stream(*events, ("message_delta", limit)))
    assert "tool_input_invalid" not in {f.rule for f in found}
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS


def test_past_the_budget_a_tool_input_is_not_checked() -> None:
    """An input larger than the stream's budget is dropped, unchecked, and its room given
    back: no finding, whatever the fragments were."""
    checker = AnthropicChecker()
    half = "x" * (MAX_KEPT_TEXT_CHARS // 2 + 1)
    events = [_START, _tool_start(0), _json_delta(0, "{" + half), _json_delta(0, half)]
    assert _run(checker, _stream(*events)) == []
    assert checker._blocks.open[0].input.text() is None
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS
    assert _run(checker, _stream(_block_stop(0))) == []
