"""The client-side transports (streamguard.httpx, streamguard.httpx2) on scripted upstreams.

Each test runs once per HTTP client module: the two transports are one implementation bound
to two modules, and both must behave alike. The upstream is a ``MockTransport`` whose body
is a list of chunks (optionally followed by an exception), so chunk boundaries, ends and
failures are exact.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

import streamguard._transport
import streamguard.httpx
import streamguard.httpx2
from streamguard import (
    Finding,
    Outcome,
    StreamGuardMiddleware,
    StreamReport,
    check_stream,
)
from streamguard.config import StreamGuardConfig
from streamguard.logs import summary_level

from .asgi_driver import ScriptedApp
from .helpers import FakeClock, break_monitors, chat_chunk

CHUNK = chat_chunk()
FINISH = chat_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
DONE = b"data: [DONE]\n\n"
#: A healthy chat stream, cut mid-frame so no chunk boundary is an event boundary.
HEALTHY = [CHUNK[:10], CHUNK[10:] + FINISH[:5], FINISH[5:] + DONE]
CHAT_PATH = "/v1/chat/completions"
SSE = {"content-type": "text/event-stream"}


class _Chunks:
    """An upstream body: the chunks, then ``error`` raised if given; records its close."""

    def __init__(self, chunks: list[bytes], error: BaseException | None = None) -> None:
        self.chunks = chunks
        self.error = error
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.error is not None:
            raise self.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


@dataclass
class Client:
    """One HTTP client module, its streamguard transports, and what a test collects."""

    http: ModuleType
    guard: ModuleType
    reports: list[StreamReport]

    @property
    def name(self) -> str:
        return self.http.__name__

    def body(self, chunks: list[bytes], error: BaseException | None = None) -> _Chunks:
        base = (_Chunks, self.http.SyncByteStream, self.http.AsyncByteStream)
        stream: _Chunks = type("Chunks", base, {})(chunks, error)
        return stream

    def mock(self, stream: Any, status: int = 200, headers: dict[str, str] | None = None) -> Any:
        """An upstream answering every request with ``stream`` (it never reads the request)."""
        http = self.http
        head = SSE if headers is None else headers

        class Upstream(http.BaseTransport, http.AsyncBaseTransport):  # type: ignore[name-defined,misc]
            def handle_request(self, request: Any) -> Any:
                return http.Response(status, headers=head, stream=stream)

            async def handle_async_request(self, request: Any) -> Any:
                return self.handle_request(request)

        return Upstream()

    def transport(self, inner: Any, *, sync: bool = True, **options: Any) -> Any:
        options.setdefault("timers", {"enabled": False})
        options.setdefault("logs", {"enabled": False})
        options.setdefault("metrics", False)
        cls = self.guard.StreamGuardTransport if sync else self.guard.AsyncStreamGuardTransport
        return cls(inner, on_report=self.reports.append, **options)

    def read(
        self,
        stream: Any,
        url: str = "http://api.test" + CHAT_PATH,
        *,
        method: str = "POST",
        json: Any = None,
        headers: dict[str, str] | None = None,
        status: int = 200,
        **options: Any,
    ) -> tuple[list[bytes], Any]:
        """Read the whole body through a guarded sync client: the chunks, and the response."""
        transport = self.transport(self.mock(stream, status, headers), **options)
        with (
            self.http.Client(transport=transport) as client,
            client.stream(method, url, json=json) as response,
        ):
            return list(response.iter_raw()), response

    @property
    def report(self) -> StreamReport:
        [report] = self.reports
        return report


@pytest.fixture(params=["httpx", "httpx2"])
def client(request: pytest.FixtureRequest) -> Client:
    if request.param == "httpx":
        return Client(httpx, streamguard.httpx, [])
    return Client(httpx2, streamguard.httpx2, [])


# -- the bytes -----------------------------------------------------------------------------


def test_the_caller_reads_the_same_chunk_objects(client: Client) -> None:
    """Every chunk reaches the caller as the same object, in order, boundaries kept."""
    body = client.body(HEALTHY)
    chunks, _ = client.read(body)
    assert len(chunks) == len(HEALTHY)
    assert all(got is sent for got, sent in zip(chunks, HEALTHY, strict=True))
    assert client.report.outcome is Outcome.COMPLETED
    assert client.report.findings == ()


def test_async_reads_the_same_chunk_objects(client: Client) -> None:
    """The async transport passes the chunks through as the sync one does."""

    async def read() -> list[bytes]:
        transport = client.transport(client.mock(client.body(HEALTHY)), sync=False)
        async with (
            client.http.AsyncClient(transport=transport) as http,
            http.stream("POST", "http://api.test" + CHAT_PATH) as response,
        ):
            return [chunk async for chunk in response.aiter_raw()]

    chunks = asyncio.run(read())
    assert all(got is sent for got, sent in zip(chunks, HEALTHY, strict=True))
    assert client.report.outcome is Outcome.COMPLETED


@pytest.mark.parametrize(
    ("status", "headers", "method", "reason"),
    [
        (500, SSE, "POST", "status"),
        (200, {"content-type": "application/json"}, "POST", "content_type"),
        (200, {}, "POST", "content_type"),
        (200, SSE, "HEAD", "head"),
    ],
)
def test_other_responses_are_not_wrapped(
    client: Client, status: int, headers: dict[str, str], method: str, reason: str
) -> None:
    """Only 2xx event streams are watched; the others keep their own stream, counted."""
    body = client.body([b"{}"])
    transport = client.transport(client.mock(body, status, headers))
    response = transport.handle_request(client.http.Request(method, "http://api.test/x"))
    assert response.stream is body
    assert transport.skipped == {reason: 1}
    assert client.reports == []


def test_importing_streamguard_imports_no_http_client() -> None:
    """httpx and httpx2 are optional: only streamguard.httpx / .httpx2 import them."""
    code = (
        "import sys, streamguard, streamguard.middleware, streamguard.monitor; "
        "print(sorted(m for m in ('httpx', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


# -- the ends ------------------------------------------------------------------------------


def test_a_body_read_to_its_end_is_judged_whole(client: Client) -> None:
    """BODY_ENDED: the end-of-stream rules run (no [DONE]: missing_terminal, unclosed)."""
    client.read(client.body([CHUNK, FINISH]))
    expected = check_stream([CHUNK, FINISH], path=CHAT_PATH)
    assert (client.report.outcome, client.report.rules()) == (
        Outcome.UNCLOSED,
        ["missing_terminal"],
    )
    assert client.report.findings == expected.findings


def test_closing_early_is_a_client_disconnect(client: Client) -> None:
    """The caller closing before the end is client_disconnect; the upstream is closed."""
    body = client.body(HEALTHY)
    transport = client.transport(client.mock(body))
    with (
        client.http.Client(transport=transport) as http,
        http.stream("POST", "http://api.test" + CHAT_PATH) as response,
    ):
        next(response.iter_raw())
    assert body.closed
    report = client.report
    assert (report.outcome, report.client_closed_after_end, report.rules()) == (
        Outcome.CLIENT_DISCONNECT,
        False,
        [],
    )


def test_closing_after_the_terminal_is_a_late_close(client: Client) -> None:
    """An SDK that stops at [DONE] and closes: completed, the close a fact."""
    body = client.body([CHUNK + FINISH + DONE, b": trailing comment\n\n"])
    transport = client.transport(client.mock(body))
    with (
        client.http.Client(transport=transport) as http,
        http.stream("POST", "http://api.test" + CHAT_PATH) as response,
    ):
        next(response.iter_raw())
    assert (client.report.outcome, client.report.client_closed_after_end) == (
        Outcome.COMPLETED,
        True,
    )


@pytest.mark.parametrize(
    ("error", "outcome", "rules"),
    [
        ("ReadTimeout", Outcome.CLIENT_DISCONNECT, ["stalled"]),
        ("RemoteProtocolError", Outcome.CONNECTION_LOST, ["response_not_finished"]),
        ("ReadError", Outcome.CONNECTION_LOST, ["response_not_finished"]),
    ],
)
def test_a_failed_read_propagates_unchanged(
    client: Client, error: str, outcome: Outcome, rules: list[str]
) -> None:
    """A read timeout is the client giving up, a network error a lost connection; the
    caller gets the same exception object, and messages name its type only."""
    exc = getattr(client.http, error)("SGCANARY peer text")
    with pytest.raises(getattr(client.http, error)) as raised:
        client.read(client.body([CHUNK], exc))
    assert raised.value is exc
    report = client.report
    assert (report.outcome, report.rules()[:1]) == (outcome, rules)
    assert f"({error})" in report.findings[0].message or f": {error}:" in report.findings[0].message
    assert "SGCANARY" not in repr(report)


def test_cancelling_the_reader_is_a_client_disconnect(client: Client) -> None:
    """The caller's task cancelled mid-read: the caller left; CancelledError propagates."""

    async def read() -> None:
        transport = client.transport(
            client.mock(client.body([CHUNK], asyncio.CancelledError())), sync=False
        )
        async with (
            client.http.AsyncClient(transport=transport) as http,
            http.stream("POST", "http://api.test" + CHAT_PATH) as response,
        ):
            async for _ in response.aiter_raw():
                pass

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(read())
    assert client.report.outcome is Outcome.CLIENT_DISCONNECT


