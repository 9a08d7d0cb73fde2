"""The official SDKs through the transports, against fixture streams served on loopback.

uvicorn serves every fixture of ``tests/fixtures/{openai_chat,openai_responses,anthropic}``
(cut into ``SDK_CUTS`` pieces, so event boundaries fall anywhere). Each SDK reads each
fixture twice, with and without a streamguard transport: what the SDK returns (or raises)
must be the same, and the transport's report must be the offline check of the fixture, or,
when the SDK stopped reading early (it closes after ``[DONE]`` and on an in-band error),
its beginning.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import streamguard.httpx
import streamguard.httpx2
from streamguard import Outcome, StreamReport
from tests.helpers import chat_chunk, fixture_endpoint
from tests.servers import serve
from tests.sse_fixtures import Fixture, fixtures

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is a dev dependency")

CHAT = {fixture.name: fixture for fixture in fixtures("openai_chat")}
#: ``clean-resumed`` answers a GET with ``starting_after``, which ``responses.create`` never sends.
RESPONSES = {f.name: f for f in fixtures("openai_responses") if f.name != "clean-resumed"}
MESSAGES = {fixture.name: fixture for fixture in fixtures("anthropic")}
#: The async client runs the same code per chunk: healthy, in-band error and broken streams.
ASYNC_CHAT = [
    "clean-text-include-usage",
    "clean-n3-interleaved",
    "clean-parallel-tool-calls",
    "clean-keepalive-comments",
    "error-payload-eof",
    "error-payload-then-done",
    "missing_terminal",
    "missing_finish_reason-truncated",
    "role_repeated",
    "invalid_json-double-wrapped",
    "event_after_terminal",
    "usage_missing",
]
FIRST = chat_chunk()
#: Transport options for deterministic reports: timing findings depend on the machine.
OPTIONS: dict[str, Any] = {
    "timers": {"enabled": False},
    "logs": {"enabled": False},
    "metrics": False,
}


async def cut(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        yield FIRST
        await asyncio.sleep(0.005)
        raise RuntimeError("the upstream crashed")

    return StreamingResponse(body(), media_type="text/event-stream")


async def stall(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        yield FIRST
        await asyncio.sleep(30)  # cancelled when the client leaves

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = Starlette(
        routes=[
            Route("/cut/v1/chat/completions", cut, methods=["POST"]),
            Route("/stall/v1/chat/completions", stall, methods=["POST"]),
            Route(
                "/{fixture}/v1/chat/completions", fixture_endpoint("openai_chat"), methods=["POST"]
            ),
            Route(
                "/{fixture}/v1/responses", fixture_endpoint("openai_responses"), methods=["POST"]
            ),
            Route("/{fixture}/v1/messages", fixture_endpoint("anthropic"), methods=["POST"]),
        ]
    )
    with serve(app, log_level="critical") as base:
        yield base


def _outcome(work: Any) -> Any:
    """What an SDK call gave: its result, or the exception's type and text."""
    try:
        return work()
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))


def _chat_options(fixture: Fixture) -> dict[str, Any]:
    """What the fixture's stream answers (n, include_usage), sent as the SDK's request."""
    request = fixture.request or {}
    keys = ("n", "stream_options", "tools", "tool_choice")  # what the stream answers
    return {key: request[key] for key in keys if key in request}


def _matches_the_offline_check(report: StreamReport, fixture: Fixture) -> None:
    """The whole fixture's report when the SDK read to the end, else its beginning."""
    expected = fixture.check()
    assert report.protocol == expected.protocol
    if report.outcome is Outcome.CLIENT_DISCONNECT or report.client_closed_after_end:
        assert report.findings == expected.findings[: len(report.findings)]
        assert report.outcome in (Outcome.CLIENT_DISCONNECT, expected.outcome)
    else:
        assert (report.outcome, report.findings) == (expected.outcome, expected.findings)


# -- openai, httpx -------------------------------------------------------------------------


def _chat(client: Any, fixture: Fixture) -> Any:
    def work() -> list[dict[str, Any]]:
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            **_chat_options(fixture),
        )
        return [chunk.model_dump(warnings=False) for chunk in stream]

    return _outcome(work)


