"""The fixture corpus: every protocol fixture gives its sidecar's expectation however it is cut,
and every rule fires on a fixture that breaks it and stays silent on a legitimate look-alike."""

from __future__ import annotations

import pytest

from streamguard.rules import RULES

from .chunking import CHUNKINGS, chunking
from .sse_fixtures import (
    EXPECT_KEYS,
    FIXTURES,
    PROTOCOLS,
    REALWORLD,
    Fixture,
    fixtures,
    observed,
    protocol_fixtures,
)

#: Bodies whose byte counts tests/test_cli.py pins (1080 and 4103 bytes): they keep the
#: ``: expect`` comment header the old format put in the body, inert (the sidecar is what
#: is read), until those numbers are updated.
OLD_HEADER_KEPT = {"openai_chat/role_repeated", "openai_chat/clean-text-include-usage"}

_OPENAI_CHAT = {
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
    "envelope_field_missing": "clean-azure-prompt-filter-and-async-annotations",
    "choice_index_invalid": "clean-n3-interleaved",
    "choice_out_of_order": "clean-n3-interleaved",
    "role_not_first": "clean-refusal",
    "role_repeated": "clean-n3-interleaved",
    "tool_call_index_invalid": "clean-parallel-tool-calls",
    "tool_call_header_missing": "clean-parallel-tool-calls",
    "tool_call_header_repeated": "clean-forced-tool-choice-stop",
    "tool_call_arguments_invalid": "clean-forced-tool-choice-stop",
    "tool_calls_finished_as_stop": "clean-forced-tool-choice-stop",
    "function_call_mixed": "clean-legacy-function-call",
    "usage_not_last": "clean-text-include-usage",
    "usage_repeated": "clean-text-include-usage",
    "usage_missing": "clean-forced-tool-choice-stop",
    "usage_unrequested": "clean-2024-no-usage-field",
    "usage_nonstandard": "clean-text-include-usage",
    "usage_without_choices": "clean-text-include-usage",
    "tool_call_function_missing": "clean-parallel-tool-calls",
    "usage_total_mismatch": "clean-text-include-usage",
    "unexpected_event_field": "clean-text-include-usage",
}
_OPENAI_RESPONSES = {
    "invalid_json": "clean-gateway-done",
    "schema_mismatch": "clean-keepalive-and-unknown-events",
    "missing_terminal": "clean-incomplete",
    "duplicate_terminal": "clean-gateway-done",
    "event_after_terminal": "clean-gateway-done",
    "missing_response_created": "clean-resumed",
    "duplicate_response_created": "clean-queued-background",
    "sequence_gap": "clean-keepalive-and-unknown-events",
    "item_out_of_order": "clean-reasoning-then-text",
    "item_overlap": "clean-keepalive-and-unknown-events",
    "item_not_open": "clean-resumed",
    "item_not_closed": "clean-reasoning-then-text",
    "item_status_unexpected": "clean-incomplete",
    "done_text_mismatch": "clean-text",
    "text_not_done": "clean-reasoning-then-text",
    "completed_output_empty": "clean-completed-output-null",
    "status_mismatch": "clean-queued-background",
    "response_id_changed": "clean-text",
    "event_type_mismatch": "clean-function-call",
}

