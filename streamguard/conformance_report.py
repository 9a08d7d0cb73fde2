"""The reports of a ``streamguard conformance`` run that a team keeps in CI.

Pure functions over the run's summary JSON (``streamguard.conformance.summary_json``, or a
``conformance.json`` saved beside the captures), so the same report comes out of a live
run, a replay of saved captures, or a file kept from last week:

* ``matrix_html``: one self-contained page, a row per variant with its outcome at a
  glance, the findings by rule, why it was skipped or expected; each outcome links to the
  timeline page of the variant's stream when its capture was saved (``timeline_pages``
  writes ``<capture>.html`` beside each capture with ``streamguard.timeline.render_streams``);
* ``junit_xml``: one ``testsuite`` per run, one ``testcase`` per variant, for the CI's
  test report;
* ``read_expected_failures`` and ``judge``: a TOML file of known failures (each with its
  reason) so that a known gap does not fail the run and does not hide a new one: a
  listed failure passes, an entry that no longer fails (stale) fails the run, an unlisted
  failure fails as always.

The summary is read defensively: every key but ``variants`` is optional (a run of another
version may lack ``protocol`` or ``captures``), an outcome this module does not know is
shown as ``other``, and every string that may hold wire content (a finding's message, a
model name) is escaped for HTML or XML and cut at ``MAX_TEXT_CHARS``. A variant lists at
most ``MAX_FINDINGS_LISTED`` findings and links at most ``MAX_CAPTURES_LINKED`` streams;
each timeline page keeps the timeline's own bounds. The API key is never part of the
summary; the endpoint is shown without credentials or query all the same.
"""

from __future__ import annotations

import html
import math
import os
import re
import tomllib
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit, urlunsplit

from streamguard._format import severity_at_least
from streamguard.conformance import FAILED, VariantOutcome
from streamguard.monitor import check_stream
from streamguard.protocols import AUTO, CHECKERS
from streamguard.report import Severity
from streamguard.request import RequestFacts
from streamguard.timeline import (
    Stream,
    capture_arrivals,
    capture_lines,
    read_capture_header,
    render_streams,
    timeline_of,
)

__all__ = [
    "FAILING_OUTCOMES",
    "MAX_CAPTURES_LINKED",
    "MAX_EXPECTED_FAILURES_BYTES",
    "MAX_FINDINGS_LISTED",
    "MAX_TEXT_CHARS",
    "OTHER",
    "ExpectedFailure",
    "Outputs",
    "StreamLink",
    "Verdict",
    "judge",
    "junit_xml",
    "matrix_html",
    "parse_expected_failures",
    "read_expected_failures",
    "timeline_pages",
    "write_outputs",
]

#: The outcomes that fail a run (unless expected): ``conformance.FAILED``, and ``flaky``
#: (a variant that failed some of its ``--repeat`` runs). An intermittent break is one a
#: production client meets intermittently (vllm#27572: tool streams that sometimes end
#: with a null finish); a variant passes only when every repeat passes (pass^k).
FAILING_OUTCOMES: Final[frozenset[str]] = frozenset({*(o.value for o in FAILED), "flaky"})
#: Outcomes that mean "not judged": the endpoint refused the option, the model did not do
#: it, the budget ran out. JUnit calls them skipped.
_SKIPPED_OUTCOMES: Final[frozenset[str]] = frozenset(
    {VariantOutcome.SKIPPED.value, "unsupported", "not_exercised", "not_run"}
)
_KNOWN_OUTCOMES: Final[frozenset[str]] = frozenset(
    {*(o.value for o in VariantOutcome), *FAILING_OUTCOMES, *_SKIPPED_OUTCOMES}
)
#: How an outcome this module does not know is shown (a run of a later version).
OTHER: Final = "other"
#: A skipped variant whose reason starts so was not run at all (``--max-requests``, a
#: budget): an expected failure on it is neither confirmed nor stale.
_NOT_RUN: Final = "not run"