@pytest.mark.parametrize("name", sorted(CHAT))
def test_openai_chat_through_the_httpx_transport(url: str, name: str) -> None:
    """openai.OpenAI over httpx.Client(transport=StreamGuardTransport()): same results."""
    fixture = CHAT[name]
    base = f"{url}/{name}/v1"
    reports: list[StreamReport] = []
    transport = streamguard.httpx.StreamGuardTransport(on_report=reports.append, **OPTIONS)
    with httpx.Client(transport=transport) as guarded, httpx.Client() as bare:
        plain = _chat(
            openai.OpenAI(base_url=base, api_key="x", http_client=bare, max_retries=0), fixture
        )
        watched = _chat(
            openai.OpenAI(base_url=base, api_key="x", http_client=guarded, max_retries=0), fixture
        )
    assert watched == plain
    [report] = reports
    assert report.route == "{prefix}/chat/completions"  # a mount prefix never reaches a label
    _matches_the_offline_check(report, fixture)


@pytest.mark.parametrize("name", ASYNC_CHAT)
def test_async_openai_chat_through_the_async_transport(url: str, name: str) -> None:
    """openai.AsyncOpenAI over AsyncStreamGuardTransport: same results, same report."""
    fixture = CHAT[name]
    base = f"{url}/{name}/v1"
    reports: list[StreamReport] = []

    async def chat(http_client: httpx.AsyncClient) -> Any:
        client = openai.AsyncOpenAI(
            base_url=base, api_key="x", http_client=http_client, max_retries=0
        )
        try:
            stream = await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                **_chat_options(fixture),
            )
            return [chunk.model_dump(warnings=False) async for chunk in stream]
        except Exception as exc:
            return ("raised", type(exc).__name__, str(exc))

    async def both() -> tuple[Any, Any]:
        transport = streamguard.httpx.AsyncStreamGuardTransport(on_report=reports.append, **OPTIONS)
        async with httpx.AsyncClient(transport=transport) as guarded, httpx.AsyncClient() as bare:
            return await chat(bare), await chat(guarded)

    plain, watched = asyncio.run(both())
    assert watched == plain
    [report] = reports
    _matches_the_offline_check(report, fixture)


@pytest.mark.parametrize("name", sorted(RESPONSES))
def test_openai_responses_through_the_httpx2_transport(url: str, name: str) -> None:
    """openai.OpenAI over httpx2 (its own client library) and the Responses API."""
    fixture = RESPONSES[name]
    base = f"{url}/{name}/v1"
    reports: list[StreamReport] = []

    def responses(http_client: httpx2.Client) -> Any:
        client = openai.OpenAI(base_url=base, api_key="x", http_client=http_client, max_retries=0)
        return _outcome(
            lambda: [
                event.model_dump(warnings=False)
                for event in client.responses.create(model="m", input="hi", stream=True)
            ]
        )

    transport = streamguard.httpx2.StreamGuardTransport(on_report=reports.append, **OPTIONS)
    with httpx2.Client(transport=transport) as guarded, httpx2.Client() as bare:
        assert responses(guarded) == responses(bare)
    [report] = reports
    _matches_the_offline_check(report, fixture)


# -- anthropic, httpx2 ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_anthropic_through_the_httpx2_transport(url: str, name: str) -> None:
    """anthropic.Anthropic over httpx2.Client(transport=StreamGuardTransport()): same results."""
    fixture = MESSAGES[name]
    reports: list[StreamReport] = []

    def messages(http_client: httpx2.Client) -> Any:
        client = anthropic.Anthropic(
            base_url=f"{url}/{name}", api_key="x", http_client=http_client, max_retries=0
        )
        return _outcome(
            lambda: [
                event.model_dump(warnings=False)
                for event in client.messages.create(
                    model="m",
                    max_tokens=64,
                    messages=[{"role": "user", "content": "hi"}],
                    stream=True,
                )
            ]
        )

    transport = streamguard.httpx2.StreamGuardTransport(on_report=reports.append, **OPTIONS)
    with httpx2.Client(transport=transport) as guarded, httpx2.Client() as bare:
        assert messages(guarded) == messages(bare)
    [report] = reports
    _matches_the_offline_check(report, fixture)


