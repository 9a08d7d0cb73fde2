"""The every-stream tier: ``sample_rate`` decides deep checking only.

A stream the sample leaves out is still framed (the parser's rules run) and judged on its
end (the terminal, the in-band error, the outcome), at a fraction of the full check's
cost: ``StreamMonitor.check_framing_only``, with each checker's ``end_kind``. What it must
give is what the full check gives on the same bytes for those facts, which the
differential test below holds it to over the equivalence corpus (fixtures, captures and
their seeded mutants, in seeded chunkings, under each protocol and under ``auto``).
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streamguard import StreamGuardMiddleware, StreamMonitor, StreamReport
from streamguard.monitor import StreamEnd
from streamguard.protocols import CHECKERS, make_checker
from streamguard.report import Outcome
from streamguard.sse import EventParser
from tests import equivalence
from tests.asgi_driver import ScriptedApp, body, http_scope, run, sse_start

#: The rules the SSE parser makes, on every stream, sampled or not.
PARSER_RULES = frozenset(
    {"event_too_large", "event_without_data", "invalid_utf", "unknown_field", "unterminated_frame"}
)
#: The protocols whose checker tells its end without its full checks (docs/metrics.md,
#: "Checked and unchecked streams", lists them by their display names).
JUDGING = {"openai_chat", "openai_responses", "anthropic", "ai_sdk_ui", "langgraph"}

CHAT_ROLE = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'  # noqa: E501
CHAT_TEXT = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"an error occurred in \\"error\\" handling"},"finish_reason":null}]}\n\n'  # noqa: E501
CHAT_FINISH = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'  # noqa: E501
CHAT_ERROR = (
    b'data: {"error":{"message":"overloaded","type":"server_error","code":null,"param":null}}\n\n'
)
DONE = b"data: [DONE]\n\n"


def _serve(
    frames: list[bytes], registry: CollectorRegistry, **options: Any
) -> tuple[StreamReport, bytes]:
    """Serve ``frames`` on an OpenAI chat route with ``sample_rate=0``: the report, and the
    bytes the client got."""
    reports: list[StreamReport] = []
    options = {"routes": {"/v1/chat/completions": "openai_chat"}, "sample_rate": 0.0, **options}
    app = ScriptedApp([sse_start(), *(body(frame) for frame in frames), body(b"", more=False)])
    guarded = StreamGuardMiddleware(
        app, metrics=registry, logs={"enabled": False}, on_report=reports.append, **options
    )
    recorder, raised = run(guarded, http_scope("POST", "/v1/chat/completions"))
    assert raised is None
    [report] = reports
    sent = b"".join(m.get("body", b"") for m in recorder.sent if m["type"] == "http.response.body")
    return report, sent


def _count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    labels = {"route": "/v1/chat/completions", "protocol": "openai_chat", **labels}
    return registry.get_sample_value(name, labels) or 0.0


def test_an_unsampled_stream_cut_before_its_terminal_is_unclosed_and_counted() -> None:
    """The promise sampling used to drop: without [DONE], an unsampled answer is unclosed,
    with missing_terminal, counted in streams_total and unchecked_streams_total."""
    registry = CollectorRegistry()
    frames = [CHAT_ROLE, CHAT_TEXT, CHAT_FINISH]
    report, sent = _serve(frames, registry)
    assert sent == b"".join(frames)
    assert report.outcome is Outcome.UNCLOSED
    assert [finding.rule for finding in report.findings] == ["missing_terminal"]
    assert _count(registry, "streamguard_streams_total", outcome="unclosed") == 1
    unchecked = {"outcome": "unclosed", "reason": "not_sampled"}
    assert _count(registry, "streamguard_unchecked_streams_total", **unchecked) == 1
    assert _count(registry, "streamguard_violations_total", rule="missing_terminal") == 1
    assert report.notes == (
        "not sampled: only the framing, the terminal and the outcome were checked",
    )


def test_a_healthy_unsampled_stream_is_completed_with_no_finding() -> None:
    """The look-alike: the same answer with its [DONE], content that says "error" in
    words (so its frame is read), is completed and clean."""
    registry = CollectorRegistry()
    report, _ = _serve([CHAT_ROLE, CHAT_TEXT, CHAT_FINISH, DONE], registry)
    assert (report.outcome, report.findings, report.inspected) == (Outcome.COMPLETED, (), True)
    assert _count(registry, "streamguard_streams_total", outcome="completed") == 1


def test_an_unsampled_in_band_error_is_an_error_event() -> None:
    """A chunk with a truthy top-level error ends the answer as the SDK raises on it."""
    report, _ = _serve([CHAT_ROLE, CHAT_ERROR, DONE], CollectorRegistry())
    assert (report.outcome, report.findings) == (Outcome.ERROR_EVENT, ())


def test_an_unsampled_stream_with_broken_framing_is_reported_and_counted() -> None:
    """The last frame without its blank line: the parser's finding, on an unsampled stream
    too, counted by rule; the payload rules do not run (no finding on the bad chunk)."""
    registry = CollectorRegistry()
    bad_chunk = b'data: {"id":"c","choices":"not a list"}\n\n'
    report, sent = _serve([CHAT_ROLE, bad_chunk, b"data: [DONE]\n"], registry)
    assert sent.endswith(b"data: [DONE]\n")
    rules = [finding.rule for finding in report.findings]
    assert "unterminated_frame" in rules
    assert "schema_mismatch" not in rules  # a deep check, left out by the sample
    assert _count(registry, "streamguard_violations_total", rule="unterminated_frame") == 1
    # The same stream sampled gets the payload finding too: the tier is what differs.
    deep, _ = _serve(
        [CHAT_ROLE, bad_chunk, b"data: [DONE]\n"], CollectorRegistry(), sample_rate=1.0
    )
    assert "schema_mismatch" in [finding.rule for finding in deep.findings]


def test_a_protocol_that_cannot_tell_its_end_cheaply_leaves_it_unjudged_and_says_so() -> None:
    """Gemini's terminal is every candidate's finish, known only to its full check: an
    unsampled Gemini stream is framed, its end left unjudged (completed), with a note."""
    chunk = (
        b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}],"role":"model"},"index":0}]}\n\n'
    )
    monitor = StreamMonitor("gemini")
    monitor.check_framing_only()
    monitor.feed(chunk)
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert report.outcome is Outcome.COMPLETED
    assert any("the end was not judged: gemini" in note for note in report.notes)
    full = StreamMonitor("gemini")
    full.feed(chunk)
    assert full.finish(StreamEnd.BODY_ENDED).outcome is Outcome.UNCLOSED


def test_the_protocols_that_judge_their_end_unsampled() -> None:
    """The set docs/metrics.md lists; a protocol joins it by implementing ``end_kind``."""
    judging = {name for name, checker in CHECKERS.items() if checker.JUDGES_END_UNSAMPLED}
    assert judging == JUDGING


def _report(stream: equivalence.Stream, mode: str, chunks: list[bytes], deep: bool) -> StreamReport:
    monitor = StreamMonitor(
        mode, request=stream.request, headers=stream.headers, clock=lambda: 0.0, **stream.options
    )
    if not deep:
        monitor.check_framing_only()
    for piece in chunks:
        monitor.feed(piece)
    return monitor.finish(StreamEnd(stream.end))


#: Enough streams to reach every group's fixtures and several mutants of each (a few
#: seconds a build); the seed is fixed, so the corpus is the same on every run.
CORPUS_STREAMS = 1_500


def _differences() -> list[str]:
    found: list[str] = []
    for stream in equivalence.streams(CORPUS_STREAMS, seed=7):
        for mode in (stream.protocol, "auto"):
            _cutting, chunks = equivalence.chunk(stream, 7)
            deep = _report(stream, mode, chunks, True)
            cheap = _report(stream, mode, chunks, False)
            where = f"{stream.id} as {mode} ({deep.protocol}, {stream.end})"
            judged = not any(note.startswith("the end was not judged") for note in cheap.notes)
            if judged and cheap.outcome is not deep.outcome:
                found.append(f"{where}: outcome {cheap.outcome.value}, full {deep.outcome.value}")
            framing = [
                [
                    (f.rule, f.event_index, f.byte_offset)
                    for f in report.findings
                    if f.rule in PARSER_RULES
                ]
                for report in (cheap, deep)
            ]
            if framing[0] != framing[1]:
                found.append(f"{where}: framing findings {framing[0]}, full {framing[1]}")
            full = {(f.rule, f.event_index) for f in deep.findings}
            extra = [
                (f.rule, f.event_index)
                for f in cheap.findings
                if f.rule not in PARSER_RULES
                and (f.rule, f.event_index) not in full
                # An unjudged end leaves a reader's give-up to the silence rule.
                and not (f.rule == "stalled" and not judged)
            ]
            if extra:
                found.append(f"{where}: findings the full check does not make: {extra}")
            if (cheap.events, cheap.bytes, cheap.protocol) != (
                deep.events,
                deep.bytes,
                deep.protocol,
            ):
                found.append(f"{where}: counted differently")
    return found


def test_the_tier_judges_as_the_full_check_over_the_equivalence_corpus() -> None:
    """Over fixtures, captures and seeded mutants (dropped, doubled and swapped events,
    frames cut, bad bytes, CR and CRLF, truncations, every way of ending), each in a
    seeded chunking: the every-stream tier gives the full check's outcome where it judges
    the end, its framing findings exactly, and no finding the full check does not make."""
    differences = _differences()
    assert not differences, "\n".join(differences[:20])


@pytest.mark.parametrize("protocol", sorted(JUDGING))
def test_each_judging_protocol_has_fixtures_in_the_corpus(protocol: str) -> None:
    """The differential test above covers every protocol that judges its end unsampled."""
    assert equivalence.sources()[protocol]


@pytest.mark.parametrize("protocol", sorted(JUDGING))
def test_a_frame_whose_event_may_end_the_stream_holds_an_end_hint(protocol: str) -> None:
    """``END_HINTS`` are sound: every fixture event that ``end_kind`` does not answer
    ``None`` (asked of a fresh checker, where every ending kind still counts) has one of
    them in its frame's bytes, so a frame skimmed unread (``EventParser.skim``) never
    hides an end. The look-alikes (the deltas) carry none, or the tier would parse them."""
    hints = CHECKERS[protocol].END_HINTS
    assert hints is not None
    ending = skimmed = 0
    for stream in equivalence.sources()[protocol]:
        for frame in equivalence.frames(stream.body):
            for event in EventParser().feed(frame):
                checker = make_checker(protocol, None, None)
                if checker.end_kind(event, 0) is not None:
                    ending += 1
                    assert any(hint in frame for hint in hints), (stream.id, frame[:80])
                elif not any(hint in frame for hint in hints):
                    skimmed += 1
    assert ending
    assert skimmed


class _CountingClock:
    """A clock that counts its reads (and never moves: no budget is ever spent)."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 0.0


