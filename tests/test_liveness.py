"""Liveness: body_not_ended, stalled and buffered_flush, live while open and at the end."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streamguard import Outcome, StreamEnd, StreamGuardMiddleware, StreamMonitor, StreamReport
from streamguard.liveness import Liveness, LivenessLimits

from .asgi_driver import Recorder, body, http_scope, run, sse_start
from .helpers import FakeClock

LIMITS = LivenessLimits(
    body_end_grace_s=5.0,
    idle_limit_s=60.0,
    burst_window_s=0.02,
    burst_first_event_ratio=20.0,
    burst_min_events=16,
)


def timed_monitor(
    protocol: str = "sse", limits: LivenessLimits = LIMITS
) -> tuple[StreamMonitor, FakeClock]:
    clock = FakeClock()
    return StreamMonitor(protocol, clock=clock, liveness=limits), clock


def feed_at(monitor: StreamMonitor, clock: FakeClock, at: float, data: bytes) -> None:
    clock.now = at
    monitor.feed(data)


# -- body_not_ended --------------------------------------------------------------------


def test_body_left_open_after_terminal_is_reported_once_while_open(done_protocol: str) -> None:
    """Past the grace period after the terminal, one finding appears before the stream ends."""
    monitor, clock = timed_monitor(done_protocol)
    feed_at(monitor, clock, 0.1, b"data: a\n\ndata: END\n\n")
    assert monitor.poll(5.0) == []
    [finding] = monitor.poll(5.2)
    assert (finding.rule, finding.event_index, finding.byte_offset) == ("body_not_ended", 2, 20)
    assert monitor.poll(30.0) == []
    clock.now = 40.0
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, ["body_not_ended"])
    assert report.ended_at == 40.0


def test_the_grace_starts_when_the_server_takes_the_terminal(done_protocol: str) -> None:
    """A terminal whose message the server holds (a slow reader) is not yet sent: the grace
    for ending the body starts when the server takes the message."""
    clock = FakeClock()
    monitor = StreamMonitor(done_protocol, clock=clock, liveness=LIMITS, confirms_delivery=True)
    feed_at(monitor, clock, 0.1, b"data: a\n\ndata: END\n\n")
    assert monitor.poll(30.0) == []  # the send is still pending
    clock.now = 30.0
    monitor.delivered()
    assert monitor.poll(34.9) == []
    [finding] = monitor.poll(35.1)
    assert finding.rule == "body_not_ended"


def test_a_send_held_by_the_server_is_no_stall() -> None:
    """While the server holds a message the app is waiting, not silent; the silence that
    counts starts when the server takes it."""
    clock = FakeClock()
    monitor = StreamMonitor("sse", clock=clock, liveness=LIMITS, confirms_delivery=True)
    feed_at(monitor, clock, 0.1, b"data: a\n\n")
    assert monitor.poll(100.0) == []
    clock.now = 100.0
    monitor.delivered()
    assert monitor.poll(159.0) == []
    [finding] = monitor.poll(161.0)
    assert finding.rule == "stalled"
    clock.now = 162.0
    monitor.feed(b"data: b\n\n")
    monitor.delivered()
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.rules() == ["stalled"]  # the held send is no gap at the end either


def test_terminal_and_body_end_ms_apart_are_clean(done_protocol: str) -> None:
    """A terminal followed a few milliseconds later by the body end is healthy."""
    monitor, clock = timed_monitor(done_protocol)
    feed_at(monitor, clock, 0.1, b"data: a\n\ndata: END\n\n")
    assert monitor.poll(0.104) == []
    feed_at(monitor, clock, 0.105, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.findings == ()


def test_body_not_ended_found_at_the_end_without_polls(done_protocol: str) -> None:
    """Without a poller (trio, offline) the finding is made when the stream ends."""
    monitor, clock = timed_monitor(done_protocol)
    feed_at(monitor, clock, 0.1, b"data: END\n\n")
    clock.now = 9.0
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    # The terminal was delivered, so the late close is a fact, not the outcome.
    assert (report.outcome, report.rules()) == (Outcome.COMPLETED, ["body_not_ended"])
    assert report.client_closed_after_end is True


# -- stalled -----------------------------------------------------------------------------


def test_stall_is_reported_once_per_stall() -> None:
    """No bytes past the idle limit is one finding; new bytes end the stall, a new one counts."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 1.0, b"data: a\n\n")
    assert monitor.poll(60.9) == []
    assert [f.rule for f in monitor.poll(61.5)] == ["stalled"]
    assert monitor.poll(100.0) == []
    feed_at(monitor, clock, 101.0, b"data: b\n\n")
    assert monitor.poll(150.0) == []
    assert [f.rule for f in monitor.poll(161.5)] == ["stalled"]
    clock.now = 162.0
    assert monitor.finish(StreamEnd.CLIENT_DISCONNECT).rules() == ["stalled", "stalled"]