def test_a_stream_counts_in_flight_until_its_report_is_delivered(client: Client) -> None:
    """in_flight falls to zero only after on_report has the report, not between the two."""
    seen: list[int] = []
    transport: Any = client.guard.StreamGuardTransport(
        client.mock(client.body(HEALTHY)),
        on_report=lambda report: seen.append(transport.in_flight),
        timers={"enabled": False},
        logs={"enabled": False},
        metrics=False,
    )
    with client.http.Client(transport=transport) as http_client:
        http_client.post("http://api.test" + CHAT_PATH).read()
    assert seen == [1]
    assert transport.in_flight == 0


def test_closing_the_transport_reports_open_streams(client: Client) -> None:
    """A response never closed is reported when its transport closes, with a note."""
    transport = client.transport(client.mock(client.body(HEALTHY)))
    response = transport.handle_request(client.http.Request("POST", "http://api.test/x"))
    assert transport.in_flight == 1
    transport.close()
    assert transport.in_flight == 0
    assert client.report.outcome is Outcome.CLIENT_DISCONNECT
    assert client.report.notes == ("reported when the transport closed",)
    del response


# -- what is checked -----------------------------------------------------------------------


def test_the_request_body_is_what_request_checks_read(client: Client) -> None:
    """include_usage in the JSON the client sent makes a stream without usage usage_missing."""
    request = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    client.read(client.body(HEALTHY), json=request)
    assert client.report.rules() == ["usage_missing"]


