"""The agent protocols' official clients read what streamguard reports clean, and fail on
what it reports broken.

Two FastAPI apps run under uvicorn on loopback, each with and without
``StreamGuardMiddleware``: one streams the AI SDK UI message stream (read by the ``ai``
package's own ``DefaultChatTransport`` and ``readUIMessageStream`` under Node), one streams
AG-UI events built with ``ag-ui-protocol``'s ``EventEncoder`` (run by ``@ag-ui/client``'s
``HttpAgent`` under Node, and parsed with the Python package's event models). Healthy
streams give the client the same result with and without streamguard and a clean report;
each broken variant is reported by the rule that names it, and the client's result shows
why the rule exists.

Node and the packages in ``tests/node`` (``npm ci --prefix tests/node``, which ``.ci/run``
does) are needed; the tests skip only when ``node`` is missing and
``STREAMGUARD_REQUIRE_NODE`` is unset.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from streamguard import StreamGuardMiddleware, StreamReport
from tests.servers import serve, wait_until

ag_ui_core = pytest.importorskip("ag_ui.core", reason="ag-ui-protocol is a dev dependency")
ag_ui_encoder = pytest.importorskip("ag_ui.encoder", reason="ag-ui-protocol is a dev dependency")

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node")
if NODE is None and not os.environ.get("STREAMGUARD_REQUIRE_NODE"):
    pytest.skip("node is not installed (STREAMGUARD_REQUIRE_NODE unset)", allow_module_level=True)

pytestmark = pytest.mark.slow


def run_node(script: str, urls: list[str]) -> list[dict[str, Any]]:
    """Run ``tests/node/<script>`` on ``urls``; one JSON result per URL."""
    assert NODE is not None, "STREAMGUARD_REQUIRE_NODE is set but node is not installed"
    assert (NODE_DIR / "node_modules").is_dir(), (
        "the Node packages are not installed: run `npm ci --prefix tests/node`"
    )
    done = subprocess.run(
        [NODE, str(NODE_DIR / script), *urls],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=NODE_DIR,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(urls), done.stdout[-2000:] + done.stderr[-2000:]
    return results


class Reports:
    """Reports by request path, as the middleware hands them over from the server thread."""

    def __init__(self) -> None:
        self.by_path: dict[str, StreamReport] = {}

    def __call__(self, report: StreamReport) -> None:
        self.by_path[report.path or "?"] = report

    def get(self, path: str) -> StreamReport:
        wait_until(lambda: path in self.by_path, what=f"the report of {path}")
        return self.by_path[path]


def sse(chunks: list[Any], eol: str = "\n") -> list[bytes]:
    def data(chunk: Any) -> str:
        return chunk if isinstance(chunk, str) else json.dumps(chunk, separators=(",", ":"))

    return [f"data: {data(c)}{eol}{eol}".encode() for c in chunks]


async def paced(frames: list[bytes]) -> AsyncIterator[bytes]:
    for frame in frames:
        yield frame
        await asyncio.sleep(0)


class HeldUntilTheBodyEnds:
    """Passes a response on to the server only once the app has ended its body, for the
    paths ``held`` names: what the app (and streamguard inside this wrapper) sends stays
    paced, and the client receives it all at once, after the end.

    The ai package's reader stops at the first chunk it rejects and closes the connection.
    Served as sent, whether the app had sent the rest by then (outcome ``completed``) or
    the close came first (``client_disconnect``, the rejected chunk the last one sent)
    would depend on the machine's load. Held, a body the reader rejects has ended before
    the reader sees it: the outcome is the body's own, and the reader rejects the same
    chunk with the same error.
    """

    def __init__(self, app: Any, held: set[str]) -> None:
        self.app = app
        self.held = held

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] not in self.held:
            await self.app(scope, receive, send)
            return
        messages: list[Any] = []

        async def hold(message: Any) -> None:
            messages.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                for held_message in messages:
                    await send(held_message)
                messages.clear()

        await self.app(scope, receive, hold)


# -- the AI SDK UI message stream -----------------------------------------------------------

UI_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache"}
CALL = "call_fJdQDqnXeGxTmr4E3YPSR7Ar"


def ui_healthy() -> list[Any]:
    """What streamText's toUIMessageStream sends for a tool call and an answer."""
    return [
        {"type": "start", "messageId": "msg_1"},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "rs_1"},
        {"type": "reasoning-delta", "id": "rs_1", "delta": "Look up the weather."},
        {"type": "reasoning-end", "id": "rs_1"},
        {"type": "tool-input-start", "toolCallId": CALL, "toolName": "getWeather"},
        {"type": "tool-input-delta", "toolCallId": CALL, "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": CALL, "inputTextDelta": '"Paris"}'},
        {
            "type": "tool-input-available",
            "toolCallId": CALL,
            "toolName": "getWeather",
            "input": {"city": "Paris"},
        },
        {"type": "tool-output-available", "toolCallId": CALL, "output": {"weather": "sunny"}},
        {"type": "finish-step"},
        {"type": "start-step"},
        {"type": "text-start", "id": "txt_1"},
        {"type": "text-delta", "id": "txt_1", "delta": "It is"},
        {"type": "text-delta", "id": "txt_1", "delta": " sunny in Paris."},
        {"type": "text-end", "id": "txt_1"},
        {"type": "data-weather", "id": "w1", "data": {"city": "Paris", "weather": "sunny"}},
        {"type": "source-url", "sourceId": "s1", "url": "https://example.com/paris"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
        "[DONE]",
    ]


