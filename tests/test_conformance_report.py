"""The reports a team keeps in CI from ``streamguard conformance``: the HTML matrix (as
headless Chromium builds it), the JUnit XML (parsed back, its counts adding up), and the
expected-failures file (a listed failure passes, a stale entry fails, an unlisted one
fails, a malformed file is a usage error before any request).

The runs are the real command against the fake endpoints of ``tests/conformance_server.py``
under uvicorn; the captures a ``--save`` run writes (``DIR/<variant>.jsonl`` and
``"captures"`` in the summary) are made by ``streamguard probe --save`` with the
variant's own request, the format the contract names.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from streamguard.cli import main
from streamguard.conformance_report import (
    MAX_FINDINGS_LISTED,
    MAX_TEXT_CHARS,
    ExpectedFailure,
    judge,
    junit_xml,
    matrix_html,
    parse_expected_failures,
    write_outputs,
)
from streamguard.report import Severity
from tests.chromium import Node, parse_dom
from tests.conformance_server import FakeState
from tests.test_conformance import fake_endpoint


def run(
    capsys: pytest.CaptureFixture[str], state: FakeState, *options: str
) -> tuple[int, str, str]:
    """The real command against the fake: exit code, stdout, stderr."""
    with fake_endpoint(state) as url:
        code = main(["conformance", url, "--model", "fake", *options])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(
    capsys: pytest.CaptureFixture[str], state: FakeState, *options: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, state, "--json", *options)
    return code, json.loads(out)


def expected_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "expected.toml"
    path.write_text(text)
    return str(path)


def variant(name: str, outcome: str, *findings: tuple[str, str], **more: Any) -> dict[str, Any]:
    """A variant of a summary as ``summary_json`` writes it."""
    return {
        "name": name,
        "outcome": outcome,
        "reason": more.pop("reason", ""),
        "requests": 1,
        "request": {},
        "findings": [
            {
                "rule": rule,
                "severity": severity,
                "source": "variant",
                "focus": False,
                "message": more.get("message", f"{rule} here"),
            }
            for rule, severity in findings
        ],
        "timing": {"time_to_first_byte_s": 0.01, "max_gap_s": 0.01, "duration_s": 0.25},
        **more,
    }


def summary(*variants: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "endpoint": "http://127.0.0.1:8000/v1/chat/completions",
        "model": "fake",
        "protocol": "openai_chat",
        "streamguard": "0",
        "requests": len(variants),
        "failed": False,
        "variants": list(variants),
        **more,
    }


# -- JUnit XML ---------------------------------------------------------------------------------

#: The attributes the common JUnit schema (Ant's JUnit.xsd, which Jenkins and the GitHub
#: test-report actions read) requires of each element.
REQUIRED = {
    "testsuite": {"name", "tests", "failures", "errors", "time", "timestamp", "hostname",
                  "id", "package"},
    "testcase": {"name", "classname", "time"},
    "failure": {"type"},
    "error": {"type"},
}  # fmt: skip


def parsed_junit(text: str) -> ElementTree.Element:
    """The JUnit document parsed back, checked against the schema's required attributes
    and counts: every figure on ``testsuites`` and ``testsuite`` adds up to its testcases."""
    root = ElementTree.fromstring(text)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1  # one per run
    suite = suites[0]
    for element in root.iter():
        missing = REQUIRED.get(element.tag, set()) - set(element.attrib)
        assert not missing, (element.tag, missing)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.attrib["timestamp"])
    cases = suite.findall("testcase")
    kinds = [[child.tag for child in case if child.tag != "system-out"] for case in cases]
    assert all(len(kind) <= 1 for kind in kinds)  # one verdict per testcase
    counted = {
        "tests": len(cases),
        "failures": sum(kind == ["failure"] for kind in kinds),
        "errors": sum(kind == ["error"] for kind in kinds),
        "skipped": sum(kind == ["skipped"] for kind in kinds),
    }
    for element in (root, suite):
        assert {key: int(element.attrib[key]) for key in counted} == counted
    assert [child.tag for child in suite][:1] == ["properties"]
    assert [child.tag for child in suite][-2:] == ["system-out", "system-err"]
    return suite


def verdicts(suite: ElementTree.Element) -> dict[str, tuple[str, str]]:
    """Testcase name -> (its verdict element, ``pass`` when none; its type)."""
    found = {}
    for case in suite.findall("testcase"):
        child = next((c for c in case if c.tag != "system-out"), None)
        found[case.attrib["name"]] = (
            ("pass", "") if child is None else (child.tag, child.attrib.get("type", ""))
        )
    return found


def test_the_junit_report_of_a_real_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A broken tool stream is a failure naming its rules, a refused option a skip, a
    clean variant a bare testcase; the document adds up and says which endpoint."""
    junit = tmp_path / "conformance.xml"
    state = FakeState(bugs=frozenset({"tool_header_repeated"}), refuse=frozenset({"logprobs"}))
    code, out, _ = run(
        capsys, state, "--variants", "plain,tool_required,logprobs", "--junit", str(junit)
    )
    assert code == 1
    assert f"JUnit XML written to {junit}" in out
    suite = parsed_junit(junit.read_text())
    assert verdicts(suite) == {
        "plain": ("pass", ""),
        "tool_required": ("failure", "fail"),
        "logprobs": ("skipped", "skipped"),
    }
    failure = suite.find("testcase[@name='tool_required']/failure")
    assert failure is not None
    assert "tool_call_header_repeated" in failure.attrib["message"]
    assert "tool_call_header_repeated" in (failure.text or "")
    skipped = suite.find("testcase[@name='logprobs']/skipped")
    assert skipped is not None
    assert "unsupported" in skipped.attrib["message"]
    properties = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
    assert properties["model"] == "fake"
    assert properties["protocol"] == "openai_chat"
    assert properties["endpoint"].endswith("/v1/chat/completions")
    assert {c.attrib["classname"] for c in suite.iter("testcase")} == {
        "streamguard.conformance.openai_chat"
    }


