"""``streamguard conformance --protocol openai_responses|anthropic`` against fake endpoints.

The fakes (``tests/conformance_server.py``) run under a real uvicorn server on loopback. A
healthy fake passes every variant of its battery; each injectable bug, modelled on a real
one, fails exactly the variants it breaks, naming the rule. The official ``openai`` and
``anthropic`` SDKs read the healthy fakes as the checks do (the fakes are what a real
client expects). The dry run's figures are what the run then sends, on every protocol, and
the API key never shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.applications import Starlette

from streamguard.cli import main
from streamguard.conformance import CONFORMANCE_RULES, PROTOCOLS, battery
from streamguard.request import RequestFacts
from streamguard.rules import RULES
from streamguard.testing import serve
from tests.conformance_server import (
    ANTHROPIC_BUGS,
    RESPONSES_BUGS,
    FakeState,
    build_anthropic_app,
    build_chat_app,
    build_responses_app,
)

APPS: dict[str, Callable[[FakeState], Starlette]] = {
    "openai_chat": build_chat_app,
    "openai_responses": build_responses_app,
    "anthropic": build_anthropic_app,
}
NEW_PROTOCOLS = ["openai_responses", "anthropic"]


def default_variants(protocol: str) -> list[str]:
    return [v.name for v in battery(protocol).variants if not v.opt_in]


@contextmanager
def fake_endpoint(protocol: str, state: FakeState) -> Iterator[str]:
    """The protocol's fake under uvicorn; its base URL (a leaked generation released at the
    end, so the server can stop)."""
    try:
        with serve(APPS[protocol](state)) as url:
            try:
                yield f"{url}/v1"
            finally:
                state.release.set()
    finally:
        state.release.set()


def run(
    capsys: pytest.CaptureFixture[str], protocol: str, state: FakeState, *options: str
) -> tuple[int, dict[str, Any]]:
    """Run the command against the protocol's fake with ``--json``: exit code and report."""
    with fake_endpoint(protocol, state) as url:
        code = main(
            ["conformance", url, "--model", "fake", "--protocol", protocol, "--json", *options]
        )
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


# -- the healthy endpoints -----------------------------------------------------------------


