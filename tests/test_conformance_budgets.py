"""``conformance`` and ``probe``: their budgets bound every read (issue 44).

A raw socket server on loopback plays the endpoints no well-behaved framework sends: a
response head sent one byte at a time, a body that trickles, a stream that never carries
content (the abort variant's read looks for it). The verdicts rest on facts the run
reports (it ended, the limit it names, the bytes it kept), never on how long it took: the
only clock in a test is its outer guard, which catches a hang and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamguard import cli
from streamguard.timeline import read_capture

#: How long a run may take before the test calls it a hang: far past any budget the tests
#: set (a second or two), so only a run that never ends trips it.
HANG = 60.0
KIB = 1024


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    payload = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


#: A healthy answer: what the health requests of the abort variant get.
HEALTHY = (
    _chunk({"role": "assistant", "content": ""})
    + _chunk({"content": "one"})
    + _chunk({}, "stop")
    + b"data: [DONE]\n\n"
)
#: An event without content: the abort variant's read never finds where to leave.
NO_CONTENT = _chunk({"role": "assistant"})
EVENT_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
)


class Misbehaving:
    """A loopback HTTP/1.1 server; what it answers depends on the request's path (its first
    segment) and, for the abort variant, on the body (its health requests get ``HEALTHY``).
    Every connection is served by a thread of its own until the client leaves or the
    server stops."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _request(self, connection: socket.socket) -> tuple[str, bytes]:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536) or b"\r\n\r\n"
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            more = connection.recv(65536)
            if not more:
                break
            body += more
        path = head.split(b" ")[1].decode() if head.count(b" ") >= 2 else "/"
        return path, body

    def _serve(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            path, body = self._request(connection)
            kind = path.strip("/").split("/")[0]
            if b"Count from one" in body and kind in ("nocontent", "finite"):
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                head += b"content-length: %d\r\n\r\n" % len(HEALTHY)
                connection.sendall(head + HEALTHY)
                return
            if kind == "head":  # a head sent one byte at a time, never finished
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.stopping.wait(0.02):
                    connection.sendall(b"x")
            elif kind == "trickle":  # a body byte every so often, never finished
                connection.sendall(EVENT_STREAM_HEAD)
                while not self.stopping.wait(0.5):
                    connection.sendall(b":")
            elif kind == "slow":  # one body byte, long after the head (under --timeout)
                connection.sendall(EVENT_STREAM_HEAD)
                self.stopping.wait(HANG)
                connection.sendall(b":")
            elif kind == "nocontent":  # events without content, as fast as they go
                connection.sendall(EVENT_STREAM_HEAD)
                block = NO_CONTENT * (16 * KIB // len(NO_CONTENT))
                while not self.stopping.is_set():
                    connection.sendall(block)
            elif kind == "finite":  # 4 MB of events without content, then the end
                connection.sendall(EVENT_STREAM_HEAD)
                block = NO_CONTENT * (16 * KIB // len(NO_CONTENT))
                for _ in range(4 * 1024 * KIB // len(block)):
                    connection.sendall(block)
            elif kind == "tiny":  # tiny content events without end
                connection.sendall(EVENT_STREAM_HEAD)
                block = _chunk({"content": "x"}) * 200
                while not self.stopping.is_set():
                    connection.sendall(block)

    def stop(self) -> None:
        self.stopping.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[Misbehaving]:
    served = Misbehaving()
    try:
        yield served
    finally:
        served.stop()


def guarded(argv: list[str]) -> int:
    """``main(argv)`` in a thread, joined within ``HANG``: a run that never ends fails the
    test (its thread is left to the server's stop) instead of hanging it."""
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(cli.main(argv)), daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"still running after {HANG:g} s: {argv}"
    return result[0]


@pytest.fixture
def run_json(
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., tuple[int, dict[str, Any], str]]:
    def run(*argv: str) -> tuple[int, dict[str, Any], str]:
        code = guarded(list(argv))
        out, err = capsys.readouterr()
        return code, json.loads(out) if out.strip() else {}, err

    return run


# -- item 1: the abort variant's read is bounded -------------------------------------------


def test_abort_against_an_endless_stream_without_content_stops_at_max_bytes(
    server: Misbehaving, tmp_path: Path, run_json: Callable[..., Any]
) -> None:
    """Before, the read looked for content with neither --max-time nor --max-bytes, and an
    endless stream without content never ended (the spool grew without bound)."""
    limit = 256 * KIB
    code, report, _ = run_json(
        "conformance", f"{server.url}/nocontent/v1", "--model", "m", "--json",
        "--variants", "abort", "--max-bytes", str(limit), "--save", str(tmp_path),
    )  # fmt: skip
    [variant] = report["variants"]
    assert (
        variant["reason"]
        == f"not exercised: no content before the read stopped at --max-bytes {limit}"
    )
    saved = read_capture((tmp_path / "abort.jsonl").read_text().splitlines())
    assert sum(len(a.data) for a in saved.arrivals) == limit
    assert code == 0  # skipped: nothing was left mid-content


def test_abort_against_an_endless_stream_without_content_stops_at_max_time(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    _, report, _ = run_json(
        "conformance", f"{server.url}/nocontent/v1", "--model", "m", "--json",
        "--variants", "abort", "--max-time", "0.5", "--max-bytes", str(10**12),
    )  # fmt: skip
    [variant] = report["variants"]
    assert (
        variant["reason"] == "not exercised: no content before the read stopped at --max-time 0.5"
    )


# -- item 2: the head and every body read are bounded by --max-time ------------------------


def test_a_head_sent_byte_by_byte_stops_the_conformance_read_at_max_time(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    code, report, _ = run_json(
        "conformance", f"{server.url}/head/v1", "--model", "m", "--json",
        "--variants", "plain", "--max-time", "1", "--timeout", "5",
    )  # fmt: skip
    [variant] = report["variants"]
    assert (variant["outcome"], variant["reason"]) == (
        "error",
        "no response head within --max-time 1 s",
    )
    assert code == 1


def test_a_head_sent_byte_by_byte_stops_the_probe_at_max_time(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    code, _, err = run_json("probe", f"{server.url}/head", "--max-time", "1", "--timeout", "5")
    assert err.endswith("no response head within --max-time 1 s\n")
    assert code == 2


@pytest.mark.parametrize("command", ["probe", "conformance"])
def test_a_body_that_trickles_stops_at_max_time(
    command: str, server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    """One byte every half second, well under --timeout: only --max-time ends it."""
    if command == "probe":
        code, result, _ = run_json(
            "probe",
            f"{server.url}/trickle",
            "--max-time",
            "1.5",
            "--timeout",
            "5",
            "--format",
            "json",
        )
        assert result["stopped_by"] == "--max-time 1.5"
        assert code == 1
        return
    code, report, _ = run_json(
        "conformance", f"{server.url}/trickle/v1", "--model", "m", "--json",
        "--variants", "plain", "--max-time", "1.5", "--timeout", "5",
    )  # fmt: skip
    [variant] = report["variants"]
    assert "the stream ended client_disconnect (--max-time 1.5)" in [
        f["message"] for f in variant["findings"]
    ]


def test_a_body_read_waiting_past_max_time_is_cut_at_it(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    """The head, then one byte long after --max-time but under --timeout: the read waiting
    for it is cut at the budget, before that byte arrives (before, the time was looked at
    only as a chunk arrived, so the probe waited for it)."""
    code, result, _ = run_json(
        "probe", f"{server.url}/slow", "--max-time", "2", "--timeout", str(HANG * 2),
        "--format", "json",
    )  # fmt: skip
    assert (result["stopped_by"], result["bytes"]) == ("--max-time 2", 0)
    assert code == 1
