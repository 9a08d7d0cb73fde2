"""The shapes generated from the official clients (``tools/shapes.py``) are those of the
installed clients, and they refuse exactly what the clients refuse.

Each protocol's checked-in module (``streamguard/protocols/_generated_<protocol>.py``) is
regenerated in memory from the installed client and compared: a difference fails, named by
event and field, until ``make shapes`` rewrites the module. Then every event of the
protocol's fixtures, and seeded look-alikes of them (one value retyped), is validated by
the client's own models and checked against the generated shape: the two must agree on
which ones are refused (the client skips those events: ``schema_mismatch``). Each
protocol's test skips, saying why, when its client is not installed at the version
``constraints.txt`` pins.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from streamguard.protocols._fields import nested_problem
from tools.shapes import ADAPTERS, Adapter, differences, generate, pinned_version

from .sse_fixtures import FIXTURES


def _installed(adapter: Adapter) -> Adapter:
    pinned = pinned_version(adapter.distribution)
    try:
        installed = importlib.metadata.version(adapter.distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{adapter.distribution} is not installed (a dev dependency, pinned {pinned})")
    if installed != pinned:
        pytest.skip(f"{adapter.distribution} {installed} is installed, {pinned} is pinned")
    return adapter


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda adapter: adapter.protocol)
def test_generated_shapes_are_the_installed_clients(adapter: Adapter) -> None:
    generated = generate(_installed(adapter))
    committed = importlib.import_module(f"streamguard.protocols.{adapter.module}")
    drift = list(differences(committed.EVENTS, generated.events))
    assert not drift, f"{adapter.path.name} drifted from {adapter.distribution} " + (
        f"{generated.version} (regenerate: make shapes):\n" + "\n".join(drift)
    )
    assert generated.version == committed.VERSION
    assert adapter.distribution == committed.CLIENT
    assert adapter.source == committed.SOURCE


def _mutants(payload: Any, rng: random.Random) -> Iterator[Any]:
    """``payload`` with one value, at every path, replaced by each of a few look-alikes."""
    swaps = (None, "", "7", "7.5", "x", 7, 7.0, 7.5, -1, True, [], [7], ["x"], {}, {"x": 1})
    if type(payload) is dict:
        for key, value in payload.items():
            for swap in rng.sample(swaps, 5):
                yield {**payload, key: swap}
            for inner in _mutants(value, rng):
                yield {**payload, key: inner}
            yield {k: v for k, v in payload.items() if k != key}
    elif type(payload) is list:
        for number, item in enumerate(payload[:3]):
            for inner in _mutants(item, rng):
                yield [*payload[:number], inner, *payload[number + 1 :]]


def _events(protocol: str) -> Iterator[dict[str, Any]]:
    for path in sorted((FIXTURES / protocol).glob("*.sse")):
        for line in path.read_text().splitlines():
            if line.startswith("data: {"):
                try:
                    payload = json.loads(line[6:])
                except json.JSONDecodeError:
                    continue
                if type(payload) is dict:
                    yield payload


def _cohere_accepts() -> Any:
    from cohere.core.pydantic_utilities import parse_obj_as
    from cohere.v2.types.v2chat_stream_response import V2ChatStreamResponse

    def accepts(payload: dict[str, Any]) -> bool:
        try:
            parse_obj_as(V2ChatStreamResponse, payload)  # what the stream iterator calls
        except (TypeError, ValueError, KeyError, AttributeError):
            return False  # the iterator's `except`: the event is skipped
        return True

    return accepts


def test_cohere_shapes_refuse_what_the_sdk_skips() -> None:
    """Every fixture event and about 1,500 look-alikes: the SDK's ``parse_obj_as`` (what
    ``chat_stream`` builds each event with, skipping it on failure) and the generated shape
    agree, event by event."""
    (adapter,) = (a for a in ADAPTERS if a.protocol == "cohere")
    _installed(adapter)
    from streamguard.protocols._generated_cohere import EVENTS

    accepts = _cohere_accepts()
    rng = random.Random(46)
    seen: set[str] = set()
    disagreements: list[str] = []
    checked = 0
    for event in _events("cohere"):
        for payload in (event, *_mutants(event, rng)):
            key = json.dumps(payload, sort_keys=True)
            kind = payload.get("type") if type(payload) is dict else None
            if key in seen or type(kind) is not str or kind not in EVENTS:
                continue
            seen.add(key)
            checked += 1
            problem = nested_problem(payload, EVENTS[kind])
            if accepts(payload) != (problem is None):
                disagreements.append(f"{key[:160]}: SDK {accepts(payload)}, shape {problem}")
    assert checked > 1000
    assert not disagreements, f"{len(disagreements)} of {checked}:\n" + "\n".join(
        disagreements[:20]
    )
