"""``--request`` and ``--data`` are parsed under bounds: size, objects and arrays, depth."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard import cli
from streamguard.request import MAX_REQUEST_CONTAINERS
from streamguard.testing import serve
from tests.stream_apps import FIXTURES

CAPTURE = str(FIXTURES / "openai_chat" / "usage_missing.sse")
#: Asks for usage: with it, usage_missing fires on the capture; without it, nothing does.
USAGE = {"stream_options": {"include_usage": True}}
LIMIT = 64


@pytest.fixture
def small_bound(monkeypatch: pytest.MonkeyPatch) -> int:
    """A 64-byte MAX_REQUEST_BYTES, so that a request over it stays small."""
    monkeypatch.setattr(cli, "MAX_REQUEST_BYTES", LIMIT)
    return LIMIT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def padded(size: int) -> bytes:
    """A JSON object that asks for usage, ``size`` bytes long."""
    body = json.dumps(USAGE).encode()
    return body[:-1] + b", " + b'"pad": "' + b"x" * (size - len(body) - 11) + b'"}'


def test_padded_is_the_size_asked() -> None:
    """The helper builds valid JSON of the exact size."""
    assert len(padded(LIMIT + 1)) == LIMIT + 1
    assert json.loads(padded(LIMIT + 1))["stream_options"] == {"include_usage": True}


def test_a_request_file_at_the_bound_is_read(
    tmp_path: Path, small_bound: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """A request file of exactly MAX_REQUEST_BYTES is parsed and used."""
    (tmp_path / "req.json").write_bytes(padded(small_bound))
    code, out, _ = run(
        capsys, "check", "--format", "json", "--request", str(tmp_path / "req.json"), CAPTURE
    )
    assert code == 1
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["usage_missing"]


def test_a_request_file_over_the_bound_is_an_input_error(
    tmp_path: Path,
    small_bound: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A larger request file is exit 2, naming its size and the bound, and is not read whole."""
    (tmp_path / "req.json").write_bytes(padded(10_000))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check", "--request", "req.json", CAPTURE)
    assert (code, out) == (2, "")
    assert err == (
        "streamguard check: error: --request req.json: the file is 10000 bytes; "
        "at most 64 are read\n"
    )


def test_a_request_on_stdin_over_the_bound_is_an_input_error(
    small_bound: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--request - stops reading stdin past the bound: its size is unknown, so it says more."""
    stdin = io.BytesIO(padded(10_000))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stdin))
    code, _, err = run(capsys, "check", "--request", "-", CAPTURE)
    assert code == 2
    assert err == (
        "streamguard check: error: --request -: the file is more than 64 bytes; "
        "at most 64 are read\n"
    )
    assert stdin.tell() <= 8192 + small_bound + 1  # one buffered read, not the whole input


def test_a_request_with_too_many_objects_and_arrays_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_REQUEST_CONTAINERS objects and arrays the request is not parsed: exit 2."""
    many = MAX_REQUEST_CONTAINERS  # with the outer object: one over
    (tmp_path / "req.json").write_text(json.dumps({**USAGE, "x": [[]] * (many - 2)}))
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "check", "--request", "req.json", CAPTURE)
    assert code == 2
    assert err == (
        f"streamguard check: error: --request req.json: the body holds {many + 1} JSON "
        f"objects and arrays ('{{' and '['); at most {many} are parsed\n"
    )


def test_a_deeply_nested_request_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nesting deeper than the parser goes is exit 2 with a message, not a traceback."""
    (tmp_path / "req.json").write_text('{"x": ' + "[" * 5000 + "]" * 5000 + "}")
    monkeypatch.chdir(tmp_path)
    # The parser's depth is the interpreter's recursion limit; an in-process mypy run
    # raises it (tests/test_docs_snippets.py puts it back after its own), so pin the default.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        code, _, err = run(capsys, "check", "--request", "req.json", CAPTURE)
    finally:
        sys.setrecursionlimit(limit)
    assert code == 2
    assert err == (
        "streamguard check: error: --request req.json: the JSON is nested too deeply to parse\n"
    )


# -- probe --data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[str, list[tuple[str | None, int]]]]:
    """An OpenAI chat stream with no usage; each request's content type and body size."""
    seen: list[tuple[str | None, int]] = []

    async def chat(request: Request) -> Response:
        seen.append((request.headers.get("content-type"), len(await request.body())))
        return StreamingResponse(iter([Path(CAPTURE).read_bytes()]), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve(app, log_level="critical") as url:
        yield url + "/v1/chat/completions", seen


def test_probe_data_over_the_bound_is_sent_whole_and_not_checked_against(
    echo: tuple[str, list[tuple[str | None, int]]],
    small_bound: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--data past the bound is sent whole, as JSON; only the request-aware checks are skipped."""
    url, seen = echo
    seen.clear()
    code, out, err = run(capsys, "probe", "--format", "json", url, "-d", padded(1000).decode())
    assert seen == [("application/json", 1000)]
    assert (code, json.loads(out)["findings"]) == (0, [])  # usage_missing not judged
    assert err == (
        "streamguard probe: note: --data: the body is 1000 bytes; at most 64 are parsed: "
        "request-aware checks skipped\n"
    )
    code, out, _ = run(capsys, "probe", "--format", "json", url, "-d", padded(small_bound).decode())
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["usage_missing"]
    assert seen[-1] == ("application/json", small_bound)
