"""The anchors the benchmarks measure streamguard against, and how chunks are cut."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from streamguard.protocols._skeleton import learning

__all__ = [
    "against_split",
    "rechunk",
    "split_and_load",
    "split_frames",
    "without_shape_cache",
]


def rechunk(frames: list[bytes], size: int) -> list[bytes]:
    """The same bytes cut into chunks of ``size`` (the last one shorter)."""
    body = b"".join(frames)
    return [body[i : i + size] for i in range(0, len(body), size)]


def split_frames(chunks: list[bytes], separator: bytes = b"\n\n") -> int:
    """The floor of framing: an incremental split on the blank line, keeping each frame."""
    frames = []
    buffer = b""
    step = len(separator)
    for chunk in chunks:
        buffer = buffer + chunk if buffer else chunk
        start = 0
        find = buffer.find
        while (end := find(separator, start)) >= 0:
            frames.append(buffer[start:end])
            start = end + step
        buffer = buffer[start:]
    return len(frames)


def split_and_load(chunks: list[bytes]) -> int:
    """The floor of checking: split on the blank line, ``orjson.loads`` each payload.

    ``[DONE]`` is counted but not parsed, as any client does.
    """
    loads = orjson.loads
    buffer = b""
    count = 0
    for chunk in chunks:
        buffer = buffer + chunk if buffer else chunk
        start = 0
        find = buffer.find
        while (end := find(b"\n\n", start)) >= 0:
            data = buffer[find(b"data: ", start, end) + 6 : end]
            if not data.startswith(b"[DONE]"):
                loads(data)
            count += 1
            start = end + 2
        buffer = buffer[start:]
    return count


def without_shape_cache(run: Callable[[], object]) -> Callable[[], object]:
    """``run`` with every frame checked in full: the shape cache's own figure, same run."""

    def full() -> object:
        learning(False)
        try:
            return run()
        finally:
            learning(True)

    return full


def against_split(
    name: str, frames: list[bytes], checked: Callable[[list[bytes]], int], budget: float
) -> int:
    """Time ``checked`` against split + ``orjson.loads`` under three cuts of ``frames``,
    with the shape cache and without; print the table and write ``name``'s results."""
    from benchmarks._timing import best_of, print_table, write_results

    events = len(frames)
    rows = []
    for cut_name, chunks in (
        ("frame-per-chunk", frames),
        ("16KiB-chunks", rechunk(frames, 16 * 1024)),
        ("ragged-97B", rechunk(frames, 97)),
    ):
        assert split_and_load(chunks) == checked(chunks) == events, cut_name
        anchor_s = best_of(lambda chunks=chunks: split_and_load(chunks))  # type: ignore[misc]
        checked_s = best_of(lambda chunks=chunks: checked(chunks))  # type: ignore[misc]
        full_s = best_of(without_shape_cache(lambda chunks=chunks: checked(chunks)))  # type: ignore[misc]
        rows.append(
            {
                "case": f"{name.removeprefix('check_')} {cut_name}",
                "frames": events,
                "anchor_us_per_frame": anchor_s / events * 1e6,
                "checked_us_per_frame": checked_s / events * 1e6,
                "full_check_us_per_frame": full_s / events * 1e6,
                "ratio_vs_anchor": checked_s / anchor_s,
            }
        )
    print_table(rows)
    path = write_results(name, rows)
    worst = max(float(row["ratio_vs_anchor"]) for row in rows)  # type: ignore[arg-type]
    print(
        f"\nworst ratio vs split + orjson.loads: {worst:.2f}x (budget {budget}x; results in {path})"
    )
    return 0
