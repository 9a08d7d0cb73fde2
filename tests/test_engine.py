"""The protocol engine: lifecycle tables, the steps they take, and what checkers declare."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from streamguard import rules
from streamguard.monitor import check_stream
from streamguard.protocols import CHECKERS, Checker
from streamguard.protocols._base import EventFindings, listing, terminated_lifecycle
from streamguard.protocols._fields import (
    ANY_VALUE,
    EACH,
    STRICT_INTEGER,
    STRING,
    Nested,
    Shape,
    declared,
    may,
    may_hold,
    opt,
    req,
    usable,
)
from streamguard.protocols._lifecycle import ANY, END, ERROR, OTHER, STAY, TERMINAL, Lifecycle
from streamguard.sse import Event
from tests.helpers import source_docstring, source_of
from tests.toy_protocol import DoneChecker

FIXTURES = sorted(Path(__file__).parent.joinpath("fixtures").rglob("*.sse"))


def _events(checker: Checker, *data: str) -> list[tuple[str, int | None]]:
    found = []
    for index, text in enumerate(data):
        found += [(f.rule, f.event_index) for f in checker.on_event(Event("message", text), index)]
    return found


def test_a_table_without_a_step_is_refused() -> None:
    """A lifecycle that forgets a (phase, kind) pair fails when it is declared, not mid-stream."""
    with pytest.raises(ValueError, match="no step for"):
        Lifecycle(
            phases={"a": "only phase"},
            kinds={},
            initial="a",
            table={("a", TERMINAL): STAY, ("a", ERROR): STAY, ("a", OTHER): STAY},
            ended=frozenset(),
            errored=frozenset(),
            sealed=frozenset(),
        )


def test_a_table_naming_an_unknown_phase_is_refused() -> None:
    """A step into a phase the lifecycle does not declare is a declaration error."""
    with pytest.raises(ValueError, match="unknown phases"):
        Lifecycle(
            phases={"a": "only phase"},
            kinds={},
            initial="a",
            table={
                ("a", ANY): STAY,
                ("a", TERMINAL): terminated_lifecycle().table["streaming", TERMINAL],
            },
            ended=frozenset(),
            errored=frozenset(),
            sealed=frozenset(),
        )


def test_the_terminal_is_recorded_by_the_step_into_an_ended_phase() -> None:
    """advance() is what sets terminal_index; a second terminal is duplicate_terminal."""
    checker = DoneChecker()
    assert _events(checker, "a", "END", "END", "b") == [
        ("duplicate_terminal", 2),
        ("event_after_terminal", 3),
    ]
    assert (checker.terminal_index, checker.error_index, checker.phase) == (1, None, "ended")


def test_an_error_seals_the_stream() -> None:
    """After an in-band error every event, the terminal included, is event_after_terminal."""
    checker = DoneChecker()
    assert _events(checker, "ERR", "END") == [("event_after_terminal", 1)]
    assert (checker.terminal_index, checker.error_index) == (None, 0)
    assert checker.on_end(2, 10) == []


def test_the_end_step_reports_a_missing_terminal() -> None:
    """The END row of the table, not the protocol's code, reports missing_terminal."""
    checker = DoneChecker()
    _events(checker, "a")
    (finding,) = checker.on_end(1, 9)
    assert (finding.rule, finding.event_index, finding.byte_offset) == ("missing_terminal", 1, 9)
    assert finding.message == (
        "the body ended after 1 event(s) and 9 byte(s) without the test_done terminal signal"
    )


def test_once_per_stream_rules_are_reported_once() -> None:
    """Checker.report() drops a once-per-stream rule's later occurrences and says so."""
    rule = rules.Rule("test_once", rules.Severity.WARNING, "test", once_per_stream=True)
    checker = DoneChecker()
    found: list[rules.Finding] = []
    for index in range(3):
        checker.report(found, rule, Event("message", "x"), index, " is odd")
    assert [f.message for f in found] == ["event 0 is odd (reported once per stream)"]
    assert checker.reported(rule)
    assert not DoneChecker().reported(rule)


