"""Prometheus metrics: names, labels, zero-initialisation, live counting, cardinality."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from prometheus_client import CollectorRegistry

from streamguard import Outcome, StreamGuardMiddleware, StreamReport
from streamguard.metrics import StreamGuardMetrics
from streamguard.protocols import CHECKERS
from streamguard.report import CHECKING_BUDGET, SKIP_REASONS, Severity
from streamguard.rules import rules_for, skip_reasons_for

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start

EXPECTED_NAMES = {
    "streamguard_streams_started",
    "streamguard_streams",
    "streamguard_unchecked_streams",
    "streamguard_malformed_streams",
    "streamguard_violations",
    "streamguard_attributed_violations",
    "streamguard_attributed_streams",
    "streamguard_checks_skipped",
    "streamguard_streams_in_progress",
    "streamguard_stream_duration_seconds",
    "streamguard_time_to_first_event_seconds",
    "streamguard_frames",
    "streamguard_bytes",
    "streamguard_internal_errors",
    "streamguard_captures",
}


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def series(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in registry.collect()
        for sample in family.samples
    }


def guarded(app: Any, registry: CollectorRegistry, **options: Any) -> StreamGuardMiddleware:
    return StreamGuardMiddleware(app, metrics=registry, logs={"enabled": False}, **options)


def test_metric_names_and_labels() -> None:
    """The families are exactly the published names, each labelled route and protocol
    (but ``captures``, the process's)."""
    registry = CollectorRegistry()
    StreamGuardMetrics(registry)
    families = {family.name: family for family in registry.collect()}
    assert set(families) == EXPECTED_NAMES
    assert families["streamguard_streams"].type == "counter"
    assert families["streamguard_streams_in_progress"].type == "gauge"
    assert families["streamguard_stream_duration_seconds"].type == "histogram"


def test_many_apps_share_one_registry_without_registering_twice() -> None:
    """Building several middlewares on one registry reuses one StreamGuardMetrics."""
    registry = CollectorRegistry()
    first = guarded(ScriptedApp([]), registry)
    second = guarded(ScriptedApp([]), registry)
    assert first.metrics is second.metrics


def test_configured_routes_are_initialised_to_zero() -> None:
    """Every configured route has a 0 for each outcome and each of its protocol's rules."""
    registry = CollectorRegistry()
    guarded(ScriptedApp([]), registry, routes={"/v1/chat/completions": "openai_chat"})
    labels = {"route": "/v1/chat/completions", "protocol": "openai_chat"}
    for outcome in Outcome:
        assert (
            registry.get_sample_value(
                "streamguard_streams_total", {**labels, "outcome": outcome.value}
            )
            == 0.0
        )
    for rule in rules_for("openai_chat"):
        assert (
            registry.get_sample_value("streamguard_violations_total", {**labels, "rule": rule.name})
            == 0.0
        )
    assert registry.get_sample_value("streamguard_streams_in_progress", labels) == 0.0


def test_series_can_wait_for_their_routes_first_stream() -> None:
    """With ``zero_series_at_start=False`` no route has a series before its first stream."""
    registry = CollectorRegistry()
    routes = {"/v1/chat/completions": "openai_chat", "/v1/messages": "anthropic"}
    steps = [sse_start(), body(b"data: [DONE]\n\n", more=False)]
    app = guarded(ScriptedApp(steps), registry, routes=routes, zero_series_at_start=False)
    assert series(registry) == set()
    run(app, http_scope(path="/v1/chat/completions"))
    routes_seen = {dict(labels).get("route") for _name, labels in series(registry)}
    assert routes_seen == {"/v1/chat/completions"}


def test_completed_stream_is_counted() -> None:
    """A clean stream counts as started and completed, with its frames, bytes and duration."""
    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\ndata: b\n\n"), body(b"", more=False)]
    run(guarded(ScriptedApp(steps), registry, protocol="sse"), http_scope(path="/raw/123"))
    labels = {"route": "__unknown__", "protocol": "sse"}
    assert value(registry, "streamguard_streams_started_total", **labels) == 1
    assert value(registry, "streamguard_streams_total", **labels, outcome="completed") == 1
    assert value(registry, "streamguard_frames_total", **labels) == 2
    assert value(registry, "streamguard_bytes_total", **labels) == 18
    assert value(registry, "streamguard_stream_duration_seconds_count", **labels) == 1
    assert value(registry, "streamguard_time_to_first_event_seconds_count", **labels) == 1
    assert value(registry, "streamguard_malformed_streams_total", **labels) == 0
    assert value(registry, "streamguard_streams_in_progress", **labels) == 0


def test_violation_is_counted_while_the_stream_is_open() -> None:
    """A finding is counted when it is made, before the stream ends."""
    registry = CollectorRegistry()
    labels = {"route": "__unknown__", "protocol": "sse", "rule": "invalid_utf8"}
    seen_mid_stream: list[float] = []

    class Probe(Recorder):
        async def send(self, message: dict[str, Any]) -> None:
            await super().send(message)
            if len(self.sent) == 2:
                seen_mid_stream.append(value(registry, "streamguard_violations_total", **labels))
                seen_mid_stream.append(
                    value(
                        registry,
                        "streamguard_streams_in_progress",
                        route="__unknown__",
                        protocol="sse",
                    )
                )

    steps = [sse_start(), body(b"data: \xff\n\n"), body(b"data: x"), body(b"", more=False)]
    run(guarded(ScriptedApp(steps), registry, protocol="sse"), recorder=Probe(incoming=[]))
    assert seen_mid_stream == [1.0, 1.0]
    labels.pop("rule")
    assert value(registry, "streamguard_malformed_streams_total", **labels) == 1
    assert value(registry, "streamguard_violations_total", **labels, rule="unterminated_frame") == 1
    assert value(registry, "streamguard_streams_in_progress", **labels) == 0


@pytest.mark.parametrize(
    ("steps", "outcome"),
    [
        ([sse_start(), body(b"data: a\n\n")], "unclosed"),
        ([sse_start(), body(b"data: a\n\n"), ValueError("boom")], "app_error"),
    ],
)
def test_outcomes_are_counted(steps: list[Any], outcome: str) -> None:
    """Each way a stream ends increments its own outcome series."""
    registry = CollectorRegistry()
    run(guarded(ScriptedApp(steps), registry, protocol="sse"))
    labels = {"route": "__unknown__", "protocol": "sse"}
    assert value(registry, "streamguard_streams_total", **labels, outcome=outcome) == 1
    assert value(registry, "streamguard_streams_in_progress", **labels) == 0


def fastapi_app() -> FastAPI:
    app = FastAPI()

    async def frames() -> Any:
        yield b"data: a\n\n"

    @app.get("/v1/models/{model}/stream")
    async def stream(model: str) -> StreamingResponse:
        return StreamingResponse(frames(), media_type="text/event-stream")

    @app.get("/{anything:path}")
    async def fallback(anything: str) -> StreamingResponse:
        return StreamingResponse(frames(), media_type="text/event-stream")

    return app


def run_asgi_paths(middleware: StreamGuardMiddleware, paths: list[str]) -> None:
    for path in paths:
        _, raised = run(middleware, http_scope(path=path))
        assert raised is None


def test_route_label_is_the_template_not_the_raw_path() -> None:
    """Parametrised routes are labelled by their template, so IDs never become labels."""
    registry = CollectorRegistry()
    middleware = guarded(fastapi_app(), registry, protocol="sse")
    run_asgi_paths(middleware, ["/v1/models/gpt-a/stream", "/v1/models/gpt-b/stream"])
    assert (
        value(
            registry,
            "streamguard_streams_started_total",
            route="/v1/models/{model}/stream",
            protocol="sse",
        )
        == 2
    )


def test_configured_name_wins_and_matches_templates() -> None:
    """A configured route's name is its label, matched by exact path or by template."""
    registry = CollectorRegistry()
    middleware = guarded(
        fastapi_app(),
        registry,
        routes={"/v1/models/{model}/stream": {"protocol": "sse", "name": "models"}},
    )
    run_asgi_paths(middleware, ["/v1/models/x/stream"])
    assert value(registry, "streamguard_streams_started_total", route="models", protocol="sse") == 1


def test_unlisted_routes_can_be_ignored() -> None:
    """With ``watch_unlisted=False`` only configured routes are watched."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    app = ScriptedApp([sse_start(), body(b"data: a\n\n", more=False)])
    middleware = StreamGuardMiddleware(
        app,
        metrics=registry,
        watch_unlisted=False,
        routes={"/watched": "sse"},
        on_report=reports.append,
    )
    run(middleware, http_scope(path="/other"))
    run(middleware, http_scope(path="/watched"))
    assert [r.route for r in reports] == ["/watched"]
    assert middleware.skipped["unlisted"] == 1


def test_many_distinct_paths_add_no_series() -> None:
    """Thousands of distinct unmatched and parametrised paths leave the series count unchanged."""
    registry = CollectorRegistry()
    middleware = guarded(fastapi_app(), registry, protocol="sse")
    run_asgi_paths(middleware, ["/scan/0", "/v1/models/m0/stream"])
    before = series(registry)
    run_asgi_paths(middleware, [f"/scan/{i}?q={i}" for i in range(1, 300)])
    run_asgi_paths(middleware, [f"/v1/models/m{i}/stream" for i in range(1, 300)])
    assert series(registry) == before
    labels_seen = {dict(labels).get("route") for _, labels in before}
    assert labels_seen <= {None, "/{anything}", "/v1/models/{model}/stream"}


def test_metrics_can_be_turned_off() -> None:
    """``metrics=False`` registers and counts nothing."""
    middleware = StreamGuardMiddleware(ScriptedApp([]), metrics=False)
    assert middleware.metrics is None


def test_severity_error_marks_malformed_only() -> None:
    """A warning-only stream is not counted as malformed."""
    registry = CollectorRegistry()
    start = sse_start((b"content-length", b"9"))
    run(guarded(ScriptedApp([start, body(b"data: a\n\n", more=False)]), registry, protocol="sse"))
    labels = {"route": "__unknown__", "protocol": "sse"}
    assert (
        value(registry, "streamguard_violations_total", **labels, rule="content_length_on_stream")
        == 1
    )
    assert value(registry, "streamguard_malformed_streams_total", **labels) == 0
    assert Severity.WARNING.value == "warning"


def test_metrics_app_serves_the_registry() -> None:
    """``metrics_app(registry)`` serves that registry in the Prometheus text format."""
    import asyncio

    import httpx

    from streamguard.metrics import metrics_app

    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    run(guarded(ScriptedApp(steps), registry, protocol="sse"))

    async def scrape() -> str:
        transport = httpx.ASGITransport(app=metrics_app(registry))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return (await client.get("/")).text

    text = asyncio.run(scrape())
    line = 'streamguard_streams_total{outcome="completed",protocol="sse",route="__unknown__"} 1.0'
    assert line in text


def test_a_new_registry_never_gets_metrics_of_a_dead_one() -> None:
    """Default metrics are kept per registry object, not per id(), which can be reused.

    Each registry is collected before the next is made, so the next one can take its
    address. ``gc.freeze`` first: the collections then walk only what this test made, not
    the whole session's heap (50 full collections cost 37 s late in a run, these 50 cost
    milliseconds, and free the same registries).
    """
    import gc

    gc.freeze()
    try:
        seen = _registry_ids_while_each_gets_its_own_metrics()
    finally:
        gc.unfreeze()
    assert len(seen) < 50  # ids were reused, which is what made the old cache wrong


def _registry_ids_while_each_gets_its_own_metrics() -> set[int]:
    import gc

    seen = set()
    for _ in range(50):
        registry = CollectorRegistry()
        metrics = StreamGuardMetrics.default(registry)
        assert (
            registry.get_sample_value(
                "streamguard_streams_started_total", {"route": "r", "protocol": "p"}
            )
            is None
        )
        metrics.for_stream("r", "p").stream_started()
        assert (
            registry.get_sample_value(
                "streamguard_streams_started_total", {"route": "r", "protocol": "p"}
            )
            == 1.0
        )
        seen.add(id(registry))
        del registry, metrics
        gc.collect()
    return seen


def test_a_path_decided_route_is_initialised_under_its_protocol() -> None:
    """A configured ``auto`` route whose path names a protocol gets zeros under that label,
    the one its streams carry, and no ``auto`` series at all."""
    registry = CollectorRegistry()
    route = "/v1beta/models/gemini-pro:streamGenerateContent"
    guarded(ScriptedApp([]), registry, routes={route: "auto", "/events": "auto"})
    protocols = {
        dict(labels).get("protocol")
        for _, labels in series(registry)
        if dict(labels).get("route") == route
    }
    assert protocols == {"gemini"}
    labels = {"route": route, "protocol": "gemini"}
    assert (
        registry.get_sample_value(
            "streamguard_violations_total", {**labels, "rule": "content_after_finish"}
        )
        == 0.0
    )
    assert (
        registry.get_sample_value(
            "streamguard_streams_total",
            {"route": "/events", "protocol": "auto", "outcome": "unclosed"},
        )
        == 0.0
    )

    gemini_chunk = (
        b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},'
        b'"finishReason":"STOP","index":0}]}\r\n\r\n'
    )
    steps = [sse_start(), body(gemini_chunk, more=False)]
    middleware = guarded(ScriptedApp(steps), registry, routes={route: "auto"})
    run(middleware, http_scope(path=route))
    assert value(registry, "streamguard_streams_total", **labels, outcome="completed") == 1


def test_only_the_rules_of_a_protocol_are_initialised() -> None:
    """A route's zeros cover the rules that can fire for its protocol, and no other."""
    registry = CollectorRegistry()
    guarded(ScriptedApp([]), registry, routes={"/chat": "openai_chat"})
    rules = {
        dict(labels)["rule"]
        for name, labels in series(registry)
        if name == "streamguard_violations_total"
    }
    assert rules == {rule.name for rule in rules_for("openai_chat")}


