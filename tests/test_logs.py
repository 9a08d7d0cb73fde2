"""structlog events: one summary per stream, violations capped and rate-limited, no content."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from structlog.testing import capture_logs

from streamguard import StreamGuardMiddleware
from streamguard.logs import ViolationLimiter

from .asgi_driver import ScriptedApp, body, http_scope, run, sse_start

CANARY = "CANARY-7f3a-secret-token"


def guarded(steps: list[Any], **options: Any) -> StreamGuardMiddleware:
    return StreamGuardMiddleware(ScriptedApp(steps), metrics=False, protocol="sse", **options)


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def test_a_clean_stream_logs_nothing_by_default() -> None:
    """By default (``summaries="notable"``) a clean stream logs no line: the metrics count
    it, and a line per healthy stream is noise at production rates."""
    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    with capture_logs() as logs:
        run(guarded(steps), http_scope(path="/chat"))
    assert logs == []


def test_clean_stream_logs_one_info_summary() -> None:
    """With ``summaries="all"`` a clean stream gives exactly one ``stream_completed`` event
    at info."""
    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    with capture_logs() as logs:
        run(guarded(steps, logs={"summaries": "all"}), http_scope(path="/chat"))
    assert logs == [
        {
            "event": "stream_completed",
            "log_level": "info",
            "route": "__unknown__",
            "protocol": "sse",
            "outcome": "completed",
            "duration_s": logs[0]["duration_s"],
            "time_to_first_event_s": logs[0]["time_to_first_event_s"],
            "events": 1,
            "bytes": 9,
            "findings": 0,
            "errors": 0,
            "warnings": 0,
        }
    ]


@pytest.mark.parametrize(
    ("steps", "event", "level"),
    [
        ([sse_start(), body(b"data: a\n\n")], "stream_unclosed", "error"),
        ([sse_start(), body(b"data: a\n\n"), RuntimeError("x")], "stream_app_error", "error"),
        ([sse_start(), body(b"data: a", more=False)], "stream_completed", "error"),
        (
            [sse_start((b"content-length", b"7")), body(b"data: a\n\n", more=False)],
            "stream_completed",
            "warning",
        ),
    ],
)
def test_summary_event_is_named_after_the_outcome(steps: list[Any], event: str, level: str) -> None:
    """The summary is ``stream_<outcome>``, at error for broken and warning for doubtful streams."""
    with capture_logs() as logs:
        run(guarded(steps))
    [summary] = [
        entry
        for entry in logs
        if entry["event"].startswith("stream_") and entry["event"] != "stream_violation"
    ]
    assert (summary["event"], summary["log_level"]) == (event, level)


def test_violation_event_fields() -> None:
    """Each finding is one ``stream_violation`` with rule, severity, message and location."""
    steps = [sse_start(), body(b"data: a\n\ndata: cut"), body(b"", more=False)]
    with capture_logs() as logs:
        run(guarded(steps))
    [violation] = events(logs, "stream_violation")
    assert violation == {
        "event": "stream_violation",
        "log_level": "error",
        "route": "__unknown__",
        "protocol": "sse",
        "rule": "unterminated_frame",
        "severity": "error",
        "message": violation["message"],
        "event_index": 1,
        "byte_offset": 9,
    }
    assert events(logs, "stream_completed")[0]["rules"] == ["unterminated_frame"]


def test_violations_per_stream_are_capped() -> None:
    """Past the per-stream cap, violations are counted on the summary instead of logged."""
    fields = b"".join(b"unknown%d: x\n" % i for i in range(8)) + b"data: a\n\n"
    steps = [sse_start(), body(fields, more=False)]
    with capture_logs() as logs:
        run(guarded(steps, logs={"max_violations_per_stream": 3}))
    assert len(events(logs, "stream_violation")) == 3
    assert events(logs, "stream_completed")[0]["violations_not_logged"] == 5


def test_rate_limit_reports_suppressed_count_on_next_event() -> None:
    """Per (route, rule) and minute, extra violations are dropped and counted on the next one."""
    now = [0.0]
    limiter = ViolationLimiter(per_minute=2, clock=lambda: now[0])
    assert [limiter.admit("r", "x") for _ in range(5)] == [0, 0, None, None, None]
    assert limiter.admit("r", "y") == 0  # another rule has its own budget
    now[0] = 61.0
    assert limiter.admit("r", "x") == 3
    assert limiter.admit("r", "x") == 0


def test_rate_limit_spans_streams() -> None:
    """The rate limit is shared by the streams of one middleware."""
    steps = [sse_start(), body(b"data: cut", more=False)]
    middleware = guarded(steps, logs={"violations_per_minute": 2})
    with capture_logs() as logs:
        for _ in range(4):
            run(middleware)
    assert len(events(logs, "stream_violation")) == 2
    assert [e.get("violations_not_logged") for e in events(logs, "stream_completed")] == [
        None,
        None,
        1,
        1,
    ]


def test_no_content_headers_or_query_strings_by_default() -> None:
    """With the default config no log line carries message content, headers or queries."""
    steps = [
        sse_start((b"x-api-key", CANARY.encode())),
        body(f"data: {CANARY}\n\ndata: {CANARY}".encode()),
        body(b"", more=False),
    ]
    scope = http_scope(
        path="/chat",
        query_string=f"key={CANARY}".encode(),
        headers=[(b"authorization", CANARY.encode())],
    )
    with capture_logs() as logs:
        run(guarded(steps), scope)
    assert logs
    assert CANARY not in repr(logs)


def test_content_excerpts_are_opt_in_truncated_and_escaped() -> None:
    """With excerpts on, a violation carries the frame shortened, control characters escaped."""
    from streamguard.protocols import CHECKERS

    if "openai_chat" not in CHECKERS:
        pytest.skip("the openai_chat checker is not installed")
    frame = (
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}'
    )
    steps = [
        sse_start(),
        body(b'data: {"not": "a chunk\x07", "padding": "' + b"y" * 300 + b'"}\n\n'),
        body(frame + b"\n\ndata: [DONE]\n\n", more=False),
    ]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps),
        metrics=False,
        protocol="openai_chat",
        logs={"content_excerpts": True, "excerpt_chars": 20},
    )
    with capture_logs() as logs:
        run(middleware)
    violation = events(logs, "stream_violation")[0]
    assert violation["excerpt"] == '{"not": "a chunk\\x07", …'


def test_summary_says_what_the_report_did_not_keep_and_a_late_close() -> None:
    """The stream summary counts dropped findings and says the client closed after the end."""
    from streamguard.config import LogConfig
    from streamguard.logs import LogSink, StreamLog
    from streamguard.monitor import StreamEnd, StreamMonitor

    monitor = StreamMonitor("openai_chat")
    monitor.feed(b"data: [DONE]\n\n" + b"data: x\n\n" * 150)
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    with capture_logs() as logs:
        StreamLog(LogSink(LogConfig()), "r", "openai_chat").ended(report)
    [summary] = logs
    assert (
        summary["outcome"],
        summary["findings_dropped"],
        summary["client_closed_after_end"],
    ) == (
        "completed",
        50,
        True,
    )


#: A program using only the transport, with structlog left unconfigured: two broken
#: streams (no ``[DONE]``) and a healthy one read through it, then a line of its own.
_TRANSPORT_ONLY = """
import logging, sys
import httpx
from streamguard.httpx import StreamGuardTransport