#: The longest string from the summary shown (a finding's message quotes the wire).
MAX_TEXT_CHARS: Final = 500
#: Findings of one variant listed in full, in the page and in the JUnit text (every rule
#: is still counted).
MAX_FINDINGS_LISTED: Final = 50
#: Streams of one variant linked to a timeline page (``--repeat k`` saves k of them).
MAX_CAPTURES_LINKED: Final = 32
#: The largest expected-failures file read: a few hundred entries fit in a fraction.
MAX_EXPECTED_FAILURES_BYTES: Final = 1024 * 1024
#: The key of the expected-failures file's array of tables.
_ENTRY_TABLE: Final = "expected_failure"
_ENTRY_KEYS: Final[frozenset[str]] = frozenset({"variant", "rule", "reason"})
#: A capture's file name as ``--save`` writes it (``<variant>.jsonl``, ``<variant>-<k>.jsonl``):
#: a plain name in the captures directory, never a path out of it.
_CAPTURE_NAME: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\.jsonl")
#: Bytes handed to the engine at a time when a capture is checked for its page.
_PIECE_BYTES: Final = 64 * 1024
#: Characters XML 1.0 cannot hold, even escaped (control characters, lone surrogates).
_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# -- reading the summary -----------------------------------------------------------------------


def _text(value: object, limit: int = MAX_TEXT_CHARS) -> str:
    """A value of the summary as bounded text (a non-string as its JSON-ish repr)."""
    text = value if isinstance(value, str) else "" if value is None else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _outcome(variant: Mapping[str, Any]) -> str:
    """The variant's outcome, ``OTHER`` when this module does not know it."""
    outcome = variant.get("outcome")
    return outcome if isinstance(outcome, str) and outcome in _KNOWN_OUTCOMES else OTHER


