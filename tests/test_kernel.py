"""The native kernel answers exactly what its Python definition answers.

``streamguard._kernel.skim_frame`` (C) is built with the compiled core and used by it;
``streamguard.sse._skim_frame`` is its definition, which the pure-Python core runs. On the
compiled build every comparison below is the C function against the Python one; on the
pure build there is no native code to compare, which the first test holds.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import streamguard
from streamguard.protocols import CHECKERS
from streamguard.protocols._skeleton import (
    MAX_HOLES,
    Entry,
    Skeleton,
    _fit_entry,
    _fit_entry_natively,
)
from streamguard.sse import NATIVE_KERNEL, _skim_frame, skim_frame
from tests import equivalence

#: The hints of every protocol that has them, and a few the protocols do not use.
HINT_SETS: tuple[tuple[bytes, ...], ...] = (
    *sorted({hints for checker in CHECKERS.values() if (hints := checker.END_HINTS)}),
    (),
    (b"",),
    (b"x", b"data:"),
    (b"a longer hint than most frames hold, a longer hint than most frames hold",),
)

#: The pieces frames are made of: fields, line endings, hint words, bytes past ASCII.
PIECES = st.sampled_from(
    [b"data:", b"data: ", b"event:", b"event: ", b"id: 1", b"\n", b"\r\n", b"\r", b" ",
     b"x", b"{}", b"[DONE]", b"error", b"\\u", b"message_stop", b"end", b"\x80", b"\xc3\xa9"]
)  # fmt: skip
FRAMES = st.lists(PIECES, max_size=12).map(b"".join)


def test_the_compiled_core_runs_the_kernel_and_the_pure_one_none() -> None:
    """A compiled build always has its kernel (they are built together, all or nothing);
    a process that asked for the pure-Python core runs no native code."""
    assert NATIVE_KERNEL is streamguard.compiled
    assert (skim_frame is _skim_frame) is not streamguard.compiled


native = pytest.mark.skipif(not NATIVE_KERNEL, reason="the pure build has no native kernel")


@native
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\n\n",
        b"\r\n\r\n",
        b"data:\n\n",
        b"data: x\n\n",
        b"data: x\r\n\r\n",
        b"data: x\r\r\n\r\n",
        b"data: x\n\r\n\r\n",
        b"event: a\ndata: b\n\n",
        b"event: a\r\ndata: b\r\n\r\n",
        b"event: a\ndata: b\r\n\r\n",
        b"evenx: a\ndata: b\n\n",
        b"event: a\nevent: b\ndata: c\n\n",
        b"data: a\ndata: b\n\n",
        b"data: a\rb\n\n",
        b"data: caf\xc3\xa9\n\n",
        b"data: [DONE]\n\n",
        b'data: {"error": 1}\n\n',
        b"event: message_stop\ndata: {}\n\n",
        b"id: 1\ndata: x\n\n",
        b"\ndata: x\n\n",
        b"data\n\n",
        b"event:\n\n",
        b"\r\n",
    ],
)
def test_pinned_frames(data: bytes) -> None:
    for hints in HINT_SETS:
        assert skim_frame(data, hints) is _skim_frame(data, hints), (data, hints)


@native
@settings(max_examples=2_000, deadline=None)
@given(data=FRAMES, hints=st.sampled_from(HINT_SETS))
@example(data=b"data: x\r\n\r\n", hints=())
@example(data=b"event: a\r\ndata: b\r\n\r\n", hints=(b"[DONE]",))
def test_generated_frames(data: bytes, hints: tuple[bytes, ...]) -> None:
    assert skim_frame(data, hints) is _skim_frame(data, hints)


@native
def test_every_frame_of_the_corpus() -> None:
    """Every frame of the fixtures, the captures and their mutants, whole and cut in two."""
    compared = skimmed = 0
    for stream in equivalence.streams(600, seed=3):
        for frame in equivalence.frames(stream.body):
            for data in (frame, frame[: len(frame) // 2]):
                for hints in HINT_SETS:
                    answer = _skim_frame(data, hints)
                    assert skim_frame(data, hints) is answer, (stream.id, data[:80], hints)
                    compared += 1
                    skimmed += answer
    assert compared > 10_000
    assert skimmed > 1_000  # (the corpus reaches the skimmed side, not only the other)


@native
def test_wrong_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError):
        skim_frame("data: x\n\n", ())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        skim_frame(b"data: x\n\n", [b"x"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        skim_frame(b"data: x\n\n", ("x",))  # type: ignore[arg-type]


# -- fit_holes: a framed chunk fitted to a skeleton, as bytes ------------------------------

#: The pieces between holes: JSON punctuation and keys, text past ASCII, nothing at all.
LITERALS = st.sampled_from(
    ['{"a":', ',"b":', "}", "]}", "", " ", ":", '"', "\\", "é", '{"k":"v","t":', "0"]
)
#: What a hole may hold: strings the full parser takes and ones it refuses (escapes, lone
#: and paired surrogates, control characters), integers in and out of bounds, whitespace,
#: bytes that are not UTF-8 (an encoded surrogate, an overlong slash, a stray byte).
HOLE_CONTENTS = st.sampled_from(
    [b'"abc"', b'""', b'"a\\"b"', b'"\\\\"', b'"\\/\\b\\f\\n\\r\\t"', b'"\\u00e9"',
     b'"\\u00E9\\u0041"', b'"\\ud83d\\ude00"', b'"\\uD83D\\uDE00"', b'"\\ud83d"',
     b'"\\udc00"', b'"\\udc00\\udc00"', b'"\\ude00\\ud83d"', b'"\\ud83d\\u0041"',
     b'"\\uzzzz"', b'"\\u12"', b'"\\x"', b'"caf\xc3\xa9"',
     b'"\xf0\x9f\x98\x80"', b'"\x01"', b'"\x7f"', b'"\xc2\xa0"', b'"open', b'"a"b"', b"0",
     b"7", b"-0", b"-12", b"0123", b"123456789012345678", b"1234567890123456789", b"-", b"",
     b" ", b"  \t", b"\n", b"\r\n", b"null", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf",
     b'"\xe2\x82"', b"\xe2\x82\xac"]
)  # fmt: skip
KINDS = st.sampled_from([0, 1, 2, 3])


def _entry(
    kinds: tuple[int, ...], literals: tuple[str, ...], order: tuple[int, ...], suffix: int = 2
) -> Entry:
    """The entry of a skeleton whose chunks are framed ``data: ...`` and ``suffix`` bytes."""
    entry = Entry(Skeleton("", literals, kinds, order), None, ())
    entry.prefix_size, entry.suffix_size = len(b"data: "), suffix
    return entry


@st.composite
def fitted_chunks(draw: st.DrawFn) -> tuple[bytes, Entry]:
    """A framed chunk and the entry of a skeleton it was made to fit or nearly fit: each
    hole's content drawn for its kind or for another, the pieces sometimes altered."""
    kinds = tuple(draw(st.lists(KINDS, min_size=1, max_size=5)))
    literals = tuple(draw(st.lists(LITERALS, min_size=len(kinds) + 1, max_size=len(kinds) + 1)))
    values = sum(kind >= 2 for kind in kinds)
    order = tuple(draw(st.permutations(range(values))))
    prefix, suffix = b"data: ", draw(st.sampled_from([b"\n\n", b"\r\n\r\n"]))
    entry = _entry(kinds, literals, order, len(suffix))
    parts = [literals[0].encode()]
    for number in range(len(kinds)):
        parts.append(draw(HOLE_CONTENTS))
        literal = literals[number + 1].encode()
        if draw(st.integers(0, 9)) == 0:
            literal = literal[:-1]  # a piece cut short
        parts.append(literal)
    return prefix + b"".join(parts) + suffix, entry


