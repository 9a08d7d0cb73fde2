"""Exemplars: the counters of failures carry the trace of a stream that counted them.

The trace is OpenTelemetry's current span at the stream's start, else the request's W3C
``traceparent`` (parsed strictly: anything but a well-formed version-00 header is ignored);
a healthy stream, a stream with no trace and the other counters carry none. End to end, a
uvicorn app's ``/metrics`` shows the exemplar in the OpenMetrics exposition only (the
header's trace, or under OpenTelemetry's ASGI instrumentation its server span), and a real
Prometheus with exemplar storage on returns it from ``/api/v1/query_exemplars``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind
from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Exemplar
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

import streamguard.httpx
from streamguard import StreamGuardMiddleware
from streamguard.metrics import StreamGuardMetrics, metrics_app, parse_traceparent
from streamguard.testing import serve

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .test_prometheus import PROMETHEUS, free_port, needs_prometheus, stop, wait_for

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"
LABELS = {"route": "__unknown__", "protocol": "sse"}
#: A stream that breaks a rule (a byte that is not UTF-8) and ends as the app meant.
BROKEN = [sse_start(), body(b"data: a\xff\n\n"), body(b"", more=False)]
HEALTHY = [sse_start(), body(b"data: a\n\ndata: b\n\n"), body(b"", more=False)]


def guarded(
    steps: list[Any], registry: CollectorRegistry | StreamGuardMetrics, **options: Any
) -> Any:
    return StreamGuardMiddleware(
        ScriptedApp(steps), metrics=registry, logs={"enabled": False}, protocol="sse", **options
    )


def scope_with(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return http_scope(headers=list(headers))


def exemplars(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], Any]:
    """Every sample that carries an exemplar, by (sample name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.exemplar
        for family in registry.collect()
        for sample in family.samples
        if sample.exemplar is not None
    }


def key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({**LABELS, **labels}.items()))


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {**LABELS, **labels}) or 0.0


@contextlib.contextmanager
def current_span() -> Iterator[Span]:
    """A recording span of the OTel SDK, current around the block (no global provider)."""
    tracer = TracerProvider().get_tracer("test_exemplars")
    with tracer.start_as_current_span("request") as span:
        yield span


def span_ids(span: Span) -> dict[str, str]:
    context = span.get_span_context()
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


# -- unit: the scripted driver -------------------------------------------------------------


def test_a_violation_carries_the_current_spans_trace_id() -> None:
    """A failing stream under an active OTel span: the violation counter's exemplar is the
    span's trace id (32 hex digits) and span id."""
    registry = CollectorRegistry()
    with current_span() as span:
        run(guarded(BROKEN, registry), http_scope())
    found = exemplars(registry)
    exemplar = found[key("streamguard_violations_total", rule="invalid_utf8")]
    assert exemplar.labels == span_ids(span)
    assert len(exemplar.labels["trace_id"]) == 32
    assert exemplar.value == 1
    # The malformed count is a failure's too; the completed outcome, started and the
    # other counters are not.
    assert key("streamguard_malformed_streams_total") in found
    assert set(found) == {
        key("streamguard_violations_total", rule="invalid_utf8"),
        key("streamguard_malformed_streams_total"),
    }


def test_a_violation_carries_the_requests_traceparent() -> None:
    """With no span, the request's ``traceparent`` gives the trace id and span id."""
    registry = CollectorRegistry()
    run(guarded(BROKEN, registry), scope_with((b"traceparent", TRACEPARENT.encode())))
    exemplar = exemplars(registry)[key("streamguard_violations_total", rule="invalid_utf8")]
    assert exemplar.labels == {"trace_id": TRACE_ID, "span_id": SPAN_ID}


def test_the_current_span_wins_over_the_header() -> None:
    """Both present: the span (the app's own trace, which instrumentation parented to the
    header anyway) is the exemplar's."""
    registry = CollectorRegistry()
    with current_span() as span:
        run(guarded(BROKEN, registry), scope_with((b"traceparent", TRACEPARENT.encode())))
    exemplar = exemplars(registry)[key("streamguard_violations_total", rule="invalid_utf8")]
    assert exemplar.labels == span_ids(span)


