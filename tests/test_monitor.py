"""StreamMonitor and check_stream: outcomes, timing with an injected clock, the checker seam."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from streamguard import Outcome, StreamEnd, StreamMonitor, check_stream
from streamguard.protocols import CHECKERS, Checker
from streamguard.protocols._base import terminated_lifecycle
from streamguard.report import Finding, Severity
from streamguard.request import RequestFacts
from streamguard.sse import Event


class FakeClock:
    """A clock that advances only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_check_stream_counts_events_and_bytes() -> None:
    """Offline checking reports events, bytes and body messages of the captured chunks."""
    report = check_stream([b"data: a\n\n", b"data: b\n", b"\n"])
    assert (report.outcome, report.events, report.bytes, report.body_messages) == (
        Outcome.COMPLETED,
        2,
        18,
        3,
    )
    assert (report.protocol, report.protocol_source) == ("sse", "default")


def test_check_stream_accepts_one_bytes_object_as_one_chunk() -> None:
    """Passing ``bytes`` rather than a list of chunks checks it as a single chunk."""
    report = check_stream(b"data: a\n\ndata: b\n\n")
    assert (report.events, report.body_messages) == (2, 1)


def test_timing_comes_from_the_injected_clock() -> None:
    """First byte, first event and end times are read from the clock at each step."""
    clock = FakeClock()
    monitor = StreamMonitor(clock=clock)
    clock.now = 100.5
    monitor.feed(b": warming up\n\n")
    clock.now = 101.0
    monitor.feed(b"data: a\n\n")
    clock.now = 103.0
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert (report.started_at, report.first_byte_at, report.first_event_at, report.ended_at) == (
        100.0,
        100.5,
        101.0,
        103.0,
    )
    assert report.duration == 3.0
    assert report.time_to_first_event == 1.0


def test_finish_is_idempotent() -> None:
    """A second ``finish`` returns the first report and runs no rule twice."""
    monitor = StreamMonitor()
    monitor.feed(b"data: cut")
    first = monitor.finish(StreamEnd.BODY_ENDED)
    assert monitor.finish(StreamEnd.APP_ERROR) is first
    assert first.rules() == ["unterminated_frame"]


@pytest.mark.parametrize(
    ("end", "outcome"),
    [
        (StreamEnd.CLIENT_DISCONNECT, Outcome.CLIENT_DISCONNECT),
        (StreamEnd.APP_ERROR, Outcome.APP_ERROR),
        (StreamEnd.CANCELLED, Outcome.CANCELLED),
    ],
)
def test_aborted_streams_get_no_end_of_stream_findings(end: StreamEnd, outcome: Outcome) -> None:
    """A stream cut by the client, the app or cancellation is not blamed for its cut frame."""
    monitor = StreamMonitor()
    monitor.feed(b"data: a\n\ndata: half")
    report = monitor.finish(end)
    assert (report.outcome, report.findings) == (outcome, ())


def test_terminal_protocol_outcomes(done_protocol: str) -> None:
    """With a terminal signal: seen is completed, missing is unclosed, an error is error_event."""
    assert check_stream([b"data: x\n\ndata: END\n\n"], protocol=done_protocol).outcome is (
        Outcome.COMPLETED
    )
    missing = check_stream([b"data: x\n\n"], protocol=done_protocol)
    assert (missing.outcome, missing.rules()) == (Outcome.UNCLOSED, ["missing_terminal"])
    assert missing.findings[0].event_index == 1
    errored = check_stream([b"data: ERR\n\n"], protocol=done_protocol)
    assert (errored.outcome, errored.findings) == (Outcome.ERROR_EVENT, ())


def test_duplicate_terminal_and_event_after_terminal(done_protocol: str) -> None:
    """After the terminal, a repeat is duplicate_terminal and anything else event_after_terminal."""
    report = check_stream(
        [b"data: END\n\ndata: END\n\ndata: more\n\n: comment\n\n"], protocol=done_protocol
    )
    assert [(f.rule, f.event_index, f.byte_offset) for f in report.findings] == [
        ("duplicate_terminal", 1, 11),
        ("event_after_terminal", 2, 22),
    ]
    assert report.outcome is Outcome.COMPLETED


def test_app_returning_early_is_unclosed_even_after_terminal(done_protocol: str) -> None:
    """Without more_body=False the response is cut, whatever the events said."""
    monitor = StreamMonitor(done_protocol)
    monitor.feed(b"data: END\n\n")
    report = monitor.finish(StreamEnd.APP_RETURNED)
    assert (report.outcome, report.rules()) == (Outcome.UNCLOSED, ["response_not_finished"])


def test_event_too_large_leaves_the_stream_uninspected(done_protocol: str) -> None:
    """Past the size limit nothing more is checked, so no terminal is demanded."""
    report = check_stream(
        [b"data: " + b"x" * 100 + b"\n\n"], protocol=done_protocol, max_event_bytes=50
    )
    assert (report.outcome, report.inspected, report.rules()) == (
        Outcome.COMPLETED,
        False,
        ["event_too_large"],
    )
    assert report.bytes == 108


