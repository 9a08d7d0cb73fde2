"""``streamguard captures``: list (with a summary by route, rule and day), show and prune the
captures the middleware wrote; and ``streamguard check`` on a capture judges it as it was
judged live (its protocol and request from the capture's header)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamguard import StreamGuardMiddleware
from streamguard.captures import CAPTURE_SUFFIX, DirectoryStore
from streamguard.cli import main
from streamguard.report import StreamReport

from .asgi_driver import ScriptedApp, http_scope, run
from .helpers import FakeClock
from .sse_fixtures import FIXTURES, load
from .test_captures import CHAT, _stream_steps

BROKEN = load(FIXTURES / "openai_chat" / "inconsistent_id.sse")
ANTHROPIC = load(FIXTURES / "anthropic" / "block_not_stopped.sse")


def _captured(directory: Path, path: str, protocol: str, body: bytes) -> StreamReport:
    reports: list[StreamReport] = []
    app = StreamGuardMiddleware(
        ScriptedApp(_stream_steps(body)),
        routes={path: protocol},
        capture={"severity": "warning", "outcomes": []},
        capture_store=DirectoryStore(directory, 1 << 20),
        metrics=False,
        on_report=reports.append,
        clock=FakeClock(),
        logs={"enabled": False},
    )
    run(app, http_scope("POST", path))
    app.captures.writer.flush()  # type: ignore[union-attr]
    return reports[0]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    first = _captured(tmp_path, CHAT, "openai_chat", BROKEN.body)
    second = _captured(tmp_path, "/v1/messages", "anthropic", ANTHROPIC.body)
    day = 86400.0
    # The second is a day newer than the first.
    os.utime(tmp_path / f"{first.capture_id}{CAPTURE_SUFFIX}", (10 * day, 10 * day))
    os.utime(tmp_path / f"{second.capture_id}{CAPTURE_SUFFIX}", (11 * day, 11 * day))
    return tmp_path


def test_list_shows_each_capture_and_a_summary(
    directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "captures", "list", str(directory))
    assert code == 0
    assert out.index("/v1/messages") < out.index(CHAT)  # newest first
    assert "By route:" in out
    assert "By rule:" in out
    assert "inconsistent_id" in out
    assert "By day:" in out
    assert "1970-01-11" in out
    assert "1970-01-12" in out
    assert "2 capture(s)" in out


def test_list_as_json(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "captures", "list", str(directory), "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [row["route"] for row in rows] == ["/v1/messages", CHAT]
    assert rows[1]["rules"] == ["inconsistent_id"]
    assert {row["redacted"] for row in rows} == {"structure"}


def test_show_checks_the_capture_again_and_draws_its_timeline(
    directory: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (info,) = [p for p in directory.glob(f"*{CAPTURE_SUFFIX}") if b"openai_chat" in p.read_bytes()]
    capture_id = info.name.removesuffix(CAPTURE_SUFFIX)
    page = tmp_path / "page.html"
    code, out, _ = _run(
        capsys, "captures", "show", capture_id, "--dir", str(directory), "--html", str(page)
    )
    assert code == 0
    assert f"capture {capture_id}: route {CHAT}, protocol openai_chat" in out
    assert "(the same)" in out
    assert "inconsistent_id" in out
    assert page.read_text().startswith("<!")


def test_check_reads_the_capture_as_it_was_judged(
    directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in directory.glob(f"*{CAPTURE_SUFFIX}"):
        header = json.loads(path.read_bytes().split(b"\n", 1)[0])
        code, out, _ = _run(capsys, "check", str(path), "--format", "json", "--fail-on", "info")
        checked = json.loads(out)
        assert checked["protocol"] == header["protocol"]
        assert [f["rule"] for f in checked["findings"]] == [
            f[0] for f in header["report"]["findings"]
        ]
        assert code == 1


def test_prune_keeps_the_newest(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "captures", "prune", str(directory), "--keep", "1", "--dry-run")
    assert code == 0
    assert "would delete" in out
    assert len(list(directory.glob(f"*{CAPTURE_SUFFIX}"))) == 2
    code, out, _ = _run(capsys, "captures", "prune", str(directory), "--keep", "1")
    (left,) = directory.glob(f"*{CAPTURE_SUFFIX}")
    assert b"anthropic" in left.read_bytes()
    code, out, _ = _run(capsys, "captures", "prune", str(directory), "--older-than", "1")
    assert list(directory.glob(f"*{CAPTURE_SUFFIX}")) == []


def test_prune_needs_a_bound(directory: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "captures", "prune", str(directory))
    assert code == 2
    assert "--older-than or --keep" in err
