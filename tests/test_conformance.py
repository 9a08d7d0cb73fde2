"""``streamguard conformance``: the Chat Completions battery against a fake endpoint.

The fake (``tests/conformance_server.py``) runs under a real uvicorn server on loopback. A
healthy fake must pass every variant; each injectable bug, modelled on the issue that
reported it, must fail exactly the variants it breaks, naming the rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from streamguard.cli import main
from streamguard.conformance import CHAT_VARIANTS, CONFORMANCE_RULES, select
from streamguard.protocols.openai_chat import MAX_STOP_SEQUENCES
from streamguard.request import RequestFacts, request_facts
from streamguard.rules import RULES
from streamguard.testing import serve
from tests.conformance_server import BUGS, FakeState, build_chat_app

#: The variants a run without ``--variants`` runs.
DEFAULT_VARIANTS = [v.name for v in CHAT_VARIANTS if not v.opt_in]
STREAMS = set(DEFAULT_VARIANTS) - {"abort"}
TOOLS = {"tool_required", "tool_named", "tools_parallel"}


@contextmanager
def fake_endpoint(state: FakeState) -> Iterator[str]:
    """The fake under uvicorn; its base URL. A leaked generation is released at the end,
    so the server can stop."""
    try:
        with serve(build_chat_app(state)) as url:
            try:
                yield f"{url}/v1"
            finally:
                state.release.set()  # before the server stops: it waits for its handlers
    finally:
        state.release.set()


def run(
    capsys: pytest.CaptureFixture[str], state: FakeState, *options: str
) -> tuple[int, dict[str, Any]]:
    """Run the command against the fake with ``--json``: the exit code and the report."""
    with fake_endpoint(state) as url:
        code = main(["conformance", url, "--model", "fake", "--json", *options])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["outcome"] for v in report["variants"]}


def failing(report: dict[str, Any]) -> dict[str, set[str]]:
    """The failed variants, each with the rules of the findings that failed it."""
    return {
        v["name"]: {f["rule"] for f in v["findings"] if f["severity"] == "error" or f["focus"]}
        for v in report["variants"]
        if v["outcome"] == "fail"
    }


# -- the healthy endpoint ------------------------------------------------------------------


def test_a_healthy_endpoint_passes_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """Every variant, the opt-in ones and the non-streamed twins too: all pass, no findings."""
    state = FakeState()
    code, report = run(capsys, state, "--variants", "all", "--twin")
    assert outcomes(report) == {v.name: "pass" for v in CHAT_VARIANTS}
    assert [f for v in report["variants"] for f in v["findings"]] == []
    assert code == 0
    assert report["failed"] is False
    assert report["requests"] == state.requests  # every request counted


def test_the_table_report_names_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_endpoint(FakeState()) as url:
        code = main(["conformance", url, "--model", "fake", "--variants", "plain,length"])
    out, _ = capsys.readouterr()
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"endpoint {url}/chat/completions, model fake"
    assert any(line.split() == ["plain", "pass", "-"] for line in lines)
    assert any(line.split() == ["length", "pass", "-"] for line in lines)
    assert lines[-1] == "2 pass, 0 fail, 0 skipped, 0 error; 2 requests"


# -- the bugs ------------------------------------------------------------------------------

#: What each bug must fail: variant -> the rule that must fail it.
EXPECTED: dict[str, dict[str, str]] = {
    # No finish anywhere: every stream, the abort's health requests too.
    "finish_reason_dropped": dict.fromkeys(DEFAULT_VARIANTS, "missing_finish_reason"),
    "null_finish_on_tools": dict.fromkeys(TOOLS, "missing_finish_reason"),
    # The health requests after the abort are judged by the engine alone.
    "empty_finish_reason": {
        **dict.fromkeys(STREAMS, "finish_reason_empty"),
        "abort": "multiple_finish_reason",
    },
    "duplicate_finish": dict.fromkeys(DEFAULT_VARIANTS, "multiple_finish_reason"),
    "finish_last_index_only": {"n2": "missing_finish_reason"},
    "tool_header_repeated": dict.fromkeys(TOOLS, "tool_call_header_repeated"),
    # Forced by name, "stop" is a legitimate finish: only the twin tells.
    "tool_finish_stop": {
        "tool_required": "tool_calls_finish_mismatch",
        "tool_named": "stream_differs_from_response",
        "tools_parallel": "tool_calls_finish_mismatch",
    },
    "usage_wrong": dict.fromkeys(["usage_on", "n2", "length"], "usage_nonstandard"),
    "hang_after_disconnect": {"abort": "hang_after_abort"},
}


def test_every_bug_has_its_expectation() -> None:
    assert set(EXPECTED) == BUGS


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_bug_fails_exactly_its_variants_with_its_rule(
    bug: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bug fails the variants it breaks, by the rule that names it, and no other."""
    # --timeout bounds the wait for the health request a hung server never answers.
    code, report = run(capsys, FakeState(bugs=frozenset({bug})), "--twin", "--timeout", "5")
    failed = failing(report)
    assert set(failed) == set(EXPECTED[bug])
    for variant, rule in EXPECTED[bug].items():
        assert rule in failed[variant], (variant, failed[variant])
    assert code == 1
    passed = {name for name, outcome in outcomes(report).items() if outcome == "pass"}
    assert passed == set(DEFAULT_VARIANTS) - set(EXPECTED[bug])