def test_malformed_means_an_error_severity_finding() -> None:
    """Warnings and info findings alone do not make a stream malformed."""
    assert check_stream([b"foo: bar\ndata: a\n\n"]).malformed is False
    assert check_stream([b"data: a"]).malformed is True


def test_fail_stops_inspection_and_records_the_error() -> None:
    """After an internal error the monitor only counts bytes and reports the error."""
    monitor = StreamMonitor()
    monitor.feed(b"data: a\n\n")
    monitor.fail(KeyError("boom"))
    monitor.feed(b"data: b")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    # The type only (this one was never raised, so it has no place): its message may
    # quote what the stream sent.
    assert (report.internal_error, report.inspected, report.events, report.bytes) == (
        "KeyError",
        False,
        1,
        16,
    )
    assert report.findings == ()


def test_unknown_protocol_is_rejected() -> None:
    """An unknown protocol name fails at construction with the known names listed."""
    with pytest.raises(ValueError, match="unknown protocol 'smtp'"):
        StreamMonitor("smtp")


def test_the_fallback_report_keeps_what_was_counted() -> None:
    """After an internal error the report still has the events, bytes and notes seen so far."""
    monitor = StreamMonitor("openai_chat")
    body = b'data: {"a": 1}\n\ndata: {"a": 2}\n\n'
    monitor.feed(body)
    monitor.add_note("a note")
    monitor.fail(RuntimeError("boom"))
    report = monitor.fallback_report(StreamEnd.BODY_ENDED)
    assert (report.events, report.bytes, report.notes) == (2, len(body), ("a note",))
    assert (report.inspected, report.protocol_source) == (False, "configured")


def test_a_raw_request_reaches_the_checker_only_as_its_bounded_facts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plain request mapping is reduced to ``RequestFacts`` before any checker sees it."""
    seen: list[object] = []

    class Recording(Checker):
        name = "test_recording"
        LIFECYCLE = terminated_lifecycle()

        def __init__(self, request: Any = None, path: str | None = None) -> None:
            super().__init__(request, path)
            seen.append(request)

        def check_event(self, event: Event, index: int) -> Sequence[Finding]:
            return ()

    monkeypatch.setitem(CHECKERS, Recording.name, Recording)
    raw = {"model": "m", "stream": True, "n": 2, "messages": [{"content": "x" * 1000}]}
    StreamMonitor(Recording.name, request=raw)
    StreamMonitor(Recording.name, request=RequestFacts(raw))
    assert [type(request) for request in seen] == [RequestFacts, RequestFacts]
    assert dict(seen[0]) == dict(seen[1]) == {"stream": True, "n": 2}


def test_the_monitors_report_is_the_value_the_dataclass_makes() -> None:
    """``new_report`` (no dataclass ``__init__``) makes the report ``StreamReport`` would:
    equal, same hash and repr, every field in its place, still frozen; its parameters are
    the fields in order (a parameter out of place would put a value in another field)."""
    import dataclasses
    import inspect

    from streamguard.report import StreamReport, new_report

    names = [field.name for field in dataclasses.fields(StreamReport)]
    parameters = list(inspect.signature(new_report).parameters)
    assert parameters == names[: len(parameters)]
    values: dict[str, Any] = {
        "protocol": "openai_chat",
        "outcome": Outcome.UNCLOSED,
        "findings": (Finding("missing_terminal", Severity.ERROR, "no [DONE]", 2, 40),),
        "events": 2,
        "bytes": 40,
        "body_messages": 3,
        "started_at": 1.0,
        "first_byte_at": 1.5,
        "first_event_at": 1.75,
        "ended_at": 2.0,
        "inspected": False,
        "internal_error": "KeyError",
        "path": "/v1/chat/completions",
        "protocol_source": "detected",
        "route": "chat",
        "notes": ("a note",),
        "max_event_gap": 0.25,
        "findings_dropped": (("stalled", 4),),
        "client_closed_after_end": True,
        "skipped_checks": ("checking_budget",),
    }
    assert list(values) == parameters
    made = new_report(**values)
    expected = StreamReport(**values)
    assert (made, hash(made), repr(made)) == (expected, hash(expected), repr(expected))
    assert [getattr(made, name) for name in names] == [getattr(expected, name) for name in names]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.events = 1  # type: ignore[misc]
    # A stream's own report, as the monitor builds it, with the defaults of the rest.
    monitor = StreamMonitor("sse")
    monitor.feed(b"data: a\n\n")
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report == dataclasses.replace(report)  # (``replace`` goes through ``__init__``)
    assert (report.upstreams, report.upstreams_dropped, report.attribution) == ((), 0, ())


def test_an_end_hashes_as_itself() -> None:
    """``StreamEnd`` hashes by identity (``Enum``'s hash is Python code run per stream):
    each end is its own key, found by itself only."""
    table = {end: end.value for end in StreamEnd}
    assert len(table) == len(StreamEnd)
    assert all(table[end] == end.value for end in StreamEnd)
    assert StreamEnd.BODY_ENDED not in {StreamEnd.APP_RETURNED, StreamEnd.CANCELLED}
