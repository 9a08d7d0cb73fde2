"""Shutdown under a real uvicorn process: SIGTERM still reports every open stream."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from .servers import wait_until

ROOT = Path(__file__).resolve().parent.parent
STREAMS = 50


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.slow
@pytest.mark.parametrize(
    ("app", "path", "streams"),
    [
        ("app", "/forever", STREAMS),
        ("app", "/forever-sse", 10),
        ("queued_app", "/forever", STREAMS),
        ("queued_app", "/forever-sse", 10),
    ],
)
def test_sigterm_reports_every_open_stream(
    tmp_path: Path, app: str, path: str, streams: int
) -> None:
    """Streams open when uvicorn gets SIGTERM: one report each, ``cancelled`` with no
    finding, whichever response class sent them (sse-starlette ends its streams itself at
    shutdown), and delivered through a ``ReportQueue`` too."""
    reports = tmp_path / "reports.jsonl"
    port = _free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            f"tests.shutdown_app:{app}",
            "--host=127.0.0.1",
            f"--port={port}",
            "--timeout-graceful-shutdown=1",
            "--log-level=warning",
        ],
        cwd=ROOT,
        env={**_environ(), "SHUTDOWN_REPORTS": str(reports)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    opened: list[int] = []
    stop = threading.Event()

    def client() -> None:
        try:
            with (
                httpx.Client(timeout=30) as http,
                http.stream("GET", f"http://127.0.0.1:{port}{path}") as response,
            ):
                for _ in response.iter_bytes():
                    opened.append(1)
                    stop.wait(30)
                    return
        except httpx.HTTPError:
            pass

    try:
        wait_until(lambda: _listening(port) or server.poll() is not None, 30, "uvicorn up")
        assert server.poll() is None, (tmp_path / "uvicorn.log").read_text()
        clients = [threading.Thread(target=client) for _ in range(streams)]
        for thread in clients:
            thread.start()
        wait_until(lambda: len(opened) == streams, 30, "every stream's first event")
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        stop.set()
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    lines = reports.read_text().splitlines() if reports.exists() else []
    ends = [(json.loads(line)["outcome"], json.loads(line)["rules"]) for line in lines]
    assert ends == [("cancelled", [])] * streams, (tmp_path / "uvicorn.log").read_text()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
