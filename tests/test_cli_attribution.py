"""check --upstream: whose bug each downstream finding is, in the table, the JSON and the page.

The pairs are fixtures of ``tests/fixtures`` read as a gateway's two sides: the stream it
sent its client (``FILE``) and the one its provider sent it (``--upstream``). A faithful
relay passes the upstream's break on (``upstream``); a broken relay breaks a clean
upstream (``gateway``). The page is asserted on the DOM headless Chromium built.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from streamguard.attribution import GATEWAY, UPSTREAM
from streamguard.cli import main
from tests.chromium import Node, dump_dom, parse_dom

FIXTURES = Path(__file__).parent / "fixtures"
ROLE_REPEATED = str(FIXTURES / "openai_chat" / "role_repeated.sse")
CHAT_CUT = str(FIXTURES / "openai_chat" / "missing_terminal.sse")
ANTHROPIC_CLEAN = str(FIXTURES / "anthropic" / "ok_text_end_turn.sse")
ANTHROPIC_CUT = str(FIXTURES / "anthropic" / "missing_terminal_truncated_mid_block.sse")

#: (downstream, upstream, the downstream rule, whose it is): a faithful relay of a broken
#: upstream, the same protocol and across protocols (a cut Anthropic stream relayed as a
#: Chat stream without [DONE]), and a broken relay of a clean upstream, both ways.
PAIRS = [
    pytest.param(ROLE_REPEATED, ROLE_REPEATED, "role_repeated", UPSTREAM, id="faithful"),
    pytest.param(CHAT_CUT, ANTHROPIC_CUT, "missing_terminal", UPSTREAM, id="faithful-translated"),
    pytest.param(CHAT_CUT, ANTHROPIC_CLEAN, "missing_terminal", GATEWAY, id="broken-terminal"),
    pytest.param(ROLE_REPEATED, ANTHROPIC_CLEAN, "role_repeated", GATEWAY, id="broken-role"),
]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _check_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code, out, err = _run(capsys, "check", "--format", "json", *argv)
    assert err == ""
    [line] = out.splitlines()
    result: dict[str, object] = json.loads(line)
    return code, result


@pytest.mark.parametrize(("down", "up", "rule", "whose"), PAIRS)
def test_the_json_attributes_each_finding_and_names_the_upstream(
    capsys: pytest.CaptureFixture[str], down: str, up: str, rule: str, whose: str
) -> None:
    code, result = _check_json(capsys, down, "--upstream", up)
    _, alone = _check_json(capsys, down)
    findings = result["findings"]
    assert isinstance(findings, list)
    assert [(f["rule"], f["attribution"]) for f in findings] == [(rule, whose)]
    upstream = result["upstream"]
    assert isinstance(upstream, dict)
    assert upstream["file"] == up
    _, checked = _check_json(capsys, up)  # the upstream checked on its own
    assert upstream["outcome"] == checked["outcome"]
    upstream_findings = checked["findings"]
    assert isinstance(upstream_findings, list)
    assert upstream["findings"] == Counter(f["rule"] for f in upstream_findings)
    assert bool(upstream["findings"]) == (whose == UPSTREAM)
    # Attribution adds to the downstream's line, and changes nothing else of it.
    for finding in findings:
        del finding["attribution"]
    del result["upstream"]
    assert result == alone
    assert code == (1 if rule == "missing_terminal" else 0)  # the downstream's exit code


@pytest.mark.parametrize(("down", "up", "rule", "whose"), PAIRS)
def test_the_table_has_an_attribution_column(
    capsys: pytest.CaptureFixture[str], down: str, up: str, rule: str, whose: str
) -> None:
    _, out, err = _run(capsys, "check", down, "--upstream", up)
    assert err == ""
    header, _, row, *_ = out.splitlines()
    assert header.split()[-1] == "attribution"
    assert row.split()[-3:] == [rule, "1", whose]  # findings, then attribution: "1 whose"
    assert f"    attribution: {whose}\n" in out  # under the finding, in the details
    assert f"attributed against the upstream {up}: " in out


def test_without_upstream_nothing_changes(capsys: pytest.CaptureFixture[str]) -> None:
    """No --upstream: no attribution in the table, the details or the JSON."""
    _, out, _ = _run(capsys, "check", ROLE_REPEATED)
    assert "attribution" not in out
    assert "attributed against" not in out
    _, result = _check_json(capsys, ROLE_REPEATED)
    assert "upstream" not in result
    findings = result["findings"]
    assert isinstance(findings, list)
    assert findings
    assert all("attribution" not in finding for finding in findings)


def test_a_clean_downstream_has_nothing_to_attribute(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "check", ANTHROPIC_CLEAN, "--upstream", ANTHROPIC_CUT)
    assert code == 0
    header, _, row, *_ = out.splitlines()
    assert header.split()[-1] == "attribution"
    assert row.split()[-2:] == ["-", "-"]  # no findings, none attributed


def test_upstream_pairs_one_stream_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--upstream is the other side of one stream: two FILEs are exit 2."""
    code, out, err = _run(capsys, "check", ROLE_REPEATED, CHAT_CUT, "--upstream", ROLE_REPEATED)
    assert code == 2
    assert "--upstream is the upstream of one stream: give one FILE" in err
    assert out == ""


