"""The plugin boundary (issue 44): whatever a protocol of one's own does, the stream is
delivered whole, the fault is counted once and logged without its message, and streamguard
goes on (docs/plugins.md, docs/reliability.md "Plugin boundary")."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from examples.job_progress_protocol import SPEC
from streamguard import Outcome, StreamEnd, StreamGuardMiddleware, StreamMonitor, StreamReport
from streamguard.protocols import (
    OTHER,
    SPECS,
    TERMINAL,
    Checker,
    ProtocolSpec,
    Signal,
    register,
    terminated_lifecycle,
    unregister,
)
from streamguard.report import Finding, Severity
from streamguard.request import RequestFact, RequestFacts
from streamguard.rule_docs import rule_doc
from streamguard.rule_docs.markdown import rules_markdown
from streamguard.rules import RULES, Rule
from streamguard.sse import Event

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start

ROOT = Path(__file__).resolve().parent.parent


class PluginPanic(BaseException):
    """Neither an ``Exception`` nor a cancellation: what a plugin may raise all the same."""


class _Faults:
    """Where the faulty plugin raises, and what (set by each test, reset after it)."""

    error: type[BaseException] | None = None
    #: ``init``, ``event`` (at ``at_event``) or ``end``.
    where = "event"
    at_event = 2


class FaultyChecker(Checker):
    """``event: done`` ends the stream; raises ``_Faults.error`` where ``_Faults`` says."""

    name = "faulty_plugin"
    LIFECYCLE = terminated_lifecycle(terminal="the `done` event")
    RAISES: ClassVar[frozenset[Any]] = frozenset()

    def __init__(self, request: Any = None, path: str | None = None) -> None:
        super().__init__(request, path)
        if _Faults.error is not None and _Faults.where == "init":
            raise _Faults.error()

    def is_terminal(self, event: Event) -> bool:
        return event.event == "done"

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        if _Faults.error is not None and _Faults.where == "event" and index == _Faults.at_event:
            raise _Faults.error()
        finding = self.advance(TERMINAL if event.event == "done" else OTHER, event, index)
        return () if finding is None else (finding,)

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        if _Faults.error is not None and _Faults.where == "end":
            raise _Faults.error()
        return ()


FAULTY = ProtocolSpec(
    name=FaultyChecker.name,
    checker=FaultyChecker,
    summary="a plugin that raises on cue",
    event_names=frozenset({"tick", "done"}),
)


@pytest.fixture
def faulty() -> Iterator[type[_Faults]]:
    register(FAULTY)
    try:
        yield _Faults
    finally:
        _Faults.error, _Faults.where, _Faults.at_event = None, "event", 2
        unregister(FAULTY.name)


def _ticks(count: int, *, done: bool = True) -> list[dict[str, Any]]:
    """A stream of ``count`` ticks (about 267 bytes each), then ``done``, one per message."""
    frames = [
        body(f'event: tick\ndata: {{"n": {n}, "pad": "{"x" * 230}"}}\n\n'.encode())
        for n in range(count)
    ]
    if done:
        frames.append(body(b"event: done\ndata: {}\n\n"))
    return [sse_start(), *frames, body(b"", more=False)]


def _internal_error_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "streamguard_internal_error"]


# -- 1. any exception that is not a cancellation is contained -------------------------------


@pytest.mark.parametrize("error", [PluginPanic, KeyboardInterrupt, SystemExit, RuntimeError])
@pytest.mark.parametrize("where", ["init", "event", "end"])
def test_a_checker_raising_any_base_exception_is_contained(
    faulty: type[_Faults], where: str, error: type[BaseException]
) -> None:
    """A plugin checker raising a ``BaseException`` that is no cancellation (in its
    constructor, on an event, at the end): the whole stream reaches the client, one
    internal error is counted and logged, and that stream alone is no longer checked."""
    faulty.error, faulty.where = error, where
    steps = _ticks(40)
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps),
        protocol=FaultyChecker.name,
        metrics=registry,
        on_report=reports.append,
    )
    with capture_logs() as logs:
        recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == steps  # every byte, in the same messages
    assert middleware.internal_errors == 1
    [line] = _internal_error_lines(logs)
    assert line["error"].startswith(error.__name__)
    # (A checker that cannot be built fails before the stream is labelled with it.)
    protocol = "unknown" if where == "init" else FaultyChecker.name
    labels = {"route": "__unknown__", "protocol": protocol}
    assert registry.get_sample_value("streamguard_internal_errors_total", labels) == 1
    if where != "init":  # (a checker that cannot be built leaves no stream to report)
        [report] = reports
        assert report.internal_error is not None
        assert report.inspected is False
        assert report.outcome is Outcome.COMPLETED
    # The next stream is watched as usual.
    faulty.error = None
    reports.clear()
    run(middleware)
    assert reports[0].internal_error is None
    assert reports[0].inspected
    assert middleware.internal_errors == 1


def test_a_cancellation_a_checker_raises_still_propagates(faulty: type[_Faults]) -> None:
    """Cancellation is the task's, not the plugin's: it is not swallowed."""
    faulty.error = asyncio.CancelledError
    middleware = StreamGuardMiddleware(
        ScriptedApp(_ticks(5)), protocol=FaultyChecker.name, metrics=False
    )
    _, raised = run(middleware)
    assert isinstance(raised, asyncio.CancelledError)


def test_a_last_body_message_whose_check_raises_is_delivered(faulty: type[_Faults]) -> None:
    """The last body message takes the other path through ``send``: contained there too."""
    faulty.error, faulty.at_event = PluginPanic, 1
    frames = b"event: tick\ndata: {}\n\n" * 3
    steps = [sse_start(), body(frames, more=False)]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol=FaultyChecker.name, metrics=False
    )
    recorder, raised = run(middleware)
    assert raised is None
    assert recorder.sent == steps
    assert middleware.internal_errors == 1


# -- 2. a plugin's other hooks: signals and request readers ----------------------------------

CHAT = (ROOT / "tests/fixtures/openai_chat/clean-2024-no-usage-field.sse").read_bytes()
#: What a plugin's exception says; it must never reach a log line (it may quote the wire).
SECRET = "the-plugin-s-message"


def _raising_signal(*args: object) -> bool:
    raise PluginPanic(SECRET)


def _raising_reader(body: object, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    facts["faulty_fact"] = "half-read"
    raise PluginPanic(SECRET)


class _SignalChecker(Checker):
    name = "faulty_signals"


@contextmanager
def _faulty_plugin(**hooks: Any) -> Iterator[ProtocolSpec]:
    """``_SignalChecker``'s protocol registered with ``hooks`` (signals, request readers)
    while the block runs, and unregistered after it."""
    spec = ProtocolSpec(
        name=_SignalChecker.name, checker=_SignalChecker, summary="hooks that raise", **hooks
    )
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


@pytest.mark.parametrize("hook", ["headers", "paths", "events"])
def test_a_raising_detection_signal_is_no_match_and_detection_goes_on(hook: str) -> None:
    """A plugin's signal that raises, tried before every built-in one (rank 5), is treated
    as no match for that stream: the built-in protocol is still detected and checked, the
    report still made; the fault is counted once, as an internal error that names the
    plugin and its hook, without the exception's message."""
    with _faulty_plugin(**{hook: (Signal(5, _raising_signal),)}):
        frames = [body(frame + b"\n\n") for frame in CHAT.split(b"\n\n") if frame.strip()]
        steps = [sse_start(), *frames, body(b"", more=False)]
        registry = CollectorRegistry()
        reports: list[StreamReport] = []
        middleware = StreamGuardMiddleware(
            ScriptedApp(steps), protocol="auto", metrics=registry, on_report=reports.append
        )
        path = "/stream" if hook == "events" else "/v1/chat/completions"
        with capture_logs() as logs:
            recorder, raised = run(middleware, http_scope("POST", path))
    assert raised is None
    assert recorder.sent == steps
    [report] = reports
    assert report.protocol == "openai_chat"
    assert report.protocol_source == ("event" if hook == "events" else "path")
    assert report.findings == ()
    assert report.internal_error is None
    assert report.inspected
    assert middleware.internal_errors == 1
    [line] = _internal_error_lines(logs)
    assert line["where"] == f"{hook.removesuffix('s')} signal of faulty_signals"
    assert line["error"].startswith("PluginPanic")
    assert SECRET not in str(logs)
    assert any("faulty_signals" in note for note in report.notes)


