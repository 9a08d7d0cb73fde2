"""OpenAI Chat Completions checker: fixtures, one per rule and per legitimate oddity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard import check_stream, rules
from streamguard.report import Outcome, Severity
from tests.chunking import chunkings
from tests.sse_fixtures import fixture_paths, load

PROTOCOL = "openai_chat"
PATHS = fixture_paths(PROTOCOL)

#: Every rule this checker can raise, with the healthy fixture that looks most like its
#: broken one and must stay clean.
LOOKALIKES = {
    "invalid_json": "clean-text-include-usage",
    "schema_mismatch": "clean-empty-content-and-unknown-keys",
    "missing_terminal": "clean-done-without-space",
    "duplicate_terminal": "clean-done-with-suffix",
    "event_after_terminal": "clean-keepalive-comments",
    "missing_finish_reason": "clean-finish-length",
    "content_after_finish": "clean-azure-prompt-filter-and-async-annotations",
    "multiple_finish_reason": "clean-delta-empty-after-finish",
    "unknown_finish_reason": "clean-finish-content-filter",
    "inconsistent_id": "clean-azure-prompt-filter-and-async-annotations",
    "choice_index_invalid": "clean-n3-interleaved",
    "choice_out_of_order": "clean-n3-interleaved",
    "role_not_first": "clean-refusal",
    "role_repeated": "clean-n3-interleaved",
    "tool_call_index_invalid": "clean-parallel-tool-calls",
    "tool_call_header_missing": "clean-parallel-tool-calls",
    "tool_call_header_repeated": "clean-forced-tool-choice-stop",
    "tool_call_arguments_invalid": "clean-forced-tool-choice-stop",
    "function_call_mixed": "clean-legacy-function-call",
    "usage_not_last": "clean-text-include-usage",
    "usage_repeated": "clean-text-include-usage",
    "usage_missing": "clean-forced-tool-choice-stop",
    "usage_unrequested": "clean-2024-no-usage-field",
    "usage_nonstandard": "clean-text-include-usage",
    "usage_total_mismatch": "clean-text-include-usage",
    "unexpected_event_field": "clean-text-include-usage",
}

#: Rules of the shared catalog this checker raises; the framing ones come from the parser.
SHARED = {
    "invalid_json",
    "schema_mismatch",
    "missing_terminal",
    "duplicate_terminal",
    "event_after_terminal",
    "missing_finish_reason",
    "content_after_finish",
}


def check(body: bytes, request: dict[str, object] | None = None) -> list[tuple[str, int | None]]:
    report = check_stream(body, protocol=PROTOCOL, request=request)
    return [(finding.rule, finding.event_index) for finding in report.findings]


def chunk(**fields: object) -> bytes:
    base: dict[str, object] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
    }
    base.update(fields)
    return b"data: " + json.dumps(base).encode() + b"\n\n"


FINISH = chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
DONE = b"data: [DONE]\n\n"


@pytest.mark.parametrize("path", PATHS, ids=[path.stem for path in PATHS])
def test_fixture(path: Path) -> None:
    """Each fixture gives exactly its expected outcome and findings, however it is cut."""
    fixture = load(path)
    for how, chunks in chunkings(fixture.body):
        report = check_stream(chunks, protocol=PROTOCOL, request=fixture.request)
        found = [(finding.rule, finding.event_index) for finding in report.findings]
        assert (report.outcome.value, found) == (fixture.outcome, fixture.findings), how


def test_every_rule_has_a_broken_fixture_and_a_clean_lookalike() -> None:
    """Every chat rule fires in a fixture named after it and has a clean look-alike."""
    fixtures = {path.stem: load(path) for path in PATHS}
    chat_rules = {rule.name for rule in rules.RULES.values() if rule.protocols == (PROTOCOL,)}
    assert chat_rules | SHARED == set(LOOKALIKES)
    for rule, clean in LOOKALIKES.items():
        broken = [f for name, f in fixtures.items() if name.split("-")[0] == rule]
        assert broken, f"no fixture named {rule}*.sse"
        assert all(rule in [found for found, _ in f.findings] for f in broken)
        assert fixtures[clean].findings == []
        assert fixtures[clean].outcome == "completed"


def test_schema_mismatch_names_the_field_path_and_event() -> None:
    """A wrongly typed field is reported with its path and the event index."""
    bad = chunk(choices=[{"index": 0, "delta": {"content": 5}, "finish_reason": None}])
    report = check_stream(chunk() + bad + FINISH + DONE, protocol=PROTOCOL)
    (finding,) = report.findings
    assert finding.rule == "schema_mismatch"
    assert finding.event_index == 1
    assert finding.message.startswith("event 1: field choices[0].delta.content: ")


def test_deeply_nested_json_is_a_finding_not_a_crash() -> None:
    """JSON nested past the parser's recursion limit is reported as invalid_json."""
    deep = b"data: " + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"\n\n"
    assert check(deep + chunk() + FINISH + DONE) == [("invalid_json", 0)]


