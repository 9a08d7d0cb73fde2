"""The official LangGraph SDK client (``langgraph-sdk``) reads run streams through streamguard.

A Starlette app that answers ``POST /runs/stream`` (and the thread-scoped route) with the
fixture of ``tests/fixtures/langgraph`` its ``assistant_id`` names, and the join
``GET /threads/{id}/runs/{run_id}/stream`` with a run already streaming, is served by
uvicorn on loopback twice: behind ``StreamGuardMiddleware`` with ``protocol="auto"`` (the
run path decides) and bare. The fixtures were recorded from a real langgraph graph written
by langgraph-api's own serializer. ``runs.stream`` and ``runs.join_stream`` give the client
the same parts with and without streamguard; healthy streams are reported clean, broken ones
by the rule they break.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport
from tests.servers import serve, wait_until

from .sse_fixtures import FIXTURES

langgraph_sdk = pytest.importorskip("langgraph_sdk", reason="langgraph-sdk is a dev dependency")

pytestmark = pytest.mark.slow

#: Fixture -> (outcome, the rules of its report).
CASES: dict[str, tuple[str, list[str]]] = {
    "ok_values_updates_messages_custom_subgraph": ("completed", []),
    "ok_debug_tasks_checkpoints": ("completed", []),
    "ok_legacy_end": ("completed", []),
    "ok_retried_run_second_metadata": ("completed", []),
    "ok_heartbeats_and_blank_data": ("completed", []),
    "error_run_failed": ("error_event", []),
    "metadata_not_first": ("completed", ["metadata_not_first"]),
    "invalid_json": ("completed", ["invalid_json"]),
    "event_after_terminal": ("error_event", ["event_after_terminal"]),
    "duplicate_terminal": ("completed", ["duplicate_terminal"]),
    "warn_unknown_event_type": ("completed", ["unknown_event_type"]),
}


def _stream(name: str) -> StreamingResponse:
    text = (FIXTURES / "langgraph" / f"{name}.sse").read_bytes().decode()

    async def frames() -> AsyncIterator[bytes]:
        for frame in text.split("\r\n\r\n")[:-1]:
            yield (frame + "\r\n\r\n").encode()
            await asyncio.sleep(0)

    return StreamingResponse(frames(), media_type="text/event-stream")


async def _run(request: Request) -> StreamingResponse:
    return _stream((await request.json())["assistant_id"])


async def _join(request: Request) -> StreamingResponse:
    return _stream("ok_join_without_metadata")


def _app() -> Starlette:
    return Starlette(
        routes=[
            Route("/runs/stream", _run, methods=["POST"]),
            Route("/threads/{thread_id}/runs/stream", _run, methods=["POST"]),
            Route("/threads/{thread_id}/runs/{run_id}/stream", _join, methods=["GET"]),
        ]
    )


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[StreamReport]]]:
    reports: list[StreamReport] = []
    guarded = StreamGuardMiddleware(
        _app(), protocol="auto", on_report=reports.append, metrics=False, logs={"enabled": False}
    )
    with serve(guarded) as with_guard, serve(_app()) as bare:
        yield with_guard, bare, reports


def _parts(url: str, fixture: str | None, thread: str | None = None) -> list[Any]:
    """What the SDK's client yields (event and data per part), or the error it raised."""
    client = langgraph_sdk.get_sync_client(url=url, api_key=None)
    got: list[Any] = []
    try:
        if fixture is None:
            parts = client.runs.join_stream("t-1", "r-1")
        else:
            parts = client.runs.stream(
                thread, fixture, input={"messages": []}, stream_mode=["values", "updates"]
            )
        for part in parts:
            got.append((part.event, part.data))
    except Exception as exc:  # the SDK's own errors are part of the result
        got.append(type(exc).__name__)
    return got


def _report(reports: list[StreamReport], before: int) -> StreamReport:
    wait_until(lambda: len(reports) > before, 5, "the stream's report")
    return reports[before]


@pytest.mark.parametrize("thread", [None, "t-1"])
@pytest.mark.parametrize("fixture", sorted(CASES))
def test_sdk_parts_are_the_same_and_the_report_names_the_rule(
    servers: tuple[str, str, list[StreamReport]], fixture: str, thread: str | None
) -> None:
    with_guard, bare, reports = servers
    before = len(reports)
    guarded = _parts(with_guard, fixture, thread)
    assert guarded == _parts(bare, fixture, thread)
    assert guarded
    report = _report(reports, before)
    outcome, rules = CASES[fixture]
    assert (report.protocol, report.protocol_source) == ("langgraph", "path")
    assert sorted(set(report.rules())) == rules
    if isinstance(guarded[-1], str):
        # The SDK raised mid-stream and closed the connection: whether the server had sent
        # its last frames by then is a race between two threads, so the stream ended either
        # way, and both are true reports of it.
        assert report.outcome.value in (outcome, "client_disconnect")
    else:
        assert report.outcome.value == outcome


def test_a_join_owes_no_metadata(servers: tuple[str, str, list[StreamReport]]) -> None:
    """``runs.join_stream`` (a GET) starts mid-run: clean, as the middleware reads the method."""
    with_guard, bare, reports = servers
    before = len(reports)
    guarded = _parts(with_guard, None)
    assert guarded == _parts(bare, None)
    report = _report(reports, before)
    assert (report.protocol, report.outcome.value, report.findings) == (
        "langgraph",
        "completed",
        (),
    )
