"""``streamguard conformance``: the run's bounds. ``--repeat`` (and flaky variants),
``--budget-tokens``, and the one retry before the first byte, against the fakes under
uvicorn; the dry run counts what the run then sends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamguard.cli import main
from streamguard.conformance import (
    PROTOCOLS,
    VariantOutcome,
    VariantResult,
    _combined,
)
from tests.conformance_server import FakeState
from tests.test_conformance_protocols import fake_endpoint, outcomes, run


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in report["variants"]}


# -- --repeat --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_repeat_runs_each_variant_k_times_and_the_dry_run_counts_them(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state = FakeState()
    options = ["--variants", "plain,truncation" if protocol != "openai_chat" else "plain,length"]
    _, planned = run(capsys, protocol, state, *options, "--repeat", "3", "--dry-run")
    code, report = run(capsys, protocol, state, *options, "--repeat", "3")
    assert code == 0
    for variant in report["variants"]:
        assert variant["outcome"] == "pass"
        assert variant["runs"] == ["pass"] * 3
        assert variant["requests"] == 3
    assert [row["requests"] for row in planned["plan"]] == [3, 3]
    assert state.requests == sum(row["requests"] for row in planned["plan"])
    assert state.tokens_allowed == sum(row["max_output_tokens"] for row in planned["plan"])
    assert [b for row in planned["plan"] for b in row["bodies"]] == state.bodies


def test_an_intermittent_bug_is_flaky_and_fails_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vllm#27572: a tool stream that now and then ends with a null finish. One run
    passes, the next fails: flaky, with the failing run's findings."""
    state = FakeState(bugs=frozenset({"null_finish_on_tools"}), bug_every=2)
    code, report = run(capsys, "openai_chat", state, "--variants", "tool_required", "--repeat", "2")
    [variant] = report["variants"]
    assert variant["outcome"] == "flaky"
    assert variant["runs"] == ["pass", "fail"]
    assert variant["reason"] == "flaky: 1 pass, 1 fail of 2 runs"
    assert "missing_finish_reason" in {f["rule"] for f in variant["findings"]}
    assert report["failed"] is True
    assert code == 1


def test_the_same_bug_without_repeat_is_missed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The look-alike: one run sees only one side of the intermittent bug (here the clean
    one), which is what --repeat is for."""
    state = FakeState(bugs=frozenset({"null_finish_on_tools"}), bug_every=2)
    code, report = run(capsys, "openai_chat", state, "--variants", "tool_required")
    assert outcomes(report) == {"tool_required": "pass"}
    assert code == 0


def _result(outcome: VariantOutcome, rule: str | None = None) -> VariantResult:
    from streamguard.conformance import found

    findings = (found(rule, "m"),) if rule else ()
    return VariantResult("v", outcome, "", {}, findings, 1)


P, F, S, E = (VariantOutcome.PASS, VariantOutcome.FAIL, VariantOutcome.SKIPPED,
              VariantOutcome.ERROR)  # fmt: skip


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([P, P, P], P),
        ([F, F], F),
        ([P, F], VariantOutcome.FLAKY),
        ([E, P], VariantOutcome.FLAKY),
        ([P, S, P], P),  # a skipped run judged nothing: not flaky
        ([S, S], S),
        ([S, F], F),
    ],
)
def test_the_outcome_of_repeated_runs(runs: list[VariantOutcome], expected: VariantOutcome) -> None:
    results = [_result(o, "stream_incomplete" if o is F else None) for o in runs]
    combined = _combined(results)
    assert combined.outcome is expected
    assert combined.runs == tuple(runs)
    if expected is VariantOutcome.FLAKY:
        assert combined.reason.startswith("flaky: ")
        assert all(f.rule == "stream_incomplete" for f in combined.findings)


# -- --budget-tokens -------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_token_budget_stops_the_run_as_the_dry_run_says(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The variants whose worst case would pass the budget are skipped, the same ones the
    dry run names; the requests sent allow no more than the budget."""
    budget = 40
    state = FakeState()
    _, planned = run(capsys, protocol, state, "--budget-tokens", str(budget), "--dry-run")
    code, report = run(capsys, protocol, state, "--budget-tokens", str(budget))
    assert code == 0
    reason = f"not run: --budget-tokens {budget} spent"
    not_run = {row["variant"] for row in planned["plan"] if row["not_run"] == reason}
    assert not_run
    assert not_run == {v["name"] for v in report["variants"] if v["reason"] == reason}
    ran = {row["variant"] for row in planned["plan"] if row["not_run"] is None}
    assert ran == {v["name"] for v in report["variants"] if v["outcome"] == "pass"}
    assert state.tokens_allowed == report["max_output_tokens"] <= budget
    assert state.requests == sum(r["requests"] for r in planned["plan"] if r["not_run"] is None)