@pytest.mark.parametrize(
    ("options", "start", "reason", "inspected"),
    [
        # Framed on the every-stream tier; a compressed body cannot be parsed at all.
        ({"sample_rate": 0.0}, sse_start(), "not_sampled", True),
        ({}, sse_start((b"content-encoding", b"gzip")), "compressed", False),
    ],
)
def test_unchecked_streams_are_counted_apart_and_never_malformed(
    options: dict[str, Any], start: dict[str, Any], reason: str, inspected: bool
) -> None:
    """A stream whose frames go unchecked counts in streams_total and, with its reason, in
    unchecked_streams_total; an error finding it still gets does not make it malformed."""
    registry = CollectorRegistry()
    steps = [start, body(b"data: a\n\n")]  # the app returns: response_not_finished, unclosed
    reports: list[StreamReport] = []
    middleware = guarded(
        ScriptedApp(steps), registry, protocol="sse", on_report=reports.append, **options
    )
    run(middleware)
    [report] = reports
    assert (report.outcome, report.inspected, report.malformed) == (
        Outcome.UNCLOSED,
        inspected,
        True,
    )
    labels = {"route": "__unknown__", "protocol": "sse"}
    assert value(registry, "streamguard_streams_total", **labels, outcome="unclosed") == 1
    assert (
        value(
            registry,
            "streamguard_unchecked_streams_total",
            **labels,
            outcome="unclosed",
            reason=reason,
        )
        == 1
    )
    assert value(registry, "streamguard_malformed_streams_total", **labels) == 0
    assert (
        value(registry, "streamguard_violations_total", **labels, rule="response_not_finished") == 1
    )


