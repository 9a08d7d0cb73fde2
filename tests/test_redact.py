"""Redaction for captures (issue 48): the redacted body keeps every finding and no content.

The proof is the equivalence harness's: every fixture and a sample of its mutants, checked
before and after redaction, give the same facts (protocol, outcome, counts, and each finding's
rule, severity, event and byte offset); no string of a fixture's content is in its redaction;
redacting in chunks gives what redacting whole gives.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamguard.redact import (
    CONTENT_RULES,
    MAX_HELD_BYTES,
    Redactor,
    is_id_key,
    redact,
    vocabulary,
    word_keys,
)

from . import equivalence as eq
from .sse_fixtures import FIXTURES, load

#: Mutants checked on top of the fixtures (the harness's generator, seed 0).
MUTANT_STREAMS = 3000


def redacted(stream: eq.Stream, protocol: str) -> eq.Stream:
    """``stream`` with its body and its request redacted by one redactor (shared tokens)."""
    redactor = Redactor(protocol)
    request = stream.request
    if request is not None:
        request = redactor.redact_json(request)  # type: ignore[assignment]
    body = redactor.feed(stream.body) + redactor.close()
    return dataclasses.replace(stream, body=body, request=request)


def _differences(streams: Iterator[eq.Stream]) -> list[str]:
    differences: list[str] = []
    for stream in streams:
        for mode in stream.modes:
            before = eq.facts(stream, mode, [stream.body])
            after_stream = redacted(stream, str(before.get("protocol", "sse")))
            assert len(after_stream.body) == len(stream.body), stream.id
            after = eq.facts(after_stream, mode, [after_stream.body])
            if before != after and not _content_rule_lost(before, after):
                differences.append(f"{stream.id} as {mode}: {before} != {after}")
    return differences


def _content_rule_lost(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether ``after`` is ``before`` less findings of ``CONTENT_RULES`` (which a
    redaction may lose, never add)."""
    kept = [f for f in before.get("findings", []) if f[0] not in CONTENT_RULES]
    return {**before, "findings": kept} == after


def test_every_fixture_gives_the_same_facts_redacted() -> None:
    corpus = eq.Corpus()
    fixtures = (s for group in corpus.groups.values() for s in group)
    assert _differences(fixtures) == []


@pytest.mark.slow
def test_the_harness_mutants_give_the_same_facts_redacted() -> None:
    assert _differences(eq.Corpus().streams(MUTANT_STREAMS * 4, seed=1)) == []


def test_a_sample_of_mutants_gives_the_same_facts_redacted() -> None:
    corpus = eq.Corpus()
    sample = (
        corpus.mutant(group, source, number, 0)
        for group, sources in corpus.groups.items()
        for source in sources[::3]
        for number in range(2)
    )
    assert _differences(sample) == []


# -- no content ----------------------------------------------------------------------------


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)
    elif isinstance(value, str):
        yield key, value


WORDS = vocabulary()
WORD_KEYS = word_keys()


def _content(payload: Any) -> set[tuple[str, str]]:
    """The strings of ``payload`` that are content, with their keys: at least five
    characters with a letter, and not a word under a key whose words are kept (a kind, a
    state, a method)."""
    found: set[tuple[str, str]] = set()
    for key, value in _strings(payload):
        if len(value) < 5 or not re.search(r"[A-Za-z]", value):
            continue
        is_word = value.encode() in WORDS or re.fullmatch(r"[\w./][\w.:/-]*", value)
        if is_word and key in WORD_KEYS:
            continue
        found.add((key, value))
    return found


def _kept(body: bytes, out: bytes) -> set[str]:
    """The content strings of ``body``'s JSON data lines found under their key (or in an
    array) at the same place and with the same bytes in ``out``: the redaction never moves
    a byte, so a value left in place is a value kept."""
    kept: set[str] = set()
    position = 0
    for line in body.splitlines(keepends=True):
        start, position = position, position + len(line)
        if not line.startswith(b"data:"):
            continue
        try:
            payload = json.loads(line[5:])
        except ValueError:
            continue
        for key, value in _content(payload):
            written = json.dumps(value, ensure_ascii=False)[1:-1].encode()
            before = rb"(?:" + re.escape(json.dumps(key).encode()) + rb"\s*:|[\[,])\s*\""
            after = rb'"(?!\s*:)'  # not a key: keys are kept
            for found in re.finditer(before + re.escape(written) + after, line):
                at = start + found.end() - 1 - len(written)
                if out[at : at + len(written)] == written:
                    kept.add(value)
    return kept


FIXTURE_PATHS = sorted(FIXTURES.glob("*/*.sse")) + sorted(FIXTURES.glob("realworld/*/*.sse"))


@pytest.mark.parametrize(
    "path", FIXTURE_PATHS, ids=[str(p.relative_to(FIXTURES)) for p in FIXTURE_PATHS]
)
def test_no_string_of_the_content_survives(path: Any) -> None:
    fixture = load(path)
    kept = _kept(fixture.body, redact(fixture.body, fixture.protocol))
    assert not kept, f"content kept in {path.name}: {sorted(kept)[:5]}"