def test_a_raising_request_reader_leaves_its_facts_out() -> None:
    """A plugin's request reader that raises: its facts are left out, the other readers'
    kept, the stream checked; the fault counted once, naming the plugin."""
    with _faulty_plugin(request_facts=(RequestFact(("faulty_fact",), _raising_reader),)):
        frames = [body(frame + b"\n\n") for frame in CHAT.split(b"\n\n") if frame.strip()]
        steps = ["receive", sse_start(), *frames, body(b"", more=False)]
        reports: list[StreamReport] = []
        middleware = StreamGuardMiddleware(
            ScriptedApp(steps), protocol="auto", metrics=False, on_report=reports.append
        )
        incoming = [{"type": "http.request", "body": b'{"stream": true, "n": 2}'}]
        with capture_logs() as logs:
            recorder, raised = run(
                middleware, http_scope("POST", "/v1/chat/completions"), Recorder(incoming)
            )
    assert raised is None
    assert recorder.sent == [step for step in steps if step != "receive"]
    [report] = reports
    assert report.protocol == "openai_chat"
    # The built-in readers still ran: the request asked for two choices, the stream
    # finished one.
    assert [finding.rule for finding in report.findings] == ["missing_finish_reason"]
    assert middleware.internal_errors == 1
    [line] = _internal_error_lines(logs)
    assert line["where"] == "request fact reader of faulty_signals"
    assert SECRET not in str(logs)


