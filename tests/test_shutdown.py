"""Shutdown under a real uvicorn process: SIGTERM still reports every open stream."""

from __future__ import annotations

import importlib.metadata
import json
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from packaging.version import Version

from streamguard.middleware import BODY_ENDED_AT_SHUTDOWN

from .servers import wait_until

ROOT = Path(__file__).resolve().parent.parent
STREAMS = 50

#: The sse-starlette installed (constraints.txt pins 3.7.0). From 3.7.1 on it ends the body
#: of its open streams at shutdown; up to 3.7.0 its app returned without ending it.
SSE_STARLETTE_ENDS_BODIES = Version(importlib.metadata.version("sse-starlette")) >= Version("3.7.1")

CUT = ("cancelled", [])  # the server cut the stream: the app never ended its body
#: A body ended at shutdown, as the client got it: a plain SSE stream that ended, and a
#: Chat answer cut before its finish_reason and its [DONE].
ENDED = {
    "plain": ("completed", []),
    "chat": ("unclosed", ["missing_terminal", "missing_finish_reason"]),
}


def _expected(path: str) -> tuple[str, list[str]]:
    """What a stream of ``path`` open at SIGTERM is reported as (tests/shutdown_app.py)."""
    kind = "chat" if path.endswith("-chat") else "plain"
    if path.startswith("/ends-at-shutdown"):
        return ENDED[kind]
    if path.startswith("/forever-sse"):
        return ENDED[kind] if SSE_STARLETTE_ENDS_BODIES else CUT
    return CUT


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
        ("app", "/forever-sse-chat", 10),
        ("app", "/ends-at-shutdown", 10),
        ("app", "/ends-at-shutdown-chat", 10),
        ("queued_app", "/forever", STREAMS),
        ("queued_app", "/forever-sse", 10),
    ],
)
def test_sigterm_reports_every_open_stream(
    tmp_path: Path, app: str, path: str, streams: int
) -> None:
    """Streams open when uvicorn gets SIGTERM: one report each, delivered through a
    ``ReportQueue`` too. A stream the server cuts is ``cancelled`` with no finding; one
    whose body the app ends at shutdown (sse-starlette from 3.7.1, ``/ends-at-shutdown``
    whatever the version) is reported as the client got it, ``completed`` for plain SSE
    and ``unclosed`` with ``missing_terminal`` for Chat, with a note saying it ended while
    the server was shutting down."""
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
    lines = (
        [json.loads(line) for line in reports.read_text().splitlines()] if reports.exists() else []
    )
    ends = [(line["outcome"], line["rules"]) for line in lines]
    expected = _expected(path)
    assert ends == [expected] * streams, (tmp_path / "uvicorn.log").read_text()
    if expected != CUT:
        assert all(BODY_ENDED_AT_SHUTDOWN in line["notes"] for line in lines)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)
