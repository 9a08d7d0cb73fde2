"""Screenshots of the timeline page for docs/cli.md, drawn from tests/fixtures, and of the
conformance matrix for docs/conformance.md, from runs against the fake endpoints.

    python docs/screenshots.py            # writes docs/img/timeline-*.png, conformance-*.png

Each demo is a fixture body rendered as `streamguard check --html` renders it, opened in
headless Chromium (``chromium``, or ``--chromium PATH``) and saved as a PNG. The fixtures
are plain bodies without arrival times; the timed demos give each chunk an arrival time
``--spacing`` seconds after the last (and a pause where the demo says), so that the time
axis has something to show: those times are made up for the picture, the bytes are not.
The conformance matrices are ``streamguard conformance --html`` of two real runs against
``tests/conformance_server.py`` under uvicorn (needs the testing extra): a healthy endpoint,
and one with two bugs, a refused option and an expected failure.
Run it again when the page changes, and commit the PNGs (each well under 150 KB).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from streamguard.attribution import linked, summary_of
from streamguard.monitor import check_stream
from streamguard.sse import EventParser
from streamguard.timeline import Arrival, Stream, render_streams, timeline_of

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
OUT = ROOT / "docs" / "img"


def _events(body: bytes) -> list[bytes]:
    """The body cut after each event's frame (one chunk per event, as servers send)."""
    parser, cuts, start = EventParser(), [], 0
    for event in parser.feed(body):
        if event.offset > start:
            cuts.append(body[start : event.offset])
            start = event.offset
    cuts.append(body[start:])
    return [cut for cut in cuts if cut]


def _timed(body: bytes, spacing: float, pause_after: int | None = None) -> list[Arrival]:
    arrivals, at = [], 0.25
    for number, chunk in enumerate(_events(body)):
        arrivals.append(Arrival(round(at, 3), chunk))
        at += spacing + (1.2 if number == pause_after else 0.0)
    return arrivals


def _band(label: str, arrivals: list[Arrival], protocol: str, timed: bool) -> Stream:
    report = check_stream(b"".join(a.data for a in arrivals), protocol=protocol)
    marks = timeline_of(arrivals, report.protocol)
    return Stream(label, report, marks.marks, timed=timed)


def _gateway(downstream: list[Arrival], upstream: list[Arrival]) -> list[Stream]:
    """Both sides of a gateway, the downstream's findings attributed as ``check
    --upstream`` attributes them."""
    down = _band("downstream: missing_terminal.sse", downstream, "openai_chat", True)
    up = _band("upstream: missing_terminal_truncated_mid_block.sse", upstream, "anthropic", True)
    report = linked(down.report, [summary_of(up.report)])
    return [replace(down, report=report), up]


def _demos(spacing: float) -> dict[str, tuple[list[Stream], str]]:
    chat = (FIXTURES / "openai_chat/duplicate_terminal.sse").read_bytes()
    tools = (FIXTURES / "openai_chat/clean-parallel-tool-calls.sse").read_bytes()
    relayed = (FIXTURES / "openai_chat/missing_terminal.sse").read_bytes()
    cut = (FIXTURES / "anthropic/missing_terminal_truncated_mid_block.sse").read_bytes()
    return {
        # A timed stream with a pause and a finding on its second terminal.
        "timeline-chat": (
            [_band("duplicate_terminal.sse", _timed(chat, spacing, 1), "openai_chat", True)],
            "event-1",
        ),
        # A plain body: no arrival times, laid out by index.
        "timeline-by-index": (
            [_band("clean-parallel-tool-calls.sse", [Arrival(0.0, tools)], "openai_chat", False)],
            "event-2",
        ),
        # A gateway's two sides: an Anthropic upstream cut mid-block, relayed as an OpenAI
        # chat stream without [DONE]; the downstream finding is attributed to the upstream.
        "timeline-gateway": (
            _gateway(
                _timed(relayed, spacing),
                [Arrival(max(a.at - 0.1, 0.0), a.data) for a in _timed(cut, spacing)],
            ),
            "b1-event-2",
        ),
    }


#: The broken endpoint of the conformance screenshot: a finish on the last choice only
#: (n2), tool-call headers on every delta (the tool variants), logprobs refused; n2 is
#: listed as an expected failure.
_BROKEN = {"bugs": {"finish_last_index_only", "tool_header_repeated"}, "refuse": {"logprobs"}}
_EXPECTED = """\
[[expected_failure]]
variant = "n2"
reason = "finish on the last choice only, fixed upstream (sglang PR #8417)"
"""


def _conformance_pages(scratch: Path) -> dict[str, str]:
    """``streamguard conformance --html`` of a healthy and a broken fake endpoint."""
    sys.path.insert(0, str(ROOT))  # tests/ is no package on the path of a script in docs/
    from streamguard.cli import main as cli
    from streamguard.testing import serve
    from tests.conformance_server import FakeState, build_chat_app

    expected = scratch / "expected.toml"
    expected.write_text(_EXPECTED)
    pages = {}
    for name, state in (
        ("conformance-healthy", FakeState()),
        (
            "conformance-broken",
            FakeState(bugs=frozenset(_BROKEN["bugs"]), refuse=frozenset(_BROKEN["refuse"])),
        ),
    ):
        page = scratch / f"{name}.html"
        options = ["--html", str(page)]
        if name == "conformance-broken":
            options += ["--expected-failures", str(expected)]
        with serve(build_chat_app(state)) as url, contextlib.redirect_stdout(io.StringIO()):
            cli(["conformance", f"{url}/v1", "--model", "Qwen/Qwen2.5-0.5B-Instruct", *options])
            state.release.set()
        pages[name] = page.read_text(encoding="utf-8")
    return pages


def _shoot(chromium: str, page: Path, shot: Path, height: int, fragment: str) -> None:
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--hide-scrollbars",
            f"--user-data-dir={page.parent / 'profile'}",
            f"--screenshot={shot}",
            f"--window-size=1100,{height}",
            f"{page.as_uri()}#{fragment}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    print(f"{shot.relative_to(ROOT)}: {shot.stat().st_size} bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--spacing", type=float, default=0.08, help="seconds between chunks")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name, (bands, fragment) in _demos(args.spacing).items():
            page = Path(scratch) / f"{name}.html"
            page.write_text(render_streams(bands, title=name), encoding="utf-8")
            shot = args.out / f"{name}.png"
            _shoot(args.chromium, page, shot, 420 + 300 * len(bands), fragment)
        for name, html in _conformance_pages(Path(scratch)).items():
            page = Path(scratch) / f"{name}.html"
            page.write_text(html, encoding="utf-8")
            # 26 px a row, and room for the rule lists of the rows with findings.
            height = 215 + 26 * html.count("data-variant=") + 50 * html.count("<details>")
            _shoot(args.chromium, page, args.out / f"{name}.png", height, "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
