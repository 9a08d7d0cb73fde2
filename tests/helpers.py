"""What several test modules need alike, so that none keeps its own copy: a settable clock,
time that passes only when an app pauses, a free port, memory probes, SSE frames and each
protocol's stream builders, and the endpoint that serves fixtures to the official SDKs.

Fixture files are read through ``tests.sse_fixtures``; ways to cut bytes into chunks are in
``tests.chunking``.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import json
import socket
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse

from streamguard.protocols.openai_chat import OpenAIChatChecker
from streamguard.protocols.openai_responses import OpenAIResponsesChecker
from streamguard.report import Finding
from streamguard.sse import Event, EventParser

from .chunking import cut
from .sse_fixtures import FIXTURES

__all__ = [
    "ANTHROPIC_DELTA",
    "ANTHROPIC_START",
    "ANTHROPIC_STOP",
    "HOSTILE_DELTA",
    "HOSTILE_ITEMS",
    "SDK_CUTS",
    "FakeClock",
    "ResponsesFeeder",
    "anthropic_stream",
    "break_monitors",
    "chat_call",
    "chat_choice",
    "chat_chunk",
    "chat_event",
    "chat_tool_calls_of_60_kb",
    "fixture_endpoint",
    "frame",
    "free_port",
    "gemini_chunk",
    "gemini_text",
    "held_memory",
    "parse",
    "peak_memory",
    "run_checker",
    "source_docstring",
    "source_of",
    "ticking",
]

T = TypeVar("T")

#: Chunk sizes (cycled) a fixture is served in to the official SDKs, so that event
#: boundaries fall anywhere.
SDK_CUTS = [7, 64, 1, 200, 33]


class FakeClock:
    """A clock that advances only when told to (set ``now``)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class AppTime(FakeClock):
    """Time that passes only when the app pauses: the middleware's ``clock=`` and the
    ``sleep`` an app's pauses go through (the example apps take one).

    Under a real server a timer rule (``stalled``, ``body_not_ended``, ``buffered_flush``)
    then judges the pauses the app was written with, and never the time a loaded machine
    took to run the code between them: a test's verdict no longer depends on the machine's
    speed. The server still runs for real; each pause yields to the event loop once.
    """

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def ticking(step: float) -> Callable[[], float]:
    """A clock that moves ``step`` seconds each time it is read (for the commands' budget
    clock, ``cli._monotonic``): a budget is spent after a count of readings, whatever the
    real time."""
    now = [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def peak_memory(work: Callable[[], T]) -> tuple[T, int]:
    """``work()``'s result and the peak of traced memory while it ran."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def held_memory(work: Callable[[], T]) -> tuple[T, int]:
    """``work()``'s result and the traced memory it still holds when it returns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        return result, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def frame(data: object, event: str | None = None) -> bytes:
    """One SSE event: ``event:`` when named, then ``data:`` (a string as is, else its JSON)."""
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


def anthropic_stream(*events: tuple[str, str]) -> bytes:
    """Named events, each ``(name, data)``, as Anthropic sends them."""
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


def fed(parser: EventParser, chunk: bytes) -> list[Event | Finding]:
    """What ``parser.feed(chunk)`` completed with the findings it made meanwhile, in stream
    order: each finding just before the event it was found in (its ``event_index``)."""
    first = parser.events_dispatched
    events = parser.feed(chunk)
    out: list[Event | Finding] = []
    taken = 0
    for finding in parser.take_findings():
        before = (finding.event_index or 0) - first
        if before > taken:
            out += events[taken:before]
            taken = before
        out.append(finding)
    out += events[taken:]
    return out


def parse(body: bytes) -> list[Event]:
    """Every event of ``body``, as the monitor's parser dispatches them."""
    parser = EventParser()
    return [*parser.feed(body), *parser.feed(b"")]


def run_checker(checker: Any, body: bytes) -> list[Finding]:
    """Feed ``body``'s events straight to a protocol checker, numbered from 0."""
    found: list[Finding] = []
    for index, event in enumerate(parse(body)):
        found.extend(checker.on_event(event, index))
    return found


def fixture_endpoint(
    directory: str, headers: Mapping[str, str] | None = None
) -> Callable[[Request], Awaitable[StreamingResponse]]:
    """A Starlette endpoint streaming ``tests/fixtures/<directory>/<fixture>.sse`` in
    ``SDK_CUTS`` pieces, ``fixture`` being a path parameter."""

    async def endpoint(request: Request) -> StreamingResponse:
        body = (FIXTURES / directory / f"{request.path_params['fixture']}.sse").read_bytes()

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in cut(body, SDK_CUTS):
                yield chunk

        return StreamingResponse(chunks(), media_type="text/event-stream", headers=headers)

    return endpoint


# -- OpenAI Chat Completions --------------------------------------------------------------


def chat_chunk(**fields: object) -> bytes:
    """A ``chat.completion.chunk`` frame (choice 0 with content "x"), ``fields`` replacing keys."""
    base: dict[str, object] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
    }
    base.update(fields)
    return frame(base)