def test_the_rules_a_bug_names_are_known() -> None:
    """Every expected rule is the engine's or a conformance rule (no typo passes by luck)."""
    for expected in EXPECTED.values():
        for rule in expected.values():
            assert rule in RULES or rule in CONFORMANCE_RULES, rule


def test_a_focus_warning_fails_only_its_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """``tool_call_header_repeated`` is a warning: it fails the tool variants, which are
    about tool calls, and would not fail a variant that is not (the look-alike: the same
    finding outside the focus passes)."""
    code, report = run(
        capsys, FakeState(bugs=frozenset({"tool_header_repeated"})), "--variants", "tool_named"
    )
    [variant] = report["variants"]
    findings = [f for f in variant["findings"] if f["rule"] == "tool_call_header_repeated"]
    assert findings
    assert {(f["severity"], f["focus"], f["source"]) for f in findings} == {
        ("warning", True, "engine")
    }
    assert code == 1


def test_a_repeated_tool_name_is_lost_data(capsys: pytest.CaptureFixture[str]) -> None:
    """The name sent on every delta joins, as the openai SDK joins it, to no declared tool:
    an error of the conformance check, beside the engine's warning."""
    state = FakeState(bugs=frozenset({"tool_header_repeated"}))
    _, report = run(capsys, state, "--variants", "tool_required")
    [variant] = report["variants"]
    assert ("tool_call_name_unknown", "error") in {
        (f["rule"], f["severity"]) for f in variant["findings"]
    }


def test_mixed_up_concurrent_streams_fail(capsys: pytest.CaptureFixture[str]) -> None:
    """Streams that share an id and carry each other's markers: both named."""
    code, report = run(capsys, FakeState(mixed_up=True), "--variants", "concurrent")
    assert failing(report) == {"concurrent": {"stream_id_shared", "cross_talk"}}
    assert code == 1


# -- unsupported, ignored, not exercised ---------------------------------------------------


def test_a_refused_option_is_unsupported_not_broken(capsys: pytest.CaptureFixture[str]) -> None:
    """A 400 naming logprobs before the stream: skipped, said so, and the run passes."""
    code, report = run(capsys, FakeState(refuse=frozenset({"logprobs"})))
    result = {v["name"]: v for v in report["variants"]}["logprobs"]
    assert result["outcome"] == "skipped"
    assert result["reason"] == "unsupported: HTTP 400 before the stream (the error names logprobs)"
    assert {o for n, o in outcomes(report).items() if n != "logprobs"} == {"pass"}
    assert code == 0


def test_a_refused_plain_request_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    """The plain variant exercises no option: a 4xx to it is no "unsupported feature"."""
    code, report = run(capsys, FakeState(refuse=frozenset({"temperature"})), "--variants", "plain")
    assert outcomes(report) == {"plain": "error"}
    assert report["variants"][0]["reason"] == "HTTP 400 before the stream"
    assert code == 1


