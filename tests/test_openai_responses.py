"""OpenAI Responses checker: fixtures, one per rule and per legitimate oddity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard import check_stream, rules
from streamguard.report import Outcome, Severity
from tests.chunking import chunkings
from tests.sse_fixtures import fixture_paths, load

PROTOCOL = "openai_responses"
PATHS = fixture_paths(PROTOCOL)

#: Every rule this checker can raise, with the healthy fixture that looks most like its
#: broken one and must stay clean.
LOOKALIKES = {
    "invalid_json": "clean-gateway-done",
    "schema_mismatch": "clean-keepalive-and-unknown-events",
    "missing_terminal": "clean-incomplete",
    "duplicate_terminal": "clean-gateway-done",
    "event_after_terminal": "clean-gateway-done",
    "missing_response_created": "clean-resumed",
    "sequence_gap": "clean-keepalive-and-unknown-events",
    "item_out_of_order": "clean-reasoning-then-text",
    "item_overlap": "clean-keepalive-and-unknown-events",
    "item_not_open": "clean-resumed",
    "item_not_closed": "clean-reasoning-then-text",
    "item_status_unexpected": "clean-incomplete",
    "done_text_mismatch": "clean-text",
    "status_mismatch": "clean-queued-background",
    "response_id_changed": "clean-text",
    "event_type_mismatch": "clean-function-call",
}
SHARED = {
    "invalid_json",
    "schema_mismatch",
    "missing_terminal",
    "duplicate_terminal",
    "event_after_terminal",
}


def event(kind: str, sequence: int, **fields: object) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": sequence, **fields})
    return f"event: {kind}\ndata: {data}\n\n".encode()


def lifecycle(kind: str, sequence: int, status: str, **fields: object) -> bytes:
    response = {"id": "resp_1", "status": status, "usage": None, "error": None, **fields}
    return event(kind, sequence, response=response)


CREATED = lifecycle("response.created", 0, "in_progress")
COMPLETED = lifecycle("response.completed", 1, "completed", usage={"total_tokens": 1})


@pytest.mark.parametrize("path", PATHS, ids=[path.stem for path in PATHS])
def test_fixture(path: Path) -> None:
    """Each fixture gives exactly its expected outcome and findings, however it is cut."""
    fixture = load(path)
    for how, chunks in chunkings(fixture.body):
        report = check_stream(chunks, protocol=PROTOCOL, request=fixture.request)
        found = [(finding.rule, finding.event_index) for finding in report.findings]
        assert (report.outcome.value, found) == (fixture.outcome, fixture.findings), how


def test_every_rule_has_a_broken_fixture_and_a_clean_lookalike() -> None:
    """Every Responses rule fires in a fixture named after it and has a clean look-alike."""
    fixtures = {path.stem: load(path) for path in PATHS}
    own = {rule.name for rule in rules.RULES.values() if rule.protocols == (PROTOCOL,)}
    assert own | SHARED == set(LOOKALIKES)
    for rule, clean in LOOKALIKES.items():
        broken = [f for name, f in fixtures.items() if name.split("-")[0] == rule]
        assert broken, f"no fixture named {rule}*.sse"
        assert all(rule in [found for found, _ in f.findings] for f in broken)
        assert fixtures[clean].findings == []
        assert fixtures[clean].outcome == "completed"


def test_minimal_stream_is_clean() -> None:
    """created then completed, with nothing in between, is a complete stream."""
    report = check_stream(CREATED + COMPLETED, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_data_only_stream_without_event_names_is_clean() -> None:
    """The SDK reads only the JSON type, so a stream without event: lines is fine."""
    body = (CREATED + COMPLETED).replace(b"event: response.created\n", b"")
    body = body.replace(b"event: response.completed\n", b"")
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_schema_mismatch_names_the_field_path() -> None:
    """A wrongly typed nested field is reported with its path and the event index."""
    bad = event("response.completed", 1, response={"id": "resp_1", "status": 3})
    report = check_stream(CREATED + bad, protocol=PROTOCOL)
    assert report.rules() == ["schema_mismatch", "missing_terminal"]
    assert report.findings[0].event_index == 1
    assert report.findings[0].message.startswith("event 1: field response.status: ")


def test_deeply_nested_json_is_a_finding_not_a_crash() -> None:
    """JSON nested past the parser's recursion limit is reported as invalid_json."""
    deep = b"data: " + b"[" * 10000 + b"]" * 10000 + b"\n\n"
    completed = lifecycle("response.completed", 2, "completed", usage={"total_tokens": 1})
    report = check_stream(CREATED + deep + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_resume_from_the_request_path() -> None:
    """starting_after in the request path also marks a stream as resumed."""
    body = COMPLETED.replace(b'"sequence_number": 1', b'"sequence_number": 8')
    report = check_stream(body, protocol=PROTOCOL, path="/v1/responses/resp_1?starting_after=7")
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())
    report = check_stream(body, protocol=PROTOCOL, path="/v1/responses")
    assert report.rules() == ["sequence_gap", "missing_response_created"]


def test_severities_follow_the_reference_tags() -> None:
    """SHOULD-level Responses rules are warnings; MUST-level ones are errors."""
    for name in ("sequence_gap", "item_overlap", "item_status_unexpected", "done_text_mismatch"):
        assert rules.RULES[name].severity is Severity.WARNING
    for name in ("response_id_changed", "event_type_mismatch"):
        assert rules.RULES[name].severity is Severity.WARNING
    for name in ("missing_response_created", "item_not_open", "item_not_closed"):
        assert rules.RULES[name].severity is Severity.ERROR
    for name in ("status_mismatch", "item_out_of_order"):
        assert rules.RULES[name].severity is Severity.ERROR