def chat_choice(index: int, **delta: object) -> dict[str, object]:
    """A choice with ``delta`` (``finish_reason`` taken out of it)."""
    reason = delta.pop("finish_reason", None)
    return {"index": index, "delta": delta, "finish_reason": reason}


def chat_call(position: object, arguments: str, header: bool = True) -> dict[str, object]:
    """A tool call delta at ``position``; with ``header``, its id, type and name."""
    call: dict[str, object] = {"index": position, "function": {"arguments": arguments}}
    if header:
        call["id"] = f"call_{position}"
        call["type"] = "function"
        call["function"] = {"name": "f", "arguments": arguments}
    return call


def chat_tool_calls_of_60_kb() -> tuple[OpenAIChatChecker, list[Finding]]:
    """300 tool calls of 60 KB arguments and a small one (``"{"``, call 300) into one choice,
    fed straight to a checker: the checker, and what the calls' events gave."""
    checker = OpenAIChatChecker()
    role = chat_chunk(choices=[chat_choice(0, role="assistant")])
    checker.on_event(chat_event(role), 0)
    big = json.dumps({"pad": "x" * 60_000})
    found: list[Finding] = []
    for position in range(300):
        delta = chat_chunk(choices=[chat_choice(0, tool_calls=[chat_call(position, big)])])
        found += checker.on_event(chat_event(delta), position + 1)
    small = chat_chunk(choices=[chat_choice(0, tool_calls=[chat_call(300, "{")])])
    found += checker.on_event(chat_event(small), 301)
    return checker, found


def chat_event(data: bytes) -> Event:
    """The event a ``data:`` frame is, as the parser gives it to a checker."""
    return Event("message", data.removeprefix(b"data: ").strip().decode())


# -- OpenAI Responses -----------------------------------------------------------------------

#: Items a hostile stream opens at once, and the size of each one's text delta.
HOSTILE_ITEMS, HOSTILE_DELTA = 300, 60_000


class ResponsesFeeder:
    """Feeds events straight to one checker, numbered in order; only the checker keeps them."""

    def __init__(self) -> None:
        self.checker = OpenAIResponsesChecker()
        self.sequence = 0
        self.findings: list[Finding] = []

    def __call__(self, kind: str, **fields: object) -> None:
        data = json.dumps({"type": kind, "sequence_number": self.sequence, **fields})
        self.findings += self.checker.on_event(Event(kind, data), self.sequence)
        self.sequence += 1

    def text_item(self, index: int, deltas: list[str], final: str) -> None:
        where = {"item_id": f"msg_{index}", "output_index": index, "content_index": 0}
        self("response.content_part.added", **where, part={"type": "output_text", "text": ""})
        for delta in deltas:
            self("response.output_text.delta", **where, delta=delta)
        self.finish_text_item(index, final)

    def open_item(self, index: int) -> None:
        item = {"id": f"msg_{index}", "type": "message", "status": "in_progress"}
        self("response.output_item.added", output_index=index, item=item)

    def finish_text_item(self, index: int, final: str) -> None:
        where = {"item_id": f"msg_{index}", "output_index": index, "content_index": 0}
        self("response.output_text.done", **where, text=final)
        self("response.content_part.done", **where, part={"type": "output_text", "text": final})
        item = {"id": f"msg_{index}", "type": "message", "status": "completed"}
        self("response.output_item.done", output_index=index, item=item)

    def open_hostile_items(self, first: int) -> None:
        """HOSTILE_ITEMS items open at once, each with one large delta."""
        for index in range(first, first + HOSTILE_ITEMS):
            self.open_item(index)
            where = {"item_id": f"msg_{index}", "output_index": index, "content_index": 0}
            self("response.content_part.added", **where, part={"type": "output_text", "text": ""})
        for index in range(first, first + HOSTILE_ITEMS):
            where = {"item_id": f"msg_{index}", "output_index": index, "content_index": 0}
            self("response.output_text.delta", **where, delta="x" * HOSTILE_DELTA)