@pytest.mark.parametrize(
    ("steps", "outcome"),
    [
        ([sse_start(), body(b"data: a\n\n"), RuntimeError("boom")], "app_error"),
        ([sse_start(), body(b"data: a\n\n")], "unclosed"),  # returned without the last message
    ],
)
def test_a_failed_outcome_carries_the_trace(steps: list[Any], outcome: str) -> None:
    """The outcome counter of a failed end (``FAILED_OUTCOMES``) carries the exemplar."""
    registry = CollectorRegistry()
    run(guarded(steps, registry), scope_with((b"traceparent", TRACEPARENT.encode())))
    assert value(registry, "streamguard_streams_total", outcome=outcome) == 1
    exemplar = exemplars(registry)[key("streamguard_streams_total", outcome=outcome)]
    assert exemplar.labels == {"trace_id": TRACE_ID, "span_id": SPAN_ID}


def test_an_unchecked_streams_failed_outcome_carries_the_trace() -> None:
    """A sampled-out stream's failed outcome: on both outcome counters."""
    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\n"), RuntimeError("boom")]
    app = guarded(steps, registry, sample_rate=0.0)
    run(app, scope_with((b"traceparent", TRACEPARENT.encode())))
    found = exemplars(registry)
    labels = {"trace_id": TRACE_ID, "span_id": SPAN_ID}
    assert found[key("streamguard_streams_total", outcome="app_error")].labels == labels
    unchecked = key(
        "streamguard_unchecked_streams_total", outcome="app_error", reason="not_sampled"
    )
    assert found[unchecked].labels == labels


@pytest.mark.parametrize("traced", ["span", "traceparent"])
def test_a_healthy_stream_adds_no_exemplar(traced: str) -> None:
    """A completed stream with no finding, in a trace: counted, and no exemplar anywhere."""
    registry = CollectorRegistry()
    app = guarded(HEALTHY, registry)
    if traced == "span":
        with current_span():
            run(app, http_scope())
    else:
        run(app, scope_with((b"traceparent", TRACEPARENT.encode())))
    assert value(registry, "streamguard_streams_total", outcome="completed") == 1
    assert exemplars(registry) == {}


def test_a_client_disconnect_is_no_failure() -> None:
    """The client leaving first is not the server's fault: its outcome carries no exemplar."""
    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\n"), "receive", body(b"data: b\n\n")]
    recorder = Recorder(incoming=[{"type": "http.disconnect"}])
    run(guarded(steps, registry), scope_with((b"traceparent", TRACEPARENT.encode())), recorder)
    assert value(registry, "streamguard_streams_total", outcome="client_disconnect") == 1
    assert exemplars(registry) == {}


MALFORMED = {
    "short": TRACEPARENT[:-1],
    "long": TRACEPARENT + "0",
    "uppercase trace id": f"00-{TRACE_ID.upper()}-{SPAN_ID}-01",
    "uppercase span id": f"00-{TRACE_ID}-{SPAN_ID.upper()}-01",
    "all-zero trace id": f"00-{'0' * 32}-{SPAN_ID}-01",
    "all-zero span id": f"00-{TRACE_ID}-{'0' * 16}-01",
    "version ff": f"ff-{TRACE_ID}-{SPAN_ID}-01",
    "version 01": f"01-{TRACE_ID}-{SPAN_ID}-01",
    "not hex": f"00-{TRACE_ID[:-1]}g-{SPAN_ID}-01",
    "wrong separator": f"00_{TRACE_ID}-{SPAN_ID}-01",
    "uppercase flags": f"00-{TRACE_ID}-{SPAN_ID}-0A",
    "empty": "",
    "huge": "00-" + "a" * 10_000,
}