def ui_variant(name: str) -> list[bytes]:
    chunks = ui_healthy()
    if name == "healthy":
        return sse(chunks)
    if name == "healthy_crlf":  # eventsource-parser reads CR LF framing
        return sse(chunks, "\r\n")
    if name == "delta_before_start":
        return sse([chunks[0], {"type": "text-delta", "id": "txt_1", "delta": "Hi"}, *chunks[1:]])
    if name == "unknown_type":
        return sse([chunks[0], {"type": "progress", "percent": 50}, *chunks[1:]])
    if name == "null_optional":
        return sse([{"type": "start", "messageId": None}, *chunks[1:]])
    if name == "no_done":
        return sse(chunks[:-1])
    if name == "error_chunk":
        return sse([*chunks[:3], {"type": "error", "errorText": "An error occurred."}, "[DONE]"])
    raise KeyError(name)


#: variant -> (the rules streamguard reports, whether the official reader succeeds).
UI_VARIANTS: dict[str, tuple[list[str], bool]] = {
    "healthy": ([], True),
    "healthy_crlf": ([], True),
    "delta_before_start": (["id_not_open"], False),
    "unknown_type": (["unknown_chunk_type"], False),
    "null_optional": (["schema_mismatch"], False),
    "no_done": (["missing_terminal"], True),  # the reader does not need [DONE]
    "error_chunk": ([], False),  # the in-band error: outcome error_event, the chat fails
}


def ui_app() -> FastAPI:
    app = FastAPI()

    @app.post("/api/chat/{variant}")
    async def chat(variant: str, request: Request) -> StreamingResponse:
        body = await request.json()
        assert body["messages"][0]["parts"][0]["text"] == "Weather in Paris?"
        return StreamingResponse(
            paced(ui_variant(variant)), media_type="text/event-stream", headers=UI_HEADERS
        )

    return app


@pytest.fixture(scope="module")
def ui_results() -> Iterator[tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports]]:
    reports = Reports()
    guarded = StreamGuardMiddleware(
        ui_app(), protocol="ai_sdk_ui", on_report=reports, metrics=False, logs={"enabled": False}
    )
    rejected = {f"/api/chat/{variant}" for variant, (_, ok) in UI_VARIANTS.items() if not ok}
    with (
        serve(HeldUntilTheBodyEnds(guarded, rejected)) as with_guard,
        serve(HeldUntilTheBodyEnds(ui_app(), rejected)) as bare,
    ):
        paths = [f"/api/chat/{variant}" for variant in UI_VARIANTS]
        results = run_node(
            "ai_sdk_read.mjs", [with_guard + p for p in paths] + [bare + p for p in paths]
        )
        n = len(paths)
        guarded_results = dict(zip(UI_VARIANTS, results[:n], strict=True))
        bare_results = dict(zip(UI_VARIANTS, results[n:], strict=True))
        for path in paths:
            reports.get(path)
        yield guarded_results, bare_results, reports


