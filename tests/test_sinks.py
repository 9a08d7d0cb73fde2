"""Sinks: what each is told, in which order, and how a failing one is contained."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from streamguard import Finding, Outcome, StreamGuardMiddleware, StreamReport
from streamguard.config import StreamGuardConfig
from streamguard.logs import LogSink
from streamguard.metrics import StreamGuardMetrics
from streamguard.middleware import _Exchange
from streamguard.sinks import COMPRESSED, NOT_SAMPLED, ReportSink, Sink, StreamSink

from .asgi_driver import ScriptedApp, body, http_scope, run, sse_start

STEPS = [
    sse_start(),
    body(b"data: one\n\n"),
    body(b"data: \xff\n\n"),  # invalid_utf8
    body(b"data: cut", more=False),  # unterminated_frame, made at the end
]


class Journal:
    """A sink that writes down every call, per stream."""

    name = "journal"

    def __init__(self, fail_in: str | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail_in = fail_in

    def _note(self, what: str, detail: object) -> None:
        self.calls.append((what, detail))
        if what == self.fail_in:
            raise RuntimeError(f"journal down in {what}")

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> Journal:
        self._note("started", (route, protocol, unchecked))
        return self

    def findings(self, found: Sequence[Finding]) -> None:
        self._note("findings", [finding.rule for finding in found])

    def stream_ended(self, report: StreamReport) -> None:
        self._note("ended", report.outcome)

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        self.calls.append(("internal_error", where))


def test_the_built_in_sinks_and_a_custom_one_satisfy_the_protocols() -> None:
    """Metrics, logs, on_report and a user's class are all ``Sink``s with ``StreamSink``s."""
    sinks: list[Sink] = [
        StreamGuardMetrics(CollectorRegistry()),
        LogSink(StreamGuardConfig().logs),
        ReportSink(print),
        Journal(),
    ]
    for sink in sinks:
        handle: StreamSink | None = sink.stream_started("r", "sse", None)
        assert handle is not None
        assert callable(handle.findings)
        assert callable(handle.stream_ended)


def test_a_sink_hears_start_findings_and_end_in_order() -> None:
    """A custom sink gets the start with its labels, each batch of findings, and the end."""
    journal = Journal()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), metrics=False, sinks=[journal], on_report=reports.append
    )
    run(middleware, http_scope(path="/events"))
    assert journal.calls == [
        ("started", ("__unknown__", "auto", None)),
        ("findings", ["invalid_utf8"]),
        ("findings", ["unterminated_frame"]),
        ("ended", Outcome.COMPLETED),
    ]
    assert [r.outcome for r in reports] == [Outcome.COMPLETED]


def test_on_report_comes_after_every_other_sink() -> None:
    """When ``on_report`` runs, the metrics and the other sinks have the stream's end."""
    registry = CollectorRegistry()
    journal = Journal()
    seen: list[tuple[float | None, int]] = []

    def on_report(report: StreamReport) -> None:
        labels = {"route": "__unknown__", "protocol": "auto", "outcome": "completed"}
        seen.append((registry.get_sample_value("streamguard_streams_total", labels), 0))
        seen.append((None, len(journal.calls)))

    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), metrics=registry, sinks=[journal], on_report=on_report
    )
    run(middleware)
    assert seen == [(1.0, 0), (None, 4)]


@pytest.mark.parametrize("fail_in", ["started", "findings", "ended"])
def test_a_failing_sink_is_contained_and_counted_once(fail_in: str) -> None:
    """A sink raising anywhere: the stream is delivered, one internal error names the sink,
    and every other sink still gets the report."""
    journal = Journal(fail_in=fail_in)
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), metrics=False, sinks=[journal], on_report=reports.append
    )
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == STEPS
    assert middleware.internal_errors == 1
    errors = [entry for entry in logs if entry["event"] == "streamguard_internal_error"]
    assert [entry["where"] for entry in errors] == ["journal"]
    assert ("internal_error", "journal") in journal.calls
    assert len(reports) == 1
    if fail_in != "ended":
        assert reports[0].internal_error is not None  # the checking stopped there


def test_a_sink_whose_findings_failed_still_gets_the_end() -> None:
    """After its findings raised, a sink still hears the end, so its own counts balance."""
    journal = Journal(fail_in="findings")
    run(StreamGuardMiddleware(ScriptedApp(STEPS), metrics=False, sinks=[journal]))
    assert [what for what, _ in journal.calls] == ["started", "findings", "internal_error", "ended"]


def test_a_sink_whose_start_failed_hears_nothing_more() -> None:
    """A sink whose ``stream_started`` raised never opened: no findings, no end."""
    journal = Journal(fail_in="started")
    run(StreamGuardMiddleware(ScriptedApp(STEPS), metrics=False, sinks=[journal]))
    assert [what for what, _ in journal.calls] == ["started", "internal_error"]


def test_internal_errors_are_logged_with_the_stream_logs_off() -> None:
    """``logs.enabled=False`` silences the stream events, not streamguard's own failures."""
    journal = Journal(fail_in="ended")
    middleware = StreamGuardMiddleware(
        ScriptedApp(STEPS), metrics=False, logs={"enabled": False}, sinks=[journal]
    )
    with capture_logs() as logs:
        run(middleware)
    assert [entry["event"] for entry in logs] == ["streamguard_internal_error"]


@pytest.mark.parametrize(
    ("options", "start", "unchecked"),
    [
        ({}, sse_start(), None),
        ({"sample_rate": 0.0}, sse_start(), NOT_SAMPLED),
        ({}, sse_start((b"content-encoding", b"gzip")), COMPRESSED),
    ],
)
def test_a_sink_is_told_whether_the_frames_are_checked(
    options: dict[str, float], start: dict[str, object], unchecked: str | None
) -> None:
    """``unchecked`` says why a stream's frames go unchecked: not sampled, or compressed."""
    journal = Journal()
    steps = [start, body(b"data: one\n\n", more=False)]
    run(StreamGuardMiddleware(ScriptedApp(steps), metrics=False, sinks=[journal], **options))
    assert journal.calls[0] == ("started", ("__unknown__", "auto", unchecked))


def test_the_stream_watch_is_built_from_collaborators_not_the_middleware() -> None:
    """A stream's state holds the shared collaborators, never the middleware itself."""
    parameters = list(inspect.signature(_Exchange).parameters)
    assert parameters == ["seam", "scope", "receive", "send"]
    assert "_guard" not in _Exchange.__slots__