def test_every_outcome_has_its_junit_verdict() -> None:
    """fail and flaky are failures, error an error, skipped (unsupported, not exercised,
    not run) a skip; an outcome this version does not know is a skip of type other."""
    run_summary = summary(
        variant("ok", "pass"),
        variant("broken", "fail", ("missing_finish_reason", "error")),
        variant("sometimes", "flaky", ("missing_finish_reason", "error")),
        variant("down", "error", reason="HTTP 503 before the stream"),
        variant("refused", "skipped", reason="unsupported: HTTP 400 before the stream"),
        variant("later", "someday"),
    )
    suite = parsed_junit(junit_xml(run_summary))
    assert verdicts(suite) == {
        "ok": ("pass", ""),
        "broken": ("failure", "fail"),
        "sometimes": ("failure", "flaky"),
        "down": ("error", "error"),
        "refused": ("skipped", "skipped"),
        "later": ("skipped", "other"),
    }
    down = suite.find("testcase[@name='down']/error")
    assert down is not None
    assert "HTTP 503" in down.attrib["message"]
    later = suite.find("testcase[@name='later']/skipped")
    assert later is not None
    assert "'someday'" in later.attrib["message"]


def test_the_run_is_judged_failed_exactly_when_junit_says_so() -> None:
    """The exit code and the JUnit counts tell the same story: flaky fails."""
    for outcome, failed in [("pass", False), ("skipped", False), ("fail", True),
                            ("error", True), ("flaky", True), ("someday", False)]:  # fmt: skip
        run_summary = summary(variant("v", outcome))
        suite = parsed_junit(junit_xml(run_summary))
        bad = int(suite.attrib["failures"]) + int(suite.attrib["errors"])
        assert judge(run_summary).failed is failed, outcome
        assert (bad > 0) is failed, outcome


HOSTILE = "</failure>]]><script>alert(1)</script>\x00\x1b[31m\ud800 &amp; \"'"