# -- the ends, over a real connection ------------------------------------------------------


def _openai(url: str, reports: list[StreamReport] | None = None, **client: Any) -> Any:
    """An OpenAI client over httpx, guarded when ``reports`` is given."""
    transport = (
        None
        if reports is None
        else streamguard.httpx.StreamGuardTransport(on_report=reports.append, **OPTIONS)
    )
    http_client = httpx.Client(transport=transport, **client)
    return openai.OpenAI(base_url=url, api_key="x", http_client=http_client, max_retries=0)


def _failure(client: Any) -> tuple[type[BaseException], type[BaseException] | None]:
    """The exception a chat stream raised, and the transport error it came from."""
    with pytest.raises(openai.APIError) as raised:
        list(client.chat.completions.create(model="m", messages=[], stream=True))
    cause = raised.value.__cause__
    return type(raised.value), None if cause is None else type(cause)


def test_the_sdk_closing_early_is_a_client_disconnect(url: str) -> None:
    """Closing an SDK stream after its first chunk: client_disconnect, nothing flagged."""
    reports: list[StreamReport] = []
    client = _openai(f"{url}/clean-text-include-usage/v1", reports)
    stream = client.chat.completions.create(model="m", messages=[], stream=True)
    next(iter(stream))
    stream.close()
    [report] = reports
    assert (report.outcome, report.findings) == (Outcome.CLIENT_DISCONNECT, ())


def test_a_cut_connection_is_connection_lost(url: str) -> None:
    """The upstream dropping the connection mid-body: connection_lost, and the SDK raises
    what it raises without streamguard."""
    reports: list[StreamReport] = []
    raised = _failure(_openai(f"{url}/cut/v1", reports))
    assert raised == _failure(_openai(f"{url}/cut/v1"))
    assert raised == (openai.APIConnectionError, httpx.RemoteProtocolError)
    [report] = reports
    assert (report.outcome, report.rules()[0]) == (
        Outcome.CONNECTION_LOST,
        "response_not_finished",
    )


def test_a_read_timeout_is_the_client_giving_up(url: str) -> None:
    """A read timeout on a stalled upstream: client_disconnect with a stalled finding."""
    reports: list[StreamReport] = []
    raised = _failure(_openai(f"{url}/stall/v1", reports, timeout=0.3))
    assert raised == _failure(_openai(f"{url}/stall/v1", timeout=0.3))
    assert raised == (openai.APITimeoutError, httpx.ReadTimeout)
    [report] = reports
    assert (report.outcome, report.rules()) == (Outcome.CLIENT_DISCONNECT, ["stalled"])


class _Recording(httpx.BaseTransport):
    """Wraps a transport and records every chunk its response bodies yield."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.chunks: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.SyncByteStream)
        chunks = self.chunks

        class Recorded(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                for chunk in stream:
                    chunks.append(chunk)
                    yield chunk

            def close(self) -> None:
                stream.close()

        response.stream = Recorded()
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("name", ["clean-n3-interleaved", "missing_terminal", "role_repeated"])
def test_the_caller_reads_what_the_network_gave(url: str, name: str) -> None:
    """Over a real connection, the caller's chunks are the network's, object for object."""
    recording = _Recording()
    reports: list[StreamReport] = []
    transport = streamguard.httpx.StreamGuardTransport(
        recording, on_report=reports.append, **OPTIONS
    )
    with (
        httpx.Client(transport=transport) as client,
        client.stream("POST", f"{url}/{name}/v1/chat/completions", json={}) as response,
    ):
        read = list(response.iter_raw())
    assert len(read) == len(recording.chunks)
    assert all(got is sent for got, sent in zip(read, recording.chunks, strict=True))
    assert b"".join(read) == CHAT[name].body
    [report] = reports
    assert report.bytes == len(CHAT[name].body)