def _variants(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    variants = summary.get("variants")
    return [v for v in variants if isinstance(v, dict)] if isinstance(variants, list) else []


def _name(variant: Mapping[str, Any]) -> str:
    return _text(variant.get("name"), 128) or "?"


def _findings(variant: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    findings = variant.get("findings")
    return [f for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []


def _severity(finding: Mapping[str, Any]) -> Severity | None:
    severity = finding.get("severity")
    try:
        return Severity(severity) if isinstance(severity, str) else None
    except ValueError:
        return None


def _rule_counts(variant: Mapping[str, Any]) -> dict[str, tuple[str, int, bool]]:
    """Rule -> the worst severity of its findings (``other`` when none reads), how many
    findings, and whether one is on the variant's focus (it fails the variant whatever
    its severity); in the order the rules first came."""
    counts: dict[str, tuple[Severity | None, int, bool]] = {}
    for finding in _findings(variant):
        rule = _text(finding.get("rule"), 80)
        severity = _severity(finding)
        worst, count, focus = counts.get(rule, (None, 0, False))
        if severity is not None and (worst is None or severity_at_least(severity, worst)):
            worst = severity
        counts[rule] = (worst, count + 1, focus or finding.get("focus") is True)
    return {
        rule: (OTHER if worst is None else worst.value, count, focus)
        for rule, (worst, count, focus) in counts.items()
    }


def _rules_line(variant: Mapping[str, Any]) -> str:
    """``missing_finish_reason x2, usage_missing`` (as the table report writes them)."""
    return ", ".join(
        rule if count == 1 else f"{rule} x{count}"
        for rule, (_, count, _) in _rule_counts(variant).items()
    )


def _finding_lines(variant: Mapping[str, Any]) -> list[str]:
    findings = _findings(variant)
    lines = [
        f"{_text(f.get('severity'), 16)} {_text(f.get('rule'), 80)}"
        f"{' (focus)' if f.get('focus') is True else ''}: {_text(f.get('message'))}"
        for f in findings[:MAX_FINDINGS_LISTED]
    ]
    if len(findings) > MAX_FINDINGS_LISTED:
        lines.append(f"... and {len(findings) - MAX_FINDINGS_LISTED} more findings")
    return lines


def _shown_endpoint(endpoint: object) -> str:
    """The endpoint without credentials or query (the summary has none; a hand-edited
    file might)."""
    text = _text(endpoint)
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:  # a port that is no number
        return "?"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


# -- expected failures ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExpectedFailure:
    """One entry of the expected-failures file: the variant, optionally the one rule it is
    expected to fail by, and why (required: a known gap is written down, not hidden)."""

    variant: str
    reason: str
    rule: str | None = None

    def __str__(self) -> str:
        return self.variant if self.rule is None else f"{self.variant} ({self.rule})"


def parse_expected_failures(text: str, source: str = "the file") -> tuple[ExpectedFailure, ...]:
    """The entries of an expected-failures file (TOML); a ``ValueError`` says what is
    wrong, naming ``source`` and the entry.

    .. code-block:: toml

        [[expected_failure]]
        variant = "tool_required"
        rule = "tool_call_header_repeated"   # optional: only this rule is expected
        reason = "repeats the tool-call id on every delta (llama.cpp PR #13800)"
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not TOML: {exc}") from None
    unknown = sorted(set(document) - {_ENTRY_TABLE})
    if unknown:
        raise ValueError(
            f"{source}: unknown key {unknown[0]!r}: expected [[{_ENTRY_TABLE}]] tables only"
        )
    entries = document.get(_ENTRY_TABLE, [])
    if not isinstance(entries, list):
        raise ValueError(f"{source}: {_ENTRY_TABLE} must be an array of tables ([[...]])")
    parsed: list[ExpectedFailure] = []
    seen: set[tuple[str, str | None]] = set()
    for number, entry in enumerate(entries, start=1):
        where = f"{source}: {_ENTRY_TABLE} {number}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: not a table")
        extra = sorted(set(entry) - _ENTRY_KEYS)
        if extra:
            raise ValueError(f"{where}: unknown key {extra[0]!r} (expected variant, rule, reason)")
        for key in ("variant", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ValueError(f"{where}: {key} is required, a non-empty string")
        rule = entry.get("rule")
        if rule is not None and (not isinstance(rule, str) or not rule.strip()):
            raise ValueError(f"{where}: rule, when given, is a non-empty string")
        failure = ExpectedFailure(entry["variant"].strip(), entry["reason"].strip(), rule)
        if (failure.variant, failure.rule) in seen:
            raise ValueError(f"{where}: {failure} is listed twice")
        seen.add((failure.variant, failure.rule))
        parsed.append(failure)
    return tuple(parsed)


def read_expected_failures(path: str | None) -> tuple[ExpectedFailure, ...]:
    """The entries of the file at ``path`` (None: no file, no entries); a ``ValueError``
    says what is wrong, the path first."""
    if path is None:
        return ()
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_EXPECTED_FAILURES_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > MAX_EXPECTED_FAILURES_BYTES:
        raise ValueError(f"{path}: larger than {MAX_EXPECTED_FAILURES_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    return parse_expected_failures(text, path)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A run judged against its expected failures."""

    #: Failed variants no entry covers, each with why (the rules no entry lists).
    unexpected: dict[str, str] = field(default_factory=dict)
    #: Failed variants their entries cover, each with the entries' reasons.
    expected: dict[str, str] = field(default_factory=dict)
    #: Entries whose variant (or rule) no longer fails: they fail the run.
    stale: tuple[tuple[ExpectedFailure, str], ...] = ()
    #: Entries whose variant did not run here: neither confirmed nor stale.
    unchecked: tuple[ExpectedFailure, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the run fails: an unexpected failure or a stale entry."""
        return bool(self.unexpected or self.stale)

    def stale_for(self, variant: str) -> list[str]:
        return [why for entry, why in self.stale if entry.variant == variant]

    def lines(self, source: str) -> list[str]:
        """What a terminal says about the expected failures read from ``source``."""
        lines = [f"expected failure: {name} ({why})" for name, why in self.expected.items()]
        lines += [f"stale expected failure in {source}: {why}" for _, why in self.stale]
        lines += [f"unexpected failure: {name}: {why}" for name, why in self.unexpected.items()]
        lines += [
            f"expected failure not checked: {entry}: the variant did not run"
            for entry in self.unchecked
        ]
        return lines


def _failing_rules(variant: Mapping[str, Any], fail_on: Severity) -> set[str]:
    """The rules of the findings that fail a variant (at or above ``fail_on``, or on its
    focus), as the run judged them."""
    rules = set()
    for finding in _findings(variant):
        severity = _severity(finding)
        failing = severity is not None and severity_at_least(severity, fail_on)
        if failing or finding.get("focus") is True:
            rules.add(_text(finding.get("rule"), 80))
    return rules


def judge(
    summary: Mapping[str, Any],
    expected: Sequence[ExpectedFailure] = (),
    fail_on: Severity = Severity.ERROR,
) -> Verdict:
    """Judge the run: which failures the entries cover, which entries are stale.

    An entry without ``rule`` covers its variant's failure whatever fails it. Entries with
    a rule cover it when every rule that fails it is listed; a failing rule none lists is
    a new failure (the run fails), and a listed rule that no longer fails it is stale. A
    variant that failed with no finding (an error before the stream, a cut stream) is
    covered only by an entry without rule. An entry whose variant passed or was skipped
    is stale; one whose variant did not run (absent, or skipped as not run) is unchecked.
    """
    by_variant: dict[str, list[ExpectedFailure]] = {}
    for entry in expected:
        by_variant.setdefault(entry.variant, []).append(entry)
    unexpected: dict[str, str] = {}
    covered: dict[str, str] = {}
    stale: list[tuple[ExpectedFailure, str]] = []
    unchecked: list[ExpectedFailure] = []
    seen: set[str] = set()
    for variant in _variants(summary):
        name = _name(variant)
        seen.add(name)
        entries = by_variant.get(name, [])
        outcome = _outcome(variant)
        if outcome not in FAILING_OUTCOMES:
            reason = _text(variant.get("reason"))
            if outcome in _SKIPPED_OUTCOMES and reason.startswith(_NOT_RUN):
                unchecked += entries
            else:
                stale += [(e, f"{e} no longer fails (outcome {outcome})") for e in entries]
            continue
        rules = _failing_rules(variant, fail_on)
        whole = [e for e in entries if e.rule is None]
        listed = {e.rule for e in entries if e.rule is not None}
        stale += [
            (e, f"{e} no longer fails by {e.rule}")
            for e in entries
            if e.rule is not None and e.rule not in rules
        ]
        if whole:
            covered[name] = "; ".join(e.reason for e in whole)
            continue
        new = sorted(rules - listed)
        if not entries:
            unexpected[name] = f"{outcome}: " + (", ".join(sorted(rules)) or _why(variant))
        elif new or not rules:
            what = ", ".join(new) if new else f"no finding ({_why(variant)})"
            unexpected[name] = f"{outcome} by {what}, which no expected failure lists"
        else:
            covered[name] = "; ".join(e.reason for e in entries if e.rule in rules)
    unchecked += [e for name, entries in by_variant.items() if name not in seen for e in entries]
    return Verdict(unexpected, covered, tuple(stale), tuple(unchecked))


def _why(variant: Mapping[str, Any]) -> str:
    return _text(variant.get("reason")) or _rules_line(variant) or "no reason given"


# -- JUnit XML ---------------------------------------------------------------------------------


def _xml(value: str) -> str:
    """Text XML 1.0 can hold: each character it cannot (even escaped) as U+FFFD."""
    return _NOT_XML.sub("\ufffd", value)


def _seconds(variant: Mapping[str, Any]) -> float:
    timing = variant.get("timing")
    duration = timing.get("duration_s") if isinstance(timing, dict) else None
    if type(duration) is not float and type(duration) is not int:
        return 0.0
    try:
        seconds = float(duration)
    except OverflowError:  # a JSON integer of hundreds of digits, in a hand-edited file
        return 0.0
    return seconds if math.isfinite(seconds) and seconds >= 0 else 0.0


def _testcase(
    variant: Mapping[str, Any], verdict: Verdict, classname: str
) -> tuple[ElementTree.Element, str | None]:
    """The variant's testcase and what it counts as (``failure``, ``error``, ``skipped``
    or None for a pass)."""
    name = _name(variant)
    case = ElementTree.Element(
        "testcase",
        {"name": _xml(name), "classname": classname, "time": f"{_seconds(variant):.3f}"},
    )
    outcome = _outcome(variant)
    details = "\n".join(_finding_lines(variant))
    stale = verdict.stale_for(name)
    kind: str | None
    if stale:
        kind, kind_type = "failure", "stale-expected-failure"
        message = "; ".join(stale)
        details = "\n".join([*stale, details]).strip()
    elif name in verdict.unexpected:
        kind = "error" if outcome == VariantOutcome.ERROR.value else "failure"
        kind_type, message = outcome, verdict.unexpected[name]
    elif name in verdict.expected:
        kind, kind_type = "skipped", "expected-failure"
        message = f"expected failure ({outcome}): {verdict.expected[name]}"
    elif outcome in _SKIPPED_OUTCOMES:
        kind, kind_type, message = "skipped", outcome, _why(variant)
    elif outcome == OTHER:
        shown = _text(variant.get("outcome"), 40)
        kind, kind_type = "skipped", OTHER
        message = f"outcome {shown!r}, unknown to this report: {_why(variant)}"
    else:  # pass (warnings below --fail-on may remain: in system-out)
        kind, kind_type, message = None, "", ""
    if kind is not None:
        element = ElementTree.SubElement(
            case, kind, {"type": _xml(kind_type), "message": _xml(_text(message))}
        )
        element.text = _xml(details) or None
    elif details:
        ElementTree.SubElement(case, "system-out").text = _xml(details)
    return case, kind


def junit_xml(
    summary: Mapping[str, Any], verdict: Verdict | None = None, now: datetime | None = None
) -> str:
    """The run as JUnit XML: ``testsuites`` holding one ``testsuite``, one ``testcase`` per
    variant. A failed variant is a ``failure`` (``error`` for the outcome ``error``, an
    endpoint that could not answer); a flaky one a ``failure`` too; a skipped one (not
    supported, not exercised, not run) ``skipped``; an expected failure ``skipped`` of type
    ``expected-failure`` (as pytest reports an xfail); a stale entry a ``failure`` on its
    variant; an outcome this module does not know ``skipped`` of type ``other``. The counts
    on both elements add up to the testcases'."""
    verdict = verdict if verdict is not None else judge(summary)
    protocol = _text(summary.get("protocol"), 64) or "unknown"
    classname = _xml(f"streamguard.conformance.{protocol}")
    cases = [_testcase(v, verdict, classname) for v in _variants(summary)]
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(kind == "failure" for _, kind in cases)),
        "errors": str(sum(kind == "error" for _, kind in cases)),
        "skipped": str(sum(kind == "skipped" for _, kind in cases)),
        "time": f"{sum(_seconds(v) for v in _variants(summary)):.3f}",
    }
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S")
    endpoint = _shown_endpoint(summary.get("endpoint"))
    root = ElementTree.Element("testsuites", {"name": "streamguard conformance", **counts})
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        {
            "name": _xml(f"streamguard conformance {protocol}"),
            **counts,
            "timestamp": stamp,
            "hostname": _xml(urlsplit(endpoint).hostname or "unknown"),
            "id": "0",
            "package": classname,
        },
    )
    properties = ElementTree.SubElement(suite, "properties")
    for key in ("endpoint", "model", "protocol", "streamguard"):
        value = endpoint if key == "endpoint" else _text(summary.get(key))
        ElementTree.SubElement(properties, "property", {"name": key, "value": _xml(value)})
    suite.extend(case for case, _ in cases)
    ElementTree.SubElement(suite, "system-out")
    ElementTree.SubElement(suite, "system-err")
    body = ElementTree.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'


