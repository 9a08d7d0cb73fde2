"""The before/after equivalence harness of an engine rewrite (issue 25): record the facts
every stream gives, on one commit and one build, then compare two recordings.

    python -m tests.equivalence record OUT.jsonl.gz [--streams N] [--seed S]
    python -m tests.equivalence compare A.jsonl.gz B.jsonl.gz

Inputs
------

Every fixture under ``tests/fixtures`` (each protocol's directory and the real-world
captures), each fixture again as plain SSE (``<id>@sse``), then seeded mutants of them, so
that at least ``--streams`` streams are recorded, split evenly over the groups of
``GROUPS``: each protocol, and ``auto`` (the captures checked with ``protocol="auto"``). A
mutant applies one to three ``MUTATORS`` (drop, duplicate or swap events, cut mid-frame,
drop the final blank line, retype a JSON value, delete a JSON key, rename an ``event:``,
inject a comment, CRLF or CR line ends, bytes that are not UTF-8 or a misplaced BOM,
truncate after k events, concatenate with another stream of its group, a small
``max_event_bytes``); one in ten is also served on a request path (``PATHS``), one in fifty
with the AI SDK's header, and one in seven ends otherwise than by its body ending
(``ENDS``: then ``StreamMonitor`` is driven and told the ``StreamEnd``). All is drawn from
a ``random.Random`` seeded with ``(seed, source id, mutant number)`` only, so a mutant is
the same whatever else the fixture corpus holds. Each stream is fed in a chunking drawn the
same way (whole, frame by frame, random sizes, frames split in two, byte by byte...), and
checked under its own protocol and under ``auto``.

Records
-------

One JSON line per (stream, mode), after a first ``{"meta": ...}`` line naming the build
(``streamguard.compiled``), the commit, the seed and the size. A record holds the stream's
``id`` (``<fixture id>#<seed>.<mutant number>``, the fixture's own id for the unmutated
stream), its ``recipe`` (the mutations, with their positions), ``protocol`` (its group),
``mode`` (the protocol the check was told), ``input`` (a hash of the bytes, the chunk
boundaries, the request, the options and the end fed) and ``facts``: the detected protocol
and how it was chosen, the outcome, the events and bytes counted, whether it was inspected,
each finding as ``[rule, severity, event_index, byte_offset]`` in order, the findings
dropped past the cap, the skipped checks, and the type of an internal error. Finding
messages are not facts: their wording may change. A stream that makes the check raise
records ``{"raised": "<exception type>"}`` instead.

Only public names are used (``check_stream``, ``StreamMonitor``, ``StreamEnd`` and
``compiled`` from ``streamguard``), and the fixtures are read with ``tests.sse_fixtures``,
so the harness runs unchanged on both sides of a rewrite of everything below them. To
record the other side with exactly the streams of a baseline, pass ``--ids-from
BASELINE``; ``compare`` reports a stream whose input changed (a fixture edited since)
apart from one whose facts changed.

``record`` also re-checks about one stream in ``--cross-check`` in one piece, under each
of its modes, and says on stderr whether any gave other facts than its chunked feed: the
facts must not depend on the chunking.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, NamedTuple

import streamguard

from .sse_fixtures import FIXTURES, Fixture, load

__all__ = [
    "GROUPS",
    "MUTATORS",
    "Corpus",
    "Stream",
    "chunk",
    "compare",
    "facts",
    "main",
    "mutant",
    "record",
    "sources",
    "streams",
]

#: Bumped when the records or the way streams are made change: two recordings compare only
#: when made by the same version.
HARNESS_VERSION = 2
#: The groups streams are split over: a protocol (checked under it and under ``auto``), or
#: ``auto`` (the captures whose protocol is detected, checked under ``auto`` only).
GROUPS = (
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "ai_sdk_ui",
    "ag_ui",
    "mcp",
    "a2a",
    "langgraph",
    "cohere",
    "sse",
    "auto",
)
AUTO = "auto"
DEFAULT_STREAMS = 50_000
#: How many differences ``compare`` prints.
SHOWN_DIFFERENCES = 20

# -- streams -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    """One input: its bytes, the request it answers and ``check_stream``'s options."""

    id: str
    protocol: str
    body: bytes
    request: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    recipe: str = "fixture"
    #: How the body ended (a ``StreamEnd`` value) and the response headers: a stream that
    #: did not end with its body, or has headers, is checked with ``StreamMonitor``.
    end: str = "body_ended"
    headers: tuple[tuple[bytes, bytes], ...] = ()

    @property
    def modes(self) -> tuple[str, ...]:
        """The protocols it is checked under: its own and ``auto``."""
        return (AUTO,) if self.protocol == AUTO else (self.protocol, AUTO)