def test_the_content_check_finds_content_left_in_place() -> None:
    body = b'data: {"text":"Hello world","type":"message_start"}\n\n'
    assert _kept(body, body) == {"Hello world"}
    assert _kept(body, redact(body)) == set()


def test_ids_become_stable_tokens_distinct_for_distinct_ids() -> None:
    body = (
        b'data: {"id":"call_abc","x":{"toolCallId":"call_abc"},"item_id":"call_abd"}\n\n'
        b'data: {"id":"call_abc"}\n\n'
    )
    out = redact(body)
    values = re.findall(rb'"([^"]*)"', out)
    ids = [v for v in values if v not in (b"id", b"x", b"toolCallId", b"item_id")]
    assert ids[0] == ids[1] == ids[3]  # equal ids stay equal
    assert ids[2] != ids[0]  # a different one stays different
    assert b"abc" not in out
    assert b"abd" not in out
    assert all(len(i) == len(b"call_abc") for i in ids)


def test_id_keys_cover_the_ids_the_checkers_compare() -> None:
    from pathlib import Path

    import streamguard.protocols

    sources = Path(streamguard.protocols.__file__).parent.glob("*.py")
    keys = {
        key
        for source in sources
        for key in re.findall(r'"([A-Za-z_]*(?:_id|Id))"', source.read_text())
    }
    assert keys  # the checkers do compare ids by such keys
    assert all(is_id_key(key) for key in keys)
    assert is_id_key("id")
    assert not is_id_key("index")
    assert not is_id_key("Id")


def test_kept_and_replaced() -> None:
    body = (
        b'event: message_start\ndata: {"type":"message_start","n":12.5,"ok":true,'
        b'"z":null,"text":"Hi \\n\\u00e9 caf\xc3\xa9 \xe2\x82\xac '
        b'\xf0\x9f\x98\x80 \\ud83d\\ude00"}\n\n'
        b": keepalive comment\n\ndata: [DONE]\n\n"
    )
    out = redact(body, "anthropic")
    assert len(out) == len(body)
    assert b'"type":"message_start","n":12.5,"ok":true,"z":null' in out
    assert b"event: message_start\n" in out
    assert b"data: [DONE]\n" in out
    assert b": wwwwwwwww wwwwwww\n" in out
    text = json.loads(out.split(b"\n")[1][5:].decode())["text"]
    assert text == "Aw \n\u00e9 www\u00e9 \u4e00 \U0001f600 \U0001f600"


def test_tool_arguments_stay_json_across_fragments() -> None:
    fragments = ['{"city', '": "Par', 'is", "days": 3', ', "ok": tr', "ue}"]
    body = b"".join(
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":'
        b'{"arguments":' + json.dumps(f).encode() + b"}}]}}]}\n\n"
        for f in fragments
    )
    out = redact(body, "openai_chat")
    joined = "".join(
        json.loads(line[5:])["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for line in out.split(b"\n\n")
        if line.startswith(b"data:")
    )
    assert joined == '{"wwww": "Awwww", "wwww": 4, "ww": true}'
    json.loads(joined)  # still JSON, of the same shape
    assert "Paris" not in joined
    assert "city" not in joined


def test_what_it_holds_is_bounded() -> None:
    redactor = Redactor("openai_chat")
    fed = 0
    given_back = 0
    for body in (b'data: {"id":"' + b"a" * 100_000, b"event: " + b"e" * 100_000, b"x" * 100_000):
        redactor = Redactor("openai_chat")
        given_back = len(redactor.feed(body))
        fed = len(body)
        assert fed - given_back <= MAX_HELD_BYTES
        assert given_back + len(redactor.close()) == fed


# -- chunking ------------------------------------------------------------------------------

_FIXTURE_BODIES = [load(path) for path in FIXTURE_PATHS[::7]]


@settings(max_examples=300, deadline=None)
@given(
    index=st.integers(0, len(_FIXTURE_BODIES) - 1),
    points=st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_redacting_in_chunks_is_redacting_whole(index: int, points: list[int]) -> None:
    fixture = _FIXTURE_BODIES[index]
    body = fixture.body
    bounds = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    assert redact(chunks, fixture.protocol) == redact(body, fixture.protocol)


_SSE_ALPHABET = [
    b"data: ",
    b"event: ",
    b"id: ",
    b": c",
    b"\n",
    b"\r\n",
    b"\r",
    b'{"type":"x","id":"a1","arguments":"{\\"k\\": 1}","t":"h\\u00e9\\n"}',
    b"[DONE]",
    b"\xc3\xa9",
    b"\xe2\x82",
    b"\xff",
    b"\xef\xbb\xbf",
    b'"',
    b"\\",
    b"tru",
    b"e",
    b"12",
]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(_SSE_ALPHABET), max_size=30),
    points=st.lists(st.integers(0, 1 << 12), max_size=10),
    protocol=st.sampled_from(["sse", "openai_chat", "anthropic"]),
)
def test_any_bytes_redact_to_the_same_length_however_cut(
    parts: list[bytes], points: list[int], protocol: str
) -> None:
    body = b"".join(parts)
    bounds = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds)]
    whole = redact(body, protocol)
    assert len(whole) == len(body)
    assert redact(chunks, protocol) == whole
