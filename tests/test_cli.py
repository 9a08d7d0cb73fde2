"""The streamguard command line: check, probe, rules, demo; output and exit codes."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import RULES, cli
from streamguard._demo_app import build_app
from streamguard.cli import EXIT_BROKEN_PIPE, PREVIEW_CHARS, _preview, main, rules_markdown
from streamguard.testing import serve
from tests.stream_apps import FIXTURES, build_fixture_app, fixture_bytes

ROOT = Path(__file__).resolve().parent.parent
ROLE = fixture_bytes("openai_chat", "role_repeated")
CUT = b"data: one\n\ndata: tw"
DONE = b"data: [DONE]\n\n"
#: Runs the command line in a fresh interpreter: ``[*_CLI, "rules"]``.
_CLI = [sys.executable, "-c", "import sys; from streamguard.cli import main; sys.exit(main())"]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with done.sse (clean), cut.sse (error) and role.sse (warning)."""
    (tmp_path / "done.sse").write_bytes(DONE)
    (tmp_path / "cut.sse").write_bytes(CUT)
    (tmp_path / "role.sse").write_bytes(ROLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- check --------------------------------------------------------------------------------


def test_check_clean_file_exits_0(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clean capture prints its row and a summary and exits 0."""
    assert run(capsys, "check", "done.sse") == (
        0,
        "file      protocol     outcome    events  bytes  findings\n"
        "--------  -----------  ---------  ------  -----  --------\n"
        "done.sse  openai_chat  completed  1       14     -\n"
        "\n"
        "1 file(s) checked: 0 with findings at error or above\n",
        "",
    )


def test_check_table_lists_findings_with_frames(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Findings are listed per file with rule, severity, place, message and frame; exit 1."""
    code, out, err = run(capsys, "check", "done.sse", "cut.sse", "role.sse")
    assert code == 1
    assert err == ""
    assert out == (
        "file      protocol     outcome    events  bytes  findings\n"
        "--------  -----------  ---------  ------  -----  ------------------\n"
        "done.sse  openai_chat  completed  1       14     -\n"
        "cut.sse   sse          completed  1       19     unterminated_frame\n"
        "role.sse  openai_chat  completed  4       1080   role_repeated\n"
        "\n"
        "Findings:\n"
        "cut.sse\n"
        "  - unterminated_frame [error] at event 1, byte 11: 8 byte(s) after the last blank "
        "line at the end of the body (starting at byte 11); clients discard the unfinished "
        "event\n"
        "      frame: data: tw\n"
        "role.sse\n"
        "  - role_repeated [warning] at event 1, byte 442: event 1: choice 0 sends delta.role "
        "again (first at event 0)\n"
        '      frame: data: {"id":"chatcmpl-CBx3mK9qLw7ZrT2yPdVnE5uHa1sG","object":"c'
        'hat.completion.chunk","created":1755012345,"model":"gpt-5-mini-2025-08-07","'
        'service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"del'
        'ta":{"role":"assistant","…\n'
        "\n"
        "3 file(s) checked: 1 with findings at error or above\n"
    )


@pytest.mark.parametrize(
    ("fail_on", "code"), [("error", 0), ("warning", 1), ("info", 1)]
)  # fmt: skip
def test_check_fail_on_sets_the_threshold(
    files: Path, capsys: pytest.CaptureFixture[str], fail_on: str, code: int
) -> None:
    """A warning finding exits 1 only with --fail-on warning or info."""
    assert run(capsys, "check", "--fail-on", fail_on, "role.sse")[0] == code


def test_check_fail_on_info_counts_info_findings(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An info finding (unknown_field) fails only with --fail-on info."""
    (files / "field.sse").write_bytes(b"foo: bar\ndata: x\n\n")
    assert run(capsys, "check", "field.sse")[0] == 0
    assert run(capsys, "check", "--fail-on", "warning", "field.sse")[0] == 0
    assert run(capsys, "check", "--fail-on", "info", "field.sse")[0] == 1


def test_check_json_prints_one_object_per_file(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--format json prints one JSON object per line, one per file, in order."""
    code, out, err = run(capsys, "check", "--format", "json", "done.sse", "cut.sse")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == {
        "file": "done.sse",
        "protocol": "openai_chat",
        "protocol_source": "event",
        "outcome": "completed",
        "events": 1,
        "bytes": 14,
        "inspected": True,
        "malformed": False,
        "failed": False,
        "findings": [],
        "notes": [],
    }
    assert json.loads(lines[1])["findings"] == [
        {
            "rule": "unterminated_frame",
            "severity": "error",
            "message": "8 byte(s) after the last blank line at the end of the body (starting "
            "at byte 11); clients discard the unfinished event",
            "event_index": 1,
            "byte_offset": 11,
            "frame": "data: tw",
        }
    ]
    assert json.loads(lines[1])["failed"] is True


def test_check_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-` reads the capture from stdin, labelled <stdin>."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CUT)))
    code, out, _ = run(capsys, "check", "--format", "json", "-")
    assert code == 1
    assert json.loads(out)["file"] == "<stdin>"
    assert json.loads(out)["bytes"] == 19


def test_check_protocol_forces_the_checker(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--protocol checks the capture as that protocol instead of detecting it."""
    code, out, _ = run(capsys, "check", "--format", "json", "--protocol", "anthropic", "done.sse")
    assert code == 1
    result = json.loads(out)
    assert (result["protocol"], result["protocol_source"]) == ("anthropic", "configured")
    assert [f["rule"] for f in result["findings"]] == [
        "schema_mismatch",
        "missing_terminal",
    ]


def test_check_request_enables_request_aware_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """--request passes the JSON request: usage_missing fires only with it."""
    capture = str(FIXTURES / "openai_chat" / "usage_missing.sse")
    request = str(FIXTURES / "openai_chat" / "usage_missing.request.json")
    assert run(capsys, "check", capture)[0] == 0
    code, out, _ = run(capsys, "check", "--format", "json", "--request", request, capture)
    assert code == 1
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["usage_missing"]


def test_check_missing_file_exits_2_naming_it(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file is reported on stderr by name; the others are still checked; exit 2."""
    code, out, err = run(capsys, "check", "nope.sse", "done.sse")
    assert code == 2
    assert err == "streamguard check: error: nope.sse: no such file\n"
    assert "done.sse  openai_chat  completed" in out
    assert out.endswith(
        "1 file(s) checked: 0 with findings at error or above; 1 could not be read\n"
    )


def test_check_directory_exits_2(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory is an input error that says so."""
    (files / "captures").mkdir()
    code, _, err = run(capsys, "check", "captures")
    assert code == 2
    assert err == "streamguard check: error: captures: is a directory, not a captured stream\n"


def test_check_unreadable_file_exits_2(
    files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreadable file is an input error that says permission was denied."""

    def denied(name: str, *args: object) -> None:
        raise PermissionError(13, "Permission denied", name)

    # The tests may run as root, who reads any file: the refusal is made up here.
    monkeypatch.setattr(cli, "open", denied, raising=False)
    code, _, err = run(capsys, "check", "done.sse")
    assert code == 2
    assert err == "streamguard check: error: done.sse: permission denied\n"


def test_check_input_error_in_json_is_an_object_too(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --format json an unreadable file still gets its line, with the error."""
    code, out, _ = run(capsys, "check", "--format", "json", "nope.sse")
    assert code == 2
    assert json.loads(out) == {"file": "nope.sse", "error": "nope.sse: no such file"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{nope", "--request req.json: invalid JSON: Expecting property name enclosed in "
         "double quotes: line 1 column 2 (char 1)"),
        (b"[1, 2]", "--request req.json: expected a JSON object, got list"),
        (None, "--request req.json: no such file"),
    ],
)  # fmt: skip
def test_check_bad_request_file_exits_2(
    files: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, message: str
) -> None:
    """A request file that is missing, not JSON or not an object is a usage error."""
    if content is not None:
        (files / "req.json").write_bytes(content)
    code, out, err = run(capsys, "check", "--request", "req.json", "done.sse")
    assert (code, out) == (2, "")
    assert err == f"streamguard check: error: {message}\n"


def test_check_takes_an_mcp_batch_as_the_request(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON-RPC batch request file (MCP 2025-03-26) is read like the POST's body."""
    fixture = FIXTURES / "mcp" / "duplicate_response"
    (files / "req.json").write_bytes(fixture.with_suffix(".request.json").read_bytes())
    (files / "mcp.sse").write_bytes(fixture.with_suffix(".sse").read_bytes())
    argv = ["check", "--format", "json", "--protocol", "mcp", "--request", "req.json", "mcp.sse"]
    code, out, err = run(capsys, *argv)
    assert (code, err) == (1, "")
    findings = json.loads(out)["findings"]
    assert [(f["rule"], f["event_index"]) for f in findings] == [
        ("duplicate_response", 1),
        ("duplicate_response", 2),
    ]


def test_check_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No file, or an unknown protocol, is an argparse usage error: exit 2."""
    code, _, err = run(capsys, "check")
    assert code == 2
    assert err.endswith("streamguard check: error: the following arguments are required: FILE\n")
    code, _, err = run(capsys, "check", "--protocol", "grpc", "x.sse")
    assert code == 2
    assert "argument --protocol: invalid choice: 'grpc'" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_check_shows_progress_on_a_terminal(
    files: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal, stderr shows a self-erasing 'checking i/n: file' line."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["check", "done.sse", "role.sse"]) == 0
    assert terminal.getvalue() == (
        "\r\x1b[Kchecking 0/2: done.sse"
        "\r\x1b[Kchecking 1/2: role.sse"
        "\r\x1b[Kchecking 2/2: done"
        "\r\x1b[K"
    )


def test_check_shows_no_progress_when_piped(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When stderr is not a terminal, nothing but errors goes to it."""
    code, _, err = run(capsys, "check", "done.sse", "role.sse")
    assert (code, err) == (0, "")


# -- rules --------------------------------------------------------------------------------


def test_rules_table_lists_every_rule(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rules` prints a header and one row per catalog rule, in catalog order."""
    monkeypatch.delenv("COLUMNS", raising=False)  # not a terminal: whole rows, as in a pipe
    code, out, _ = run(capsys, "rules")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["rule", "protocols", "severity", "summary"]
    assert [line.split()[0] for line in lines[2:]] == list(RULES)
    assert lines[2].split(None, 3) == [
        "invalid_utf8",
        "all",
        "error",
        "The body is not valid UTF-8; clients see U+FFFD or fail.",
    ]


def _rows(out: str) -> dict[str, str]:
    """Rule name -> summary, from a table whose summaries may wrap onto continuation lines."""
    rows: dict[str, str] = {}
    lines = out.splitlines()
    start = lines[1].rindex(" -") + 1  # where the summary column starts
    for line in lines[2:]:
        if line.startswith(" "):
            last = next(reversed(rows))
            rows[last] += " " + line[start:]
        else:
            rows[line.split()[0]] = line[start:]
    return rows


def test_rules_table_wraps_to_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With COLUMNS set, summaries wrap so that every line fits, and no word is lost."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run(capsys, "rules")
    assert code == 0
    assert max(map(len, out.splitlines())) <= 100
    assert len(out.splitlines()) > len(RULES) + 2
    assert _rows(out) == {rule.name: rule.summary for rule in RULES.values()}


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_rules_table_wraps_to_the_terminal() -> None:
    """On a real terminal (a pty 90 columns wide, no COLUMNS), the table fits its width."""
    import fcntl
    import pty
    import struct
    import termios

    main_fd, terminal_fd = pty.openpty()
    fcntl.ioctl(terminal_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 90, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT)
    child = subprocess.Popen([*_CLI, "rules"], stdout=terminal_fd, cwd=ROOT, env=env)
    os.close(terminal_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    assert child.wait(timeout=60) == 0
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    assert max(map(len, out.splitlines())) <= 90
    assert _rows(out) == {rule.name: rule.summary for rule in RULES.values()}


def test_rules_markdown_has_a_section_per_rule_at_its_anchor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`rules --format markdown` writes each rule's section under the anchor Rule.anchor names."""
    code, out, _ = run(capsys, "rules", "--format", "markdown")
    assert code == 0
    assert out == rules_markdown()
    assert out.startswith("# Rules\n")
    for rule in RULES.values():
        fragment = rule.anchor.partition("#")[2]
        assert f'<a id="{fragment}"></a>\n\n## `{rule.name}`\n' in out
        assert f"| [`{rule.name}`](#{fragment}) |" in out
    assert (
        '<a id="role-repeated"></a>\n\n## `role_repeated`\n\n'
        "**Severity:** warning · **Protocols:** openai_chat\n\n"
        "delta.role was sent again for a choice; the SDK helper concatenates it.\n"
    ) in out


# -- probe --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    with serve(build_fixture_app(), log_level="critical") as url:
        yield url


def test_probe_clean_stream_exits_0_with_timings(
    live: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """probe prints status, protocol, counts and timings of a clean stream and exits 0."""
    code, out, err = run(capsys, "probe", live + "/fixture/openai_chat/clean-text-include-usage")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[2].split(None, 1) == [
        "url",
        live + "/fixture/openai_chat/clean-text-include-usage",
    ]
    assert lines[3:11] == [
        "status          200 text/event-stream; charset=utf-8",
        "protocol        openai_chat (event)",
        "outcome         completed",
        "events          13 (9 with text)",
        "bytes           4103",
        "finish reasons  stop",
        "terminal        yes",
        "body ended      yes",
    ]
    assert [line.split()[0:2] for line in lines[11:14]] == [
        ["first", "byte"],
        ["first", "event"],
        ["duration", lines[13].split()[1]],
    ]
    assert all(line.endswith(" ms") for line in lines[11:14])
    assert len(lines) == 14


def test_probe_sends_data_as_the_request_for_request_aware_checks(
    live: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--data is POSTed and, being JSON, enables usage_missing; @file reads the body."""
    url = live + "/fixture/openai_chat/usage_missing"
    body = '{"stream_options": {"include_usage": true}}'
    code, out, _ = run(capsys, "probe", "--format", "json", url, "--data", body)
    assert code == 1
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["usage_missing"]
    (tmp_path / "body.json").write_text(body)
    code, out, _ = run(capsys, "probe", url, "-d", f"@{tmp_path / 'body.json'}")
    assert code == 1
    assert "  - usage_missing [error] at event 4, byte " in out
    assert run(capsys, "probe", url)[0] == 0


def test_probe_json_output(live: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--format json prints one object with the status, timings and report."""
    code, out, _ = run(
        capsys, "probe", "--format", "json", live + "/fixture/anthropic/ok_text_end_turn"
    )
    assert code == 0
    result = json.loads(out)
    assert {key: result[key] for key in ("status", "protocol", "outcome", "events")} == {
        "status": 200,
        "protocol": "anthropic",
        "outcome": "completed",
        "events": 10,
    }
    assert (result["deltas"], result["finish_reasons"], result["terminal"]) == (
        4,
        ["end_turn"],
        True,
    )
    assert 0 < result["time_to_first_byte_s"] <= result["time_to_first_event_s"]
    assert result["time_to_first_event_s"] <= result["duration_s"]


def test_probe_headers_are_sent(live: str, capsys: pytest.CaptureFixture[str]) -> None:
    """-H adds request headers; a malformed one is a usage error."""
    code, _, _ = run(
        capsys, "probe", live + "/fixture/anthropic/ok_text_end_turn", "-H", "X-Api-Key: k"
    )
    assert code == 0
    code, _, err = run(capsys, "probe", live, "-H", "no colon")
    assert code == 2
    assert "argument -H/--header: expected 'Name: value', got 'no colon'" in err


def test_probe_cut_connection_exits_1(live: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A body cut off by the server is reported as response_not_finished; exit 1."""
    code, out, _ = run(capsys, "probe", live + "/cut")
    assert code == 1
    assert "body ended      no (RemoteProtocolError: " in out
    assert "  - response_not_finished [error] at event 1, byte 15: the connection closed " in out


def test_probe_non_event_stream_exits_1(live: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A response that is not an event stream exits 1 and says so once, first, with its body."""
    code, out, _ = run(capsys, "probe", live + "/json-error")
    assert code == 1
    assert out.startswith(
        "not an event stream: HTTP 500, content-type 'application/json'; the body starts: "
        '{"error":{"message":"overloaded"}}\n'
    )
    assert out.count("not an event stream") == 1
    # No stream rows: an unchecked body has no protocol, outcome or events to report.
    assert not [line for line in out.splitlines() if line.startswith(("protocol", "outcome"))]


def test_probe_the_example_app(capsys: pytest.CaptureFixture[str]) -> None:
    """Probing the demo app: /healthy exits 0, /never-finished exits 1."""
    with serve(build_app(), log_level="critical") as url:
        assert run(capsys, "probe", url + "/healthy")[0] == 0
        code, out, _ = run(capsys, "probe", url + "/never-finished")
    assert code == 1
    assert "response_not_finished [error]" in out


def test_probe_judges_the_timing_of_a_live_stream(capsys: pytest.CaptureFixture[str]) -> None:
    """A stream flushed in one piece after a long silence is reported as buffered_flush."""
    with serve(build_app(), log_level="critical") as url:
        code, out, _ = run(capsys, "probe", url + "/openai/buffered", "--protocol", "openai_chat")
    assert code == 0  # a warning, below the default --fail-on error
    assert "buffered_flush [warning]" in out


def _compressing_app() -> Starlette:
    """A stream gzipped when the client accepts gzip (nginx `gzip on`), and an error body
    gzipped whatever the client asked."""
    stream = b"data: one\n\ndata: two\n\n"

    async def events(request: Request) -> Response:
        if "gzip" in request.headers.get("accept-encoding", ""):
            body, headers = gzip.compress(stream), {"content-encoding": "gzip"}
        else:
            body, headers = stream, {}
        return StreamingResponse(iter([body]), media_type="text/event-stream", headers=headers)

    async def error(request: Request) -> Response:
        body = gzip.compress(b'{"error": {"message": "rate limited"}}')
        return Response(body, 429, {"content-encoding": "gzip"}, "application/json")

    return Starlette(routes=[Route("/events", events), Route("/error", error)])


def test_probe_asks_for_an_uncompressed_stream(capsys: pytest.CaptureFixture[str]) -> None:
    """probe sends Accept-Encoding: identity, so the stream can be checked; -H asks for gzip."""
    with serve(_compressing_app(), log_level="critical") as url:
        code, out, _ = run(capsys, "probe", "--format", "json", url + "/events")
        assert (code, json.loads(out)["events"], json.loads(out)["findings"]) == (0, 2, [])
        code, out, _ = run(
            capsys, "probe", "--format", "json", url + "/events", "-H", "Accept-Encoding: gzip"
        )
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["compressed_stream"]
    assert json.loads(out)["inspected"] is False


def test_probe_shows_a_compressed_error_body_decompressed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An error body the server gzipped anyway is previewed as text, not as gzip bytes."""
    with serve(_compressing_app(), log_level="critical") as url:
        code, out, _ = run(capsys, "probe", url + "/error")
    assert code == 1
    assert out.startswith(
        "not an event stream: HTTP 429, content-type 'application/json'; the body starts: "
        '{"error": {"message": "rate limited"}}\n'
    )


def test_body_preview_names_codings_it_does_not_decode() -> None:
    """br, zstd and undecodable bodies are named with their size, never shown as bytes."""
    assert _preview(b"\x8b\x00\x01", "br") == "(3 bytes, compressed: Content-Encoding 'br')"
    assert _preview(b"not gzip", "gzip") == "(8 bytes, compressed: Content-Encoding 'gzip')"
    assert _preview(zlib.compress(b"x" * 10_000), "deflate") == "x" * PREVIEW_CHARS + "…"
    assert _preview(b"", None) == "(empty)"


def test_probe_fails_on_a_stream_that_ended_with_an_in_band_error(
    live: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed stream ending error_event exits 1 by default (a nightly check goes red)."""
    url = live + "/fixture/anthropic/ok_error_overloaded_mid_block"
    code, out, _ = run(capsys, "probe", url)
    assert code == 1
    assert "outcome         error_event\n" in out
    assert "Findings:" not in out
    assert out.endswith(
        "\nthe stream ended error_event, an outcome --fail-on-outcome lists "
        "(error_event or unclosed or client_disconnect or connection_lost)\n"
    )
    code, out, _ = run(capsys, "probe", "--format", "json", url)
    assert (code, json.loads(out)["failed"], json.loads(out)["findings"]) == (1, True, [])
    assert run(capsys, "probe", url, "--fail-on-outcome", "none")[0] == 0
    assert run(capsys, "probe", url, "--fail-on-outcome", "unclosed")[0] == 0


def test_check_fails_on_an_outcome_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    """check judges structure by default; --fail-on-outcome error_event makes the end count."""
    capture = str(FIXTURES / "gemini" / "ok_error_unavailable.sse")
    code, out, _ = run(capsys, "check", capture)
    assert code == 0
    assert out.endswith("\n1 file(s) checked: 0 with findings at error or above\n")
    code, out, _ = run(capsys, "check", "--fail-on-outcome", "unclosed,error_event", capture)
    assert code == 1
    assert out.endswith(
        "\n1 file(s) checked: 0 with findings at error or above; "
        "1 more ended error_event or unclosed\n"
    )
    code, out, _ = run(
        capsys, "check", "--format", "json", "--fail-on-outcome", "error_event", capture
    )
    assert (code, json.loads(out)["outcome"], json.loads(out)["failed"]) == (1, "error_event", True)


def test_fail_on_outcome_rejects_an_unknown_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt outcome is a usage error that lists the valid ones; exit 2."""
    code, _, err = run(capsys, "check", "--fail-on-outcome", "error,unclosed", "x.sse")
    assert code == 2
    assert err.endswith(
        "argument --fail-on-outcome: unknown outcome 'error': expected none or outcomes from "
        "completed, error_event, unclosed, client_disconnect, app_error, cancelled, "
        "connection_lost, separated by commas\n"
    )


def test_probe_unreachable_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A connection failure is an input error naming the URL; exit 2."""
    with serve(build_fixture_app(), log_level="critical") as url:
        pass  # the port is free again once the server stopped
    code, out, err = run(capsys, "probe", url + "/x", "--timeout", "2")
    assert (code, out) == (2, "")
    assert err.startswith(f"streamguard probe: error: {url}/x: request failed: ConnectError: ")


def test_probe_missing_data_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """--data @file with a missing file is an input error naming it."""
    code, _, err = run(capsys, "probe", "http://127.0.0.1:9/", "--data", "@missing.json")
    assert code == 2
    assert err == "streamguard probe: error: --data missing.json: no such file\n"


def test_probe_without_httpx_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without httpx, probe exits 2 and names the extra to install."""
    monkeypatch.setitem(sys.modules, "httpx", None)
    code, _, err = run(capsys, "probe", "http://127.0.0.1:9/")
    assert code == 2
    assert err == (
        "streamguard probe: error: probing needs httpx: pip install 'streamguard[testing]'\n"
    )


# -- demo and the console script -------------------------------------------------------------


def test_demo_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """`streamguard demo` serves the demo app and prints every route; exit 0."""
    code, out, _ = run(capsys, "demo")
    assert code == 0
    for path in ("/healthy", "/cut-frame", "/never-finished", "/crash"):
        assert f"\n{path} " in out
    assert "unterminated_frame" in out


def test_demo_explains_the_client_disconnect_of_content_length(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The /content-length row ends client_disconnect, and a note under the table says why."""
    code, out, _ = run(capsys, "demo")
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith("/content-length ")]
    assert row.split()[4:6] == ["client_disconnect", "2"]
    notes = " ".join(out.partition("\n\n* ")[2].partition("\n\nStreams by outcome:")[0].split())
    assert notes.startswith(
        "/content-length ended client_disconnect although the client got every byte: the "
        "response declared a Content-Length, so the client (httpx here, as any HTTP/1.1 "
        "client) took the body as complete once it had that many bytes and closed the "
        "connection, while the app had still to send its final, empty body message;"
    )
    assert "* /gzip shows 0 events: a compressed body cannot be parsed" in out


def test_demo_without_uvicorn_says_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without uvicorn, demo exits 2 and names the extra to install."""
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    code, _, err = run(capsys, "demo")
    assert code == 2
    assert err == (
        "streamguard demo: error: the demo needs uvicorn: pip install 'streamguard[testing]'\n"
    )


@pytest.mark.parametrize("command", [[], ["check"], ["probe"]])
def test_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    """--help of the command and of check and probe ends with every exit code."""
    code, out, _ = run(capsys, *command, "--help")
    assert code == 0
    epilog = " ".join(out.partition("Exit codes:")[2].split())
    assert epilog == (
        "0 clean; 1 findings at or above --fail-on, an outcome listed in --fail-on-outcome, "
        "or (probe) a response that is not an event stream; 2 usage or input error (for "
        "check, an empty capture too); 141 the output's reader left early (| head)."
    )


def test_version_and_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the version and the build and exits 0; no command is a usage error."""
    code, out, err = run(capsys, "--version")
    assert (code, out.startswith("streamguard 0.1.0 ("), out.endswith(" core)\n"), err) == (
        0,
        True,
        True,
        "",
    )
    code, _, err = run(capsys)
    assert code == 2
    assert "the following arguments are required: COMMAND" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "lines_read"),
    [
        (["rules"], 0),  # the reader left before the first write
        (["rules", "--format", "markdown"], 0),
        (["rules", "--format", "markdown"], 2),  # `| head -2`: the page is larger than a pipe
        (["check", "--format", "json", *[str(FIXTURES / "openai_chat" / "role_repeated.sse")]
          * 200], 1),
    ],
)  # fmt: skip
def test_a_reader_that_leaves_ends_the_output_quietly(argv: list[str], lines_read: int) -> None:
    """Like a Unix filter under `| head`: no traceback on stderr, exit 141 (128 + SIGPIPE)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT)
    for _ in range(5):
        child = subprocess.Popen(
            [*_CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
        )
        assert child.stdout is not None
        assert child.stderr is not None
        for _ in range(lines_read):
            assert child.stdout.readline()
        child.stdout.close()
        err = child.stderr.read()
        child.stderr.close()
        assert (child.wait(timeout=60), err) == (EXIT_BROKEN_PIPE, b"")


def test_the_cli_does_not_import_the_test_helpers() -> None:
    """Importing the command line loads none of streamguard.testing (it formats with _format)."""
    code = (
        "import sys, streamguard.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('streamguard.testing')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout == "[]\n"


def test_console_script_runs_check(files: Path) -> None:
    """The installed `streamguard` script checks a file and exits with the code of main."""
    script = shutil.which("streamguard", path=str(Path(sys.executable).parent))
    assert script is not None
    done = subprocess.run([script, "check", "done.sse"], capture_output=True, text=True)
    cut = subprocess.run(
        [script, "check", "--format", "json", "cut.sse"], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith("1 file(s) checked: 0 with findings at error or above\n")
    assert cut.returncode == 1
    assert json.loads(cut.stdout)["findings"][0]["rule"] == "unterminated_frame"


def test_check_shows_the_values_of_the_users_own_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check`` reads files the user passed: a value a finding names is shown (quoted),
    where the middleware's findings show its size and hash only."""
    from streamguard.monitor import check_stream

    stream = (
        b'event: mystery_event\ndata: {"type":"mystery_event"}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    path = tmp_path / "mystery.sse"
    path.write_bytes(stream)
    _, out, _ = run(capsys, "check", "--protocol", "anthropic", str(path))
    assert "the undocumented type 'mystery_event'" in out
    assert "chars #" not in out
    hidden = check_stream([stream], protocol="anthropic")  # as the middleware sees it
    assert "mystery_event" not in repr(hidden.findings)
    assert any("<13 chars #" in finding.message for finding in hidden.findings)


def test_json_is_accepted_by_check_as_by_conformance(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` is ``--format json`` on check and probe too, as on conformance."""
    assert run(capsys, "check", "--json", "done.sse") == run(
        capsys, "check", "--format", "json", "done.sse"
    )
    assert json.loads(run(capsys, "check", "--json", "done.sse")[1])["protocol"] == "openai_chat"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_probe_progress_shows_on_a_terminal_only() -> None:
    """probe reads a long stream with a self-erasing ``reading: N bytes, T s`` line on a
    terminal, at most every quarter second of its clock, and nothing into a pipe."""
    from streamguard.cli import _ReadProgress

    now = [0.0]
    terminal = _Terminal()
    progress = _ReadProgress(terminal, lambda: now[0])
    for size, at in [(100, 0.1), (2_000, 0.3), (3_000, 0.4), (12_345, 0.6)]:
        now[0] = at
        progress.received(size)
    progress.clear()
    assert terminal.getvalue() == (
        "\r\x1b[Kreading: 2,000 bytes, 0.3 s\r\x1b[Kreading: 12,345 bytes, 0.6 s\r\x1b[K"
    )
    pipe = io.StringIO()
    piped = _ReadProgress(pipe, lambda: now[0])
    now[0] = 5.0
    piped.received(1)
    piped.clear()
    assert pipe.getvalue() == ""