def test_huge_number_is_a_finding_not_a_crash() -> None:
    """An integer too large for the parser is reported as invalid_json."""
    body = b'data: {"id":"c","object":"chat.completion.chunk","created":' + b"9" * 5000
    assert check(body + b',"model":"m","choices":[]}\n\n' + FINISH + DONE) == [("invalid_json", 0)]


def test_json_that_is_not_an_object_is_invalid_json() -> None:
    """A payload that parses as a JSON array is not a chunk."""
    assert check(b"data: [1, 2]\n\n" + chunk() + FINISH + DONE) == [("invalid_json", 0)]


def test_vllm_error_object_without_error_key_is_a_schema_mismatch() -> None:
    """vLLM's {"object": "error"} has no error key: the SDK does not raise, so it is malformed."""
    vllm = b'data: {"object":"error","message":"boom","type":"BadRequestError","code":400}\n\n'
    report = check_stream(chunk() + vllm, protocol=PROTOCOL)
    assert report.outcome is Outcome.UNCLOSED
    assert report.rules() == ["schema_mismatch", "missing_terminal", "missing_finish_reason"]


def test_falsy_error_key_is_an_ordinary_chunk() -> None:
    """A chunk with "error": null is not an in-band error, as for the SDK."""
    report = check_stream(chunk(error=None) + FINISH + DONE, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_usage_checks_need_the_request() -> None:
    """Without a request, neither usage_missing nor usage_unrequested can fire."""
    usage = chunk(choices=[], usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    assert check(chunk() + FINISH + DONE) == []
    assert check(chunk() + FINISH + usage + DONE) == []
    assert check(chunk() + FINISH + DONE, {"stream_options": {"include_usage": True}}) == [
        ("usage_missing", 2)
    ]
    assert check(chunk() + FINISH + usage + DONE, {"stream": True}) == [("usage_unrequested", 2)]


def test_severities_follow_the_reference_tags() -> None:
    """SHOULD-level chat rules are warnings; MUST-level ones are errors."""
    warnings = {name for name, rule in rules.RULES.items() if rule.severity is Severity.WARNING}
    assert {
        "role_not_first",
        "role_repeated",
        "unknown_finish_reason",
        "choice_out_of_order",
        "tool_call_header_missing",
        "tool_call_header_repeated",
        "tool_call_arguments_invalid",
        "function_call_mixed",
        "usage_unrequested",
        "usage_nonstandard",
        "usage_total_mismatch",
        "unexpected_event_field",
    } <= warnings
    for name in ("inconsistent_id", "multiple_finish_reason", "usage_missing", "usage_repeated"):
        assert rules.RULES[name].severity is Severity.ERROR


def test_tool_call_arguments_are_checked_once_per_call() -> None:
    """Each call's arguments are parsed at its choice's finish, and only then."""
    header = {"index": 0, "id": "call_1", "type": "function"}
    first = chunk(
        choices=[
            {
                "index": 0,
                "delta": {"tool_calls": [{**header, "function": {"name": "f", "arguments": "{"}}]},
                "finish_reason": None,
            }
        ]
    )
    rest = chunk(
        choices=[
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
                "finish_reason": "tool_calls",
            }
        ]
    )
    assert check(first + rest + DONE) == []
    assert check(first + FINISH + DONE) == [("tool_call_arguments_invalid", 1)]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("created", 1.0),
        ("created", "1"),
        ("model", 5),
        ("system_fingerprint", 5),
        ("service_tier", 5),
        ("obfuscation", 5),
        ("usage", "none"),
        ("choices.index", True),
        ("choices.logprobs", "none"),
        ("choices.finish_reason", 5),
        ("choices.delta.content", 5),
    ],
)
def test_common_chunk_with_a_mistyped_field_is_a_schema_mismatch(where: str, value: object) -> None:
    """The fast path for ordinary content chunks never waves through a mistyped field."""
    fields: dict[str, object] = {
        "system_fingerprint": None,
        "service_tier": "default",
        "obfuscation": "ab",
        "usage": None,
    }
    choice: dict[str, object] = {
        "index": 0,
        "delta": {"content": "x"},
        "logprobs": None,
        "finish_reason": None,
    }
    bad_fields, bad_choice = dict(fields), dict(choice)
    if where == "choices.delta.content":
        bad_choice["delta"] = {"content": value}
    elif where.startswith("choices."):
        bad_choice[where.removeprefix("choices.")] = value
    else:
        bad_fields[where] = value
    good = chunk(**fields, choices=[choice])
    body = good + good + chunk(**bad_fields, choices=[bad_choice]) + FINISH + DONE
    assert check(body) == [("schema_mismatch", 2)]