@pytest.mark.parametrize(
    ("ignored", "variants"),
    [("logprobs", {"logprobs"}), ("tool_choice", {"tool_required", "tool_named"})],
)
def test_an_ignored_option_is_a_warning(
    ignored: str, variants: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A clean stream with no trace of the option: ``feature_ignored``, a warning; the
    variant passes by default and fails under ``--fail-on warning``."""
    names = ",".join(sorted(variants))
    state = FakeState(ignore=frozenset({ignored}))
    code, report = run(capsys, state, "--variants", names)
    for variant in report["variants"]:
        assert [(f["rule"], f["severity"]) for f in variant["findings"]] == [
            ("feature_ignored", "warning")
        ]
    assert set(outcomes(report).values()) == {"pass"}
    assert code == 0
    code, report = run(capsys, state, "--variants", names, "--fail-on", "warning")
    assert set(outcomes(report).values()) == {"fail"}
    assert code == 1


def test_an_ignored_n_is_counted_once(capsys: pytest.CaptureFixture[str]) -> None:
    """One choice for ``n: 2`` (a gateway that drops ``n``) is one cause: one
    ``feature_ignored``, as for ``logprobs``. Before, the engine (told ``n``) also reported
    the finish of choice 1 missing, an error counting the same dropped parameter again."""
    state = FakeState(ignore=frozenset({"n"}))
    code, report = run(capsys, state, "--variants", "n2")
    [variant] = report["variants"]
    assert [(f["rule"], f["severity"]) for f in variant["findings"]] == [
        ("feature_ignored", "warning")
    ]
    assert (variant["outcome"], code) == ("pass", 0)
    code, report = run(capsys, state, "--variants", "n2", "--fail-on", "warning")
    assert (outcomes(report), code) == ({"n2": "fail"}, 1)


def test_an_ignored_n_with_an_unfinished_choice_keeps_the_engine_finding() -> None:
    """Choice 0 without a finish is a second cause: the engine's finding stays."""
    from streamguard.conformance import Exchange, VariantFinding, _counted_once
    from streamguard.report import Severity

    request = {"n": 2}
    engine = VariantFinding("missing_finish_reason", Severity.ERROR, "m", "engine")
    content = {"index": 0, "delta": {"content": "x"}, "finish_reason": None}
    finished = {**content, "finish_reason": "stop"}
    for choices, kept in (([content], [engine]), ([content, finished], [])):
        chunks = tuple({"choices": [choice]} for choice in choices)
        exchange = Exchange(request, RequestFacts(request), chunks)
        assert _counted_once([engine], exchange) == kept


def test_a_behaviour_the_model_did_not_show_is_not_exercised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One tool call where two were asked for: the parallel variant cannot judge."""
    state = FakeState(ignore=frozenset({"parallel_tool_calls"}))
    code, report = run(capsys, state, "--variants", "tools_parallel")
    [variant] = report["variants"]
    assert variant["outcome"] == "skipped"
    assert variant["reason"] == "not exercised: the model made one tool call, not parallel ones"
    assert code == 0


def test_an_abort_without_content_is_not_exercised(capsys: pytest.CaptureFixture[str]) -> None:
    """A stream with no content leaves nothing to abort: the variant cannot judge."""
    state = FakeState(empty=True)
    code, report = run(capsys, state, "--variants", "abort")
    [variant] = report["variants"]
    assert variant["outcome"] == "skipped"
    assert variant["reason"] == "not exercised: the stream ended before its first content"
    assert state.requests == variant["requests"] == 1
    assert code == 0


def test_an_ignored_max_tokens_fails_the_length_variant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server that streams past max_tokens: the usage says so."""
    state = FakeState(ignore=frozenset({"max_tokens"}))
    code, report = run(capsys, state, "--variants", "length")
    assert failing(report) == {"length": {"usage_over_max_tokens"}}
    assert code == 1


# -- bounds, budget, the key ---------------------------------------------------------------


def test_an_endless_stream_is_cut_at_max_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    """Every read is bounded: a stream without end fails, it does not run forever."""
    state = FakeState(endless=True)
    code, report = run(capsys, state, "--variants", "plain", "--max-bytes", "50000")
    assert failing(report) == {"plain": {"stream_incomplete"}}
    [variant] = report["variants"]
    [incomplete] = [f for f in variant["findings"] if f["rule"] == "stream_incomplete"]
    assert "--max-bytes 50000" in incomplete["message"]
    assert code == 1


def test_max_requests_stops_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    state = FakeState()
    code, report = run(capsys, state, "--max-requests", "3")
    assert state.requests == 3
    ran = [v["name"] for v in report["variants"] if v["outcome"] == "pass"]
    assert ran == DEFAULT_VARIANTS[:3]
    rest = [v for v in report["variants"] if v["name"] not in ran]
    assert {v["reason"] for v in rest} == {"not run: --max-requests 3 spent"}
    assert {v["outcome"] for v in rest} == {"skipped"}
    assert code == 0


def test_the_dry_run_sends_nothing_and_counts_what_a_run_sends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The plan's requests per variant are what a real run then sends, and its worst-case
    tokens what those requests allowed (``max_tokens`` x ``n``, as the server saw them)."""
    state = FakeState()
    code, planned = run(capsys, state, "--variants", "all", "--twin", "--dry-run")
    assert code == 0
    assert state.requests == 0
    code, report = run(capsys, state, "--variants", "all", "--twin")
    assert code == 0
    sent = {v["name"]: v["requests"] for v in report["variants"]}
    assert {row["variant"]: row["requests"] for row in planned["plan"]} == sent
    assert sum(sent.values()) == state.requests
    assert sum(row["max_output_tokens"] for row in planned["plan"]) == state.tokens_allowed


def test_the_api_key_is_sent_and_never_shown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-7d1e0c-never-shown"
    monkeypatch.setenv("FAKE_KEY", secret)
    state = FakeState()
    with fake_endpoint(state) as url:
        outputs = []
        for options in (["--json"], [], ["--dry-run"], ["--dry-run", "--json"]):
            main(["conformance", url, "--model", "fake", "--api-key-env", "FAKE_KEY", *options])
            out, err = capsys.readouterr()
            outputs.append(out + err)
    assert state.authorization == f"Bearer {secret}"
    for output in outputs:
        assert secret not in output
        assert "fake" in output  # the output is there, without the key


def test_an_api_key_variable_named_but_unset_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    code = main(["conformance", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env",
                 "NO_SUCH_KEY"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2
    assert "NO_SUCH_KEY" in err


def test_an_unknown_variant_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A variant name not in the battery is exit 2, with the closest name when one is."""
    code = main(
        ["conformance", "http://127.0.0.1:9/v1", "--model", "m", "--variants", "nope,lenght"]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert "unknown variant(s) 'nope', 'lenght' (did you mean 'length'?)" in err


def test_an_unreachable_endpoint_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listens: each variant is an error, the report says so, and the run exits 2
    saying why, as probe does for an unreachable URL."""
    with fake_endpoint(FakeState()) as url:
        pass  # the port is free again
    code = main(["conformance", url, "--model", "m", "--json", "--variants", "plain,length"])
    out, err = capsys.readouterr()
    assert code == 2
    variants = json.loads(out)["variants"]
    assert [v["reason"] for v in variants] == ["request failed: ConnectError"] * 2
    assert "nothing answered: every request failed to connect" in err


def test_an_endpoint_that_serves_no_such_api_is_an_input_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A base URL where the API is not (every answer 404): the run exits 2 saying so,
    instead of reporting each variant skipped as unsupported."""
    with fake_endpoint(FakeState()) as url:
        code = main(["conformance", url + "/no-such-prefix", "--model", "m", "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert all("HTTP 404" in v["reason"] for v in json.loads(out)["variants"] if v["requests"])
    assert "no such API at this URL" in err


def test_a_variant_that_failed_is_not_a_missing_endpoint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The look-alike: an endpoint that answers with streams is judged by its variants."""
    with fake_endpoint(FakeState()) as url:
        code = main(["conformance", url, "--model", "m", "--json", "--variants", "plain"])
    _, err = capsys.readouterr()
    assert code == 0
    assert "no such API" not in err


def test_variant_selection() -> None:
    assert [v.name for v in select(None)] == DEFAULT_VARIANTS
    assert select(["all"]) == CHAT_VARIANTS
    assert [v.name for v in select(["length", "plain"])] == ["plain", "length"]
    assert "long" not in DEFAULT_VARIANTS
    assert "concurrent" not in DEFAULT_VARIANTS


def test_every_default_request_is_capped() -> None:
    """Safe against paid endpoints: every default variant sets a small max_tokens."""
    from streamguard.conformance import DEFAULT_TOKEN_CAP, variant_request

    for variant in select(None):
        assert 0 < variant_request(variant, "m")["max_tokens"] <= DEFAULT_TOKEN_CAP


# -- the request facts the checks read -------------------------------------------------------


def test_request_facts_keep_the_answer_shape() -> None:
    facts = RequestFacts(
        {
            "max_tokens": 16,
            "stop": ["\n", "END"],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "logprobs": True,
            "top_logprobs": 2,
            "response_format": {"type": "json_schema", "json_schema": {"schema": {}}},
            "tools": [{"type": "function"}] * 3,
        }
    )
    assert dict(facts) == {
        "max_tokens": 16,
        "stop": ("\n", "END"),
        "tool_choice": "function",
        "tool_choice_function": "get_weather",
        "logprobs": True,
        "top_logprobs": 2,
        "response_format": "json_schema",
    }


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    assert RequestFacts({"max_tokens": 9, "max_completion_tokens": 5})["max_tokens"] == 5
    assert RequestFacts({"stop": "END"})["stop"] == ("END",)
    assert RequestFacts({"tool_choice": "required"})["tool_choice"] == "required"


@pytest.mark.parametrize(
    ("request_body", "key"),
    [
        ({"stop": ["x"] * (MAX_STOP_SEQUENCES + 1)}, "stop"),
        ({"stop": ["x" * 10_000]}, "stop"),
        ({"stop": [1]}, "stop"),
    ],
    ids=["too-many-stops", "a-huge-stop", "a-stop-of-the-wrong-type"],
)
def test_an_unusable_stop_is_unknown(request_body: dict[str, Any], key: str) -> None:
    """A stop list a client could size work with is kept as unknown (None), never kept."""
    assert RequestFacts(request_body)[key] is None


@pytest.mark.parametrize(
    "request_body",
    [
        {"max_tokens": -1},
        {"max_tokens": 10**5000},
        {"max_tokens": 1.5},
        {"tool_choice": "anything"},
        {"tool_choice": {"type": "function", "function": {"name": "n" * 65}}},
        {"logprobs": "yes"},
        {"top_logprobs": 10_000},
        {"response_format": {"type": "x" * 1000}},
        {"response_format": "json_object"},
    ],
)
def test_an_unusable_shape_fact_is_absent(request_body: dict[str, Any]) -> None:
    facts = RequestFacts(request_body)
    assert "tool_choice_function" not in facts
    assert set(facts) <= {"tool_choice"}
    if "tool_choice" in facts:
        # A forced function whose name is too long is still a forced function; any other
        # value is "other", which no rule judges by (tool_calls_finished_as_stop skips it).
        expected = "function" if isinstance(request_body["tool_choice"], dict) else "other"
        assert facts["tool_choice"] == expected


@pytest.mark.parametrize("value", [{}, [], {"a": []}, 1.5, True, None, "x", 10**30])
@pytest.mark.parametrize(
    "key",
    ["max_tokens", "max_completion_tokens", "stop", "tool_choice", "logprobs", "top_logprobs",
     "response_format"],
)  # fmt: skip
def test_a_shape_field_of_any_json_type_is_read_without_failing(key: str, value: Any) -> None:
    facts, note = request_facts(json.dumps({key: value}).encode(), 64 * 1024)
    assert note is None
    assert facts is not None
    dict(facts)  # every fact reads


# -- each variant check, on chunks: a broken stream and its healthy look-alike ------------------


def _chunk(index: int = 0, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    return {
        "id": "c",
        "model": "m",
        "created": 1,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def _usage(completion: int) -> dict[str, Any]:
    usage = {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": completion + 1}
    return {"id": "c", "model": "m", "created": 1, "choices": [], "usage": usage}


def _logprobs(content: str, token: str, width: int) -> dict[str, Any]:
    chunk = _chunk(content=content)
    top = [{"token": token, "logprob": -1.0}] * width
    chunk["choices"][0]["logprobs"] = {
        "content": [{"token": token, "logprob": -1.0, "top_logprobs": top}]
    }
    return chunk


def _call(position: int, call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": arguments}
    delta: dict[str, Any] = {"index": position, "function": function}
    if call_id is not None:
        delta.update(id=call_id, type="function")
    if name is not None:
        function["name"] = name
    return _chunk(tool_calls=[delta])


_TOOLS = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
_NAMED = {**_TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
_REQUIRED = {**_TOOLS, "tool_choice": "required"}
_SCHEMA = {"response_format": {"type": "json_schema"}}
_LOGPROBS = {"logprobs": True, "top_logprobs": 2}
_ONE_CALL = [_call(0, "a", "get_weather", '{"city": "Paris"}'), _chunk(finish="tool_calls")]
_TWO_CALLS = [*_ONE_CALL[:1], _call(1, "b", "get_weather", "{}"), _chunk(finish="tool_calls")]

#: (check, request, healthy chunks, broken chunks, the rule the broken ones raise)
CHECK_CASES: list[tuple[str, dict[str, Any], list[Any], list[Any], str]] = [
    (
        "check_common",
        {},
        [_chunk(content="a"), _chunk(finish="stop")],
        [_chunk(content="a"), {**_chunk(finish="stop"), "model": "other"}],
        "chunk_field_changed",
    ),
    (
        "check_common",
        {},
        [_chunk(content="a"), _chunk(finish="stop")],
        [_chunk(finish="", content="a"), _chunk(finish="stop")],
        "finish_reason_empty",
    ),
    (
        "check_usage",
        {"max_tokens": 5},
        [_chunk(finish="length", content="a"), _usage(5)],
        [_chunk(finish="length", content="a"), _usage(6)],
        "usage_over_max_tokens",
    ),
    (
        "check_choices",
        {"n": 3},
        [_chunk(0, "stop"), _chunk(1, "stop"), _chunk(2, "stop")],
        [_chunk(0, "stop"), _chunk(1, "stop")],
        "choice_missing",
    ),
    (
        "check_stop",
        {"stop": [" five"]},
        [_chunk(content="one two three four"), _chunk(finish="stop")],
        [_chunk(content="one two three four five"), _chunk(finish="stop")],
        "stop_sequence_in_content",
    ),
    (
        "check_length",
        {"max_tokens": 5},
        [_chunk(finish="length", content="a"), _usage(5)],
        [_chunk(finish="length", content="a"), _usage(4)],
        "length_token_count",
    ),
    (
        "check_length",
        {"max_tokens": 5},
        [_chunk(finish="length", content="a"), _usage(5)],
        [_chunk(finish="stop", content="a"), _usage(5)],
        "length_not_reported",
    ),
    (
        "check_tools",
        _REQUIRED,
        _ONE_CALL,
        [
            _chunk(tool_calls=[{"index": 0, "id": "a", "function": {"name": "get_weather"}}]),
            _chunk(finish="tool_calls"),
        ],
        "tool_call_type_missing",
    ),
    (
        "check_tools",
        _REQUIRED,
        _TWO_CALLS,
        [*_ONE_CALL[:1], _call(1, "a", "get_weather", "{}"), _chunk(finish="tool_calls")],
        "tool_call_id_duplicate",
    ),
    (
        "check_tools",
        _REQUIRED,
        _ONE_CALL,
        [*_ONE_CALL[:1], _chunk(finish="stop")],
        "tool_calls_finish_mismatch",
    ),
    (
        "check_tools",
        {**_NAMED, "tools": [*_TOOLS["tools"], {"function": {"name": "other"}}]},
        _ONE_CALL,
        [_call(0, "a", "other", "{}"), _chunk(finish="tool_calls")],
        "tool_choice_not_followed",
    ),
    (
        "check_tools",
        _REQUIRED,
        _ONE_CALL,
        [*_ONE_CALL[:1], _call(0, None, "get_weather", ""), _chunk(finish="tool_calls")],
        "tool_call_name_unknown",
    ),
    (
        "check_logprobs",
        _LOGPROBS,
        [_logprobs("a", "a", 2), _logprobs("b", "b", 2)],
        [_logprobs("a", "a", 2), _logprobs("b", "b", 1)],
        "logprobs_width",
    ),
    (
        "check_logprobs",
        _LOGPROBS,
        [_logprobs("a", "a", 2), _logprobs("b", "b", 2)],
        [_logprobs("a", "a", 2), _chunk(content="b")],
        "logprobs_missing",
    ),
    (
        "check_logprobs",
        _LOGPROBS,
        [_logprobs("a", "a", 2), _logprobs("b", "b", 2)],
        [_logprobs("a", "a", 2), _logprobs("b", "c", 2)],
        "logprobs_token_mismatch",
    ),
    (
        "check_json",
        _SCHEMA,
        [_chunk(content='{"city": '), _chunk(content='"Paris"}'), _chunk(finish="stop")],
        [_chunk(content='{"city": '), _chunk(finish="stop")],
        "json_content_invalid",
    ),
    (
        "check_json",
        _SCHEMA,
        [_chunk(content='{"city": "Paris"}'), _chunk(finish="stop")],
        [_chunk(content='{"town": "Paris"}'), _chunk(finish="stop")],
        "json_schema_mismatch",
    ),
]


@pytest.mark.parametrize(
    ("check", "request_body", "healthy", "broken", "rule"),
    CHECK_CASES,
    ids=[case[4] for case in CHECK_CASES],
)
def test_a_variant_check_names_its_rule_and_spares_the_look_alike(
    check: str, request_body: dict[str, Any], healthy: list[Any], broken: list[Any], rule: str
) -> None:
    from streamguard import conformance

    def rules(chunks: list[Any]) -> list[str]:
        exchange = conformance.Exchange(request_body, RequestFacts(request_body), tuple(chunks))
        return [finding.rule for finding in getattr(conformance, check)(exchange)]

    assert rules(healthy) == []
    assert rule in rules(broken)
    assert rule in CONFORMANCE_RULES


def test_every_conformance_rule_is_tested() -> None:
    """Each rule of the variant checks has a case above, a test against the fake, or a
    case of the Responses and Anthropic checks (``test_conformance_protocols``)."""
    from tests.test_conformance_protocols import TESTED_RULES

    tested = {case[4] for case in CHECK_CASES} | TESTED_RULES
    tested |= {rule for expected in EXPECTED.values() for rule in expected.values()}
    tested |= {
        "not_an_event_stream",  # below
        "stream_incomplete",  # test_an_endless_stream_is_cut_at_max_bytes
        "feature_ignored",  # test_an_ignored_option_is_a_warning
        "stream_id_shared",  # test_mixed_up_concurrent_streams_fail
        "cross_talk",
        "twin_unavailable",  # test_a_twin_without_answer_is_a_warning
    }
    assert set(CONFORMANCE_RULES) <= tested


def test_a_twin_without_answer_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """--twin against an endpoint that only streams: said, and not a failure of streaming."""
    code, report = run(capsys, FakeState(stream_only=True), "--variants", "plain", "--twin")
    [variant] = report["variants"]
    assert [(f["rule"], f["severity"]) for f in variant["findings"]] == [
        ("twin_unavailable", "warning")
    ]
    assert variant["outcome"] == "pass"
    assert code == 0


def test_the_conformance_page_shows_the_variants_and_rules() -> None:
    """docs/conformance.md holds the generated tables as the code has them; regenerate with
    ``python -c "from streamguard.conformance import reference_markdown as r; print(r())"``
    between the page's markers."""
    from pathlib import Path

    from streamguard.conformance import reference_markdown

    page = (Path(__file__).resolve().parent.parent / "docs" / "conformance.md").read_text()
    start = page.index("<!-- generated: reference_markdown -->\n") + len(
        "<!-- generated: reference_markdown -->\n"
    )
    end = page.index("<!-- end generated -->")
    assert page[start:end] == reference_markdown()


def test_an_answer_that_is_no_event_stream_fails(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that answers a streaming request with one JSON body ignores ``stream``."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def unstreamed(request: Any) -> JSONResponse:
        return JSONResponse({"choices": []})

    app = Starlette(routes=[Route("/v1/chat/completions", unstreamed, methods=["POST"])])
    with serve(app) as url:
        code = main(["conformance", f"{url}/v1", "--model", "m", "--json", "--variants", "plain"])
    report = json.loads(capsys.readouterr()[0])
    assert failing(report) == {"plain": {"not_an_event_stream"}}
    assert code == 1
