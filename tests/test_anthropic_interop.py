"""The official anthropic SDK reads healthy streams that streamguard reports clean."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport
from tests.helpers import fixture_endpoint
from tests.servers import serve, wait_until

anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is a dev dependency")

#: Healthy fixtures that end with message_stop (the error ones make the SDK raise, by design)
#: and the text the SDK's final message holds for each, block by block.
HEALTHY: dict[str, tuple[str, list[str]]] = {
    "ok_text_end_turn": ("end_turn", ["text"]),
    "ok_ping_before_message_start": ("end_turn", ["text"]),
    "ok_refusal_zero_blocks": ("refusal", []),
    "ok_tool_use_empty_first_json_delta": ("tool_use", ["text", "tool_use"]),
    "ok_thinking_then_text": ("end_turn", ["thinking", "text"]),
    "ok_redacted_thinking_no_deltas": ("end_turn", ["redacted_thinking", "text"]),
    "ok_web_search_server_tool": (
        "end_turn",
        ["server_tool_use", "web_search_tool_result", "text"],
    ),
    "ok_stop_max_tokens": ("max_tokens", ["text"]),
    "ok_stop_pause_turn": ("pause_turn", ["server_tool_use"]),
    "ok_stop_model_context_window_exceeded": ("model_context_window_exceeded", ["text"]),
}


def _app(reports: list[StreamReport]) -> StreamGuardMiddleware:
    messages = fixture_endpoint("anthropic", headers={"request-id": "req_test"})
    app = Starlette(routes=[Route("/{fixture}/v1/messages", messages, methods=["POST"])])
    return StreamGuardMiddleware(app, protocol="anthropic", on_report=reports.append)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[StreamReport]]]:
    reports: list[StreamReport] = []
    with serve(_app(reports)) as url:
        yield url, reports


@pytest.mark.parametrize("fixture", sorted(HEALTHY))
def test_sdk_gets_the_final_message_and_streamguard_reports_clean(
    server: tuple[str, list[StreamReport]], fixture: str
) -> None:
    """The SDK's messages.stream() assembles the final message; the report is clean."""
    url, reports = server
    before = len(reports)
    client = anthropic.Anthropic(api_key="test-key", base_url=f"{url}/{fixture}", max_retries=0)
    with client.messages.stream(
        model="streamguard-test-model",  # any name: the server is ours
        max_tokens=64,
        messages=[{"role": "user", "content": "Hello"}],
    ) as stream:
        message = stream.get_final_message()
    stop_reason, block_types = HEALTHY[fixture]
    assert message.stop_reason == stop_reason
    assert [block.type for block in message.content] == block_types
    wait_until(lambda: len(reports) >= before + 1, 5)
    report = reports[before]
    assert (report.protocol, report.outcome.value, report.findings) == (
        "anthropic",
        "completed",
        (),
    )
    assert report.path == f"/{fixture}/v1/messages"