def test_checked_streams_are_not_counted_as_unchecked() -> None:
    """A checked stream leaves unchecked_streams_total at 0, for every reason and outcome."""
    registry = CollectorRegistry()
    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    run(guarded(ScriptedApp(steps), registry, protocol="sse"))
    unchecked = [
        sample.value
        for family in registry.collect()
        if family.name == "streamguard_unchecked_streams"
        for sample in family.samples
        if sample.name == "streamguard_unchecked_streams_total"
    ]
    assert len(unchecked) == 2 * len(Outcome)  # zero-initialised: two reasons, every outcome
    assert set(unchecked) == {0.0}


# -- checks skipped ---------------------------------------------------------------------------

_MCP_REQUEST = {"jsonrpc": "2.0", "method": "tools/call", "params": {}}
_PROGRESS = (
    b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
    b'"params":{"progressToken":1,"progress":1}}\n\n'
)
_ANSWER = b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'


def _mcp_stream(
    registry: CollectorRegistry,
    scope: dict[str, Any],
    request_body: bytes,
    data: bytes,
    **options: Any,
) -> StreamReport:
    """One MCP stream through the middleware, counted in ``registry``; its report."""
    reports: list[StreamReport] = []
    steps = ["receive", sse_start(), body(data), body(b"", more=False)]
    middleware = guarded(
        ScriptedApp(steps), registry, routes={"/mcp": "mcp"}, on_report=reports.append, **options
    )
    run(middleware, scope, Recorder(incoming=[{"type": "http.request", "body": request_body}]))
    [report] = reports
    return report