def _fitted(answer: object) -> object:
    return list(answer) if isinstance(answer, list | tuple) else answer


@native
@settings(max_examples=4_000, deadline=None)
@given(case=fitted_chunks())
@example(case=(b'data: {"a":"x"}\n\n', _entry((0,), ('{"a":', "}"), ())))
@example(case=(b'data: {"a":"\\udc00\\udc00"}\n\n', _entry((0,), ('{"a":', "}"), ())))
@example(case=(b'data: {"a":7,"b":"x"}\n\n', _entry((3, 2), ('{"a":', ',"b":', "}"), (1, 0))))
@example(case=(b"data: {\xed\xa0\x80}\n\n", _entry((1,), ("{", "}"), ())))
def test_fit_holes_answers_as_the_definition(case: tuple[bytes, Entry]) -> None:
    """``_fit_entry_natively`` (``_kernel.fit_holes``) gives ``_fit_entry``'s answer on
    every chunk: None, False, or the same read values in the checker's order."""
    chunk, entry = case
    expected = _fitted(_fit_entry(chunk, entry))
    assert _fitted(_fit_entry_natively(chunk, entry)) == expected, (chunk, entry.skeleton.kinds)


@native
def test_fit_holes_reaches_every_answer() -> None:
    """The generated chunks reach each of the three answers, and values both in and out
    of the holes' order (else the comparison above could pass by never trying them)."""
    seen: set[str] = set()

    @settings(max_examples=1_500, deadline=None, database=None)
    @given(case=fitted_chunks())
    def collect(case: tuple[bytes, Entry]) -> None:
        chunk, entry = case
        answer = _fit_entry(chunk, entry)
        seen.add(
            "none" if answer is None else "no" if answer is False else "values" if answer else "fit"
        )

    collect()
    assert seen == {"none", "no", "fit", "values"}


@native
def test_fit_holes_bounds_and_arguments() -> None:
    """``MAX_HOLES`` is the kernel's bound too; arguments of the wrong kind are type errors."""
    from streamguard._kernel import fit_holes

    holes = MAX_HOLES + 1
    with pytest.raises(ValueError, match="MAX_HOLES"):
        fit_holes(b'"x"' * holes, 0, 3 * holes, (b"",) * (holes + 1), bytes(holes), False)
    assert fit_holes(b'"x"' * MAX_HOLES, 0, 3 * MAX_HOLES, (b"",) * 17, bytes(16), False) == ()
    with pytest.raises(TypeError):
        fit_holes("x", 0, 1, (b"", b""), b"\x00", False)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fit_holes(b"x", 0, 1, (b"",), b"\x00", False)  # pieces not one more than kinds
    with pytest.raises(TypeError):
        fit_holes(b"x", 0, 5, (b"", b""), b"\x00", False)  # stop past the chunk
