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
def test_sigterm_reports_every_open_stream(tmp_path: Path) -> None:
    """50 streams open when uvicorn gets SIGTERM: 50 reports, each ``cancelled``."""
    reports = tmp_path / "reports.jsonl"
    port = _free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "tests.shutdown_app:app",
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
                http.stream("GET", f"http://127.0.0.1:{port}/forever") as response,
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
        clients = [threading.Thread(target=client) for _ in range(STREAMS)]
        for thread in clients:
            thread.start()
        wait_until(lambda: len(opened) == STREAMS, 30, "every stream's first event")
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    finally:
        stop.set()
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    lines = reports.read_text().splitlines() if reports.exists() else []
    outcomes = [json.loads(line)["outcome"] for line in lines]
    assert outcomes == ["cancelled"] * STREAMS, (tmp_path / "uvicorn.log").read_text()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