def test_what_a_raising_reader_set_is_undone() -> None:
    """The facts a reader set before it raised are not kept; the others' are."""
    with _faulty_plugin(request_facts=(RequestFact(("faulty_fact",), _raising_reader),)) as spec:
        facts = RequestFacts({"stream": True, "n": 2})
    assert dict(facts) == {"stream": True, "n": 2}
    [(fact, error)] = facts.reader_faults
    assert fact is spec.request_facts[0]
    assert error.startswith("PluginPanic in _raising_reader")


# -- 3. rules: validated at registration, a finding of an undeclared rule refused -----------


class _WireRuleChecker(Checker):
    """Names its findings' rule after the event's data, as a careless plugin might."""

    name = "wire_rules"
    RAISES: ClassVar[frozenset[Any]] = frozenset()

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        return (Finding(f"rule_{event.data}", Severity.ERROR, f"event {index}", index),)


class _UndeclaredJSONChecker(Checker):
    """Parses its data (``invalid_json`` on a bad payload) without declaring the rule."""

    name = "ticker"
    RAISES: ClassVar[frozenset[Any]] = frozenset()

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        found: list[Finding] = []
        self.parse_object(event, index, found)
        return found


@pytest.mark.parametrize("checker", [_WireRuleChecker, _UndeclaredJSONChecker])
def test_a_finding_of_a_rule_the_protocol_does_not_declare_is_refused(
    checker: type[Checker],
) -> None:
    """A plugin finding whose rule the protocol does not declare (a name from the wire, or a
    catalog rule missing from ``RAISES``) is refused: not on the report, not logged as a
    finding, no metric series; the stream's internal error counts it and its checking
    stops. Three streams of 70 distinct wire values add no series."""
    spec = ProtocolSpec(name=checker.name, checker=checker, summary="careless")
    register(spec)
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    try:
        with capture_logs() as logs:
            for stream in range(3):
                frames = [body(f"data: {stream}-{n}\n\n".encode()) for n in range(70)]
                steps = [sse_start(), *frames, body(b"", more=False)]
                middleware = StreamGuardMiddleware(
                    ScriptedApp(steps),
                    protocol=checker.name,
                    metrics=registry,
                    on_report=reports.append,
                )
                recorder, raised = run(middleware)
                assert raised is None
                assert recorder.sent == steps
    finally:
        unregister(spec.name)
    undeclared = {"invalid_json"} | {f"rule_{s}-{n}" for s in range(3) for n in range(70)}
    series = [
        sample
        for metric in registry.collect()
        if metric.name == "streamguard_violations"
        for sample in metric.samples
        if sample.labels["rule"] in undeclared
    ]
    assert series == []
    assert not any(f.rule in undeclared for report in reports for f in report.findings)
    assert not any(entry.get("rule") in undeclared for entry in logs)
    assert [report.inspected for report in reports] == [False] * 3
    labels = {"route": "__unknown__", "protocol": checker.name}
    assert registry.get_sample_value("streamguard_internal_errors_total", labels) == 3
    assert all(line["error"].startswith("UndeclaredRule") for line in _internal_error_lines(logs))


