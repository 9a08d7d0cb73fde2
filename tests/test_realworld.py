"""Real-world captures from public bug reports and SDK fixtures: each gives what its sidecar says.

Every ``tests/fixtures/realworld/<dir>/NAME.sse`` has a ``NAME.json`` sidecar naming where the
bytes come from (``source``: a URL, or ``synthetic: <reason>``), how faithful they are
(``provenance``), the protocol to check them as, the request if one matters, and what to expect:

- ``{"healthy": true}``: no error-severity finding (warnings are allowed);
- ``"rules"``: each named rule is among the findings;
- ``"outcome"``: the report's outcome;
- ``"detected_protocol"``: the protocol ``protocol="auto"`` settled on;
- ``"any_finding_at"``: ``{"event_index": N, "min_severity": S}``, some finding of at least that
  severity at that event (for deviations whose rule name the fix has not settled yet).

A sidecar with ``"pending"`` describes behaviour that a fix for issue 12 still has to bring; only
those expectations are marked xfail (not strict), so they can be flipped once the fix is merged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streamguard import Severity, check_stream
from streamguard.report import StreamReport
from tests.chunking import chunkings

REALWORLD = Path(__file__).parent / "fixtures" / "realworld"

PROVENANCES = {"verbatim", "verbatim-trimmed", "reconstructed", "synthetic"}
SIDECAR_KEYS = {
    "source",
    "sources",
    "provenance",
    "protocol",
    "request",
    "route_options",
    "expect",
    "pending",
    "note",
}
EXPECT_KEYS = {"healthy", "rules", "outcome", "detected_protocol", "any_finding_at"}
SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}

#: Rules about when bytes were delivered rather than what they say; cutting the body
#: differently may legitimately change them, so the chunking comparison leaves them out.
DELIVERY_RULES = {"buffered_flush", "stalled", "body_not_ended"}


@dataclass(frozen=True)
class Capture:
    path: Path
    sidecar: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def body(self) -> bytes:
        return self.path.read_bytes()

    def check(self, chunks: list[bytes] | bytes) -> StreamReport:
        options = self.sidecar.get("route_options", {})
        return check_stream(
            chunks,
            protocol=self.sidecar["protocol"],
            request=self.sidecar.get("request"),
            clock=lambda: 0.0,
            **options,
        )


def _captures() -> list[Capture]:
    return [
        Capture(path, json.loads(path.with_suffix(".json").read_text(encoding="utf-8")))
        for path in sorted(REALWORLD.glob("*/*.sse"))
    ]


CAPTURES = _captures()


def _expectation_params() -> list[Any]:
    params = []
    for capture in CAPTURES:
        marks = []
        if "pending" in capture.sidecar:
            marks.append(pytest.mark.xfail(reason=capture.sidecar["pending"], strict=False))
        params.append(pytest.param(capture, id=capture.id, marks=marks))
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
    assert {capture.path.parent.name for capture in CAPTURES} >= {
        "openai_chat",
        "openai_responses",
        "anthropic",
        "gemini",
    }
    assert {path.stem for path in REALWORLD.glob("*/*.json")} == {
        capture.path.stem for capture in CAPTURES
    }


@pytest.mark.parametrize("capture", CAPTURES, ids=[capture.id for capture in CAPTURES])
def test_sidecar_names_its_source_and_a_checkable_expectation(capture: Capture) -> None:
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
def test_capture_gives_what_its_sidecar_expects(capture: Capture) -> None:
    """Healthy captures have no error finding; broken ones have their rules and outcome."""
    report = capture.check(capture.body)
    expect = capture.sidecar["expect"]
    if expect.get("healthy"):
        errors = [f.rule for f in report.findings if f.severity is Severity.ERROR]
        assert errors == []
    missing = set(expect.get("rules", ())) - set(report.rules())
    assert not missing, f"expected rules not reported: {sorted(missing)}"
    if "outcome" in expect:
        assert report.outcome.value == expect["outcome"]
    if "detected_protocol" in expect:
        assert report.protocol == expect["detected_protocol"]
    if "any_finding_at" in expect:
        where = expect["any_finding_at"]
        floor = SEVERITY_RANK[Severity(where["min_severity"])]
        assert any(
            f.event_index == where["event_index"] and SEVERITY_RANK[f.severity] >= floor
            for f in report.findings
        )


@pytest.mark.parametrize("capture", CAPTURES, ids=[capture.id for capture in CAPTURES])
def test_findings_do_not_depend_on_how_the_body_is_cut(capture: Capture) -> None:
    """Whole, byte by byte, with empty chunks or cut at random: the same report."""
    whole = _comparable(capture.check(capture.body))
    for name, chunks in chunkings(capture.body, seed=len(capture.body)):
        assert _comparable(capture.check(chunks)) == whole, name