@pytest.mark.parametrize("variant", sorted(UI_VARIANTS))
def test_ai_sdk_reader_and_streamguard_agree(
    variant: str,
    ui_results: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports],
) -> None:
    """The ai package reads the same message with and without streamguard; the report names
    exactly the broken variant's rule, and the reader fails where the rule says it does."""
    guarded, bare, reports = ui_results
    rules, reader_ok = UI_VARIANTS[variant]
    if reader_ok:
        assert guarded[variant] == bare[variant]
    else:  # how far a failed read got before the error depends on timing
        assert guarded[variant]["error"] == bare[variant]["error"]
    assert guarded[variant]["ok"] is reader_ok, guarded[variant]
    report = reports.get(f"/api/chat/{variant}")
    assert (report.protocol, sorted(set(report.rules()))) == ("ai_sdk_ui", rules)
    expected_outcome = {"no_done": "unclosed", "error_chunk": "error_event"}.get(
        variant, "completed"
    )
    assert report.outcome.value == expected_outcome


def test_ai_sdk_reader_assembles_the_healthy_message(
    ui_results: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports],
) -> None:
    """The healthy stream becomes one assistant message with its reasoning, tool call, text,
    data part and source, as useChat shows it."""
    message = ui_results[0]["healthy"]["message"]
    assert message["id"] == "msg_1"
    kinds = [part["type"] for part in message["parts"]]
    assert kinds == [
        "step-start",
        "reasoning",
        "tool-getWeather",
        "step-start",
        "text",
        "data-weather",
        "source-url",
    ]
    text = next(part for part in message["parts"] if part["type"] == "text")
    assert (text["text"], text["state"]) == ("It is sunny in Paris.", "done")
    tool = next(part for part in message["parts"] if part["type"] == "tool-getWeather")
    assert (tool["state"], tool["output"]) == ("output-available", {"weather": "sunny"})
    assert ui_results[0]["healthy_crlf"]["message"] == message


# -- AG-UI ---------------------------------------------------------------------------------


def ag_healthy(thread: str, run: str) -> list[Any]:
    core = ag_ui_core
    return [
        core.RunStartedEvent(thread_id=thread, run_id=run),
        core.StateSnapshotEvent(snapshot={"count": 0, "todos": []}),
        core.StepStartedEvent(step_name="answer"),
        core.TextMessageStartEvent(message_id="msg_1", role="assistant"),
        core.TextMessageContentEvent(message_id="msg_1", delta="Adding "),
        core.TextMessageContentEvent(message_id="msg_1", delta="milk."),
        core.TextMessageEndEvent(message_id="msg_1"),
        core.ToolCallStartEvent(
            tool_call_id="call_1", tool_call_name="add_todo", parent_message_id="msg_1"
        ),
        core.ToolCallArgsEvent(tool_call_id="call_1", delta='{"title":"milk"}'),
        core.ToolCallEndEvent(tool_call_id="call_1"),
        core.ToolCallResultEvent(message_id="msg_2", tool_call_id="call_1", content="added"),
        core.StateDeltaEvent(
            delta=[
                {"op": "replace", "path": "/count", "value": 1},
                {"op": "add", "path": "/todos/-", "value": "milk"},
            ]
        ),
        core.StepFinishedEvent(step_name="answer"),
        core.RunFinishedEvent(thread_id=thread, run_id=run),
    ]


def ag_variant(name: str, thread: str, run: str) -> list[Any]:
    core = ag_ui_core
    events = ag_healthy(thread, run)
    if name in ("healthy", "crlf"):
        return events
    if name == "content_before_start":
        return [events[0], core.TextMessageContentEvent(message_id="msg_0", delta="x"), *events[1:]]
    if name == "unclosed_message":
        return [*events[:-1], core.TextMessageStartEvent(message_id="msg_3"), events[-1]]
    if name == "no_run_started":
        return events[1:]
    if name == "bad_patch":
        bad = {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "count", "value": 9}]}
        return [*events[:-2], bad, *events[-2:]]
    if name == "unknown_type":
        return [*events[:2], {"type": "ON_CHAIN_START", "name": "graph"}, *events[2:]]
    raise KeyError(name)


#: variant -> (the rules streamguard reports, whether the official client's run succeeds).
AG_VARIANTS: dict[str, tuple[list[str], bool]] = {
    "healthy": ([], True),
    "crlf": (["crlf_framing"], False),
    "content_before_start": (["id_not_open"], False),
    "unclosed_message": (["id_not_closed"], False),
    "no_run_started": (["missing_run_started"], False),
    "bad_patch": (["invalid_state_patch"], False),
    "unknown_type": (["unknown_event_type"], True),  # the client drops the event
}


