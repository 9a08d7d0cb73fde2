"""Instructions per frame: ``benchmarks.production``'s per-frame rows, counted, not timed.

A shared machine's timings swing by a tenth of a microsecond between runs, about what a
change to the per-message path is worth. The number of instructions a frame executes does
not swing: this benchmark counts them with valgrind's callgrind (Debian's ``valgrind``
package; it says so and exits when the tool is missing). Each configuration runs in a
child process under callgrind twice, with ``LONG_RUNS`` and with one run of
``benchmarks.production``'s long chat stream (about 2,000 frames, one per body message),
so that start-up, imports and the first stream's set-up cancel out;
``instructions_per_frame`` is the difference over the frames between the two, and
``added_per_frame`` that less the app alone's, in the same model of a server
(``benchmarks.production``'s: its ``send`` takes a message at once, or waits on every
message in the rows that say so). Every run but the first repeats the same long stream on
the same middleware, so a stream's fixed cost is not in those rows.

The per-stream rows count it: ``benchmarks.production``'s per-stream setups (streams of
3 chat frames taken in turn, its structlog configuration with a JSON renderer into a null
sink) run ``STREAMS`` streams in one child and none in the other, after the same warm-up
streams in both; ``added_per_stream`` is the difference over the streams less the app
alone's.

The figure is the CPU's work, not its time: a cache miss or an allocation's page fault
costs no more instructions than a hit. Use it to compare two versions of the code (a
change's cost or saving, free of the machine's load), and ``benchmarks.production`` for
the budgets. Run: ``python -m benchmarks.instructions`` (about 2 minutes a configuration
on one core; two at a time), ``--only frames`` or ``--only streams`` for one table.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks._timing import print_table, write_results

__all__ = ["CONFIGURATIONS", "main"]

#: Long-stream runs in the counted process (the other process runs one).
LONG_RUNS = 6
#: Short streams in the counted process of a per-stream row (the other runs none), and
#: the streams both run first, so that first-use costs (imports, caches) cancel out.
STREAMS, WARM_STREAMS = 1_000, 50
#: (row name, ``benchmarks.production`` setup name, whether the server's send waits).
CONFIGURATIONS: tuple[tuple[str, str, bool], ...] = (
    ("none", "none", False),
    ("noop", "noop", False),
    ("shell (watched, not parsed), sinks off", "shell", False),
    ("every-stream tier (sample_rate=0)", "tier", False),
    ("full check", "full", False),
    ("none, server's send waits", "none", True),
    ("shell (watched, not parsed), sinks off, server's send waits", "shell", True),
)


#: (row name, ``benchmarks.production`` per-stream setup name).
STREAM_CONFIGURATIONS: tuple[tuple[str, str], ...] = (
    ("3 frames: none", "none"),
    ("3 frames: sinks off", "sinks off"),
    ("3 frames: default (summaries=notable: no line)", "default (summaries=notable: no line)"),
    ("3 frames: summaries=all (one JSON line)", "summaries=all (one JSON line)"),
)


def _stream_child(setup: str, streams: int) -> None:
    """Run ``WARM_STREAMS`` then ``streams`` 3-frame chat streams through ``setup``."""
    from benchmarks import _timing
    from benchmarks import production as bench

    _timing.gc.collect = lambda *args: 0  # (as in ``_child``)
    options = {name: options for name, _path, options in bench.PER_STREAM}[setup]
    sink = bench._NullSink()
    restore = bench._configure_structlog(sink)
    served = bench._served(bench.CHAT, options)
    bench._run(served, bench.CHAT, bench.THREE, WARM_STREAMS, interleaved=True)
    if streams:
        bench._run(served, bench.CHAT, bench.THREE, streams, interleaved=True)
    restore()


def _child(setup: str, runs: int, waits: bool) -> None:
    """Run the long chat stream ``runs`` times through ``setup`` (in the counted process)."""
    from benchmarks import _timing
    from benchmarks import production as bench

    _timing.gc.collect = lambda *args: 0  # (a collection of the whole heap per run is noise)
    sink = bench._NullSink()
    restore = bench._configure_structlog(sink)
    path, options = {
        "none": (bench.CHAT, None),
        "noop": (bench.CHAT, "noop"),
        "shell": (bench.CHAT_GZIP, dict(bench._SINKS_OFF)),
        "tier": (bench.CHAT, {"sample_rate": 0.0}),
        "full": (bench.CHAT, {}),
    }[setup]
    served = bench._served(path, options)
    for _ in range(runs):
        bench._run(served, path, bench.LONG, 1, False, waits)
    restore()


def _count(setup: str, runs: int, waits: bool, per_stream: bool = False) -> int:
    command = [
        "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
        sys.executable, "-m", "benchmarks.instructions", "--child", setup, str(runs),
    ]  # fmt: skip
    if waits:
        command.append("--waits")
    if per_stream:
        command.append("--per-stream")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind gave no count: {done.stderr[-500:]}")
    return int(found.group(1))


def instructions() -> list[dict[str, Any]]:
    from benchmarks.production import CHAT, LONG, STREAMS_SERVED

    frames = (LONG_RUNS - 1) * len(STREAMS_SERVED[CHAT, LONG][1])
    jobs = [(setup, runs, waits) for _, setup, waits in CONFIGURATIONS for runs in (LONG_RUNS, 1)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda job: _count(*job), jobs))
    per_frame = [(counts[2 * i] - counts[2 * i + 1]) / frames for i in range(len(CONFIGURATIONS))]
    rows: list[dict[str, Any]] = []
    anchor = {False: per_frame[0], True: per_frame[5]}
    for (name, _setup, waits), figure in zip(CONFIGURATIONS, per_frame, strict=True):
        rows.append(
            {
                "case": f"chat stream: {name}",
                "instructions_per_frame": round(figure),
                "added_per_frame": round(figure - anchor[waits]),
            }
        )
    return rows


def stream_instructions() -> list[dict[str, Any]]:
    jobs = [(setup, streams) for _, setup in STREAM_CONFIGURATIONS for streams in (STREAMS, 0)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda job: _count(job[0], job[1], False, True), jobs))
    per_stream = [(counts[2 * i] - counts[2 * i + 1]) / STREAMS for i in range(len(jobs) // 2)]
    return [
        {
            "case": name,
            "instructions_per_stream": round(figure),
            "added_per_stream": round(figure - per_stream[0]),
        }
        for (name, _setup), figure in zip(STREAM_CONFIGURATIONS, per_stream, strict=True)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--child", nargs=2, metavar=("SETUP", "RUNS"), help=argparse.SUPPRESS)
    parser.add_argument("--waits", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--per-stream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--only", choices=("frames", "streams"), help="count the per-frame or per-stream rows alone"
    )
    args = parser.parse_args(argv)
    if args.child:
        if args.per_stream:
            _stream_child(args.child[0], int(args.child[1]))
        else:
            _child(args.child[0], int(args.child[1]), args.waits)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt install valgrind): nothing counted")
        return 0
    if args.only != "streams":
        rows = instructions()
        print_table(rows)
        print(f"\nresults in {write_results('instructions', rows)}")
    if args.only != "frames":
        stream_rows = stream_instructions()
        print_table(stream_rows)
        print(f"\nresults in {write_results('instructions_per_stream', stream_rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