@pytest.mark.parametrize("protocol", NEW_PROTOCOLS)
def test_a_healthy_endpoint_passes_every_variant(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state = FakeState()
    code, report = run(capsys, protocol, state, "--variants", "all")
    assert outcomes(report) == {v.name: "pass" for v in battery(protocol).variants}
    assert [f for v in report["variants"] for f in v["findings"]] == []
    assert code == 0
    assert report["protocol"] == protocol
    assert report["requests"] == state.requests
    assert report["endpoint"].endswith(battery(protocol).path)


def test_every_request_sets_its_token_cap() -> None:
    """Safe against paid endpoints: every variant of every battery caps its output, within
    the default cap."""
    from streamguard.conformance import DEFAULT_TOKEN_CAP

    for protocol in PROTOCOLS:
        chosen = battery(protocol)
        for variant in chosen.variants:
            if variant.opt_in:
                continue
            cap = chosen.request(variant, "m")[chosen.cap_key]
            assert 0 < cap <= DEFAULT_TOKEN_CAP, (protocol, variant.name)


def test_anthropic_requests_carry_the_version_and_max_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = FakeState()
    run(capsys, "anthropic", state, "--variants", "plain,truncation")
    assert state.anthropic_version == "2023-06-01"
    assert [body["max_tokens"] for body in state.bodies] == [32, 5]


# -- the bugs ------------------------------------------------------------------------------

#: protocol -> bug -> {variant: the rule that must fail it}.
EXPECTED: dict[str, dict[str, dict[str, str]]] = {
    "openai_responses": {
        "no_completed": dict.fromkeys(default_variants("openai_responses"), "missing_terminal"),
        "incomplete_as_completed": {"truncation": "length_not_reported"},
        "arguments_invalid": dict.fromkeys(
            ["tool_required", "tool_named", "tools_parallel"], "tool_arguments_invalid"
        ),
        "final_output_stale": dict.fromkeys(
            ["plain", "truncation", "json_object"], "final_output_mismatch"
        ),
        "hang_after_disconnect": {"abort": "hang_after_abort"},
    },
    "anthropic": {
        "no_message_stop": dict.fromkeys(default_variants("anthropic"), "missing_terminal"),
        "end_turn_on_truncation": {"truncation": "length_not_reported"},
        # The engine's warning (tool_input_invalid) is the tool variants' focus; the
        # variant check says it too, as an error.
        "arguments_invalid": dict.fromkeys(
            ["tool_any", "tool_named", "tools_parallel"], "tool_input_invalid"
        ),
        "hang_after_disconnect": {"abort": "hang_after_abort"},
    },
}
BUG_CASES = [(protocol, bug) for protocol, bugs in EXPECTED.items() for bug in sorted(bugs)]


def test_every_bug_has_its_expectation() -> None:
    assert set(EXPECTED["openai_responses"]) == RESPONSES_BUGS
    assert set(EXPECTED["anthropic"]) == ANTHROPIC_BUGS


@pytest.mark.parametrize(("protocol", "bug"), BUG_CASES, ids=[f"{p}-{b}" for p, b in BUG_CASES])
def test_a_bug_fails_exactly_its_variants_with_its_rule(
    protocol: str, bug: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # --timeout bounds the wait for the health request a hung server never answers.
    state = FakeState(bugs=frozenset({bug}))
    code, report = run(capsys, protocol, state, "--timeout", "5")
    expected = EXPECTED[protocol][bug]
    failed = failing(report)
    assert set(failed) == set(expected)
    for variant, rule in expected.items():
        assert rule in failed[variant], (variant, failed[variant])
    assert code == 1
    passed = {name for name, outcome in outcomes(report).items() if outcome == "pass"}
    assert passed == set(default_variants(protocol)) - set(expected)


def test_invalid_tool_input_is_named_by_the_engine_and_the_variant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = FakeState(bugs=frozenset({"arguments_invalid"}))
    _, report = run(capsys, "anthropic", state, "--variants", "tool_named")
    [variant] = report["variants"]
    assert {(f["rule"], f["severity"], f["source"], f["focus"]) for f in variant["findings"]} == {
        ("tool_input_invalid", "warning", "engine", True),
        ("tool_arguments_invalid", "error", "variant", False),
    }


def test_the_rules_a_bug_names_are_known() -> None:
    for bugs in EXPECTED.values():
        for expected in bugs.values():
            for rule in expected.values():
                assert rule in RULES or rule in CONFORMANCE_RULES, rule


# -- unsupported, ignored, not exercised ---------------------------------------------------


@pytest.mark.parametrize("protocol", NEW_PROTOCOLS)
def test_a_refused_tool_choice_is_unsupported(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = run(capsys, protocol, FakeState(refuse=frozenset({"tool_choice"})))
    skipped = {n for n, o in outcomes(report).items() if o == "skipped"}
    tools = {v.name for v in battery(protocol).variants if "tool_choice" in v.body}
    assert skipped == tools
    named = {v.name for v in battery(protocol).variants if v.feature == "tool_choice"}
    assert named
    for variant in report["variants"]:
        if variant["name"] in named:
            assert variant["reason"] == (
                "unsupported: HTTP 400 before the stream (the error names tool_choice)"
            )
    assert code == 0


@pytest.mark.parametrize("protocol", NEW_PROTOCOLS)
def test_an_ignored_tool_choice_is_a_warning(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Text despite a forced tool: ``feature_ignored``, a warning; ``--fail-on warning``
    fails it."""
    names = "tool_named"
    state = FakeState(ignore=frozenset({"tool_choice"}))
    code, report = run(capsys, protocol, state, "--variants", names)
    [variant] = report["variants"]
    assert [(f["rule"], f["severity"]) for f in variant["findings"]] == [
        ("feature_ignored", "warning")
    ]
    assert variant["outcome"] == "pass"
    assert code == 0
    code, report = run(capsys, protocol, state, "--variants", names, "--fail-on", "warning")
    assert outcomes(report) == {"tool_named": "fail"}
    assert code == 1


@pytest.mark.parametrize(
    ("protocol", "cap"), [("openai_responses", "max_output_tokens"), ("anthropic", "max_tokens")]
)
def test_an_ignored_token_cap_fails_the_truncation_variant(
    protocol: str, cap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = run(capsys, protocol, FakeState(ignore=frozenset({cap})), "--variants",
                       "truncation")  # fmt: skip
    # Past the cap, and not a word of it: the usage and the finish both say so.
    assert failing(report) == {"truncation": {"usage_over_max_tokens", "length_not_reported"}}
    assert code == 1


def test_a_stop_sequence_the_answer_never_reaches_is_not_exercised(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The look-alike of a stop ignored: an answer that ends (here: at its cap) before the
    stop sequence says nothing about it."""
    from streamguard.conformance import Exchange

    request = {"stop_sequences": [" five"], "max_tokens": 3}
    chunks = (
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "one two three "}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
         "usage": {"output_tokens": 3}},
    )  # fmt: skip
    from streamguard.conformance_anthropic import check_stop
    from streamguard.conformance_base import NotExercised

    with pytest.raises(NotExercised):
        list(check_stop(Exchange(request, RequestFacts(request), chunks)))


@pytest.mark.parametrize("protocol", NEW_PROTOCOLS)
def test_the_abort_leaves_at_the_first_text(protocol: str) -> None:
    """The protocol's own ``has_content`` says where the abort leaves: a text delta with
    text, not a tool's argument delta, not an empty text delta."""
    chosen = battery(protocol)
    assert chosen.has_content(_first_text_event(protocol))
    assert not chosen.has_content(_first_text_event(protocol, ""))
    assert not chosen.has_content(_first_tool_event(protocol))
    assert not chosen.has_content("[DONE]")


def _first_text_event(protocol: str, text: str = "one") -> str:
    if protocol == "anthropic":
        return json.dumps(
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": text}}
        )  # fmt: skip
    return json.dumps({"type": "response.output_text.delta", "delta": text, "item_id": "m"})


def _first_tool_event(protocol: str) -> str:
    if protocol == "anthropic":
        return json.dumps(
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": "{"}}
        )  # fmt: skip
    return json.dumps(
        {"type": "response.function_call_arguments.delta", "delta": "{", "item_id": "f"}
    )


# -- each check, on events: a broken stream and its healthy look-alike -----------------------


def _r_text(*deltas: str) -> list[dict[str, Any]]:
    return [
        {"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
         "content_index": 0, "delta": delta}
        for delta in deltas
    ]  # fmt: skip


def _r_terminal(
    kind: str = "response.completed",
    text: str | None = None,
    output_tokens: int = 2,
    reason: str | None = None,
) -> dict[str, Any]:
    output = []
    if text is not None:
        output = [{"type": "message", "content": [{"type": "output_text", "text": text}]}]
    response = {
        "status": kind.rpartition(".")[2],
        "output": output,
        "usage": {"output_tokens": output_tokens},
        "incomplete_details": {"reason": reason} if reason else None,
    }
    return {"type": kind, "response": response}


def _r_call(
    item_id: str, name: str | None, call_id: str | None, arguments: str, done: str | None = None
) -> list[dict[str, Any]]:
    item = {"id": item_id, "type": "function_call", "name": name, "call_id": call_id}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "item_id": item_id,
         "delta": arguments},
        {"type": "response.function_call_arguments.done", "item_id": item_id,
         "arguments": arguments if done is None else done},
    ]  # fmt: skip


_R_TOOLS = {"tools": [{"type": "function", "name": "get_weather"}], "tool_choice": "required"}
_R_NAMED = {**_R_TOOLS, "tool_choice": {"type": "function", "name": "get_weather"}}
_R_ARGS = '{"city": "Paris"}'
_R_CALL = _r_call("fc_0", "get_weather", "call_0", _R_ARGS)


def _a_text(text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}  # fmt: skip


def _a_stop(reason: str, output_tokens: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason},
            "usage": {"output_tokens": output_tokens}}  # fmt: skip


