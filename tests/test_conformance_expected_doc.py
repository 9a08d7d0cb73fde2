"""docs/conformance.md's expected-failures example does what the page says: against an
endpoint with the two bugs it lists, the run exits 0 (issue 44)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from streamguard.cli import main
from tests.conformance_server import FakeState
from tests.test_conformance_protocols import fake_endpoint

PAGE = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"


def documented_file() -> str:
    """The TOML block of the page's expected-failures section."""
    section = PAGE.read_text().split("### The expected-failures file", 1)[1]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found is not None
    return found.group(1)


def test_the_documented_expected_failures_file_passes_the_endpoint_it_describes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """n2 finishes on its last choice only; tool_required repeats the tool-call id and name
    on every delta, so a client that accumulates the deltas as the openai SDK does
    (``accumulate_delta`` joins every ``function.name`` string) assembles a name no tool
    has: ``tool_call_name_unknown`` fails it too, and the page must list it. Before, the
    page listed ``tool_call_header_repeated`` alone, and its file exited 1."""
    expected = tmp_path / "conformance-expected.toml"
    expected.write_text(documented_file())
    state = FakeState(bugs=frozenset({"finish_last_index_only", "tool_header_repeated"}))
    with fake_endpoint("openai_chat", state) as url:
        argv = ["conformance", url, "--model", "fake", "--json", "--variants", "n2,tool_required"]
        code = main([*argv, "--expected-failures", str(expected)])
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert {v["name"]: v["outcome"] for v in report["variants"]} == {
        "n2": "fail",
        "tool_required": "fail",
    }
    assert "unexpected failure" not in err
    assert "stale expected failure" not in err
    assert code == 0


def test_the_openai_sdk_joins_a_repeated_name() -> None:
    """What ``tool_call_name_unknown`` rests on: the official client's accumulation."""
    pytest.importorskip("openai")
    from openai.lib.streaming._deltas import accumulate_delta

    snapshot: dict[object, object] = {}
    for delta in (
        {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "get_weather"}}]},
        {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "get_weather"}}]},
    ):
        snapshot = accumulate_delta(snapshot, dict(delta))
    [call] = cast(list[Any], snapshot["tool_calls"])
    assert call["function"]["name"] == "get_weatherget_weather"
