"""Fixture files that say what they expect: ``: expect ...`` comment lines at the top.

A fixture is a captured-looking body (``NAME.sse``), optionally with the parsed request
body beside it (``NAME.request.json``). Its leading SSE comments state the expected result:
``: expect outcome=<outcome>`` once, then ``: expect <rule>@<event index>`` per finding, in
order. Comments are legal in the protocols these fixtures cover, so the expectations are
part of the stream the checker sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FIXTURES", "Fixture", "fixture_paths", "load"]

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Fixture:
    path: Path
    body: bytes
    request: dict[str, Any] | None
    outcome: str
    findings: list[tuple[str, int | None]]

    @property
    def name(self) -> str:
        return self.path.stem


def load(path: Path) -> Fixture:
    body = path.read_bytes()
    outcome = None
    findings: list[tuple[str, int | None]] = []
    for line in body.decode("utf-8").splitlines():
        if not line.startswith(": expect "):
            continue
        item = line.removeprefix(": expect ").strip()
        if item.startswith("outcome="):
            outcome = item.removeprefix("outcome=")
        else:
            rule, _, index = item.partition("@")
            findings.append((rule, int(index)))
    if outcome is None:
        raise ValueError(f"{path.name} has no ': expect outcome=...' line")
    request_path = path.with_name(path.stem + ".request.json")
    request = json.loads(request_path.read_text()) if request_path.exists() else None
    return Fixture(path, body, request, outcome, findings)


def fixture_paths(protocol: str) -> list[Path]:
    return sorted((FIXTURES / protocol).glob("*.sse"))