def test_a_streamed_request_body_skips_request_checks(client: Client) -> None:
    """A request body the client streams is not read: a note says the checks were skipped."""
    transport = client.transport(client.mock(client.body(HEALTHY)))
    request = client.http.Request(
        "POST", "http://api.test" + CHAT_PATH, content=iter([b'{"stream": true}'])
    )
    transport.handle_request(request).read()
    assert client.report.notes == ("request body streamed by the client: request checks skipped",)


@pytest.mark.parametrize("key", ["api.test:8443/proxy/chat", "api.test/proxy/chat", "/proxy/chat"])
def test_routes_match_host_and_path(client: Client, key: str) -> None:
    """A route is keyed by host:port + path, host + path or path; its name is the label."""
    routes = {key: {"protocol": "openai_chat", "name": "provider"}}
    client.read(client.body([CHUNK]), "https://api.test:8443/proxy/chat", routes=routes)
    report = client.report
    assert (report.route, report.protocol, report.protocol_source) == (
        "provider",
        "openai_chat",
        "configured",
    )


def test_unlisted_urls_are_unknown_or_skipped(client: Client) -> None:
    """An unlisted URL is labelled __unknown__ (never the raw path), or skipped on request."""
    client.read(client.body(HEALTHY), "http://api.test/proxy/v1/chat/completions2")
    assert (client.report.route, client.report.protocol_source) == ("__unknown__", "event")
    chunks, _ = client.read(client.body(HEALTHY), watch_unlisted=False)
    assert len(client.reports) == 1
    assert b"".join(chunks) == b"".join(HEALTHY)


