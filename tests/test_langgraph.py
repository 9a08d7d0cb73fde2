"""The LangGraph run-stream checker: its rules beyond the fixtures, its bounds, its docs and
detection under ``auto``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS, SPECS
from streamguard.protocols.auto import protocol_for_event, protocol_for_path
from streamguard.protocols.langgraph import MAX_UNKNOWN_NAMES, LangGraphChecker
from streamguard.rule_docs import RULE_DOCS
from streamguard.rules import RULES
from streamguard.sse import Event

from .sse_fixtures import fixtures

METADATA = ("metadata", {"run_id": "r-1", "attempt": 1})


def body(*events: tuple[str, Any]) -> bytes:
    return b"".join(
        f"event: {name}\r\ndata: {json.dumps(data)}\r\n\r\n".encode() for name, data in events
    )


def found(*events: tuple[str, Any], request: Any = None) -> list[tuple[str, int | None]]:
    report = check_stream(body(*events), protocol="langgraph", request=request)
    return [(f.rule, f.event_index) for f in report.findings]


def test_the_checker_is_registered() -> None:
    """``langgraph`` names this checker, and its own rule and docs are in the catalog."""
    assert CHECKERS["langgraph"] is LangGraphChecker
    for rule in SPECS["langgraph"].rules:
        assert RULES[rule.name] is rule
        assert RULES[rule.name].protocols == ("langgraph",)
        assert rule.name in RULE_DOCS


def test_the_bodys_end_ends_a_run() -> None:
    """Current servers send no end event: a body that ends is a completed stream."""
    report = check_stream(body(METADATA, ("values", {})), protocol="langgraph")
    assert (report.outcome.value, report.findings) == ("completed", ())


@pytest.mark.parametrize(
    ("request_facts", "expected"),
    [
        (None, [("metadata_not_first", 0)]),
        ({"assistant_id": "a"}, [("metadata_not_first", 0)]),
        ({"http_method": "GET"}, []),
        ({"http_method": "GET", "last_event_id": True}, []),
        ({"http_method": "POST", "last_event_id": True}, []),
    ],
)
def test_metadata_is_owed_by_a_new_run_only(request_facts: Any, expected: list[Any]) -> None:
    """A POST's stream opens with metadata; a join or a resumption starts mid-run."""
    assert found(("values", {}), ("updates", {}), request=request_facts) == expected


def test_an_error_before_metadata_is_clean() -> None:
    """A run that fails before it streams sends only the error."""
    report = check_stream(body(("error", {"error": "E", "message": "m"})), protocol="langgraph")
    assert (report.outcome.value, report.findings) == ("error_event", ())


@pytest.mark.parametrize("name", ["values|tools:1", "updates|a:1|b:2", "messages/partial"])
def test_namespaced_and_expanded_names_are_known(name: str) -> None:
    """A subgraph's namespace suffix and the expanded messages names are stream modes."""
    assert found(METADATA, (name, {})) == []


@pytest.mark.parametrize("data", ["", " ", "null", '"text"', "[1]", "3"])
def test_any_json_or_blank_data_is_clean(data: str) -> None:
    """Stream modes carry any JSON value; blank data reads as null."""
    raw = body(METADATA) + f"event: custom\r\ndata: {data}\r\n\r\n".encode()
    assert check_stream(raw, protocol="langgraph").findings == ()


def test_unknown_names_are_reported_once_each_and_bounded() -> None:
    """Each unknown name once; at most MAX_UNKNOWN_NAMES of them per stream."""
    events = [METADATA, *((f"x{i % 40}", {}) for i in range(200))]
    assert [rule for rule, _ in found(*events)] == ["unknown_event_type"] * MAX_UNKNOWN_NAMES


def test_messages_never_quote_wire_values() -> None:
    """Unknown names appear by size and hash only."""
    secret = "SECRET-VALUE-42"
    report = check_stream(body(METADATA, (secret, {}), (f"{secret}|x", {})), protocol="langgraph")
    assert len(report.findings) == 2
    assert not any(secret in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/runs/stream", True),
        ("/threads/t-1/runs/stream", True),
        ("/threads/t-1/runs/r-1/stream", True),
        ("/stream", False),
        ("/v1/chat/completions", False),
    ],
)
def test_paths_that_name_a_run_stream(path: str, expected: bool) -> None:
    assert (protocol_for_path(path) == "langgraph") is expected


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("metadata", {"run_id": "r", "attempt": 1}, True),
        ("metadata", {"attempt": 1}, False),
        ("values", {"messages": []}, True),
        ("updates|tools:1", {}, True),
        ("messages/partial", [], True),
        ("custom", {}, False),
        ("debug", {}, False),
        ("message", {"run_id": "r"}, False),
    ],
)
def test_a_first_event_decides_by_its_name(name: str, data: Any, expected: bool) -> None:
    """Metadata with a run id, or a mode only LangGraph uses; common names decide nothing."""
    event = Event(name, json.dumps(data))
    assert (protocol_for_event(event) == "langgraph") is expected


@pytest.mark.parametrize("fixture", fixtures("langgraph"), ids=lambda f: f.name)
def test_every_fixture_is_detected_under_auto_by_its_path(fixture: Any) -> None:
    """Under ``auto`` on a run's path, every fixture is LangGraph and judged as configured."""
    configured = fixture.check()
    auto = check_stream(
        fixture.body, protocol="auto", request=fixture.request, path="/threads/t/runs/stream"
    )
    assert (auto.protocol, auto.rules(), auto.outcome) == (
        "langgraph",
        configured.rules(),
        configured.outcome,
    )


@pytest.mark.parametrize("rule", SPECS["langgraph"].rules, ids=lambda rule: rule.name)
def test_each_example_fires_its_rule(rule: Any) -> None:
    example = RULE_DOCS[rule.name].example
    report = check_stream((example + "\n\n").encode(), protocol="langgraph")
    assert rule.name in report.rules()


def test_every_raised_rule_has_a_fixture() -> None:
    raised = {r.name for r in LangGraphChecker.RAISES | LangGraphChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("langgraph") for rule in fixture.check().rules()}
    assert raised <= seen


def test_the_request_head_chooses_where_the_checker_starts() -> None:
    """A POST's stream owes metadata; a join or a resumption starts mid-run."""
    assert LangGraphChecker({"assistant_id": "a"}).phase == "awaiting_metadata"
    assert LangGraphChecker({"http_method": "GET"}).phase == "running"
    assert LangGraphChecker({"last_event_id": True}).phase == "running"
    assert LangGraphChecker().phase == "awaiting_metadata"
