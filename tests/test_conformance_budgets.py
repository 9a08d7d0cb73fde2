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

from streamguard import cli, conformance
from streamguard.timeline import read_capture
from tests.helpers import peak_memory, ticking

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
            kind, _, megabytes = path.strip("/").split("/")[0].partition("-")
            # Every answer closes its connection, and says so: a client that kept one for
            # its next request would race the close (on a loaded machine, a ReadError).
            if b"Count from one" in body and kind in ("nocontent", "finite"):
                head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                head += b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(HEALTHY)
                connection.sendall(head + HEALTHY)
                return
            if kind == "twin":  # a healthy stream; the unstreamed answer trickles
                if b'"stream": false' not in body:
                    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    head += b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(HEALTHY)
                    connection.sendall(head + HEALTHY)
                    return
                head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                connection.sendall(head + b"connection: close\r\n\r\n")
                while not self.stopping.wait(0.5):
                    connection.sendall(b" ")
            elif kind == "head":  # a head sent one byte at a time, never finished
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
            elif kind == "finite":  # MB (by default 4) of events without content, then the end
                connection.sendall(EVENT_STREAM_HEAD)
                block = NO_CONTENT * (16 * KIB // len(NO_CONTENT))
                for _ in range(int(megabytes or 4) * 1000 * KIB // len(block)):
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
def ticking_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' budget clock (``cli._monotonic``) moved a quarter second per reading:
    a run connects, sends and reads its head within 8 readings (2 s), each body chunk
    takes 3 more; a budget of 3 s is then spent after a count of readings, not of real
    seconds, so a loaded machine changes nothing but how long the test waits."""
    monkeypatch.setattr(cli, "_monotonic", ticking(0.25))


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


@pytest.mark.usefixtures("ticking_clock")
def test_abort_against_an_endless_stream_without_content_stops_at_max_time(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    _, report, _ = run_json(
        "conformance", f"{server.url}/nocontent/v1", "--model", "m", "--json",
        "--variants", "abort", "--max-time", "3", "--max-bytes", str(10**12),
    )  # fmt: skip
    [variant] = report["variants"]
    assert variant["reason"] == "not exercised: no content before the read stopped at --max-time 3"


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


@pytest.mark.usefixtures("ticking_clock")
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
            "3",
            "--timeout",
            "5",
            "--format",
            "json",
        )
        assert result["stopped_by"] == "--max-time 3"
        assert code == 1
        return
    code, report, _ = run_json(
        "conformance", f"{server.url}/trickle/v1", "--model", "m", "--json",
        "--variants", "plain", "--max-time", "3", "--timeout", "5",
    )  # fmt: skip
    [variant] = report["variants"]
    assert "the stream ended client_disconnect (--max-time 3)" in [
        f["message"] for f in variant["findings"]
    ]


@pytest.mark.usefixtures("ticking_clock")
def test_a_body_read_waiting_past_max_time_is_cut_at_it(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    """The head, then one byte long after --max-time but under --timeout: the read waiting
    for it is cut at the budget, before that byte arrives (before, the time was looked at
    only as a chunk arrived, so the probe waited for it)."""
    code, result, _ = run_json(
        "probe", f"{server.url}/slow", "--max-time", "3", "--timeout", str(HANG * 2),
        "--format", "json",
    )  # fmt: skip
    assert (result["stopped_by"], result["bytes"]) == ("--max-time 3", 0)
    assert code == 1


@pytest.mark.usefixtures("ticking_clock")
def test_the_twin_answer_is_bounded_by_max_time_too(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    """--twin's unstreamed answer, a byte every 0.5 s: the request ends at --max-time (a
    ReadTimeout: the variant an error), where before only --timeout bounded each wait."""
    code, report, _ = run_json(
        "conformance", f"{server.url}/twin/v1", "--model", "m", "--json",
        "--variants", "plain", "--twin", "--max-time", "3", "--timeout", "5",
    )  # fmt: skip
    [variant] = report["variants"]
    assert (variant["outcome"], variant["reason"]) == ("error", "request failed: ReadTimeout")
    assert code == 1


# -- items 3 and 4: what a read keeps stays within a multiple of --max-bytes -----------------


def peak_bytes(action: Callable[[], object]) -> int:
    """The peak of traced allocations while ``action`` runs (every thread's)."""
    return peak_memory(action)[1]


def test_the_abort_read_keeps_a_multiple_of_max_bytes(
    server: Misbehaving, run_json: Callable[..., Any]
) -> None:
    """A finite 4 MB stream without content, --max-bytes 256 KiB: the read stops at the
    limit and keeps no more than a few times it (the spool's memory part, the body). Before,
    the abort read had no byte limit, and the whole recording was read back into memory
    and joined: a peak of more than 8 MB, 32 times the limit."""
    limit = 256 * KIB
    argv = ["conformance", f"{server.url}/finite/v1", "--model", "m", "--json"]
    argv += ["--variants", "abort", "--max-bytes", str(limit)]
    run_json(*argv)  # the imports and first-call caches, out of the figure
    peak = peak_bytes(lambda: run_json(*argv))
    assert peak < 8 * limit, peak


def test_save_writes_each_stream_as_it_is_read(
    server: Misbehaving, run_json: Callable[..., Any], tmp_path: Path
) -> None:
    """--save with --repeat 8: each stream is written as it is read, not held with its
    chunks until the variant's runs are over (before: eight streams of 256 KiB, each body
    and chunks, held at once)."""
    limit = 256 * KIB
    argv = ["conformance", f"{server.url}/finite/v1", "--model", "m", "--json"]
    argv += ["--variants", "abort", "--max-bytes", str(limit), "--repeat", "8"]
    run_json(*argv)
    peak = peak_bytes(lambda: run_json(*argv, "--save", str(tmp_path)))
    assert peak < 10 * limit, peak  # about 6 x: the spool's memory part, the body, its chunks
    [variant] = json.loads((tmp_path / "conformance.json").read_text())["variants"]
    assert variant["captures"] == ["abort.jsonl", *(f"abort-{k}.jsonl" for k in range(2, 9))]
    for name in variant["captures"]:
        saved = read_capture((tmp_path / name).read_text().splitlines())
        assert sum(len(a.data) for a in saved.arrivals) == limit


def test_an_endless_stream_of_tiny_events_keeps_a_bounded_part(
    server: Misbehaving, run_json: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """plain against tiny events without end, --max-bytes 1 MiB: the events past the
    judged bound (64 KiB here) are counted, not parsed, and the note says the variant's
    own checks did not run. Before, every event was parsed into dicts and kept: about ten
    times the body."""
    monkeypatch.setattr(conformance, "MAX_JUDGED_EVENT_BYTES", 64 * KIB, raising=False)
    limit = 1024 * KIB
    argv = ["conformance", f"{server.url}/tiny/v1", "--model", "m", "--json"]
    argv += ["--variants", "plain", "--max-bytes", str(limit)]
    run_json(*argv)
    reports: list[dict[str, Any]] = []
    peak = peak_bytes(lambda: reports.append(run_json(*argv)[1]))
    assert peak < 5 * limit, peak
    [variant] = reports[0]["variants"]
    assert variant["outcome"] == "fail"  # stream_incomplete: cut at --max-bytes
    left_out, _, rest = variant["note"].partition(" ")
    assert int(left_out) > 0
    assert rest == (
        f"events past the first {64 * KIB} bytes of event data were not kept: the "
        "variant's own checks did not run"
    )


def test_the_judged_events_stop_at_their_bound() -> None:
    event = _chunk({"content": "x"})
    body = event * 20_000
    chunks = conformance._chunks(body)
    data = len(event) - len(b"data: \n\n")
    assert len(chunks.kept) == conformance.MAX_JUDGED_EVENT_BYTES // data
    assert len(chunks.kept) + chunks.left_out == 20_000


def test_a_replay_keeps_a_multiple_of_max_bytes(
    server: Misbehaving,
    run_json: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """--replay reads a capture no further than --max-bytes, and judges it as the live run
    did: within the same multiple."""
    monkeypatch.setattr(conformance, "MAX_JUDGED_EVENT_BYTES", 64 * KIB, raising=False)
    limit = 1024 * KIB
    run_json("conformance", f"{server.url}/tiny/v1", "--model", "m", "--json",
             "--variants", "plain", "--max-bytes", str(limit), "--save", str(tmp_path))  # fmt: skip
    argv = ["conformance", "--replay", str(tmp_path), "--json", "--max-bytes", str(limit)]
    run_json(*argv)
    peak = peak_bytes(lambda: run_json(*argv))
    assert peak < 5 * limit, peak


# -- the budget on an injected clock -------------------------------------------------------


def chat_read(server: Misbehaving, kind: str, clock: Callable[[], float]) -> Any:
    import httpx

    reader = cli._conformance_reader(httpx, 10**12, 5.0, "openai_chat", clock=clock)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with cli._bounded_client(httpx, HANG) as client:
        return reader(client, f"{server.url}/{kind}/v1/chat/completions", body, {}, False)


def test_the_body_budget_runs_on_the_reader_clock(server: Misbehaving) -> None:
    """A body byte every 0.5 s, --max-time 5 on a clock that moves a quarter second per
    reading (the connect, the request's writes, each read and each chunk read it): the
    head comes within a few readings, and the body read stops at the budget after twenty
    (real time plays no part)."""
    read = chat_read(server, "trickle", ticking(0.25))
    assert (read.outcome.value, read.stopped) == ("client_disconnect", "--max-time 5")


def test_the_head_budget_runs_on_the_reader_clock(server: Misbehaving) -> None:
    with pytest.raises(conformance.MaxTimeSpent, match="no response head within --max-time 5 s"):
        chat_read(server, "head", ticking(1.0))


def test_a_client_without_the_private_pool_still_runs(
    server: Misbehaving, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a newer httpx has moved the pool the deadline backend is put in, the client
    is httpx's own: the read still runs, bounded as chunks arrive."""
    import httpx

    original = httpx.HTTPTransport

    class Moved(original):
        def __init__(self) -> None:
            super().__init__()
            del self._pool  # (the attribute moved)
            self._pool_moved = original()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return self._pool_moved.handle_request(request)

        def close(self) -> None:
            self._pool_moved.close()

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    monkeypatch.setattr(httpx, "HTTPTransport", Moved)
    read = chat_read(server, "trickle", ticking(0.25))
    assert (read.outcome.value, read.stopped) == ("client_disconnect", "--max-time 5")