@pytest.mark.parametrize("duration", [10**400, float("nan"), -1.0, "1.5", None, True])
def test_a_time_that_is_no_duration_counts_as_zero(duration: object) -> None:
    broken = variant("v", "pass")
    broken["timing"]["duration_s"] = duration
    suite = parsed_junit(junit_xml(summary(broken, variant("w", "pass"))))
    assert [c.attrib["time"] for c in suite.iter("testcase")] == ["0.000", "0.250"]
    assert suite.attrib["time"] == "0.250"


def test_hostile_strings_keep_the_junit_well_formed() -> None:
    """Wire text in a finding, the model and a variant name: escaped, and the characters
    XML cannot hold at all (NUL, escape, a lone surrogate) replaced, not written."""
    run_summary = summary(
        variant(HOSTILE, "fail", ("missing_finish_reason", "error"), message=HOSTILE),
        model=HOSTILE,
    )
    text = junit_xml(run_summary)
    text.encode("utf-8")  # no lone surrogate left
    suite = parsed_junit(text)
    case = suite.find("testcase")
    assert case is not None
    assert case.attrib["name"] == HOSTILE.replace("\x00", "\ufffd").replace(
        "\x1b", "\ufffd"
    ).replace("\ud800", "\ufffd")
    failure = case.find("failure")
    assert failure is not None
    assert "<script>alert(1)</script>" in (failure.text or "")
    model = next(p for p in suite.iter("property") if p.attrib["name"] == "model")
    assert model.attrib["value"].startswith("</failure>]]><script>")


def test_the_endpoint_never_shows_credentials() -> None:
    run_summary = summary(endpoint="https://user:sk-secret@gw.example.com:8443/v1?key=sk-other")
    for text in (junit_xml(run_summary), matrix_html(run_summary)):
        assert "sk-" not in text
        assert "https://gw.example.com:8443/v1" in text


# -- expected failures ---------------------------------------------------------------------------


def test_a_listed_failure_does_not_fail_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Only n2 breaks (a finish on the last choice only): listed by its rule, the run
    passes and says why; the JUnit shows it as an expected failure, not a pass."""
    state = FakeState(bugs=frozenset({"finish_last_index_only"}))
    options = ["--variants", "plain,n2"]
    code, out, _ = run(capsys, state, *options)
    assert code == 1  # unlisted: fails as before
    listed = expected_file(
        tmp_path,
        '[[expected_failure]]\nvariant = "n2"\nrule = "missing_finish_reason"\n'
        'reason = "finish on the last index only (sglang PR #8417)"\n'
        '[[expected_failure]]\nvariant = "n2"\nrule = "usage_not_last"\n'
        'reason = "the same bug: the usage chunk precedes the missing finish"\n',
    )
    junit = tmp_path / "report.xml"
    state = FakeState(bugs=frozenset({"finish_last_index_only"}))
    code, out, _ = run(
        capsys, state, *options, "--expected-failures", listed, "--junit", str(junit)
    )
    assert code == 0
    assert (
        "expected failure: n2 (finish on the last index only (sglang PR #8417); "
        "the same bug: the usage chunk precedes the missing finish)"
    ) in out
    assert re.search(r"^n2 +fail ", out, re.MULTILINE)  # the table still says what happened
    suite = parsed_junit(junit.read_text())
    assert verdicts(suite) == {"plain": ("pass", ""), "n2": ("skipped", "expected-failure")}


def test_a_stale_entry_fails_the_run_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The endpoint was fixed: the entry that still expects n2 to fail fails the run."""
    listed = expected_file(
        tmp_path, '[[expected_failure]]\nvariant = "n2"\nreason = "sglang PR #8417"\n'
    )
    junit = tmp_path / "report.xml"
    code, out, _ = run(
        capsys,
        FakeState(),
        "--variants", "plain,n2", "--expected-failures", listed, "--junit", str(junit),
    )  # fmt: skip
    assert code == 1
    assert f"stale expected failure in {listed}: n2 no longer fails (outcome pass)" in out
    suite = parsed_junit(junit.read_text())
    assert verdicts(suite)["n2"] == ("failure", "stale-expected-failure")


