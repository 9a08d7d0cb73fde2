"""The Gemini checker: every fixture, every chunking, every rule and its look-alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamguard import Severity, check_stream
from streamguard.rules import RULES, rules_for
from tests.chunking import chunkings

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"

#: fixture name -> (outcome, [(rule, event_index), ...]) for ``protocol="gemini"``.
EXPECTED: dict[str, tuple[str, list[tuple[str, int]]]] = {
    # Healthy, including every legitimate oddity of protocols.md §4.5.
    "ok_text_stop": ("completed", []),
    "ok_final_thought_signature_only": ("completed", []),
    "ok_max_tokens": ("completed", []),
    "ok_safety_finish_without_content": ("completed", []),
    "ok_usage_only_chunk_after_final": ("completed", []),
    "ok_missing_index_and_zero_counters": ("completed", []),
    "ok_crlf_vertex": ("completed", []),
    "ok_tool_call": ("completed", []),
    "ok_prompt_blocked": ("completed", []),
    "ok_legacy_stop_on_every_chunk": ("completed", []),
    "ok_empty_stop_before_content": ("completed", []),
    "ok_two_candidates": ("completed", []),
    "ok_error_unavailable": ("error_event", []),
    # Broken.
    "missing_finish_reason_truncated": ("unclosed", [("missing_finish_reason", 2)]),
    "missing_finish_reason_one_of_two_candidates": ("unclosed", [("missing_finish_reason", 2)]),
    "missing_finish_reason_usage_only": ("unclosed", [("missing_finish_reason", 1)]),
    "missing_finish_reason_unterminated_frame": (
        "unclosed",
        [("unterminated_frame", 2), ("missing_finish_reason", 2)],
    ),
    "content_after_finish": ("completed", [("content_after_finish", 1)]),
    "usage_decreased": ("completed", [("usage_decreased", 1)]),
    "event_after_terminal_after_block": ("completed", [("event_after_terminal", 1)]),
    "event_after_terminal_after_error": ("error_event", [("event_after_terminal", 1)]),
    "invalid_json": ("completed", [("invalid_json", 1)]),
    "invalid_json_done_sentinel": ("completed", [("invalid_json", 3)]),
    "schema_mismatch_candidates_not_a_list": ("completed", [("schema_mismatch", 0)]),
    "schema_mismatch_error_without_message": ("error_event", [("schema_mismatch", 1)]),
    "sdk_incompatible_framing_keepalive_comment": (
        "completed",
        [("sdk_incompatible_framing", 1)],
    ),
    "sdk_incompatible_framing_leading_comment": ("completed", [("sdk_incompatible_framing", 0)]),
    "sdk_incompatible_framing_bom": ("completed", [("sdk_incompatible_framing", 0)]),
    "sdk_incompatible_framing_event_line": ("completed", [("sdk_incompatible_framing", 1)]),
    "sdk_incompatible_framing_no_space_after_colon": (
        "completed",
        [("sdk_incompatible_framing", 2)],
    ),
    "sdk_incompatible_framing_no_space_mid_stream": (
        "completed",
        [("sdk_incompatible_framing", 2)],
    ),
}

#: rule -> (a fixture that breaks it, a legitimate look-alike that must not trigger it).
PAIRS: dict[str, tuple[str, str]] = {
    "missing_finish_reason": ("missing_finish_reason_truncated", "ok_prompt_blocked"),
    "content_after_finish": ("content_after_finish", "ok_legacy_stop_on_every_chunk"),
    "usage_decreased": ("usage_decreased", "ok_missing_index_and_zero_counters"),
    "sdk_incompatible_framing": ("sdk_incompatible_framing_keepalive_comment", "ok_crlf_vertex"),
    "event_after_terminal": ("event_after_terminal_after_block", "ok_usage_only_chunk_after_final"),
    "invalid_json": ("invalid_json", "ok_final_thought_signature_only"),
    "schema_mismatch": ("schema_mismatch_candidates_not_a_list", "ok_tool_call"),
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
    report = check_stream(chunks, protocol="gemini")
    outcome, findings = EXPECTED[name]
    assert report.protocol == "gemini"
    assert report.outcome.value == outcome
    assert [(f.rule, f.event_index) for f in report.findings] == findings


@pytest.mark.parametrize("rule", sorted(PAIRS))
def test_rule_fires_on_its_fixture_and_not_on_the_look_alike(rule: str) -> None:
    """Each rule fires on the fixture that breaks it and stays silent on its look-alike."""
    broken, look_alike = PAIRS[rule]
    assert rule in check_stream(_fixture(broken), protocol="gemini").rules()
    assert rule not in check_stream(_fixture(look_alike), protocol="gemini").rules()


def test_every_gemini_rule_has_a_pair() -> None:
    """Every rule that names the gemini protocol is exercised by PAIRS."""
    specific = {rule.name for rule in rules_for("gemini") if "gemini" in rule.protocols}
    assert specific <= set(PAIRS)


def test_sdk_framing_and_usage_are_warnings() -> None:
    """SDK-hostile framing and decreasing usage are warnings; a missing finish is an error."""
    assert RULES["sdk_incompatible_framing"].severity is Severity.WARNING
    assert RULES["usage_decreased"].severity is Severity.WARNING
    assert RULES["missing_finish_reason"].severity is Severity.ERROR


def test_empty_body_is_truncated() -> None:
    """A body with no event at all never finished a candidate, so it is unclosed."""
    report = check_stream(b"", protocol="gemini")
    assert report.outcome.value == "unclosed"
    assert [(f.rule, f.event_index) for f in report.findings] == [("missing_finish_reason", 0)]


def test_framing_is_reported_once_per_stream() -> None:
    """Keep-alive comments between every chunk give a single framing warning."""
    chunk = b'data: {"candidates":[{"content":{"parts":[{"text":"x"}]}}]}\n\n'
    final = b'data: {"candidates":[{"content":{"parts":[{"text":"."}]},"finishReason":"STOP"}]}\n\n'
    body = chunk + b": ping\n\n" + chunk + b": ping\n\n" + chunk + b": ping\n\n" + final
    report = check_stream(body, protocol="gemini")
    assert [(f.rule, f.event_index) for f in report.findings] == [("sdk_incompatible_framing", 1)]
    assert report.outcome.value == "completed"


def test_non_ascii_text_does_not_look_like_a_framing_problem() -> None:
    """Multi-byte UTF-8 in the data is measured in bytes, so clean framing stays clean."""
    chunk = 'data: {"candidates":[{"content":{"parts":[{"text":"héllo ✓ 日本"}]}}]}\n\n'.encode()
    final = b'data: {"candidates":[{"finishReason":"STOP"}]}\n\n'
    report = check_stream(chunk + chunk + final, protocol="gemini")
    assert (report.outcome.value, report.rules()) == ("completed", [])