# -- Anthropic ----------------------------------------------------------------------------

ANTHROPIC_START = (
    "message_start",
    '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    '"model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,'
    '"usage":{"input_tokens":3,"output_tokens":1}}}',
)
ANTHROPIC_DELTA = (
    "message_delta",
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
)
ANTHROPIC_STOP = ("message_stop", '{"type":"message_stop"}')


# -- Gemini -------------------------------------------------------------------------------


def gemini_chunk(*candidates: dict[str, Any], **fields: Any) -> bytes:
    """A ``data:`` frame of ``candidates`` and any other top-level ``fields``."""
    return frame({"candidates": list(candidates), **fields})


def gemini_text(text: str, index: object = 0, **fields: Any) -> dict[str, Any]:
    """A candidate whose content is one text part."""
    return {"content": {"parts": [{"text": text}], "role": "model"}, "index": index, **fields}


# -- reading the sources (the compiled build keeps no docstrings) ---------------------------


def source_of(module_name: str) -> str:
    """The text of a module's ``.py`` file in this checkout, whichever build was imported.

    ``inspect.getsource`` and ``__doc__`` see nothing in a module mypyc compiled (its file
    is the extension module beside the source), so tests about what the source says read
    the source.
    """
    path = Path(__file__).resolve().parent.parent.joinpath(*module_name.split("."))
    package = path / "__init__.py"
    return (package if package.exists() else path.with_suffix(".py")).read_text(encoding="utf-8")


def source_docstring(owner: Any) -> str:
    """The docstring a module, class or function has in its source (see ``source_of``)."""
    if isinstance(owner, type(ast)):
        return ast.get_docstring(ast.parse(source_of(owner.__name__)), clean=False) or ""
    tree = ast.parse(source_of(owner.__module__))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == owner.__name__
        ):
            return ast.get_docstring(node, clean=False) or ""
    raise LookupError(f"{owner.__module__}.{owner.__name__} is not defined in its source")


# -- fault injection that works on the compiled build ---------------------------------------


def break_monitors(monkeypatch: Any, module: Any, method: str, fault: Callable[..., Any]) -> None:
    """Make ``method`` of every ``StreamMonitor`` that ``module`` creates (with
    ``open_monitor``, as the seams do) call ``fault``.

    A compiled class's methods cannot be patched, so the fault goes in one step out: the
    interpreted module that builds monitors (the middleware, the transports) gets a stand-in
    that wraps a real monitor (its ``real``) and answers ``method`` (``"__init__"``
    included) with ``fault`` called as the method would be, ``self`` first. A broken
    ``feed`` also declines ``feed_body``, which would otherwise feed the real monitor
    without it. (The middleware's ``Forward`` leaves a stand-in's messages to the
    exchange, which calls ``feed``.)
    """
    real = module.open_monitor  # (read through the module: no call into the core here)

    class BrokenMonitor:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if method == "__init__":
                fault(self, *args, **kwargs)
            self.real = real(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            if name == "real":  # read before it was set (a fault in __init__): no recursion
                raise AttributeError(name)
            if name == method:
                return lambda *args, **kwargs: fault(self, *args, **kwargs)
            if name == "feed_body" and method == "feed":
                return lambda message: None  # declined: every body message goes to ``feed``
            return getattr(self.real, name)

    monkeypatch.setattr(module, "open_monitor", BrokenMonitor)