@pytest.mark.parametrize(
    ("url", "route"),
    [
        ("http://api.test/v1/chat/completions", "/v1/chat/completions"),
        ("http://gw.test/openai/v1/chat/completions?x=1", "{prefix}/chat/completions"),
        (
            "http://az.test/openai/deployments/gpt-4o-prod/chat/completions",
            "/openai/deployments/{deployment}/chat/completions",
        ),
        (
            "http://g.test/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
            "/v1beta/models/{model}:streamGenerateContent",
        ),
        ("http://lg.test/threads/3f2a9c/runs/stream", "/threads/{thread_id}/runs/stream"),
        ("http://api.test/users/1234/feed", "__unknown__"),
    ],
)
def test_unlisted_urls_are_labelled_with_their_endpoint_template(
    client: Client, url: str, route: str
) -> None:
    """An unlisted provider endpoint is labelled with its template, never its variable parts."""
    client.read(client.body(HEALTHY), url)
    assert client.report.route == route


def test_a_route_keyed_by_template_matches_its_urls(client: Client) -> None:
    """A route keyed by an endpoint template configures every URL of that template."""
    routes = {"/v1beta/models/{model}:streamGenerateContent": {"protocol": "sse", "name": "gem"}}
    client.read(
        client.body(HEALTHY), "http://g.test/v1beta/models/m1:streamGenerateContent", routes=routes
    )
    assert (client.report.route, client.report.protocol) == ("gem", "sse")


def test_sample_rate_is_set_per_route(client: Client) -> None:
    """A route's own ``sample_rate`` replaces the global one for its streams only."""
    routes = {"/v1/chat/completions": {"protocol": "openai_chat", "sample_rate": 0.0}}
    client.read(client.body(HEALTHY), routes=routes)
    client.read(client.body(HEALTHY), "http://api.test/openai/chat/completions", routes=routes)
    assert [report.notes for report in client.reports] == [
        ("not sampled: only the framing, the terminal and the outcome were checked",),
        (),
    ]


def test_an_upstream_that_declares_a_ui_message_stream_is_checked_as_one(client: Client) -> None:
    """The response header decides the protocol of an unlisted upstream, before its path."""
    headers = {**SSE, "x-vercel-ai-ui-message-stream": "v1"}
    stream = client.body([b'data: {"type":"start"}\n\n', b'data: {"type":"finish"}\n\n'])
    client.read(stream, headers=headers)
    report = client.report
    assert (report.protocol, report.protocol_source) == ("ai_sdk_ui", "header")
    assert report.rules() == ["missing_terminal"]


def test_an_upstream_mcp_get_stream_is_held_to_the_standalone_rules(client: Client) -> None:
    """The request's method reaches the checker: a response on an MCP GET stream is flagged."""
    stream = client.body(
        [
            b'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n',
            b'data: {"jsonrpc":"2.0","id":7,"result":{}}\n\n',
        ]
    )
    client.read(stream, "http://api.test/mcp", method="GET")
    assert (client.report.protocol, client.report.rules()) == (
        "mcp",
        ["response_on_standalone_stream"],
    )


def test_a_compressed_upstream_is_reported_not_inspected(client: Client) -> None:
    """Content-Encoding on an event stream: compressed_stream, and the bytes untouched."""
    headers = {**SSE, "content-encoding": "gzip"}
    chunks, _ = client.read(client.body([b"\x1f\x8b not really gzip"]), headers=headers)
    assert chunks == [b"\x1f\x8b not really gzip"]
    report = client.report
    assert (report.rules(), report.inspected) == (["compressed_stream"], False)


def test_timers_judge_the_stream_at_its_end(client: Client) -> None:
    """With timers on, a long silence between chunks is a stalled finding."""
    clock = FakeClock()

    class Slow(_Chunks):
        def __iter__(self) -> Iterator[bytes]:
            yield CHUNK
            clock.now += 120
            yield FINISH + DONE

    body: _Chunks = type("Slow", (Slow, client.http.SyncByteStream), {})([])
    client.read(body, timers={"idle_limit_s": 60}, clock=clock)
    assert client.report.rules() == ["stalled"]


