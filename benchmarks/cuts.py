"""How a learning monitor takes chunks that are not one frame, in one run (issue 26).

Per protocol and cutting (one frame per chunk, 16 KiB chunks, ragged 97-byte chunks), µs
per frame of ``StreamMonitor.feed`` over the whole stream, each the least CPU time of
seven runs:

* ``by_frame``: a chunk is taken a frame at a time, each frame that fits a skeleton fitted
  whole and not parsed, a frame's start held for the next chunk (``monitor._BY_FRAME``
  on, the compiled build's default);
* ``by_chunk``: a chunk that is not one frame is parsed whole (``_BY_FRAME`` off, the
  pure-Python build's default), its events still matched against the skeletons;
* ``full``: the shape cache off, every frame parsed and checked in full.

``by_frame_vs_by_chunk`` is the ratio that says which way is cheaper on this build. No
budget is read from here. Run: ``python -m benchmarks.cuts``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks._anchors import rechunk, without_shape_cache
from benchmarks._timing import best_of, print_table, write_results
from benchmarks.check_anthropic import anthropic_frames
from benchmarks.check_openai import REQUEST, openai_chat_frames
from benchmarks.check_responses import responses_frames
from streamguard import monitor
from streamguard.monitor import StreamEnd, StreamMonitor

__all__ = ["cuts", "main"]


@contextmanager
def _by_frame(on: bool) -> Iterator[None]:
    saved = monitor._BY_FRAME[0]
    monitor._BY_FRAME[0] = on
    try:
        yield
    finally:
        monitor._BY_FRAME[0] = saved


def _watch(chunks: list[bytes], protocol: str, request: Any) -> Callable[[], object]:
    def run() -> object:
        watched = StreamMonitor(protocol, request=request)
        for chunk in chunks:
            watched.feed(chunk)
        return watched.finish(StreamEnd.BODY_ENDED)

    return run


def cuts() -> list[dict[str, Any]]:
    rows = []
    streams = (
        ("openai_chat", REQUEST, openai_chat_frames()),
        ("anthropic", None, anthropic_frames()),
        ("openai_responses", None, responses_frames()),
    )
    for protocol, request, frames in streams:
        for cut, chunks in (
            ("frame-per-chunk", frames),
            ("16KiB-chunks", rechunk(frames, 16384)),
            ("ragged-97B", rechunk(frames, 97)),
        ):
            run = _watch(chunks, protocol, request)
            with _by_frame(True):
                by_frame = best_of(run)
            with _by_frame(False):
                by_chunk = best_of(run)
            full = best_of(without_shape_cache(run))
            per_frame = 1e6 / len(frames)
            rows.append(
                {
                    "case": f"{protocol} {cut}",
                    "frames": len(frames),
                    "by_frame_us": by_frame * per_frame,
                    "by_chunk_us": by_chunk * per_frame,
                    "full_us": full * per_frame,
                    "by_frame_vs_by_chunk": by_frame / by_chunk,
                }
            )
    return rows


def main() -> int:
    rows = cuts()
    print_table(rows)
    path = write_results("cuts", rows)
    print(f"\nµs per frame; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
