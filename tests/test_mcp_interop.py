"""The official MCP Python SDK, server and client, over Streamable HTTP through streamguard.

An ``MCPServer`` (``mcp`` 2.3) with a tool that streams progress notifications, one that
asks the client a question (an elicitation: a server request on the POST's stream) and one
that raises is served by uvicorn on loopback, its Starlette app behind
``StreamGuardMiddleware`` with ``protocol="auto"`` (the ``/mcp`` path decides), and driven
by the SDK's own ``Client``: once with the initialize handshake (2025-11-25: a session, the
standalone GET stream), once with an event store (a priming event and an id on every event),
once in the SDK's default mode (2026-07-28). Every call gives the client the same result
with and without streamguard, and every stream's report is clean.

A deliberately broken server, an ASGI layer between the middleware and the SDK's app that
rewrites one tool call's stream, is reported by the rule that names its fault: the response
dropped (``missing_terminal``), sent twice (``duplicate_terminal``), or the body held open
after it (``body_not_ended``); the client's result shows why the rule exists.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from streamguard import StreamGuardMiddleware, StreamReport
from tests.servers import serve, wait_until

mcp_client = pytest.importorskip("mcp.client", reason="the mcp SDK is a dev dependency")
mcp_server = pytest.importorskip("mcp.server.mcpserver", reason="the mcp SDK is a dev dependency")
mcp_http = pytest.importorskip("mcp.server.streamable_http")
mcp_types = pytest.importorskip("mcp_types")

from mcp.shared.exceptions import MCPError  # noqa: E402
from pydantic import BaseModel  # noqa: E402

pytestmark = pytest.mark.slow

ASGI = Callable[[Any, Any, Any], Awaitable[None]]
#: The grace after the last response before an open body is body_not_ended (and how long the
#: broken server holds it open: well past the grace, well within the test's patience).
GRACE_S, HELD_OPEN_S = 0.1, 0.6


class City(BaseModel):
    city: str


def make_server() -> Any:
    """The SDK's own server: progress, an elicitation and an exception."""
    server = mcp_server.MCPServer("interop")

    @server.tool()
    async def count(n: int, ctx: mcp_server.Context) -> str:
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
            await asyncio.sleep(0)
        return f"counted to {n}"

    @server.tool()
    async def ask(ctx: mcp_server.Context) -> str:
        answer = await ctx.elicit("Which city?", City)
        return f"weather in {answer.data.city}" if answer.action == "accept" else "declined"

    @server.tool()
    async def boom() -> str:
        raise RuntimeError("the backend went away")

    return server


class MemoryEventStore(mcp_http.EventStore):
    """Events kept in memory, ids from one counter: what resumability needs, and no more."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        found = [e for e in self.events if e[0] == last_event_id]
        if not found:
            return None
        stream_id = found[0][1]
        for event_id, stream, message in self.events[int(last_event_id) + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(mcp_http.EventMessage(message, event_id))
        return stream_id


class Reports:
    def __init__(self) -> None:
        self.all: list[StreamReport] = []

    def __call__(self, report: StreamReport) -> None:
        self.all.append(report)


async def elicitation(context: Any, params: Any) -> Any:
    return mcp_types.ElicitResult(action="accept", content={"city": "Paris"})


async def drive(url: str, mode: str) -> dict[str, Any]:
    """Call every tool as the SDK's client; what the client got, comparably."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    seen: dict[str, Any] = {}
    async with mcp_client.Client(
        url + "/mcp", mode=mode, elicitation_callback=elicitation
    ) as client:
        for name, arguments in (("count", {"n": 3}), ("ask", {}), ("boom", {})):
            if name == "ask" and mode != "legacy":
                continue  # the 2026-07-28 wire asks through input-required rounds instead
            try:
                result = await client.call_tool(name, arguments, progress_callback=on_progress)
            except MCPError as exc:
                seen[name] = ("error", exc.error.code)
                continue
            texts = [getattr(part, "text", None) for part in result.content]
            seen[name] = (result.is_error, texts)
    seen["progress"] = progress
    return seen


def run_client(app: ASGI, mode: str) -> dict[str, Any]:
    with serve(app, lifespan="on", log_level="critical") as url:
        return asyncio.run(drive(url, mode))