# -- failing open --------------------------------------------------------------------------


def test_a_failure_inside_streamguard_never_reaches_the_caller(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checker that raises leaves the stream unwatched, counted; the caller reads on."""

    def broken(self: object, data: bytes) -> None:
        raise RuntimeError("bug")

    break_monitors(monkeypatch, streamguard._transport, "feed", broken)
    transport = client.transport(client.mock(client.body(HEALTHY)))
    with (
        client.http.Client(transport=transport) as http,
        http.stream("POST", "http://api.test" + CHAT_PATH) as response,
    ):
        assert list(response.iter_raw()) == HEALTHY
    assert transport.internal_errors == 1
    assert client.report.internal_error is not None
    assert client.report.internal_error.startswith("RuntimeError in broken")


def test_a_failing_on_report_is_contained(client: Client) -> None:
    """on_report raising is counted, not raised into the caller."""

    def fail(report: StreamReport) -> None:
        raise ValueError("callback bug")

    transport = client.guard.StreamGuardTransport(
        client.mock(client.body(HEALTHY)), on_report=fail, metrics=False
    )
    with client.http.Client(transport=transport) as http:
        assert http.post("http://api.test" + CHAT_PATH).content == b"".join(HEALTHY)
    assert transport.internal_errors == 1


def test_a_failure_deciding_leaves_the_response_alone(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If watching cannot start, the response goes to the caller as the transport made it."""

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("bug")

    break_monitors(monkeypatch, streamguard._transport, "__init__", broken)
    body = client.body(HEALTHY)
    transport = client.transport(client.mock(body))
    response = transport.handle_request(client.http.Request("POST", "http://api.test/x"))
    assert response.stream is body
    assert transport.internal_errors == 1


# -- the sinks: metrics, logs, on_report, your own -----------------------------------------


class Journal:
    """A sink that writes down every call, in order."""

    name = "journal"

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def stream_started(self, route: str, protocol: str, unchecked: str | None) -> Journal:
        self.calls.append(("started", (route, protocol, unchecked)))
        return self

    def findings(self, found: Sequence[Finding]) -> None:
        self.calls.append(("findings", [finding.rule for finding in found]))

    def stream_ended(self, report: StreamReport) -> None:
        self.calls.append(("ended", report.outcome))

    def internal_error(self, where: str, error: str, route: str, protocol: str) -> None:
        self.calls.append(("internal_error", where))


def test_every_config_field_is_a_keyword() -> None:
    """The transports take each StreamGuardConfig field as a keyword, as the middleware does."""
    for module in (streamguard.httpx, streamguard.httpx2):
        for cls in (module.StreamGuardTransport, module.AsyncStreamGuardTransport):
            keywords = inspect.signature(cls).parameters
            assert set(StreamGuardConfig.model_fields) <= set(keywords)
    with pytest.raises(TypeError, match="not both"):
        streamguard.httpx.StreamGuardTransport(config=StreamGuardConfig(), sample_rate=0.5)


def test_a_sink_hears_start_findings_and_end(client: Client) -> None:
    """A custom sink is told of the stream's start, each batch of findings, and its end."""
    journal = Journal()
    client.read(
        client.body([CHUNK, b"data: {\n\n"]), sinks=[journal], routes={CHAT_PATH: "openai_chat"}
    )
    assert journal.calls == [
        ("started", (CHAT_PATH, "openai_chat", None)),
        ("findings", ["invalid_json"]),
        ("findings", ["missing_terminal", "missing_finish_reason"]),
        ("ended", Outcome.UNCLOSED),
    ]


def test_upstream_metrics_have_their_own_names(client: Client) -> None:
    """Upstream streams are counted as streamguard_upstream_*; downstream series stay empty."""
    registry = CollectorRegistry()
    routes = {"api.test" + CHAT_PATH: {"protocol": "openai_chat", "name": "provider"}}
    client.read(client.body([CHUNK]), metrics=registry, routes=routes)
    labels = {"route": "provider", "protocol": "openai_chat"}
    sample = registry.get_sample_value
    assert sample("streamguard_upstream_streams_started_total", labels) == 1
    assert sample("streamguard_upstream_streams_total", {**labels, "outcome": "unclosed"}) == 1
    assert (
        sample("streamguard_upstream_violations_total", {**labels, "rule": "missing_terminal"}) == 1
    )
    assert (
        sample("streamguard_upstream_streams_total", {**labels, "outcome": "connection_lost"}) == 0
    )
    assert sample("streamguard_upstream_streams_in_progress", labels) == 0
    names = {family.name for family in registry.collect()}
    # the middleware's families, checks_skipped, the two attributed ones and captures included
    assert len(names) == 15
    assert all(name.startswith("streamguard_upstream_") for name in names)


def test_a_registry_holds_one_upstream_metrics_beside_the_middleware(client: Client) -> None:
    """Several transports and a middleware share one registry without registering twice."""
    registry = CollectorRegistry()
    first = client.guard.StreamGuardTransport(metrics=registry)
    second = client.guard.AsyncStreamGuardTransport(metrics=registry)
    middleware = StreamGuardMiddleware(ScriptedApp([]), metrics=registry)
    assert first.upstream.metrics is second.upstream.metrics
    assert first.upstream.metrics is not middleware.metrics
    first.close()


def test_upstream_logs_carry_the_side(client: Client) -> None:
    """The transports' log events are the middleware's, with side="upstream" bound."""
    with capture_logs() as logs, pytest.raises(client.http.ReadError):
        client.read(client.body([CHUNK], client.http.ReadError("x")), logs={"enabled": True})
    summary = logs[-1]
    assert (summary["event"], summary["log_level"], summary["side"]) == (
        "stream_connection_lost",
        "error",
        "upstream",
    )
    assert {entry["side"] for entry in logs} == {"upstream"}


def test_a_failure_is_logged_with_the_side(client: Client) -> None:
    """An internal error is told to every sink; the log says it happened upstream."""
    journal = Journal()

    def fail(report: StreamReport) -> None:
        raise ValueError("callback bug")

    transport = client.guard.StreamGuardTransport(
        client.mock(client.body(HEALTHY)), on_report=fail, metrics=False, sinks=[journal]
    )
    with capture_logs() as logs, client.http.Client(transport=transport) as http:
        http.post("http://api.test" + CHAT_PATH)
    [error] = [entry for entry in logs if entry["event"] == "streamguard_internal_error"]
    assert (error["where"], error["side"]) == ("on_report", "upstream")
    assert journal.calls[-1] == ("internal_error", "on_report")


def test_the_async_transport_reports_a_stall_while_the_stream_is_open(client: Client) -> None:
    """The sweeper polls open async streams: a stall is a finding before the stream ends."""
    journal = Journal()

    class Stalling(_Chunks):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield CHUNK
            await asyncio.sleep(0.3)
            journal.calls.append(("resumed", None))
            yield FINISH + DONE

    async def read() -> None:
        body = type("Stalling", (Stalling, client.http.AsyncByteStream), {})([])
        transport = client.transport(
            client.mock(body), sync=False, sinks=[journal], timers={"idle_limit_s": 0.05}
        )
        async with (
            client.http.AsyncClient(transport=transport) as http,
            http.stream("POST", "http://api.test" + CHAT_PATH) as response,
        ):
            async for _ in response.aiter_raw():
                pass

    asyncio.run(read())
    calls = [call for call, _ in journal.calls]
    assert calls.index("findings") < calls.index("resumed")
    assert ("findings", ["stalled"]) in journal.calls
    assert client.report.outcome is Outcome.COMPLETED


def test_a_lost_connection_summary_is_an_error_without_findings() -> None:
    """connection_lost is a failed outcome for the logs, like unclosed, even with no finding."""
    report = StreamReport(
        protocol="sse",
        outcome=Outcome.CONNECTION_LOST,
        findings=(),
        events=0,
        bytes=0,
        body_messages=0,
        started_at=0.0,
        first_byte_at=None,
        first_event_at=None,
        ended_at=0.0,
    )
    assert summary_level(report) == "error"