def _spec(**fields: Any) -> ProtocolSpec:
    class OwnRules(Checker):
        name = "own_rules"

    return ProtocolSpec(name="own_rules", checker=OwnRules, summary="x", **fields)


GOOD_RULE = Rule("own_rule", Severity.WARNING, "A rule of its own.")
GOOD_DOC = rule_doc("own_rule", meaning="m.", clients="c.", example="data: x", fix="f.")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"rules": (Rule("Own Rule!", Severity.WARNING, "x"),), "rule_docs": ()},
            "rule names are snake_case",
        ),
        ({"rules": (Rule("r" * 65, Severity.WARNING, "x"),)}, "at most 64 characters"),
        ({"rules": (GOOD_RULE,)}, "rule 'own_rule' has no rule_docs entry"),
        ({"rule_docs": (GOOD_DOC,)}, "documents 'own_rule', which is not one of its rules"),
        ({"rules": ("own_rule",)}, "rules must be Rule objects"),
    ],
)
def test_register_refuses_rules_it_cannot_carry(fields: dict[str, Any], message: str) -> None:
    """A rule name that would not do as a metric label, a rule without its docs (which
    broke ``streamguard rules --format markdown``), a doc without its rule: refused with
    a message that says what to change, and nothing kept."""
    try:
        with pytest.raises((ValueError, TypeError), match=message):
            register(_spec(**fields))
    finally:
        if "own_rules" in SPECS:  # (before the fix: registered, and in every later test)
            unregister("own_rules")
    assert "own_rules" not in SPECS
    assert "own_rule" not in RULES


@pytest.mark.parametrize(
    ("raises", "message"),
    [
        (frozenset({"invalid_json"}), "RAISES must be a frozenset of Rule objects"),
        (["x"], "RAISES must be a frozenset of Rule objects"),
    ],
)
def test_register_refuses_a_raises_that_is_not_rules(raises: object, message: str) -> None:
    class BadRaises(Checker):
        name = "bad_raises"
        RAISES = raises  # type: ignore[assignment]

    with pytest.raises(TypeError, match=message):
        register(ProtocolSpec(name="bad_raises", checker=BadRaises, summary="x"))
    assert "bad_raises" not in SPECS


def test_the_rules_page_renders_with_a_plugin_registered() -> None:
    """With the example's rules and docs registered, the markdown page has their sections."""
    register(SPEC)
    try:
        page = rules_markdown()
    finally:
        unregister(SPEC.name)
    assert "## `progress_went_back`" in page


# -- 4. the checking-time budget --------------------------------------------------------------


class _FakeClock:
    """The seam's clock, moved only by the simulated cost of checking: the verdict never
    depends on this machine's speed or load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CLOCK = _FakeClock()
#: What one event costs the slow checker, in the fake clock's seconds.
EVENT_COST_S = 0.020


class _SlowChecker(Checker):
    """A plugin whose every event costs 20 ms of (simulated) checking."""

    name = "slow_plugin"
    LIFECYCLE = terminated_lifecycle(terminal="the `done` event")
    RAISES: ClassVar[frozenset[Any]] = frozenset()

    def is_terminal(self, event: Event) -> bool:
        return event.event == "done"

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        CLOCK.now += EVENT_COST_S
        finding = self.advance(TERMINAL if event.event == "done" else OTHER, event, index)
        return () if finding is None else (finding,)


class _TimedRecorder(Recorder):
    """A server's side that notes, on the fake clock, when each message was sent."""

    def __init__(self) -> None:
        super().__init__(incoming=[{"type": "http.request", "body": b""}])
        self.sent_at: list[float] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent_at.append(CLOCK.now)
        await super().send(message)


