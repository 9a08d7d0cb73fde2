"""The README's quickstart runs as written."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import httpx

from streamguard.testing import serve

from .test_docs_snippets import readme_quickstart

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart() -> str:
    """The quickstart's code (tests/test_docs_snippets.py type-checks it, with every other
    snippet, and checks that a misspelt option fails)."""
    return readme_quickstart().code


def test_quickstart_serves_a_watched_stream_and_its_metrics() -> None:
    """The quickstart app watches an OpenAI stream and exposes it on /metrics."""
    namespace: dict[str, Any] = {}
    exec(compile(quickstart(), str(README), "exec"), namespace)
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app: FastAPI = namespace["app"]

    async def frames() -> Any:
        yield b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        yield b'"choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},'
        yield b'"finish_reason":null}]}\n\n'
        yield b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        yield b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

    @app.post("/v1/chat/completions")
    async def chat() -> StreamingResponse:
        return StreamingResponse(frames(), media_type="text/event-stream")

    with serve(app) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json={}) as response:
            assert response.read().endswith(b"data: [DONE]\n\n")
        metrics = httpx.get(f"{url}/metrics").text
    line = (
        'streamguard_streams_total{outcome="completed",protocol="openai_chat",'
        'route="/v1/chat/completions"}'
    )
    assert any(row.startswith(line) and not row.endswith(" 0.0") for row in metrics.splitlines())


def test_what_the_readme_says_of_compressed_streams_is_what_happens() -> None:
    """A gzip stream is watched, counted, reported once as compressed_stream, not inspected."""
    text = " ".join(README.read_text().split())
    assert "not compressed" not in text
    assert "A compressed stream (any `Content-Encoding` but `identity`) is watched too" in text
    assert "its report says `inspected=False`" in text

    from prometheus_client import CollectorRegistry
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    from streamguard import StreamGuardMiddleware, StreamReport

    async def chat(request: Request) -> Response:
        body = gzip.compress(b'data: {"choices": []}\n\n')  # no [DONE]: not looked for
        headers = {"content-encoding": "gzip"}
        return StreamingResponse(iter([body]), media_type="text/event-stream", headers=headers)

    reports: list[StreamReport] = []
    registry = CollectorRegistry()
    app = StreamGuardMiddleware(
        Starlette(routes=[Route("/v1/chat/completions", chat)]),
        routes={"/v1/chat/completions": "openai_chat"},
        metrics=registry,
        on_report=reports.append,
    )

    async def request() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            (await client.get("/v1/chat/completions")).raise_for_status()

    asyncio.run(request())  # the app has returned, so the report is in
    (report,) = reports
    assert (report.outcome, report.rules(), report.inspected) == (
        "completed",
        ["compressed_stream"],
        False,
    )
    labels = {"route": "/v1/chat/completions", "protocol": "openai_chat"}
    assert (
        registry.get_sample_value("streamguard_streams_total", {**labels, "outcome": "completed"})
        == 1
    )
    assert registry.get_sample_value("streamguard_bytes_total", labels) == report.bytes > 0
