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