# -- the timeline pages ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamLink:
    """One saved stream of a variant: its capture's name and its timeline page (None,
    with ``problem`` saying why, when the capture could not be drawn)."""

    capture: str
    page: Path | None
    problem: str | None = None


def _captures(variant: Mapping[str, Any]) -> list[str]:
    captures = variant.get("captures")
    if not isinstance(captures, list):
        return []
    return [_text(c, 160) for c in captures[:MAX_CAPTURES_LINKED]]


def _pieces(path: Path, clock: list[float]) -> Iterator[bytes]:
    """The capture's body in pieces, ``clock`` set to each chunk's arrival time (the
    report's times are the stream's, not the checking's)."""
    with open(path, "rb") as file:
        lines = capture_lines(file)
        read_capture_header(next(lines, ""))
        for arrival in capture_arrivals(lines):
            clock[0] = arrival.at
            for start in range(0, len(arrival.data), _PIECE_BYTES):
                yield arrival.data[start : start + _PIECE_BYTES]


def _page_of(path: Path, label: str, protocol: str, request: object) -> str:
    """The timeline page of one capture, checked by the engine with the variant's request
    (``ValueError`` for a capture that does not read)."""
    with open(path, "rb") as file:
        header = read_capture_header(next(capture_lines(file), ""))
    shown = header.get("protocol")
    if isinstance(shown, str) and shown in CHECKERS:
        protocol = shown
    facts = RequestFacts(request) if isinstance(request, dict) else None
    clock = [0.0]
    report = check_stream(
        _pieces(path, clock), protocol=protocol, request=facts, clock=lambda: clock[0]
    )
    with open(path, "rb") as file:
        lines = capture_lines(file)
        read_capture_header(next(lines, ""))
        timeline = timeline_of(capture_arrivals(lines), report.protocol)
    band = Stream(
        label,
        report,
        timeline.marks,
        timed=True,
        ended_at=clock[0],
        cut_at=None if timeline.complete else timeline.covered_bytes,
        blocks_left_out=timeline.blocks_left_out,
    )
    return render_streams([band], title=label)