def _a_tool(
    index: int, block_id: str | None, name: str | None, *parts: str
) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": block_id, "name": name, "input": {}}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        *[
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": part}}
            for part in parts
        ],
    ]  # fmt: skip


_A_TOOLS = {"tools": [{"name": "get_weather"}], "tool_choice": {"type": "any"}}
_A_NAMED = {**_A_TOOLS, "tool_choice": {"type": "tool", "name": "get_weather"}}
_A_CALL = _a_tool(0, "toolu_0", "get_weather", "", '{"city": ', '"Paris"}')

#: (module, check, request, healthy events, broken events, the rule the broken ones raise)
CHECK_CASES: list[tuple[str, str, dict[str, Any], list[Any], list[Any], str]] = [
    (
        "responses", "check_common", {"max_output_tokens": 2},
        [*_r_text("a"), _r_terminal(text="a", output_tokens=2)],
        [*_r_text("a"), _r_terminal(text="a", output_tokens=3)],
        "usage_over_max_tokens",
    ),
    (
        "responses", "check_common", {},
        [*_r_text("a", "b"), _r_terminal(text="ab")],
        [*_r_text("a", "b"), _r_terminal(text="a")],
        "final_output_mismatch",
    ),
    (
        "responses", "check_truncation", {"max_output_tokens": 2},
        [*_r_text("a", "b"), _r_terminal("response.incomplete", "ab", 2, "max_output_tokens")],
        [*_r_text("a", "b"), _r_terminal("response.completed", "ab", 2)],
        "length_not_reported",
    ),
    (
        "responses", "check_truncation", {"max_output_tokens": 2},
        [*_r_text("a", "b"), _r_terminal("response.incomplete", "ab", 2, "max_output_tokens")],
        [*_r_text("a", "b"), _r_terminal("response.incomplete", "ab", 2, "content_filter")],
        "length_not_reported",
    ),
    (
        "responses", "check_truncation", {"max_output_tokens": 2},
        [*_r_text("a", "b"), _r_terminal("response.incomplete", "ab", 2, "max_output_tokens")],
        [*_r_text("a"), _r_terminal("response.incomplete", "a", 1, "max_output_tokens")],
        "length_token_count",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, _r_terminal()],
        [*_r_call("fc_0", "get_weather", None, _R_ARGS), _r_terminal()],
        "tool_call_fields_missing",
    ),
    (
        "responses", "check_tools", {**_R_NAMED, "tools": [*_R_TOOLS["tools"], {"name": "x"}]},
        [*_R_CALL, _r_terminal()],
        [*_r_call("fc_0", "x", "call_0", _R_ARGS), _r_terminal()],
        "tool_choice_not_followed",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, _r_terminal()],
        [*_r_call("fc_0", "get_weatherget_weather", "call_0", _R_ARGS), _r_terminal()],
        "tool_call_name_unknown",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, _r_terminal()],
        [*_r_call("fc_0", "get_weather", "call_0", _R_ARGS[:-1]), _r_terminal()],
        "tool_arguments_invalid",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, _r_terminal()],
        [*_r_call("fc_0", "get_weather", "call_0", _R_ARGS, "{}"), _r_terminal()],
        "tool_arguments_invalid",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, *_r_call("fc_1", "get_weather", "call_1", "{}"), _r_terminal()],
        [*_R_CALL, *_r_call("fc_1", "get_weather", "call_0", "{}"), _r_terminal()],
        "tool_call_id_duplicate",
    ),
    (
        "responses", "check_tools", _R_TOOLS,
        [*_R_CALL, _r_terminal()],
        [*_R_CALL, _r_terminal("response.failed")],
        "tool_calls_finish_mismatch",
    ),
    (
        "responses", "check_json", {},
        [*_r_text('{"city": ', '"Paris"}'), _r_terminal()],
        [*_r_text('{"city": '), _r_terminal()],
        "json_content_invalid",
    ),
    (
        "anthropic", "check_common", {"max_tokens": 5},
        [_a_text("a"), _a_stop("max_tokens", 5)],
        [_a_text("a"), _a_stop("max_tokens", 6)],
        "usage_over_max_tokens",
    ),
    (
        "anthropic", "check_truncation", {"max_tokens": 5},
        [_a_text("a"), _a_stop("max_tokens", 5)],
        [_a_text("a"), _a_stop("end_turn", 5)],
        "length_not_reported",
    ),
    (
        "anthropic", "check_truncation", {"max_tokens": 5},
        [_a_text("a"), _a_stop("max_tokens", 5)],
        [_a_text("a"), _a_stop("max_tokens", 4)],
        "length_token_count",
    ),
    (
        "anthropic", "check_stop", {"stop_sequences": [" five"]},
        [_a_text("one two three four"), _a_stop("stop_sequence", 4)],
        [_a_text("one two three four five"), _a_stop("stop_sequence", 5)],
        "stop_sequence_in_content",
    ),
    (
        "anthropic", "check_tools", _A_TOOLS,
        [*_A_CALL, _a_stop("tool_use", 9)],
        [*_a_tool(0, None, "get_weather", "{}"), _a_stop("tool_use", 9)],
        "tool_call_fields_missing",
    ),
    (
        "anthropic", "check_tools", {**_A_NAMED, "tools": [*_A_TOOLS["tools"], {"name": "x"}]},
        [*_A_CALL, _a_stop("tool_use", 9)],
        [*_a_tool(0, "toolu_0", "x", "{}"), _a_stop("tool_use", 9)],
        "tool_choice_not_followed",
    ),
    (
        "anthropic", "check_tools", _A_TOOLS,
        [*_A_CALL, _a_stop("tool_use", 9)],
        [*_a_tool(0, "toolu_0", "weather", "{}"), _a_stop("tool_use", 9)],
        "tool_call_name_unknown",
    ),
    (
        "anthropic", "check_tools", _A_TOOLS,
        [*_A_CALL, _a_stop("tool_use", 9)],
        [*_a_tool(0, "toolu_0", "get_weather", '{"city": '), _a_stop("tool_use", 9)],
        "tool_arguments_invalid",
    ),
    (
        "anthropic", "check_tools", _A_TOOLS,
        [*_A_CALL, *_a_tool(1, "toolu_1", "get_weather", "{}"), _a_stop("tool_use", 9)],
        [*_A_CALL, *_a_tool(1, "toolu_0", "get_weather", "{}"), _a_stop("tool_use", 9)],
        "tool_call_id_duplicate",
    ),
    (
        "anthropic", "check_tools", _A_TOOLS,
        [*_A_CALL, _a_stop("tool_use", 9)],
        [*_A_CALL, _a_stop("end_turn", 9)],
        "tool_calls_finish_mismatch",
    ),
]  # fmt: skip