#: protocol -> rule -> (the fixtures that break it: those named NAME or NAME-<variant>, and
#: a legitimate look-alike that must not trigger it). The OpenAI fixtures are named after
#: the rule they break.
LOOK_ALIKES: dict[str, dict[str, tuple[str, str]]] = {
    "openai_chat": {rule: (rule, clean) for rule, clean in _OPENAI_CHAT.items()},
    "openai_responses": {rule: (rule, clean) for rule, clean in _OPENAI_RESPONSES.items()},
    "anthropic": {
        "event_name_mismatch": ("event_name_mismatch_unnamed_message_start", "ok_text_end_turn"),
        "missing_message_start": ("missing_message_start", "ok_ping_before_message_start"),
        "duplicate_message_start": ("duplicate_message_start", "ok_error_before_any_block"),
        "prepopulated_message_start": (
            "warn_prepopulated_message_start",
            "ok_refusal_zero_blocks",
        ),
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
        "missing_terminal": (
            "missing_terminal_truncated_mid_block",
            "ok_error_overloaded_mid_block",
        ),
        "duplicate_terminal": ("duplicate_terminal", "ok_stop_pause_turn"),
        "event_after_terminal": (
            "event_after_terminal_done_sentinel",
            "ok_error_before_any_block",
        ),
        "schema_mismatch": (
            "schema_mismatch_message_delta_without_usage",
            "ok_tool_use_empty_first_json_delta",
        ),
        "invalid_json": ("invalid_json", "ok_unknown_event_block_and_delta_types"),
    },
    "gemini": {
        "missing_finish_reason": ("missing_finish_reason_truncated", "ok_prompt_blocked"),
        "content_after_finish": ("content_after_finish", "warn_legacy_stop_on_every_chunk"),
        "finish_reason_not_last": ("warn_empty_stop_before_content", "content_after_finish"),
        "usage_decreased": ("usage_decreased", "ok_missing_index_and_zero_counters"),
        "sdk_incompatible_framing": (
            "sdk_incompatible_framing_keepalive_comment",
            "ok_crlf_vertex",
        ),
        "event_after_terminal": (
            "event_after_terminal_after_block",
            "ok_usage_only_chunk_after_final",
        ),
        "invalid_json": ("invalid_json", "ok_final_thought_signature_only"),
        "schema_mismatch": ("schema_mismatch_candidates_not_a_list", "ok_tool_call"),
    },
    "ai_sdk_ui": {
        "invalid_json": ("invalid_json", "ok_crlf_keepalive_comments"),
        "schema_mismatch": ("schema_mismatch_null_optional", "ok_tools_reasoning_sources_data"),
        "unknown_chunk_type": ("unknown_chunk_type", "ok_tools_reasoning_sources_data"),
        "id_not_open": ("id_not_open", "ok_continuation_without_start_or_finish"),
        "id_already_open": ("id_already_open", "ok_reset_step_retry"),
        "id_not_closed": ("id_not_closed", "ok_abort"),
        "step_not_balanced": ("warn_step_not_balanced", "ok_tools_reasoning_sources_data"),
        "missing_finish": (
            "missing_finish_langgraph_adapter",
            "ok_continuation_without_start_or_finish",
        ),
        "chunk_after_finish": ("warn_chunk_after_finish_merged_results", "ok_text"),
        "missing_terminal": ("missing_terminal_truncated_mid_text", "ok_error_without_done"),
        "duplicate_terminal": ("duplicate_terminal", "ok_crlf_keepalive_comments"),
        "event_after_terminal": ("event_after_terminal", "ok_abort"),
    },
    "ag_ui": {
        "invalid_json": ("invalid_json", "ok_comments_event_names_multiline_data"),
        "schema_mismatch": (
            "schema_mismatch_null_optional",
            "ok_legacy_thinking_and_translated_nulls",
        ),
        "unknown_event_type": (
            "warn_unknown_event_type",
            "ok_legacy_thinking_and_translated_nulls",
        ),
        "id_not_open": ("id_not_open", "ok_chunk_shorthands"),
        "id_already_open": ("id_already_open", "ok_subagent_lanes"),
        "id_not_closed": ("id_not_closed", "ok_run_error_mid_message"),
        "state_delta_before_snapshot": (
            "warn_state_delta_before_snapshot",
            "ok_tools_state_steps_reasoning",
        ),
        "invalid_state_patch": ("invalid_state_patch", "ok_tools_state_steps_reasoning"),
        "tool_result_without_call": (
            "warn_tool_result_without_call",
            "ok_tool_result_in_a_later_run",
        ),
        "run_id_mismatch": ("warn_run_id_mismatch", "ok_two_runs_replay"),
        "crlf_framing": ("crlf_framing", "ok_comments_event_names_multiline_data"),
        "missing_run_started": ("missing_run_started", "ok_run_error_first"),
        "duplicate_run_started": ("duplicate_run_started", "ok_two_runs_replay"),
        "missing_terminal": ("missing_terminal_truncated_mid_message", "ok_run_error_mid_message"),
        "duplicate_terminal": ("duplicate_terminal", "ok_two_runs_replay"),
        "event_after_terminal": ("event_after_terminal", "ok_run_error_after_finished"),
    },
    "mcp": {
        "invalid_json": ("invalid_json", "ok_priming_event_and_retry"),
        "invalid_jsonrpc": ("invalid_jsonrpc", "ok_error_response_method_not_found"),
        "missing_terminal": ("missing_terminal", "ok_resumable_closed_before_response"),
        "duplicate_terminal": ("duplicate_terminal", "ok_string_and_integer_ids"),
        "duplicate_response": ("duplicate_response", "ok_batch_2025_03_26"),
        "unrequested_response": ("unrequested_response", "ok_batch_2025_03_26"),
        "response_on_standalone_stream": (
            "response_on_standalone_stream",
            "ok_resumed_get_replays_response",
        ),
        "duplicate_event_id": ("duplicate_event_id", "ok_priming_event_and_retry"),
        "event_after_terminal": ("event_after_terminal", "ok_progress_then_response"),
        "schema_mismatch": ("schema_mismatch", "ok_tools_call_content_blocks"),
    },
    "a2a": {
        "invalid_json": ("invalid_json", "ok_keepalive_comments_and_empty_data"),
        "invalid_jsonrpc": ("invalid_jsonrpc", "error_v1_agent_raised"),
        "schema_mismatch": ("schema_mismatch", "ok_v1_defaults_left_out"),
        "missing_terminal": ("missing_terminal_closed_while_working", "ok_v03_input_required"),
        "duplicate_terminal": ("duplicate_terminal", "ok_v03_rejected"),
        "event_after_terminal": ("event_after_terminal", "ok_keepalive_comments_and_empty_data"),
        "terminal_state_left": ("terminal_state_left", "ok_v1_input_required"),
        "response_id_mismatch": ("warn_response_id_mismatch", "ok_v1_task_artifact_chunks"),
        "task_changed": ("task_changed", "ok_v1_subscribe_snapshot_holds_artifact"),
        "artifact_not_started": (
            "artifact_not_started",
            "ok_v03_resubscribe_appends_without_snapshot",
        ),
    },
    "langgraph": {
        "invalid_json": ("invalid_json", "ok_heartbeats_and_blank_data"),
        "schema_mismatch": ("schema_mismatch", "ok_retried_run_second_metadata"),
        "unknown_event_type": ("warn_unknown_event_type", "ok_debug_tasks_checkpoints"),
        "metadata_not_first": ("metadata_not_first", "ok_join_without_metadata"),
        "duplicate_terminal": ("duplicate_terminal", "ok_legacy_end"),
        "event_after_terminal": ("event_after_terminal", "ok_resumed_with_last_event_id"),
    },
    "cohere": {
        "invalid_json": ("invalid_json", "ok_debug_and_empty_data"),
        "schema_mismatch": ("schema_mismatch", "ok_message_end_without_usage"),
        "unknown_event_type": ("warn_unknown_event_type", "ok_debug_and_empty_data"),
        "block_not_started": ("block_not_started", "ok_citations"),
        "block_index_out_of_order": ("block_index_out_of_order", "ok_thinking_then_text"),
        "block_not_stopped": ("block_not_stopped", "ok_citations"),
        "missing_finish_reason": ("missing_finish_reason", "ok_max_tokens"),
        "missing_terminal": ("missing_terminal_truncated_mid_block", "ok_finish_reason_error"),
        "duplicate_terminal": ("duplicate_terminal", "ok_gateway_done_crlf_keepalive"),
        "event_after_terminal": ("event_after_terminal", "ok_gateway_done_crlf_keepalive"),
    },
}

