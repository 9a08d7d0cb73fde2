"""One giant body message is checked a window at a time: its memory does not grow with it.

An app (or a proxy) may hand the server a whole answer in one ``send``. The monitor then
parses and checks it in ``FEED_WINDOW`` slices, and the middleware hands each slice's
findings to the sinks at once, so what one message holds is bounded by the window.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streamguard import StreamGuardMiddleware, StreamMonitor, StreamReport
from streamguard.monitor import FEED_WINDOW
from streamguard.report import Finding

from .asgi_driver import ScriptedApp, body, http_scope, run, sse_start
from .helpers import peak_memory

#: A 97-byte event that breaks a chat rule (``schema_mismatch``) and none of plain SSE's.
EVENT = b'data: {"x": "' + b"a" * 80 + b'"}\n\n'
SMALL, LARGE = 2_500, 10_000  # events: about 0.24 MB and 0.97 MB in one message


def guarded_peak(protocol: str, events: int) -> tuple[StreamReport, float, int]:
    """The report, the violations counted, and the peak traced memory of one stream sent
    as one body message of ``events`` events (the message itself made beforehand)."""
    message = body(EVENT * events, more=False)
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp([sse_start(), message]),
        protocol=protocol,
        metrics=registry,
        on_report=reports.append,
        logs={"enabled": False},
        # Traced, allocation is several times slower: the 10,000 events' checking would
        # go past the checking-time budget, which this memory test does not measure.
        checking_budget_ms=0,
    )
    _, peak = peak_memory(lambda: run(middleware, http_scope()))
    [report] = reports
    violations = sum(
        sample.value
        for metric in registry.collect()
        if metric.name == "streamguard_violations"
        for sample in metric.samples
        if sample.name.endswith("_total")
    )
    return report, violations, peak


@pytest.mark.parametrize(("protocol", "finding_per_event"), [("sse", False), ("openai_chat", True)])
def test_one_giant_message_costs_what_a_small_one_does(
    protocol: str, finding_per_event: bool
) -> None:
    """Four times the events in one message, with a finding per event or none: the peak
    does not grow with the message, and stays under the per-stream ceiling (it grew by
    about 3 KiB an event, findings included, when a message was checked whole)."""
    small, _, small_peak = guarded_peak(protocol, SMALL)
    large, violations, large_peak = guarded_peak(protocol, LARGE)
    assert (small.events, large.events) == (SMALL, LARGE)
    counted = len(large.findings) + sum(count for _, count in large.findings_dropped)
    assert violations == counted  # the sinks saw every finding, kept or not
    assert (counted > LARGE) is finding_per_event
    assert large_peak - small_peak < 512 * 1024
    assert large_peak < 8 * 1024 * 1024


def test_a_message_checked_in_windows_finds_what_small_chunks_find() -> None:
    """A message of several windows, with its findings emitted window by window or
    returned at once, gives the findings that 1 KiB chunks of the same bytes give."""
    data = b"data: [DONE]\n\n" + EVENT * (3 * FEED_WINDOW // len(EVENT) + 5) + b"data: tail"
    assert len(data) > 3 * FEED_WINDOW

    def in_chunks(size: int) -> list[Finding]:
        monitor = StreamMonitor("openai_chat")
        found: list[Finding] = []
        for start in range(0, len(data), size):
            found.extend(monitor.feed(data[start : start + size]))
        return found

    emitted: list[Finding] = []
    batches: list[int] = []

    def emit(found: Any) -> None:
        batches.append(len(found))
        emitted.extend(found)

    whole = StreamMonitor("openai_chat")
    returned = list(whole.feed(data))
    windowed = StreamMonitor("openai_chat")
    assert windowed.feed(data, emit) == []
    expected = in_chunks(1024)
    assert returned == emitted == expected
    assert len(batches) > 1
    assert max(batches) <= FEED_WINDOW // len(EVENT) + 1


def test_the_metrics_count_every_finding_of_a_mixed_window_by_rule() -> None:
    """A window whose findings alternate two rules: each rule's counter gets exactly the
    findings made of it, kept on the report or only counted there."""
    mixed = (EVENT + b"data: x\n\n") * 3_000
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp([sse_start(), body(mixed), body(b"", more=False)]),
        protocol="openai_chat",
        metrics=registry,
        on_report=reports.append,
        logs={"enabled": False},
        timers={"burst_min_events": 10**9},  # no buffered_flush: two rules only
    )
    run(middleware, http_scope())
    [report] = reports
    made: dict[str, int] = dict(report.findings_dropped)
    for finding in report.findings:
        made[finding.rule] = made.get(finding.rule, 0) + 1
    counted = {
        sample.labels["rule"]: sample.value
        for metric in registry.collect()
        if metric.name == "streamguard_violations"
        for sample in metric.samples
        if sample.name.endswith("_total") and sample.value
    }
    # (the chunks carry no id, model or created either: envelope_field_missing, once)
    assert made == {
        "schema_mismatch": 3_000,
        "invalid_json": 3_000,
        "missing_terminal": 1,
        "envelope_field_missing": 1,
    }
    assert counted == made
