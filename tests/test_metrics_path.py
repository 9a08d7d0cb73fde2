"""The example apps serve ``/metrics`` itself, not a redirect to ``/metrics/``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from examples import fastapi_app, normalizing_proxy, starlette_app


def _get(app: Any, path: str) -> httpx.Response:
    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get(path)

    return asyncio.run(get())


BUILDERS: dict[str, Callable[[CollectorRegistry], Any]] = {
    "starlette_app": lambda registry: starlette_app.build_app(registry=registry),
    "fastapi_app": lambda registry: fastapi_app.build_app(registry=registry),
    "normalizing_proxy": lambda registry: normalizing_proxy.build_proxy(
        "http://127.0.0.1:9", registry=registry
    ),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_metrics_answers_on_the_bare_path(name: str) -> None:
    """GET /metrics is the exposition itself (200), as a scraper or `curl` without -L asks."""
    registry = CollectorRegistry()
    response = _get(BUILDERS[name](registry), "/metrics")
    assert response.status_code == 200, response.headers.get("location")
    assert "streamguard_streams_started_total" in response.text


def test_the_multiprocess_example_serves_both_paths() -> None:
    """/metrics for new scrape configs, /metrics/ for those written for the old mount."""
    from examples import multiprocess_app

    for path in ("/metrics", "/metrics/"):
        response = _get(multiprocess_app.app, path)
        assert response.status_code == 200, (path, response.headers.get("location"))
        assert "streamguard_streams_started_total" in response.text
