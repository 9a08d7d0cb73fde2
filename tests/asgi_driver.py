"""A scripted ASGI driver: exact chunk boundaries, disconnects, exceptions, cancellation.

Starlette's TestClient and httpx's ASGITransport buffer the body, so they cannot show
what the middleware sees between messages. Here an app replays a script of steps, a
``receive`` hands out queued messages, and a recording ``send`` keeps every message it
was given (the very objects) or raises on cue, as a server does when the client is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

Step = Message | BaseException | str


def sse_start(*extra_headers: tuple[bytes, bytes], status: int = 200) -> Message:
    headers = [(b"content-type", b"text/event-stream"), *extra_headers]
    return {"type": "http.response.start", "status": status, "headers": headers}


def body(data: bytes, more: bool = True) -> Message:
    return {"type": "http.response.body", "body": data, "more_body": more}


class ScriptedApp:
    """Runs its steps in order: a dict is sent, an exception is raised, ``"receive"``
    awaits one message from ``receive`` (and remembers it), ``"yield"`` lets other tasks
    run."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = steps
        self.received: list[Message] = []
        self.receive_used: Receive | None = None
        self.send_used: Send | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.receive_used, self.send_used = receive, send
        for step in self.steps:
            if isinstance(step, BaseException):
                raise step
            if step == "receive":
                self.received.append(await receive())
            elif step == "yield":
                await asyncio.sleep(0)
            else:
                assert isinstance(step, dict)
                await send(step)


@dataclass
class Recorder:
    """The server side: queued messages for ``receive``, every sent message recorded."""

    incoming: list[Message] = field(default_factory=list)
    #: Raise this from ``send`` once this many messages were delivered.
    fail_after: int | None = None
    failure: BaseException = field(default_factory=lambda: OSError("client went away"))
    sent: list[Message] = field(default_factory=list)

    async def receive(self) -> Message:
        if self.incoming:
            return self.incoming.pop(0)
        await asyncio.sleep(3600)  # a real server blocks until something happens
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        if self.fail_after is not None and len(self.sent) >= self.fail_after:
            raise self.failure
        self.sent.append(message)


def http_scope(method: str = "GET", path: str = "/stream", **extra: Any) -> Scope:
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 80),
    }
    scope.update(extra)
    return scope


def run(
    app: ASGIApp, scope: Scope | None = None, recorder: Recorder | None = None
) -> tuple[Recorder, BaseException | None]:
    """Drive ``app`` once; return the recorder and whatever the app raised (or None)."""
    recorder = recorder or Recorder(incoming=[{"type": "http.request", "body": b""}])
    raised: BaseException | None = None

    async def main() -> None:
        nonlocal raised
        try:
            await app(scope or http_scope(), recorder.receive, recorder.send)
        except BaseException as exc:  # the test inspects it, CancelledError included
            raised = exc

    asyncio.run(main())
    return recorder, raised
