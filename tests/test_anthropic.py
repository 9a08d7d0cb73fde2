"""The Anthropic Messages checker: streams built here (its fixtures: tests/test_fixtures.py)."""

from __future__ import annotations

import json

import pytest

from streamguard import Severity, check_stream
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.rules import RULES
from streamguard.sse import Event
from tests.conftest import CANARY_MARKER
from tests.helpers import (
    ANTHROPIC_DELTA,
    ANTHROPIC_START,
    ANTHROPIC_STOP,
    anthropic_stream,
    run_checker,
)


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


def test_ping_with_non_json_data_is_ignored() -> None:
    """A ping is skipped by name, as the SDK does, even when its data is not JSON."""
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, ("ping", "keepalive"), ANTHROPIC_DELTA, ANTHROPIC_STOP),
        protocol="anthropic",
    )
    assert (report.outcome.value, report.rules()) == ("completed", [])


def test_error_event_with_non_json_data_still_ends_the_stream() -> None:
    """An ``event: error`` whose data is not JSON is an error_event with invalid_json at it."""
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, ("error", "upstream overloaded")), protocol="anthropic"
    )
    assert report.outcome.value == "error_event"
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_json_that_is_not_an_object_is_invalid_json() -> None:
    """A JSON array where an event object belongs is invalid_json at that event."""
    report = check_stream(
        anthropic_stream(
            ANTHROPIC_START, ("message_delta", "[1, 2]"), ANTHROPIC_DELTA, ANTHROPIC_STOP
        ),
        protocol="anthropic",
    )
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_boolean_block_index_is_a_schema_mismatch() -> None:
    """A JSON ``true`` is not a block index, although Python's bool is an int."""
    block_start = (
        "content_block_start",
        '{"type":"content_block_start","index":true,"content_block":{"type":"text","text":""}}',
    )
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, block_start, ANTHROPIC_DELTA, ANTHROPIC_STOP),
        protocol="anthropic",
    )
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]


def test_unknown_event_types_are_reported_once_each() -> None:
    """Repeated undocumented event types give one info finding per distinct name."""
    hint = ("hint", '{"type":"hint"}')
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, hint, hint, ANTHROPIC_DELTA, ANTHROPIC_STOP),
        protocol="anthropic",
    )
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
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, *starts, ANTHROPIC_DELTA, ANTHROPIC_STOP),
        protocol="anthropic",
    )
    assert report.rules() == ["block_overlap"] * 99 + ["block_not_stopped"]
    assert report.findings[-1].event_index == 101


# -- short messages, bounded state (issue #13); no wire value: tests/test_privacy.py -------

CANARY = f"{CANARY_MARKER}-anthropic"
_TEXT_START = (
    "content_block_start",
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
)


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
    [finding] = check_stream(
        anthropic_stream(ANTHROPIC_START, start, limit, ANTHROPIC_STOP), protocol="anthropic"
    ).findings
    assert finding.rule == "block_open_at_limit"
    assert "stop_reason 'max_tokens'" in finding.message
    assert "0 ('tool_use')" in finding.message


def test_long_lists_in_messages_are_cut_short() -> None:
    """Sixty-four open blocks are listed as three and a count, not one by one."""
    starts = [
        (
            "content_block_start",
            f'{{"type":"content_block_start","index":{i},"content_block":{{"type":"text","text":""}}}}',
        )
        for i in range(100)
    ]
    report = check_stream(
        anthropic_stream(ANTHROPIC_START, *starts, ANTHROPIC_DELTA, ANTHROPIC_STOP),
        protocol="anthropic",
    )
    unstopped = report.findings[-1]
    assert unstopped.rule == "block_not_stopped"
    assert "and 61 more" in unstopped.message
    assert max(len(f.message) for f in report.findings) < 200


def test_names_the_stream_chose_are_kept_as_short_digests() -> None:
    """Long unknown event names and block types cost the checker a digest each, not
    their length."""
    checker = AnthropicChecker()
    long_name = "x" * 100_000
    body = anthropic_stream(
        ANTHROPIC_START,
        *((f"{long_name}{i}", f'{{"type":"{long_name}{i}"}}') for i in range(20)),
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"' + long_name + '"}}',
        ),
    )
    found = run_checker(checker, body)
    assert [f.rule for f in found] == ["unknown_event_type"] * 8
    assert sum(map(len, checker._unknown_types)) < 8 * 40
    [block] = checker._blocks.open.values()
    assert block.kind is None
    assert len(block.label) < 40