@pytest.mark.parametrize("protocol", sorted(CHECKERS))
def test_the_lifecycles_page_shows_the_table(protocol: str) -> None:
    """docs/lifecycles.md prints each table as describe() does, so the two cannot drift."""
    page = Path(__file__).parent.parent.joinpath("docs", "lifecycles.md").read_text()
    section = page.split(f"## `{protocol}`\n", 1)[1].split("\n## ", 1)[0]
    assert f"```\n{CHECKERS[protocol].LIFECYCLE.describe()}\n```" in section


@pytest.mark.parametrize("protocol", sorted(set(CHECKERS) - {"sse"}))
def test_the_theory_of_operation_points_at_the_table(protocol: str) -> None:
    """A protocol module's docstring names its LIFECYCLE and the page that prints it."""
    doc = source_docstring(sys.modules[CHECKERS[protocol].__module__])
    assert "``LIFECYCLE``" in doc
    assert "``docs/lifecycles.md``" in doc


@pytest.mark.parametrize("protocol", sorted(CHECKERS))
def test_rules_for_lists_only_what_the_protocol_raises(protocol: str) -> None:
    """Every finding on every fixture, checked as any protocol, is a rule rules_for lists."""
    allowed = {rule.name for rule in rules.rules_for(protocol)}
    for path in FIXTURES:
        report = check_stream(path.read_bytes(), protocol=protocol)
        undeclared = {f.rule for f in report.findings} - allowed
        assert not undeclared, (path.name, undeclared)


def test_plain_sse_lists_no_lifecycle_rule() -> None:
    """Plain SSE has no terminal signal, so no rule about one is pre-created for it."""
    names = {rule.name for rule in rules.rules_for("sse")}
    assert not names & {"missing_terminal", "duplicate_terminal", "event_after_terminal"}
    assert "schema_mismatch" not in names
    assert "invalid_json" in names


def test_the_shared_table_reports_a_missing_terminal_at_the_end_only() -> None:
    """In the shared table an ordinary event stays, and the END row is missing_terminal."""
    lifecycle = terminated_lifecycle()
    assert lifecycle.step("streaming", END).rule is rules.MISSING_TERMINAL
    assert lifecycle.step("streaming", OTHER) is STAY


def test_the_architecture_page_shows_the_shared_table() -> None:
    """docs/architecture.md quotes terminated_lifecycle() as describe() prints it."""
    page = Path(__file__).parent.parent.joinpath("docs", "architecture.md").read_text()
    assert f"```\n{terminated_lifecycle().describe()}\n```" in page


def test_a_step_message_may_name_what_the_protocol_remembers() -> None:
    """message_fields() fills a protocol's own fields: usage_not_last names the usage chunk."""
    chunk = (
        '{"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":'
        '[{"index":0,"delta":{"content":"x"},"finish_reason":%s}]}'
    )
    usage = (
        '{"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
        '"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
    )
    body = "".join(
        f"data: {data}\n\n" for data in (chunk % '"stop"', usage, chunk % "null", "[DONE]")
    )
    asked = {"stream": True, "stream_options": {"include_usage": True}}
    report = check_stream(body.encode(), protocol="openai_chat", request=asked)
    (late,) = [f for f in report.findings if f.rule == "usage_not_last"]
    assert late.message == ("event 2 follows the usage chunk (event 1); only [DONE] may follow it")


#: Rules the shared helpers raise for a checker (parse_object, the shape checks).
_HELPER_RULES = frozenset({rules.INVALID_JSON, rules.SCHEMA_MISMATCH})


