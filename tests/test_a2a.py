"""The A2A checker: its rules beyond the fixtures, its bounds, its docs, and detection under
``auto``, which must tell A2A from MCP (both are JSON-RPC 2.0 over SSE)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS, SPECS
from streamguard.protocols.a2a import MAX_ARTIFACTS, A2AChecker, is_a2a_response
from streamguard.protocols.auto import protocol_for_event, protocol_for_path
from streamguard.rule_docs import RULE_DOCS
from streamguard.rules import RULES
from streamguard.sse import Event

from .sse_fixtures import fixtures

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {}}


def response(result: dict[str, Any], request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def task(state: str = "TASK_STATE_SUBMITTED", **fields: Any) -> dict[str, Any]:
    return response({"task": {"id": "t", "contextId": "c", "status": {"state": state}, **fields}})


def status(state: str, task_id: str = "t", **fields: Any) -> dict[str, Any]:
    update = {"taskId": task_id, "contextId": "c", "status": {"state": state}, **fields}
    return response({"statusUpdate": update})


def chunk(artifact_id: str, append: bool = False) -> dict[str, Any]:
    update: dict[str, Any] = {"taskId": "t", "contextId": "c"}
    update["artifact"] = {"artifactId": artifact_id, "parts": [{"text": "x"}]}
    if append:
        update["append"] = True
    return response({"artifactUpdate": update})


def body(*events: Any) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\r\n\r\n".encode() for e in events)


def found(*events: Any, request: Any = REQUEST) -> list[tuple[str, int | None]]:
    report = check_stream(body(*events), protocol="a2a", request=request)
    return [(f.rule, f.event_index) for f in report.findings]


def test_the_checker_is_registered() -> None:
    """``a2a`` names this checker, and its own rules and docs are in the catalog."""
    assert CHECKERS["a2a"] is A2AChecker
    for rule in SPECS["a2a"].rules:
        assert RULES[rule.name] is rule
        assert RULES[rule.name].protocols == ("a2a",)
        assert rule.name in RULE_DOCS


@pytest.mark.parametrize(
    ("last", "outcome"),
    [
        (status("TASK_STATE_COMPLETED"), "completed"),
        (status("TASK_STATE_CANCELED"), "completed"),
        (status("TASK_STATE_REJECTED"), "completed"),
        (status("TASK_STATE_AUTH_REQUIRED"), "completed"),
        (task("TASK_STATE_COMPLETED"), "completed"),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}}, "error_event"),
    ],
)
def test_each_end_the_protocol_defines(last: dict[str, Any], outcome: str) -> None:
    """Terminal and interrupted states, a task snapshot in one, and an error end the stream."""
    report = check_stream(body(task(), status("TASK_STATE_WORKING"), last), protocol="a2a")
    assert (report.outcome.value, report.findings) == (outcome, ())


def test_a_v03_status_marked_final_ends_the_stream() -> None:
    """``final: true`` ends a 0.3 stream whatever its state says."""
    update = {"kind": "status-update", "taskId": "t", "contextId": "c", "final": True}
    update["status"] = {"state": "working"}
    report = check_stream(body(response(update)), protocol="a2a")
    assert (report.outcome.value, report.findings) == ("completed", ())


def test_a_working_state_after_an_interrupted_one_follows_the_end() -> None:
    """After input-required (the end, not a terminal state) a new state is an event after
    the end; after completed it leaves a terminal state."""
    interrupted = [task(), status("TASK_STATE_INPUT_REQUIRED"), status("TASK_STATE_WORKING")]
    assert found(*interrupted) == [("event_after_terminal", 2)]
    settled = [task(), status("TASK_STATE_FAILED"), status("TASK_STATE_INPUT_REQUIRED")]
    assert found(*settled) == [("terminal_state_left", 2)]


def test_the_id_is_the_first_events_when_the_request_is_unknown() -> None:
    """Without a request, the first event's id is the one every event carries."""
    events = [task(), {**status("TASK_STATE_WORKING"), "id": 2}, status("TASK_STATE_COMPLETED")]
    assert found(*events, request=None) == [("response_id_mismatch", 1)]


