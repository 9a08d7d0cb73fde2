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
