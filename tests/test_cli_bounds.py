"""The command line's bounds (issue 23, items 2, 6 and 8).

``check`` reads a file in pieces and gives the report of the whole body at once, with
memory that does not grow with the file; a corrupt capture is an input error naming its
line, never a traceback; ``probe`` stops an endless stream at ``--max-bytes`` and
``--max-time``, and what it keeps stays bounded.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import cli, timeline
from streamguard._format import format_finding, frame_at, severity_at_least
from streamguard._wire import showing_values
from streamguard.monitor import check_stream
from streamguard.report import Severity
from streamguard.testing import serve
from streamguard.timeline import CAPTURE_FORMAT, read_capture
from tests.helpers import peak_memory, ticking
from tests.stream_apps import FIXTURES

MB = 1000 * 1000
MIB = 1024 * 1024
#: How much more a run over the larger input may peak than over the smaller one. The
#: inputs differ by 20 MB (probe: 7 MiB): holding the body, or any copy of it, shows as
#: that much and more.
FLAT = MIB
HEADER = json.dumps({"format": CAPTURE_FORMAT, "url": "http://127.0.0.1/x"})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def peak_bytes(action: Callable[[], object]) -> int:
    """The peak of traced allocations while ``action`` runs (every thread's)."""
    return peak_memory(action)[1]


def whole_body_json(label: str, body: bytes, request: Any = None) -> dict[str, Any]:
    """What ``check --format json`` printed when it read the whole body at once (as it
    reads the user's own files: values shown)."""
    with showing_values():
        report = check_stream([body], request=request)
    fails = any(severity_at_least(f.severity, Severity.ERROR) for f in report.findings)
    return {
        "file": label,
        "protocol": report.protocol,
        "protocol_source": report.protocol_source,
        "outcome": report.outcome.value,
        "events": report.events,
        "bytes": report.bytes,
        "inspected": report.inspected,
        "malformed": report.malformed,
        "failed": fails,
        "findings": [
            {
                "rule": f.rule,
                "severity": f.severity.value,
                "message": f.message,
                "event_index": f.event_index,
                "byte_offset": f.byte_offset,
                "frame": f.excerpt if f.excerpt is not None else frame_at(body, f.byte_offset),
            }
            for f in report.findings
        ],
        "notes": list(report.notes),
    }


# -- check: read in pieces, the report of the whole body -------------------------------------

FIXTURE_BODIES = sorted(FIXTURES.rglob("*.sse"))


@pytest.mark.parametrize("piece", [7, 4096])
def test_every_fixture_read_in_pieces_gives_the_whole_body_report(
    piece: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fixture read 7 (or 4096) bytes at a time: the JSON report of the whole body,
    frames of the findings included, with the fixture's request when it has one."""
    monkeypatch.setattr(cli, "READ_CHUNK_BYTES", piece)
    assert len(FIXTURE_BODIES) > 100
    for path in FIXTURE_BODIES:
        request_file = path.with_suffix(".request.json")
        argv = ["check", "--format", "json", str(path)]
        request = None
        if request_file.exists():
            argv += ["--request", str(request_file)]
            request = cli._read_request(str(request_file))
        _, out, err = run(capsys, *argv)
        assert err == "", path
        assert json.loads(out) == whole_body_json(str(path), path.read_bytes(), request), path


def chat_body(events: int) -> bytes:
    """An OpenAI chat stream of ``events`` chunks with faults at its start, middle and end."""
    chunk = (
        'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":%s}]}\n\n'
    )
    parts = [chunk % '{"role":"assistant"}']
    for n in range(events):
        if n in (3, events // 2):
            parts.append("data: {not json\n\n")
        elif n == events // 3:
            parts.append(chunk % '{"role":"assistant"}')  # role_repeated
        else:
            parts.append(chunk % f'{{"content":"word {n} é"}}')
    parts.append("data: [DONE]\n\ndata: cut")  # unterminated at the very end
    return "".join(parts).encode()


def test_a_large_body_read_in_pieces_gives_the_whole_body_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2 MB chat body, read in 64 KiB pieces: the same JSON report, and the same finding
    lines in the table (each rule's first), as the whole body gives (the frames are read
    back at the offsets)."""
    body = chat_body(20_000)
    assert len(body) > 2 * MB
    path = tmp_path / "big.sse"
    path.write_bytes(body)
    expected = whole_body_json(str(path), body)
    assert {f["rule"] for f in expected["findings"]} >= {
        "invalid_json",
        "role_repeated",
        "unterminated_frame",
    }
    assert run(capsys, "check", "--format", "json", str(path))[1] == json.dumps(expected) + "\n"
    out = run(capsys, "check", str(path))[1]
    report = check_stream([body])
    first_of_each_rule = {f.rule: f for f in reversed(report.findings)}.values()
    for finding in first_of_each_rule:
        assert "  " + format_finding(finding, body).replace("\n", "\n  ") in out


def test_a_capture_read_line_by_line_gives_the_report_of_its_body(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture's chunks, checked one by one: the report of the body they make."""
    body = chat_body(2_000)
    path = tmp_path / "big.jsonl"
    with path.open("w") as out:
        timeline.write_capture(
            out,
            {"url": "http://127.0.0.1/x"},
            (timeline.Arrival(i / 100, body[i : i + 999]) for i in range(0, len(body), 999)),
        )
    result = json.loads(run(capsys, "check", "--format", "json", str(path))[1])
    assert result == whole_body_json(str(path), body)


def test_a_pipe_on_stdin_is_read_in_pieces_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Standard input that cannot seek (a pipe) is spooled as it is read: the same report,
    frames included, as the whole body."""
    body = chat_body(200)
    reader, writer = os.pipe()
    os.write(writer, body)  # 30 KB: within what a pipe holds
    os.close(writer)
    with open(reader, "rb") as pipe:
        assert not pipe.seekable()
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(pipe))
        result = json.loads(run(capsys, "check", "--format", "json", "-")[1])
    assert result == whole_body_json("<stdin>", body)


# -- check: memory flat in the file's size ---------------------------------------------------

#: One large plain-SSE event: cheap to check, so 25 MB run in about a second.
BIG_EVENT = b"data: " + b"x" * 8000 + b"\n\n"


def plain_file(path: Path, size: int) -> Path:
    """A body of about ``size`` bytes with findings at its start and at its very end."""
    with path.open("wb") as out:
        out.write(b"data: one\n\nfoo: bar\n\n")  # unknown_field, at the start
        out.write(BIG_EVENT * (size // len(BIG_EVENT)))
        out.write(b"data: cut")  # unterminated_frame, at the end
    return path


def record(at: float, data: bytes) -> str:
    return json.dumps({"at": at, "b64": base64.b64encode(data).decode()}) + "\n"


def capture_file(path: Path, size: int) -> Path:
    """The same body as a capture, one line per 8 KB chunk."""
    with path.open("w") as out:
        out.write(HEADER + "\n")
        out.write(record(0, b"data: one\n\nfoo: bar\n\n"))
        out.write(record(0.5, BIG_EVENT) * (size // len(BIG_EVENT)))
        out.write(record(1.0, b"data: cut"))
    return path


@pytest.mark.parametrize(
    ("make", "html"),
    [(plain_file, False), (plain_file, True), (capture_file, False), (capture_file, True)],
    ids=["body", "body-html", "capture", "capture-html"],
)
def test_check_memory_does_not_grow_with_the_file(
    make: Callable[[Path, int], Path],
    html: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The peak of traced memory checking a 25 MB file is that of a 5 MB one (within
    1 MiB), with --html too: the file is read in pieces, the frames and the page are
    bounded. Before, the body was held whole (and joined, and copied for the page)."""
    peaks = []
    for size in (5 * MB, 25 * MB):
        path = make(tmp_path / f"in-{size}", size)
        argv = ["check", "--format", "json", str(path)]
        if html:
            argv += ["--html", str(tmp_path / "page.html")]
        peaks.append(peak_bytes(functools.partial(cli.main, argv)))
        result = json.loads(capsys.readouterr().out)
        assert result["bytes"] > size - len(BIG_EVENT)
        assert {f["rule"] for f in result["findings"]} == {"unknown_field", "unterminated_frame"}
        assert result["findings"][-1]["frame"] == "data: cut"
    assert peaks[1] - peaks[0] < FLAT, peaks


def test_the_page_of_a_long_stream_says_where_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past the page's byte bound the marks stop, and the page says so and how much is not
    drawn; the findings after it are still listed."""
    path = plain_file(tmp_path / "long.sse", 6 * MB)
    page = tmp_path / "page.html"
    code, _, _ = run(capsys, "check", str(path), "--html", str(page))
    html = page.read_text()
    assert code == 1
    covered = timeline.MAX_TIMELINE_BYTES // len(BIG_EVENT) * len(BIG_EVENT)
    assert "The page reads the stream's first" in html
    assert "is not drawn; its findings are listed below." in html
    assert "unterminated_frame" in html  # past the bound, still listed
    marks = html.count('<circle id="event-')
    assert 0 < marks <= covered // len(BIG_EVENT) + 2


def test_the_page_stops_at_its_event_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the event bound the marks stop, every kept frame whole, and the timeline says it
    is not complete."""
    monkeypatch.setattr(timeline, "MAX_TIMELINE_EVENTS", 3)
    arrivals = [timeline.Arrival(float(i), b"data: %d\n\n" % i) for i in range(10)]
    drawn = timeline.timeline_of(arrivals)
    assert not drawn.complete
    assert [m.frame for m in drawn.marks] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
    assert drawn.covered_bytes == 27
    assert timeline.timeline_of(arrivals[:3]).complete


def test_the_page_leaves_out_an_event_cut_by_its_byte_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An event whose frame may go on past the byte bound is left out, not drawn cut."""
    monkeypatch.setattr(timeline, "MAX_TIMELINE_BYTES", 20)
    drawn = timeline.timeline_of([timeline.Arrival(0.0, b"data: a\n\ndata: b\n\ndata: c\n\n")])
    assert [m.frame for m in drawn.marks] == [b"data: a\n\n"]
    assert (drawn.covered_bytes, drawn.complete) == (9, False)


# -- check: corrupt captures are input errors ------------------------------------------------

RECORD = '{"at": %s, "b64": "ZGF0YTogeAoK"}'
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        ([HEADER, RECORD % ("1" * 400)], 'line 2: "at" is too large to be a time'),
        ([HEADER, RECORD % "1e400"], 'line 2: "at" is Infinity, not a time'),
        ([HEADER, RECORD % "NaN"], 'line 2: "at" is NaN, not a time'),
        ([HEADER, RECORD % "Infinity"], 'line 2: "at" is Infinity, not a time'),
        ([HEADER, RECORD % "-Infinity"], 'line 2: "at" is -Infinity, not a time'),
        ([HEADER, RECORD % "-0.5"], 'line 2: "at" is negative (-0.5), not a time'),
        ([HEADER, RECORD % '"0.5"'], 'line 2: "at" must be a number of seconds, got str'),
        ([HEADER, RECORD % "true"], 'line 2: "at" must be a number of seconds, got bool'),
        ([HEADER, '{"b64": "ZGF0YTogeAoK"}'], 'line 2: "at" must be a number of seconds'),
        ([HEADER, RECORD % "1" * 1, RECORD % ("9" * 5000)], "line 3: a chunk record is not"),
        ([HEADER[:-1] + f', "x": {DEEP}}}'], "line 1: the capture header is nested too deeply"),
        ([HEADER, RECORD % f'0, "x": {DEEP}'], "line 2: a chunk record is nested too deeply"),
        ([HEADER, RECORD % "0", RECORD % "[0]"], 'line 3: "at" must be a number of seconds'),
    ],
    ids=[
        "400-digits",
        "1e400",
        "nan",
        "infinity",
        "minus-infinity",
        "negative",
        "string",
        "bool",
        "missing",
        "5000-digits",
        "deep-header",
        "deep-record",
        "list",
    ],
)
def test_a_corrupt_capture_is_an_input_error_naming_the_line(
    lines: list[str],
    error: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each corrupt capture exits 2 with the file, the line and the problem on stderr (no
    traceback, no report), in both output formats."""
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run(capsys, "check", str(path))
    assert code == 2
    assert err.startswith(f"streamguard check: error: {path}: not a readable capture: {error}")
    assert err.count("\n") == 1
    assert "(input error)" in out
    code, out, _ = run(capsys, "check", "--format", "json", str(path))
    assert code == 2
    assert error in json.loads(out)["error"]


def test_a_capture_line_longer_than_the_bound_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line past MAX_CAPTURE_LINE_BYTES is refused with its number, not read whole."""
    monkeypatch.setattr(timeline, "MAX_CAPTURE_LINE_BYTES", 100)
    path = tmp_path / "long.jsonl"
    path.write_text(HEADER + "\n" + RECORD % "0" + "\n" + RECORD % ("0" + " " * 100) + "\n")
    code, _, err = run(capsys, "check", str(path))
    assert code == 2
    assert "line 3: longer than 100 bytes" in err


def test_a_capture_line_that_is_not_utf8_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(HEADER.encode() + b"\n" + (RECORD % "0").encode() + b"\n\xff\n")
    code, _, err = run(capsys, "check", str(path))
    assert code == 2
    assert "line 3: not UTF-8 text" in err


def test_a_sound_capture_still_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Integer and float times, 0 included, and blank lines are a capture's as before."""
    path = tmp_path / "fine.jsonl"
    path.write_text("\n".join([HEADER, RECORD % "0", "", RECORD % "1.25", RECORD % "3"]) + "\n")
    code, out, err = run(capsys, "check", "--format", "json", str(path))
    assert (code, err) == (0, "")
    assert json.loads(out)["events"] == 3
    assert [a.at for a in read_capture(path.read_text().splitlines()).arrivals] == [0, 1.25, 3]


# -- probe: an endless stream stops at the limits --------------------------------------------

#: An endless stream's chunk: 16 events of 1 KB.
ENDLESS_CHUNK = (b"data: " + b"x" * 1000 + b"\n\n") * 16


async def endless(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        while True:  # until the probe leaves (the response is cancelled then)
            yield ENDLESS_CHUNK
            await asyncio.sleep(0)

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def endless_url() -> Iterator[str]:
    with serve(Starlette(routes=[Route("/endless", endless)]), log_level="critical") as base:
        yield base + "/endless"


def test_probe_stops_an_endless_stream_at_max_bytes(
    endless_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-bytes ends the read: exactly that many bytes checked and saved, the probe
    leaving (client_disconnect, exit 1 at the default --fail-on-outcome), no stalled
    finding, and a note and the JSON's stopped_by naming the limit."""
    limit = 1_000_003  # not a multiple of any chunk: the last chunk is cut
    capture = tmp_path / "endless.jsonl"
    code, out, _ = run(
        capsys,
        "probe",
        endless_url,
        "--max-bytes",
        str(limit),
        "--format",
        "json",
        "--save",
        str(capture),
    )
    result = json.loads(out)
    assert code == 1
    assert result["outcome"] == "client_disconnect"
    assert result["bytes"] == limit
    assert result["stopped_by"] == f"--max-bytes {limit}"
    assert result["body_ended"] is False
    assert result["findings"] == []
    assert result["notes"] == [
        f"the probe stopped reading after --max-bytes ({limit} bytes): the body had not "
        "ended; the rest of the stream was not checked"
    ]
    saved = read_capture(capture.read_text().splitlines())
    assert sum(len(arrival.data) for arrival in saved.arrivals) == limit


def test_probe_says_in_the_table_which_limit_stopped_it(
    endless_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "probe", endless_url, "--max-bytes", "100000")
    assert code == 1
    assert "body ended      no (the probe stopped reading at --max-bytes 100000)" in out
    assert "outcome         client_disconnect" in out
    assert "bytes           100000\n" in out
    assert (
        "\nthe stream ended client_disconnect, an outcome --fail-on-outcome lists "
        "(error_event or unclosed or client_disconnect or connection_lost)\n"
        "note: the probe stopped reading after --max-bytes (100000 bytes)"
    ) in out


def test_probe_stops_an_endless_stream_at_max_time(
    endless_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--max-time ends the read of a stream that never pauses (--timeout never fires):
    the probe leaves, the note and stopped_by name the limit. The byte limit is set far
    out of reach, so the time is what stopped it. The budget clock moves a quarter second
    per reading: the head comes within a few readings, the body is cut after twenty, however
    slowly the machine runs (on real time, 0.2 s, a loaded machine had not read the head)."""
    monkeypatch.setattr(cli, "_monotonic", ticking(0.25))
    code, out, _ = run(
        capsys,
        "probe",
        endless_url,
        "--max-time",
        "5",
        "--max-bytes",
        str(10**12),
        "--format",
        "json",
    )
    result = json.loads(out)
    assert code == 1
    assert (result["outcome"], result["stopped_by"]) == ("client_disconnect", "--max-time 5")
    assert result["notes"] == [
        "the probe stopped reading after --max-time (5 s): the body had not ended; the "
        "rest of the stream was not checked"
    ]
    assert not any(f["rule"] == "stalled" for f in result["findings"])


def test_probe_memory_does_not_grow_with_what_it_reads(
    endless_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probing 8 MiB of an endless stream peaks where probing 1 MiB does (within 1 MiB),
    with --save: the chunks go to a temporary file, the text is not kept. Before, the body
    was held whole, twice, with every event and the recorded chunks."""
    peaks = []
    for limit in (1 * MIB, 8 * MIB):
        argv = ["probe", endless_url, "--max-bytes", str(limit), "--format", "json"]
        argv += ["--save", str(tmp_path / "s.jsonl")]
        peaks.append(peak_bytes(functools.partial(cli.main, argv)))
        assert json.loads(capsys.readouterr().out)["bytes"] == limit
    assert peaks[1] - peaks[0] < FLAT, peaks


@pytest.mark.parametrize(
    ("option", "value", "error"),
    [
        ("--max-time", "0", "expected a number of seconds above 0, got '0'"),
        ("--max-time", "-1", "expected a number of seconds above 0, got '-1'"),
        ("--max-time", "nan", "expected a number of seconds above 0, got 'nan'"),
        ("--max-time", "inf", "expected a number of seconds above 0, got 'inf'"),
        ("--max-time", "soon", "expected a number of seconds above 0, got 'soon'"),
        ("--timeout", "0", "expected a number of seconds above 0, got '0'"),
        ("--timeout", "-1", "expected a number of seconds above 0, got '-1'"),
        ("--timeout", "nan", "expected a number of seconds above 0, got 'nan'"),
        ("--max-bytes", "0", "expected a whole number of bytes above 0, got '0'"),
        ("--max-bytes", "-5", "expected a whole number of bytes above 0, got '-5'"),
        ("--max-bytes", "1.5", "expected a whole number of bytes above 0, got '1.5'"),
        ("--max-bytes", "64MiB", "expected a whole number of bytes above 0, got '64MiB'"),
    ],
)
def test_probe_limits_must_be_positive(
    option: str, value: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A limit that is not a positive number is a usage error (exit 2) that says why."""
    code, _, err = run(capsys, "probe", "http://127.0.0.1:9/", option, value)
    assert code == 2
    assert f"argument {option}: {error}" in err


def test_probe_defaults_stop_a_stream_by_themselves() -> None:
    """Without options a probe still stops: after 300 s or 64 MiB."""
    args = cli._parser().parse_args(["probe", "http://127.0.0.1/"])
    assert (args.max_time, args.max_bytes) == (300.0, 64 * MIB)