def test_the_dry_run_table_shows_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conformance", "http://127.0.0.1:9/v1", "--model", "m", "--budget-tokens",
                 "20", "--variants", "plain,usage_on", "--dry-run"])  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines() if line}
    assert rows["plain"].split()[1:] == ["1", "16", "yes"]
    assert "not run: --budget-tokens 20 spent" in rows["usage_on"]
    assert rows["total"].split()[2:4] == ["1", "16"]


# -- the one retry ---------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_503_before_the_stream_is_retried_once(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state = FakeState(unavailable=1)
    code, report = run(capsys, protocol, state, "--variants", "plain")
    [variant] = report["variants"]
    assert variant["outcome"] == "pass"
    assert variant["retries"] == ["HTTP 503"]
    assert variant["requests"] == state.requests == 2
    assert report["max_output_tokens"] == state.tokens_allowed  # the retry counted
    assert code == 0


def test_the_table_says_a_retry_happened(capsys: pytest.CaptureFixture[str]) -> None:
    state = FakeState(unavailable=1)
    with fake_endpoint("openai_chat", state) as url:
        main(["conformance", url, "--model", "fake", "--variants", "plain"])
    out, _ = capsys.readouterr()
    assert "plain: retried before the first byte (HTTP 503)" in out.splitlines()


def test_only_one_retry(capsys: pytest.CaptureFixture[str]) -> None:
    state = FakeState(unavailable=2)
    code, report = run(capsys, "anthropic", state, "--variants", "plain")
    [variant] = report["variants"]
    assert (variant["outcome"], variant["reason"]) == ("error", "HTTP 503 before the stream")
    assert variant["retries"] == ["HTTP 503"]
    assert state.requests == 2
    assert code == 1


def test_no_retry_once_a_byte_arrived(capsys: pytest.CaptureFixture[str]) -> None:
    """A stream cut after its first byte is judged, never sent again."""
    state = FakeState(unavailable=1, unavailable_stream=True)
    code, report = run(capsys, "openai_responses", state, "--variants", "plain")
    [variant] = report["variants"]
    assert variant["outcome"] == "fail"
    assert variant["retries"] == []
    assert state.requests == 1
    assert code == 1


@pytest.mark.parametrize(
    "budget", [["--max-requests", "1"], ["--budget-tokens", "16"]], ids=["requests", "tokens"]
)
def test_a_retry_that_would_pass_a_budget_is_not_made(
    budget: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    state = FakeState(unavailable=1)
    code, report = run(capsys, "openai_chat", state, "--variants", "plain", *budget)
    [variant] = report["variants"]
    assert variant["outcome"] == "error"
    assert variant["retries"] == []
    assert state.requests == 1
    assert code == 1


def test_a_retry_comes_out_of_the_budget_of_later_variants(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--max-requests 2 fits plain and usage_on; plain's retry spends usage_on's request."""
    state = FakeState(unavailable=1)
    _, report = run(capsys, "openai_chat", state, "--variants", "plain,usage_on",
                    "--max-requests", "2")  # fmt: skip
    variants = by_name(report)
    assert variants["plain"]["outcome"] == "pass"
    assert variants["usage_on"]["reason"] == "not run: --max-requests 2 spent"
    assert state.requests == report["requests"] == 2


def test_a_connect_error_is_retried_once(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_endpoint("openai_chat", FakeState()) as url:
        pass  # the port is free again
    code = main(["conformance", url, "--model", "m", "--json", "--variants", "plain"])
    [variant] = json.loads(capsys.readouterr()[0])["variants"]
    assert (variant["outcome"], variant["reason"]) == ("error", "request failed: ConnectError")
    assert variant["retries"] == ["ConnectError"]
    assert variant["requests"] == 2
    assert code == 2  # nothing answered: an input error, as probe's unreachable URL is


@pytest.mark.parametrize("value", ["0", "101", "x"])
def test_repeat_is_bounded(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A dry run lists every body of every run: K is bounded, so the plan is too."""
    code = main(["conformance", "http://127.0.0.1:9/v1", "--model", "m", "--repeat", value])
    assert code == 2
    assert "expected a whole number from 1 to 100" in capsys.readouterr()[1]


@pytest.mark.parametrize("option", ["--budget-tokens", "--max-requests"])
@pytest.mark.parametrize("value", ["0", "-5", "1.5"])
def test_a_budget_is_a_whole_number_above_zero(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["conformance", "http://127.0.0.1:9/v1", "--model", "m", option, value])
    assert code == 2
    assert "expected a whole number above 0" in capsys.readouterr()[1]
