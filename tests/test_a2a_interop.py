"""The official A2A Python SDK (``a2a-sdk`` 1.3), server and client, through streamguard.

The SDK's own Starlette app (``tests/a2a_app.py``: an agent that streams a task with artifact
chunks, asks for input, answers with a message, fails, or raises) is served by uvicorn on
loopback twice, once behind ``StreamGuardMiddleware`` with ``protocol="auto"`` (the SDK's
endpoint is ``/``: the first event decides) and once bare, and driven by the SDK's own
``Client`` over JSON-RPC, on the 1.0 wire and, through the SDK's compatibility transport, on
the 0.3 wire. Every call gives the client the same result with and without streamguard, and
every healthy stream's report is clean.

The same servers also stream the broken fixtures of ``tests/fixtures/a2a`` (the request's id
written into each event, as a server would): the client's result is again the same with and
without streamguard, and the report names the rule the fixture breaks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from streamguard import StreamGuardMiddleware, StreamReport
from tests.servers import serve, wait_until

from .sse_fixtures import FIXTURES

pytest.importorskip("a2a.server.routes", reason="a2a-sdk is a dev dependency")
httpx = pytest.importorskip("httpx")

from a2a.client import ClientConfig, ClientFactory  # noqa: E402
from a2a.types.a2a_pb2 import AgentInterface, Message, Part, Role, SendMessageRequest  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from tests.a2a_app import agent_card, build_app  # noqa: E402

pytestmark = pytest.mark.slow

#: Healthy runs: the user's text, and the outcome its stream earns.
HEALTHY = {
    "text": "completed",
    "input": "completed",
    "message": "completed",
    "fail": "completed",
    "reject": "completed",
    "boom": "error_event",
}
#: Broken fixtures, the wire they speak, and the rules their report carries.
BROKEN = {
    "missing_terminal_closed_while_working": ("1.0", ["missing_terminal"]),
    "event_after_terminal": ("1.0", ["event_after_terminal"]),
    "terminal_state_left": ("1.0", ["duplicate_terminal", "terminal_state_left"]),
    "warn_response_id_mismatch": ("1.0", ["response_id_mismatch"]),
    "task_changed_context": ("1.0", ["task_changed"]),
    "artifact_not_started": ("1.0", ["artifact_not_started"]),
    "invalid_json": ("1.0", ["invalid_json"]),
    "schema_mismatch_unknown_state": ("1.0", ["schema_mismatch"]),
    "duplicate_terminal": ("0.3", ["duplicate_terminal"]),
    "task_changed": ("0.3", ["task_changed"]),
    "schema_mismatch": ("0.3", ["schema_mismatch"]),
}


async def _fixture(request: Request) -> StreamingResponse:
    """A fixture's body, answering the live request: the fixture request's id in each event
    becomes the live request's (any other id stays as the fixture has it)."""
    name = request.path_params["fixture"]
    live = (await request.json())["id"]
    recorded = json.loads((FIXTURES / "a2a" / f"{name}.request.json").read_text())["id"]
    text = (FIXTURES / "a2a" / f"{name}.sse").read_bytes().decode()
    for spaced in (", ", ","):
        for colon in (": ", ":"):
            old = f'"id"{colon}{json.dumps(recorded)}{spaced}'
            text = text.replace(old, f'"id"{colon}{json.dumps(live)}{spaced}')

    async def chunks() -> AsyncIterator[bytes]:
        for frame in text.split("\r\n\r\n"):
            if frame:
                yield (frame + "\r\n\r\n").encode()
                await asyncio.sleep(0)

    return StreamingResponse(chunks(), media_type="text/event-stream")


def _app() -> Any:
    app = build_app()
    app.router.routes.append(Route("/fixture/{fixture}", _fixture, methods=["POST"]))
    return app


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str, list[StreamReport]]]:
    reports: list[StreamReport] = []
    guarded = StreamGuardMiddleware(
        _app(), protocol="auto", on_report=reports.append, metrics=False, logs={"enabled": False}
    )
    with serve(guarded) as with_guard, serve(_app()) as bare:
        yield with_guard, bare, reports


def _summary(response: Any) -> dict[str, Any]:
    """What the client got, without the ids and times the agent draws anew on every run."""
    event = MessageToDict(response)
    for body in event.values():
        for key in ("id", "taskId", "contextId", "messageId"):
            body.pop(key, None)
        body.get("status", {}).pop("timestamp", None)
        body.get("status", {}).get("message", {}).clear()
        body.pop("history", None)
    return event


async def _run(url: str, text: str, version: str, path: str = "/") -> list[Any]:
    """Send ``text`` with the SDK's client; the events it yields, or the error it raised."""
    card = agent_card(url + path)
    card.supported_interfaces[0].CopyFrom(
        AgentInterface(protocol_binding="JSONRPC", url=url + path, protocol_version=version)
    )
    async with httpx.AsyncClient(timeout=10) as http:
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        message = Message(message_id=f"m-{text}", role=Role.ROLE_USER, parts=[Part(text=text)])
        got: list[Any] = []
        try:
            async for response in client.send_message(SendMessageRequest(message=message)):
                got.append(_summary(response))
        except Exception as exc:  # the SDK's own errors are part of the result
            got.append(type(exc).__name__)
        return got


def _report(reports: list[StreamReport], before: int) -> StreamReport:
    wait_until(lambda: len(reports) > before, 5, "the stream's report")
    return reports[before]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("text", sorted(HEALTHY))
def test_sdk_results_are_the_same_and_the_report_clean(
    servers: tuple[str, str, list[StreamReport]], text: str, version: str
) -> None:
    """The client gets the same events with and without streamguard; the report is clean."""
    with_guard, bare, reports = servers
    before = len(reports)
    guarded = asyncio.run(_run(with_guard, text, version))
    assert guarded == asyncio.run(_run(bare, text, version))
    assert guarded, "the client got nothing"
    report = _report(reports, before)
    assert (report.protocol, report.protocol_source) == ("a2a", "event")
    assert (report.outcome.value, report.findings) == (HEALTHY[text], ())


@pytest.mark.parametrize("fixture", sorted(BROKEN))
def test_broken_streams_are_named_by_their_rule(
    servers: tuple[str, str, list[StreamReport]], fixture: str
) -> None:
    """A broken stream reaches the client as it would without streamguard, and its report
    names the rule it breaks."""
    with_guard, bare, reports = servers
    version, rules = BROKEN[fixture]
    before = len(reports)
    path = f"/fixture/{fixture}"
    guarded = asyncio.run(_run(with_guard, "text", version, path))
    assert guarded == asyncio.run(_run(bare, "text", version, path))
    report = _report(reports, before)
    assert (report.protocol, sorted(set(report.rules()))) == ("a2a", rules)