#: Rules of the shared catalog (every protocol's) that each protocol's fixtures exercise.
SHARED = {
    "openai_chat": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "openai_responses": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "anthropic": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "gemini": {"invalid_json", "schema_mismatch", "event_after_terminal"},
    "ai_sdk_ui": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "ag_ui": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "mcp": {"invalid_json", "missing_terminal", "duplicate_terminal", "event_after_terminal"},
    "a2a": {
        "invalid_json",
        "invalid_jsonrpc",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
    "langgraph": {"invalid_json", "schema_mismatch", "duplicate_terminal", "event_after_terminal"},
    "cohere": {
        "invalid_json",
        "schema_mismatch",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
    },
}

#: The OpenAI tables pick look-alikes that are clean and complete; the Anthropic and Gemini
#: ones may carry other findings (a look-alike of one rule can break another).
CLEAN_LOOK_ALIKES = {"openai_chat", "openai_responses"}

#: Name prefixes of fixtures that must not be malformed (warnings or infos allowed).
HEALTHY_PREFIXES = ("ok_", "warn_", "clean-")

FIXTURE_LIST = protocol_fixtures()
BY_ID = {fixture.id: fixture for fixture in FIXTURE_LIST}


def _named(protocol: str, name: str) -> list[Fixture]:
    """The fixtures of ``protocol`` called ``name`` or ``name-<variant>``."""
    return [
        fixture
        for fixture in FIXTURE_LIST
        if fixture.protocol == protocol and fixture.name.split("-")[0] == name
    ]


@pytest.mark.parametrize(
    ("fixture", "how"),
    [
        pytest.param(fixture, how, id=f"{fixture.id}-{how}")
        for fixture in FIXTURE_LIST
        for how in CHUNKINGS
    ],
)
def test_fixture_gives_its_expectation_however_cut(fixture: Fixture, how: str) -> None:
    """Each fixture gives exactly its expected outcome and findings, however its bytes are cut."""
    report = fixture.check(chunking(fixture.body, how))
    assert report.protocol == fixture.protocol
    assert observed(fixture.expect, report) == fixture.expect


def test_every_body_has_a_sidecar_and_every_sidecar_a_body() -> None:
    """Each directory's .sse, .expect.json and .request.json files name the same fixtures."""
    directories = {path.parent for path in FIXTURES.rglob("*.sse")}
    assert {FIXTURES / protocol for protocol in PROTOCOLS} <= directories
    # ``PROTOCOLS`` is the registry's built-ins but plain SSE: a built-in added brings its
    # fixtures, and a directory of fixtures names a built-in.
    named = {path.name for path in FIXTURES.iterdir() if path.is_dir()} - {REALWORLD.name}
    assert named == set(PROTOCOLS)
    for directory in directories:
        names = {path.name for path in directory.iterdir() if path.is_file()}
        stems = {
            suffix: {name.removesuffix(suffix) for name in names if name.endswith(suffix)}
            for suffix in (".sse", ".expect.json", ".request.json")
        }
        assert stems[".expect.json"] == stems[".sse"], directory
        assert stems[".request.json"] <= stems[".sse"], directory
        assert names - {"README.md"} == {
            stem + suffix for suffix, found in stems.items() for stem in found
        }, directory


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_protocol_fixtures_state_exact_findings(protocol: str) -> None:
    """A protocol fixture names its outcome and every finding, and its body carries no
    expectation of the old comment format."""
    for fixture in fixtures(protocol):
        assert set(fixture.expect) == {"outcome", "findings"} <= EXPECT_KEYS, fixture.id
        if fixture.id not in OLD_HEADER_KEPT:
            assert b": expect " not in fixture.body, fixture.id


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_healthy_fixtures_are_not_malformed(protocol: str) -> None:
    """No healthy or warning-only fixture carries an error-severity finding."""
    for fixture in fixtures(protocol):
        if fixture.name.startswith(HEALTHY_PREFIXES):
            assert not fixture.check().malformed, fixture.id


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_rule_of_the_protocol_has_a_look_alike(protocol: str) -> None:
    """The look-alike table covers exactly the protocol's own rules and the shared ones its
    fixtures break."""
    own = {rule.name for rule in RULES.values() if protocol in rule.protocols}
    assert own | SHARED[protocol] == set(LOOK_ALIKES[protocol])


@pytest.mark.parametrize(
    ("protocol", "rule"),
    [(protocol, rule) for protocol in PROTOCOLS for rule in sorted(LOOK_ALIKES[protocol])],
)
def test_rule_fires_on_its_fixtures_and_not_on_the_look_alike(protocol: str, rule: str) -> None:
    """Each rule fires on every fixture that breaks it and stays silent on its look-alike."""
    broken_name, look_alike_name = LOOK_ALIKES[protocol][rule]
    broken = _named(protocol, broken_name)
    assert broken, f"no fixture named {broken_name}*.sse"
    for fixture in broken:
        assert rule in fixture.expected_rules, fixture.id
        assert rule in fixture.check().rules(), fixture.id
    look_alike = BY_ID[f"{protocol}/{look_alike_name}"]
    assert rule not in look_alike.check().rules()
    if protocol in CLEAN_LOOK_ALIKES:
        assert look_alike.expect == {"outcome": "completed", "findings": []}