@pytest.mark.parametrize("framing", ["one event per message", "all events in one message"])
def test_a_slow_checker_cannot_stall_another_stream(framing: str) -> None:
    """A plugin taking 20 ms an event on a stream of 400 events, sent without yielding to
    the loop: before the budget, another stream waited 8 s (8.2 s in the issue's run); now
    the slow stream's checking stops at its budget, the other stream's longest gap stays
    under a second, and the slow stream is delivered whole and reported as stopped."""
    spec = ProtocolSpec(name=_SlowChecker.name, checker=_SlowChecker, summary="slow")
    register(spec)
    ticks = [f"event: tick\ndata: {n}\n\n".encode() for n in range(400)]
    if framing == "one event per message":
        slow_frames = [body(tick) for tick in ticks]
    else:
        slow_frames = [body(b"".join(ticks))]
    slow_steps = [sse_start(), *slow_frames, body(b"event: done\ndata: {}\n\n", more=False)]
    other_steps: list[Any] = [sse_start()]
    for n in range(40):
        other_steps += [body(f"data: {n}\n\n".encode()), "yield"]
    other_steps.append(body(b"", more=False))
    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        _Router({"/slow": ScriptedApp(slow_steps), "/other": ScriptedApp(other_steps)}),
        routes={"/slow": _SlowChecker.name, "/other": "sse"},
        metrics=registry,
        on_report=reports.append,
        clock=CLOCK,
    )
    slow, other = _TimedRecorder(), _TimedRecorder()

    async def both() -> None:
        await asyncio.gather(
            middleware(http_scope(path="/other"), other.receive, other.send),
            middleware(http_scope(path="/slow"), slow.receive, slow.send),
        )

    try:
        asyncio.run(both())
    finally:
        unregister(spec.name)
    gaps = [b - a for a, b in itertools.pairwise(other.sent_at)]
    assert max(gaps) < 1.0
    assert slow.sent == slow_steps
    by_path = {report.path: report for report in reports}
    stopped = by_path["/slow"]
    assert stopped.skipped_checks == ("checking_budget",)
    assert stopped.inspected is False
    assert stopped.outcome is Outcome.COMPLETED
    assert any("checking time" in note for note in stopped.notes)
    assert stopped.internal_error is None
    assert by_path["/other"].inspected
    labels = {"route": "/slow", "protocol": _SlowChecker.name, "reason": "checking_budget"}
    assert registry.get_sample_value("streamguard_checks_skipped_total", labels) == 1


class _Router:
    """Two scripted apps behind one ASGI app, by path."""

    def __init__(self, apps: dict[str, ScriptedApp]) -> None:
        self.apps = apps

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.apps[scope["path"]](scope, receive, send)


def test_a_stream_s_long_life_earns_checking_time() -> None:
    """The budget is a burst over a share of the stream's age: a stream that checks slowly
    but rarely (20 ms every second, 2 % of its time) is checked to its end."""
    spec = ProtocolSpec(name=_SlowChecker.name, checker=_SlowChecker, summary="slow")
    register(spec)
    try:
        monitor = StreamMonitor(_SlowChecker.name, clock=CLOCK, checking_budget_s=0.25)
        for n in range(200):
            CLOCK.now += 1.0  # the app's own pace
            monitor.feed(f"event: tick\ndata: {n}\n\n".encode())
        report = monitor.finish(StreamEnd.BODY_ENDED)
    finally:
        unregister(spec.name)
    assert report.inspected
    assert report.skipped_checks == ()


def test_a_raising_event_signal_is_told_once_however_many_events_it_raised_on() -> None:
    """A plain stream never decided: the plugin's event signal raises on each of its held
    events, and is counted and noted once (it was once per event)."""
    with _faulty_plugin(events=(Signal(5, _raising_signal),)):
        steps = [sse_start(), *(body(b"data: tick %d\n\n" % n) for n in range(6))]
        steps.append(body(b"", more=False))
        reports: list[StreamReport] = []
        middleware = StreamGuardMiddleware(
            ScriptedApp(steps), protocol="auto", metrics=False, on_report=reports.append
        )
        with capture_logs() as logs:
            run(middleware, http_scope("GET", "/stream"))
    [report] = reports
    assert report.protocol == "sse"
    assert middleware.internal_errors == 1
    assert len(_internal_error_lines(logs)) == 1
    assert sum("faulty_signals" in note for note in report.notes) == 1