def test_an_error_without_an_id_answers_nothing_and_is_clean() -> None:
    """JSON-RPC lets an error carry a null id; it matches no request and is not a mismatch."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "x"}}
    assert found(task(), error) == []


def test_string_and_integer_ids_differ() -> None:
    """``"1"`` is not ``1``: JSON-RPC ids compare by type and value."""
    assert found(task(), status("TASK_STATE_COMPLETED") | {"id": "1"}) == [
        ("response_id_mismatch", 1)
    ]


def test_task_changed_is_reported_once() -> None:
    """Every later event of the other task is the same mistake."""
    events = [task(), status("TASK_STATE_WORKING", "u"), status("TASK_STATE_COMPLETED", "u")]
    assert found(*events) == [("task_changed", 1)]


def test_an_artifact_chunk_may_append_to_one_started_earlier_in_the_stream() -> None:
    """A first chunk starts the artifact; appends continue it; another id was never started."""
    events = [
        task(),
        chunk("a"),
        chunk("a", True),
        chunk("b", True),
        status("TASK_STATE_COMPLETED"),
    ]
    assert found(*events) == [("artifact_not_started", 3)]


def test_artifacts_are_bounded() -> None:
    """Past MAX_ARTIFACTS ids, an append to an id not held is not judged."""
    checker = A2AChecker()
    events = [task(), *(chunk(f"a{i}") for i in range(MAX_ARTIFACTS + 5)), chunk("zz", True)]
    rules = []
    for index, event in enumerate(events):
        rules += [f.rule for f in checker.on_event(Event("message", json.dumps(event)), index)]
    assert rules == []
    assert len(checker._artifacts) == MAX_ARTIFACTS


def test_a_snapshot_with_many_artifacts_is_read_within_the_bound() -> None:
    """A task snapshot's artifact list sizes no loop: only the first MAX_ARTIFACTS + 1 are read."""
    artifacts = [{"artifactId": f"a{i}", "parts": []} for i in range(MAX_ARTIFACTS * 4)]
    checker = A2AChecker()
    checker.on_event(Event("message", json.dumps(task(artifacts=artifacts))), 0)
    assert len(checker._artifacts) == MAX_ARTIFACTS


def test_messages_never_quote_wire_values() -> None:
    """Ids and states appear by size and hash only."""
    secret = "SECRET-VALUE-42"
    report = check_stream(
        body(
            task(),
            status(secret, secret),
            chunk(secret, True),
            {**status("TASK_STATE_COMPLETED"), "id": secret},
            status(secret),
        ),
        protocol="a2a",
        request=REQUEST,
    )
    assert len(report.findings) >= 4
    assert not any(secret in f.message for f in report.findings)


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/a2a", True), ("/agents/A2A/v1", True), ("/", False), ("/mcp", False), (None, False)],
)
def test_paths_that_name_a2a(path: str | None, expected: bool) -> None:
    """A path segment ``a2a``; the SDK's default endpoint ``/`` says nothing."""
    assert (protocol_for_path(path) == "a2a") is expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (task(), "a2a"),
        (status("TASK_STATE_WORKING"), "a2a"),
        (chunk("a"), "a2a"),
        (response({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": []}}), "a2a"),
        (response({"kind": "task", "id": "t", "contextId": "c", "status": {"state": "x"}}), "a2a"),
        (response({"kind": "message", "messageId": "m", "role": "agent", "parts": []}), "a2a"),
        # MCP: a tool result, a 2025-11-25 task (its status a string), a notification.
        (response({"content": [{"type": "text", "text": "x"}], "isError": False}), "mcp"),
        (response({"task": {"taskId": "t", "status": "working"}}), "mcp"),
        (response({"task": {"id": "t", "status": {"state": "s"}}, "_meta": {}}), "mcp"),
        (response({"kind": "task", "id": "t"}), "mcp"),
        ({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}, "mcp"),
        # An A2A error first cannot be told from MCP's: it stays MCP's, as before.
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}}, "mcp"),
    ],
)
def test_a_first_event_tells_a2a_from_mcp(payload: dict[str, Any], expected: str) -> None:
    """A result shaped as an A2A kind decides A2A; any other JSON-RPC message stays MCP's."""
    assert protocol_for_event(Event("message", json.dumps(payload))) == expected
    assert is_a2a_response(payload) is (expected == "a2a")


@pytest.mark.parametrize("fixture", fixtures("a2a"), ids=lambda f: f.name)
def test_every_fixture_is_detected_under_auto(fixture: Any) -> None:
    """Under ``auto`` with no path, every A2A fixture is A2A and judged as configured."""
    configured = fixture.check()
    auto = check_stream(fixture.body, protocol="auto", request=fixture.request)
    if fixture.name.startswith(("invalid_json", "invalid_jsonrpc", "schema_mismatch_unknown")):
        return  # its first decisive event may be the broken one
    assert (auto.protocol, auto.rules(), auto.outcome) == (
        "a2a",
        configured.rules(),
        configured.outcome,
    )


def test_mcp_fixtures_stay_mcp_under_auto() -> None:
    """No MCP fixture is taken for A2A."""
    for fixture in fixtures("mcp"):
        report = check_stream(fixture.body, protocol="auto", request=fixture.request)
        assert report.protocol != "a2a", fixture.id


@pytest.mark.parametrize("rule", SPECS["a2a"].rules, ids=lambda rule: rule.name)
def test_each_example_fires_its_rule(rule: Any) -> None:
    """Every example of the protocol's own rules is a stream that breaks its rule."""
    example = RULE_DOCS[rule.name].example
    report = check_stream((example + "\n\n").encode(), protocol="a2a")
    assert rule.name in report.rules()


def test_every_raised_rule_has_a_fixture() -> None:
    """Each rule the checker can raise fires on at least one of its fixtures."""
    raised = {r.name for r in A2AChecker.RAISES | A2AChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("a2a") for rule in fixture.check().rules()}
    assert raised <= seen
