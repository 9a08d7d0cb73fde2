"""probe --save / --html and check --html: captures with arrival times, drawn as a page."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from streamguard.cli import main
from streamguard.testing import serve
from streamguard.timeline import CAPTURE_FORMAT, Arrival, read_capture, write_capture
from tests.chromium import dump_dom, parse_dom

CHUNK = 'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":%s}]}\n\n'  # noqa: E501


async def _paused(request: Request) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        yield (CHUNK % "null").encode()
        await asyncio.sleep(0.6)  # the gap the timeline must show
        yield (CHUNK % '"stop"').encode()
        yield b"data: [DONE]\n\n"
        yield b"data: [DONE]\n\n"  # a second terminal: duplicate_terminal

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/chat/completions", _paused, methods=["GET", "POST"])])
    with serve(app, log_level="critical") as url:
        yield url + "/v1/chat/completions"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_probe_saves_a_capture_and_draws_the_page(
    live: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The capture keeps every chunk with its time; the page shows the gap and the finding."""
    capture, page = tmp_path / "stream.jsonl", tmp_path / "stream.html"
    code, out, err = _run(capsys, "probe", live, "--save", str(capture), "--html", str(page))
    assert (code, err) == (1, "")
    assert "duplicate_terminal" in out
    saved = read_capture(capture.read_text().splitlines())
    assert saved.header["format"] == CAPTURE_FORMAT
    assert saved.header["protocol"] == "openai_chat"
    assert b"".join(a.data for a in saved.arrivals).count(b"[DONE]") == 2
    times = [a.at for a in saved.arrivals]
    assert times == sorted(times)
    assert max(b - a for a, b in itertools.pairwise(times)) >= 0.5
    html = page.read_text()
    assert len(re.findall(r'<circle id="event-\d+"', html)) == 4
    assert re.search(r"(\d{3} ms|\d\.\d\d s) gap", html)
    assert "duplicate_terminal" in html


def test_check_replays_a_capture_as_it_arrived(
    live: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check reads a probe --save capture: the same findings, and --html keeps the times."""
    capture, page = tmp_path / "stream.jsonl", tmp_path / "check.html"
    _run(capsys, "probe", live, "--save", str(capture))
    code, out, _ = _run(capsys, "check", "--format", "json", str(capture), "--html", str(page))
    result = json.loads(out)
    assert code == 1
    assert [f["rule"] for f in result["findings"]] == ["duplicate_terminal"]
    assert result["protocol"] == "openai_chat"
    assert re.search(r"(\d{3} ms|\d\.\d\d s) gap", page.read_text())


def test_check_html_on_a_plain_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain captured body has no arrival times: its events are laid out by index, one
    step apart and in order (not piled at 0), the page says so, the findings still shown."""
    body = tmp_path / "body.sse"
    body.write_bytes((CHUNK % '"stop"').encode() + b"data: [DONE]\n\ndata: [DONE]\n\n")
    page = tmp_path / "body.html"
    code, _, _ = _run(capsys, "check", str(body), "--html", str(page), "--protocol", "openai_chat")
    html = page.read_text()
    assert code == 1
    xs = [float(x) for x in re.findall(r'<circle id="event-\d+"[^>]* cx="([\d.]+)"', html)]
    assert len(xs) == 3
    assert sorted(xs) == xs
    assert len(set(xs)) == 3
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)
    assert 'id="layout-note-0"' in html
    assert "laid out by index" in html
    assert "duplicate_terminal" in html


