"""Run a fuzz target under atheris (coverage-guided) or, without it, a random-input loop.

``python fuzz/fuzz_X.py [-max_total_time=N] [libFuzzer options] [CORPUS_DIR ...]``: with
atheris installed (``pip install -e '.[fuzz]'``) the target runs under libFuzzer, seeded
with the fixtures under ``tests/fixtures``; without it, the same ``test_one_input`` is fed
fixtures, mutated fixtures and random bytes for ``FUZZ_SECONDS`` (default 60) seconds.
Either way it ends by printing how many cases it tried.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"


def seeds() -> list[bytes]:
    return [path.read_bytes() for path in sorted(FIXTURES.glob("*/*.sse"))]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """A few byte-level edits: flip, insert, delete, splice a line ending or a cut."""
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        how = rng.randrange(6)
        at = rng.randint(0, len(buffer))
        if how == 0 and buffer:
            buffer[min(at, len(buffer) - 1)] ^= 1 << rng.randrange(8)
        elif how == 1:
            buffer[at:at] = rng.randbytes(rng.randint(1, 8))
        elif how == 2:
            del buffer[at : at + rng.randint(1, 16)]
        elif how == 3:
            buffer[at:at] = rng.choice(
                [b"\n", b"\r", b"\r\n", b"\n\n", b":", b"\xff", b"\xef\xbb\xbf"]
            )
        elif how == 4:
            buffer[at:at] = rng.choice(
                [b"data: ", b"event: ", b"[DONE]", b"{", b"}", b'"', b"id: "]
            )
        else:
            del buffer[at:]
    return bytes(buffer)


def _fallback(test_one_input: Callable[[bytes], None], seconds: float) -> int:
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "0")) or None)
    pool = seeds()
    tried = 0
    deadline = time.monotonic() + seconds
    for seed in pool:  # every seed once, as libFuzzer does
        test_one_input(rng.randbytes(4) + seed)
        tried += 1
    while time.monotonic() < deadline:
        fresh = rng.randrange(3) == 0
        data = rng.randbytes(rng.randint(0, 512)) if fresh else _mutate(rng, rng.choice(pool))
        test_one_input(rng.randbytes(4) + data)
        tried += 1
    return tried


def main(test_one_input: Callable[[bytes], None], name: str) -> None:
    seconds = float(os.environ.get("FUZZ_SECONDS", "60"))
    args = list(sys.argv)
    if not any(arg.startswith("-max_total_time=") for arg in args):
        args.append(f"-max_total_time={int(seconds)}")
    try:
        import atheris
    except ImportError:
        print(f"{name}: atheris not installed; random-input fallback for {seconds:g} s")
        tried = _fallback(test_one_input, seconds)
        print(f"{name}: {tried} cases tried, no failure")
        return
    if not any(not arg.startswith("-") for arg in args[1:]):
        corpus = Path(tempfile.mkdtemp(prefix=f"{name}-corpus-"))
        for number, seed in enumerate(seeds()):
            (corpus / f"seed-{number:04d}").write_bytes(b"\x00\x00\x00\x00" + seed)
        args.append(str(corpus))
    counter = {"tried": 0}

    def counted(data: bytes) -> None:
        counter["tried"] += 1
        test_one_input(data)

    import atexit

    atexit.register(lambda: print(f"{name}: {counter['tried']} cases tried"))
    atheris.Setup(args, counted)
    atheris.Fuzz()
