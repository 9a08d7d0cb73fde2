"""``streamguard conformance --save DIR`` and ``--replay DIR``: each stream in probe's
capture format, the run's report with every body sent, and the same judgement offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamguard.cli import main
from streamguard.conformance import PROTOCOLS
from streamguard.timeline import read_capture_header
from tests.conformance_server import FakeState
from tests.test_conformance_protocols import fake_endpoint, run

#: (protocol, bug or None, options): the runs saved and replayed.
CASES: list[tuple[str, str | None, list[str]]] = [
    ("openai_chat", None, ["--twin"]),
    ("openai_chat", "duplicate_finish", []),
    ("openai_chat", "tool_header_repeated", []),
    ("openai_responses", None, ["--variants", "all"]),
    ("openai_responses", "incomplete_as_completed", []),
    ("openai_responses", "no_completed", []),
    ("anthropic", None, ["--variants", "all"]),
    ("anthropic", "arguments_invalid", []),
    ("anthropic", "end_turn_on_truncation", []),
]


def replay(capsys: pytest.CaptureFixture[str], directory: Path) -> tuple[int, dict[str, Any]]:
    code = main(["conformance", "--replay", str(directory), "--json"])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def judged(report: dict[str, Any]) -> list[tuple[str, str, str, list[Any], list[str]]]:
    """What a report judged, variant by variant: name, outcome, reason, findings, retries."""
    return [
        (v["name"], v["outcome"], v["reason"], v["findings"], v["retries"])
        for v in report["variants"]
    ]


@pytest.mark.parametrize(
    ("protocol", "bug", "options"), CASES, ids=[f"{p}-{b or 'healthy'}" for p, b, _ in CASES]
)
def test_save_then_replay_gives_the_same_outcomes_and_findings(
    protocol: str,
    bug: str | None,
    options: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = FakeState(bugs=frozenset({bug} if bug else ()))
    code, live = run(capsys, protocol, state, *options, "--save", str(tmp_path))
    replayed_code, again = replay(capsys, tmp_path)
    assert judged(again) == judged(live)
    assert replayed_code == code
    assert (again["protocol"], again["model"], again["endpoint"]) == (
        protocol,
        "fake",
        live["endpoint"],
    )
    notes = {v["name"]: v["note"] for v in again["variants"] if v["note"]}
    assert "how long they took (a hang) is not" in notes.pop("abort")
    if "--twin" in options:
        assert set(notes) == {"plain", "tool_required", "tool_named"}
        assert {*notes.values()} == {"--twin's non-streamed answer is not judged again offline"}
    else:
        assert notes == {}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_saved_files(protocol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One capture per stream, named after its variant (from 2 for a variant's later
    streams), each in probe's capture format with the request it answered; conformance.json
    lists, per variant, every body sent (as the server received them) and its captures."""
    state = FakeState()
    run(capsys, protocol, state, "--variants", "plain,abort", "--save", str(tmp_path))
    saved = json.loads((tmp_path / "conformance.json").read_text())
    variants = {v["name"]: v for v in saved["variants"]}
    assert variants["plain"]["captures"] == ["plain.jsonl"]
    assert variants["abort"]["captures"] == ["abort.jsonl"] + [f"abort-{k}.jsonl" for k in
                                                                range(2, 9)]  # fmt: skip
    assert [b for v in saved["variants"] for b in v["bodies"]] == state.bodies
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["conformance.json", *variants["plain"]["captures"], *variants["abort"]["captures"]]
    )
    with open(tmp_path / "abort-2.jsonl", encoding="utf-8") as capture:
        header = read_capture_header(capture.readline())
    assert header["protocol"] == protocol
    assert header["request"] == state.bodies[2]  # plain, abort, then the health request
    assert header["status"] == 200
    # The capture format probe --save writes, which check reads.
    assert main(["check", str(tmp_path / "plain.jsonl"), "--protocol", protocol]) == 0
    capsys.readouterr()