def test_an_unlisted_rule_of_a_listed_variant_still_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The entry expects n2 to fail by another rule: that entry is stale, and the rule
    that does fail it is a new failure; both are said, the run fails."""
    listed = expected_file(
        tmp_path,
        '[[expected_failure]]\nvariant = "n2"\nrule = "choice_missing"\nreason = "known"\n',
    )
    state = FakeState(bugs=frozenset({"finish_last_index_only"}))
    code, _, err = run(
        capsys, state, "--json", "--variants", "plain,n2", "--expected-failures", listed
    )
    assert code == 1
    assert f"stale expected failure in {listed}: n2 (choice_missing) no longer fails by " \
        "choice_missing" in err  # fmt: skip
    assert "unexpected failure: n2: fail by missing_finish_reason, usage_not_last, which no " \
        "expected failure lists" in err  # fmt: skip


def test_an_entry_for_a_variant_not_run_is_said_and_passes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    listed = expected_file(
        tmp_path, '[[expected_failure]]\nvariant = "logprobs"\nreason = "not today"\n'
    )
    code, out, _ = run(capsys, FakeState(), "--variants", "plain", "--expected-failures", listed)
    assert code == 0
    assert "expected failure not checked: logprobs: the variant did not run" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[expected_failure]\nvariant = 'n2'", "not TOML"),
        ("[[expected_failure]]\nvariant = 'n2'\n", "expected_failure 1: reason is required"),
        ("[[expected_failure]]\nvariant = 'n2'\nreason = '  '\n", "reason is required"),
        ("[[expected_failure]]\nvariant = 2\nreason = 'r'\n", "variant is required"),
        ("[[expected_failure]]\nvariant = 'n2'\nreson = 'r'\n", "unknown key 'reson'"),
        ("[[expected_failure]]\nvariant = 'n2'\nrule = 3\nreason = 'r'\n", "rule, when given"),
        ("[[expected]]\nvariant = 'n2'\nreason = 'r'\n", "unknown key 'expected'"),
        ("expected_failure = 'n2'\n", "must be an array of tables"),
        (
            "[[expected_failure]]\nvariant = 'n2'\nreason = 'a'\n"
            "[[expected_failure]]\nvariant = 'n2'\nreason = 'b'\n",
            "expected_failure 2: n2 is listed twice",
        ),
    ],
)
def test_a_malformed_file_is_a_usage_error_before_any_request(
    text: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    listed = expected_file(tmp_path, text)
    state = FakeState()
    code, out, err = run(capsys, state, "--expected-failures", listed)
    assert code == 2
    assert err.startswith(f"streamguard conformance: error: --expected-failures {listed}: ")
    assert message in err
    assert out == ""
    assert state.requests == 0


def test_a_missing_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, FakeState(), "--expected-failures", str(tmp_path / "none.toml"))
    assert code == 2
    assert "none.toml: No such file or directory" in err


def test_an_empty_file_lists_nothing() -> None:
    assert parse_expected_failures("# nothing known yet\n") == ()


@pytest.mark.parametrize(
    ("outcome", "reason", "entry", "unexpected", "expected", "stale", "unchecked"),
    [
        # A variant that failed with no finding (before the stream): only a whole-variant
        # entry covers it.
        ("error", "HTTP 503 before the stream", ExpectedFailure("v", "r"), [], ["v"], [], []),
        ("error", "HTTP 503", ExpectedFailure("v", "r", "missing_finish_reason"), ["v"], [],
         ["v (missing_finish_reason)"], []),
        # Skipped: it no longer fails (stale), unless it did not run at all.
        ("skipped", "unsupported: HTTP 400", ExpectedFailure("v", "r"), [], [], ["v"], []),
        ("skipped", "not run: --max-requests 3 spent", ExpectedFailure("v", "r"), [], [], [],
         ["v"]),
        ("flaky", "", ExpectedFailure("v", "r"), [], ["v"], [], []),
    ],
)  # fmt: skip
def test_judging_the_edges(
    outcome: str,
    reason: str,
    entry: ExpectedFailure,
    unexpected: list[str],
    expected: list[str],
    stale: list[str],
    unchecked: list[str],
) -> None:
    verdict = judge(summary(variant("v", outcome, reason=reason)), [entry])
    assert list(verdict.unexpected) == unexpected
    assert list(verdict.expected) == expected
    assert [str(e) for e, _ in verdict.stale] == stale
    assert [str(e) for e in verdict.unchecked] == unchecked


def test_a_warning_fails_only_under_fail_on_warning() -> None:
    """The rules an entry must list are those that failed the variant, as the run judged."""
    run_summary = summary(
        variant("v", "fail", ("feature_ignored", "warning"), ("missing_finish_reason", "error"))
    )
    entry = ExpectedFailure("v", "r", "missing_finish_reason")
    assert judge(run_summary, [entry]).failed is False
    assert list(judge(run_summary, [entry], Severity.WARNING).unexpected) == ["v"]


# -- the HTML matrix ---------------------------------------------------------------------------


def _dom_in_place(page: Path, tmp_path: Path) -> Node:
    from tests.chromium import run_chromium

    return parse_dom(run_chromium(tmp_path / "profile", "--dump-dom", page.as_uri()).stdout)


def rows(dom: Node) -> dict[str, Node]:
    return {n.attrs["data-variant"]: n for n in dom.find_all("tr") if "data-variant" in n.attrs}


def cell(row: Node, css: str) -> Node:
    return next(n for n in row.find_all("td") if css in n.classes)


def test_the_matrix_of_a_real_run_shows_every_variant_and_outcome(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without captures: every variant a row, its outcome in its cell, the failing rules
    listed, the reason of a skip shown, no link anywhere."""
    page = tmp_path / "out" / "conformance.html"
    page.parent.mkdir()
    state = FakeState(bugs=frozenset({"tool_header_repeated"}), refuse=frozenset({"logprobs"}))
    code, out, _ = run(
        capsys, state, "--variants", "plain,tool_required,logprobs,length", "--html", str(page)
    )
    assert code == 1
    assert f"HTML matrix written to {page}" in out
    dom = _dom_in_place(page, tmp_path)
    shown = rows(dom)
    assert {name: row.attrs["data-outcome"] for name, row in shown.items()} == {
        "plain": "pass",
        "tool_required": "fail",
        "logprobs": "skipped",
        "length": "pass",
    }
    assert {name: cell(row, "outcome").text for name, row in shown.items()} == {
        "plain": "pass",
        "tool_required": "fail",
        "logprobs": "skipped",
        "length": "pass",
    }
    rules = [li.text for li in cell(shown["tool_required"], "findings").find_all("li")]
    # A warning on the variant's focus: it failed the variant, and the page says so.
    assert "tool_call_header_repeated x2 (focus: fails it)" in rules
    assert "unsupported" in cell(shown["logprobs"], "notes").text
    assert dom.find_all("a") == []
    assert [th.text for th in dom.find_all("thead")[0].find_all("th")] == [
        "variant", "outcome", "findings by rule", "notes"
    ]  # fmt: skip
    verdict = dom.by_id("verdict")
    assert verdict is not None
    assert verdict.text == "run failed: 1 unexpected failure (2 pass, 1 fail, 1 skipped)"
    facts = dom.by_id("run")
    assert facts is not None
    assert "model fake" in facts.text
    assert "protocol openai_chat" in facts.text
    assert dom.find_all("title")[0].text == "streamguard conformance: openai_chat, fake"