if sys.argv[1] == "logging":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
if sys.argv[1] == "quieted":
    logging.getLogger("streamguard").setLevel(logging.CRITICAL)
bodies = [b"data: {}\\n\\n", b"data: {}\\n\\n", b"data: [DONE]\\n\\n"]
upstream = httpx.MockTransport(lambda request: httpx.Response(
    200, headers={"content-type": "text/event-stream"}, content=iter([bodies.pop(0)])))
logs = {"enabled": sys.argv[1] != "turned-off"}
client = httpx.Client(transport=StreamGuardTransport(upstream, metrics=False, logs=logs))
for _ in range(3):
    with client.stream("POST", "http://api.test/v1/chat/completions") as response:
        response.read()
print("own output")
"""


@pytest.mark.parametrize("configured", ["nothing", "logging", "quieted", "turned-off"])
def test_library_is_silent_until_the_application_configures_logging(configured: str) -> None:
    """Unconfigured, streamguard writes only one line, once, saying how to see the events
    it found (its values never); with stdlib logging on, its events go there; a logger
    quieted on purpose, or the logs turned off, write nothing."""
    from streamguard.logs import UNHEARD_NOTICE

    done = subprocess.run(
        [sys.executable, "-c", _TRANSPORT_ONLY, configured],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == "own output\n"
    if configured == "nothing":
        assert done.stderr == UNHEARD_NOTICE + "\n"
    elif configured == "logging":
        assert "streamguard stream_unclosed " in done.stderr
        assert "side='upstream'" in done.stderr
        assert UNHEARD_NOTICE not in done.stderr
    else:
        assert done.stderr == ""


@pytest.mark.parametrize(
    ("steps", "summary"),
    [
        ([sse_start(), body(b"data: a\n\n", more=False)], None),
        ([sse_start(), body(b"data: a", more=False)], ("stream_completed", "error")),
        (
            [sse_start((b"content-length", b"7")), body(b"data: a\n\n", more=False)],
            ("stream_completed", "warning"),
        ),
        ([sse_start(), body(b"data: a\n\n")], ("stream_unclosed", "error")),
    ],
)
def test_notable_summaries_skip_clean_streams_only(
    steps: list[Any], summary: tuple[str, str] | None
) -> None:
    """With ``summaries="notable"`` a clean stream logs nothing, one with a finding or a
    failed outcome its summary, at its worst finding's level under the outcome's name."""
    with capture_logs() as logs:
        run(guarded(steps, logs={"summaries": "notable"}))
    summaries = [
        (entry["event"], entry["log_level"])
        for entry in logs
        if entry["event"] != "stream_violation"
    ]
    assert summaries == ([] if summary is None else [summary])


def test_a_new_structlog_configuration_takes_effect_at_the_next_stream() -> None:
    """The application's logger is kept while structlog's configuration is the same (so
    ``cache_logger_on_first_use`` assembles it once); a configuration made after a stream
    logged, cached or not, is the one the next stream's lines go through."""
    import structlog

    steps = [sse_start(), body(b"data: a\n\n", more=False)]
    first: list[str] = []
    second: list[str] = []

    def into(lines: list[str]) -> Any:
        def keep(_logger: Any, _method: str, event_dict: dict[str, Any]) -> str:
            lines.append(event_dict["event"])
            raise structlog.DropEvent

        return keep

    saved = structlog.get_config()
    try:
        structlog.configure(processors=[into(first)], cache_logger_on_first_use=True)
        guard = guarded(steps, logs={"summaries": "all"})
        run(guard, http_scope(path="/chat"))
        run(guard, http_scope(path="/chat"))
        structlog.configure(processors=[into(second)], cache_logger_on_first_use=True)
        run(guard, http_scope(path="/chat"))
        with capture_logs() as captured:
            run(guard, http_scope(path="/chat"))
    finally:
        structlog.configure(**saved)
    assert first == ["stream_completed", "stream_completed"]
    assert second == ["stream_completed"]
    assert [entry["event"] for entry in captured] == ["stream_completed"]
