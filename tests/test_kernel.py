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
