"""What the hand-written pages say of the code is what the code does."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx

from streamguard.testing import collect

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _flat(page: str) -> str:
    return " ".join((DOCS / page).read_text().split())


class _CutBody(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield b"data: partial\n\n"
        raise httpx.RemoteProtocolError("peer closed connection without a complete body")


def test_testing_guide_names_what_collect_reports_for_a_lost_connection() -> None:
    """docs/testing.md names the rule and the outcome collect gives a connection lost mid-body."""
    claim = re.search(
        r"A connection lost mid-body is reported as `(\w+)` and the outcome is `(\w+)`",
        _flat("testing.md"),
    )
    assert claim is not None
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_CutBody()
        )
    )
    with httpx.Client(transport=transport) as client, client.stream("GET", "http://t/") as r:
        record = collect(r, protocol="sse")
    assert claim.groups() == (record.report.rules()[0], record.outcome)


def _make_bench_list() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    found = re.search(r"^BENCHMARKS := (.*)$", makefile, flags=re.MULTILINE)
    assert found is not None
    return found.group(1).split()


def test_performance_page_names_what_make_bench_runs() -> None:
    """docs/performance.md's account of `make bench` names the Makefile's benchmarks, in order."""
    text = _flat("performance.md")
    account = re.search(
        r"`make bench` runs, for the compiled build.*?then `benchmarks\.budgets`", text
    )
    assert account is not None
    named = re.findall(r"benchmarks\.(\w+)`", account.group(0))
    assert named == [*_make_bench_list(), "budgets"]


def test_performance_page_says_no_benchmark_of_make_bench_is_left_out() -> None:
    """No benchmark `make bench` runs is said, within a line before it, not to be part of it."""
    text = _flat("performance.md")
    for claim in re.finditer(r"not (?:yet )?part of `make bench`", text):
        before = text[max(0, claim.start() - 80) : claim.start()]
        for name in re.findall(r"benchmarks\.(\w+)", before):
            assert name not in _make_bench_list(), before + claim.group(0)