def _capture(url: str, request: dict[str, Any], path: Path) -> None:
    """Save the stream of ``request`` as ``--save`` does: probe's capture format."""
    code = main(["probe", f"{url}/chat/completions", "-d", json.dumps(request), "--save",
                 str(path), "--format", "json"])  # fmt: skip
    assert code in (0, 1)
    assert path.stat().st_size > 0


def test_each_outcome_links_to_its_stream_timeline_page(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With captures (the ``--save DIR`` contract): a timeline page beside each capture,
    each outcome cell and stream linked to it by a relative link that resolves; a capture
    name that leaves the directory and a missing capture get no link."""
    captures = tmp_path / "captures"
    captures.mkdir()
    state = FakeState(bugs=frozenset({"tool_header_repeated"}))
    with fake_endpoint(state) as url:
        main(["conformance", url, "--model", "fake", "--json",
              "--variants", "plain,tool_required,length"])  # fmt: skip
        report = json.loads(capsys.readouterr()[0])
        by_name = {result["name"]: result for result in report["variants"]}
        for name in ("plain", "tool_required"):
            _capture(url, by_name[name]["request"], captures / f"{name}.jsonl")
    capsys.readouterr()
    by_name["plain"]["captures"] = ["plain.jsonl"]
    by_name["tool_required"]["captures"] = ["tool_required.jsonl", "../escape.jsonl", "gone.jsonl"]
    (tmp_path / "escape.jsonl").write_text((captures / "plain.jsonl").read_text())
    page = tmp_path / "report" / "conformance.html"
    page.parent.mkdir()
    outputs = write_outputs(report, html_path=str(page), captures_dir=str(captures))
    assert outputs.written == (str(page),)
    dom = _dom_in_place(page, tmp_path)
    shown = rows(dom)
    assert set(shown) == {"plain", "tool_required", "length"}
    hrefs = {}
    for name, row in shown.items():
        links = cell(row, "outcome").find_all("a")
        hrefs[name] = [a.attrs["href"] for a in links]
    assert hrefs == {
        "plain": ["../captures/plain.html"],
        "tool_required": ["../captures/tool_required.html"],
        "length": [],
    }
    streams = cell(shown["tool_required"], "streams")
    assert [a.text for a in streams.find_all("a")] == ["tool_required.jsonl"]
    assert "../escape.jsonl: not a capture name" in streams.text
    assert "gone.jsonl: missing" in streams.text
    assert not (tmp_path / "escape.html").exists()
    for name in ("plain", "tool_required"):
        target = (page.parent / unquote(hrefs[name][0])).resolve()
        assert target == (captures / f"{name}.html").resolve()
        assert target.is_file()
    timeline = _dom_in_place(captures / "tool_required.html", tmp_path)
    assert "tool_required: tool_required.jsonl" in timeline.find_all("title")[0].text
    found = [row.text for row in timeline.find_all("tr", "finding")]
    assert any("tool_call_header_repeated" in text for text in found), found
    # The timeline page of the clean stream has its events, and no finding.
    clean = _dom_in_place(captures / "plain.html", tmp_path)
    assert clean.find_all("tr", "finding") == []
    assert clean.find_all("circle", "mark-event") or clean.find_all("g", "mark-group")


HOSTILE_HTML = (
    "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script>"
)


def test_hostile_strings_in_the_matrix_stay_text(tmp_path: Path) -> None:
    """A model name, a variant name, a finding's message, a reason, an unknown outcome and
    a capture name that spell markup: text in the DOM, no element they spell exists."""
    captures = tmp_path / "captures"
    captures.mkdir()
    run_summary = summary(
        variant(HOSTILE_HTML, "fail", (HOSTILE_HTML, "error"), message=HOSTILE_HTML,
                reason=HOSTILE_HTML, captures=[HOSTILE_HTML]),
        variant("odd", HOSTILE_HTML),
        model=HOSTILE_HTML,
        protocol=HOSTILE_HTML,
    )  # fmt: skip
    page = tmp_path / "page.html"
    write_outputs(
        run_summary,
        html_path=str(page),
        captures_dir=str(captures),
        expected=[ExpectedFailure(HOSTILE_HTML, HOSTILE_HTML)],
    )
    dom = _dom_in_place(page, tmp_path)
    assert dom.find_all("img") == []
    assert dom.find_all("script") == []
    title = dom.find_all("title")[0].text
    assert "owned" in title  # the text is there...
    assert title.startswith("streamguard conformance: <img")  # ...as text
    shown = rows(dom)
    assert set(shown) == {HOSTILE_HTML, "odd"}
    assert shown["odd"].attrs["data-outcome"] == "other"
    assert cell(shown["odd"], "outcome").text.startswith("other (<img")
    row = shown[HOSTILE_HTML]
    assert HOSTILE_HTML in cell(row, "findings").text
    assert HOSTILE_HTML in cell(row, "notes").text
    assert "expected failure: " + HOSTILE_HTML in cell(row, "notes").text


def test_the_page_allows_no_script_and_loads_nothing() -> None:
    page = matrix_html(summary(variant("plain", "pass")))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    assert policy.group(1) == "default-src 'none'; style-src 'unsafe-inline'"
    assert "<script" not in page
    assert not re.search(r"(src|href)=\"?https?:", page)


def test_findings_and_text_are_bounded() -> None:
    """A replayed summary with thousands of long findings: the page and the JUnit list
    ``MAX_FINDINGS_LISTED`` of them, each cut at ``MAX_TEXT_CHARS``, every rule counted."""
    long = "x" * (MAX_TEXT_CHARS * 10)
    many = variant("v", "fail", *[("missing_finish_reason", "error")] * 5000, message=long)
    run_summary = summary(many)
    page = matrix_html(run_summary)
    assert "missing_finish_reason x5000" in page
    assert "<summary>5000 findings</summary>" in page
    assert page.count("x" * (MAX_TEXT_CHARS - 1) + "…") == MAX_FINDINGS_LISTED
    assert "x" * MAX_TEXT_CHARS not in page
    assert f"and {5000 - MAX_FINDINGS_LISTED} more findings" in page
    assert len(page) < 100 * 1024
    text = junit_xml(run_summary)
    assert len(text) < 100 * 1024
    assert f"and {5000 - MAX_FINDINGS_LISTED} more findings" in text


def test_a_report_that_cannot_be_written_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for option in ("--html", "--junit"):
        target = tmp_path / "no" / "such" / "dir" / "out"
        code, _, err = run(capsys, FakeState(), "--variants", "plain", option, str(target))
        assert code == 2
        assert f"streamguard conformance: error: {option} {target}: No such file" in err


def test_json_output_stays_json_with_the_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With --json, what the reports say goes to stderr: stdout is the summary alone."""
    listed = expected_file(
        tmp_path, '[[expected_failure]]\nvariant = "plain"\nreason = "not any more"\n'
    )
    code, out, err = run(
        capsys, FakeState(), "--json", "--variants", "plain",
        "--html", str(tmp_path / "m.html"), "--expected-failures", listed,
    )  # fmt: skip
    assert code == 1
    assert json.loads(out)["variants"][0]["outcome"] == "pass"
    assert "stale expected failure" in err
    assert "HTML matrix written to" in err


@pytest.mark.parametrize("option", ["save", "replay"])
def test_the_command_links_the_streams_of_its_captures_directory(
    option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The contract with ``--save DIR`` / ``--replay DIR`` (parsed by another part of the
    command): the directory they name is where the matrix finds the captures the summary
    lists, and where their timeline pages go."""
    import argparse

    from streamguard.cli import _conformance_outputs
    from streamguard.timeline import Arrival, write_capture

    captures = tmp_path / "run"
    captures.mkdir()
    body = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}'
        b"\n\ndata: [DONE]\n\n"
    )
    with (captures / "plain.jsonl").open("w") as file:
        write_capture(file, {"url": "http://x/v1", "status": 200}, [Arrival(0.1, body)])
    page = tmp_path / "conformance.html"
    args = argparse.Namespace(
        format="table",
        html=str(page),
        junit=None,
        expected_failures=None,
        fail_on="error",
        **{option: str(captures)},
    )
    run_summary = summary(variant("plain", "pass", captures=["plain.jsonl"]))
    assert _conformance_outputs(args, run_summary, ()) == 0
    capsys.readouterr()
    assert (captures / "plain.html").is_file()
    dom = _dom_in_place(page, tmp_path)
    assert [a.attrs["href"] for a in cell(rows(dom)["plain"], "outcome").find_all("a")] == [
        "run/plain.html"
    ]


def test_one_finding_is_counted_in_the_singular() -> None:
    page = matrix_html(summary(variant("v", "fail", ("missing_finish_reason", "error"))))
    assert "<summary>1 finding</summary>" in page
