"""Real-world captures from public bug reports and SDK fixtures: each gives what its sidecar says.

Every ``tests/fixtures/realworld/<protocol>/NAME.sse`` has a ``NAME.expect.json`` sidecar (the
one fixture format, ``tests/sse_fixtures.py``) naming where the bytes come from (``source``: a
URL, or ``synthetic: <reason>``), how faithful they are (``provenance``) and what to expect:

- ``{"healthy": true}``: no error-severity finding (warnings are allowed);
- ``"rules"``: each named rule is among the findings;
- ``"outcome"``: the report's outcome;
- ``"detected_protocol"``: the protocol ``protocol="auto"`` settled on;
- ``"any_finding_at"``: ``{"event_index": N, "min_severity": S}``, some finding of at least that
  severity at that event (for deviations whose rule name the fix has not settled yet).

The directory is the protocol checked; a request that matters is ``NAME.request.json``.
A sidecar with ``"pending"`` describes behaviour that a fix for issue 12 still has to bring; only
those expectations are marked xfail (not strict), so they can be flipped once the fix is merged.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from streamguard import StreamReport

from .chunking import chunkings
from .sse_fixtures import REALWORLD, Fixture, observed, realworld_fixtures

PROVENANCES = {"verbatim", "verbatim-trimmed", "reconstructed", "synthetic"}
SIDECAR_KEYS = {"source", "sources", "provenance", "route_options", "expect", "pending", "note"}
EXPECT_KEYS = {"healthy", "rules", "outcome", "detected_protocol", "any_finding_at"}

#: Rules about when bytes were delivered rather than what they say; cutting the body
#: differently may legitimately change them, so the chunking comparison leaves them out.
DELIVERY_RULES = {"buffered_flush", "stalled", "body_not_ended"}

CAPTURES = realworld_fixtures()


def _id(capture: Fixture) -> str:
    return f"{capture.protocol}/{capture.name}"


def _check(capture: Fixture, chunks: list[bytes] | bytes) -> StreamReport:
    return capture.check(chunks, clock=lambda: 0.0)


def _expectation_params() -> list[Any]:
    params = []
    for capture in CAPTURES:
        marks = []
        if "pending" in capture.sidecar:
            marks.append(pytest.mark.xfail(reason=capture.sidecar["pending"], strict=False))
        params.append(pytest.param(capture, id=_id(capture), marks=marks))
    return params


def _comparable(report: StreamReport) -> tuple[object, ...]:
    findings = [
        (f.rule, f.severity, f.message, f.event_index, f.byte_offset)
        for f in report.findings
        if f.rule not in DELIVERY_RULES
    ]
    return (report.protocol, report.outcome, findings)


def test_the_corpus_is_there() -> None:
    """The corpus holds captures for every protocol directory, each with a sidecar."""
    assert {capture.protocol for capture in CAPTURES} >= {
        "openai_chat",
        "openai_responses",
        "anthropic",
        "gemini",
    }
    assert {
        path.name.removesuffix(".expect.json") for path in REALWORLD.glob("*/*.expect.json")
    } == {capture.name for capture in CAPTURES}


@pytest.mark.parametrize("capture", CAPTURES, ids=[_id(capture) for capture in CAPTURES])
def test_sidecar_names_its_source_and_a_checkable_expectation(capture: Fixture) -> None:
    """Each sidecar names a public source (or says it is synthetic) and what to expect."""
    sidecar = capture.sidecar
    assert set(sidecar) <= SIDECAR_KEYS
    source = sidecar["source"]
    assert re.match(r"https://", source) or source.startswith("synthetic: ")
    assert (sidecar["provenance"] == "synthetic") == source.startswith("synthetic: ")
    assert sidecar["provenance"] in PROVENANCES
    assert sidecar["note"].strip()
    expect = sidecar["expect"]
    assert expect
    assert set(expect) <= EXPECT_KEYS
    assert not (expect.get("healthy") and ("rules" in expect or "any_finding_at" in expect))


@pytest.mark.parametrize("capture", _expectation_params())
def test_capture_gives_what_its_sidecar_expects(capture: Fixture) -> None:
    """Healthy captures have no error finding; broken ones have their rules and outcome."""
    report = _check(capture, capture.body)
    assert observed(capture.expect, report) == capture.expect


@pytest.mark.parametrize("capture", CAPTURES, ids=[_id(capture) for capture in CAPTURES])
def test_findings_do_not_depend_on_how_the_body_is_cut(capture: Fixture) -> None:
    """Whole, byte by byte, with empty chunks or cut at random: the same report."""
    whole = _comparable(_check(capture, capture.body))
    for name, chunks in chunkings(capture.body, seed=len(capture.body)):
        assert _comparable(_check(capture, chunks)) == whole, name