def timeline_pages(
    summary: Mapping[str, Any], captures_dir: str | Path
) -> dict[str, list[StreamLink]]:
    """Write the timeline page of each variant's saved streams beside its capture
    (``DIR/plain.jsonl`` -> ``DIR/plain.html``); the links, by variant. A capture name
    that is no plain file name of the directory, a missing or unreadable capture, gets no
    page (the link says why). An ``OSError`` writing a page propagates."""
    directory = Path(captures_dir)
    protocol = summary.get("protocol")
    protocol = protocol if isinstance(protocol, str) and protocol in CHECKERS else AUTO
    links: dict[str, list[StreamLink]] = {}
    for variant in _variants(summary):
        name = _name(variant)
        for capture in _captures(variant):
            if not _CAPTURE_NAME.fullmatch(capture):
                links.setdefault(name, []).append(StreamLink(capture, None, "not a capture name"))
                continue
            path = directory / capture
            try:
                page = _page_of(path, f"{name}: {capture}", protocol, variant.get("request"))
            except FileNotFoundError:
                links.setdefault(name, []).append(StreamLink(capture, None, "missing"))
                continue
            except (OSError, ValueError) as exc:
                problem = f"unreadable: {_text(str(exc), 120)}"
                links.setdefault(name, []).append(StreamLink(capture, None, problem))
                continue
            target = path.with_suffix(".html")
            target.write_text(page, encoding="utf-8")
            links.setdefault(name, []).append(StreamLink(capture, target))
    return links


