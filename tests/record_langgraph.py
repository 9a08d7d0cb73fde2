"""Record the healthy run streams of ``tests/fixtures/langgraph`` from a real LangGraph graph,
written by langgraph-api's own serializer (run by hand; not part of the suite).

The graph (``langgraph``) has a node that calls a fake chat model (``langchain-core``'s
``GenericFakeChatModel``) and writes a custom event, and a subgraph with one node (which
raises, for the failed run). It is streamed with ``subgraphs=True`` as langgraph-api streams
a run: ``metadata`` first, then each ``(namespace, mode, chunk)`` as the event
``mode|namespace``, ``error`` if it raises, ``end`` for the older servers' framing. The
frames are written by langgraph-api's own ``json_to_sse`` and ``json_dumpb``, loaded from
its wheel (the package's heavy imports, a database runtime among them, are stubbed)::

    pip download --no-deps -d /tmp/lg langgraph-api==0.16.7
    unzip -q -d /tmp/lg/x /tmp/lg/langgraph_api-0.16.7-py3-none-any.whl
    pip install langgraph==1.2.22 cloudpickle
    python -m tests.record_langgraph /tmp/lg/x/langgraph_api OUT_DIR

The broken fixtures are these recordings edited as each one's sidecar says.
"""

from __future__ import annotations

import asyncio
import importlib.util
import operator
import sys
import types
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph, add_messages


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]
    steps: Annotated[list[str], operator.add]


def _load_serializer(wheel: Path) -> Any:
    """langgraph-api's ``sse`` module, its package's heavy imports stubbed."""
    package = types.ModuleType("langgraph_api")
    package.__path__ = [str(wheel)]
    sys.modules["langgraph_api"] = package
    errors = types.ModuleType("langgraph_api.errors")
    errors.UserInterrupt = type("UserInterrupt", (Exception,), {})  # type: ignore[attr-defined]
    sys.modules["langgraph_api.errors"] = errors
    stubs = types.ModuleType("langgraph_api.asyncio")
    stubs.SimpleTaskGroup = stubs.aclosing = object  # type: ignore[attr-defined]
    sys.modules["langgraph_api.asyncio"] = stubs
    module = None
    for name in ("serde", "sse"):
        spec = importlib.util.spec_from_file_location(f"langgraph_api.{name}", wheel / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def _graph(fail: bool) -> Any:
    reply = AIMessage(content="Hello there, world", id="ai-1")
    model = GenericFakeChatModel(messages=iter([reply]))

    async def agent(state: State) -> dict[str, Any]:
        get_stream_writer()({"progress": "thinking"})
        return {"messages": [await model.ainvoke(state["messages"])], "steps": ["agent"]}

    def tool(state: State) -> dict[str, Any]:
        if fail:
            raise ValueError("tool exploded")
        return {"steps": ["tool"]}

    sub = StateGraph(State)
    sub.add_node("tool", tool)
    sub.add_edge(START, "tool")
    sub.add_edge("tool", END)
    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("tools", sub.compile())
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=InMemorySaver())


async def _run(sse: Any, modes: list[str], fail: bool = False, end: bool = False) -> bytes:
    out = [
        sse.json_to_sse(
            b"metadata", {"run_id": "1f0c6b5e-0000-4000-8000-000000000001", "attempt": 1}
        )
    ]
    config = {"configurable": {"thread_id": "t-1"}}
    start = {"messages": [HumanMessage(content="hi", id="h-1")]}
    try:
        async for ns, mode, chunk in _graph(fail).astream(
            start, config, stream_mode=modes, subgraphs=True
        ):
            name = mode if not ns else mode + "|" + "|".join(ns)
            out.append(sse.json_to_sse(name.encode(), chunk))
    except Exception as exc:
        out.append(sse.json_to_sse(b"error", exc))
    if end:
        out.append(sse.json_to_sse(b"end", None))
    return b"".join(out)


RUNS: dict[str, dict[str, Any]] = {
    "ok_values_updates_messages_custom_subgraph": {
        "modes": ["values", "updates", "messages", "custom"]
    },
    "ok_debug_tasks_checkpoints": {"modes": ["debug", "tasks", "checkpoints"]},
    "error_run_failed": {"modes": ["updates", "values"], "fail": True},
    "ok_legacy_end": {"modes": ["values"], "end": True},
}


async def _main(wheel: Path, out: Path) -> None:
    sse = _load_serializer(wheel)
    out.mkdir(parents=True, exist_ok=True)
    for name, run in RUNS.items():
        (out / f"{name}.sse").write_bytes(await _run(sse, **run))


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(_main(Path(sys.argv[1]), Path(sys.argv[2])))
