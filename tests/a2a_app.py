"""An A2A agent served by the official ``a2a-sdk`` (its Starlette JSON-RPC routes, v1.0 and
the v0.3 compatibility layer), for the A2A interop test and to record the fixtures of
``tests/fixtures/a2a`` (``python -m tests.a2a_app record``).

The agent does what the user's text names: ``text`` streams a task (working, two artifact
chunks, completed), ``input`` asks for input, ``message`` answers with one message, ``fail``
fails the task, ``reject`` rejects it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
)
from starlette.applications import Starlette

__all__ = ["RPC_PATH", "ScriptedAgent", "agent_card", "build_app"]

#: Where the JSON-RPC endpoint is mounted.
RPC_PATH = "/"


class ScriptedAgent(AgentExecutor):
    """Streams what the user's text names (see the module docstring)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        message = context.message
        assert message is not None
        if text == "message":
            reply = new_text_message("hello", role=Role.ROLE_AGENT)
            reply.context_id = message.context_id or "ctx-1"
            await event_queue.enqueue_event(reply)
            return
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if text == "input":
            await updater.requires_input(
                new_text_message("which city?", context_id=task.context_id, task_id=task.id)
            )
            return
        if text == "fail":
            await updater.failed()
            return
        if text == "reject":
            await updater.reject()
            return
        if text == "boom":
            raise RuntimeError("the agent failed")
        await updater.add_artifact([new_text_part("Hello, ")], artifact_id="a-1", name="answer")
        await asyncio.sleep(0)
        await updater.add_artifact(
            [new_text_part("world")], artifact_id="a-1", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="scripted",
        description="streams what the text names",
        version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url)],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="s", name="s", description="s", tags=["t"])],
    )


def build_app(url: str = "http://127.0.0.1/") -> Starlette:
    """The agent's Starlette app: the agent card and the JSON-RPC endpoint (v0.3 methods
    too)."""
    card = agent_card(url)
    handler = DefaultRequestHandler(
        agent_executor=ScriptedAgent(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes)


def request_v1(text: str, request_id: Any = 1) -> dict[str, Any]:
    """A ``SendStreamingMessage`` request (A2A 1.0)."""
    message = {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }


def request_v03(text: str, request_id: Any = 1) -> dict[str, Any]:
    """A ``message/stream`` request (A2A 0.3)."""
    message = {
        "kind": "message",
        "messageId": f"m-{text}",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "message/stream",
        "params": {"message": message},
    }


def _record(directory: Path) -> None:  # pragma: no cover - run by hand to refresh the fixtures
    import httpx

    from streamguard.testing import serve

    cases = {
        "ok_v1_task_artifact_chunks": request_v1("text", "req-1"),
        "ok_v1_input_required": request_v1("input", 7),
        "ok_v1_message_only": request_v1("message", 8),
        "ok_v1_failed": request_v1("fail", 9),
        "error_v1_agent_raised": request_v1("boom", 13),
        "ok_v03_task_artifact_chunks": request_v03("text", "req-2"),
        "ok_v03_input_required": request_v03("input", 10),
        "ok_v03_message_only": request_v03("message", 11),
        "ok_v03_rejected": request_v03("reject", 12),
    }
    with serve(build_app()) as url, httpx.Client(base_url=url) as client:
        for name, request in cases.items():
            version = "0.3" if "_v03_" in name else "1.0"
            body = client.post(RPC_PATH, json=request, headers={"A2A-Version": version}).content
            (directory / f"{name}.sse").write_bytes(body)
            (directory / f"{name}.request.json").write_text(json.dumps(request, indent=2) + "\n")
            print(name, len(body))


if __name__ == "__main__":  # pragma: no cover
    _record(Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/a2a-capture"))
