"""``check`` groups a rule's repeated findings and says when a capture is empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamguard.cli import EXIT_FINDINGS, EXIT_USAGE, main

#: Three chunks that are not OpenAI chunks, and no [DONE]: schema_mismatch three times.
GARBAGE = b'data: {"x":1}\n\ndata: {"y":1}\n\ndata: {"z":1}\n\n'


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_lists_a_repeated_rule_once_with_its_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule found three times is one table entry with x3 and one detail with the repeats."""
    (tmp_path / "garbage.sse").write_bytes(GARBAGE)
    code, out, _ = _run(capsys, "check", "--protocol", "openai_chat", str(tmp_path / "garbage.sse"))
    assert code == EXIT_FINDINGS
    assert "schema_mismatch x3, envelope_field_missing, missing_terminal" in out
    assert out.count("- schema_mismatch [error]") == 1
    assert "    2 more schema_mismatch: at event(s) 1, 2\n" in out


def test_check_json_still_lists_every_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSON output, for machines, keeps one entry per finding."""
    (tmp_path / "garbage.sse").write_bytes(GARBAGE)
    argv = ["check", "--format", "json", "--protocol", "openai_chat", str(tmp_path / "garbage.sse")]
    _, out, _ = _run(capsys, *argv)
    rules = [finding["rule"] for finding in json.loads(out)["findings"]]
    assert rules == [
        "schema_mismatch",
        "envelope_field_missing",
        "schema_mismatch",
        "schema_mismatch",
        "missing_terminal",
    ]


@pytest.mark.parametrize("protocol", ["auto", "anthropic"])
def test_check_says_an_empty_capture_is_empty_and_exits_2(
    protocol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file is not a clean stream: it is named empty, counted apart, and exits 2."""
    (tmp_path / "empty.sse").write_bytes(b"")
    code, out, err = _run(capsys, "check", "--protocol", protocol, str(tmp_path / "empty.sse"))
    assert code == EXIT_USAGE
    assert (
        err
        == f"streamguard check: error: {tmp_path / 'empty.sse'}: empty: no body bytes to check\n"
    )
    assert "(empty)" in out
    assert out.endswith(
        "0 file(s) checked: 0 with findings at error or above; 1 empty, nothing to check\n"
    )


def test_check_json_names_an_empty_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In JSON an empty capture is an error entry, as an unreadable file is."""
    (tmp_path / "empty.sse").write_bytes(b"")
    code, out, _ = _run(capsys, "check", "--format", "json", str(tmp_path / "empty.sse"))
    assert code == EXIT_USAGE
    assert json.loads(out) == {
        "file": str(tmp_path / "empty.sse"),
        "error": f"{tmp_path / 'empty.sse'}: empty: no body bytes to check",
    }
