"""The fixture corpus under ``tests/fixtures``: one format for every protocol, one loader.

A fixture is a body and a sidecar side by side, in a directory named after the protocol it is
checked as (``tests/fixtures/<protocol>/`` or ``tests/fixtures/realworld/<protocol>/``):

- ``NAME.sse``: the body bytes, exactly as sent. Expectations never live in the body: an SSE
  comment is itself a finding for some protocols (Gemini's SDK cannot read one);
- ``NAME.request.json`` (optional): the parsed request body, as ``streamguard check
  --request`` takes it;
- ``NAME.expect.json``: what checking the body must give (``expect``), and where it comes from.

``tests/fixtures/README.md`` lists the sidecar's keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from streamguard import Severity, StreamReport, check_stream
from streamguard.protocols import BUILT_IN

__all__ = [
    "EXPECT_KEYS",
    "FIXTURES",
    "PROTOCOLS",
    "REALWORLD",
    "SIDECAR_KEYS",
    "Fixture",
    "fixtures",
    "load",
    "observed",
    "protocol_fixtures",
    "realworld_fixtures",
]

FIXTURES = Path(__file__).parent / "fixtures"
REALWORLD = FIXTURES / "realworld"
#: The protocol directories directly under ``tests/fixtures``: every built-in protocol but
#: plain SSE (whose fixtures are the others', read as plain SSE), in the registry's order,
#: so a new built-in adds no line here, and ``test_fixtures`` asks it for a directory.
PROTOCOLS = tuple(spec.name for spec in BUILT_IN if spec.name != "sse")

SIDECAR_KEYS = {"expect", "route_options", "note", "source", "sources", "provenance", "pending"}
EXPECT_KEYS = {"outcome", "findings", "healthy", "rules", "detected_protocol", "any_finding_at"}
_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(frozen=True)
class Fixture:
    """One body with its request and sidecar; ``check`` runs it as its directory says."""

    path: Path
    request: dict[str, Any] | None
    sidecar: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def id(self) -> str:
        """``<protocol>/NAME`` (``realworld/<protocol>/NAME`` for captures)."""
        return self.path.relative_to(FIXTURES).with_suffix("").as_posix()

    @property
    def protocol(self) -> str:
        return self.path.parent.name

    @property
    def expect(self) -> dict[str, Any]:
        expect: dict[str, Any] = self.sidecar["expect"]
        return expect

    @property
    def expected_rules(self) -> list[str]:
        """The rules of an exact ``findings`` expectation, in order."""
        return [rule for rule, _ in self.expect["findings"]]

    @cached_property
    def body(self) -> bytes:
        return self.path.read_bytes()

    def check(self, chunks: Iterable[bytes] | bytes | None = None, **options: Any) -> StreamReport:
        """Check ``chunks`` (the whole body by default) with the request and route options."""
        return check_stream(
            self.body if chunks is None else chunks,
            protocol=self.protocol,
            request=self.request,
            **self.sidecar.get("route_options", {}),
            **options,
        )


def load(path: Path) -> Fixture:
    """The fixture whose body is ``path``; its sidecar must exist and name known keys only."""
    sidecar = json.loads(path.with_name(f"{path.stem}.expect.json").read_text(encoding="utf-8"))
    unknown = set(sidecar) - SIDECAR_KEYS | set(sidecar.get("expect", {})) - EXPECT_KEYS
    if unknown or not sidecar.get("expect"):
        raise ValueError(f"{path.name}: sidecar without expect, or unknown keys {sorted(unknown)}")
    request_path = path.with_name(f"{path.stem}.request.json")
    request = json.loads(request_path.read_text()) if request_path.exists() else None
    return Fixture(path, request, sidecar)


def fixtures(directory: str) -> list[Fixture]:
    """Every fixture of ``tests/fixtures/<directory>``, by name."""
    return [load(path) for path in sorted((FIXTURES / directory).glob("*.sse"))]


def protocol_fixtures() -> list[Fixture]:
    """The fixtures of every protocol directory, protocol by protocol."""
    return [fixture for protocol in PROTOCOLS for fixture in fixtures(protocol)]


def realworld_fixtures() -> list[Fixture]:
    """The real-world captures, directory by directory."""
    return [load(path) for path in sorted(REALWORLD.glob("*/*.sse"))]


def observed(expect: Mapping[str, Any], report: StreamReport) -> dict[str, Any]:
    """What ``report`` shows for each key ``expect`` names: equal to ``expect`` when met.

    ``findings`` is exact (rule and event index, in order); ``rules`` only asks that each
    named rule be among the findings; ``healthy`` that none is an error.
    """
    seen: dict[str, Any] = {}
    for key, wanted in expect.items():
        if key == "outcome":
            seen[key] = report.outcome.value
        elif key == "findings":
            seen[key] = [[finding.rule, finding.event_index] for finding in report.findings]
        elif key == "healthy":
            seen[key] = not any(f.severity is Severity.ERROR for f in report.findings)
        elif key == "rules":
            seen[key] = [rule for rule in wanted if rule in report.rules()]
        elif key == "detected_protocol":
            seen[key] = report.protocol
        elif key == "any_finding_at":
            floor = _RANK[Severity(wanted["min_severity"])]
            met = any(
                f.event_index == wanted["event_index"] and _RANK[f.severity] >= floor
                for f in report.findings
            )
            seen[key] = wanted if met else [[f.rule, f.event_index] for f in report.findings]
        else:
            raise ValueError(f"unknown expectation {key!r}")
    return seen