# -- the HTML matrix ---------------------------------------------------------------------------

_STYLE: Final = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; } th, td { padding: 4px 10px; border-bottom: 1px solid #e4e4e4;
  text-align: left; vertical-align: top; }
thead th { border-bottom: 2px solid #ccc; }
td.outcome { font-weight: bold; text-align: center; min-width: 6em; border-radius: 3px; }
td.outcome a { color: inherit; }
.outcome-pass td.outcome { background: #d9f2df; color: #175c2a; }
.outcome-fail td.outcome, .outcome-flaky td.outcome { background: #f9d6d5; color: #8a1410; }
.outcome-error td.outcome { background: #fbe3c4; color: #7a4100; }
.outcome-skipped td.outcome, .outcome-unsupported td.outcome,
.outcome-not_exercised td.outcome, .outcome-not_run td.outcome { background: #eee; color: #555; }
.outcome-other td.outcome { background: #e6e0f5; color: #40307a; }
tr.expected td.outcome { background: #fdf3c4; color: #6b5500; }
tr.stale td.outcome { outline: 3px solid #c00; }
ul.rules { margin: 0; padding-left: 1.1em; }
li.error { color: #b3261e; } li.warning { color: #a86200; }
li.info { color: #2a6fa8; } .note { color: #555; } code { background: #f4f4f4; padding: 0 3px; }
details pre { white-space: pre-wrap; word-break: break-all; background: #f7f7f7; padding: 6px;
  margin: 4px 0; font-size: 12px; }
.verdict-failed { color: #8a1410; font-weight: bold; } .verdict-passed { color: #175c2a;
  font-weight: bold; }
"""


def _e(value: str) -> str:
    return html.escape(value, quote=True)


def _href(page: Path, base: Path) -> str:
    """A link from a page in ``base`` to ``page``, relative (the report moves with its
    directory: a CI artifact) and percent-encoded."""
    return quote(Path(os.path.relpath(page, base)).as_posix())


def _row(
    variant: Mapping[str, Any],
    verdict: Verdict,
    links: Sequence[StreamLink],
    base: Path,
    with_streams: bool,
) -> str:
    name = _name(variant)
    outcome = _outcome(variant)
    shown_outcome = outcome if outcome != OTHER else f"other ({_text(variant.get('outcome'), 40)})"
    classes = [f"outcome-{outcome}"]
    notes: list[str] = []
    if name in verdict.expected:
        classes.append("expected")
        shown_outcome += " (expected)"
        notes.append(f"expected failure: {verdict.expected[name]}")
    if name in verdict.unexpected and verdict.expected:
        notes.append(f"unexpected: {verdict.unexpected[name]}")
    stale = verdict.stale_for(name)
    if stale:
        classes.append("stale")
        notes += [f"stale expected failure: {why}" for why in stale]
    reason = _text(variant.get("reason"))
    if reason:
        notes.insert(0, reason)
    pages = [link for link in links if link.page is not None]
    cell = _e(shown_outcome)
    if pages:
        assert pages[0].page is not None
        cell = f'<a href="{_e(_href(pages[0].page, base))}">{cell}</a>'
    rules = "".join(
        f'<li class="{_e(severity)}">{_e(rule)}{f" x{count}" if count > 1 else ""}'
        f"{' (focus: fails it)' if focus else ''}</li>"
        for rule, (severity, count, focus) in _rule_counts(variant).items()
    )
    findings = _finding_lines(variant)
    rules_cell = f'<ul class="rules">{rules}</ul>' if rules else '<span class="note">none</span>'
    if findings:
        listed = _e("\n".join(findings))
        count = len(_findings(variant))
        rules_cell += (
            f"<details><summary>{count} finding{'' if count == 1 else 's'}</summary>"
            f"<pre>{listed}</pre></details>"
        )
    streams = []
    for link in links:
        if link.page is not None:
            streams.append(f'<a href="{_e(_href(link.page, base))}">{_e(link.capture)}</a>')
        else:
            problem = _e(link.problem or "")
            streams.append(f'<span class="note">{_e(link.capture)}: {problem}</span>')
    return (
        f'<tr class="{" ".join(classes)}" data-variant="{_e(name)}" data-outcome="{outcome}">'
        f'<th scope="row">{_e(name)}</th><td class="outcome">{cell}</td>'
        f'<td class="findings">{rules_cell}</td>'
        f'<td class="notes">{"<br>".join(_e(n) for n in notes) or "-"}</td>'
        + (f'<td class="streams">{"<br>".join(streams) or "-"}</td>' if with_streams else "")
        + "</tr>"
    )


def matrix_html(
    summary: Mapping[str, Any],
    verdict: Verdict | None = None,
    links: Mapping[str, Sequence[StreamLink]] | None = None,
    base: str | Path = ".",
) -> str:
    """The run as one self-contained page: a row per variant, its outcome at a glance
    (linked to its first stream's timeline page when ``links`` has one; ``base`` is the
    directory the page is written to, the links are relative to it), the findings by rule,
    the notes (why skipped, expected or stale), its streams. No script at all: the page's
    Content-Security-Policy allows none, and every string of the summary is escaped."""
    verdict = verdict if verdict is not None else judge(summary)
    links = links or {}
    base_dir = Path(base)
    endpoint = _shown_endpoint(summary.get("endpoint"))
    model = _text(summary.get("model"))
    protocol = _text(summary.get("protocol"), 64) or "unknown"
    variants = _variants(summary)
    counts: dict[str, int] = {}
    for variant in variants:
        counts[_outcome(variant)] = counts.get(_outcome(variant), 0) + 1
    totals = ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) or "no variants"
    state = "failed" if verdict.failed else "passed"
    why = [
        f"{count} {what}{'s' if count > 1 else ''}"
        for count, what in (
            (len(verdict.unexpected), "unexpected failure"),
            (len(verdict.stale), "stale expected failure"),
            (len(verdict.expected), "expected failure"),
        )
        if count
    ]
    # The streams column only when the run saved its streams (--save, --replay).
    with_streams = any(links.values())
    rows = "".join(
        _row(v, verdict, links.get(_name(v), ()), base_dir, with_streams) for v in variants
    )
    facts = (
        f"endpoint <code>{_e(endpoint)}</code>, model <code>{_e(model)}</code>, protocol "
        f"<code>{_e(protocol)}</code>, streamguard {_e(_text(summary.get('streamguard'), 40))}"
        f", {_e(_text(summary.get('requests'), 20))} requests"
    )
    title = f"streamguard conformance: {protocol}, {model}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">\n"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>\n"
        f'<h1>{_e(title)}</h1>\n<p id="run">{facts}</p>\n'
        f'<p id="verdict" class="verdict-{state}">run {state}'
        f"{': ' + ', '.join(why) if why else ''} ({_e(totals)})</p>\n"
        '<table id="matrix"><thead><tr><th>variant</th><th>outcome</th><th>findings by rule'
        f"</th><th>notes</th>{'<th>streams</th>' if with_streams else ''}</tr></thead>\n"
        f"<tbody>{rows}</tbody></table>\n</body></html>\n"
    )


# -- all of it, for the command line ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outputs:
    """What ``write_outputs`` wrote and the run's verdict."""

    verdict: Verdict
    written: tuple[str, ...]


def write_outputs(
    summary: Mapping[str, Any],
    *,
    html_path: str | None = None,
    junit_path: str | None = None,
    expected: Sequence[ExpectedFailure] = (),
    captures_dir: str | None = None,
    fail_on: Severity = Severity.ERROR,
    now: datetime | None = None,
) -> Outputs:
    """Judge the run against ``expected`` and write the reports asked for: the JUnit XML,
    the HTML matrix (and, when ``captures_dir`` holds the run's captures, a timeline page
    beside each). An ``OSError`` names no option: the caller says which it was writing
    (``filename`` is set)."""
    verdict = judge(summary, expected, fail_on)
    written: list[str] = []
    if junit_path is not None:
        Path(junit_path).write_text(junit_xml(summary, verdict, now), encoding="utf-8")
        written.append(junit_path)
    if html_path is not None:
        links = timeline_pages(summary, captures_dir) if captures_dir is not None else {}
        base = Path(html_path).resolve().parent
        page = matrix_html(summary, verdict, links, base)
        Path(html_path).write_text(page, encoding="utf-8")
        written.append(html_path)
    return Outputs(verdict, tuple(written))