# -- the page -------------------------------------------------------------------------------


def _page(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> Node:
    page = tmp_path / "gateway.html"
    _run(capsys, "check", *argv, "--html", str(page))
    return parse_dom(dump_dom(page.read_text(), tmp_path))


def _columns(table: Node) -> list[str]:
    return [th.text for th in table.find_all("th")]


@pytest.mark.parametrize(
    ("up", "whose", "letter"),
    [
        pytest.param(ROLE_REPEATED, UPSTREAM, "U", id="faithful"),
        pytest.param(ANTHROPIC_CLEAN, GATEWAY, "G", id="broken"),
    ],
)
def test_the_page_shows_whose_each_finding_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], up: str, whose: str, letter: str
) -> None:
    """The downstream findings table has an attribution column; the flagged mark says
    whose its finding is; the band's legend counts them. The upstream band is unchanged."""
    dom = _page(tmp_path, capsys, ROLE_REPEATED, "--upstream", up)
    [title] = dom.find_all("h1")
    assert title.text == f"{ROLE_REPEATED} and its upstream {up}"
    table = dom.by_id("findings-0")
    assert table is not None
    assert _columns(table) == ["severity", "rule", "event", "message", "attribution"]
    [row] = table.find_all("tr", "finding")
    cells = row.find_all("td")
    assert (cells[1].text, cells[-1].text) == ("role_repeated", whose)
    assert f"attr-{whose}" in cells[-1].classes
    mark = dom.by_id("event-1")  # the event that repeated the role
    assert mark is not None
    assert f"attr-{whose}" in mark.classes
    assert mark.attrs["data-attribution"] == whose
    under = dom.by_id("attribution-event-1")
    assert under is not None
    assert under.text == letter
    legend = dom.by_id("attribution-legend-0")
    assert legend is not None
    assert f"against 1 upstream stream(s): 1 {whose}" in legend.text
    summary = dom.by_id("summary-0")
    assert summary is not None
    assert summary.text.endswith(f"attributed: 1 {whose}")
    # The upstream's band and table are its own report's: nothing attributed there.
    upstream_table = dom.by_id("findings-1")
    assert upstream_table is not None
    assert "attribution" not in _columns(upstream_table)
    assert dom.by_id("attribution-legend-1") is None
    assert not [
        n for n in dom.iter() if n.attrs.get("data-band") == "1" and "data-attribution" in n.attrs
    ]


def test_a_finding_at_the_end_is_attributed_in_the_table_and_the_legend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing [DONE] is at the end of the stream, where no mark is: the row and the
    legend say whose it is."""
    dom = _page(tmp_path, capsys, CHAT_CUT, "--upstream", ANTHROPIC_CUT)
    table = dom.by_id("findings-0")
    assert table is not None
    [row] = table.find_all("tr", "finding")
    assert row.attrs["data-attribution"] == UPSTREAM
    legend = dom.by_id("attribution-legend-0")
    assert legend is not None
    assert "1 upstream" in legend.text
    assert not dom.find_all("text", "attribution-mark")


def test_a_page_without_upstream_has_no_attribution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dom = _page(tmp_path, capsys, ROLE_REPEATED)
    table = dom.by_id("findings-0")
    assert table is not None
    assert _columns(table) == ["severity", "rule", "event", "message"]
    assert dom.by_id("attribution-legend-0") is None
    assert not dom.find_all("text", "attribution-mark")
    assert not [n for n in dom.iter() if "data-attribution" in n.attrs]
    summary = dom.by_id("summary-0")
    assert summary is not None
    assert "attributed" not in summary.text
