"""The LLM examples (fastapi_app, normalizing_proxy, starlette_app), run for real under uvicorn.

Every stream is read by an httpx client over loopback with ``collect`` (the client's view)
while the app's ``StreamGuardMiddleware`` reports the server's view through ``on_report``.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from examples import fastapi_app, normalizing_proxy, starlette_app
from streamguard import Outcome, StreamReport
from streamguard.config import TimerConfig
from streamguard.testing import CollectedStream, collect, serve

from .helpers import AppTime

#: Short timers, so the timing faults take a fraction of a second: ``body_open`` and
#: ``buffered`` hold for 0.15 s (over the grace, under the idle limit), ``stalled`` for 0.45 s.
TIMERS = TimerConfig(idle_limit_s=0.3, body_end_grace_s=0.05)
#: Rules only a timed observer (the middleware) can make; ``collect`` reads without timers.
TIMING_RULES = {"body_not_ended", "stalled", "buffered_flush"}

CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
ANSWER = fastapi_app.ANSWER
USER = [{"role": "user", "content": "How should a stream end?"}]
REQUESTS: dict[str, dict[str, Any]] = {
    CHAT: {"model": "fake-gpt", "stream": True, "messages": USER},
    MESSAGES: {"model": "fake-claude", "max_tokens": 256, "stream": True, "messages": USER},
    RESPONSES: {"model": "fake-gpt", "stream": True, "input": "How should a stream end?"},
}
INCLUDE_USAGE = {"stream_options": {"include_usage": True}}
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
]
FLAT_TOOLS = [{"type": "function", "name": "get_weather", "input_schema": {"type": "object"}}]


@dataclass
class Served:
    """A served app and the reports its middleware made, in arrival order."""

    url: str
    reports: queue.Queue[StreamReport]

    def next_report(self) -> StreamReport:
        return self.reports.get(timeout=5)

    def drain(self) -> None:
        while not self.reports.empty():
            self.reports.get_nowait()


def post(url: str, body: dict[str, Any], **params: str) -> CollectedStream:
    with httpx.stream("POST", url, json=body, params=params, timeout=10) as response:
        return collect(response)


@contextmanager
def served_fake_llm(timers: TimerConfig) -> Iterator[Served]:
    """The fake LLM under uvicorn, on time as its pauses make it (``AppTime``): a timing
    fault is judged on the pause it was written with, a healthy stream on none, whatever
    the machine's load."""
    reports: queue.Queue[StreamReport] = queue.Queue()
    time = AppTime()
    app = fastapi_app.build_app(
        token_delay=0.003,
        timers=timers,
        registry=CollectorRegistry(),
        on_report=reports.put,
        sleep=time.sleep,
        clock=time,
    )
    with serve(app) as url:
        yield Served(url, reports)


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[Served]:
    with served_fake_llm(TIMERS) as served:
        yield served


@pytest.fixture
def llm(fake_llm: Served) -> Served:
    fake_llm.drain()
    return fake_llm


@pytest.fixture(scope="module")
def sdk_llm() -> Iterator[Served]:
    """The fake LLM with the example's own timers (``DEMO_TIMERS``, as its module-level app
    runs), for the SDK tests."""
    with served_fake_llm(fastapi_app.DEMO_TIMERS) as served:
        yield served


@pytest.fixture
def sdk(sdk_llm: Served) -> Served:
    sdk_llm.drain()
    return sdk_llm


# -- fastapi_app: every fault --------------------------------------------------------------

