"""The route table the engine runs (``Checker.ROUTES``, issue 47), on a small protocol of
its own: each step of ``classify`` and ``follow``, and the look-alikes that stay clean."""

from __future__ import annotations

from typing import Any

import pytest

from streamguard.protocols import BUILT_IN, ProtocolSpec
from streamguard.protocols.engine import (
    ERROR,
    OTHER,
    STRING,
    TERMINAL,
    Checker,
    Event,
    EventFindings,
    Finding,
    Route,
    UnknownTypes,
    req,
    terminated_lifecycle,
)

DONE = "[DONE]"


class Toy(Checker):
    """Typed events: ``start``, ``part`` (keyed by its ``id``), ``stop``, ``fail``."""

    __slots__ = ("seen",)

    name = "toy"
    LIFECYCLE = terminated_lifecycle()
    UNKNOWN_TYPES = UnknownTypes(": type {shown} is unknown", limit=2)

    def __init__(self) -> None:
        super().__init__()
        #: (type, name, phase before the step, whether the shape held) per handled event.
        self.seen: list[tuple[str, str, str, bool]] = []

    def handled(self, payload: dict[str, Any], found: EventFindings) -> None:
        self.seen.append((found.type, found.name, found.phase, not found.misshapen))


Toy.ROUTES = {
    "start": Route(OTHER, Toy.handled),
    "part": Route(OTHER, Toy.handled, (req("id"), req("text", STRING)), key="id"),
    "stop": Route(TERMINAL, Toy.handled),
    "fail": Route(ERROR),
}
Toy.SENTINELS = {DONE: Route(TERMINAL, Toy.handled, name="the sentinel")}


class NamedToy(Toy):
    """The same routes, typed by the SSE name (``event: stop``)."""

    __slots__ = ()

    TYPE_FIELD = None


def _run(checker: Checker, *events: tuple[str, str]) -> list[tuple[str, int | None]]:
    found: list[Finding] = []
    for index, (name, data) in enumerate(events):
        found.extend(checker.on_event(Event(name, data), index))
    return [(f.rule, f.event_index) for f in found]


def test_a_typed_event_takes_its_step_then_its_shape_then_its_handler() -> None:
    toy = Toy()
    found = _run(
        toy,
        ("message", '{"type": "start"}'),
        ("message", '{"type": "part", "id": "a", "text": 1}'),
        ("message", '{"type": "stop"}'),
    )
    assert found == [("schema_mismatch", 1)]
    assert toy.seen == [
        ("start", "start", "streaming", True),
        ("part", "part", "streaming", False),  # the shape's finding; its handler still ran
        ("stop", "stop", "streaming", True),
    ]
    assert toy.terminal_index == 2


def test_a_missing_key_keeps_the_event_from_its_handler() -> None:
    toy = Toy()
    assert _run(toy, ("message", '{"type": "part", "text": "x"}')) == [("schema_mismatch", 0)]
    assert toy.seen == []


def test_an_unknown_type_steps_as_other_and_is_reported_once_each_within_the_bound() -> None:
    toy = Toy()
    unknown = [("message", f'{{"type": "x{i % 3}"}}') for i in range(9)]
    found = _run(toy, *unknown, ("message", '{"type": "stop"}'))
    assert found == [("unknown_event_type", 0), ("unknown_event_type", 1)]
    assert toy.terminal_index == 9


def test_an_unknown_type_may_take_no_step() -> None:
    class Dropped(Toy):
        __slots__ = ()
        UNKNOWN_TYPES = UnknownTypes(": type {shown} is unknown", kind=None)

    dropped = Dropped()
    # A step would take OTHER; with none, the lifecycle never saw it.
    assert _run(dropped, ("message", '{"type": "zzz"}')) == [("unknown_event_type", 0)]
    assert dropped.phase == "streaming"


def test_a_payload_without_a_type_and_data_that_is_no_object() -> None:
    toy = Toy()
    found = _run(toy, ("message", '{"kind": "start"}'), ("message", "[1]"), ("message", "{"))
    assert found == [("schema_mismatch", 0), ("invalid_json", 1), ("invalid_json", 2)]
    assert toy.seen == []


def test_a_sentinel_is_routed_as_it_is_without_a_parse() -> None:
    toy = Toy()
    assert _run(toy, ("message", DONE)) == []
    assert toy.seen == [("", "the sentinel", "streaming", True)]
    assert toy.terminal_index == 0


def test_routed_by_name_data_that_is_no_object_still_takes_its_step() -> None:
    named = NamedToy()
    found = _run(named, ("start", "{}"), ("stop", "not json"))
    assert found == [("invalid_json", 1)]
    assert named.terminal_index == 1  # the terminal counted, its handler not run
    assert named.seen == [("start", "start", "streaming", True)]


def test_routed_by_name_an_unknown_name_is_an_unknown_type() -> None:
    named = NamedToy()
    assert _run(named, ("progress", "{}"), ("progress", "{}")) == [("unknown_event_type", 0)]


def test_a_protocol_without_routes_must_write_check_event() -> None:
    class Bare(Checker):  # (ROUTES left empty, as the base declares it)
        __slots__ = ()

    with pytest.raises(NotImplementedError, match="declares no ROUTES"):
        Bare().on_event(Event("message", "{}"), 0)


#: The built-in checkers that write ``check_event``: plain SSE alone, which has no types,
#: no lifecycle and no payload rule to route to (only a JSON check, when asked for).
WRITES_CHECK_EVENT = {"sse"}


@pytest.mark.parametrize("spec", BUILT_IN, ids=lambda spec: spec.name)
def test_a_built_in_checker_runs_its_events_through_its_routes(spec: ProtocolSpec) -> None:
    """Any other built-in checker declares ``ROUTES`` and leaves ``check_event`` to the
    engine (overriding ``classify`` at most): every event is classified, then followed."""
    if spec.name in WRITES_CHECK_EVENT:
        pytest.skip("writes check_event")
    own = spec.checker.__mro__[: spec.checker.__mro__.index(Checker)]
    assert not [cls for cls in own if "check_event" in vars(cls)]
    assert spec.checker.ROUTES
