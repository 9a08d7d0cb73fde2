"""The before/after equivalence harness (tests/equivalence.py) on a small sample."""

from __future__ import annotations

import gzip
import io
import json
import random
from pathlib import Path

import pytest

import streamguard

from . import equivalence
from .equivalence import (
    MUTATORS,
    Corpus,
    Draft,
    Stream,
    _with_json,
    chunk,
    compare,
    frames,
    main,
    mutant,
)

#: A small sample: the anthropic fixtures named so, their mutants, and the same as plain SSE.
SAMPLE = ["--streams", "6000", "--match", "anthropic/ok_t"]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("equivalence") / "a.jsonl.gz"
    assert main(["record", str(path), *SAMPLE]) == 0
    return path


def records(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_recording_the_same_sample_twice_gives_identical_files(
    recorded: Path, tmp_path: Path
) -> None:
    """Two recordings of the same streams are the same bytes, mutants of both groups in."""
    again = tmp_path / "b.jsonl.gz"
    assert main(["record", str(again), *SAMPLE]) == 0
    assert again.read_bytes() == recorded.read_bytes()
    lines = records(recorded)
    assert lines[0]["meta"]["compiled"] == streamguard.compiled  # type: ignore[index]
    modes = {(line["protocol"], line["mode"], "#" in str(line["id"])) for line in lines[1:]}
    assert modes == {
        (protocol, mode, mutated)
        for protocol in ("anthropic", "sse")
        for mode in (protocol, "auto")
        for mutated in (False, True)
    }


def test_compare_finds_no_difference_between_identical_recordings(recorded: Path) -> None:
    """Comparing a recording with itself prints its counts, no difference, and exits 0."""
    out = io.StringIO()
    assert compare(recorded, recorded, out) == 0
    assert "different: 0;" in out.getvalue()
    assert "\nanthropic " in out.getvalue()


def test_compare_names_the_stream_whose_finding_changed(recorded: Path, tmp_path: Path) -> None:
    """One finding's offset altered on one side: exit 1, and the stream's id is printed."""
    lines = records(recorded)
    victim = next(line for line in lines[1:] if line["facts"]["findings"])  # type: ignore[index]
    victim["facts"]["findings"][0][3] += 1  # type: ignore[index]
    altered = tmp_path / "altered.jsonl"
    altered.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = io.StringIO()
    assert compare(recorded, altered, out) == 1
    assert f"{victim['id']} [{victim['mode']}]" in out.getvalue()
    assert "different: 1;" in out.getvalue()


def test_ids_from_a_baseline_rebuild_the_same_streams(recorded: Path, tmp_path: Path) -> None:
    """Recording with ``--ids-from`` checks exactly the baseline's streams, with its inputs."""
    again = tmp_path / "b.jsonl.gz"
    assert main(["record", str(again), "--ids-from", str(recorded)]) == 0
    assert records(again)[1:] == records(recorded)[1:]


def test_mutators_are_deterministic_per_seed(corpus: Corpus) -> None:
    """Each mutator, and each mutant, gives the same bytes for the same seed, others for others."""
    group = corpus.groups["openai_chat"]
    source = next(s for s in group if s.id == "openai_chat/clean-text-include-usage")
    for name, mutator in MUTATORS.items():
        made = set()
        for seed in range(6):
            results = []
            for _ in range(2):
                draft = Draft(source.body, {}, group, corpus.names["openai_chat"])
                label = mutator(draft, random.Random(seed))
                results.append((label, draft.body, draft.options))
            assert results[0] == results[1], name
            made.add(repr(results[0]))
        assert len(made) > 1 or name == "drop_final_blank_line", name
    first = [corpus.mutant("openai_chat", source, n, seed=3) for n in range(20)]
    assert first == [corpus.mutant("openai_chat", source, n, seed=3) for n in range(20)]
    other = [corpus.mutant("openai_chat", source, n, seed=4) for n in range(20)]
    assert [s.body for s in first] != [s.body for s in other]


def test_chunkings_are_drawn_from_the_id_and_keep_every_byte(corpus: Corpus) -> None:
    """A stream's chunking depends on its id and seed only, and joins back to its body."""
    streams = [s for group in corpus.groups.values() for s in group]
    for stream in streams:
        name, chunks = chunk(stream, seed=0)
        assert b"".join(chunks) == stream.body
        assert (name, chunks) == chunk(stream, seed=0)
        assert b"".join(frames(stream.body)) == stream.body
    assert len({chunk(stream, 0)[0] for stream in streams}) >= 6


def test_a_checker_that_raises_is_recorded_as_the_exception_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exception out of ``check_stream`` becomes the fact ``raised``, not a crash."""

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(streamguard, "check_stream", broken)
    stream = Stream("x", "sse", b"data: 1\n\n")
    assert equivalence.facts(stream, "auto", [stream.body]) == {"raised": "KeyError"}


def test_a_mutant_is_the_same_whatever_else_the_corpus_holds(corpus: Corpus) -> None:
    """A mutant depends on its source, number and seed, and on its partners only if it
    concatenates: a partner added elsewhere in the corpus changes no other mutant."""
    group = corpus.groups["gemini"]
    source = group[0]
    extra = Stream("gemini/zz-added", "gemini", b"data: {}\n\n")
    names = corpus.names["gemini"]
    for number in range(40):
        before = mutant(source, number, 0, group, names)
        after = mutant(source, number, 0, [*group, extra], names)
        assert before == after or "zz-added" in after.recipe


def test_every_source_can_be_mutated_and_recorded(corpus: Corpus) -> None:
    """Two mutants of every source can be made and written as JSON."""
    for name, group in corpus.groups.items():
        for source in group:
            for number in range(2):
                made = corpus.mutant(name, source, number, seed=0)
                json.dumps([made.id, made.recipe, made.options])


def test_a_json_payload_with_a_lone_surrogate_is_rewritten_escaped() -> None:
    """A payload holding an escaped lone surrogate is written back escaped, not as bad UTF-8."""
    frame_lines = [b"event: x\r\n", b'data: {"a": "\\ud800",\n', b'data: "b": 1}\n', b"\n"]
    rewritten = _with_json(frame_lines, [1, 2], {"a": "\ud800"})
    assert rewritten == b'event: x\r\ndata: {"a":"\\ud800"}\n\n'
