"""Seeded mutants of a healthy SSE body: the breakages the oracle feeds the official clients.

Six kinds, each a plain edit of the body's frames (a frame is the bytes up to and including
the blank line that ends an event): drop the terminal (the last event), drop the start (the
first event), duplicate an event, swap two adjacent events, cut the body mid-frame, and
retype one JSON value at any path of one event's data (a string, an integer, null, a list and
an object in turn, each other than the value's own type). Every choice comes from a
``random.Random`` seeded with the fixture's id and the kind, so a mutant has a stable name
(``<fixture>~<kind>:<detail>``) and the same bytes on every run and machine.
"""

from __future__ import annotations

import copy
import json
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "Mutant", "frames", "lax_lookalikes", "mutants"]

KINDS = ("drop_terminal", "drop_start", "duplicate", "swap", "cut", "retype")
#: One value of each JSON type a retyped field takes (never the type it had).
_RETYPED: tuple[tuple[str, Any], ...] = (
    ("str", "retyped"),
    ("int", 7),
    ("null", None),
    ("list", []),
    ("object", {}),
)
#: Paths considered per data line (the first ones, depth first: where the fields rules and
#: clients read are), so a huge payload cannot size the work.
_MAX_PATHS = 200


@dataclass(frozen=True)
class Mutant:
    """A broken variant of a fixture's body, named after how it was made."""

    name: str
    kind: str
    body: bytes


def frames(body: bytes) -> tuple[list[bytes], bytes, bytes]:
    """The body's frames (each with its blank line), what follows the last one, and the
    line ending the body uses."""
    eol = b"\r\n" if b"\r\n" in body else b"\n"
    parts = body.split(eol + eol)
    return [part + eol + eol for part in parts[:-1]], parts[-1], eol


def _data_frames(framed: list[bytes], eol: bytes) -> list[int]:
    """The positions of frames that carry a data line (comments and keep-alives do not)."""
    return [
        i
        for i, frame in enumerate(framed)
        if any(line.startswith(b"data:") for line in frame.split(eol))
    ]


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON value, the value's own (``()``) first; a list's first four
    entries only."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):
            yield from json_paths(item, (*path, index))


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {str: "str", int: "int", float: "int", list: "list", dict: "object"}.get(
        type(value), "other"
    )


def _set(payload: Any, path: tuple[Any, ...], new: Any) -> Any:
    payload = copy.deepcopy(payload)
    parent = payload
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return payload


def _rewritten(
    frame: bytes, eol: bytes, forms: Callable[[Any], list[tuple[str, Any]]]
) -> list[tuple[str, bytes]]:
    """Every (description, new frame) with one JSON value of the frame's data replaced by
    one of its ``forms``, each value up to ``_MAX_PATHS`` of them (not the payload itself)."""
    lines = frame.split(eol)
    out: list[tuple[str, bytes]] = []
    for number, line in enumerate(lines):
        if not line.startswith(b"data:"):
            continue
        try:
            payload = json.loads(line[5:])
        except ValueError:
            continue
        for path in list(json_paths(payload))[1 : _MAX_PATHS + 1]:
            old = payload
            for key in path:
                old = old[key]
            for name, new in forms(old):
                changed = list(lines)
                changed[number] = b"data: " + json.dumps(_set(payload, path, new)).encode()
                out.append((f"{'.'.join(map(str, path))}={name}", eol.join(changed)))
    return out


def _retypings(frame: bytes, eol: bytes) -> list[tuple[str, bytes]]:
    """Every (description, new frame) with one JSON value of the frame's data retyped."""
    return _rewritten(frame, eol, lambda old: [(n, v) for n, v in _RETYPED if n != _type(old)])


def _lax_forms(value: Any) -> list[tuple[str, Any]]:
    """The forms pydantic's lax mode reads as ``value``: a number spelled as a string or with a
    fraction, a boolean as 0 or 1 or a word, an empty list as an empty object."""
    if isinstance(value, bool):
        return [("int", int(value)), ("word", "true" if value else "false")]
    if isinstance(value, int):
        return [("str", str(value)), ("float", float(value)), ("str.0", f"{value}.0")]
    if isinstance(value, float):
        return [("str", repr(value))]
    if value == []:
        return [("{}", {})]
    return []


def lax_lookalikes(frame: bytes, eol: bytes) -> list[tuple[str, bytes]]:
    """Every (description, new frame) with one value of the frame's data written in another
    form pydantic's lax mode reads as the same value (``_lax_forms``)."""
    return _rewritten(frame, eol, _lax_forms)


def mutants(fixture_id: str, body: bytes, *, per_kind: int = 2, retypes: int = 8) -> list[Mutant]:
    """The seeded mutants of one healthy body: ``per_kind`` of each positional kind (one
    drop of the terminal and one of the start), ``retypes`` retyped values."""
    framed, tail, eol = frames(body)
    data = _data_frames(framed, eol)
    if len(data) < 2:
        return []
    found: list[Mutant] = []

    def add(kind: str, detail: str, new: list[bytes], end: bytes = tail) -> None:
        found.append(Mutant(f"{fixture_id}~{kind}:{detail}", kind, b"".join(new) + end))

    def rng(kind: str) -> random.Random:
        return random.Random(zlib.crc32(f"{fixture_id}/{kind}".encode()))

    last, first = data[-1], data[0]
    add("drop_terminal", f"event{last}", framed[:last] + framed[last + 1 :])
    add("drop_start", f"event{first}", framed[:first] + framed[first + 1 :])
    picks = rng("duplicate").sample(data, min(per_kind, len(data)))
    for i in picks:
        add("duplicate", f"event{i}", [*framed[: i + 1], framed[i], *framed[i + 1 :]])
    pairs = [i for i in data if i + 1 < len(framed)]
    for i in rng("swap").sample(pairs, min(per_kind, len(pairs))):
        swapped = list(framed)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        add("swap", f"event{i}", swapped)
    cuts = rng("cut")
    for i in cuts.sample(data, min(per_kind, len(data))):
        frame = framed[i]
        at = cuts.randrange(1, len(frame) - len(eol))  # inside the frame, before its blank line
        add("cut", f"event{i}@{at}", framed[:i], frame[:at])
    retyped = [(i, detail, new) for i in data for detail, new in _retypings(framed[i], eol)]
    for i, detail, new in rng("retype").sample(retyped, min(retypes, len(retyped))):
        add("retype", f"event{i}.{detail}", [*framed[:i], new, *framed[i + 1 :]])
    return found