def test_a_hang_is_not_judged_again_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The health request that got no answer left no capture: replay says it cannot judge
    the abort, and judges the rest as the run did."""
    state = FakeState(bugs=frozenset({"hang_after_disconnect"}))
    _, live = run(capsys, "anthropic", state, "--timeout", "5", "--save", str(tmp_path))
    _, again = replay(capsys, tmp_path)
    live_abort = {v["name"]: v for v in live["variants"]}["abort"]
    assert live_abort["outcome"] == "fail"
    abort = {v["name"]: v for v in again["variants"]}["abort"]
    assert abort["outcome"] == "skipped"
    assert abort["reason"] == (
        "not re-judged offline: a request has no capture: it got no answer live (a hang, a "
        "connect error)"
    )
    rest = [j for j in judged(again) if j[0] != "abort"]
    assert rest == [j for j in judged(live) if j[0] != "abort"]


def test_a_retry_is_replayed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = FakeState(unavailable=1)
    _, live = run(capsys, "openai_chat", state, "--variants", "plain", "--save", str(tmp_path))
    assert live["variants"][0]["retries"] == ["HTTP 503"]
    saved = json.loads((tmp_path / "conformance.json").read_text())
    assert saved["variants"][0]["captures"] == ["plain.jsonl", "plain-2.jsonl"]
    _, again = replay(capsys, tmp_path)
    assert judged(again) == judged(live)


def test_repeated_runs_are_replayed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = FakeState(bugs=frozenset({"null_finish_on_tools"}), bug_every=2)
    _, live = run(capsys, "openai_chat", state, "--variants", "tool_required", "--repeat", "2",
                  "--save", str(tmp_path))  # fmt: skip
    _, again = replay(capsys, tmp_path)
    assert live["variants"][0]["outcome"] == "flaky"
    assert judged(again) == judged(live)
    assert again["variants"][0]["runs"] == ["pass", "fail"]


def test_concurrent_streams_are_not_judged_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "openai_chat", FakeState(), "--variants", "concurrent", "--save", str(tmp_path))
    _, again = replay(capsys, tmp_path)
    [variant] = again["variants"]
    assert variant["outcome"] == "skipped"
    assert variant["reason"] == "not re-judged offline: concurrent streams need a live exchange"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_key_is_in_no_saved_file(
    protocol: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = f"sk-saved-{protocol}-never-written"
    monkeypatch.setenv("FAKE_KEY", secret)
    state = FakeState()
    with fake_endpoint(protocol, state) as url:
        main(["conformance", url, "--model", "fake", "--protocol", protocol, "--api-key-env",
              "FAKE_KEY", "--save", str(tmp_path)])  # fmt: skip
    main(["conformance", "--replay", str(tmp_path)])
    out, err = capsys.readouterr()
    assert secret in (state.authorization or "") + (state.api_key_header or "")
    files = list(tmp_path.iterdir())
    assert len(files) > 2
    for path in files:
        assert secret.encode() not in path.read_bytes(), path.name
    assert secret not in out + err


def test_replay_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["conformance", "--replay", str(empty)]) == 2
    assert "conformance.json" in capsys.readouterr()[1]
    assert main(["conformance", "http://127.0.0.1:9/v1", "--replay", str(empty)]) == 2
    assert "--replay reads a saved run" in capsys.readouterr()[1]
    assert main(["conformance", "http://127.0.0.1:9/v1"]) == 2
    assert "URL and --model are required" in capsys.readouterr()[1]


@pytest.mark.parametrize("name", ["../outside.jsonl", "/etc/passwd", "plain.txt", "PLAIN.jsonl"])
def test_replay_reads_only_the_files_save_names(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A conformance.json naming a file --save would not write (another directory, another
    kind of file) is refused before anything is read."""
    run(capsys, "openai_chat", FakeState(), "--variants", "plain", "--save", str(tmp_path))
    saved = json.loads((tmp_path / "conformance.json").read_text())
    saved["variants"][0]["captures"] = [name]
    (tmp_path / "conformance.json").write_text(json.dumps(saved))
    assert main(["conformance", "--replay", str(tmp_path)]) == 2
    assert "a variant that --save did not write" in capsys.readouterr()[1]


def test_replay_reads_a_capture_within_max_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture is read again no further than --max-bytes, as the live read was."""
    run(capsys, "anthropic", FakeState(), "--variants", "plain", "--save", str(tmp_path))
    code = main(["conformance", "--replay", str(tmp_path), "--max-bytes", "100"])
    assert code == 2
    assert "more than --max-bytes 100 body bytes" in capsys.readouterr()[1]


def test_the_report_names_the_captures_it_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary JSON of the run and of its replay both list each variant's captures
    (what the HTML matrix links to its timeline pages); without --save, none."""
    _, live = run(capsys, "openai_responses", FakeState(), "--variants", "plain,abort",
                  "--save", str(tmp_path))  # fmt: skip
    _, again = replay(capsys, tmp_path)
    captures = {v["name"]: v["captures"] for v in live["variants"]}
    assert captures["plain"] == ["plain.jsonl"]
    assert len(captures["abort"]) == 8
    assert {v["name"]: v["captures"] for v in again["variants"]} == captures
    _, unsaved = run(capsys, "openai_responses", FakeState(), "--variants", "plain")
    assert unsaved["variants"][0]["captures"] == []


@pytest.mark.parametrize("replayed", [False, True], ids=["save", "replay"])
def test_the_html_matrix_links_the_saved_streams(
    replayed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--save (and --replay of what it saved) with --html: each saved stream gets its
    timeline page beside its capture, as the report matrix links them."""
    saved, page = tmp_path / "run", tmp_path / "matrix.html"
    html = [] if replayed else ["--html", str(page)]
    run(capsys, "anthropic", FakeState(), "--variants", "plain,truncation", "--save",
        str(saved), *html)  # fmt: skip
    if replayed:
        code = main(["conformance", "--replay", str(saved), "--html", str(page)])
        capsys.readouterr()
        assert code == 0
    assert page.is_file()
    assert (saved / "plain.html").is_file()
    assert (saved / "truncation.html").is_file()
    assert "run/plain.html" in page.read_text()
