"""The official Cohere Python SDK (``cohere`` 7.3's ``ClientV2.chat_stream``) reads v2 chat
streams through streamguard.

A Starlette app answers ``POST /v2/chat`` with the fixture of ``tests/fixtures/cohere`` the
request's ``model`` names (each event validated as the SDK's own ``V2ChatStreamResponse``
when the fixtures were built), served by uvicorn on loopback twice: behind
``StreamGuardMiddleware`` with ``protocol="auto"`` (the path decides) and bare. The SDK
yields the same events with and without streamguard; healthy streams are reported clean,
broken ones by the rule they break.
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

cohere = pytest.importorskip("cohere", reason="the cohere SDK is a dev dependency")

pytestmark = pytest.mark.slow

#: Fixture -> the rules of its report (every stream's outcome is its body's end).
CASES: dict[str, list[str]] = {
    "ok_text": [],
    "ok_thinking_then_text": [],
    "ok_tool_plan_and_calls": [],
    "ok_citations": [],
    "ok_max_tokens": [],
    "ok_finish_reason_error": [],
    "ok_gateway_done_crlf_keepalive": [],
    "ok_debug_and_empty_data": [],
    "missing_terminal_truncated_mid_block": ["missing_terminal"],
    "duplicate_terminal": ["duplicate_terminal"],
    "event_after_terminal": ["event_after_terminal"],
    "block_not_started": ["block_not_started"],
    "block_index_out_of_order": ["block_index_out_of_order"],
    "block_not_stopped": ["block_not_stopped"],
    "missing_finish_reason": ["missing_finish_reason"],
    "invalid_json": ["invalid_json"],
    "ok_message_end_without_usage": [],
    "schema_mismatch-delta_not_object": ["schema_mismatch"],
    "missing_terminal-done_before_message_end": ["event_after_terminal", "missing_terminal"],
    "schema_mismatch_index_not_integer": ["schema_mismatch"],
    "schema_mismatch_content_text_not_string": ["schema_mismatch"],
    "schema_mismatch_delta_message_not_object": ["schema_mismatch"],
    "schema_mismatch_tool_call_type_not_function": ["schema_mismatch"],
    "schema_mismatch_usage_tokens_not_number": ["schema_mismatch"],
    "ok_index_as_digit_string": [],
    "ok_usage_numbers_as_strings": [],
}


async def _chat(request: Request) -> StreamingResponse:
    name = (await request.json())["model"]
    body = (FIXTURES / "cohere" / f"{name}.sse").read_bytes()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 97):  # frames cut anywhere, as a network does
            yield body[start : start + 97]
            await asyncio.sleep(0)

    return StreamingResponse(pieces(), media_type="text/event-stream")


def _app() -> Starlette:
    return Starlette(routes=[Route("/v2/chat", _chat, methods=["POST"])])


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[StreamReport]]]:
    reports: list[StreamReport] = []
    guarded = StreamGuardMiddleware(
        _app(), protocol="auto", on_report=reports.append, metrics=False, logs={"enabled": False}
    )
    with serve(guarded) as with_guard, serve(_app()) as bare:
        yield with_guard, bare, reports


def _events(url: str, fixture: str) -> list[Any]:
    """The events the SDK yields (as plain data), or the error it raised."""
    client = cohere.ClientV2(api_key="test-key", base_url=url)
    got: list[Any] = []
    try:
        for event in client.chat_stream(
            model=fixture, messages=[{"role": "user", "content": "hi"}]
        ):
            got.append(event.dict())
    except Exception as exc:  # the SDK's own errors are part of the result
        got.append(type(exc).__name__)
    return got


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_sdk_events_are_the_same_and_the_report_names_the_rule(
    servers: tuple[str, str, list[StreamReport]], fixture: str
) -> None:
    with_guard, bare, reports = servers
    before = len(reports)
    guarded = _events(with_guard, fixture)
    assert guarded == _events(bare, fixture)
    assert guarded
    wait_until(lambda: len(reports) > before, 5, "the stream's report")
    report = reports[before]
    assert (report.protocol, report.protocol_source) == ("cohere", "path")
    assert sorted(set(report.rules())) == CASES[fixture]
