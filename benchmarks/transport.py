"""The client side: what a streamguard transport costs the code that reads an upstream.

A uvicorn process (uvloop, httptools, no middleware) serves the 2,000-frame OpenAI chat
stream of ``benchmarks/e2e_app.py``, one frame per ``send``. This process reads it whole,
over loopback, through ``httpx.Client`` with the bare ``httpx.HTTPTransport()`` (the anchor)
and through ``streamguard.httpx.StreamGuardTransport()`` around the same kind of transport
(default configuration: metrics, logs and timers on; ``/stream`` configured as
``openai_chat``, the SDK's path detected), then the same through the official
openai SDK (``chat.completions.create(stream=True)``, every chunk parsed into its model).
The figure is the reading thread's CPU time per frame (the server is another process), the
best of several interleaved rounds. Run: ``python -m benchmarks.transport``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

import httpx
import structlog
from prometheus_client import CollectorRegistry

from benchmarks._timing import best_of, print_table, write_results
from benchmarks.e2e import uvicorn_server
from streamguard.httpx import StreamGuardTransport

FRAMES = 2000


def _raw(client: httpx.Client, url: str) -> Callable[[], object]:
    def read() -> None:
        with client.stream("GET", url) as response:
            for _ in response.iter_raw():
                pass

    return read


def _sdk(client: httpx.Client, base_url: str) -> Callable[[], object]:
    import openai

    sdk = openai.OpenAI(base_url=base_url, api_key="x", http_client=client, max_retries=0)

    def read() -> None:
        # The app streams whatever the request; the SDK posts to {base_url}/chat/completions.
        for _ in sdk.chat.completions.create(model="m", messages=[], stream=True):
            pass

    return read


def main() -> int:
    # Logs go through the standard library at INFO, as a production service would have them.
    logging.basicConfig(level=logging.INFO, format="%(message)s", filename=os.devnull)
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    repeats = int(os.environ.get("STREAMGUARD_BENCH_REPEATS", "15"))
    rounds = int(os.environ.get("STREAMGUARD_BENCH_ROUNDS", "3"))
    bare = httpx.Client(transport=httpx.HTTPTransport())
    transport = StreamGuardTransport(metrics=CollectorRegistry(), routes={"/stream": "openai_chat"})
    guarded = httpx.Client(transport=transport)
    best: dict[tuple[str, str], float] = {}
    with uvicorn_server("none") as (port, _pid):
        base = f"http://127.0.0.1:{port}"
        readers = {
            ("raw", "bare"): _raw(bare, f"{base}/stream"),
            ("raw", "streamguard"): _raw(guarded, f"{base}/stream"),
            ("openai_sdk", "bare"): _sdk(bare, f"{base}/v1"),
            ("openai_sdk", "streamguard"): _sdk(guarded, f"{base}/v1"),
        }
        for read in readers.values():
            read()  # warm-up: connections, imports, label children
        # Rounds interleave the clients and keep each one's least CPU: a neighbour's burst
        # of load then inflates one sample, not the comparison.
        for _ in range(rounds):
            for key, read in readers.items():
                best[key] = min(best.get(key, float("inf")), best_of(read, repeats))
    bare.close()
    guarded.close()
    rows = []
    for reader in ("raw", "openai_sdk"):
        anchor = best[(reader, "bare")]
        for transport in ("bare", "streamguard"):
            seconds = best[(reader, transport)]
            rows.append(
                {
                    "reader": reader,
                    "transport": transport,
                    "client_us_per_frame": seconds / FRAMES * 1e6,
                    "vs_bare": seconds / anchor,
                    "added_us_per_frame": (seconds - anchor) / FRAMES * 1e6,
                }
            )
    print_table(rows)
    path = write_results("transport", rows)
    print(f"\nresults in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
