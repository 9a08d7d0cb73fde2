"""A request id bound by an outer middleware (docs/index.md) reaches streamguard's events."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import structlog
from structlog.testing import capture_logs

from streamguard import StreamGuardMiddleware
from tests.asgi_driver import Recorder, http_scope

INDEX = Path(__file__).resolve().parent.parent / "docs" / "index.md"


def _documented_middleware() -> Any:
    """The RequestIdMiddleware class as docs/index.md writes it."""
    blocks = re.findall(r"```python\n(.*?)```", INDEX.read_text(), flags=re.DOTALL)
    (source,) = [block for block in blocks if "bind_contextvars" in block]
    namespace: dict[str, Any] = {}
    exec(compile(source, str(INDEX), "exec"), namespace)
    return namespace["RequestIdMiddleware"]


async def _silent_then_unterminated(scope: Any, receive: Any, send: Any) -> None:
    """An SSE stream that goes silent for a while, then ends on a frame without its blank line."""
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"data: a\n\n", "more_body": True})
    await asyncio.sleep(0.4)
    await send({"type": "http.response.body", "body": b"data: b", "more_body": False})


def _serve_concurrently(request_ids: list[str], idle_limit_s: float) -> list[dict[str, Any]]:
    """Serve one stream per request id, each started 50 ms after the previous; the logs."""
    guarded = StreamGuardMiddleware(
        _silent_then_unterminated, metrics=False, timers={"idle_limit_s": idle_limit_s}
    )
    app = _documented_middleware()(guarded)

    async def one(request_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
        scope = http_scope(path="/chat", headers=[(b"x-request-id", request_id.encode())])
        await app(scope, recorder.receive, recorder.send)

    async def main() -> None:
        await asyncio.gather(*(one(rid, 0.05 * i) for i, rid in enumerate(request_ids)))

    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        asyncio.run(main())
    return logs


def test_request_id_reaches_every_frame_and_summary_event() -> None:
    """Each stream's violations and summary carry the id its request bound, and only that."""
    logs = _serve_concurrently(["first", "second"], idle_limit_s=60.0)
    by_id = {(entry.get("request_id"), entry["event"]) for entry in logs}
    assert by_id == {
        (request_id, event)
        for request_id in ("first", "second")
        for event in ("stream_violation", "stream_completed")
    }
    assert not structlog.contextvars.get_contextvars()  # the middleware left nothing bound


def test_request_id_of_a_live_stalled_finding_is_its_own_streams() -> None:
    """A stalled finding made by the poller while its stream is open carries that stream's id."""
    logs = _serve_concurrently(["first", "second"], idle_limit_s=0.1)
    stalled = [entry for entry in logs if entry.get("rule") == "stalled"]
    assert sorted(entry.get("request_id") for entry in stalled) == ["first", "second"]
