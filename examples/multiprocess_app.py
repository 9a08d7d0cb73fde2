"""The example app under several worker processes, with one ``/metrics`` for all of them.

Run it with the metrics directory created empty and set *before* the processes start::

    rm -rf /tmp/streamguard-metrics && mkdir /tmp/streamguard-metrics
    PROMETHEUS_MULTIPROC_DIR=/tmp/streamguard-metrics \\
        uvicorn examples.multiprocess_app:app --workers 2 --port 8000
    curl -N localhost:8000/healthy          # any route of examples/plain_sse_app.py
    curl localhost:8000/metrics             # the sum over both workers

In multiprocess mode prometheus-client writes each worker's values to files in
``PROMETHEUS_MULTIPROC_DIR``. The metric objects are created as usual (streamguard's default
``StreamGuardMetrics`` in the process registry); ``/metrics`` serves a *fresh*
``CollectorRegistry`` holding only a ``MultiProcessCollector``, which reads and sums every
worker's files at each scrape. Never register the ordinary metrics into that exposition
registry too: they would be exported twice. ``streamguard.metrics.metrics_app()`` does this;
without the variable it serves the process registry, so the module also runs with a single
worker.

Each response carries ``x-streamguard-worker: <pid>``, to see which worker served it.
"""

from __future__ import annotations

import os

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from examples.plain_sse_app import build_app
from streamguard.metrics import metrics_app

__all__ = ["WorkerHeader", "app", "metrics_app"]


class WorkerHeader:
    """Add ``x-streamguard-worker: <pid>`` to every HTTP response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        pid = str(os.getpid()).encode()

        async def send_with_pid(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-streamguard-worker", pid)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_pid)


#: The example app inside ``StreamGuardMiddleware`` (default metrics).
guarded = build_app()
# ``guarded.app`` is the Starlette app the middleware wraps. The route serves /metrics itself;
# the mount keeps /metrics/ answering for scrape configs written for an older mount.
exposition = metrics_app()
guarded.app.add_route("/metrics", exposition)  # type: ignore[attr-defined]
guarded.app.mount("/metrics", exposition)  # type: ignore[attr-defined]
app = WorkerHeader(guarded)
