"""The oracle: the official clients read the fixtures and seeded mutants; streamguard must agree.

Severity follows the official clients (``docs/rules.md``, "How severe a rule is"): a body
that an official client of its protocol fails on (it raises, or rejects the stream) must give
streamguard an error-severity finding or a failing outcome (``unclosed``, ``app_error``,
``connection_lost``; or ``error_event``, the in-band error the protocol defines and the
client raises on by design). And a healthy fixture (``ok_*`` / ``clean-*``) must give no
error finding.

The clients (``tests/oracle/clients.py``): openai's ``chat.completions.stream()`` and plain
iteration, ``responses.stream()``, anthropic's ``messages.stream()``, google-genai's
``generate_content_stream()``, the MCP SDK's JSON-RPC message models, a2a-sdk's JSON-RPC
client transports (1.0 and 0.3), cohere's ``ClientV2.chat_stream()`` (which raises on
nothing: its verdict is the events it did not hand the caller), and under Node the
``ai`` package's ``readUIMessageStream`` and ``@ag-ui/client``'s ``HttpAgent`` (with
``verifyEvents``). Each reads every fixture of its protocol and the mutants of the healthy
ones (``tests/oracle/mutants.py``: drop the terminal or the start, duplicate or swap events,
cut mid-frame, retype a value), made with fixed seeds. Known, argued disagreements live in
one table, ``tests/oracle/exceptions.py``.

The quick tier runs the Python clients on the fixtures and a few mutants of each; the full
run (``slow``: every client, every healthy fixture's mutants) is bounded to stay well
under three minutes on one core.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from streamguard import StreamReport, check_stream
from streamguard.report import FAILED_OUTCOMES, Outcome

from .oracle.clients import (
    NODE,
    NODE_CLIENTS,
    PYTHON_CLIENTS,
    Verdict,
    available,
    node_verdicts,
    python_verdicts,
    responses_reading,
)
from .oracle.exceptions import EXCEPTIONS, Exception_, matching
from .oracle.mutants import KINDS, frames, lax_lookalikes, mutants
from .sse_fixtures import Fixture, fixtures

#: The SDKs warn while serialising mutated payloads; the verdict is whether they raise.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: Outcomes that tell the client's failure as it is: the stream broke, or ended with the
#: in-band error the protocol defines (on which the official clients raise, by design).
_FLAGGED_OUTCOMES = FAILED_OUTCOMES | {Outcome.ERROR_EVENT}
#: Mutants per healthy fixture: of each positional kind, and retyped values (the slow run).
PER_KIND, RETYPES = 2, 24
#: The quick tier: every fixture, and a few mutants of the first healthy fixture of each
#: protocol.
QUICK_PER_KIND, QUICK_RETYPES, QUICK_MUTATED = 1, 2, 1


@dataclass(frozen=True)
class Case:
    """One body for the clients of ``protocol``: a fixture, or a mutant of a healthy one."""

    id: str
    protocol: str
    body: bytes
    fixture: Fixture
    mutant: bool

    @property
    def healthy(self) -> bool:
        return not self.mutant and self.fixture.name.startswith(("ok_", "clean-"))

    def check(self) -> StreamReport:
        return self.fixture.check(self.body)


def _healthy(fixture: Fixture) -> bool:
    return fixture.name.startswith(("ok_", "clean-"))


def cases(
    protocols: Iterable[str], per_kind: int, retypes: int, mutated: int | None = None
) -> Iterator[Case]:
    """Every fixture of ``protocols``, and the mutants of their healthy fixtures (of the
    first ``mutated`` of them per protocol, when given)."""
    for protocol in protocols:
        left = mutated
        for fixture in fixtures(protocol):
            yield Case(fixture.id, protocol, fixture.body, fixture, mutant=False)
            if _healthy(fixture) and (left is None or left > 0):
                left = None if left is None else left - 1
                for mutant in mutants(fixture.id, fixture.body, per_kind=per_kind, retypes=retypes):
                    yield Case(mutant.name, protocol, mutant.body, fixture, mutant=True)


def _flagged(report: StreamReport) -> bool:
    return report.malformed or report.outcome in _FLAGGED_OUTCOMES


def _summary(report: StreamReport) -> str:
    found = ", ".join(f"{f.rule}({f.severity.value})" for f in report.findings[:4])
    return f"outcome {report.outcome.value}, findings [{found}]"


def disagreements(judged: Iterable[tuple[Case, list[Verdict]]], used: set[Exception_]) -> list[str]:
    """What the oracle objects to: a client failing a body streamguard passes (unless a row
    of the exceptions table excuses it, which is then noted in ``used``), and a healthy
    fixture with an error finding."""
    problems = []
    for case, verdicts in judged:
        report = case.check()
        if case.healthy and report.malformed:
            problems.append(f"{case.id}: healthy fixture with an error finding: {_summary(report)}")
        if _flagged(report):
            continue
        for verdict in verdicts:
            if verdict.error is None:
                continue
            row = matching(verdict.client, case.id, verdict.error)
            if row is not None:
                used.add(row)
                continue
            problems.append(
                f"{case.id}: {verdict.client} fails ({verdict.error[:200]!r}) but streamguard "
                f"reports {_summary(report)}"
            )
    return problems


def _python_judged(selected: list[Case]) -> Iterator[tuple[Case, list[Verdict]]]:
    for case in selected:
        yield case, python_verdicts(case.protocol, case.body, case.fixture.request)


def _python_protocols() -> list[str]:
    return [protocol for protocol in PYTHON_CLIENTS if available(protocol)]


def _report(problems: list[str]) -> str:
    shown = "\n".join(problems[:40])
    more = f"\n... and {len(problems) - 40} more" if len(problems) > 40 else ""
    return f"{len(problems)} disagreement(s) with the official clients:\n{shown}{more}"


@pytest.mark.parametrize("protocol", sorted(PYTHON_CLIENTS))
def test_python_clients_agree_on_fixtures_and_a_few_mutants(protocol: str) -> None:
    """The quick tier: every fixture, and a few mutants of one healthy fixture."""
    if not available(protocol):
        pytest.skip(f"the official client of {protocol} is not installed")
    selected = list(cases([protocol], QUICK_PER_KIND, QUICK_RETYPES, QUICK_MUTATED))
    problems = disagreements(_python_judged(selected), set())
    assert not problems, _report(problems)


def test_the_mutants_are_seeded_and_of_every_kind() -> None:
    """The same bytes on every run, and each kind is made (a kind that made nothing would
    leave the oracle blind to its breakage)."""
    fixture = next(f for f in fixtures("openai_chat") if f.name == "clean-text-include-usage")
    first = mutants(fixture.id, fixture.body, per_kind=PER_KIND, retypes=RETYPES)
    again = mutants(fixture.id, fixture.body, per_kind=PER_KIND, retypes=RETYPES)
    assert [(m.name, m.body) for m in first] == [(m.name, m.body) for m in again]
    assert {m.kind for m in first} == set(KINDS)
    assert all(m.body != fixture.body for m in first)


def test_the_oracle_fails_when_streamguard_misses_a_client_failure() -> None:
    """The oracle itself can fail: a body the client raises on, judged clean, is reported."""
    fixture = next(f for f in fixtures("openai_chat") if f.name == "clean-text-include-usage")
    case = Case("made-up", "openai_chat", fixture.body, fixture, mutant=True)
    problems = disagreements([(case, [Verdict("openai.chat.stream", "IndexError: boom")])], set())
    assert len(problems) == 1
    assert "IndexError: boom" in problems[0]


@pytest.mark.slow
def test_every_client_agrees_on_every_fixture_and_mutant() -> None:
    """The full run: every client, every fixture, the seeded mutants of every healthy one;
    and every row of the exceptions table still matches some case (no stale excuse)."""
    used: set[Exception_] = set()
    selected = list(cases(_python_protocols(), PER_KIND, RETYPES))
    problems = disagreements(_python_judged(selected), used)
    assert NODE is not None or not os.environ.get("STREAMGUARD_REQUIRE_NODE"), (
        "STREAMGUARD_REQUIRE_NODE is set but node is not installed"
    )
    if NODE is not None:
        node_cases = list(cases(sorted(NODE_CLIENTS), PER_KIND, RETYPES))
        verdicts = node_verdicts([(case.id, case.protocol, case.body) for case in node_cases])
        judged = [(case, [verdicts[case.id]]) for case in node_cases]
        problems += disagreements(judged, used)
    checked = {*(_python_protocols()), *(NODE_CLIENTS if NODE is not None else ())}
    stale = [
        row
        for row in EXCEPTIONS
        if row not in used and any(row.case.startswith(f"{p}/") for p in checked)
    ]
    problems += [f"stale exception (matches no case): {row}" for row in stale]
    assert not problems, _report(problems)


def _gemini_probes() -> Iterator[tuple[str, dict[str, Any]]]:
    """One chunk per field the Gemini checker types, that field given a value of a type
    the schema does not allow (and each object or list given a string, or a list entry)."""
    from streamguard.protocols import _fields, gemini

    wrong = {
        _fields.STRING: 7,
        _fields.LAX_NUMBER: [],
        _fields.LAX_INTEGER: {},
        _fields.LAX_BOOLEAN: 7,
        _fields.BASE64: "ab",
        _fields.OBJECT: "x",
    }

    def walk(shape: _fields.Shape, build: Any, prefix: str) -> Iterator[tuple[str, Any]]:
        for field in shape.fields:
            yield f"{prefix}{field.name}={field.kind}", build({field.name: wrong[field.kind]})
        for nested in shape.nested:
            name = nested.name
            if nested.holds == _fields.EACH:
                yield f"{prefix}{name}[0]=str", build({name: ["x"]})
                entry = f"{prefix}{name}[0]."
                yield from walk(nested.shape, lambda d, f=name: build({f: [d]}), entry)
            else:
                yield f"{prefix}{name}=str", build({name: "x"})
                yield from walk(nested.shape, lambda d, f=name: build({f: d}), f"{prefix}{name}.")

    def candidate(fields: dict[str, Any]) -> dict[str, Any]:
        return {"candidates": [{"index": 0, **fields}]}

    def content(fields: dict[str, Any]) -> dict[str, Any]:
        return candidate({"content": {"parts": [{"text": "x"}], **fields}})

    def part(fields: dict[str, Any]) -> dict[str, Any]:
        return candidate({"content": {"parts": [fields]}})

    yield from walk(gemini._RESPONSE, lambda d: d, "")
    yield from walk(gemini._CANDIDATE, candidate, "candidates[0].")
    yield from walk(_fields.Shape(gemini._CONTENT.fields), content, "content.")
    yield from walk(gemini._PART, part, "parts[0].")
    yield from walk(gemini._USAGE, lambda d: {"usageMetadata": d}, "usageMetadata.")
    yield from walk(gemini._FEEDBACK, lambda d: {"promptFeedback": d}, "promptFeedback.")


def test_the_gemini_field_types_are_those_google_genai_refuses() -> None:
    """Each field type the Gemini checker enforces, retyped: google-genai fails exactly when
    streamguard reports a schema_mismatch (never stricter than the client, never blinder)."""
    if not available("gemini"):
        pytest.skip("google-genai is not installed")
    import json

    final = b'data: {"candidates":[{"finishReason":"STOP","index":0}]}\n\n'
    problems = []
    for name, chunk in _gemini_probes():
        body = b"data: " + json.dumps(chunk).encode() + b"\n\n" + final
        (verdict,) = python_verdicts("gemini", body, None)
        flagged = "schema_mismatch" in check_stream(body, protocol="gemini").rules()
        if verdict.ok == flagged:
            problems.append(f"{name}: google-genai ok={verdict.ok}, schema_mismatch={flagged}")
    assert not problems, problems


def test_gemini_values_in_lax_forms_are_no_false_alarm() -> None:
    """Each number, boolean and empty list of the healthy Gemini fixtures, written in a form
    pydantic's lax mode reads as the same value (``"7"``, ``7.0``, ``"true"``, ``{}``):
    google-genai reads each stream whole, and streamguard reports no error on it (the
    streams google-genai refuses here are the in-band error fixtures', which both flag; the
    values it refuses are probed by the field-types test above)."""
    if not available("gemini"):
        pytest.skip("google-genai is not installed")
    problems = []
    for fixture in fixtures("gemini"):
        if not fixture.name.startswith("ok_"):
            continue
        framed, tail, eol = frames(fixture.body)
        for position, frame in enumerate(framed):
            for name, new in lax_lookalikes(frame, eol):
                body = b"".join([*framed[:position], new, *framed[position + 1 :], tail])
                flagged = _flagged(check_stream(body, protocol="gemini"))
                (verdict,) = python_verdicts("gemini", body, None)
                if flagged == verdict.ok:
                    problems.append(f"{fixture.name} {name}: google-genai ok={verdict.ok}")
    assert not problems, problems


def test_the_responses_helper_silently_loses_an_emptied_completed_output() -> None:
    """Severity of the two Responses rules the verdicts cannot see (the helper raises on
    neither): completed_output_empty is an error, as get_final_response() has no output at
    all; text_not_done a warning, as the final text is intact and only the .done event is
    never yielded. A null output is rebuilt by the helper: the look-alike stays clean."""
    if not available("openai_responses"):
        pytest.skip("openai is not installed")
    by_name = {f.name: f for f in fixtures("openai_responses")}
    clean = responses_reading(by_name["clean-text"].body)
    assert (clean.output_items, clean.output_text) == (1, "Hello! How can I help?")
    assert "response.output_text.done" in clean.events

    emptied = by_name["completed_output_empty"]
    lost = responses_reading(emptied.body)
    assert (lost.output_items, lost.output_text) == (0, "")
    assert emptied.check().rules() == ["completed_output_empty"]
    assert emptied.check().malformed

    null = by_name["clean-completed-output-null"]
    assert responses_reading(null.body) == clean
    assert null.check().findings == ()

    undone = by_name["text_not_done"]
    reading = responses_reading(undone.body)
    assert (reading.output_items, reading.output_text) == (1, clean.output_text)
    assert "response.output_text.done" not in reading.events
    assert undone.check().rules() == ["text_not_done"]
    assert not undone.check().malformed


#: Parts put in place of each part of the healthy A2A fixtures, per version: of every kind,
#: each field of a wrong type, null, and what the client reads leniently.
_A2A_PARTS: dict[bool, tuple[Any, ...]] = {
    False: (
        {"text": 7},
        {"text": None},
        {"text": []},
        {"text": True},
        {"url": 7},
        {"filename": {}},
        {"mediaType": 1},
        {"metadata": 7},
        {"metadata": None},
        {"metadata": []},
        {"data": 7},
        {"data": {"a": 1}},
        {"raw": "YQ=="},
        {"text": "x", "unknownField": 1},
        {},
        7,
        None,
        "x",
    ),
    True: (
        {"kind": "text", "text": 7},
        {"kind": "text", "text": None},
        {"text": "x"},
        {"kind": "text"},
        {"kind": "foo", "text": "x"},
        {"kind": None, "text": "x"},
        {"kind": "text", "text": "x", "metadata": None},
        {"kind": "text", "text": "x", "metadata": 7},
        {"kind": "data", "data": {}},
        {"kind": "data", "data": []},
        {"data": {}},
        {"kind": "data", "text": "x"},
        {"kind": "file", "file": {"uri": "u"}},
        {"kind": "file", "file": {"bytes": "YQ==", "mimeType": None, "name": None}},
        {"kind": "file", "file": {"uri": 7}},
        {"kind": "file", "file": {}},
        {"kind": "file", "file": "x"},
        {"kind": "file", "file": {"uri": "u", "name": 7}},
        {},
        7,
        None,
    ),
}


def _a2a_part_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every entry of every ``parts`` list in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "parts" and isinstance(item, list):
                yield from ((*path, key, number) for number in range(len(item)))
            yield from _a2a_part_paths(item, (*path, key))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _a2a_part_paths(item, (*path, number))


def test_the_a2a_part_types_are_those_the_a2a_sdk_refuses() -> None:
    """Each part of the healthy A2A fixtures (in a message, an artifact, a task's history or
    a status's message), replaced by parts of every kind, of wrong types and of lenient
    ones: the version's client transport fails exactly when streamguard reports a
    schema_mismatch. A 1.0 part that is no object is the one loss without a raise: the
    protobuf parser makes it an empty part, its content gone (an error all the same)."""
    if not available("a2a"):
        pytest.skip("a2a-sdk is not installed")
    import copy
    import json

    problems = []
    for fixture in fixtures("a2a"):
        if not fixture.name.startswith("ok_"):
            continue
        v03 = (fixture.request or {}).get("method") in ("message/stream", "tasks/resubscribe")
        text = fixture.body.decode()
        eol = "\r\n" if "\r\n" in text else "\n"
        framed = text.split(eol + eol)
        for position, frame in enumerate(framed):
            if not frame.startswith("data: {"):
                continue
            message = json.loads(frame[len("data: ") :])
            for path in _a2a_part_paths(message):
                for part in _A2A_PARTS[v03]:
                    changed = copy.deepcopy(message)
                    holder = changed
                    for key in path[:-1]:
                        holder = holder[key]
                    holder[path[-1]] = part
                    new = "data: " + json.dumps(changed)
                    body = (eol + eol).join([*framed[:position], new, *framed[position + 1 :]])
                    (verdict,) = python_verdicts("a2a", body.encode(), fixture.request)
                    lost = not v03 and not isinstance(part, dict)
                    flagged = "schema_mismatch" in fixture.check(body.encode()).rules()
                    if flagged != (lost or not verdict.ok):
                        where = ".".join(map(str, path))
                        problems.append(
                            f"{fixture.name} {where}={json.dumps(part)}: a2a-sdk ok="
                            f"{verdict.ok}, schema_mismatch={flagged}"
                        )
    assert not problems, problems


#: Cohere streams issue 46 found the SDK loses silently: it stops at a [DONE] before
#: message-end, and skips an event whose delta.message, content.text or tool call type it
#: cannot build. The false alarm it found: message-end without delta.usage.
_COHERE_SILENT_LOSSES = (
    "missing_terminal-done_before_message_end",
    "schema_mismatch_delta_message_not_object",
    "schema_mismatch_content_text_not_string",
    "schema_mismatch_tool_call_type_not_function",
)


def test_the_cohere_sdk_loses_what_streamguard_flags() -> None:
    """The four Cohere silent losses: the SDK raises nothing and hands the caller fewer
    events than were sent, and streamguard reports an error; message-end without usage is
    read whole by the SDK and stays clean."""
    if not available("cohere"):
        pytest.skip("cohere is not installed")
    by_name = {f.name: f for f in fixtures("cohere")}
    for name in _COHERE_SILENT_LOSSES:
        fixture = by_name[name]
        (verdict,) = python_verdicts("cohere", fixture.body, fixture.request)
        assert verdict.error is not None, name
        assert verdict.error.startswith("EventsLost:"), name
        assert fixture.check().malformed, name
    fixture = by_name["ok_message_end_without_usage"]
    assert python_verdicts("cohere", fixture.body, fixture.request) == [
        Verdict("cohere.chat_stream", None)
    ]
    assert fixture.check().findings == ()


#: Anthropic fields issue 46 lists as typed wrong: (fixture, what the event's data holds,
#: the path in its data, the value put there).
_ANTHROPIC_RETYPED = (
    ("ok_tool_use_empty_first_json_delta", '"type":"tool_use"', ("content_block", "input"), []),
    ("ok_web_search_server_tool", '"message_start"', ("message", "usage", "cache_creation"), "x"),
    ("ok_web_search_server_tool", '"message_start"', ("message", "stop_sequence"), 7),
    ("ok_web_search_server_tool", '"message_start"', ("message", "usage", "server_tool_use"), "x"),
)


def test_the_anthropic_sdk_reads_retyped_fields_and_only_warns() -> None:
    """The client's verdict on the Anthropic fields issue 46 lists (a tool block's input a
    list, usage.cache_creation a string, message_start's stop_sequence and usage details of
    the wrong type): anthropic's messages.stream() reads each stream to its final message
    without raising (it builds events without validating them) and only warns, pydantic's
    serializer warning when it copies the message. By the severity rule that is a warning
    at most, which the shape vocabulary cannot yet give a field (a schema_mismatch is an
    error): streamguard stays silent on them until it can."""
    if not available("anthropic"):
        pytest.skip("anthropic is not installed")
    import json
    import warnings

    by_name = {f.name: f for f in fixtures("anthropic")}
    for name, holds, path, value in _ANTHROPIC_RETYPED:
        framed, tail, eol = frames(by_name[name].body)
        position = next(i for i, frame in enumerate(framed) if holds.encode() in frame)
        lines = framed[position].split(eol)
        data = next(i for i, line in enumerate(lines) if line.startswith(b"data:"))
        payload = json.loads(lines[data][len(b"data:") :])
        holder = payload
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        lines[data] = b"data: " + json.dumps(payload).encode()
        body = b"".join([*framed[:position], eol.join(lines), *framed[position + 1 :], tail])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (verdict,) = python_verdicts("anthropic", body, None)
        assert verdict.ok, (path, verdict.error)
        assert any("serializ" in str(w.message) for w in caught), path
        assert not check_stream(body, protocol="anthropic").malformed, path