def _skipped(registry: CollectorRegistry, reason: str) -> float:
    return value(
        registry, "streamguard_checks_skipped_total", route="/mcp", protocol="mcp", reason=reason
    )


#: The reasons a checker gives (all three MCP's); ``checking_budget`` is the monitor's, for
#: a stream of any protocol, and has its series from its first count.
CHECKER_REASONS = tuple(reason for reason in SKIP_REASONS if reason != CHECKING_BUDGET)


def test_skip_reasons_are_a_closed_set_declared_by_the_checkers() -> None:
    """Every reason a checker declares is one of SKIP_REASONS; MCP declares all three."""
    for protocol, checker in CHECKERS.items():
        assert set(checker.SKIPS) <= set(SKIP_REASONS), protocol
    assert skip_reasons_for("mcp") == CHECKER_REASONS
    assert skip_reasons_for("openai_chat") == ()
    assert skip_reasons_for("auto") == skip_reasons_for("nonesuch") == ()


def test_checks_skipped_are_initialised_per_protocol() -> None:
    """An MCP route gets a zero for each reason; a route of another protocol gets none."""
    registry = CollectorRegistry()
    guarded(ScriptedApp([]), registry, routes={"/mcp": "mcp", "/chat": "openai_chat"})
    found = {
        (dict(labels)["route"], dict(labels)["reason"])
        for name, labels in series(registry)
        if name == "streamguard_checks_skipped_total"
    }
    assert found == {("/mcp", reason) for reason in CHECKER_REASONS}
    assert all(_skipped(registry, reason) == 0 for reason in CHECKER_REASONS)