def ag_app() -> FastAPI:
    app = FastAPI()

    @app.post("/agent/{variant}")
    async def agent(variant: str, request: Request) -> StreamingResponse:
        run_input = ag_ui_core.RunAgentInput.model_validate(await request.json())
        encoder = ag_ui_encoder.EventEncoder(accept=request.headers.get("accept"))
        eol = "\r\n" if variant == "crlf" else "\n"
        frames = [
            (
                encoder.encode(event)
                if not isinstance(event, dict)
                else f"data: {json.dumps(event)}\n\n"
            )
            .replace("\n", eol)
            .encode()
            for event in ag_variant(variant, run_input.thread_id, run_input.run_id)
        ]
        return StreamingResponse(paced(frames), media_type=encoder.get_content_type())

    return app


@pytest.fixture(scope="module")
def ag_results() -> Iterator[tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports]]:
    reports = Reports()
    guarded = StreamGuardMiddleware(
        ag_app(), protocol="ag_ui", on_report=reports, metrics=False, logs={"enabled": False}
    )
    with serve(guarded) as with_guard, serve(ag_app()) as bare:
        paths = [f"/agent/{variant}" for variant in AG_VARIANTS]
        results = run_node(
            "ag_ui_run.mjs", [with_guard + p for p in paths] + [bare + p for p in paths]
        )
        n = len(paths)
        for path in paths:
            reports.get(path)
        yield (
            dict(zip(AG_VARIANTS, results[:n], strict=True)),
            dict(zip(AG_VARIANTS, results[n:], strict=True)),
            reports,
        )


@pytest.mark.parametrize("variant", sorted(AG_VARIANTS))
def test_ag_ui_client_and_streamguard_agree(
    variant: str,
    ag_results: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports],
) -> None:
    """@ag-ui/client gets the same run with and without streamguard; the report names exactly
    the broken variant's rule, and the client fails where the rule says it does."""
    guarded, bare, reports = ag_results
    rules, client_ok = AG_VARIANTS[variant]
    if client_ok:
        assert guarded[variant] == bare[variant]
    else:  # how much a failed run applied before the error depends on timing
        assert guarded[variant]["error"] == bare[variant]["error"]
    assert guarded[variant]["ok"] is client_ok, guarded[variant]
    report = reports.get(f"/agent/{variant}")
    assert (report.protocol, sorted(set(report.rules()))) == ("ag_ui", rules)
    assert report.outcome.value == "completed"


def test_ag_ui_client_applies_the_healthy_run(
    ag_results: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], Reports],
) -> None:
    """The healthy run leaves the client with the text, the tool call, its result and the
    patched state."""
    healthy = ag_results[0]["healthy"]
    assert healthy["state"] == {"count": 1, "todos": ["milk"]}
    assistant = next(m for m in healthy["messages"] if m["id"] == "msg_1")
    assert assistant["content"] == "Adding milk."
    assert assistant["toolCalls"][0]["function"] == {
        "name": "add_todo",
        "arguments": '{"title":"milk"}',
    }
    assert any(m.get("toolCallId") == "call_1" for m in healthy["messages"])


def test_the_python_event_models_read_the_checked_stream() -> None:
    """Every event of the healthy stream, read through streamguard, validates with
    ag-ui-protocol's own models (``ag_ui.core.Event``), and the report is clean."""
    from pydantic import TypeAdapter

    reports = Reports()
    guarded = StreamGuardMiddleware(
        ag_app(), protocol="ag_ui", on_report=reports, metrics=False, logs={"enabled": False}
    )
    run_input = {
        "threadId": "thread_1",
        "runId": "run_1",
        "state": {},
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with serve(guarded) as url:
        body = httpx.post(url + "/agent/healthy", json=run_input, timeout=30).text
    events = [line.removeprefix("data: ") for line in body.split("\n") if line.startswith("data: ")]
    adapter: TypeAdapter[Any] = TypeAdapter(ag_ui_core.Event)
    parsed = [adapter.validate_json(event) for event in events]
    assert [event.type.value for event in parsed][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert len(parsed) == len(ag_healthy("t", "r"))
    report = reports.get("/agent/healthy")
    assert (report.outcome.value, report.findings) == ("completed", ())
