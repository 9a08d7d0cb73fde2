"""The shapes generated from the official clients (``tools/shapes.py``) are those of the
installed clients, and they refuse exactly what the clients refuse.

Each protocol's checked-in module (``streamguard/protocols/_generated_<protocol>.py``) is
regenerated in memory from the installed client and compared: a difference fails, named by
event and field, until ``make shapes`` rewrites the module. Then every event of the
protocol's fixtures, and seeded look-alikes of them (one value retyped), is validated by
the client's own models and checked against the generated shape: the two must agree on
which ones are refused (the client skips those events: ``schema_mismatch``). openai-python
validates nothing it streams, so there each generated declaration is compared with the
strict reading of the model's own annotation instead, and the premise itself (the SDK
builds any look-alike without raising) is tested. Each
protocol's test skips, saying why, when its client is not installed at the version
``constraints.txt`` pins.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from streamguard.protocols._fields import Field, Nested, Shape, nested_problem
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


# -- openai: a client that validates nothing ------------------------------------------------

#: Values a field may be sent as, each of a JSON type or a near miss of one.
_LOOK_ALIKES: tuple[Any, ...] = (
    None,
    "",
    "x",
    "7",
    7,
    -1,
    2**70,
    7.0,
    7.5,
    float("nan"),
    True,
    [],
    [7],
    [7.0],
    ["x"],
    [True],
    {},
    {"x": 1},
)


def _openai(protocol: str) -> Adapter:
    (adapter,) = (a for a in ADAPTERS if a.protocol == protocol)
    return _installed(adapter)


@pytest.mark.parametrize("protocol", ["openai_chat", "openai_responses"])
def test_openai_shapes_type_each_generated_field_as_the_model_does(protocol: str) -> None:
    """Every declaration the generator wrote (not one written by hand) accepts exactly the
    values pydantic's strict mode accepts for the model's own annotation, and a field is
    required or nullable as the model says (a merged field is optional: not every event
    has it)."""
    import pydantic

    adapter = _openai(protocol)
    generated = generate(adapter)
    strict = pydantic.ConfigDict(strict=True)
    compared = 0
    for shape, models in generated.models:
        merged = len(models) > 1
        for model in models:
            name = adapter.merged if merged else model.__name__
            assert name is not None
            assert adapter.checked is not None
            hand = adapter.hand.get(name, {})
            declared = {d.name: d for d in (*shape.fields, *shape.nested)}
            for field_name in adapter.checked[name]:
                info = model.model_fields.get(field_name)
                if info is None or field_name in hand:
                    continue
                declaration = declared[field_name]
                if isinstance(declaration, Nested):
                    if not merged:
                        assert declaration.required == info.is_required(), field_name
                    continue
                assert isinstance(declaration, Field)
                if not merged:
                    assert declaration.required == info.is_required(), field_name
                client = pydantic.TypeAdapter(info.annotation, config=strict)
                alone = Shape(fields=(declaration,))
                for value in _LOOK_ALIKES:
                    try:
                        client.validate_python(value)
                        accepts = True
                    except pydantic.ValidationError:
                        accepts = False
                    ours = nested_problem({field_name: value}, alone)
                    assert accepts == (ours is None), (
                        f"{model.__name__}.{field_name} = {value!r}: strict {accepts}, {ours}"
                    )
                    compared += 1
    assert compared > 100


@pytest.mark.parametrize("protocol", ["openai_chat", "openai_responses"])
def test_openai_builds_every_look_alike_without_validating_it(protocol: str) -> None:
    """Why every openai shape is written from its readers, not its models: the SDK's
    ``Stream`` builds each payload with ``construct_type`` (unless a client is made with
    ``_strict_response_validation``), which never raises, whatever the payload holds."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseStreamEvent

    _openai(protocol)
    model: Any = ChatCompletionChunk if protocol == "openai_chat" else ResponseStreamEvent
    rng = random.Random(46)
    payloads = (p for event in _events(protocol) for p in (event, *_mutants(event, rng)))
    built = 0
    for payload in itertools.islice(payloads, 3000):  # (the first 3,000: a few seconds)
        construct_type(value=payload, type_=model)  # raises nothing
        built += 1
    assert built == 3000