#: The rules of the variant checks these tests prove (``test_conformance`` adds them to
#: the ones it proves, so every rule is proved somewhere).
TESTED_RULES = {case[5] for case in CHECK_CASES}


@pytest.mark.parametrize(
    ("module", "check", "request_body", "healthy", "broken", "rule"),
    CHECK_CASES,
    ids=[f"{case[0]}-{case[1]}-{case[5]}" for case in CHECK_CASES],
)
def test_a_variant_check_names_its_rule_and_spares_the_look_alike(
    module: str,
    check: str,
    request_body: dict[str, Any],
    healthy: list[Any],
    broken: list[Any],
    rule: str,
) -> None:
    import importlib

    from streamguard.conformance import Exchange

    checks = importlib.import_module(f"streamguard.conformance_{module}")

    def rules(events: list[Any]) -> list[str]:
        exchange = Exchange(request_body, RequestFacts(request_body), tuple(events))
        return [finding.rule for finding in getattr(checks, check)(exchange)]

    assert rules(healthy) == []
    assert rule in rules(broken)
    assert rule in CONFORMANCE_RULES


# -- the official SDKs read the healthy fakes as the checks do --------------------------------


def test_the_openai_sdk_reads_the_healthy_responses_fake() -> None:
    """The openai SDK's Responses stream helper assembles the fake's text, its truncation
    and its function call: the fake is what a real client expects."""
    openai = pytest.importorskip("openai")
    with fake_endpoint("openai_responses", FakeState()) as url:
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with client.responses.stream(model="fake", input="Count", max_output_tokens=32) as s:
            final = s.get_final_response()
        assert final.status == "completed"
        assert final.output_text.split() == ["one", "two", "three", "four", "five", "six",
                                             "seven", "eight", "nine", "ten", "eleven",
                                             "twelve"]  # fmt: skip
        # The stream helper wants response.completed whatever happened; the raw stream's
        # typed events show the truncation.
        events = list(
            client.responses.create(
                model="fake", input="a long story", max_output_tokens=16, stream=True
            )
        )
        last = events[-1]
        assert last.type == "response.incomplete"
        assert last.response.incomplete_details is not None
        assert last.response.incomplete_details.reason == "max_output_tokens"
        assert last.response.usage is not None
        assert last.response.usage.output_tokens == 16
        assert last.response.output_text == "".join(
            e.delta for e in events if e.type == "response.output_text.delta"
        )
        tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
        with client.responses.stream(
            model="fake", input="Paris?", tools=[tool], tool_choice="required",  # type: ignore[list-item]
            max_output_tokens=64,
        ) as s:  # fmt: skip
            final = s.get_final_response()
        [call] = [item for item in final.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})


