"""The example apps serve ``/metrics`` itself, not a redirect to ``/metrics/``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from examples import fastapi_app, normalizing_proxy, starlette_app

ROOT = Path(__file__).resolve().parent.parent


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


def _metrics_routed(form: str, registry: CollectorRegistry) -> Any:
    """A bare app serving ``metrics_app(registry)`` at /metrics, in one of the direct forms."""
    from fastapi import FastAPI
    from starlette.applications import Starlette
    from starlette.routing import Route

    from streamguard.metrics import metrics_app

    if form == "Route":
        return Starlette(routes=[Route("/metrics", metrics_app(registry))])
    app = FastAPI() if form == "FastAPI.add_route" else Starlette()
    app.add_route("/metrics", metrics_app(registry))
    return app


@pytest.mark.parametrize("form", ["Route", "Starlette.add_route", "FastAPI.add_route"])
def test_metrics_app_is_served_on_the_exact_path_of_a_route(form: str) -> None:
    """metrics_app() given to a route answers GET /metrics with 200, no redirect."""
    registry = CollectorRegistry()
    Counter("probe", "x", registry=registry)
    response = _get(_metrics_routed(form, registry), "/metrics")
    assert (response.status_code, response.headers.get("location")) == (200, None)
    assert response.headers["content-type"].startswith("text/plain")
    assert "probe_total 0.0" in response.text


def test_the_docs_route_metrics_directly() -> None:
    """README, docs/index.md and docs/metrics.md show the route form, not a redirecting mount."""
    for page in ("README.md", "docs/index.md", "docs/metrics.md"):
        text = (ROOT / page).read_text()
        assert 'app.routes.append(Route("/metrics", metrics_app()))' in text, page
        assert 'mount("/metrics"' not in text, page
        assert 'Mount("/metrics"' not in text, page
        assert "metrics_path: /metrics/" not in text, page
    assert 'Route("/metrics", metrics_app())' in (ROOT / "docs/metrics.md").read_text()


def test_no_example_needs_a_wrapper_to_serve_metrics() -> None:
    """The examples route metrics_app() itself: no ASGIEndpoint wrapper."""
    for path in sorted((ROOT / "examples").glob("*.py")):
        if path.name in ("asgi_endpoint.py", "normalizing_proxy.py"):
            continue  # the proxy is another change's (it drops the wrapper with it)
        assert "ASGIEndpoint" not in path.read_text(), path.name