def guarded(app: ASGI, reports: Reports) -> StreamGuardMiddleware:
    return StreamGuardMiddleware(
        app,
        protocol="auto",
        metrics=False,
        on_report=reports,
        timers={"body_end_grace_s": GRACE_S},
        logs={"enabled": False},
    )


@pytest.mark.parametrize(
    ("mode", "event_store"),
    [("legacy", False), ("legacy", True), ("auto", False)],
    ids=["handshake", "handshake-resumable", "default-2026"],
)
def test_the_sdk_client_gets_the_same_answers_and_every_stream_is_clean(
    mode: str, event_store: bool
) -> None:
    """With and without streamguard the client sees the same results; the reports are clean."""

    def app() -> ASGI:
        options = {"event_store": MemoryEventStore(), "retry_interval": 1000} if event_store else {}
        built: ASGI = make_server().streamable_http_app(**options)
        return built

    bare = run_client(app(), mode)
    reports = Reports()
    watched = run_client(guarded(app(), reports), mode)
    assert watched == bare
    assert bare["count"] == (False, ["counted to 3"])
    assert bare["boom"][0] is True  # the SDK turns the exception into an isError result
    assert [p[0] for p in bare["progress"]] == [1, 2, 3]
    wait_until(lambda: reports.all, what="the reports")
    assert {report.protocol for report in reports.all} == {"mcp"}
    for report in reports.all:
        assert report.findings == (), report
        assert report.outcome.value in ("completed", "client_disconnect"), report
    if mode == "legacy":
        assert watched["ask"] == (False, ["weather in Paris"])
    # count's stream: three progress notifications and the result, after a priming event
    # (an id and empty data) when the server keeps events for resumption.
    assert max(report.events for report in reports.all) == (5 if event_store else 4)


# -- deliberately broken servers -------------------------------------------------------------


class Breaker:
    """Between the middleware and the SDK's app: rewrites the stream of one tool call."""

    def __init__(self, app: ASGI, fault: str, tool: str = "count") -> None:
        self.app, self.fault, self.tool = app, fault, tool

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        asked: list[bytes] = []

        async def peek() -> Any:
            message = await receive()
            asked.append(message.get("body", b""))
            return message

        async def rewrite(message: Any) -> None:
            if not self._targeted(b"".join(asked)) or message["type"] != "http.response.body":
                await send(message)
                return
            data = message.get("body", b"")
            response = b'"result"' in data and b"notifications/" not in data
            if response and self.fault == "missing":
                message = {**message, "body": b""}
            elif response and self.fault == "twice":
                message = {**message, "body": data + data}
            await send(message)
            if response and self.fault == "held_open":
                # Work after the answer that ignores the client: the body stays open, even
                # when the client (which stops reading at the response) has hung up.
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(HELD_OPEN_S)

        await self.app(scope, peek, rewrite)

    def _targeted(self, request: bytes) -> bool:
        try:
            message = json.loads(request)
        except ValueError:
            return False
        return bool(
            message.get("method") == "tools/call" and message["params"]["name"] == self.tool
        )


@pytest.mark.parametrize(
    ("fault", "rule"),
    [
        ("missing", "missing_terminal"),
        ("twice", "duplicate_terminal"),
        ("held_open", "body_not_ended"),
    ],
)
def test_a_broken_server_is_reported_by_the_rule_that_names_its_fault(
    fault: str, rule: str
) -> None:
    """Each fault is reported by its rule, on the broken call's stream only."""

    def app() -> ASGI:
        return Breaker(make_server().streamable_http_app(), fault)

    bare = run_client(app(), "legacy")
    reports = Reports()
    watched = run_client(guarded(app(), reports), "legacy")
    assert watched == bare
    if fault == "missing":
        # The stream ended without the answer: the SDK fails the call, the work is lost.
        assert bare["count"][0] == "error"
    else:
        # The SDK stops reading at the first response, so the client does not notice; a
        # reader that reads to the end (the TypeScript SDK) is left holding the connection
        # or reports a response to an unknown id.
        assert bare["count"] == (False, ["counted to 3"])
    wait_until(lambda: any(rule in r.rules() for r in reports.all), what=f"a {rule} report")
    broken = [r for r in reports.all if r.findings]
    assert len(broken) == 1
    assert broken[0].rules() == [rule]