def test_the_anthropic_sdk_reads_the_healthy_messages_fake() -> None:
    anthropic = pytest.importorskip("anthropic")
    with fake_endpoint("anthropic", FakeState()) as url:
        client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="k",
                                     max_retries=0)  # fmt: skip
        messages = [{"role": "user", "content": "Count"}]
        with client.messages.stream(model="fake", max_tokens=5, messages=messages) as s:  # type: ignore[arg-type]
            final = s.get_final_message()
        assert final.stop_reason == "max_tokens"
        assert final.usage.output_tokens == 5
        assert final.content[0].type == "text"
        assert final.content[0].text.split() == ["one", "two", "three", "four", "five"]
        tool = {"name": "get_weather", "input_schema": {"type": "object"}}
        with client.messages.stream(
            model="fake", max_tokens=64, messages=messages, tools=[tool],  # type: ignore[arg-type,list-item]
            tool_choice={"type": "tool", "name": "get_weather"},
        ) as s:  # fmt: skip
            final = s.get_final_message()
        assert final.stop_reason == "tool_use"
        [block] = final.content
        assert block.type == "tool_use"
        assert (block.name, block.input) == ("get_weather", {"city": "Paris"})


# -- the dry run is what the run sends ----------------------------------------------------------

_RUN_ID = re.compile(r"MARK[0-9a-f]{8}X")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_dry_run_figures_are_what_the_run_sends(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Request for request: the bodies the dry run lists are the bodies the fake then
    receives (in order; the concurrent variant's run id aside, and its streams in any
    order), their count and their worst-case tokens what the fake counted from them."""
    options = ["--variants", "all", *(["--twin"] if protocol == "openai_chat" else [])]
    state = FakeState()
    code, planned = run(capsys, protocol, state, *options, "--dry-run")
    assert code == 0
    assert state.requests == 0
    assert planned["protocol"] == protocol
    code, report = run(capsys, protocol, state, *options)
    assert code == 0
    sent = {v["name"]: v["requests"] for v in report["variants"]}
    assert {row["variant"]: row["requests"] for row in planned["plan"]} == sent
    assert sum(sent.values()) == state.requests == len(state.bodies)
    assert sum(row["max_output_tokens"] for row in planned["plan"]) == state.tokens_allowed
    received = iter(state.bodies)
    for row in planned["plan"]:
        bodies = [next(received) for _ in range(row["requests"])]
        assert len(row["bodies"]) == row["requests"]
        assert row["bodies"][0] == row["request"]
        if row["variant"] == "concurrent":
            shown = sorted(json.dumps(b, sort_keys=True) for b in bodies)
            shown = [_RUN_ID.sub("MARK<run>X", b) for b in shown]
            assert shown == sorted(json.dumps(b, sort_keys=True) for b in row["bodies"])
        else:
            assert bodies == row["bodies"], row["variant"]


# -- the key --------------------------------------------------------------------------------

_SENT_AS = {
    "openai_chat": ("authorization", "Bearer {}"),
    "openai_responses": ("authorization", "Bearer {}"),
    "anthropic": ("api_key_header", "{}"),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("named", [True, False], ids=["api-key-env", "default-variable"])
def test_the_api_key_is_sent_and_never_shown(
    protocol: str,
    named: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Sent the protocol's way (a bearer token; Anthropic's x-api-key), read from
    ``--api-key-env`` or the protocol's default variable, and in no output: table, JSON,
    dry run, with findings too (a broken endpoint's report quotes most), nor in any log
    record, httpx's debug ones included."""
    import logging

    caplog.set_level(logging.DEBUG)
    secret = f"sk-test-{protocol}-never-shown"
    variable = "FAKE_KEY" if named else battery(protocol).api_key_env
    for other in {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FAKE_KEY"}:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(variable, secret)
    bug = {"openai_chat": "duplicate_finish", "openai_responses": "no_completed",
           "anthropic": "no_message_stop"}[protocol]  # fmt: skip
    state = FakeState(bugs=frozenset({bug}))
    selector = ["--api-key-env", variable] if named else []
    outputs = []
    with fake_endpoint(protocol, state) as url:
        for options in (["--json"], [], ["--dry-run"], ["--dry-run", "--json"]):
            main(["conformance", url, "--model", "fake", "--protocol", protocol,
                  "--variants", "plain", *selector, *options])  # fmt: skip
            out, err = capsys.readouterr()
            outputs.append(out + err)
    attribute, shape = _SENT_AS[protocol]
    assert getattr(state, attribute) == shape.format(secret)
    if protocol == "anthropic":
        assert state.authorization is None  # the key goes in x-api-key only
    for output in outputs:
        assert secret not in output
        assert "fake" in output
    assert "***" in outputs[2]  # the dry run says a key is sent, without it
    assert caplog.records  # httpx logged the requests
    assert secret not in caplog.text
