"""Attribution in a gateway: whose bug is it, the gateway's or its upstream's?

End to end: a relay app (``tests/relay_app.py``) under the middleware and uvicorn reads
canned upstream streams (``tests/fixtures``, served by another uvicorn) through
``streamguard.httpx``'s transport and re-streams them; the official openai SDK reads the
relay. The downstream report names its upstream streams and attributes each finding and,
when the stream failed (an in-band error written for an upstream cut), its end
(``streamguard.attribution``); an upstream left open is ``upstream_left_open``. The tables
themselves are tested pure, and ``docs/attribution.md`` shows them as generated
(``python -m tests.test_attribution`` rewrites it).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.concurrency import run_in_threadpool
from structlog.testing import capture_logs

from streamguard import StreamGuardMiddleware
from streamguard.attribution import (
    ATTRIBUTED_OUTCOMES,
    ATTRIBUTIONS,
    CLASSES,
    FAILURES,
    GATEWAY,
    MAX_LINKED_UPSTREAMS,
    UNKNOWN,
    UPSTREAM,
    UpstreamState,
    attribute,
    attribute_outcome,
    failed_as,
    linked,
    markdown_failures,
    markdown_table,
    rule_class,
    summary_of,
)
from streamguard.httpx import AsyncStreamGuardTransport, StreamGuardTransport
from streamguard.metrics import StreamGuardMetrics
from streamguard.report import Outcome, StreamReport
from streamguard.rules import RULES
from tests.asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from tests.relay_app import FIXTURES, IN_BAND_ERROR, relay_app, upstream_app
from tests.servers import serve, wait_until

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency")

DOCS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "attribution.md"
TABLE_START = (
    "<!-- Generated from streamguard/attribution.py by `python -m tests.test_attribution`; "
    "do not edit. -->\n"
)
TABLE_END = "<!-- end of the generated table -->\n"
FAILURES_START = (
    "<!-- Generated from streamguard/attribution.py (FAILURES) by "
    "`python -m tests.test_attribution`; do not edit. -->\n"
)
FAILURES_END = "<!-- end of the generated failures table -->\n"
ROUTE = "/{lane}/v1/chat/completions"


# -- the table, pure ------------------------------------------------------------------------


def test_every_built_in_rule_has_exactly_one_class() -> None:
    """The table holds each rule of the built-in catalog once, and no rule it does not know."""
    from streamguard import rules as catalog

    built_in = {rule.name for rule in vars(catalog).values() if isinstance(rule, catalog.Rule)}
    listed = [rule for each in CLASSES for rule in each.rules]
    assert len(listed) == len(set(listed)), "a rule is in two classes"
    assert set(listed) == built_in
    assert set(listed) <= set(RULES)


def test_no_upstream_means_unknown() -> None:
    assert attribute(["missing_terminal", "role_repeated"], []) == (UNKNOWN, UNKNOWN)


def test_clean_upstream_means_gateway_and_the_same_break_means_upstream() -> None:
    clean = UpstreamState((), Outcome.COMPLETED, True)
    repeated = UpstreamState(("role_repeated",), Outcome.COMPLETED, True)
    assert attribute(["role_repeated"], [clean]) == (GATEWAY,)
    assert attribute(["role_repeated"], [repeated]) == (UPSTREAM,)
    # Any one of several upstream streams explains it.
    assert attribute(["role_repeated"], [clean, repeated]) == (UPSTREAM,)


def test_a_cut_upstream_explains_a_missing_terminal_and_finish_across_protocols() -> None:
    """An Anthropic upstream cut before ``message_stop`` (a ``missing_terminal`` finding, or
    only its ``connection_lost`` end) explains a Chat downstream without ``[DONE]`` or
    ``finish_reason``; a cut downstream does not explain a usage bug."""
    cut_by_finding = UpstreamState(("missing_terminal",), Outcome.UNCLOSED, True)
    cut_by_end = UpstreamState((), Outcome.CONNECTION_LOST, True)
    downstream = ["missing_terminal", "missing_finish_reason", "usage_missing"]
    assert attribute(downstream, [cut_by_finding]) == (UPSTREAM, UPSTREAM, GATEWAY)
    assert attribute(downstream, [cut_by_end]) == (UPSTREAM, UPSTREAM, GATEWAY)
    # An Anthropic upstream without message_delta explains a missing finish_reason only.
    no_delta = UpstreamState(("missing_message_delta",), Outcome.COMPLETED, True)
    assert attribute(downstream, [no_delta]) == (GATEWAY, UPSTREAM, GATEWAY)


def test_gateway_only_rules_are_never_the_upstreams() -> None:
    broken = UpstreamState(("response_not_finished", "upstream_left_open"), None, True)
    assert attribute(["upstream_left_open", "body_after_end"], [broken]) == (GATEWAY, GATEWAY)


def test_an_unchecked_upstream_cannot_clear_the_gateway() -> None:
    """A compressed or unsampled upstream has no findings to compare: unknown, not gateway."""
    unchecked = UpstreamState((), Outcome.COMPLETED, False)
    assert attribute(["role_repeated"], [unchecked]) == (UNKNOWN,)


def test_a_rule_outside_the_table_is_its_own_class() -> None:
    assert rule_class("a_plugin_rule") == "a_plugin_rule"
    same = UpstreamState(("a_plugin_rule",), Outcome.COMPLETED, True)
    assert attribute(["a_plugin_rule"], [same]) == (UPSTREAM,)


# -- a failed end, pure -----------------------------------------------------------------------

_CLEAN = UpstreamState((), Outcome.COMPLETED, True)


def _up(rules: tuple[str, ...], outcome: Outcome | None, inspected: bool = True) -> UpstreamState:
    return UpstreamState(rules, outcome, inspected)


_O = Outcome
#: (upstream, the failure it shows, whose a failed downstream end is with it alone): a row
#: of ``FAILURES`` each way it shows, then the look-alikes that must not be ``upstream``.
ENDS = [
    pytest.param(_up(("missing_terminal",), _O.UNCLOSED), "cut", UPSTREAM, id="cut"),
    pytest.param(_up(("response_not_finished",), _O.CONNECTION_LOST), "cut", UPSTREAM, id="lost"),
    pytest.param(_up((), _O.CONNECTION_LOST, False), "cut", UPSTREAM, id="lost-unchecked"),
    pytest.param(_up((), _O.ERROR_EVENT), "error", UPSTREAM, id="error-event"),
    pytest.param(_up(("stalled",), _O.CLIENT_DISCONNECT), "stall", UPSTREAM, id="stall-given-up"),
    pytest.param(_up(("stalled",), None), "stall", UPSTREAM, id="stall-still-open"),
    # Look-alikes: a healthy upstream, and ones that did not fail.
    pytest.param(_CLEAN, None, GATEWAY, id="clean"),
    pytest.param(_up(("role_repeated",), _O.COMPLETED), None, GATEWAY, id="with-a-warning"),
    pytest.param(_up(("stalled",), _O.COMPLETED), None, GATEWAY, id="stall-waited-out"),
    pytest.param(_up(("schema_mismatch",), _O.COMPLETED), None, UNKNOWN, id="with-an-error"),
    pytest.param(_up(("a_plugin_rule",), _O.COMPLETED), None, UNKNOWN, id="with-a-rule-unknown"),
    pytest.param(_up((), _O.CLIENT_DISCONNECT), None, UNKNOWN, id="closed-early-by-the-gateway"),
    pytest.param(_up((), None), None, UNKNOWN, id="still-open"),
    pytest.param(_up((), _O.COMPLETED, False), None, UNKNOWN, id="unchecked"),
    pytest.param(_up((), _O.CANCELLED), None, UNKNOWN, id="cancelled"),
]


@pytest.mark.parametrize(("upstream", "failure", "whose"), ENDS)
@pytest.mark.parametrize("end", ATTRIBUTED_OUTCOMES)
def test_a_failed_end_by_each_row_and_look_alike(
    upstream: UpstreamState, failure: str | None, whose: str, end: Outcome
) -> None:
    assert failed_as(upstream) == failure
    assert attribute_outcome(end, [upstream]) == whose
    # Any one failed upstream of several explains the end; a clean one clears nothing.
    assert attribute_outcome(end, [_CLEAN, upstream]) == whose
    assert attribute_outcome(end, [upstream, _CLEAN]) == whose


def test_the_attributed_ends_are_the_failures_an_upstream_can_cause() -> None:
    """``error_event``, ``unclosed``, ``app_error``: a completed end, a client gone, a
    cancel (and ``connection_lost``, a client side's) are nobody's to attribute, even with a
    cut upstream."""
    assert ATTRIBUTED_OUTCOMES == (Outcome.ERROR_EVENT, Outcome.UNCLOSED, Outcome.APP_ERROR)
    cut = UpstreamState(("missing_terminal",), Outcome.UNCLOSED, True)
    for end in Outcome:
        expected = UPSTREAM if end in ATTRIBUTED_OUTCOMES else None
        assert attribute_outcome(end, [cut]) == expected, end


def test_a_failed_end_with_no_upstream_is_unknown() -> None:
    assert attribute_outcome(Outcome.ERROR_EVENT, []) == UNKNOWN
    assert attribute_outcome(Outcome.COMPLETED, []) is None


def test_the_cut_failure_is_the_cut_class_s_end() -> None:
    """An upstream cut explains a missing terminal (``CLASSES``) and a failed end
    (``FAILURES``) alike: the two tables agree on which ends are a cut."""
    [cut_class] = [each for each in CLASSES if each.name == "cut"]
    [cut_failure] = [each for each in FAILURES if each.name == "cut"]
    assert cut_failure.outcomes == cut_class.outcomes
    assert all(rule in RULES for each in FAILURES for rule in each.rules)
    assert len({each.name for each in FAILURES}) == len(FAILURES)


def test_linked_attributes_the_end_as_check_upstream_reads_it() -> None:
    """``linked`` (the live link's and ``check --upstream``'s) sets the end's attribution
    from the upstream summaries; a completed stream's stays ``None``."""
    cut = summary_of(replace(_report(Outcome.UNCLOSED), findings=()))
    clean = summary_of(_report(Outcome.COMPLETED))
    assert linked(_report(Outcome.ERROR_EVENT), [cut]).outcome_attribution == UPSTREAM
    assert linked(_report(Outcome.ERROR_EVENT), [clean]).outcome_attribution == GATEWAY
    assert linked(_report(Outcome.COMPLETED), [cut]).outcome_attribution is None
    assert _report(Outcome.ERROR_EVENT).outcome_attribution is None  # no upstream: none


def _report(outcome: Outcome) -> StreamReport:
    return StreamReport(
        protocol="openai_chat",
        outcome=outcome,
        findings=(),
        events=3,
        bytes=30,
        body_messages=3,
        started_at=0.0,
        first_byte_at=None,
        first_event_at=None,
        ended_at=1.0,
    )


def test_the_docs_page_shows_the_table_as_generated() -> None:
    page = DOCS_PAGE.read_text()
    assert _with_table(page) == page, "regenerate with `.venv/bin/python -m tests.test_attribution`"


def _with_table(page: str) -> str:
    page = _with(page, TABLE_START, TABLE_END, markdown_table())
    return _with(page, FAILURES_START, FAILURES_END, markdown_failures())


def _with(page: str, start_marker: str, end_marker: str, table: str) -> str:
    head, start, rest = page.partition(start_marker)
    _old, end, tail = rest.partition(end_marker)
    assert start, f"docs/attribution.md lost the marker {start_marker!r}"
    assert end, f"docs/attribution.md lost the marker {end_marker!r}"
    return f"{head}{start}\n{table}\n{end}{tail}"


# -- a stream with no upstream does not grow --------------------------------------------------


def test_a_stream_without_upstream_has_no_link_and_an_unchanged_report() -> None:
    """The link is made only when a transport registers: a plain stream holds ``None`` and
    its report names no upstream (every finding is ``unknown`` by omission)."""
    seen: list[StreamReport] = []
    guard = StreamGuardMiddleware(
        ScriptedApp([sse_start(), body(b"data: a\n\n", more=False)]),
        metrics=False,
        protocol="openai_chat",
        logs={"enabled": False},
        on_report=seen.append,
    )
    run(guard, http_scope(path="/v1/chat/completions"))
    [report] = seen
    assert report.findings
    assert report.upstreams == ()
    assert report.attribution == ()


# -- the link, driven directly: httpx's MockTransport upstream, the scripted server ----------

_UPSTREAM_BODY = (FIXTURES / "openai_chat" / "missing_terminal.sse").read_bytes()
_DOWNSTREAM_BODY = (FIXTURES / "openai_chat" / "clean-2024-no-usage-field.sse").read_bytes()


def _upstream_response(request: httpx.Request) -> httpx.Response:
    """A Chat stream without ``[DONE]``, in pieces and with no Content-Length."""
    pieces = [_UPSTREAM_BODY[start : start + 97] for start in range(0, len(_UPSTREAM_BODY), 97)]
    if request.extensions.get("sync"):
        return httpx.Response(200, headers=_SSE, content=iter(pieces))

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return httpx.Response(200, headers=_SSE, content=chunks())


_SSE = {"content-type": "text/event-stream"}


def _guard(app: Any, reports: list[StreamReport]) -> StreamGuardMiddleware:
    return StreamGuardMiddleware(
        app,
        protocol="openai_chat",
        metrics=False,
        logs={"enabled": False},
        timers={"enabled": False},
        on_report=reports.append,
    )


def _transport(**options: Any) -> dict[str, Any]:
    return {"metrics": False, "logs": {"enabled": False}, "timers": {"enabled": False}, **options}


def test_a_sync_client_in_the_threadpool_links_too() -> None:
    """A sync endpoint's client runs on a worker thread, which copies the request's context."""
    transport = StreamGuardTransport(
        transport=httpx.MockTransport(_upstream_response), **_transport(protocol="openai_chat")
    )

    def read_upstream() -> None:
        with (
            httpx.Client(transport=transport) as client,
            client.stream(
                "POST", "http://up/v1/chat/completions", json={}, extensions={"sync": True}
            ) as response,
        ):
            for _chunk in response.iter_bytes():
                pass

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await run_in_threadpool(read_upstream)
        await send(sse_start())
        await send(body(_DOWNSTREAM_BODY, more=False))

    reports: list[StreamReport] = []
    run(_guard(app, reports), http_scope(method="POST", path="/v1/chat/completions"))
    [report] = reports
    assert named(report) == [("openai_chat", Outcome.UNCLOSED, {"missing_terminal": 1})]
    assert report.findings == ()  # the app relayed a clean stream: repaired


def test_a_report_held_for_an_open_upstream_goes_at_server_shutdown() -> None:
    """The downstream body ended, the app has not returned, its upstream is still open: the
    report waits (the stream counts in ``in_flight``) until the server stops, then goes as
    it is, with no leak finding (the app never returned) and a note saying why."""
    transport = AsyncStreamGuardTransport(
        transport=httpx.MockTransport(_upstream_response), **_transport(protocol="openai_chat")
    )
    reports: list[StreamReport] = []
    client = httpx.AsyncClient(transport=transport)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        request = client.build_request("POST", "http://up/v1/chat/completions", json={})
        await client.send(request, stream=True)  # never read, never closed
        await send(sse_start())
        await send(body(_DOWNSTREAM_BODY, more=False))
        await asyncio.sleep(3600)  # the app's cleanup, still running

    guard = _guard(app, reports)

    async def main() -> None:
        recorder = Recorder(incoming=[{"type": "http.request", "body": b""}])
        scope = http_scope(method="POST", path="/v1/chat/completions")
        task = asyncio.ensure_future(guard(scope, recorder.receive, recorder.send))
        while len(recorder.sent) < 2:
            await asyncio.sleep(0)
        assert reports == []
        assert guard.in_flight == 1
        guard.report_open_streams()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    [report] = reports
    assert report.outcome is Outcome.COMPLETED
    assert named(report) == [("openai_chat", None, {})]
    assert "upstream_left_open" not in report.rules()
    assert any("shutdown" in note for note in report.notes)


def test_upstreams_past_the_bound_are_counted_not_named() -> None:
    transport = AsyncStreamGuardTransport(
        transport=httpx.MockTransport(_upstream_response), **_transport(protocol="openai_chat")
    )
    client = httpx.AsyncClient(transport=transport)
    calls = MAX_LINKED_UPSTREAMS + 3

    async def app(scope: Any, receive: Any, send: Any) -> None:
        for _ in range(calls):
            async with client.stream("POST", "http://up/v1/chat/completions", json={}) as up:
                async for _chunk in up.aiter_bytes():
                    pass
        await send(sse_start())
        await send(body(_DOWNSTREAM_BODY, more=False))

    reports: list[StreamReport] = []
    run(_guard(app, reports), http_scope(method="POST", path="/v1/chat/completions"))
    [report] = reports
    assert len(report.upstreams) == MAX_LINKED_UPSTREAMS
    assert report.upstreams_dropped == calls - MAX_LINKED_UPSTREAMS


# -- end to end: a relay under uvicorn, read by the openai SDK --------------------------------


class Gateway:
    """The relay and its upstream, served; the reports of both sides as they arrive."""

    def __init__(self, relay_url: str, registry: CollectorRegistry) -> None:
        self.url = relay_url
        self.registry = registry
        self.downstream: list[StreamReport] = []
        self.upstream: list[StreamReport] = []
        self.lock = threading.Lock()

    def call(self, lane: str, relay: str, *upstream: str, gate: str | None = None) -> str:
        """The openai SDK's text of one relayed answer on ``lane``."""
        client = openai.OpenAI(base_url=f"{self.url}/{lane}/v1", api_key="sk-test", max_retries=0)
        headers = {"x-relay": relay, "x-upstream": ",".join(upstream)}
        if gate is not None:
            headers["x-gate"] = gate
        stream = client.chat.completions.create(
            model="relay",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            extra_headers=headers,
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        client.close()
        return text

    def report(self, lane: str) -> StreamReport:
        """The downstream report of ``lane``, once it arrived (it may be held for upstreams)."""
        path = f"/{lane}/v1/chat/completions"
        wait_until(lambda: any(r.path == path for r in self.downstream), what=path)
        [report] = [r for r in self.downstream if r.path == path]
        return report

    def sample(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(
            name, {"route": ROUTE, "protocol": "openai_chat", **labels}
        )
        return 0.0 if value is None else value


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    registry = CollectorRegistry()
    gateway: Gateway | None = None

    def on_downstream(report: StreamReport) -> None:
        assert gateway is not None
        with gateway.lock:
            gateway.downstream.append(report)

    def on_upstream(report: StreamReport) -> None:
        assert gateway is not None
        with gateway.lock:
            gateway.upstream.append(report)

    options: dict[str, Any] = {"timers": {"enabled": False}, "logs": {"enabled": False}}
    with serve(upstream_app()) as upstream_url:
        relay = relay_app(upstream_url, metrics=False, on_report=on_upstream, **options)
        guard = StreamGuardMiddleware(
            relay,
            protocol="openai_chat",
            metrics=registry,
            on_report=on_downstream,
            **options,
        )
        with serve(guard) as relay_url:
            gateway = Gateway(relay_url, registry)
            yield gateway


def named(report: StreamReport) -> list[tuple[str, Outcome | None, dict[str, int]]]:
    """Each upstream a downstream report names: protocol, outcome, findings by rule."""
    return [(u.protocol, u.outcome, dict(u.findings)) for u in report.upstreams]


def by_rule(report: StreamReport) -> dict[str, str]:
    return {
        finding.rule: attribution
        for finding, attribution in zip(report.findings, report.attribution, strict=True)
    }


def test_a_clean_upstream_relayed_with_a_bug_is_the_gateways(gateway: Gateway) -> None:
    """A clean Anthropic upstream translated into Chat without ``[DONE]``: the missing
    terminal is the gateway's, and counted so."""
    before = gateway.sample("streamguard_attributed_violations_total", attribution=GATEWAY)
    text = gateway.call("bug", "translate_drop_done", "anthropic/ok_text_end_turn")
    assert text  # the SDK read the answer
    report = gateway.report("bug")
    assert named(report) == [("anthropic", Outcome.COMPLETED, {})]
    assert by_rule(report) == {"missing_terminal": GATEWAY}
    after = gateway.sample("streamguard_attributed_violations_total", attribution=GATEWAY)
    assert after == before + 1


def test_a_broken_upstream_relayed_faithfully_is_the_upstreams(gateway: Gateway) -> None:
    """A Chat upstream that repeats the role, relayed as it came: the upstream's."""
    before = gateway.sample("streamguard_attributed_violations_total", attribution=UPSTREAM)
    gateway.call("faithful", "faithful", "openai_chat/role_repeated")
    report = gateway.report("faithful")
    [(protocol, outcome, findings)] = named(report)
    assert (protocol, outcome) == ("openai_chat", Outcome.COMPLETED)
    assert set(findings) == {"role_repeated"}
    assert set(by_rule(report)) == {"role_repeated"}
    assert set(report.attribution) == {UPSTREAM}
    after = gateway.sample("streamguard_attributed_violations_total", attribution=UPSTREAM)
    assert after == before + len(report.findings)


def test_a_cut_anthropic_upstream_explains_a_chat_stream_without_done(gateway: Gateway) -> None:
    """The issue's example across protocols: an Anthropic upstream without
    ``message_stop``, translated faithfully, gives a Chat stream without ``[DONE]``."""
    gateway.call("cut", "translate", "anthropic/missing_terminal_truncated_mid_block")
    report = gateway.report("cut")
    assert named(report) == [("anthropic", Outcome.UNCLOSED, {"missing_terminal": 1})]
    assert "missing_terminal" in by_rule(report)
    assert set(report.attribution) == {UPSTREAM}


def test_a_broken_upstream_repaired_by_the_relay(gateway: Gateway) -> None:
    """The relay adds the ``[DONE]`` its upstream forgot: the downstream stream is clean,
    and its report still names the upstream's finding."""
    gateway.call("repair", "repair", "openai_chat/missing_terminal")
    report = gateway.report("repair")
    assert report.findings == ()
    assert report.outcome is Outcome.COMPLETED
    assert named(report) == [("openai_chat", Outcome.UNCLOSED, {"missing_terminal": 1})]


def _ends(gateway: Gateway) -> dict[str, float]:
    """``streamguard_attributed_streams_total{outcome="error_event"}`` by attribution."""
    return {
        whose: gateway.sample(
            "streamguard_attributed_streams_total", outcome="error_event", attribution=whose
        )
        for whose in ATTRIBUTIONS
    }


@pytest.mark.parametrize(
    ("lane", "fixture", "upstream_end"),
    [
        ("in-band-cut", "anthropic/missing_terminal_truncated_mid_block", Outcome.UNCLOSED),
        ("in-band-error", "anthropic/ok_error_overloaded_mid_block", Outcome.ERROR_EVENT),
    ],
)
def test_an_upstream_failure_written_as_an_in_band_error_is_the_upstreams(
    gateway: Gateway, lane: str, fixture: str, upstream_end: Outcome
) -> None:
    """Issue 46, LiteLLM's way: an Anthropic upstream cut mid-block, or ended by its own
    error event, becomes a clean in-band error in the Chat stream the client reads. The
    downstream stream has no finding to attribute; its ``error_event`` end is the
    upstream's, and counted so."""
    before = _ends(gateway)
    with pytest.raises(openai.APIError, match="the upstream stream failed"):
        gateway.call(lane, "translate_error_in_band", fixture)
    report = gateway.report(lane)
    assert report.outcome is Outcome.ERROR_EVENT
    assert report.findings == ()
    assert [(protocol, outcome) for protocol, outcome, _ in named(report)] == [
        ("anthropic", upstream_end)
    ]
    assert report.outcome_attribution == UPSTREAM
    assert _ends(gateway) == {**before, UPSTREAM: before[UPSTREAM] + 1}


def test_an_in_band_error_after_a_healthy_upstream_is_the_gateways(gateway: Gateway) -> None:
    """The look-alike: the same relay writes its in-band error after a clean upstream that
    completed (its own failure, a post-call hook that raised): the gateway's."""
    before = _ends(gateway)
    with pytest.raises(openai.APIError, match="the upstream stream failed"):
        gateway.call("in-band-own", "translate_then_gateway_error", "anthropic/ok_text_end_turn")
    report = gateway.report("in-band-own")
    assert report.outcome is Outcome.ERROR_EVENT
    assert report.findings == ()
    assert named(report) == [("anthropic", Outcome.COMPLETED, {})]
    assert report.outcome_attribution == GATEWAY
    assert _ends(gateway) == {**before, GATEWAY: before[GATEWAY] + 1}


def test_a_completed_relayed_stream_has_no_end_attribution(gateway: Gateway) -> None:
    """A linked stream that completed: nothing to attribute, nothing counted, but its
    route's series exist (made by its first linked stream, at 0 for every end)."""
    gateway.call("end-clean", "translate", "anthropic/ok_text_end_turn")
    report = gateway.report("end-clean")
    assert report.outcome is Outcome.COMPLETED
    assert report.upstreams
    assert report.outcome_attribution is None
    for end in ATTRIBUTED_OUTCOMES:
        for whose in ATTRIBUTIONS:
            labels = {"route": ROUTE, "protocol": "openai_chat"}
            labels.update(outcome=end.value, attribution=whose)
            name = "streamguard_attributed_streams_total"
            assert gateway.registry.get_sample_value(name, labels) is not None


def _broken_response(error: Callable[[], Exception]) -> Callable[[httpx.Request], httpx.Response]:
    """A Chat stream whose read raises ``error()`` after its first events (a new exception
    each time: a raised one holds its traceback, and with it the request's frames)."""
    head = _DOWNSTREAM_BODY[: _DOWNSTREAM_BODY.index(b"\n\n", 400) + 2]

    def respond(request: httpx.Request) -> httpx.Response:
        async def chunks() -> AsyncIterator[bytes]:
            yield head
            raise error()

        return httpx.Response(200, headers=_SSE, content=chunks())

    return respond


def _lost() -> Exception:
    return httpx.RemoteProtocolError("peer closed connection without sending complete body")


def _timed_out() -> Exception:
    return httpx.ReadTimeout("timed out")


@pytest.mark.parametrize(
    ("error", "handling", "end", "upstream_end"),
    [
        pytest.param(_lost, "in_band", Outcome.ERROR_EVENT, Outcome.CONNECTION_LOST, id="lost"),
        pytest.param(_lost, "raise", Outcome.APP_ERROR, Outcome.CONNECTION_LOST, id="lost-raised"),
        pytest.param(
            _timed_out, "in_band", Outcome.ERROR_EVENT, Outcome.CLIENT_DISCONNECT, id="stalled"
        ),
    ],
)
def test_an_upstream_failure_mid_body_explains_the_gateways_failed_end(
    error: Callable[[], Exception], handling: str, end: Outcome, upstream_end: Outcome
) -> None:
    """The scripted server, an upstream whose connection breaks mid-body
    (``connection_lost``) or whose read times out (``client_disconnect`` with ``stalled``:
    the gateway gave up on its silence): a gateway that writes an in-band error for it
    (LiteLLM) ends ``error_event``, one whose ``aiter_lines`` raises through the app ends
    ``app_error``; either end is the upstream's, counted, and on the summary log line."""
    transport = AsyncStreamGuardTransport(
        transport=httpx.MockTransport(_broken_response(error)),
        **_transport(protocol="openai_chat"),
    )
    client = httpx.AsyncClient(transport=transport)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        try:
            async with client.stream("POST", "http://up/v1/chat/completions", json={}) as up:
                async for line in up.aiter_lines():
                    if line:
                        await send(body(f"{line}\n\n".encode()))
        except httpx.TransportError:
            if handling == "raise":
                raise
            await send(body(IN_BAND_ERROR.encode()))
            await send(body(b"data: [DONE]\n\n", more=False))

    registry = CollectorRegistry()
    reports: list[StreamReport] = []
    guard = StreamGuardMiddleware(
        app,
        protocol="openai_chat",
        metrics=registry,
        timers={"enabled": False},
        on_report=reports.append,
    )
    with capture_logs() as logs:
        run(guard, http_scope(method="POST", path="/v1/chat/completions"))
    [report] = reports
    assert report.outcome is end
    assert [(u.protocol, u.outcome) for u in report.upstreams] == [("openai_chat", upstream_end)]
    if upstream_end is Outcome.CLIENT_DISCONNECT:
        assert dict(report.upstreams[0].findings) == {"stalled": 1}
    assert report.outcome_attribution == UPSTREAM
    counted = {
        (sample.labels["outcome"], sample.labels["attribution"]): sample.value
        for family in registry.collect()
        if family.name == "streamguard_attributed_streams"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert {key: value for key, value in counted.items() if value} == {(end.value, UPSTREAM): 1}
    assert len(counted) == len(ATTRIBUTED_OUTCOMES) * len(ATTRIBUTIONS)
    [summary] = [entry for entry in logs if entry["event"] == f"stream_{end.value}"]
    assert summary["outcome_attribution"] == UPSTREAM


def test_the_end_counter_takes_known_tokens_only() -> None:
    """Whatever a sink is handed, the ``outcome`` and ``attribution`` labels of
    ``streamguard_attributed_streams_total`` come from their closed sets."""
    registry = CollectorRegistry()
    children = StreamGuardMetrics(registry).for_stream("/r", "openai_chat")
    children.attributed_end(Outcome.ERROR_EVENT, "data: {not a token}")
    children.attributed_end(Outcome.COMPLETED, UPSTREAM)
    children.attributed_end(Outcome.UNCLOSED, None)
    values = {
        (sample.labels["outcome"], sample.labels["attribution"]): sample.value
        for family in registry.collect()
        if family.name == "streamguard_attributed_streams"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert set(values) == {
        (end.value, whose) for end in ATTRIBUTED_OUTCOMES for whose in ATTRIBUTIONS
    }
    assert set(values.values()) == {0.0}


def test_two_upstream_calls_for_one_downstream_stream(gateway: Gateway) -> None:
    """A draft call read and dropped, then the answer relayed: both are named, in order,
    and the finding is the one upstream's that broke that way."""
    gateway.call(
        "twice",
        "draft_then_faithful",
        "openai_chat/clean-2024-no-usage-field",
        "openai_chat/role_repeated",
    )
    report = gateway.report("twice")
    assert [(p, o, set(f)) for p, o, f in named(report)] == [
        ("openai_chat", Outcome.COMPLETED, set()),
        ("openai_chat", Outcome.COMPLETED, {"role_repeated"}),
    ]
    assert report.upstreams[0].ended_at is not None
    assert report.upstreams[0].ended_at <= report.upstreams[1].started_at
    assert set(report.attribution) == {UPSTREAM}


def test_a_relay_that_leaves_its_upstream_open(gateway: Gateway) -> None:
    """The relay stops at ``[DONE]`` and never closes its upstream response: the downstream
    report has ``upstream_left_open`` (the gateway's, counted), names the upstream as still
    open, and the upstream's own report says ``abandoned`` once it is closed."""
    before = gateway.sample("streamguard_violations_total", rule="upstream_left_open")
    assert gateway.call("leak", "leak", "openai_chat/clean-2024-no-usage-field")
    report = gateway.report("leak")
    assert by_rule(report) == {"upstream_left_open": GATEWAY}
    assert named(report) == [("openai_chat", None, {})]
    after = gateway.sample("streamguard_violations_total", rule="upstream_left_open")
    assert after == before + 1
    httpx.post(f"{gateway.url}/close-leaked").raise_for_status()
    wait_until(lambda: any(r.abandoned for r in gateway.upstream), what="the abandoned report")
    [abandoned] = [r for r in gateway.upstream if r.abandoned]
    # [DONE] had come: a late close, the end already seen wins.
    assert abandoned.outcome is Outcome.COMPLETED
    assert abandoned.findings == ()


def test_an_upstream_closed_by_a_background_task_is_no_leak(gateway: Gateway) -> None:
    """The look-alike: the close is handed to a ``BackgroundTask``, which runs after the
    downstream body ended but before the app returns. The report waits for it."""
    abandoned_before = sum(r.abandoned for r in gateway.upstream)
    gateway.call("background", "background_close", "openai_chat/clean-2024-no-usage-field")
    report = gateway.report("background")
    assert report.findings == ()
    assert named(report) == [("openai_chat", Outcome.COMPLETED, {})]  # closed after [DONE]
    assert sum(r.abandoned for r in gateway.upstream) == abandoned_before


def test_a_background_poller_started_by_a_request_is_not_linked_to_it(gateway: Gateway) -> None:
    """Issue 44: a task the request starts and leaves running (``asyncio.create_task``)
    copies the request's context. Its upstream streams (one cut, read to its end while the
    request runs; one still open when the app returns) are not the request's: the
    gateway's own missing ``[DONE]`` stays the gateway's, no ``upstream_left_open``, and
    the poller's stream, closed after the request, is not ``abandoned``."""
    gateway.call(
        "poller",
        "background_poller",
        "openai_chat/missing_terminal",  # the poller's, cut, ended during the request
        "anthropic/ok_text_end_turn",  # the poller's, open when the app returns
        "openai_chat/clean-2024-no-usage-field",  # the request's own, relayed without [DONE]
    )
    report = gateway.report("poller")
    assert named(report) == [("openai_chat", Outcome.COMPLETED, {})]
    assert by_rule(report) == {"missing_terminal": GATEWAY}
    assert "upstream_left_open" not in report.rules()
    seen = len(gateway.upstream)
    httpx.post(f"{gateway.url}/stop-pollers").raise_for_status()
    wait_until(
        lambda: any(r.protocol == "anthropic" for r in gateway.upstream[seen:]),
        what="the poller's open upstream stream, closed",
    )
    [closed] = [r for r in gateway.upstream[seen:] if r.protocol == "anthropic"]
    assert not closed.abandoned


@pytest.mark.parametrize("mode", ["fan_out_gather", "fan_out_task_group"])
def test_upstreams_read_in_tasks_the_app_awaits_are_linked(gateway: Gateway, mode: str) -> None:
    """The look-alike: the app fans out to two upstream streams in tasks of their own, and
    awaits them (``asyncio.gather``, an anyio task group). Both are the request's: named,
    and the cut one explains the relayed stream's missing ``[DONE]``."""
    lane = mode.replace("_", "-")
    gateway.call(
        lane, mode, "openai_chat/missing_terminal", "openai_chat/clean-2024-no-usage-field"
    )
    report = gateway.report(lane)
    assert sorted(named(report), key=str) == sorted(
        [
            ("openai_chat", Outcome.UNCLOSED, {"missing_terminal": 1}),
            ("openai_chat", Outcome.COMPLETED, {}),
        ],
        key=str,
    )
    assert by_rule(report) == {"missing_terminal": UPSTREAM}


def test_the_opening_task_is_told_apart_under_trio_and_on_a_worker_thread() -> None:
    """What tells the app's upstream streams from a background task's: the task that
    opened each, and whether it finished; under trio (hypercorn's trio worker) as under
    asyncio, and none on a worker thread (a sync client in the threadpool)."""
    trio = pytest.importorskip("trio")
    from streamguard._session import _task_finished, current_task

    async def main() -> None:
        me = current_task()
        assert me is trio.lowlevel.current_task()
        children: list[object | None] = []

        async def child() -> None:
            children.append(current_task())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        [task] = children
        assert task is not None
        assert task is not me
        assert _task_finished(task)
        assert not _task_finished(me)
        assert await trio.to_thread.run_sync(current_task) is None

    trio.run(main)
    assert current_task() is None  # no loop at all


def test_concurrent_requests_are_never_linked_to_each_other(gateway: Gateway) -> None:
    """Pairs of requests in flight at once (their upstream answers only once every one of
    them has asked): each downstream report names its own upstream and no other."""
    gate = f"{uuid.uuid4()}/4"
    lanes = {
        "conc-cut-1": "openai_chat/missing_terminal",
        "conc-clean-1": "openai_chat/clean-2024-no-usage-field",
        "conc-cut-2": "openai_chat/missing_terminal",
        "conc-clean-2": "openai_chat/clean-2024-no-usage-field",
    }
    errors: list[BaseException] = []

    def call(lane: str, fixture: str) -> None:
        try:
            gateway.call(lane, "faithful", fixture, gate=gate)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=item) for item in lanes.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    for lane, fixture in lanes.items():
        report = gateway.report(lane)
        if "missing_terminal" in fixture:
            assert named(report) == [("openai_chat", Outcome.UNCLOSED, {"missing_terminal": 1})]
            assert by_rule(report) == {"missing_terminal": UPSTREAM}
        else:
            assert named(report) == [("openai_chat", Outcome.COMPLETED, {})]
            assert report.findings == ()


def test_the_summary_log_line_names_the_upstreams_and_the_attribution() -> None:
    """The ``stream_<outcome>`` line of a linked stream: ``attribution`` (rules by whose
    they are) and ``upstreams`` (protocol, route, outcome, rules): labels only."""
    captured: list[StreamReport] = []
    with serve(upstream_app()) as upstream_url:
        relay = relay_app(
            upstream_url, metrics=False, logs={"enabled": False}, timers={"enabled": False}
        )
        guard = StreamGuardMiddleware(
            relay, protocol="openai_chat", metrics=False, on_report=captured.append
        )
        with serve(guard) as relay_url, capture_logs() as logs:
            Gateway(relay_url, CollectorRegistry()).call(
                "logs", "drop_done", "openai_chat/role_repeated"
            )
            wait_until(lambda: captured, what="the report")
    [summary] = [
        entry
        for entry in logs
        if entry["event"].startswith("stream_") and entry["event"] != "stream_violation"
    ]
    assert summary["attribution"] == {
        "gateway": ["missing_terminal"],
        "upstream": ["role_repeated"],
    }
    assert summary["upstreams"] == [
        {
            "protocol": "openai_chat",
            "route": "/v1/chat/completions",
            "outcome": "completed",
            "rules": ["role_repeated"],
        }
    ]


def test_the_attribution_label_is_a_closed_set() -> None:
    assert ATTRIBUTIONS == (UPSTREAM, GATEWAY, UNKNOWN)


def main() -> None:
    """Rewrite the generated tables of ``docs/attribution.md``."""
    DOCS_PAGE.write_text(_with_table(DOCS_PAGE.read_text()))
    print("wrote docs/attribution.md")


if __name__ == "__main__":
    main()


def test_the_otel_span_carries_the_attribution_and_the_links() -> None:
    """A linked stream's span: ``streamguard.upstreams``, ``streamguard.outcome_attribution``
    (its end failed) and each finding event's ``streamguard.attribution``; an abandoned
    upstream's: ``streamguard.abandoned``."""
    pytest.importorskip("opentelemetry.sdk", reason="the OTel SDK is a dev dependency")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from streamguard.otel import FINDING_EVENT, OpenTelemetrySink
    from streamguard.report import Finding, Severity, UpstreamSummary

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    sink = OpenTelemetrySink(tracer_provider=provider, metrics=False)
    upstream = UpstreamSummary("anthropic", "/v1/messages", Outcome.UNCLOSED, (), True, 0.0, 1.0)
    linked = StreamReport(
        protocol="openai_chat",
        outcome=Outcome.UNCLOSED,
        findings=(
            Finding("missing_terminal", Severity.ERROR, "m", 3),
            Finding("role_repeated", Severity.WARNING, "m", 1),
        ),
        events=4,
        bytes=10,
        body_messages=4,
        started_at=0.0,
        first_byte_at=None,
        first_event_at=None,
        ended_at=1.0,
        upstreams=(upstream,),
        attribution=(UPSTREAM, GATEWAY),
        outcome_attribution=UPSTREAM,
    )
    with provider.get_tracer("test").start_as_current_span("request"):
        sink.stream_started("/v1/chat/completions", "openai_chat", None).stream_ended(linked)
    abandoned = replace(
        linked, upstreams=(), attribution=(), outcome_attribution=None, abandoned=True
    )
    with provider.get_tracer("test").start_as_current_span("upstream request"):
        sink.stream_started("/v1/messages", "anthropic", None).stream_ended(abandoned)
    request, upstream_request = exported.get_finished_spans()
    assert request.attributes is not None
    assert request.attributes["streamguard.upstreams"] == 1
    assert request.attributes["streamguard.outcome_attribution"] == UPSTREAM
    assert "streamguard.abandoned" not in request.attributes
    events = [event for event in request.events if event.name == FINDING_EVENT]
    assert [(e.attributes or {}).get("streamguard.attribution") for e in events] == [
        UPSTREAM,
        GATEWAY,
    ]
    assert upstream_request.attributes is not None
    assert upstream_request.attributes["streamguard.abandoned"] is True
    assert "streamguard.upstreams" not in upstream_request.attributes
    assert "streamguard.outcome_attribution" not in upstream_request.attributes
    assert all(
        "streamguard.attribution" not in (e.attributes or {}) for e in upstream_request.events
    )


def test_the_sweeper_does_not_keep_the_request_that_started_it() -> None:
    """The sweeper's task is started by a stream and copies its context: the request's
    session must not be in it, or the sweeper would hold that request (its scope, its
    upstream streams) for as long as any stream stays open."""
    AsyncStreamGuardTransport(metrics=False)  # a transport exists: requests are published

    class Marker:
        pass

    first_done = asyncio.Event()
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(sse_start())
        await send(body(b"data: a\n\n"))
        await (first_done if scope["path"] == "/first" else release).wait()
        await send(body(b"", more=False))

    guard = StreamGuardMiddleware(app, protocol="sse", metrics=False, logs={"enabled": False})

    async def serve_first() -> weakref.ref[Marker]:
        marker = Marker()
        recorder = Recorder()
        await guard(http_scope(path="/first", marker=marker), recorder.receive, recorder.send)
        return weakref.ref(marker)

    async def main() -> bool:
        first = asyncio.ensure_future(serve_first())
        recorder = Recorder()
        second = asyncio.ensure_future(
            guard(http_scope(path="/second"), recorder.receive, recorder.send)
        )
        while guard.in_flight < 2:
            await asyncio.sleep(0)
        first_done.set()
        marker = await first
        del first
        gc.collect()
        assert guard.in_flight == 1  # the second stream keeps the sweeper running
        held = marker() is not None
        release.set()
        await second
        return held

    assert not asyncio.run(main())


def test_a_failure_while_attributing_is_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    """streamguard failing to complete a linked report: the report goes as it is, the
    failure is counted, and the app never sees it."""
    import streamguard._session

    def broken(*args: object) -> StreamReport:
        raise RuntimeError("attribution broke")

    monkeypatch.setattr(streamguard._session, "linked", broken)
    transport = AsyncStreamGuardTransport(
        transport=httpx.MockTransport(_upstream_response), **_transport(protocol="openai_chat")
    )
    client = httpx.AsyncClient(transport=transport)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async with client.stream("POST", "http://up/v1/chat/completions", json={}) as up:
            async for _chunk in up.aiter_bytes():
                pass
        await send(sse_start())
        await send(body(_DOWNSTREAM_BODY, more=False))

    reports: list[StreamReport] = []
    guard = _guard(app, reports)
    recorder, raised = run(guard, http_scope(method="POST", path="/v1/chat/completions"))
    assert raised is None
    [report] = reports
    assert report.upstreams == ()
    assert guard.internal_errors == 1
    assert recorder.sent[-1]["more_body"] is False
