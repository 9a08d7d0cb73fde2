"""Every fixture's payloads with one value retyped: a checker never fails on a JSON type.

A checker reads JSON a stream chose, so any value may be any type: an object where a
string belongs is unhashable (``value in KNOWN`` raises), a list where an object belongs
has no ``.get``. Each such value must be a finding or nothing, never an exception, which
in the middleware would stop the stream's checks (an ``internal_error``). This walks every
payload of every protocol fixture and real-world capture and puts each JSON type, in turn,
at each of its first paths; a change in one of the first events is also checked under
auto-detection.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from streamguard import check_stream

from .oracle.mutants import json_paths
from .sse_fixtures import Fixture, protocol_fixtures, realworld_fixtures

#: One value of each JSON type, the unhashable ones first.
RETYPED: tuple[Any, ...] = ({}, [], {"a": []}, 1.5, True, -1, 10**30, "x", None)
#: Paths tried per payload (the top of the tree, where the fields rules read are).
MAX_PATHS = 40
#: A change in one of a body's first data lines is also checked under ``auto``: the
#: detection signals read the first events, with a payload of any shape.
AUTO_DATA_LINES = 3


def _with(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value = copy.deepcopy(value)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return value


def _retyped_bodies(fixture: Fixture) -> Iterator[tuple[str, bytes, bool]]:
    """Each retyped body, and whether its change is early enough to reach auto-detection."""
    text = fixture.body.decode()
    eol = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(eol)
    data_lines = 0
    for number, line in enumerate(lines):
        if not line.startswith("data:"):
            continue
        data_lines += 1
        try:
            payload = json.loads(line[5:])
        except ValueError:
            continue
        for path in list(json_paths(payload))[:MAX_PATHS]:
            for new in RETYPED:
                changed = list(lines)
                changed[number] = "data: " + json.dumps(_with(payload, path, new))
                where = f"line {number} {path} = {new!r}"
                yield where, eol.join(changed).encode(), data_lines <= AUTO_DATA_LINES


@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture", [*protocol_fixtures(), *realworld_fixtures()], ids=lambda fixture: fixture.id
)
def test_no_retyped_value_makes_a_checker_raise(fixture: Fixture) -> None:
    """Each JSON type at each of a payload's first paths is checked without an exception."""
    for where, data, early in _retyped_bodies(fixture):
        try:
            fixture.check(data)
            if early:
                check_stream(data, protocol="auto", request=fixture.request)
        except Exception as exc:  # pragma: no cover - the failure report
            pytest.fail(f"{where}: {type(exc).__name__}: {exc}")
