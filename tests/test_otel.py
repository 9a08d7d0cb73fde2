"""streamguard.otel under the OpenTelemetry SDK: spans and metrics from real instrumentation.

The server tests run a FastAPI app under uvicorn with the FastAPI instrumentation, the
transport tests an httpx client instrumented by the httpx instrumentation; every span and
metric goes to the SDK's in-memory exporter and reader, with providers of the test's own
(never the global ones, which can be set once per process).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry
from starlette.responses import StreamingResponse

import streamguard.httpx
from streamguard import StreamGuardMiddleware
from streamguard.metrics import UPSTREAM_NAMESPACE, StreamGuardMetrics
from streamguard.otel import (
    ATTRIBUTES,
    FINDING_EVENT,
    METRIC_NAMES,
    STREAM_SPAN,
    OpenTelemetrySink,
)
from streamguard.report import Finding, Outcome, Severity, StreamReport
from streamguard.sinks import COMPRESSED, NOT_SAMPLED
from streamguard.testing import serve

from .conftest import CANARY_MARKER
from .helpers import chat_chunk

CANARY = f"{CANARY_MARKER}-otel"
CHAT = "/v1/chat/completions"
LABELS = {("streamguard.route", CHAT), ("streamguard.protocol", "openai_chat")}
#: The relay's route (``tests/relay_app.py``), as the attributed series are labelled.
GATEWAY_LABELS = {
    ("streamguard.route", "/{lane}/v1/chat/completions"),
    ("streamguard.protocol", "openai_chat"),
}
SSE_HEADERS = [(b"content-type", b"text/event-stream")]
#: A chat stream that breaks two rules (a role on the second chunk: ``role_not_first``; no
#: finish reason) and never sends ``[DONE]``; its content carries the canary.
ROLE_LATE = chat_chunk(
    choices=[{"index": 0, "delta": {"content": CANARY}, "finish_reason": None}]
) + chat_chunk(
    choices=[{"index": 0, "delta": {"role": "assistant", "content": "y"}, "finish_reason": None}]
)
#: A frame whose JSON is broken around the canary.
BROKEN_JSON = f'data: {{"choices": [{CANARY}\n\n'.encode()
FINISH = chat_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
HEALTHY = chat_chunk() + FINISH + b"data: [DONE]\n\n"


@dataclass
class Telemetry:
    """An SDK tracer and meter provider of one test, with what they recorded."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def sink(self, **options: Any) -> OpenTelemetrySink:
        return OpenTelemetrySink(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def points(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every streamguard data point: counters' values, histograms' counts and sums."""
        points: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                if scope.scope.name != "streamguard":
                    continue
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        labels = frozenset((k, str(v)) for k, v in point.attributes.items())
                        if hasattr(point, "value"):
                            points[(metric.name, labels)] = point.value
                        else:
                            points[(metric.name + ".count", labels)] = point.count
                            points[(metric.name + ".sum", labels)] = point.sum
        return points


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(spans, reader, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def chat_app(telemetry: Telemetry, body: list[Any], **options: Any) -> FastAPI:
    """A FastAPI app streaming ``body`` (bytes; an exception is raised) on CHAT, watched by
    streamguard with ``options``, instrumented by the FastAPI instrumentation."""
    app = FastAPI()

    @app.post(CHAT)
    async def chat() -> StreamingResponse:
        async def frames() -> AsyncIterator[bytes]:
            for chunk in body:
                if isinstance(chunk, BaseException):
                    raise chunk
                yield chunk

        return StreamingResponse(frames(), media_type="text/event-stream")

    options.setdefault("metrics", False)
    app.add_middleware(StreamGuardMiddleware, routes={CHAT: "openai_chat"}, **options)
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider
    )
    return app


def fetch(base: str) -> bytes:
    """POST a chat request to the app at ``base``; the body as the client got it."""
    with httpx.Client(base_url=base, timeout=10) as client:
        response = client.post(CHAT, json={"model": "m", "stream": True})
        return response.content


def one(spans: list[ReadableSpan], **match: Any) -> ReadableSpan:
    """The one span whose fields are ``match``."""
    found = [s for s in spans if all(getattr(s, key) == value for key, value in match.items())]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def wait_for(condition: Any) -> None:
    """Wait until ``condition()`` holds: the server thread ends streams after the reply."""
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def settle(telemetry: Telemetry, name: str, count: int = 1) -> list[ReadableSpan]:
    """Wait for ``count`` spans named ``name`` (the server thread ends them)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        spans = [s for s in telemetry.finished() if s.name == name]
        if len(spans) >= count:
            return spans
        time.sleep(0.01)
    raise AssertionError(f"no {name} span: {[s.name for s in telemetry.finished()]}")


# -- the server span ------------------------------------------------------------------------


def test_a_stream_ended_after_its_server_span_gets_a_child_span(telemetry: Telemetry) -> None:
    """The server span ends with the body, so the report goes to a child span of it."""
    app = chat_app(telemetry, [ROLE_LATE], sinks=[telemetry.sink()])
    with serve(app) as base:
        assert fetch(base) == ROLE_LATE
        (stream,) = settle(telemetry, STREAM_SPAN)
    server = one(telemetry.finished(), kind=SpanKind.SERVER)
    assert stream.parent is not None
    assert stream.parent.span_id == server.context.span_id
    assert stream.context.trace_id == server.context.trace_id
    assert not any(key.startswith("streamguard.") for key in server.attributes or {})
    # The stream's span covers the stream, from its head to after the server span ended.
    assert server.end_time is not None
    assert stream.end_time is not None
    assert stream.end_time >= server.end_time
    attributes = dict(stream.attributes or {})
    assert attributes["streamguard.outcome"] == "unclosed"
    assert attributes["streamguard.protocol"] == "openai_chat"
    assert attributes["streamguard.route"] == CHAT
    assert attributes["streamguard.side"] == "downstream"
    assert attributes["streamguard.failed"] is True
    assert attributes["streamguard.malformed"] is True
    assert attributes["streamguard.events"] == 2
    assert attributes["streamguard.bytes"] == len(ROLE_LATE)
    assert isinstance(attributes["streamguard.time_to_first_event"], float)
    rules = {event.attributes["streamguard.rule"] for event in stream.events}  # type: ignore[index]
    assert {"role_not_first", "missing_terminal"} <= rules
    assert list(attributes["streamguard.rules"]) == sorted(rules)  # type: ignore[arg-type]
    for event in stream.events:
        assert event.name == FINDING_EVENT
        assert set(event.attributes or {}) <= {
            "streamguard.rule",
            "streamguard.severity",
            "streamguard.event_index",
            "streamguard.byte_offset",
        }
    late = next(e for e in stream.events if e.attributes["streamguard.rule"] == "role_not_first")  # type: ignore[index]
    assert late.attributes is not None
    assert late.attributes["streamguard.event_index"] == 1
    assert late.attributes["streamguard.severity"] in ("error", "warning", "info")


def test_a_span_still_recording_at_the_end_gets_the_report_itself(telemetry: Telemetry) -> None:
    """An app that raises mid-stream ends the stream before the server span: no child span."""
    app = chat_app(telemetry, [chat_chunk(), RuntimeError("boom")], sinks=[telemetry.sink()])
    with serve(app, log_level="critical") as base, pytest.raises(httpx.HTTPError):
        fetch(base)
    (server,) = settle(telemetry, f"POST {CHAT}")
    assert not [s for s in telemetry.finished() if s.name == STREAM_SPAN]
    assert server.kind is SpanKind.SERVER
    attributes = dict(server.attributes or {})
    assert attributes["streamguard.outcome"] == "app_error"
    assert attributes["streamguard.events"] == 1


def test_outside_the_instrumentation_the_report_goes_on_the_server_span(
    telemetry: Telemetry,
) -> None:
    """Wrapping the ASGI instrumentation, streamguard ends the stream before its span."""

    async def stream(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": ROLE_LATE})

    app = StreamGuardMiddleware(
        OpenTelemetryMiddleware(
            stream,
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ),
        protocol="openai_chat",
        metrics=False,
        sinks=[telemetry.sink()],
    )
    with serve(app) as base:
        assert fetch(base) == ROLE_LATE
        wait_for(lambda: app.in_flight == 0)
        server = one(settle(telemetry, f"POST {CHAT}"), kind=SpanKind.SERVER)
    assert not [s for s in telemetry.finished() if s.name == STREAM_SPAN]
    assert server.attributes is not None
    assert server.attributes["streamguard.outcome"] == "unclosed"
    assert {e.attributes["streamguard.rule"] for e in server.events} >= {"role_not_first"}  # type: ignore[index]


def test_concurrent_streams_each_report_under_their_own_request(telemetry: Telemetry) -> None:
    """Streams served at once: each stream's span hangs under its own request's span."""
    app = chat_app(telemetry, [ROLE_LATE], sinks=[telemetry.sink()])
    with serve(app) as base, ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda _: fetch(base), range(8))) == [ROLE_LATE] * 8
        streams = settle(telemetry, STREAM_SPAN, 8)
    servers = {s.context.span_id: s for s in telemetry.finished() if s.kind is SpanKind.SERVER}
    parents = [stream.parent.span_id for stream in streams if stream.parent is not None]
    assert sorted(parents) == sorted(servers)
    for stream in streams:
        assert stream.parent is not None
        assert stream.context.trace_id == servers[stream.parent.span_id].context.trace_id


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_status_is_an_error_only_when_asked(telemetry: Telemetry, opted_in: bool) -> None:
    """A broken stream sets the span's status to ERROR only with ``error_status=True``."""
    app = chat_app(telemetry, [ROLE_LATE], sinks=[telemetry.sink(error_status=opted_in)])
    with serve(app) as base:
        fetch(base)
        (stream,) = settle(telemetry, STREAM_SPAN)
    expected = StatusCode.ERROR if opted_in else StatusCode.UNSET
    assert stream.status.status_code is expected
    if opted_in:
        assert CANARY_MARKER not in (stream.status.description or "")


def test_a_healthy_stream_never_sets_an_error(telemetry: Telemetry) -> None:
    """A completed, clean stream is reported without an error status, even when asked."""
    app = chat_app(telemetry, [HEALTHY], sinks=[telemetry.sink(error_status=True)])
    with serve(app) as base:
        assert fetch(base) == HEALTHY
        (stream,) = settle(telemetry, STREAM_SPAN)
    assert stream.status.status_code is StatusCode.UNSET
    assert stream.attributes is not None
    assert stream.attributes["streamguard.outcome"] == "completed"
    assert stream.attributes["streamguard.failed"] is False
    assert not stream.events


# -- the metrics ----------------------------------------------------------------------------


def prometheus_points(
    registry: CollectorRegistry, namespace: str = "streamguard"
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The Prometheus sink's samples under the OTel names (``METRIC_NAMES``, inverted) and
    attribute keys, so both sinks' series compare as they are."""
    by_prometheus = {
        prom.replace("streamguard_", f"{namespace}_", 1): otel.replace(
            "streamguard.", f"{namespace.replace('_', '.')}.", 1
        )
        for otel, prom in METRIC_NAMES.items()
    }
    points: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in registry.collect():
        for sample in family.samples:
            name, suffix = sample.name, ""
            if name.endswith(("_count", "_sum")) and family.type == "histogram":
                name, _, suffix = name.rpartition("_")
                suffix = "." + suffix
            elif family.type == "histogram" or name.endswith("_created"):
                continue
            otel = by_prometheus.get(name)
            # A series of the Prometheus sink with no OTel instrument is a metric forgotten.
            assert otel is not None, f"{name} is not in METRIC_NAMES"
            labels = frozenset((f"streamguard.{k}", v) for k, v in sample.labels.items())
            points[(otel + suffix, labels)] = sample.value
    return points


def test_the_metrics_match_the_prometheus_ones(telemetry: Telemetry) -> None:
    """For the same streams, every OTel series has the Prometheus sink's value, and back."""
    registry = CollectorRegistry()
    app = chat_app(telemetry, [ROLE_LATE], sinks=[telemetry.sink()], metrics=registry)
    with serve(app) as base:
        for _ in range(3):
            fetch(base)
        settle(telemetry, STREAM_SPAN, 3)
    otel = telemetry.points()
    prometheus = prometheus_points(registry)
    # Histogram sums are float seconds from one clock read by both: equal.
    assert otel == prometheus
    started = (
        "streamguard.streams.started",
        frozenset({("streamguard.route", CHAT), ("streamguard.protocol", "openai_chat")}),
    )
    assert otel[started] == 3
    assert any(name == "streamguard.violations" and value == 3 for (name, _), value in otel.items())


@pytest.mark.parametrize("namespace", ["streamguard", UPSTREAM_NAMESPACE])
def test_every_prometheus_family_has_an_otel_instrument(namespace: str) -> None:
    """The families are read from the Prometheus sink's registry, not listed here: a metric
    added to ``StreamGuardMetrics`` without its OTel instrument fails this test."""
    registry = CollectorRegistry()
    StreamGuardMetrics(registry, namespace=namespace)
    families = {family.name for family in registry.collect()}
    mirrored = {
        prom.replace("streamguard_", f"{namespace}_", 1).removesuffix("_total")
        for prom in METRIC_NAMES.values()
    }
    assert families == mirrored


def test_a_gateways_metrics_match_the_prometheus_ones(telemetry: Telemetry) -> None:
    """A relay under uvicorn (``tests/relay_app.py``) whose streams are linked to their
    upstream's: the attributed counter moves, and every series matches Prometheus's."""
    from tests.relay_app import relay_app, upstream_app

    registry = CollectorRegistry()
    options: dict[str, Any] = {"timers": {"enabled": False}, "logs": {"enabled": False}}
    with serve(upstream_app()) as upstream_url:
        relay = relay_app(upstream_url, metrics=False, **options)
        guard = StreamGuardMiddleware(
            relay, protocol="openai_chat", metrics=registry, sinks=[telemetry.sink()], **options
        )
        with serve(guard) as relay_url, httpx.Client(base_url=relay_url, timeout=10) as client:
            for relay_mode, upstream in [
                ("faithful", "openai_chat/role_repeated"),  # the upstream's
                ("translate_drop_done", "anthropic/ok_text_end_turn"),  # the gateway's
            ]:
                headers = {"x-relay": relay_mode, "x-upstream": upstream}
                response = client.post("/lane/v1/chat/completions", json={}, headers=headers)
                assert response.status_code == 200

            def ended() -> float:
                points = telemetry.points().items()
                return sum(value for (name, _), value in points if name == "streamguard.streams")

            wait_for(lambda: ended() == 2)
    otel = telemetry.points()
    assert otel == prometheus_points(registry)

    def attributed(kind: str) -> float:
        labels = frozenset({*GATEWAY_LABELS, ("streamguard.attribution", kind)})
        return otel[("streamguard.attributed_violations", labels)]

    assert attributed("upstream") >= 1
    assert attributed("gateway") == 1  # the missing [DONE]
    assert attributed("unknown") == 0


@pytest.mark.parametrize("unchecked", [None, NOT_SAMPLED, COMPRESSED])
def test_every_kind_of_stream_counts_as_in_prometheus(
    telemetry: Telemetry, unchecked: str | None
) -> None:
    """Checked or not, malformed or not, skipping checks or not: the same counts."""
    registry = CollectorRegistry()
    prometheus = StreamGuardMetrics(registry)
    sink = telemetry.sink()
    error = Finding("invalid_json", Severity.ERROR, "m", 0, 0)
    warning = Finding("compressed_stream", Severity.WARNING, "m")
    for protocol, found, outcome, skipped in [
        ("openai_chat", [error, error], Outcome.UNCLOSED, ()),
        ("openai_chat", [warning], Outcome.COMPLETED, ()),
        ("mcp", [], Outcome.CLIENT_DISCONNECT, ("request_body_unread", "no_such_reason")),
    ]:
        ended = replace(report(found), protocol=protocol, outcome=outcome, skipped_checks=skipped)
        for target in (prometheus, sink):
            handle = target.stream_started(CHAT, protocol, unchecked)
            handle.findings(found)
            handle.stream_ended(ended)
    for target in (prometheus, sink):
        target.internal_error("check", "RuntimeError", CHAT, "mcp")
    assert telemetry.points() == prometheus_points(registry)


# -- nothing from the wire, nothing into the stream -----------------------------------------


def test_no_wire_value_is_exported(telemetry: Telemetry) -> None:
    """A stream full of canaries leaves none in any exported span, event or data point."""
    app = chat_app(telemetry, [ROLE_LATE, BROKEN_JSON], sinks=[telemetry.sink(error_status=True)])
    with serve(app) as base:
        fetch(base)
        settle(telemetry, STREAM_SPAN)
    exported = [span.to_json() for span in telemetry.finished()]
    assert any("invalid_json" in text for text in exported)
    assert not [text for text in exported if CANARY_MARKER in text]
    data = telemetry.metrics.get_metrics_data()
    assert data is not None
    assert CANARY_MARKER not in data.to_json()


def test_a_finding_message_and_excerpt_are_never_exported(telemetry: Telemetry) -> None:
    """Even a finding whose message and excerpt hold a wire value exports neither."""
    sink = telemetry.sink()
    tracer = telemetry.tracer_provider.get_tracer("test")
    finding = Finding("invalid_json", Severity.ERROR, f"bad {CANARY}", 3, 120, excerpt=CANARY)
    with tracer.start_as_current_span("request"):
        handle = sink.stream_started(CHAT, "openai_chat", None)
        handle.findings([finding])
        handle.stream_ended(report([finding]))
    (span,) = telemetry.finished()
    assert span.events[0].attributes == {
        "streamguard.rule": "invalid_json",
        "streamguard.severity": "error",
        "streamguard.event_index": 3,
        "streamguard.byte_offset": 120,
    }
    assert CANARY_MARKER not in span.to_json()


def test_a_stream_without_a_recording_span_is_left_alone(telemetry: Telemetry) -> None:
    """No current span (or one not sampled): no span is made, the metrics still count."""
    sink = telemetry.sink()
    handle = sink.stream_started(CHAT, "openai_chat", None)
    handle.stream_ended(report([]))
    unsampled = TracerProvider(sampler=ALWAYS_OFF).get_tracer("test")
    with unsampled.start_as_current_span("request"):
        handle = sink.stream_started(CHAT, "openai_chat", None)
    handle.stream_ended(report([]))
    assert not telemetry.finished()
    ended = ("streamguard.outcome", "completed")
    key = ("streamguard.streams", frozenset({*LABELS, ended}))
    assert telemetry.points()[key] == 2


class _Raising(SpanExporter, SpanProcessor):
    """An exporter, and a span processor, that fail at everything."""

    def export(self, spans: Any) -> SpanExportResult:
        raise OSError("collector down")

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor broken")

    def on_end(self, span: Any) -> None:
        raise RuntimeError("processor broken")


class _RaisingMeterProvider:
    """A meter provider whose instruments raise on every count."""

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        def instrument(*args: Any, **kwargs: Any) -> Any:
            return self

        return instrument

    def add(self, *args: Any) -> None:
        raise RuntimeError("meter broken")

    record = add


def test_a_failing_exporter_never_reaches_the_stream(telemetry: Telemetry) -> None:
    """Failing exporters, processors and instruments: the client still gets every byte."""
    failing = TracerProvider()
    failing.add_span_processor(SimpleSpanProcessor(_Raising()))  # the SDK contains this one
    broken = TracerProvider()
    broken.add_span_processor(_Raising())  # this one raises out of the SDK
    sinks = [
        OpenTelemetrySink(tracer_provider=failing),
        OpenTelemetrySink(tracer_provider=broken, metrics=False),
        OpenTelemetrySink(meter_provider=_RaisingMeterProvider(), spans=False),  # type: ignore[arg-type]
    ]
    registry = CollectorRegistry()
    app = chat_app(telemetry, [ROLE_LATE, BROKEN_JSON], sinks=sinks, metrics=registry)
    with serve(app, log_level="critical") as base:
        for _ in range(2):
            assert fetch(base) == ROLE_LATE + BROKEN_JSON
        guard = middleware(app)
        wait_for(lambda: guard.in_flight == 0)
    # Each stream's failure is counted once, as the session counts any sink's.
    assert guard.internal_errors == 2
    labels = {"route": CHAT, "protocol": "openai_chat"}
    assert registry.get_sample_value("streamguard_internal_errors_total", labels) == 2
    # ... and stops that stream's checking (the session's rule), which still ends reported.
    ended = sum(
        registry.get_sample_value("streamguard_streams_total", {**labels, "outcome": o}) or 0
        for o in Outcome
    )
    assert ended == 2


def middleware(app: FastAPI) -> StreamGuardMiddleware:
    """The app's StreamGuardMiddleware, found down its built middleware stack."""
    layer: Any = app.middleware_stack
    while not isinstance(layer, StreamGuardMiddleware):
        layer = layer.app
    return layer


# -- the transports -------------------------------------------------------------------------


def upstream_app(body: bytes) -> FastAPI:
    """An upstream, not watched, that streams ``body`` on CHAT."""
    app = FastAPI()

    @app.post(CHAT)
    async def chat() -> StreamingResponse:
        async def frames() -> AsyncIterator[bytes]:
            yield body

        return StreamingResponse(frames(), media_type="text/event-stream")

    return app


def test_an_upstream_stream_gets_a_span_under_the_client_span(telemetry: Telemetry) -> None:
    """Through an instrumented client, the stream's span is a child of its client span."""
    registry = CollectorRegistry()
    transport = streamguard.httpx.StreamGuardTransport(
        routes={CHAT: "openai_chat"}, metrics=registry, sinks=[telemetry.sink(upstream=True)]
    )
    with (
        serve(upstream_app(ROLE_LATE)) as base,
        httpx.Client(base_url=base, transport=transport) as client,
    ):
        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=telemetry.tracer_provider)
        with client.stream("POST", CHAT, json={"stream": True}) as response:
            assert response.read() == ROLE_LATE
    spans = telemetry.finished()
    http = one(spans, kind=SpanKind.CLIENT)
    stream = one(spans, name=STREAM_SPAN)
    assert stream.parent is not None
    assert stream.parent.span_id == http.context.span_id
    assert stream.attributes is not None
    assert stream.attributes["streamguard.side"] == "upstream"
    assert stream.attributes["streamguard.outcome"] == "unclosed"
    assert {e.attributes["streamguard.rule"] for e in stream.events} >= {"role_not_first"}  # type: ignore[index]
    assert CANARY_MARKER not in stream.to_json()
    # The upstream instruments mirror streamguard_upstream_*, value for value.
    assert telemetry.points() == prometheus_points(registry, "streamguard_upstream")


def test_an_async_upstream_stream_gets_its_span_too(telemetry: Telemetry) -> None:
    """The async transport reports the same way, under its client span."""

    async def read(base: str) -> bytes:
        transport = streamguard.httpx.AsyncStreamGuardTransport(
            routes={CHAT: "openai_chat"}, metrics=False, sinks=[telemetry.sink(upstream=True)]
        )
        async with httpx.AsyncClient(base_url=base, transport=transport) as client:
            HTTPXClientInstrumentor.instrument_client(
                client, tracer_provider=telemetry.tracer_provider
            )
            async with client.stream("POST", CHAT, json={}) as response:
                return await response.aread()

    with serve(upstream_app(ROLE_LATE)) as base:
        assert asyncio.run(read(base)) == ROLE_LATE
    spans = telemetry.finished()
    stream = one(spans, name=STREAM_SPAN)
    assert stream.parent is not None
    assert stream.parent.span_id == one(spans, kind=SpanKind.CLIENT).context.span_id
    assert stream.attributes is not None
    assert stream.attributes["streamguard.outcome"] == "unclosed"


def test_an_upstream_stream_never_writes_on_the_callers_span(telemetry: Telemetry) -> None:
    """With the global instrumentation, the caller's span (a gateway's server span, still
    recording) stays clean: the upstream stream gets a span of its own under it."""
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        transport = streamguard.httpx.StreamGuardTransport(
            routes={CHAT: "openai_chat"}, metrics=False, sinks=[telemetry.sink(upstream=True)]
        )
        tracer = telemetry.tracer_provider.get_tracer("test")
        with (
            serve(upstream_app(HEALTHY)) as base,
            httpx.Client(base_url=base, transport=transport) as client,
            tracer.start_as_current_span("gateway request") as caller,
        ):
            assert client.post(CHAT, json={}).content == HEALTHY
            assert caller.is_recording()
    finally:
        instrumentor.uninstrument()
    spans = telemetry.finished()
    caller_span = one(spans, name="gateway request")
    assert not any(key.startswith("streamguard.") for key in caller_span.attributes or {})
    stream = one(spans, name=STREAM_SPAN)
    assert stream.parent is not None
    assert stream.parent.span_id == caller_span.context.span_id
    assert stream.attributes is not None
    assert stream.attributes["streamguard.outcome"] == "completed"


def test_the_docs_name_every_attribute_and_metric() -> None:
    """docs/opentelemetry.md lists each span attribute and each instrument with its name."""
    page = (Path(__file__).parent.parent / "docs" / "opentelemetry.md").read_text()
    for attribute in ATTRIBUTES:
        assert f"| `{attribute}` |" in page, attribute
    for instrument, prometheus in METRIC_NAMES.items():
        assert f"| `{instrument}` |" in page, instrument
        assert f"| `{prometheus}` |" in page, prometheus


# -- the extra ------------------------------------------------------------------------------


def test_without_the_api_the_import_names_the_extra() -> None:
    """Importing streamguard.otel without the OTel API says which extra to install."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import streamguard, streamguard.middleware, streamguard.httpx\n"
        "try:\n    import streamguard.otel\n"
        "except ModuleNotFoundError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'streamguard[otel]'" in out


def test_streamguard_never_imports_opentelemetry_by_itself() -> None:
    """The runtime dependencies stay four: the API loads only with streamguard.otel."""
    code = (
        "import sys, streamguard, streamguard.middleware, streamguard.httpx\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def report(findings: list[Finding]) -> StreamReport:
    """A completed openai_chat stream's report with ``findings``."""
    return StreamReport(
        protocol="openai_chat",
        outcome=Outcome.COMPLETED,
        findings=tuple(findings),
        events=4,
        bytes=300,
        body_messages=4,
        started_at=0.0,
        first_byte_at=0.1,
        first_event_at=0.1,
        ended_at=0.5,
        route=CHAT,
    )