def test_checks_skipped_are_counted_by_reason() -> None:
    """A batch over MAX_REQUEST_IDS, a resumed GET and a body over request_peek_bytes each
    count once under their reason; a request that skips nothing counts nowhere."""
    import json

    from streamguard.protocols._jsonrpc import MAX_REQUEST_IDS

    registry = CollectorRegistry()
    post = http_scope("POST", "/mcp")
    one = json.dumps({**_MCP_REQUEST, "id": 1}).encode()
    batch = json.dumps([{**_MCP_REQUEST, "id": i} for i in range(MAX_REQUEST_IDS)]).encode()
    _mcp_stream(registry, post, one, _ANSWER)
    _mcp_stream(registry, post, batch, _PROGRESS)  # exactly the bound: nothing skipped
    _mcp_stream(registry, http_scope("GET", "/mcp"), b"", _PROGRESS)
    assert {reason: _skipped(registry, reason) for reason in CHECKER_REASONS} == dict.fromkeys(
        CHECKER_REASONS, 0
    )

    over = json.dumps([{**_MCP_REQUEST, "id": i} for i in range(MAX_REQUEST_IDS + 1)]).encode()
    report = _mcp_stream(registry, post, over, _PROGRESS)
    assert report.rules() == ["missing_terminal"]
    resumed = http_scope("GET", "/mcp", headers=[(b"last-event-id", b"7")])
    _mcp_stream(registry, resumed, b"", _ANSWER)
    _mcp_stream(registry, resumed, b"", _ANSWER)
    _mcp_stream(registry, post, one, _ANSWER, request_peek_bytes=8)
    assert {reason: _skipped(registry, reason) for reason in CHECKER_REASONS} == {
        "request_ids_over_bound": 1,
        "resumed_stream": 2,
        "request_body_unread": 1,
    }


def test_an_unchecked_stream_counts_no_skipped_checks() -> None:
    """A stream left unsampled is counted as unchecked, not as one that skipped checks."""
    registry = CollectorRegistry()
    resumed = http_scope("GET", "/mcp", headers=[(b"last-event-id", b"7")])
    _mcp_stream(registry, resumed, b"", _ANSWER, sample_rate=0.0)
    assert _skipped(registry, "resumed_stream") == 0
    labels = {"route": "/mcp", "protocol": "mcp", "reason": "not_sampled", "outcome": "completed"}
    assert value(registry, "streamguard_unchecked_streams_total", **labels) == 1


def test_a_reason_outside_the_closed_set_is_not_counted() -> None:
    """The reason label stays bounded: a report naming another reason adds no series."""
    registry = CollectorRegistry()
    metrics = StreamGuardMetrics(registry)
    children = metrics.for_stream("/mcp", "auto")
    children.stream_started()
    before = series(registry)
    report = StreamReport(
        protocol="mcp",
        outcome=Outcome.COMPLETED,
        findings=(),
        events=0,
        bytes=0,
        body_messages=0,
        started_at=0.0,
        first_byte_at=None,
        first_event_at=None,
        ended_at=0.0,
        skipped_checks=("made_up", "resumed_stream"),
    )
    children.stream_ended(report)
    added = {labels for _, labels in series(registry) - before}
    assert {dict(labels).get("reason") for labels in added} == {"resumed_stream"}
    assert (
        value(
            registry,
            "streamguard_checks_skipped_total",
            route="/mcp",
            protocol="auto",
            reason="resumed_stream",
        )
        == 1
    )


def test_the_docs_table_names_every_family() -> None:
    """docs/metrics.md's table of the metrics has a row for each family, with its type."""
    page = (Path(__file__).parent.parent / "docs" / "metrics.md").read_text()
    registry = CollectorRegistry()
    StreamGuardMetrics(registry)
    for family in registry.collect():
        suffix = "_total" if family.type == "counter" else ""
        kind = "gauge (`livesum`)" if family.type == "gauge" else family.type
        assert f"| `{family.name}{suffix}` | {kind} |" in page, family.name
