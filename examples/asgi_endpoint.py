"""Serve an ASGI app at one exact path of a Starlette or FastAPI app: ``/metrics``, no redirect.

``app.mount("/metrics", metrics_app())`` matches only ``/metrics/...``: a scrape of
``/metrics`` gets a ``307`` redirect to ``/metrics/`` (Prometheus follows it, ``curl`` without
``-L`` does not). A ``Route`` matches the exact path, but Starlette calls a *function*
endpoint with a ``Request``, and prometheus-client's ASGI app is a function; wrapped in an
object it is served as ASGI::

    Route("/metrics", ASGIEndpoint(metrics_app()))         # Starlette
    app.add_route("/metrics", ASGIEndpoint(metrics_app()))  # FastAPI
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ASGIEndpoint"]


class ASGIEndpoint:
    """``app`` as a route endpoint that Starlette serves as ASGI, not as ``func(request)``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