@pytest.mark.parametrize("header", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_traceparent_gives_no_exemplar(header: str) -> None:
    """Anything but a well-formed version-00 ``traceparent`` is ignored: the violation is
    counted, with no exemplar."""
    registry = CollectorRegistry()
    app = guarded(BROKEN, registry)
    _, raised = run(app, scope_with((b"traceparent", header.encode())))
    assert raised is None
    assert app.internal_errors == 0
    assert value(registry, "streamguard_violations_total", rule="invalid_utf8") == 1
    assert exemplars(registry) == {}
    assert parse_traceparent(header.encode()) is None


def test_two_traceparent_headers_give_no_exemplar() -> None:
    """Repeated, the header is one invalid value (HTTP joins repeated headers)."""
    registry = CollectorRegistry()
    other = f"00-{'1' * 32}-{SPAN_ID}-01".encode()
    run(
        guarded(BROKEN, registry),
        scope_with((b"traceparent", TRACEPARENT.encode()), (b"traceparent", other)),
    )
    assert value(registry, "streamguard_violations_total", rule="invalid_utf8") == 1
    assert exemplars(registry) == {}


def test_exemplars_can_be_turned_off() -> None:
    """``exemplars=False``: neither the span nor the header is read."""
    registry = CollectorRegistry()
    with current_span():
        run(
            guarded(BROKEN, registry, exemplars=False),
            scope_with((b"traceparent", TRACEPARENT.encode())),
        )
    assert value(registry, "streamguard_violations_total", rule="invalid_utf8") == 1
    assert exemplars(registry) == {}


def test_an_upstream_stream_carries_its_requests_trace() -> None:
    """A transport's stream: the trace of the request the client sent."""
    registry = CollectorRegistry()

    def provider(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: a\xff\n\n"
        )

    transport = streamguard.httpx.StreamGuardTransport(
        httpx.MockTransport(provider), metrics=registry, protocol="sse", logs={"enabled": False}
    )
    with httpx.Client(transport=transport) as client:
        client.get("http://provider.test/stream", headers={"traceparent": TRACEPARENT}).read()
    samples = {
        sample.name: sample
        for family in registry.collect()
        for sample in family.samples
        if sample.exemplar is not None
    }
    exemplar = samples["streamguard_upstream_violations_total"].exemplar
    assert exemplar.labels == {"trace_id": TRACE_ID, "span_id": SPAN_ID}


def test_multiprocess_mode_keeps_no_exemplar_and_breaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under prometheus-client's multiprocess values (which keep no exemplar), a traced
    failing stream is counted as any, no trace is read, and the summed exposition holds
    no exemplar; an exemplar handed to those values anyway is dropped, not an error."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue())
    registry = CollectorRegistry()
    metrics = StreamGuardMetrics(registry)
    assert metrics.exemplars is False
    with current_span():
        run(guarded(BROKEN, metrics), scope_with((b"traceparent", TRACEPARENT.encode())))
    metrics.exemplars = True  # as if read: the values drop it
    app = guarded(BROKEN, metrics)
    run(app, scope_with((b"traceparent", TRACEPARENT.encode())))
    assert app.internal_errors == 0
    exposition = CollectorRegistry()
    MultiProcessCollector(exposition, path=str(tmp_path))  # type: ignore[no-untyped-call]
    text = openmetrics_latest(exposition).decode()
    violations = [
        sample
        for family in openmetrics_families(text)
        for sample in family.samples
        if sample.name == "streamguard_violations_total"
        and sample.labels.get("rule") == "invalid_utf8"
    ]
    assert [sample.value for sample in violations] == [2.0]
    assert all(sample.exemplar is None for sample in violations)
    assert TRACE_ID not in text


# -- end to end: uvicorn, /metrics in OpenMetrics ------------------------------------------


async def _broken(request: Request) -> StreamingResponse:
    async def frames() -> Any:
        yield b"data: a\xff\n\n"

    return StreamingResponse(frames(), media_type="text/event-stream")


def exemplar_app(registry: CollectorRegistry) -> StreamGuardMiddleware:
    app = Starlette(routes=[Route("/broken", _broken), Route("/metrics", metrics_app(registry))])
    return StreamGuardMiddleware(
        app,
        metrics=registry,
        routes={"/broken": "sse"},
        logs={"enabled": False},
    )


OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def violation_line(text: str) -> str | None:
    """The exposition line of the /broken route's ``invalid_utf8`` violations."""
    for line in text.splitlines():
        if line.startswith("streamguard_violations_total{") and all(
            label in line for label in ('route="/broken"', 'rule="invalid_utf8"')
        ):
            return line
    return None


def test_metrics_endpoint_shows_the_exemplar_in_openmetrics_only() -> None:
    """A broken stream requested with a ``traceparent``: the OpenMetrics scrape shows the
    exemplar with its trace id on the violation line; the plain-text one still parses."""
    registry = CollectorRegistry()
    with serve(exemplar_app(registry)) as url, httpx.Client(base_url=url, timeout=10) as client:
        response = client.get("/broken", headers={"traceparent": TRACEPARENT})
        assert response.status_code == 200

        def scraped() -> str | None:  # the end is counted just after the last byte is sent
            text = client.get("/metrics", headers={"accept": OPENMETRICS}).text
            line = violation_line(text)
            return text if line is not None and " # {" in line else None

        text = wait_for(scraped, 10, "the violation's exemplar on /metrics")
        plain = client.get("/metrics")
    line = violation_line(text)
    assert line is not None
    assert f'# {{span_id="{SPAN_ID}",trace_id="{TRACE_ID}"}} 1.0' in line
    families = {family.name: family for family in openmetrics_families(text)}
    (sample,) = [
        s
        for s in families["streamguard_violations"].samples
        if s.name == "streamguard_violations_total" and s.labels["rule"] == "invalid_utf8"
    ]
    assert isinstance(sample.exemplar, Exemplar)
    assert sample.exemplar.labels == {"trace_id": TRACE_ID, "span_id": SPAN_ID}
    # The Prometheus text format has no exemplars: the same scrape, without, still parses.
    assert plain.headers["content-type"].startswith("text/plain")
    assert TRACE_ID not in plain.text
    parsed = {
        sample.name: sample.value
        for family in text_string_to_metric_families(plain.text)
        for sample in family.samples
        if sample.labels.get("rule") == "invalid_utf8" and sample.labels["route"] == "/broken"
    }
    assert parsed["streamguard_violations_total"] == 1


def test_the_instrumented_apps_server_span_is_the_exemplar() -> None:
    """Under OpenTelemetry's ASGI instrumentation (outside the middleware, as it is mounted),
    the exemplar is the request's server span: the trace the ``traceparent`` continued, with
    the server span's own id, not the caller's."""
    registry = CollectorRegistry()
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    app = OpenTelemetryMiddleware(exemplar_app(registry), tracer_provider=provider)
    with serve(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/broken", headers={"traceparent": TRACEPARENT}).status_code == 200

        def scraped() -> str | None:
            text = client.get("/metrics", headers={"accept": OPENMETRICS}).text
            line = violation_line(text)
            return line if line is not None and " # {" in line else None

        line = wait_for(scraped, 10, "the violation's exemplar on /metrics")
    (server,) = [
        span
        for span in spans.get_finished_spans()
        if span.kind is SpanKind.SERVER and span.name.startswith("GET /broken")
    ]
    assert server.context is not None
    span_id = f"{server.context.span_id:016x}"
    assert span_id != SPAN_ID
    assert f'# {{span_id="{span_id}",trace_id="{TRACE_ID}"}} 1.0' in line


# -- a real Prometheus with exemplar storage -------------------------------------------------


@pytest.mark.slow
@needs_prometheus
def test_prometheus_stores_the_exemplar(tmp_path: Path) -> None:
    """Prometheus with ``--enable-feature=exemplar-storage`` scrapes the app (OpenMetrics,
    negotiated) and ``/api/v1/query_exemplars`` returns the broken stream's trace id."""
    registry = CollectorRegistry()
    with serve(exemplar_app(registry)) as url, contextlib.ExitStack() as cleanup:
        response = httpx.get(f"{url}/broken", headers={"traceparent": TRACEPARENT}, timeout=10)
        assert response.status_code == 200
        port = free_port()
        config = {  # JSON is YAML
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {
                    "job_name": "exemplars",
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [url.removeprefix("http://")]}],
                }
            ],
        }
        (tmp_path / "prometheus.yml").write_text(json.dumps(config))
        log = cleanup.enter_context((tmp_path / "prometheus.log").open("wb"))
        server = subprocess.Popen(
            [
                PROMETHEUS or "prometheus",
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--enable-feature=exemplar-storage",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        cleanup.callback(stop, server)
        api = cleanup.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10))
        started = time.time() - 60

        def trace_ids() -> set[str] | None:
            if server.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp_path / 'prometheus.log').read_text()}")
            try:
                answer = api.get(
                    "/api/v1/query_exemplars",
                    params={
                        "query": 'streamguard_violations_total{rule="invalid_utf8"}',
                        "start": str(started),
                        "end": str(time.time() + 60),
                    },
                )
            except httpx.HTTPError:
                return None
            if answer.status_code != 200:
                return None
            found = {
                exemplar["labels"]["trace_id"]
                for series in answer.json()["data"]
                for exemplar in series["exemplars"]
            }
            return found or None

        assert wait_for(trace_ids, 60, "the exemplar in Prometheus") == {TRACE_ID}