#: (path, fault) -> (request additions, outcome, the middleware's rules in order).
EXPECTED: dict[tuple[str, str], tuple[dict[str, Any], Outcome, list[str]]] = {
    (CHAT, "no_terminal"): ({}, Outcome.UNCLOSED, ["missing_terminal"]),
    (CHAT, "double_terminal"): ({}, Outcome.COMPLETED, ["duplicate_terminal"]),
    (CHAT, "invalid_json"): ({}, Outcome.COMPLETED, ["invalid_json"]),
    (CHAT, "cut_frame"): ({}, Outcome.UNCLOSED, ["unterminated_frame", "missing_terminal"]),
    (CHAT, "body_open"): ({}, Outcome.COMPLETED, ["body_not_ended"]),
    (CHAT, "stalled"): ({}, Outcome.COMPLETED, ["stalled"]),
    (CHAT, "buffered"): ({}, Outcome.COMPLETED, ["buffered_flush"]),
    (CHAT, "error"): ({}, Outcome.ERROR_EVENT, []),
    (CHAT, "role_repeated"): ({}, Outcome.COMPLETED, ["role_repeated"]),
    # One finding per fragment that repeats the name (the fake model sends four).
    (CHAT, "tool_name_repeated"): ({}, Outcome.COMPLETED, ["tool_call_header_repeated"] * 4),
    (CHAT, "content_after_finish"): ({}, Outcome.COMPLETED, ["content_after_finish"]),
    # Usage before the finish chunk, and then the finish chunk after the usage chunk.
    (CHAT, "usage_wrong_chunk"): (
        INCLUDE_USAGE,
        Outcome.COMPLETED,
        ["usage_not_last", "usage_not_last"],
    ),
    (CHAT, "missing_finish"): ({}, Outcome.COMPLETED, ["missing_finish_reason"]),
    (MESSAGES, "no_terminal"): ({}, Outcome.UNCLOSED, ["missing_terminal"]),
    (MESSAGES, "double_terminal"): ({}, Outcome.COMPLETED, ["duplicate_terminal"]),
    (MESSAGES, "invalid_json"): ({}, Outcome.COMPLETED, ["invalid_json"]),
    (MESSAGES, "cut_frame"): ({}, Outcome.UNCLOSED, ["unterminated_frame", "missing_terminal"]),
    (MESSAGES, "body_open"): ({}, Outcome.COMPLETED, ["body_not_ended"]),
    (MESSAGES, "stalled"): ({}, Outcome.COMPLETED, ["stalled"]),
    (MESSAGES, "buffered"): ({}, Outcome.COMPLETED, ["buffered_flush"]),
    (MESSAGES, "error"): ({}, Outcome.ERROR_EVENT, []),
    (MESSAGES, "delta_before_start"): ({}, Outcome.COMPLETED, ["block_not_started"]),
    (MESSAGES, "event_name_mismatch"): ({}, Outcome.COMPLETED, ["event_name_mismatch"]),
    (MESSAGES, "block_not_stopped"): ({}, Outcome.COMPLETED, ["block_not_stopped"]),
    (RESPONSES, "no_terminal"): ({}, Outcome.UNCLOSED, ["missing_terminal"]),
    (RESPONSES, "double_terminal"): ({}, Outcome.COMPLETED, ["duplicate_terminal"]),
    # The broken event is a text delta, so output_text.done no longer matches the deltas.
    (RESPONSES, "invalid_json"): ({}, Outcome.COMPLETED, ["invalid_json", "done_text_mismatch"]),
    (RESPONSES, "cut_frame"): ({}, Outcome.UNCLOSED, ["unterminated_frame", "missing_terminal"]),
    (RESPONSES, "body_open"): ({}, Outcome.COMPLETED, ["body_not_ended"]),
    (RESPONSES, "stalled"): ({}, Outcome.COMPLETED, ["stalled"]),
    (RESPONSES, "buffered"): ({}, Outcome.COMPLETED, ["buffered_flush"]),
    (RESPONSES, "error"): ({}, Outcome.ERROR_EVENT, []),
    (RESPONSES, "event_name_mismatch"): ({}, Outcome.COMPLETED, ["event_type_mismatch"]),
    (RESPONSES, "sequence_gap"): ({}, Outcome.COMPLETED, ["sequence_gap"]),
    (RESPONSES, "item_not_open"): ({}, Outcome.COMPLETED, ["item_not_open"]),
}


def test_every_fault_is_expected() -> None:
    """The expectations cover exactly the faults the example app offers."""
    offered = {(path, fault) for path, faults in fastapi_app.FAULTS.items() for fault in faults}
    assert set(EXPECTED) == offered


@pytest.mark.parametrize(("path", "fault"), sorted(EXPECTED))
def test_fault_is_reported(llm: Served, path: str, fault: str) -> None:
    """Each injected fault gives exactly its rules and outcome, and the client agrees."""
    extra, outcome, rules = EXPECTED[path, fault]
    client = post(llm.url + path, {**REQUESTS[path], **extra}, fault=fault)
    report = llm.next_report()
    assert (report.route, report.outcome, report.rules()) == (path, outcome, rules)
    assert client.outcome is outcome
    assert client.report.rules() == [rule for rule in rules if rule not in TIMING_RULES]


