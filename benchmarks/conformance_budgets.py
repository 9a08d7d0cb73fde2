"""``streamguard conformance`` and ``probe`` against the endpoints of issue 44: what a run
keeps of a stream, and when a run against a stream that never ends does end.

Each scenario runs ``streamguard conformance`` in this process against the raw loopback
server of ``tests/test_conformance_budgets.py`` (``Misbehaving``), after one small healthy
run (the imports and first-call caches out of the figure), and prints two figures: the
peak of Python's traced allocations during the run (``tracemalloc``) and, in a second
fresh process, the peak resident set above the one after the warm-up run (``ru_maxrss``).

    PYTHONPATH=. python -m benchmarks.conformance_budgets            # this tree
    PYTHONPATH=/path/to/old/tree python benchmarks/conformance_budgets.py   # another one

The server module is loaded from this file's tree by path, so the ``streamguard`` on
``PYTHONPATH`` is the one measured (an older checkout measures "before").

Scenarios (``--max-bytes 8MiB``, the default):

* ``abort-32mb``: the abort variant against a finite 32 MB stream of events without
  content (it ends by itself: the abort read looks for content in all of it);
* ``plain-tiny``: the plain variant against an endless stream of tiny content events;
* ``replay-tiny``: ``--replay`` of ``plain-tiny`` saved with ``--save``.

Then the time budgets (``--timing``, in one process after a warm-up run): each run in a
thread, given 30 s; printed is when it ended and its exit code, or that it still ran. A
head sent one byte every 20 ms and a body byte every 0.5 s, with ``--max-time 3 --timeout
2``; the abort variant against endless events without content, ``--max-time 3``. A run
that never ends leaves its thread behind (and ``sys.stdout`` redirected: the lines are
written to the file descriptor).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests" / "test_conformance_budgets.py"
SCENARIOS = ("abort-32mb", "plain-tiny", "replay-tiny")
MIB = 1024 * 1024


def _server_module() -> Any:
    spec = importlib.util.spec_from_file_location("conformance_budgets", TESTS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _quiet(argv: list[str]) -> int:
    from streamguard import cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return cli.main(argv)


def _runs(url: str, saved: str) -> dict[str, Callable[[], int]]:
    common = ["--model", "m", "--json", "--max-bytes", str(8 * MIB)]
    return {
        "abort-32mb": lambda: _quiet(
            ["conformance", f"{url}/finite-32/v1", *common, "--variants", "abort"]
        ),
        "plain-tiny": lambda: _quiet(
            ["conformance", f"{url}/tiny/v1", *common, "--variants", "plain"]
        ),
        "replay-tiny": lambda: _quiet(
            ["conformance", "--replay", saved, "--json", "--max-bytes", str(8 * MIB)]
        ),
    }


def measure(scenario: str, traced: bool) -> dict[str, float]:
    """One scenario in this process: the traced peak, or the resident peak above the
    warm-up's, in MiB."""
    server = _server_module().Misbehaving()
    try:
        with tempfile.TemporaryDirectory() as saved:
            runs = _runs(server.url, saved)
            if scenario == "replay-tiny":  # saved by another process: its peak stays there
                subprocess.run(
                    [sys.executable, __file__, "--save-tiny", saved, "--url", server.url],
                    check=True,
                )
            # The warm-up: a healthy stream (the abort variant's health request's answer).
            _quiet(["conformance", f"{server.url}/finite/v1", "--model", "m", "--json",
                    "--variants", "plain"])  # fmt: skip
            if traced:
                tracemalloc.start()
                code = runs[scenario]()
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                return {"traced_peak_mib": peak / MIB, "exit": code}
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            code = runs[scenario]()
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            # ru_maxrss is in KiB on Linux.
            return {"rss_above_warm_mib": (after - before) / 1024, "exit": code}
    finally:
        server.stop()


def timing() -> None:
    """Each time-budget case: when it ended, or that it still ran at 30 s."""
    import os
    import threading
    import time

    server = _server_module().Misbehaving()
    _quiet(["conformance", f"{server.url}/finite/v1", "--model", "m", "--json",
            "--variants", "plain"])  # fmt: skip
    chat = ["--model", "m", "--json", "--max-time", "3"]
    cases = {
        "conformance plain, head byte by byte": [
            "conformance", f"{server.url}/head/v1", *chat, "--variants", "plain", "--timeout", "2"
        ],
        "probe, head byte by byte": [
            "probe", f"{server.url}/head", "--max-time", "3", "--timeout", "2"
        ],
        "conformance plain, body byte every 0.5 s": [
            "conformance", f"{server.url}/trickle/v1", *chat, "--variants", "plain",
            "--timeout", "2",
        ],
        "conformance abort, endless without content": [
            "conformance", f"{server.url}/nocontent/v1", *chat, "--variants", "abort",
            "--max-bytes", str(10**12),
        ],
    }  # fmt: skip
    for name, argv in cases.items():
        ended: list[int] = []
        thread = threading.Thread(target=lambda a=argv, e=ended: e.append(_quiet(a)), daemon=True)
        started = time.monotonic()
        thread.start()
        thread.join(30)
        took = time.monotonic() - started
        said = f"ended at {took:.1f} s, exit {ended[0]}" if ended else "still running at 30 s"
        os.write(1, f"{name}: {said}\n".encode())
    server.stopping.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS)
    parser.add_argument("--traced", action="store_true")
    parser.add_argument("--save-tiny", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--timing", action="store_true", help="only the time budgets")
    args = parser.parse_args()
    if args.timing:
        timing()
        return
    if args.save_tiny is not None:
        argv = ["conformance", f"{args.url}/tiny/v1", "--model", "m", "--json"]
        _quiet(
            [*argv, "--variants", "plain", "--max-bytes", str(8 * MIB), "--save", args.save_tiny]
        )
        return
    if args.scenario is not None:
        print(json.dumps(measure(args.scenario, args.traced)))
        return
    for scenario in SCENARIOS:
        figures: dict[str, float] = {}
        for traced in (False, True):  # each in a fresh process: peaks do not carry over
            argv = [sys.executable, __file__, "--scenario", scenario]
            done = subprocess.run(
                [*argv, *(["--traced"] if traced else [])],
                capture_output=True,
                text=True,
                check=True,
            )
            figures.update(json.loads(done.stdout.strip().splitlines()[-1]))
        shown = ", ".join(f"{key} {value:.1f}" for key, value in figures.items() if key != "exit")
        shown += f" (exit {figures['exit']:g})"
        print(f"{scenario}: {shown}", flush=True)
    subprocess.run([sys.executable, __file__, "--timing"], check=True)


if __name__ == "__main__":
    main()