def _stream(fixture: Fixture) -> Stream:
    return Stream(
        fixture.id,
        fixture.protocol,
        fixture.body,
        fixture.request,
        dict(fixture.sidecar.get("route_options", {})),
    )


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def sources() -> dict[str, list[Stream]]:
    """Every group's unmutated streams: its fixtures (captures included), and for ``sse``
    every fixture again as plain SSE, half of them on a ``json`` route."""
    paths = sorted(FIXTURES.glob("*/*.sse")) + sorted((FIXTURES / "realworld").glob("*/*.sse"))
    fixtures = [_stream(load(path)) for path in paths]
    groups: dict[str, list[Stream]] = {group: [] for group in GROUPS}
    for stream in fixtures:
        groups.setdefault(stream.protocol, []).append(stream)
    for stream in fixtures:
        if stream.protocol != "sse":
            json_route = _digest(stream.id)[0] % 2 == 0
            options = {"json_data": True} if json_route else {}
            groups["sse"].append(
                Stream(f"{stream.id}@sse", "sse", stream.body, stream.request, options)
            )
    return groups


# -- frames and lines --------------------------------------------------------------------

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_ENDINGS = (b"\r\n", b"\n", b"\r")
_ANY_ENDING = re.compile(rb"\r\n|\r|\n")


def lines(body: bytes) -> list[bytes]:
    """``body``'s lines, each with its line ending (the last one may have none)."""
    return _LINE.findall(body)


def frames(body: bytes) -> list[bytes]:
    """``body`` cut after each blank line: the frames, joined back, are ``body``."""
    out: list[bytes] = []
    current: list[bytes] = []
    for line in lines(body):
        current.append(line)
        if line in _ENDINGS:
            out.append(b"".join(current))
            current = []
    if current:
        out.append(b"".join(current))
    return out


def _ending(line: bytes) -> bytes:
    for ending in _ENDINGS:
        if line.endswith(ending):
            return ending
    return b"\n"


def _field(line: bytes, name: bytes) -> bytes | None:
    """The value of ``line`` if it is the field ``name`` (one leading space stripped)."""
    if not line.startswith(name + b":"):
        return None
    value = line[len(name) + 1 :].rstrip(b"\r\n")
    return value[1:] if value.startswith(b" ") else value


def _json_frame(frame: bytes) -> tuple[list[bytes], list[int], Any] | None:
    """A frame's lines, the indices of its data lines and their JSON, or None."""
    frame_lines = lines(frame)
    data = [i for i, line in enumerate(frame_lines) if line.startswith(b"data:")]
    if not data:
        return None
    text = b"\n".join(_field(frame_lines[i], b"data") or b"" for i in data)
    try:  # decoded strictly: json.loads would let bytes that are not UTF-8 through
        payload = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return frame_lines, data, payload


def _with_json(frame_lines: list[bytes], data: list[int], payload: Any) -> bytes:
    """The frame with its data lines replaced by one line holding ``payload``."""
    try:
        dumped = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate, escaped in the fixture: keep it escaped
        dumped = json.dumps(payload, separators=(",", ":")).encode()
    new = b"data: " + dumped + _ending(frame_lines[data[0]])
    kept = [line for i, line in enumerate(frame_lines) if i not in data[1:]]
    kept[data[0]] = new
    return b"".join(kept)


def _slots(payload: Any) -> list[tuple[Any, Any, str]]:
    """Every value inside ``payload`` as (its container, its key, its dotted path)."""
    found: list[tuple[Any, Any, str]] = []
    pending: list[tuple[Any, str]] = [(payload, "")]
    while pending:
        container, path = pending.pop()
        if isinstance(container, dict):
            children: Iterable[tuple[Any, Any]] = container.items()
        elif isinstance(container, list):
            children = enumerate(container)
        else:
            continue
        for key, value in children:
            where = f"{path}.{key}" if path else str(key)
            found.append((container, key, where))
            pending.append((value, where))
    return found


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


#: What a value is retyped to, by kind.
_RETYPED: dict[str, Sequence[Any]] = {
    "string": ("", "x", "0", "stop", "message_start"),
    "number": (0, 1, -1, 2.5, 10**20),
    "null": (None,),
    "object": ({}, {"type": "x"}),
    "array": ([], [1]),
    "bool": (True, False),
}