def test_a_hundred_thousand_block_indices_keep_the_state_bounded() -> None:
    """A hostile stream opening 100,000 blocks leaves at most 64 tracked."""
    checker = AnthropicChecker()
    checker.on_event(Event("message_start", ANTHROPIC_START[1]), 0)
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
            ANTHROPIC_START,
            _block_start("1", "null"),
            ("content_block_stop", '{"type":"content_block_stop","index":1}'),
            ANTHROPIC_DELTA,
            ANTHROPIC_STOP,
        ],
        "completed",
        [("schema_mismatch", 1), ("block_index_out_of_order", 1)],
    ),
    "block start with a string type, overlapping": (
        [
            ANTHROPIC_START,
            _TEXT_START,
            _block_start("1", '{"type":7}'),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ("content_block_stop", '{"type":"content_block_stop","index":1}'),
            ANTHROPIC_DELTA,
            ANTHROPIC_STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("block_overlap", 2)],
    ),
    "block start with a string index, overlapping": (
        [
            ANTHROPIC_START,
            _TEXT_START,
            _block_start('"1"', '{"type":"text","text":""}'),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ANTHROPIC_DELTA,
            ANTHROPIC_STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("block_overlap", 2)],
    ),
    "delta without an object, to a block never started": (
        [
            ANTHROPIC_START,
            ("content_block_delta", '{"type":"content_block_delta","index":3,"delta":"hi"}'),
            ANTHROPIC_DELTA,
            ANTHROPIC_STOP,
        ],
        "completed",
        [("schema_mismatch", 1), ("block_not_started", 1)],
    ),
    "delta with a wrong field, into the wrong block": (
        [
            ANTHROPIC_START,
            _TEXT_START,
            (
                "content_block_delta",
                '{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":5}}',
            ),
            ("content_block_stop", '{"type":"content_block_stop","index":0}'),
            ANTHROPIC_DELTA,
            ANTHROPIC_STOP,
        ],
        "completed",
        [("schema_mismatch", 2), ("delta_type_mismatch", 2)],
    ),
    "error named error with another type": (
        [ANTHROPIC_START, ("error", '{"type":"overloaded_error","message":"Overloaded"}')],
        "error_event",
        [("event_name_mismatch", 1), ("schema_mismatch", 1)],
    ),
    "error whose data is a JSON list": (
        [ANTHROPIC_START, ("error", "[]")],
        "error_event",
        [("invalid_json", 1)],
    ),
}


@pytest.mark.parametrize("case", sorted(SHAPE_AND_LIFECYCLE))
def test_shape_problems_come_with_the_lifecycle_rules(case: str) -> None:
    """An event of the wrong shape is reported as such and still checked for its place in
    the stream, on the fields it carries with the right type."""
    events, outcome, expected = SHAPE_AND_LIFECYCLE[case]
    report = check_stream(anthropic_stream(*events), protocol="anthropic")
    assert report.outcome.value == outcome
    assert [(f.rule, f.event_index) for f in report.findings] == expected


def test_error_event_with_the_wrong_field_types_is_a_schema_mismatch() -> None:
    """An error object whose message is a number is reported; the stream still ends in
    error_event."""
    error = ("error", '{"type":"error","error":{"type":"overloaded_error","message":529}}')
    report = check_stream(anthropic_stream(ANTHROPIC_START, error), protocol="anthropic")
    assert report.outcome.value == "error_event"
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]


def test_a_start_lists_every_field_of_the_wrong_shape_by_its_path() -> None:
    """Every field of the wrong kind in message_start is named, in one schema_mismatch."""
    start = json.loads(ANTHROPIC_START[1])
    start["message"]["model"] = 7
    start["message"]["usage"]["input_tokens"] = "3"
    events = (("message_start", json.dumps(start)), ANTHROPIC_DELTA, ANTHROPIC_STOP)
    report = check_stream(anthropic_stream(*events), protocol="anthropic")
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 0)]
    message = report.findings[0].message
    assert "field `message.model` is an int, not a string" in message
    assert "field `message.usage.input_tokens` is a str, not an integer" in message


@pytest.mark.parametrize(("tokens", "rules"), [("1.0", []), ("1.5", ["schema_mismatch"])])
def test_a_token_count_is_an_integer_as_the_sdk_reads_it(tokens: str, rules: list[str]) -> None:
    """``1.0`` is an integer to the SDK's models (pydantic, lax) and to JavaScript; ``1.5``
    is not."""
    delta = ANTHROPIC_DELTA[1].replace('"output_tokens":2', f'"output_tokens":{tokens}')
    events = (ANTHROPIC_START, ("message_delta", delta), ANTHROPIC_STOP)
    report = check_stream(anthropic_stream(*events), protocol="anthropic")
    assert [f.rule for f in report.findings] == rules


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
    body = anthropic_stream(
        ANTHROPIC_START,
        _tool_start(0),
        *(_json_delta(0, f) for f in fragments),
        _block_stop(0),
        ANTHROPIC_DELTA,
        ANTHROPIC_STOP,
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
    events = [ANTHROPIC_START]
    for i in range(300):
        events += [_tool_start(i), _json_delta(i, fragment), _block_stop(i)]
    overlapping = range(300, 400)  # more than the open blocks the checker tracks
    for i in overlapping:
        events += [_tool_start(i), _json_delta(i, "{")]
    limit = (
        '{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}'
    )
    found = run_checker(checker, anthropic_stream(*events, ("message_delta", limit)))
    assert "tool_input_invalid" not in {f.rule for f in found}
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS


def test_past_the_budget_a_tool_input_is_not_checked() -> None:
    """An input larger than the stream's budget is dropped, unchecked, and its room given
    back: no finding, whatever the fragments were."""
    checker = AnthropicChecker()
    half = "x" * (MAX_KEPT_TEXT_CHARS // 2 + 1)
    events = [ANTHROPIC_START, _tool_start(0), _json_delta(0, "{" + half), _json_delta(0, half)]
    assert run_checker(checker, anthropic_stream(*events)) == []
    assert checker._blocks.open[0].input.text() is None
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS
    assert run_checker(checker, anthropic_stream(_block_stop(0))) == []