def test_keepalive_comments_count_as_bytes() -> None:
    """A stream kept alive by comments under the idle limit is not stalled."""
    monitor, clock = timed_monitor()
    for second in range(0, 300, 15):
        feed_at(monitor, clock, float(second), b": keep-alive\n\n")
        assert monitor.poll(second + 14.9) == []
    feed_at(monitor, clock, 300.0, b"data: finally\n\n")
    feed_at(monitor, clock, 300.1, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.findings == ()
    assert report.max_event_gap == 0.0  # a single event


def test_stall_found_at_the_end_without_polls() -> None:
    """Without a poller, the longest gap between bytes decides at the end."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 1.0, b"data: a\n\n")
    feed_at(monitor, clock, 90.0, b"data: b\n\n")
    feed_at(monitor, clock, 90.1, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.rules() == ["stalled"]
    assert report.max_event_gap == pytest.approx(89.0)


def test_slow_but_steady_stream_is_clean() -> None:
    """One event every ten seconds for ten minutes is slow, not stalled."""
    monitor, clock = timed_monitor()
    for i in range(60):
        feed_at(monitor, clock, 10.0 * i, b"data: tick\n\n")
        assert monitor.poll(10.0 * i + 9.9) == []
    feed_at(monitor, clock, 600.0, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


# -- buffered_flush ----------------------------------------------------------------------


def events(n: int) -> bytes:
    return b"".join(b"data: token %d\n\n" % i for i in range(n))


def test_whole_stream_in_one_body_message_is_buffered_flush() -> None:
    """Sixteen or more events in a single body message were buffered upstream."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 2.0, events(40))
    feed_at(monitor, clock, 2.0, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.rules() == ["buffered_flush"]
    assert "all 40 events arrived in one body message" in report.findings[0].message


def test_burst_after_long_silence_is_buffered_flush_by_timing_alone_when_asked() -> None:
    """With ``burst_timing_only``, a long wait then every event in the window is a flush."""
    monitor, clock = timed_monitor(limits=replace(LIMITS, burst_timing_only=True))
    for i in range(20):
        feed_at(monitor, clock, 3.0 + i * 0.0005, b"data: t\n\n")
    feed_at(monitor, clock, 3.011, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.rules() == ["buffered_flush"]
    assert "in 20 body messages after 3.00 s of silence" in report.findings[0].message


def test_fast_generator_after_a_slow_first_token_is_not_a_flush() -> None:
    """33 events within 20 ms after 0.6 s, each its own body message, is a fast generator."""
    monitor, clock = timed_monitor()
    for i in range(33):
        feed_at(monitor, clock, 0.6 + i * 0.0006, b"data: t\n\n")
    feed_at(monitor, clock, 0.621, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


@pytest.mark.parametrize(
    ("messages", "per_message"), [(2, 10), (5, 8), (3, 40)], ids=["two", "5x8", "3x40"]
)
def test_burst_in_few_body_messages_after_long_silence_is_buffered_flush(
    messages: int, per_message: int
) -> None:
    """A long wait, then the events in two messages or many to a message, is a flush."""
    monitor, clock = timed_monitor()
    for i in range(messages):
        feed_at(monitor, clock, 3.0 + i * 0.001, events(per_message))
    feed_at(monitor, clock, 3.011, b"")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.rules() == ["buffered_flush"]
    total = messages * per_message
    assert f"all {total} events arrived within" in report.findings[0].message
    assert f"in {messages} body messages after 3.00 s of silence" in report.findings[0].message


def test_burst_of_a_few_events_per_message_is_not_a_flush() -> None:
    """Three events per body message (a relay reading a fast upstream) is not a buffer."""
    monitor, clock = timed_monitor()
    for i in range(10):
        feed_at(monitor, clock, 3.0 + i * 0.001, events(3))
    feed_at(monitor, clock, 3.011, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


@pytest.mark.parametrize(
    ("timing_only", "per_message", "flush"),
    [(False, 1, False), (False, 20, True), (True, 1, True), (True, 20, True)],
)
def test_liveness_judges_a_burst_by_its_body_messages(
    timing_only: bool, per_message: int, flush: bool
) -> None:
    """Liveness itself: 40 events in the window after a long wait, one or 20 per message."""
    liveness = Liveness(replace(LIMITS, burst_timing_only=timing_only), 0.0, 0.0)
    for message in range(1, 40 // per_message + 1):
        now = 2.0 + message * 0.0004  # 40 messages within the 20 ms window
        liveness.on_bytes(now)
        liveness.on_events(now, message)
    found = liveness.at_end(2.1, 40, 600, clean=True)
    assert [f.rule for f in found] == (["buffered_flush"] if flush else [])


def test_fast_healthy_provider_is_not_a_flush() -> None:
    """2,000 tokens/s over a long answer spreads events past the window: clean."""
    monitor, clock = timed_monitor()
    for i in range(400):
        feed_at(monitor, clock, 0.8 + i * 0.0005, b"data: tok\n\n")
    feed_at(monitor, clock, 1.0, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


def test_short_answer_in_one_message_is_not_a_flush() -> None:
    """Fewer events than the minimum prove nothing about buffering."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 2.0, events(15))
    feed_at(monitor, clock, 2.0, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


def test_quick_first_event_burst_is_not_a_flush() -> None:
    """A burst right after the request (no long silence first) is a fast answer."""
    monitor, clock = timed_monitor()
    for i in range(30):
        feed_at(monitor, clock, 0.1 + i * 0.0001, b"data: t\n\n")
    feed_at(monitor, clock, 0.2, b"")
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


def test_flush_is_only_judged_on_clean_ends() -> None:
    """A stream cut by the client is not judged for buffering."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 2.0, events(40))
    assert monitor.finish(StreamEnd.CLIENT_DISCONNECT).findings == ()


def test_offline_checks_have_no_timing_detectors() -> None:
    """check_stream feeds captured chunks instantly, so it never judges timing."""
    from streamguard import check_stream

    assert check_stream([events(100)]).findings == ()


def test_report_timing_fields() -> None:
    """Reports carry time to first byte and event, duration and the longest event gap."""
    monitor, clock = timed_monitor()
    feed_at(monitor, clock, 0.5, b": hello\n\n")
    feed_at(monitor, clock, 0.75, b"data: a\n\n")
    feed_at(monitor, clock, 2.0, b"data: b\n\n")
    feed_at(monitor, clock, 2.5, b"data: c\n\n")
    clock.now = 3.0
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert (report.time_to_first_byte, report.time_to_first_event, report.duration) == (
        0.5,
        0.75,
        3.0,
    )
    assert report.max_event_gap == 1.25
    assert report.body_messages == 4


# -- under the middleware, with real time ------------------------------------------------


def sweeper_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "streamguard-sweeper"]


def test_live_finding_reaches_metrics_and_logs_before_the_end(done_protocol: str) -> None:
    """With short timers, body_not_ended is counted while the app still holds the body open."""
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    seen_while_open: list[float | None] = []
    labels = {"route": "__unknown__", "protocol": done_protocol, "rule": "body_not_ended"}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await send(body(b"data: a\n\ndata: END\n\n"))
        await asyncio.sleep(0.3)  # the bug: the body stays open after the terminal
        seen_while_open.append(registry.get_sample_value("streamguard_violations_total", labels))
        await send(body(b"", more=False))

    middleware = StreamGuardMiddleware(
        app,
        protocol=done_protocol,
        metrics=registry,
        timers={"body_end_grace_s": 0.05},
        on_report=reports.append,
    )

    async def main() -> None:
        recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
        await middleware(http_scope(), recorder.receive, recorder.send)
        await asyncio.sleep(0)  # let the cancelled sweeper finish
        assert sweeper_tasks() == []

    asyncio.run(main())
    assert seen_while_open == [1.0]
    assert reports[0].rules() == ["body_not_ended"]
    assert reports[0].outcome is Outcome.COMPLETED


@pytest.mark.parametrize("ending", ["complete", "raise", "cancel", "disconnect", "return"])
def test_sweeper_is_stopped_on_every_path(ending: str) -> None:
    """Whatever way the last stream ends, the sweeper task is gone and nothing is in flight."""
    middleware = StreamGuardMiddleware(
        None, metrics=False, timers={"idle_limit_s": 0.05}, logs={"enabled": False}
    )
    running: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await send(body(b"data: a\n\n"))
        running.append(bool(sweeper_tasks()))
        await asyncio.sleep(0.02)
        if ending == "complete":
            await send(body(b"", more=False))
        elif ending == "raise":
            raise ValueError("boom")
        elif ending == "cancel":
            raise asyncio.CancelledError
        elif ending == "disconnect":
            await receive()
            await receive()

    middleware.app = app

    async def main() -> None:
        recorder = Recorder(
            incoming=[{"type": "http.request", "body": b""}, {"type": "http.disconnect"}]
        )
        with contextlib.suppress(ValueError, asyncio.CancelledError):
            await middleware(http_scope(), recorder.receive, recorder.send)
        await asyncio.sleep(0)
        assert sweeper_tasks() == []

    asyncio.run(main())
    assert running == [True]
    assert middleware.in_flight == 0


def test_one_sweeper_for_many_streams() -> None:
    """Concurrent streams on one loop share a single sweeper task."""
    counts: list[int] = []
    release = asyncio.Event

    async def main() -> None:
        gate = release()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await send(sse_start())
            await send(body(b"data: a\n\n"))
            await gate.wait()
            await send(body(b"", more=False))

        middleware = StreamGuardMiddleware(app, metrics=False, logs={"enabled": False})

        async def one() -> None:
            recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
            await middleware(http_scope(), recorder.receive, recorder.send)

        tasks = [asyncio.create_task(one()) for _ in range(50)]
        await asyncio.sleep(0.01)
        counts.append(len(sweeper_tasks()))
        gate.set()
        await asyncio.gather(*tasks)
        await asyncio.sleep(0)
        counts.append(len(sweeper_tasks()))
        assert middleware.in_flight == 0

    asyncio.run(main())
    assert counts == [1, 0]


def test_silence_after_the_terminal_is_not_a_stall(done_protocol: str) -> None:
    """A body held open past the idle limit after the terminal is body_not_ended only."""
    monitor, clock = timed_monitor(done_protocol)
    feed_at(monitor, clock, 0.1, b"data: END\n\n")
    assert [f.rule for f in monitor.poll(6.0)] == ["body_not_ended"]
    assert monitor.poll(200.0) == []
    feed_at(monitor, clock, 250.0, b": late keepalive\n\n")
    clock.now = 251.0
    assert monitor.finish(StreamEnd.BODY_ENDED).rules() == ["body_not_ended"]


@pytest.mark.parametrize(("per_send", "flush"), [(1, False), (20, True)])
def test_middleware_tells_a_fast_generator_from_a_buffered_flush(
    per_send: int, flush: bool
) -> None:
    """Under the middleware: 40 quick events after a wait, one per send or 20 per send."""
    reports: list[StreamReport] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await asyncio.sleep(0.1)  # the slow first token
        for start in range(0, 40, per_send):
            await send(body(b"".join(b"data: %d\n\n" % i for i in range(start, start + per_send))))
        await send(body(b"", more=False))

    middleware = StreamGuardMiddleware(
        app,
        metrics=False,
        logs={"enabled": False},
        # Wide margins: the sends take microseconds, well inside a one-second window, and
        # the first event comes after 0.1 s, well past 0.05 s.
        timers={"burst_window_s": 1.0, "burst_first_event_ratio": 0.05},
        on_report=reports.append,
    )

    async def main() -> None:
        recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
        await middleware(http_scope(), recorder.receive, recorder.send)

    asyncio.run(main())
    [report] = reports
    assert report.rules() == (["buffered_flush"] if flush else [])


def test_timers_are_set_per_route() -> None:
    """A route's own ``idle_limit_s`` replaces the global one for its streams only."""
    clock = FakeClock()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await send(body(b"data: a\n\n"))
        clock.now = 120.0  # two minutes of silence: a reasoning model thinking
        await send(body(b"data: b\n\n", more=False))

    reports: list[StreamReport] = []
    routes = {"/think": {"protocol": "sse", "timers": {"idle_limit_s": 600}}, "/chat": "sse"}
    guarded = StreamGuardMiddleware(
        app, routes=routes, metrics=False, clock=clock, on_report=reports.append
    )
    for path in ("/think", "/chat"):
        clock.now = 0.0
        run(guarded, http_scope(path=path))
    assert [(report.route, report.rules()) for report in reports] == [
        ("/think", []),
        ("/chat", ["stalled"]),
    ]
