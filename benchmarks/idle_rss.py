"""What an idle open stream costs the server, as RSS under uvicorn, with and without streamguard.

A uvicorn process (uvloop, httptools; ``benchmarks/e2e_app.py``) serves ``/idle``: two
frames of an OpenAI chat stream, then the stream stays open and silent. ``STREAMS`` clients
open one each and read the two frames; the server's resident memory (``VmRSS``) is read
before and once they are all open, and divided by the streams. streamguard's share is the
difference between the run with the middleware (default configuration: metrics and logs
on) and the one without. ``/idle`` is left to auto-detection (decided by its first event);
``/idle-listed`` is a declared ``openai_chat`` route. Run: ``python -m benchmarks.idle_rss``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from benchmarks._timing import print_table, write_results
from benchmarks.e2e import uvicorn_server

BUDGET = 2048  # bytes per idle open stream (docs/reliability.md)


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _open(port: int, path: str, opened: list[asyncio.StreamWriter]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    received = b""
    while received.count(b"data: ") < 2:
        chunk = await reader.read(1 << 16)
        if not chunk:
            raise RuntimeError("the server closed an idle stream")
        received += chunk
    opened.append(writer)


def per_stream(middleware: str, path: str, streams: int) -> float:
    """Server RSS bytes per idle open stream of ``path``, ``streams`` open at once."""
    with uvicorn_server(middleware, backlog=streams) as (port, pid):

        async def run() -> float:
            opened: list[asyncio.StreamWriter] = []
            # A first wave warms the server's allocator and caches up, then closes.
            await asyncio.gather(*(_open(port, path, opened) for _ in range(100)))
            for writer in opened:
                writer.close()
            opened.clear()
            await asyncio.sleep(1.0)
            before = rss(pid)
            for start in range(0, streams, 500):
                count = min(500, streams - start)
                await asyncio.gather(*(_open(port, path, opened) for _ in range(count)))
            time.sleep(0.5)
            after = rss(pid)
            for writer in opened:
                writer.close()
            return (after - before) / streams

        return asyncio.run(run())


def main() -> int:
    rows = []
    for streams in (2_000, 10_000):
        for path in ("/idle", "/idle-listed"):
            bare = per_stream("none", path, streams)
            guarded = per_stream("streamguard", path, streams)
            rows.append(
                {
                    "measure": f"{path}, {streams:,} open: RSS per stream without / with / "
                    f"streamguard's share (bytes; budget {BUDGET})",
                    "value": f"{bare:.0f} / {guarded:.0f} / {guarded - bare:.0f}",
                }
            )
    print_table(rows)
    path = write_results("idle_rss", rows)
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