@pytest.mark.parametrize("protocol", sorted(CHECKERS))
def test_raises_matches_the_rules_the_module_names(protocol: str) -> None:
    """Every rule a checker's module names is declared, and every declared payload rule is named."""
    checker = CHECKERS[protocol]
    source = source_of(checker.__module__)
    named = {
        rule
        for attribute in re.findall(r"rules\.([A-Z][A-Z_0-9]+)\b", source)
        if isinstance(rule := getattr(rules, attribute, None), rules.Rule)
    }
    # A protocol's own rules (its spec's) are the module's constants, named where it adds them.
    module = importlib.import_module(checker.__module__)
    named |= {
        rule
        for constant in re.findall(r"(?:\.add|\.finding|\.report)\(\s*([A-Z][A-Z_0-9]+)\b", source)
        if isinstance(rule := getattr(module, constant, None), rules.Rule)
    }
    declared = checker.RAISES | checker.LIFECYCLE.rules
    assert not {r.name for r in named - declared}, "raised but not declared"
    assert not {r.name for r in checker.RAISES - named - _HELPER_RULES}, "declared, never raised"


class _NamedAfterEnd(DoneChecker):
    """Names the events it sees after the end itself."""

    def sealed_kind(self, event: Event) -> tuple[str, str | None]:
        return (TERMINAL if event.data == "END" else OTHER), "'late'"


def test_a_sealed_phase_takes_the_kind_and_name_the_checker_gives() -> None:
    """sealed_kind() classifies events after the end unparsed, and names them in the message."""
    checker = _NamedAfterEnd()
    found = [f for data in ("END", "x") for f in checker.on_event(Event("message", data), 1)]
    assert [f.message for f in found] == [
        "event 1 ('late') follows the terminal signal sent as event 1"
    ]


def test_event_findings_add_on_their_event_and_take_its_step() -> None:
    """``add()`` reports on the event it holds; ``step()`` adds the lifecycle finding."""
    checker = DoneChecker()
    checker.on_event(Event("message", "END"), 0)
    found = EventFindings(checker, Event("message", "x", offset=7), 3)
    found.add(rules.SCHEMA_MISMATCH, ": odd")
    found.step(OTHER)
    assert [(f.rule, f.message, f.byte_offset) for f in found.items] == [
        ("schema_mismatch", "event 3: odd", 7),
        (
            "event_after_terminal",
            "event 3 ('message') follows the terminal signal sent as event 0",
            7,
        ),
    ]


def test_listing_shows_a_few_entries_then_a_count() -> None:
    """listing() shows the first labels and counts the rest, labelled or past the bound."""
    assert listing(["0", "1"], 2) == "0, 1"
    assert listing(map(str, range(9)), 9) == "0, 1, 2 and 6 more"
    assert listing(["a"], 5) == "a and 4 more"


def test_listing_without_labels_is_empty() -> None:
    """Entries past a tracking bound have no label: a listing of none of them says nothing."""
    assert listing([], 7) == ""


_INNER = Shape(fields=(req("name"), may("size", STRICT_INTEGER)))
_OUTER = Shape(
    fields=(opt("id"), opt("anything", ANY_VALUE), opt("kind", STRING, ("a", "b"))),
    nested=(may_hold("entries", _INNER, EACH), Nested("inner", _INNER, required=False)),
)


def test_usable_keeps_only_the_fields_that_have_their_declared_kind() -> None:
    """usable() reads a payload that failed its shape: fields of their kind stay (an enum's
    value unchecked), others go; a list entry without its required fields goes."""
    raw = {
        "id": 1,
        "anything": None,
        "entries": [{"name": "x", "size": True}, {"size": 1}, "y", {"name": "z", "size": 2}],
        "inner": [],
        "kind": "c",
        "extra": "dropped",
    }
    assert usable(raw, _OUTER) == {
        "anything": None,
        "entries": [{"name": "x"}, {"name": "z", "size": 2}],
        "kind": "c",
    }
    assert usable({"entries": {}, "inner": 0}, _OUTER, frozenset({"inner"})) == {
        "entries": [],
        "inner": {},
    }


def test_declared_keeps_the_declared_fields_nulls_included() -> None:
    """declared() reads a payload that fits its shape: only declared keys, at every level."""
    raw = {
        "id": "i",
        "extra": 1,
        "entries": [{"name": "x", "size": None, "more": 2}],
        "inner": {"name": "y", "other": []},
    }
    assert declared(raw, _OUTER) == {
        "id": "i",
        "entries": [{"name": "x", "size": None}],
        "inner": {"name": "y"},
    }
