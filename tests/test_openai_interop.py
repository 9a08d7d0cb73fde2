"""The official openai SDK reads healthy chat and Responses streams that streamguard reports clean.

A Starlette app serves the healthy fixtures (cut at arbitrary points, so event boundaries
fall anywhere) under uvicorn, with ``StreamGuardMiddleware`` mounted; the SDK's streaming
helpers assemble the final result, which must hold the expected text, and each stream's
report must be ``completed`` with no finding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from streamguard import StreamGuardMiddleware, StreamReport
from tests.helpers import fixture_endpoint
from tests.servers import serve, wait_until
from tests.sse_fixtures import FIXTURES, load

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency")

#: Healthy chat fixtures -> (choice 0's content, its tool calls' (name, arguments)). Not
#: clean-finish-length: the stream() helper raises LengthFinishReasonError by design.
CHAT: dict[str, tuple[str | None, list[tuple[str, str]]]] = {
    "clean-text-include-usage": ("Hello! How can I help you today?", []),
    "clean-2024-no-usage-field": ("Hello! How can I help you today?", []),
    "clean-keepalive-comments": ("Hello! How", []),
    "clean-azure-prompt-filter-and-async-annotations": ("Hello! How can I help you today?", []),
    "clean-empty-content-and-unknown-keys": ("Hello", []),
    "clean-done-without-space": ("Hello!", []),
    "clean-done-with-suffix": ("Hello!", []),
    "clean-delta-empty-after-finish": ("Hello!", []),
    "clean-n3-interleaved": ("Hello there", []),
    "clean-forced-tool-choice-stop": (None, [("get_weather", '{"city":"Paris"}')]),
    "clean-parallel-tool-calls": (
        None,
        [("get_weather", '{"city":"Paris"}'), ("get_time", '{"tz":"CET"}')],
    ),
}

#: Healthy Responses fixtures -> the final response's output_text.
RESPONSES = {
    "clean-text": "Hello! How can I help?",
    "clean-reasoning-then-text": "Hi!",
    "clean-keepalive-and-unknown-events": "Sunny.",
    "clean-incomplete": "The answer is",
    "clean-queued-background": "Done.",
    "clean-gateway-done": "Hi",
    "clean-function-call": "",
}


#: The middlewares of the module's server, so each test can start once the last one's
#: streams have all reported.
_GUARDS: list[StreamGuardMiddleware] = []


def _app(reports: list[StreamReport]) -> ASGIApp:
    """One middleware per protocol, chosen by path, as a gateway would configure it."""
    chat = Starlette(
        routes=[
            Route(
                "/{fixture}/v1/chat/completions", fixture_endpoint("openai_chat"), methods=["POST"]
            )
        ]
    )
    responses = Starlette(
        routes=[
            Route("/{fixture}/v1/responses", fixture_endpoint("openai_responses"), methods=["POST"])
        ]
    )
    guarded_chat = StreamGuardMiddleware(chat, protocol="openai_chat", on_report=reports.append)
    guarded_responses = StreamGuardMiddleware(
        responses, protocol="openai_responses", on_report=reports.append
    )
    _GUARDS[:] = [guarded_chat, guarded_responses]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        chat_path = scope.get("path", "").endswith("/chat/completions")
        await (guarded_chat if chat_path else guarded_responses)(scope, receive, send)

    return app


def _request_options(fixture: str) -> dict[str, Any]:
    """What the fixture's stream answers (n, include_usage, the tools and the tool choice):
    the middleware reads the request."""
    request = load(FIXTURES / "openai_chat" / f"{fixture}.sse").request or {}
    keys = ("n", "stream_options", "tools", "tool_choice")
    return {key: request[key] for key in keys if key in request}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[StreamReport]]]:
    reports: list[StreamReport] = []
    with serve(_app(reports)) as url:
        yield url, reports


@pytest.fixture(autouse=True)
def _previous_streams_reported(server: tuple[str, list[StreamReport]]) -> None:
    """The SDK returns once it read the terminal; the server's report of that stream may
    land a moment later, so a test counts reports only once no stream is open."""
    wait_until(lambda: all(guard.in_flight == 0 for guard in _GUARDS), 5)


def _last_report(reports: list[StreamReport], before: int) -> StreamReport:
    wait_until(lambda: len(reports) >= before + 1, 5)
    assert len(reports) == before + 1
    return reports[before]


@pytest.mark.parametrize("fixture", sorted(CHAT))
def test_sdk_assembles_the_chat_completion_and_streamguard_reports_clean(
    server: tuple[str, list[StreamReport]], fixture: str
) -> None:
    """chat.completions.stream() assembles the expected message; the report is clean."""
    url, reports = server
    before = len(reports)
    client = openai.OpenAI(api_key="test-key", base_url=f"{url}/{fixture}/v1", max_retries=0)
    with client.chat.completions.stream(
        model="streamguard-test-model",
        messages=[{"role": "user", "content": "Hello"}],
        **_request_options(fixture),
    ) as stream:
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    content, calls = CHAT[fixture]
    assert message.content == content
    assert [(c.function.name, c.function.arguments) for c in message.tool_calls or []] == calls
    report = _last_report(reports, before)
    assert (report.protocol, report.outcome.value, report.findings) == (
        "openai_chat",
        "completed",
        (),
    )


def test_sdk_raw_chat_stream_yields_every_chunk_and_usage(
    server: tuple[str, list[StreamReport]],
) -> None:
    """The raw create(stream=True) iterator yields the text and the usage chunk; clean report."""
    url, reports = server
    before = len(reports)
    client = openai.OpenAI(
        api_key="test-key", base_url=f"{url}/clean-text-include-usage/v1", max_retries=0
    )
    stream = client.chat.completions.create(
        model="streamguard-test-model",
        messages=[{"role": "user", "content": "Hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello! How can I help you today?"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 29
    report = _last_report(reports, before)
    assert (report.outcome.value, report.findings) == ("completed", ())


@pytest.mark.parametrize("fixture", sorted(RESPONSES))
def test_sdk_assembles_the_response_and_streamguard_reports_clean(
    server: tuple[str, list[StreamReport]], fixture: str
) -> None:
    """responses.stream() yields the text and a final response holding it; the report is clean."""
    url, reports = server
    before = len(reports)
    client = openai.OpenAI(api_key="test-key", base_url=f"{url}/{fixture}/v1", max_retries=0)
    deltas: list[str] = []
    finals: list[str] = []
    with client.responses.stream(model="streamguard-test-model", input="Hello") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            elif event.type in ("response.completed", "response.incomplete"):
                finals.append(event.response.output_text)  # get_final_response wants completed
    assert finals == [RESPONSES[fixture]]
    assert "".join(deltas) == RESPONSES[fixture]
    report = _last_report(reports, before)
    assert (report.protocol, report.outcome.value, report.findings) == (
        "openai_responses",
        "completed",
        (),
    )


def test_sdk_reads_the_function_call_arguments(server: tuple[str, list[StreamReport]]) -> None:
    """The function_call item the SDK assembles carries the joined arguments."""
    url, _ = server
    client = openai.OpenAI(
        api_key="test-key", base_url=f"{url}/clean-function-call/v1", max_retries=0
    )
    with client.responses.stream(model="streamguard-test-model", input="Weather?") as stream:
        final = stream.get_final_response()
    (item,) = final.output
    assert item.type == "function_call"
    assert json.loads(item.arguments) == {"location": "San Francisco"}


@pytest.mark.parametrize(
    ("path", "fixture"),
    [
        ("chat/completions", "error-payload-then-done"),
        ("chat/completions", "error-openrouter-finish-error"),
        ("responses", "error-nested-then-failed"),
    ],
)
def test_in_band_error_raises_in_the_sdk_and_reports_error_event(
    server: tuple[str, list[StreamReport]], path: str, fixture: str
) -> None:
    """A truthy top-level error makes the SDK raise APIError; the report says error_event."""
    url, reports = server
    before = len(reports)
    client = openai.OpenAI(api_key="test-key", base_url=f"{url}/{fixture}/v1", max_retries=0)
    if path == "responses":
        stream: Any = client.responses.create(model="m", input="Hi", stream=True)
    else:
        messages: Any = [{"role": "user", "content": "Hi"}]
        stream = client.chat.completions.create(model="m", messages=messages, stream=True)
    with pytest.raises(openai.APIError):
        list(stream)
    report = _last_report(reports, before)
    assert (report.outcome.value, report.findings) == ("error_event", ())