def _reads_per_chunk(monitor: StreamMonitor, clock: _CountingClock, chunk: bytes) -> int:
    before = clock.reads
    monitor.feed(chunk)
    return clock.reads - before


def test_a_chunk_its_bytes_bound_costs_no_budget_clock_read() -> None:
    """The checking-time budget reads the clock after a chunk's checking; a chunk whose
    checking its bytes bound (fitted whole to a built-in checker's skeleton, or skimmed on
    the every-stream tier) is not charged, so its only read is its arrival time. A frame
    that is parsed is charged (two reads)."""
    delta = CHAT_TEXT.replace(b'an error occurred in \\"error\\" handling', b"hi")
    assert b"error" not in delta
    clock = _CountingClock()
    deep = StreamMonitor("openai_chat", clock=clock, checking_budget_s=0.5)
    reads = [_reads_per_chunk(deep, clock, frame) for frame in [CHAT_ROLE] + [delta] * 8]
    assert reads[:2] == [2, 2]  # parsed while the skeleton is learned
    assert reads[-1] == 1  # fitted: arrival only
    clock = _CountingClock()
    cheap = StreamMonitor("openai_chat", clock=clock, checking_budget_s=0.5)
    cheap.check_framing_only()
    # (The first chunk is parsed: the parser reads a stream's start for a BOM.)
    reads = [_reads_per_chunk(cheap, clock, frame) for frame in (delta, delta, DONE)]
    assert reads == [2, 1, 2]
