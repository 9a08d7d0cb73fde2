"""Not needed any more: ``metrics_app()`` is an ASGI object that a route serves itself.

``Route("/metrics", metrics_app())`` and ``app.add_route("/metrics", metrics_app())`` answer
``/metrics`` with the exposition, no redirect. This wrapper stays only until
``examples/normalizing_proxy.py`` stops importing it; delete both together.
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