def test_check_html_draws_one_stream(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--html with two files is a usage error that says why."""
    for name in ("a", "b"):
        (tmp_path / name).write_bytes(b"data: x\n\n")
    code, _, err = _run(
        capsys, "check", str(tmp_path / "a"), str(tmp_path / "b"), "--html", "x.html"
    )
    assert code == 2
    assert "--html draws one stream" in err


def test_an_unwritable_page_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A page that cannot be written is reported, not a traceback."""
    body = tmp_path / "body.sse"
    body.write_bytes(b"data: x\n\n")
    target = tmp_path / "missing" / "page.html"
    code, _, err = _run(capsys, "check", str(body), "--html", str(target))
    assert code == 2
    assert f"--html {target}" in err


def test_a_corrupt_capture_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that says it is a capture but does not read as one is exit 2, not a body."""
    capture = tmp_path / "broken.jsonl"
    capture.write_text(f'{{"format": "{CAPTURE_FORMAT}"}}\n{{"at": 0.1, "b64": "!!"}}\n')
    code, _, err = _run(capsys, "check", str(capture))
    assert code == 2
    assert "not a readable capture: line 2" in err


def test_saved_urls_keep_no_key(
    live: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The capture and the page name the URL without its query or credentials."""
    capture, page = tmp_path / "s.jsonl", tmp_path / "s.html"
    secret = live.replace("http://", "http://user:pw@") + "?key=SECRET-API-KEY"
    _run(capsys, "probe", secret, "--save", str(capture), "--html", str(page))
    saved = capture.read_text() + page.read_text()
    assert "SECRET-API-KEY" not in saved
    assert "user:pw" not in saved
    assert read_capture(capture.read_text().splitlines()).header["url"] == live


def _capture(path: Path, protocol: str, chunks: list[tuple[float, bytes]]) -> Path:
    with path.open("w") as out:
        write_capture(out, {"protocol": protocol}, [Arrival(at, data) for at, data in chunks])
    return path


ANTHROPIC_CUT = [
    (
        0.05,
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":'
        b'"message","role":"assistant","content":[],"model":"c","stop_reason":null,'
        b'"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n',
    ),
    (
        0.45,
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
    ),
]


def test_check_upstream_draws_both_sides_on_one_axis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--upstream: the upstream capture is checked with its own protocol and drawn as a
    second band on the same time axis; the output and exit code stay the downstream's."""
    down = _capture(
        tmp_path / "down.jsonl",
        "openai_chat",
        [
            (0.1, (CHUNK % "null").encode()),
            (0.5, (CHUNK % '"stop"').encode()),
            (0.6, b"data: [DONE]\n\n"),
        ],
    )
    up = _capture(tmp_path / "up.jsonl", "anthropic", ANTHROPIC_CUT)
    page = tmp_path / "gateway.html"
    code, out, err = _run(
        capsys,
        "check",
        str(down),
        "--html",
        str(page),
        "--upstream",
        str(up),
        "--upstream-protocol",
        "anthropic",
    )
    assert (code, err) == (0, "")
    assert "missing_terminal" not in out  # the upstream's findings are on the page only
    dom = parse_dom(dump_dom(page.read_text(), tmp_path, fragment="b1-event-1"))
    labels = [n.text for n in dom.find_all("text", "band-label")]
    assert labels == [
        f"downstream: {down} · openai_chat · completed",
        f"upstream: {up} · anthropic · unclosed",
    ]
    bands = dom.find_all("g", "band")
    ticks = [[(n.text, n.attrs["x"]) for n in b.find_all("text", "tick-label")] for b in bands]
    assert ticks[0] == ticks[1]
    assert len(ticks[0]) >= 4
    assert dom.by_id("layout-note-0") is None
    assert dom.by_id("layout-note-1") is None
    mark = dom.by_id("b1-event-1")
    assert mark is not None
    assert "selected" in mark.classes
    assert dom.by_id("selected").text.startswith("upstream: ")  # type: ignore[union-attr]
    table = dom.by_id("findings-1")
    assert table is not None
    rules = [row.find_all("code")[0].text for row in table.find_all("tr", "finding")]
    assert "missing_terminal" in rules


def test_check_upstream_without_times_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upstream plain body has no arrival times: its band is laid out by index and the
    page says so for that side alone."""
    down = _capture(
        tmp_path / "down.jsonl",
        "openai_chat",
        [(0.1, (CHUNK % '"stop"').encode()), (0.3, b"data: [DONE]\n\n")],
    )
    up = tmp_path / "up.sse"
    up.write_bytes(b"".join(data for _, data in ANTHROPIC_CUT))
    page = tmp_path / "gateway.html"
    code, _, _ = _run(capsys, "check", str(down), "--html", str(page), "--upstream", str(up))
    html = page.read_text()
    assert code == 0
    assert 'id="layout-note-0"' not in html
    assert re.search(r'id="layout-note-1">upstream: [^<]*no arrival times', html)


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ([], "streamguard check: error: --upstream "),
        (["--html", "x.html"], "streamguard check: error: --upstream "),
    ],
)
def test_check_upstream_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    """An upstream file that cannot be read is exit 2, with --html or without (--upstream
    attributes the findings in the output too: tests/test_cli_attribution.py)."""
    body = tmp_path / "body.sse"
    body.write_bytes(b"data: x\n\n")
    missing = tmp_path / "missing.sse"
    code, _, err = _run(capsys, "check", str(body), "--upstream", str(missing), *extra)
    assert code == 2
    assert error in err
    assert not (tmp_path / "x.html").exists()


def test_check_says_where_it_wrote_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the table on stdout; on stderr when stdout holds JSON lines."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "body.sse").write_bytes((CHUNK % '"stop"').encode() + b"data: [DONE]\n\n")
    written = f"streamguard check: timeline page written to {tmp_path / 'page.html'}"
    code, out, err = _run(capsys, "check", "body.sse", "--html", "page.html")
    assert (code, err) == (0, "")
    assert out.rstrip().endswith(written)
    code, out, err = _run(capsys, "check", "--format", "json", "body.sse", "--html", "page.html")
    assert json.loads(out)["outcome"] == "completed"
    assert err.strip() == written


def test_probe_says_where_it_wrote_the_page(
    live: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "probe.html"
    _, out, err = _run(capsys, "probe", live, "--html", str(page))
    assert out.rstrip().endswith(f"streamguard probe: timeline page written to {page}")
    assert err == ""
    _, out, err = _run(capsys, "probe", live, "--format", "json", "--html", str(page))
    json.loads(out)
    assert err.strip() == f"streamguard probe: timeline page written to {page}"