# -- mutators ----------------------------------------------------------------------------


@dataclass
class Draft:
    """A stream being mutated: what the mutators change."""

    body: bytes
    options: dict[str, Any]
    #: The streams ``concat`` may append, and the event names ``rename_event`` may use.
    partners: Sequence[Stream]
    names: Sequence[str]


Mutator = Callable[[Draft, random.Random], "str | None"]


def _pick(rng: random.Random, candidates: Sequence[Stream]) -> Stream:
    """One of ``candidates``, by rendezvous hashing: adding a candidate changes the pick
    only where it wins, so mutants of other fixtures keep their partners."""
    token = f"{rng.getrandbits(64)}|"
    return min(candidates, key=lambda stream: _digest(token + stream.id))


def drop_event(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if not parts:
        return None
    at = rng.randrange(len(parts))
    del parts[at]
    draft.body = b"".join(parts)
    return f"drop_event({at})"


def duplicate_event(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if not parts:
        return None
    at = rng.randrange(len(parts))
    parts.insert(at, parts[at])
    draft.body = b"".join(parts)
    return f"duplicate_event({at})"


def swap_events(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if len(parts) < 2:
        return None
    at = rng.randrange(len(parts) - 1)
    parts[at], parts[at + 1] = parts[at + 1], parts[at]
    draft.body = b"".join(parts)
    return f"swap_events({at})"


def cut_mid_frame(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    long = [i for i, part in enumerate(parts) if len(part) > 1]
    if not long:
        return None
    at = rng.choice(long)
    keep = rng.randint(1, len(parts[at]) - 1)
    draft.body = b"".join(parts[:at]) + parts[at][:keep]
    return f"cut_mid_frame({at},{keep})"


def drop_final_blank_line(draft: Draft, rng: random.Random) -> str | None:
    for ending in _ENDINGS:
        if draft.body.endswith(ending):
            draft.body = draft.body[: -len(ending)]
            return "drop_final_blank_line"
    return None


def retype_field(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    candidates = [i for i, part in enumerate(parts) if b"data:" in part]
    rng.shuffle(candidates)
    for at in candidates[:8]:
        parsed = _json_frame(parts[at])
        if parsed is None:
            continue
        frame_lines, data, payload = parsed
        slots = _slots(payload)
        if not slots:
            continue
        container, key, where = rng.choice(slots)
        kind = rng.choice([k for k in _RETYPED if k != _kind(container[key])])
        container[key] = rng.choice(_RETYPED[kind])
        parts[at] = _with_json(frame_lines, data, payload)
        draft.body = b"".join(parts)
        return f"retype_field({at},{where},{kind})"
    return None


def delete_key(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    candidates = [i for i, part in enumerate(parts) if b"data:" in part]
    rng.shuffle(candidates)
    for at in candidates[:8]:
        parsed = _json_frame(parts[at])
        if parsed is None:
            continue
        frame_lines, data, payload = parsed
        keys = [slot for slot in _slots(payload) if isinstance(slot[0], dict)]
        if not keys:
            continue
        container, key, where = rng.choice(keys)
        del container[key]
        parts[at] = _with_json(frame_lines, data, payload)
        draft.body = b"".join(parts)
        return f"delete_key({at},{where})"
    return None


def rename_event(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if not parts:
        return None
    at = rng.randrange(len(parts))
    frame_lines = lines(parts[at])
    roll = rng.random()
    if roll < 0.7 and draft.names:
        name = rng.choice(draft.names)
    else:
        name = rng.choice(["message", "", "x-renamed", "error", "ping", "done"])
    named = [i for i, line in enumerate(frame_lines) if _field(line, b"event") is not None]
    ending = _ending(frame_lines[0]) if frame_lines else b"\n"
    line = b"event: " + name.encode() + ending
    if named:
        frame_lines[named[-1]] = line
    else:
        frame_lines.insert(0, line)
    parts[at] = b"".join(frame_lines)
    draft.body = b"".join(parts)
    return f"rename_event({at},{name!r})"


def inject_comment(draft: Draft, rng: random.Random) -> str | None:
    body_lines = lines(draft.body)
    at = rng.randint(0, len(body_lines))
    ending = _ending(body_lines[at - 1]) if at else b"\n"
    if at and body_lines[at - 1][-1:] not in (b"\n", b"\r"):
        return None  # after an unterminated last line: that would change the line
    comment = rng.choice([b":", b": ping", b": keep-alive", b":" + b"x" * 300])
    body_lines.insert(at, comment + ending)
    draft.body = b"".join(body_lines)
    return f"inject_comment({at})"


def line_ends(draft: Draft, rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.5:
        draft.body = _ANY_ENDING.sub(b"\r\n", draft.body)
        return "line_ends(crlf)"
    if roll < 0.8:
        parts = frames(draft.body)
        if not parts:
            return None
        at = rng.randrange(len(parts))
        parts[at] = _ANY_ENDING.sub(b"\r\n", parts[at])
        draft.body = b"".join(parts)
        return f"line_ends(crlf,{at})"
    draft.body = _ANY_ENDING.sub(b"\r", draft.body)
    return "line_ends(cr)"


#: Bytes that are not UTF-8 where they land (a lone lead or continuation byte, 0xFF, an
#: encoded surrogate), and the byte-order mark, which only the very start may carry.
_NOT_UTF8 = (b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80")
_BOM = b"\xef\xbb\xbf"


def bad_bytes(draft: Draft, rng: random.Random) -> str | None:
    if rng.random() < 0.25:
        at = 0 if rng.random() < 0.5 else rng.randint(0, len(draft.body))
        draft.body = draft.body[:at] + _BOM + draft.body[at:]
        return f"bad_bytes(bom,{at})"
    body_lines = lines(draft.body)
    if not body_lines:
        return None
    line_at = rng.randrange(len(body_lines))
    line = body_lines[line_at]
    content = len(line.rstrip(b"\r\n"))
    at = rng.randint(0, content)
    bad = rng.choice(_NOT_UTF8)
    body_lines[line_at] = line[:at] + bad + line[at:]
    draft.body = b"".join(body_lines)
    return f"bad_bytes({line_at},{at},{bad.hex()})"


def truncate_after(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if not parts:
        return None
    keep = rng.randrange(len(parts))
    draft.body = b"".join(parts[:keep])
    return f"truncate_after({keep})"


def concat(draft: Draft, rng: random.Random) -> str | None:
    if not draft.partners:
        return None
    partner = _pick(rng, draft.partners)
    draft.body += partner.body
    return f"concat({partner.id})"


def event_size_limit(draft: Draft, rng: random.Random) -> str | None:
    parts = frames(draft.body)
    if not parts:
        return None
    # About one event's size, so that it or its neighbours land on either side of the limit.
    limit = max(1, len(rng.choice(parts)) + rng.randint(-3, 3))
    draft.options["max_event_bytes"] = limit
    return f"max_event_bytes({limit})"


#: Every mutator by name; each returns what it did, or None when it does not apply.
MUTATORS: dict[str, Mutator] = {
    mutator.__name__: mutator
    for mutator in (
        drop_event,
        duplicate_event,
        swap_events,
        cut_mid_frame,
        drop_final_blank_line,
        retype_field,
        delete_key,
        rename_event,
        inject_comment,
        line_ends,
        bad_bytes,
        truncate_after,
        concat,
        event_size_limit,
    )
}
_MUTATOR_LIST = tuple(MUTATORS.values())
#: How often each is drawn: a small event size limit stops the checking, so it is rarer.
_WEIGHTS = tuple(0.25 if name == "event_size_limit" else 1.0 for name in MUTATORS)


#: Request paths a mutant may be served on: each protocol's endpoints, and neutral ones.
PATHS = (
    "/v1/chat/completions",
    "/openai/deployments/gpt-4o/chat/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
    "/mcp",
    "/api/chat",
    "/awp",
    "/v1/agents/run",
    "/events",
)
#: The response header the AI SDK's UI message stream declares itself with.
AI_SDK_HEADER = (b"x-vercel-ai-ui-message-stream", b"v1")
#: How a mutant's body may end other than by ending (``StreamEnd`` values).
ENDS = (
    "app_returned",
    "client_disconnect",
    "app_error",
    "cancelled",
    "connection_lost",
    "read_timeout",
)


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator seeded by ``seed`` and ``parts`` only (a string seed is hashed with
    SHA-512 by ``random``, not with the per-process ``hash``)."""
    return random.Random("|".join([str(seed), *parts]))


def mutant(
    source: Stream,
    number: int,
    seed: int,
    partners: Sequence[Stream] = (),
    names: Sequence[str] = (),
) -> Stream:
    """Mutant ``number`` of ``source``: one to three mutations drawn with ``seed``."""
    rng = _rng(seed, source.id, str(number))
    draft = Draft(source.body, dict(source.options), partners, names)
    wanted = rng.choices((1, 2, 3), weights=(7, 2, 1))[0]
    done: list[str] = []
    for _ in range(wanted * 4):
        if len(done) == wanted:
            break
        what = rng.choices(_MUTATOR_LIST, _WEIGHTS)[0](draft, rng)
        if what is not None:
            done.append(what)
    end, headers = "body_ended", source.headers
    roll = rng.random()
    if roll < 0.1:
        draft.options["path"] = path = rng.choice(PATHS)
        done.append(f"path({path})")
    elif roll < 0.12:
        headers = (AI_SDK_HEADER,)
        done.append("ai_sdk_header")
    if rng.random() < 0.15:
        end = rng.choice(ENDS)
        done.append(f"end({end})")
    return replace(
        source,
        id=f"{source.id}#{seed}.{number}",
        body=draft.body,
        options=draft.options,
        recipe="+".join(done) or "unchanged",
        end=end,
        headers=headers,
    )


def _event_names(group: Sequence[Stream]) -> list[str]:
    names: set[str] = set()
    for stream in group:
        for line in lines(stream.body):
            value = _field(line, b"event")
            if value is not None:
                names.add(value.decode("utf-8", "replace"))
    return sorted(names)


class Corpus:
    """The sources of every group, with what their mutants draw from: the streams a
    mutant may be concatenated with (any fixture for ``auto``, else its group's) and the
    event names its group's fixtures use."""

    def __init__(self) -> None:
        self.groups = sources()
        fixtures = [s for group in self.groups.values() for s in group if "@" not in s.id]
        self.partners = {
            name: fixtures if name == AUTO else group for name, group in self.groups.items()
        }
        self.names = {name: _event_names(self.partners[name]) for name in self.groups}
        self._by_id = {s.id: (name, s) for name, group in self.groups.items() for s in group}

    def mutant(self, group: str, source: Stream, number: int, seed: int) -> Stream:
        return mutant(source, number, seed, self.partners[group], self.names[group])

    def streams(
        self, total: int = DEFAULT_STREAMS, seed: int = 0, match: str | None = None
    ) -> Iterator[Stream]:
        """Every group's fixtures, then their mutants, at least ``total`` streams in all
        (split evenly over the groups); only the sources whose id contains ``match``."""
        quota = -(-total // len(self.groups))
        for name, group in self.groups.items():
            if not group:
                continue
            per_source = max(0, -(-(quota - len(group)) // len(group)))
            for source in group:
                if match is not None and match not in source.id:
                    continue
                yield source
                for number in range(per_source):
                    yield self.mutant(name, source, number, seed)

    def stream(self, stream_id: str) -> Stream | None:
        """The stream ``stream_id`` names (``source`` or ``source#seed.number``), if its
        source is still among the fixtures."""
        source_id, _, suffix = stream_id.partition("#")
        found = self._by_id.get(source_id)
        if found is None:
            return None
        name, source = found
        if not suffix:
            return source
        seed, _, number = suffix.partition(".")
        return self.mutant(name, source, int(number), int(seed))


def streams(
    total: int = DEFAULT_STREAMS, seed: int = 0, match: str | None = None
) -> Iterator[Stream]:
    """``Corpus().streams``: the fixtures and their mutants."""
    return Corpus().streams(total, seed, match)


# -- chunking ----------------------------------------------------------------------------


def _sizes(data: bytes, rng: random.Random, low: int, high: int) -> list[bytes]:
    chunks: list[bytes] = []
    position = 0
    while position < len(data):
        size = rng.randint(low, high)
        chunks.append(data[position : position + size])
        position += size
    return chunks


def chunk(stream: Stream, seed: int) -> tuple[str, list[bytes]]:
    """A cutting of ``stream``'s body, drawn from its id: (its name, the chunks)."""
    rng = _rng(seed, stream.id, "chunks")
    body = stream.body
    roll = rng.random()
    if roll < 0.15:
        return "whole", [body]
    if roll < 0.3:
        return "frames", frames(body)
    if roll < 0.45:
        split: list[bytes] = []
        for part in frames(body):
            at = rng.randint(0, len(part))
            split += [part[:at], part[at:]]
        return "split-frames", split
    if roll < 0.5 and len(body) <= 2048:
        return "bytewise", [body[i : i + 1] for i in range(len(body))]
    if roll < 0.6 and len(body) <= 8192:
        return "random-1-8", _sizes(body, rng, 1, 8)
    if roll < 0.8:
        with_empty = [piece for part in _sizes(body, rng, 1, 64) for piece in (part, b"")]
        return "random-1-64+empty", [b"", *with_empty]
    return "random-1-1024", _sizes(body, rng, 1, 1024)


# -- checking ----------------------------------------------------------------------------


def _zero() -> float:
    return 0.0


def facts(stream: Stream, mode: str, chunks: Iterable[bytes]) -> dict[str, Any]:
    """What checking ``chunks`` under ``mode`` gives that must not change in a rewrite."""
    try:
        if stream.end == "body_ended" and not stream.headers:
            report = streamguard.check_stream(
                chunks, protocol=mode, request=stream.request, clock=_zero, **stream.options
            )
        else:
            monitor = streamguard.StreamMonitor(
                mode,
                request=stream.request,
                headers=stream.headers,
                clock=_zero,
                **stream.options,
            )
            for piece in chunks:
                monitor.feed(piece)
            report = monitor.finish(streamguard.StreamEnd(stream.end))
    except Exception as error:  # the fact is that it raised, and what
        return {"raised": type(error).__name__}
    found: dict[str, Any] = {
        "protocol": report.protocol,
        "source": report.protocol_source,
        "outcome": report.outcome.value,
        "events": report.events,
        "bytes": report.bytes,
        "inspected": report.inspected,
        "findings": [
            [f.rule, f.severity.value, f.event_index, f.byte_offset] for f in report.findings
        ],
    }
    if report.findings_dropped:
        found["dropped"] = [list(pair) for pair in report.findings_dropped]
    if report.skipped_checks:
        found["skipped"] = list(report.skipped_checks)
    if report.internal_error is not None:  # its type only: the place is the code's
        found["internal_error"] = report.internal_error.split(" ", 1)[0]
    return found


def _input_hash(stream: Stream, chunks: Sequence[bytes]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([len(c) for c in chunks]).encode())
    context = [
        stream.request,
        stream.options,
        stream.end,
        [list(map(bytes.hex, h)) for h in stream.headers],
    ]
    digest.update(json.dumps(context, sort_keys=True).encode())
    digest.update(stream.body)
    return digest.hexdigest()[:16]


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip() or None


def _open(path: Path, mode: str) -> IO[str]:
    """``path`` as text, gzipped when it ends in ``.gz`` (with no time in the header, so
    the same records make the same file)."""
    if path.suffix != ".gz":
        return path.open(mode, encoding="utf-8")
    raw = gzip.GzipFile(filename="", mode=mode + "b", fileobj=path.open(mode + "b"), mtime=0)
    return io.TextIOWrapper(raw, encoding="utf-8")


@dataclass
class Recorded:
    """What ``record`` did: streams per group, records per (group, mode), the chunking
    cross-check, and the streams that made the checker raise."""

    streams: Counter[str] = field(default_factory=Counter)
    records: Counter[tuple[str, str]] = field(default_factory=Counter)
    cross_checked: int = 0
    chunking_dependent: list[str] = field(default_factory=list)
    raised: list[tuple[str, str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def record(
    out: Path,
    total: int = DEFAULT_STREAMS,
    seed: int = 0,
    *,
    match: str | None = None,
    ids_from: Path | None = None,
    cross_check: int = 16,
    progress: IO[str] | None = None,
) -> Recorded:
    """Check every stream under its modes and write one record per (stream, mode)."""
    done = Recorded()
    if ids_from is not None:
        meta, _ = _read(ids_from)
        seed, total = meta["seed"], meta["streams"]
    todo: Iterable[Stream | str] = (
        streams(total, seed, match) if ids_from is None else _baseline_streams(ids_from)
    )
    meta = {
        "harness": HARNESS_VERSION,
        "compiled": bool(streamguard.compiled),
        "commit": _commit(),
        "seed": seed,
        "streams": total,
        "match": match,
        "python": sys.version.split()[0],
    }
    with _open(out, "w") as sink:
        sink.write(json.dumps({"meta": meta}) + "\n")
        for count, item in enumerate(todo, 1):
            if isinstance(item, str):
                done.missing.append(item)
                continue
            stream = item
            chunking, chunks = chunk(stream, seed)
            digest = _input_hash(stream, chunks)
            done.streams[stream.protocol] += 1
            found = []
            for mode in stream.modes:
                seen = facts(stream, mode, chunks)
                found.append(seen)
                if "raised" in seen:
                    done.raised.append((stream.id, mode, seen["raised"]))
                done.records[stream.protocol, mode] += 1
                line = {
                    "id": stream.id,
                    "recipe": stream.recipe,
                    "protocol": stream.protocol,
                    "mode": mode,
                    "chunking": chunking,
                    "input": digest,
                    "facts": seen,
                }
                sink.write(json.dumps(line) + "\n")
            if cross_check and _digest(stream.id)[1] % cross_check == 0:
                done.cross_checked += 1
                for mode, seen in zip(stream.modes, found, strict=True):
                    if facts(stream, mode, [stream.body]) != seen:
                        done.chunking_dependent.append(f"{stream.id} [{mode}] {chunking}")
            if progress is not None and count % 5000 == 0:
                print(f"  {count} streams", file=progress, flush=True)
    return done


def _baseline_streams(baseline: Path) -> Iterator[Stream | str]:
    """The streams of ``baseline``, in its order; the id of one whose source is gone."""
    corpus = Corpus()
    seen: set[str] = set()
    _, records = _read(baseline)
    for line in records:
        stream_id = line["id"]
        if stream_id in seen:
            continue
        seen.add(stream_id)
        stream = corpus.stream(stream_id)
        yield stream_id if stream is None else stream


# -- comparing ---------------------------------------------------------------------------


def _read(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """A recording's meta and its records (read lazily)."""
    handle = _open(path, "r")
    first = json.loads(handle.readline())
    if "meta" not in first:
        handle.close()
        raise ValueError(f"{path}: not a recording (no meta line)")

    def rest() -> Iterator[dict[str, Any]]:
        with handle:
            for text in handle:
                yield json.loads(text)

    meta: dict[str, Any] = first["meta"]
    return meta, rest()


Key = tuple[str, str]


class _Row(NamedTuple):
    """A record as ``compare`` keeps it: its facts as canonical JSON text, which is equal
    when they are and costs a tenth of the parsed facts' memory."""

    protocol: str
    input: str
    facts: str
    recipe: str
    chunking: str


def _keyed(records: Iterator[dict[str, Any]]) -> dict[Key, _Row]:
    return {
        (line["id"], line["mode"]): _Row(
            line["protocol"],
            line["input"],
            json.dumps(line["facts"], sort_keys=True),
            line["recipe"],
            line["chunking"],
        )
        for line in records
    }


def _shorten(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _difference(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The facts that differ, one line each; a findings list from its first difference."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if left == right:
            continue
        if key == "findings" and isinstance(left, list) and isinstance(right, list):
            first = next(
                (i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y),
                min(len(left), len(right)),
            )
            out.append(
                f"    findings from #{first} (A has {len(left)}, B has {len(right)}):\n"
                f"      A: {_shorten(left[first : first + 4])}\n"
                f"      B: {_shorten(right[first : first + 4])}"
            )
        else:
            out.append(f"    {key}:\n      A: {_shorten(left)}\n      B: {_shorten(right)}")
    return out


def compare(a_path: Path, b_path: Path, out: IO[str], *, allow_new: bool = False) -> int:
    """Print what two recordings hold and how they differ; 1 on any difference."""
    a_meta, a_lines = _read(a_path)
    b_meta, b_lines = _read(b_path)
    print(f"A: {a_path}  {json.dumps(a_meta)}", file=out)
    print(f"B: {b_path}  {json.dumps(b_meta)}", file=out)
    if a_meta.get("harness") != b_meta.get("harness"):
        print("the two were recorded by different harness versions", file=out)
        return 1
    a, b = _keyed(a_lines), _keyed(b_lines)
    rows: Counter[tuple[str, str]] = Counter()
    same: Counter[tuple[str, str]] = Counter()
    ids: dict[str, set[str]] = {}
    changed_input: list[Key] = []
    different: list[Key] = []
    for key, left in a.items():
        right = b.get(key)
        if right is None:
            continue
        group = (left.protocol, key[1])
        rows[group] += 1
        ids.setdefault(left.protocol, set()).add(key[0])
        if left.input != right.input:
            changed_input.append(key)
        elif left.facts == right.facts:
            same[group] += 1
        else:
            different.append(key)
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    width = max([len(p) for p, _ in rows] + [8])
    print(
        f"\n{'protocol':<{width}}  {'mode':<{width}}  {'streams':>8}  {'identical':>9}  "
        f"{'different':>9}",
        file=out,
    )
    order = {name: i for i, name in enumerate(GROUPS)}
    for group in sorted(rows, key=lambda g: (order.get(g[0], 99), g[0], g[1] != g[0])):
        protocol, mode = group
        print(
            f"{protocol:<{width}}  {mode:<{width}}  {rows[group]:>8}  {same[group]:>9}  "
            f"{rows[group] - same[group]:>9}",
            file=out,
        )
    compared = sum(rows.values())
    print(
        f"\nstreams: {sum(len(v) for v in ids.values())}; records compared: {compared}; "
        f"identical: {sum(same.values())}; different: {len(different)}; "
        f"input changed: {len(changed_input)}; only in A: {len(only_a)}; "
        f"only in B: {len(only_b)}",
        file=out,
    )
    for name, keys in (("only in A", only_a), ("only in B", only_b), ("input", changed_input)):
        if keys:
            shown = ", ".join(f"{i} [{m}]" for i, m in keys[:SHOWN_DIFFERENCES])
            print(f"{name}: {shown}{' …' if len(keys) > SHOWN_DIFFERENCES else ''}", file=out)
    if different:
        print(f"\nfirst {min(len(different), SHOWN_DIFFERENCES)} differences:", file=out)
    for key in different[:SHOWN_DIFFERENCES]:
        left, right = a[key], b[key]
        print(f"  {key[0]} [{key[1]}] {left.recipe} ({left.chunking})", file=out)
        print("\n".join(_difference(json.loads(left.facts), json.loads(right.facts))), file=out)
    failed = different or changed_input or only_a or (only_b and not allow_new)
    return 1 if failed else 0


# -- command line ------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.equivalence",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="check every stream and write the facts")
    rec.add_argument("out", type=Path, help="the recording to write (.jsonl or .jsonl.gz)")
    rec.add_argument("--streams", type=int, default=DEFAULT_STREAMS, help="at least this many")
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--match", help="only the sources whose id contains this")
    rec.add_argument(
        "--ids-from", type=Path, help="the streams of this recording (its seed and size)"
    )
    rec.add_argument(
        "--cross-check",
        type=int,
        default=16,
        metavar="K",
        help="re-check about one stream in K in one piece (0: none)",
    )
    cmp_ = commands.add_parser("compare", help="compare two recordings; exit 1 on a difference")
    cmp_.add_argument("a", type=Path)
    cmp_.add_argument("b", type=Path)
    cmp_.add_argument(
        "--allow-new", action="store_true", help="streams only B has are not a difference"
    )
    args = parser.parse_args(argv)
    if args.command == "compare":
        return compare(args.a, args.b, sys.stdout, allow_new=args.allow_new)
    started = time.perf_counter()
    done = record(
        args.out,
        args.streams,
        args.seed,
        match=args.match,
        ids_from=args.ids_from,
        cross_check=args.cross_check,
        progress=sys.stderr,
    )
    elapsed = time.perf_counter() - started
    build = "compiled" if streamguard.compiled else "pure Python"
    print(f"{args.out}: {build} build, {elapsed:.1f} s", file=sys.stderr)
    print(f"streams: {sum(done.streams.values())} ({dict(done.streams)})", file=sys.stderr)
    for (protocol, mode), count in sorted(done.records.items()):
        print(f"  {protocol:<16} {mode:<16} {count:>7}", file=sys.stderr)
    print(f"records: {sum(done.records.values())}", file=sys.stderr)
    print(
        f"chunking cross-check: {done.cross_checked} re-checked whole, "
        f"{len(done.chunking_dependent)} gave other facts",
        file=sys.stderr,
    )
    for line in done.chunking_dependent[:SHOWN_DIFFERENCES]:
        print(f"  {line}", file=sys.stderr)
    if done.raised:
        kinds = Counter(kind for _, _, kind in done.raised)
        print(f"check_stream raised on {len(done.raised)} records: {dict(kinds)}", file=sys.stderr)
        for stream_id, mode, kind in done.raised[:SHOWN_DIFFERENCES]:
            print(f"  {stream_id} [{mode}]: {kind}", file=sys.stderr)
    if done.missing:
        print(f"{len(done.missing)} streams of the baseline have no source here", file=sys.stderr)
    return 1 if done.chunking_dependent else 0


if __name__ == "__main__":
    sys.exit(main())
