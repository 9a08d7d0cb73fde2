"""Ways to cut the same bytes into chunks, for chunk-independence tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = ["CHUNKINGS", "chunking", "chunkings", "cut"]


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    """Cut ``data`` at the given chunk sizes (cycled), keeping every byte."""
    chunks: list[bytes] = []
    position = 0
    index = 0
    while position < len(data):
        size = sizes[index % len(sizes)]
        chunks.append(data[position : position + size])
        position += size
        index += 1
    return chunks


def chunkings(data: bytes, seed: int = 0) -> Iterator[tuple[str, list[bytes]]]:
    """Whole, one byte at a time, with empty chunks, and a few random cuttings."""
    yield "whole", [data]
    yield "bytewise", [data[i : i + 1] for i in range(len(data))]
    yield "with-empty-chunks", [b"", *(piece for b in cut(data, [3]) for piece in (b, b""))]
    rng = random.Random(seed)
    for round_ in range(3):
        sizes = [rng.randint(1, 64) for _ in range(16)]
        yield f"random-{round_}", cut(data, sizes)


#: The names ``chunkings`` yields, in order (one test parameter per way of cutting).
CHUNKINGS = tuple(name for name, _ in chunkings(b""))


def chunking(data: bytes, name: str, seed: int = 0) -> list[bytes]:
    """The cutting of ``data`` that ``chunkings`` calls ``name``."""
    return dict(chunkings(data, seed))[name]
