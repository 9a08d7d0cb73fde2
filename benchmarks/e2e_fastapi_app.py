"""The realistic app served by ``benchmarks/e2e.py``: FastAPI, as OpenAI-compatible servers do.

``/stream`` returns a ``StreamingResponse`` over an async generator that builds one pydantic
model per chunk, shaped like an OpenAI chat chunk, and yields
``f"data: {chunk.model_dump_json()}\\n\\n"``; the same 2,000 frames as the raw app, ending
with ``data: [DONE]``. ``STREAMGUARD_BENCH_MIDDLEWARE`` picks what ``add_middleware`` puts
around it, as ``benchmarks/e2e_app.py`` describes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from starlette.types import ASGIApp

from benchmarks.e2e_app import FRAMES, NoopMiddleware
from streamguard import StreamGuardMiddleware
from streamguard.protocols._skeleton import learning

__all__ = ["served"]


class Delta(BaseModel):
    role: str | None = None
    content: str | None = None


class Choice(BaseModel):
    index: int
    delta: Delta
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[Choice]


def _chunk(delta: Delta, finish_reason: str | None = None) -> ChatCompletionChunk:
    choice = Choice(index=0, delta=delta, finish_reason=finish_reason)
    return ChatCompletionChunk(
        id="chatcmpl-bench", created=1741570283, model="gpt-4o-2024-08-06", choices=[choice]
    )


async def _events() -> AsyncIterator[str]:
    # A model per token, as a server turning its engine's output into chunks builds them.
    yield f"data: {_chunk(Delta(role='assistant', content='')).model_dump_json()}\n\n"
    for i in range(1, FRAMES - 2):
        yield f"data: {_chunk(Delta(content=f' t{i}')).model_dump_json()}\n\n"
    yield f"data: {_chunk(Delta(), finish_reason='stop').model_dump_json()}\n\n"
    yield "data: [DONE]\n\n"


app = FastAPI()


@app.get("/stream")
async def stream() -> StreamingResponse:
    return StreamingResponse(_events(), media_type="text/event-stream")


@app.get("/json")
async def ready() -> dict[str, bool]:
    return {"ok": True}


_choice = os.environ.get("STREAMGUARD_BENCH_MIDDLEWARE", "none")
if _choice == "streamguard-full":  # every frame parsed: the shape cache's own figure
    learning(False)
    _choice = "streamguard"
if _choice == "streamguard":
    app.add_middleware(StreamGuardMiddleware, routes={"/stream": "openai_chat"})
elif _choice == "noop":
    app.add_middleware(NoopMiddleware)
served: ASGIApp = app