def test_unknown_fault_is_a_plain_400(llm: Served) -> None:
    """An unknown fault name is refused with a JSON 400 that lists the known ones."""
    response = httpx.post(llm.url + CHAT, json=REQUESTS[CHAT], params={"fault": "nope"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("unknown fault 'nope'; known: ")


# -- fastapi_app: healthy streams ----------------------------------------------------------

HEALTHY = {
    "chat": (CHAT, {}, (ANSWER,), ("stop",)),
    "chat-usage": (CHAT, INCLUDE_USAGE, (ANSWER,), ("stop",)),
    "chat-n3-usage": (CHAT, {"n": 3, **INCLUDE_USAGE}, (ANSWER,) * 3, ("stop",) * 3),
    "chat-tools": (CHAT, {"tools": CHAT_TOOLS}, (), ("tool_calls",)),
    "messages": (MESSAGES, {}, (ANSWER,), ("end_turn",)),
    "messages-tools": (
        MESSAGES,
        {"tools": FLAT_TOOLS},
        ("Let me check the weather.",),
        ("tool_use",),
    ),
    "responses": (RESPONSES, {}, (ANSWER,), ("completed",)),
    "responses-tools": (RESPONSES, {"tools": FLAT_TOOLS}, (), ("completed",)),
}


@pytest.mark.parametrize("case", sorted(HEALTHY))
def test_healthy_stream_is_clean(llm: Served, case: str) -> None:
    """A stream without a fault is clean on both sides and carries the fake model's answer."""
    path, extra, texts, finish_reasons = HEALTHY[case]
    client = post(llm.url + path, {**REQUESTS[path], **extra})
    report = llm.next_report()
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, [])
    assert (client.outcome, client.report.rules()) == (Outcome.COMPLETED, [])
    assert (client.texts, client.finish_reasons) == (texts, finish_reasons)


def test_metrics_count_the_fault() -> None:
    """/metrics serves the middleware's counters: one unclosed stream, one missing_terminal."""
    registry = CollectorRegistry()
    app = fastapi_app.build_app(token_delay=0.001, timers=TIMERS, registry=registry)
    with serve(app) as url:
        post(url + MESSAGES, REQUESTS[MESSAGES], fault="no_terminal")
        text = httpx.get(url + "/metrics", follow_redirects=True).text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    labels = (("protocol", "anthropic"), ("route", MESSAGES))
    assert samples["streamguard_violations_total", (*labels, ("rule", "missing_terminal"))] == 1
    assert samples["streamguard_violations_total", (*labels, ("rule", "block_not_started"))] == 0
    outcome = (("outcome", "unclosed"), *labels)
    assert samples["streamguard_streams_total", tuple(sorted(outcome))] == 1
    assert samples["streamguard_malformed_streams_total", labels] == 1


# -- fastapi_app: the official SDKs --------------------------------------------------------


def test_openai_sdk_reads_chat_with_n_and_usage(sdk: Served) -> None:
    """The openai SDK gets the answer on both choices and the usage, from a clean stream."""
    client = openai.OpenAI(base_url=sdk.url + "/v1", api_key="sk-test", max_retries=0)
    texts: dict[int, str] = {0: "", 1: ""}
    usage = None
    for chunk in client.chat.completions.create(
        model="fake-gpt", messages=USER, stream=True, n=2, stream_options={"include_usage": True}
    ):
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
        usage = chunk.usage or usage
    assert texts == {0: ANSWER, 1: ANSWER}
    assert usage is not None
    assert usage.completion_tokens == 2 * len(fastapi_app.tokenize(ANSWER))
    assert sdk.next_report().rules() == []


def test_openai_sdk_accumulates_the_tool_call(sdk: Served) -> None:
    """The openai SDK's stream helper assembles the streamed tool call, and the stream is clean."""
    client = openai.OpenAI(base_url=sdk.url + "/v1", api_key="sk-test", max_retries=0)
    with client.chat.completions.stream(
        model="fake-gpt", messages=USER, tools=CHAT_TOOLS
    ) as stream:
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == (
        "get_weather",
        fastapi_app.TOOL_ARGUMENTS,
    )
    assert sdk.next_report().rules() == []


def test_openai_sdk_reads_responses(sdk: Served) -> None:
    """The openai SDK's Responses helper gets the completed answer from a clean stream."""
    client = openai.OpenAI(base_url=sdk.url + "/v1", api_key="sk-test", max_retries=0)
    with client.responses.stream(model="fake-gpt", input="How should a stream end?") as stream:
        response = stream.get_final_response()
    assert (response.status, response.output_text) == ("completed", ANSWER)
    assert sdk.next_report().rules() == []


def test_anthropic_sdk_reads_messages(sdk: Served) -> None:
    """The anthropic SDK's stream helper gets the answer and end_turn, and the stream is clean."""
    client = anthropic.Anthropic(base_url=sdk.url, api_key="sk-ant-test", max_retries=0)
    with client.messages.stream(model="fake-claude", max_tokens=256, messages=USER) as stream:
        text = "".join(stream.text_stream)
        message = stream.get_final_message()
    assert (text, message.stop_reason) == (ANSWER, "end_turn")
    assert sdk.next_report().rules() == []


def test_anthropic_sdk_accumulates_the_tool_use(sdk: Served) -> None:
    """The anthropic SDK assembles the tool_use block's streamed input, and the stream is clean."""
    client = anthropic.Anthropic(base_url=sdk.url, api_key="sk-ant-test", max_retries=0)
    tools: Any = FLAT_TOOLS
    with client.messages.stream(
        model="fake-claude", max_tokens=256, messages=USER, tools=tools
    ) as stream:
        message = stream.get_final_message()
    block = message.content[1]
    assert message.stop_reason == "tool_use"
    assert block.type == "tool_use"
    assert (block.name, block.input) == ("get_weather", json.loads(fastapi_app.TOOL_ARGUMENTS))
    assert sdk.next_report().rules() == []


# -- normalizing_proxy ---------------------------------------------------------------------


@dataclass
class Proxy:
    """The proxy served in front of a served fake upstream, with all three report streams."""

    url: str
    upstream: Served
    downstream: queue.Queue[StreamReport]
    upstream_checked: queue.Queue[StreamReport]

    def reports(self) -> tuple[StreamReport, StreamReport]:
        """The proxy's own upstream report and the downstream report, for one request."""
        return self.upstream_checked.get(timeout=5), self.downstream.get(timeout=5)


@pytest.fixture(scope="module")
def proxy(fake_llm: Served) -> Iterator[Proxy]:
    downstream: queue.Queue[StreamReport] = queue.Queue()
    upstream_checked: queue.Queue[StreamReport] = queue.Queue()
    app = normalizing_proxy.build_proxy(
        fake_llm.url,
        registry=CollectorRegistry(),
        on_report=downstream.put,
        on_upstream_report=upstream_checked.put,
    )
    with serve(app) as url:
        yield Proxy(url, fake_llm, downstream, upstream_checked)


@pytest.fixture
def fresh_proxy(proxy: Proxy) -> Proxy:
    for reports in (proxy.upstream.reports, proxy.downstream, proxy.upstream_checked):
        while not reports.empty():
            reports.get_nowait()
    return proxy


def test_upstream_check_agrees_with_collect(llm: Served) -> None:
    """``collect`` on the upstream the proxy reads (Anthropic /v1/messages) finds it clean."""
    upstream = post(llm.url + MESSAGES, REQUESTS[MESSAGES])
    assert (upstream.protocol, upstream.outcome, upstream.report.rules()) == (
        "anthropic",
        Outcome.COMPLETED,
        [],
    )
    assert upstream.text == ANSWER


def test_proxy_translates_cleanly(fresh_proxy: Proxy) -> None:
    """Without the bug both sides are clean, and the client gets the answer, usage and [DONE]."""
    client = post(fresh_proxy.url + CHAT, {**REQUESTS[CHAT], **INCLUDE_USAGE})
    upstream, downstream = fresh_proxy.reports()
    assert (upstream.protocol, upstream.outcome, upstream.rules()) == (
        "anthropic",
        Outcome.COMPLETED,
        [],
    )
    assert (downstream.protocol, downstream.route, downstream.outcome, downstream.rules()) == (
        "openai_chat",
        "proxy_chat",
        Outcome.COMPLETED,
        [],
    )
    assert (client.text, client.finish_reasons, client.terminal) == (ANSWER, ("stop",), True)
    assert client.events[-1].data == "[DONE]"
    assert json.loads(client.events[-2].data)["usage"]["completion_tokens"] == len(
        fastapi_app.tokenize(ANSWER)
    )


def test_proxy_bug_no_done_is_caught_downstream(fresh_proxy: Proxy) -> None:
    """With ?bug=no_done the upstream is clean and the downstream is missing_terminal."""
    client = post(fresh_proxy.url + CHAT, REQUESTS[CHAT], bug="no_done")
    upstream, downstream = fresh_proxy.reports()
    assert (upstream.outcome, upstream.rules()) == (Outcome.COMPLETED, [])
    assert (downstream.outcome, downstream.rules()) == (Outcome.UNCLOSED, ["missing_terminal"])
    assert (client.text, client.terminal, client.report.rules()) == (
        ANSWER,
        False,
        ["missing_terminal"],
    )


def test_openai_sdk_does_not_notice_the_missing_done(fresh_proxy: Proxy) -> None:
    """The openai SDK returns the full answer without [DONE]; only streamguard reports it."""
    client = openai.OpenAI(base_url=fresh_proxy.url + "/v1", api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(
        model="fake-gpt",
        messages=USER,
        stream=True,
        extra_query={"bug": "no_done"},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    upstream, downstream = fresh_proxy.reports()
    assert text == ANSWER
    assert (upstream.rules(), downstream.rules()) == ([], ["missing_terminal"])


def test_proxy_translates_tool_calls(fresh_proxy: Proxy) -> None:
    """A tool_use upstream becomes a clean OpenAI tool call that the openai SDK assembles."""
    client = openai.OpenAI(base_url=fresh_proxy.url + "/v1", api_key="sk-test", max_retries=0)
    with client.chat.completions.stream(
        model="fake-gpt", messages=USER, tools=CHAT_TOOLS
    ) as stream:
        completion = stream.get_final_completion()
    upstream, downstream = fresh_proxy.reports()
    call = completion.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (call.function.name, call.function.arguments) == (
        "get_weather",
        fastapi_app.TOOL_ARGUMENTS,
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    assert (upstream.rules(), downstream.rules()) == ([], [])


#: upstream fault -> (upstream outcome and rules, downstream outcome and rules).
UPSTREAM_FAULTS: dict[str, tuple[tuple[Outcome, list[str]], ...]] = {
    # The proxy does not invent a [DONE] for a cut upstream: it sends an in-band error.
    "no_terminal": ((Outcome.UNCLOSED, ["missing_terminal"]), (Outcome.ERROR_EVENT, [])),
    "error": ((Outcome.ERROR_EVENT, []), (Outcome.ERROR_EVENT, [])),
    # Translation hides these from the downstream check: only the upstream check sees them.
    "delta_before_start": ((Outcome.COMPLETED, ["block_not_started"]), (Outcome.COMPLETED, [])),
    "double_terminal": ((Outcome.COMPLETED, ["duplicate_terminal"]), (Outcome.COMPLETED, [])),
}


@pytest.mark.parametrize("fault", sorted(UPSTREAM_FAULTS))
def test_upstream_faults_are_caught_upstream(fresh_proxy: Proxy, fault: str) -> None:
    """An upstream fault shows in the proxy's upstream report, not as a downstream violation."""
    post(fresh_proxy.url + CHAT, REQUESTS[CHAT], upstream_fault=fault)
    upstream, downstream = fresh_proxy.reports()
    expected_upstream, expected_downstream = UPSTREAM_FAULTS[fault]
    assert (upstream.outcome, upstream.rules()) == expected_upstream
    assert (downstream.outcome, downstream.rules()) == expected_downstream


# -- starlette_app (sse-starlette) ---------------------------------------------------------


@pytest.fixture(scope="module")
def sse_app() -> Iterator[Served]:
    reports: queue.Queue[StreamReport] = queue.Queue()
    app = starlette_app.build_app(
        ping_s=0.01, token_delay=0.04, registry=CollectorRegistry(), on_report=reports.put
    )
    with serve(app) as url:
        yield Served(url, reports)


def assert_crlf_with_pings_inside(client: CollectedStream) -> None:
    body = client.body
    assert body.count(b"\n") == body.count(b"\r\n")  # every line ends in CRLF
    first_ping = body.index(b": ping - ")
    assert client.events[0].offset < first_ping < client.events[-1].offset


def test_sse_starlette_plain_stream_is_clean(sse_app: Served) -> None:
    """sse-starlette's CRLF frames, ids, multi-line data and mid-stream pings are clean."""
    with httpx.stream("GET", sse_app.url + "/events", timeout=10) as response:
        client = collect(response)
    report = sse_app.next_report()
    assert (report.protocol, report.outcome, report.rules()) == ("sse", Outcome.COMPLETED, [])
    assert [(event.event, event.data, event.id) for event in client.events] == [
        ("tick", data, str(number)) for number, data in enumerate(starlette_app.TICKS)
    ]
    assert_crlf_with_pings_inside(client)


def test_sse_starlette_openai_stream_is_clean(sse_app: Served) -> None:
    """An OpenAI Chat stream sent through EventSourceResponse, pings included, is clean."""
    client = post(sse_app.url + CHAT, {"model": "fake-gpt", "messages": USER, "stream": True})
    report = sse_app.next_report()
    assert (report.protocol, report.outcome, report.rules()) == (
        "openai_chat",
        Outcome.COMPLETED,
        [],
    )
    assert (client.text, client.finish_reasons, client.terminal) == (
        starlette_app.ANSWER,
        ("stop",),
        True,
    )
    assert_crlf_with_pings_inside(client)
