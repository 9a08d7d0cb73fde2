"""The example app and the demo, run for real under uvicorn."""

from __future__ import annotations

import threading

import httpx
import pytest

from examples import demo
from examples.plain_sse_app import ROUTES, build_app
from streamguard import Outcome, StreamReport
from streamguard.testing import serve

from .helpers import AppTime

EXPECTED = {
    "/healthy": ({Outcome.COMPLETED}, []),
    "/keepalive": ({Outcome.COMPLETED}, []),
    "/cut-frame": ({Outcome.COMPLETED}, ["unterminated_frame"]),
    "/invalid-utf8": ({Outcome.COMPLETED}, ["invalid_utf8"]),
    # The client may finish reading the declared length and hang up before the app's
    # final empty body message: that race is the point of the rule.
    "/content-length": (
        {Outcome.COMPLETED, Outcome.CLIENT_DISCONNECT},
        ["content_length_on_stream"],
    ),
    "/gzip": ({Outcome.COMPLETED}, ["compressed_stream"]),
    "/never-finished": ({Outcome.UNCLOSED}, ["response_not_finished"]),
    "/crash": ({Outcome.APP_ERROR}, []),
    "/v1/chat/completions": ({Outcome.COMPLETED}, []),
    "/openai/no-done": ({Outcome.UNCLOSED}, ["missing_terminal"]),
    "/openai/role-repeated": ({Outcome.COMPLETED}, ["role_repeated"] * 7),
    "/openai/held-open": ({Outcome.COMPLETED}, ["body_not_ended"]),
    "/openai/buffered": ({Outcome.COMPLETED}, ["buffered_flush"]),
    "/v1/messages": ({Outcome.COMPLETED}, []),
    "/anthropic/delta-before-start": ({Outcome.COMPLETED}, ["block_not_started"]),
    "/api/chat": ({Outcome.COMPLETED}, []),
    "/ai-sdk/delta-before-start": ({Outcome.COMPLETED}, ["id_not_open"]),
    "/ag-ui/agent": ({Outcome.COMPLETED}, []),
    "/ag-ui/unclosed-message": ({Outcome.COMPLETED}, ["id_not_closed"]),
    "/mcp": ({Outcome.COMPLETED}, []),
    "/mcp/response-on-get": ({Outcome.COMPLETED}, ["response_on_standalone_stream"]),
}


def test_every_route_is_expected() -> None:
    """The expectations below cover every route the example app serves."""
    assert set(EXPECTED) == set(ROUTES)


@pytest.fixture(scope="module")
def example_reports() -> dict[str, StreamReport]:
    reports: dict[str, StreamReport] = {}
    arrived = threading.Condition()

    def on_report(report: StreamReport) -> None:
        with arrived:
            reports[report.path or "?"] = report
            arrived.notify_all()

    # Time as the app's pauses make it (AppTime): the timing routes are judged on the pauses
    # they were written with, the others on none, whatever the machine's load.
    time = AppTime()
    app = build_app(on_report=on_report, sleep=time.sleep, clock=time)
    with serve(app, log_level="critical") as url:
        for path in ROUTES:
            try:
                with httpx.stream("GET", url + path, timeout=10) as response:
                    b"".join(response.iter_raw())
            except httpx.RemoteProtocolError:
                pass  # the broken routes cut the response off
            with arrived:
                assert arrived.wait_for(lambda path=path: path in reports, timeout=5), path
    return reports


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_example_route_report(path: str, example_reports: dict[str, StreamReport]) -> None:
    """Each example route produces the outcome and findings it was written to show."""
    outcomes, rules = EXPECTED[path]
    report = example_reports[path]
    assert report.outcome in outcomes
    assert report.rules() == rules


def test_demo_runs_and_prints_every_route(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo exits 0 and shows every route, the tallies, log events and metric lines."""
    assert demo.main() == 0
    out = capsys.readouterr().out
    for path, (_, rules) in EXPECTED.items():
        assert path in out
        for rule in rules:
            assert rule in out
    assert "Streams by outcome:" in out
    assert "Violations by rule:" in out
    assert "] stream_violation " in out
    assert "] stream_unclosed " in out
    assert (
        'streamguard_violations_total{protocol="openai_chat",route="/openai/no-done",'
        'rule="missing_terminal"} 1.0'
    ) in out
    assert 'route="/healthy"' not in out  # only the broken routes' series are shown
