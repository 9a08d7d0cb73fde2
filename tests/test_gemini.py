"""The Gemini checker: streams built here (its fixtures: tests/test_fixtures.py)."""

from __future__ import annotations

import json

import pytest

from streamguard import Severity, check_stream
from streamguard.protocols._base import Transcript
from streamguard.protocols.gemini import GeminiChecker
from streamguard.rule_docs import get_rule_doc
from streamguard.rules import RULES
from streamguard.sse import Event
from tests.helpers import gemini_chunk, gemini_text


def test_severities_follow_the_official_client() -> None:
    """Framing google-genai cannot read makes it raise (UnknownApiResponseError, measured
    by tests/test_oracle.py), so it is an error, as a missing finish is; decreasing usage,
    which the SDK reads, is a warning."""
    assert RULES["sdk_incompatible_framing"].severity is Severity.ERROR
    assert RULES["usage_decreased"].severity is Severity.WARNING
    assert RULES["missing_finish_reason"].severity is Severity.ERROR


def test_empty_body_is_truncated() -> None:
    """A body with no event at all never finished a candidate, so it is unclosed."""
    report = check_stream(b"", protocol="gemini")
    assert report.outcome.value == "unclosed"
    assert [(f.rule, f.event_index) for f in report.findings] == [("missing_finish_reason", 0)]


def test_framing_is_reported_once_per_stream() -> None:
    """Keep-alive comments between every chunk give a single framing warning."""
    chunk = b'data: {"candidates":[{"content":{"parts":[{"text":"x"}]}}]}\n\n'
    final = b'data: {"candidates":[{"content":{"parts":[{"text":"."}]},"finishReason":"STOP"}]}\n\n'
    body = chunk + b": ping\n\n" + chunk + b": ping\n\n" + chunk + b": ping\n\n" + final
    report = check_stream(body, protocol="gemini")
    assert [(f.rule, f.event_index) for f in report.findings] == [("sdk_incompatible_framing", 1)]
    assert report.outcome.value == "completed"


def test_non_ascii_text_does_not_look_like_a_framing_problem() -> None:
    """Multi-byte UTF-8 in the data is measured in bytes, so clean framing stays clean."""
    chunk = 'data: {"candidates":[{"content":{"parts":[{"text":"héllo ✓ 日本"}]}}]}\n\n'.encode()
    final = b'data: {"candidates":[{"finishReason":"STOP"}]}\n\n'
    report = check_stream(chunk + chunk + final, protocol="gemini")
    assert (report.outcome.value, report.rules()) == ("completed", [])


# -- a finish marker before the end (issue #12) ----------------------------------------------


def test_finish_reason_not_last_is_a_warning() -> None:
    """The official SDK reads such streams whole, so the deviation is a warning."""
    assert RULES["finish_reason_not_last"].severity is Severity.WARNING


def test_finish_reason_not_last_is_reported_once_per_candidate() -> None:
    """A legacy stream of two candidates with a finish on every chunk: one warning each."""
    body = b"".join(
        gemini_chunk(
            gemini_text(f"{word}a", 0, finishReason="STOP"),
            gemini_text(f"{word}b", 1, finishReason="STOP"),
        )
        for word in ("one", "two", "three")
    )
    report = check_stream(body, protocol="gemini")
    assert report.outcome.value == "completed"
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("finish_reason_not_last", 1),
        ("finish_reason_not_last", 1),
    ]


def test_a_repeated_finish_without_content_is_not_judged() -> None:
    """A finish with content, then a contentless chunk finishing again, stays clean."""
    signature = {"content": {"parts": [{"text": "", "thoughtSignature": "Eg=="}]}}
    body = gemini_chunk(gemini_text("Hello.", finishReason="STOP")) + gemini_chunk(
        {**signature, "finishReason": "STOP", "index": 0}
    )
    report = check_stream(body, protocol="gemini")
    assert (report.outcome.value, report.rules()) == ("completed", [])


def test_a_different_finish_on_a_contentless_chunk_is_finish_reason_not_last() -> None:
    """STOP with the text, then MAX_TOKENS alone: two finishes that disagree, a warning."""
    body = gemini_chunk(gemini_text("Hello.", finishReason="STOP")) + gemini_chunk(
        {"finishReason": "MAX_TOKENS", "index": 0}
    )
    report = check_stream(body, protocol="gemini")
    assert report.outcome.value == "completed"
    assert [(f.rule, f.severity.value, f.event_index) for f in report.findings] == [
        ("finish_reason_not_last", "warning", 1)
    ]


def test_content_without_a_finish_after_a_legacy_finish_is_content_after_finish() -> None:
    """The finish that carried content said the candidate was done: content after it, with
    no finish of its own, is still the error."""
    body = (
        gemini_chunk(gemini_text("Once", finishReason="STOP"))
        + gemini_chunk(gemini_text(" upon", finishReason="STOP"))
        + gemini_chunk(gemini_text(" a time."))
    )
    report = check_stream(body, protocol="gemini")
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("finish_reason_not_last", 1),
        ("content_after_finish", 2),
    ]


def test_the_rule_docs_example_fires_the_rule() -> None:
    """The documented example of finish_reason_not_last is a stream that reports it (as
    tests/test_rule_docs.py runs the self-contained examples)."""
    body = (get_rule_doc("finish_reason_not_last").example + "\n\n").encode()
    report = check_stream(body, protocol="gemini")
    assert report.rules() == ["finish_reason_not_last"]


# -- a shape problem does not hide the lifecycle (issue #12) --------------------------------


def test_a_candidate_with_an_unusable_index_is_judged_by_position() -> None:
    """An index the SDK cannot read as an integer (``"first"``; ``"0"`` it reads as 0) is a
    schema_mismatch, and the candidate still counts: its finish completes the stream, and a
    missing one is still missing."""
    finished = gemini_chunk(gemini_text("Hello.", "first", finishReason="STOP"))
    report = check_stream(finished, protocol="gemini")
    assert (report.outcome.value, report.rules()) == ("completed", ["schema_mismatch"])
    truncated = gemini_chunk(gemini_text("Hello", -1))
    report = check_stream(truncated, protocol="gemini")
    assert report.outcome.value == "unclosed"
    assert report.rules() == ["schema_mismatch", "missing_finish_reason"]


def test_a_null_index_is_the_default_zero() -> None:
    """proto3 JSON reads null as the default value, so ``"index": null`` is candidate 0."""
    body = gemini_chunk(gemini_text("Hi", None)) + gemini_chunk(
        gemini_text(".", 0, finishReason="STOP")
    )
    report = check_stream(body, protocol="gemini")
    assert (report.outcome.value, report.rules()) == ("completed", [])


def test_a_wrong_usage_counter_does_not_hide_the_content_rules() -> None:
    """A chunk with a counter the SDK cannot read as an integer (``"twelve"``; ``"12"`` it
    reads as 12) is a schema_mismatch and is still checked for content after the finish."""
    body = gemini_chunk(gemini_text("Done.", finishReason="STOP")) + gemini_chunk(
        gemini_text(" More."), usageMetadata={"totalTokenCount": "twelve"}
    )
    report = check_stream(body, protocol="gemini")
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 1),
        ("content_after_finish", 1),
    ]


# -- in-band error shapes (issue #12) --------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "problem"),
    [
        (
            {"code": "500", "message": "m", "status": "INTERNAL"},
            "`error.code` is a str, not a JSON number",
        ),
        ({"code": True, "message": "m", "status": "UNAVAILABLE"}, "`error.code` is a bool"),
        ({"code": None, "message": "m", "status": "UNAVAILABLE"}, "`error.code` is null"),
        ({"message": "m", "status": "UNAVAILABLE"}, "field `error.code` is missing"),
        ({"code": 503, "message": "m", "status": 14}, "`error.status` is an int, not a string"),
        ({"code": 503, "message": ["m"], "status": "UNAVAILABLE"}, "`error.message` is a list"),
        ({}, "field `error.code` is missing; field `error.message` is missing"),
        ("overloaded", "field `error` is a str, not an object"),
    ],
)
def test_an_error_of_the_wrong_shape_is_a_schema_mismatch(error: object, problem: str) -> None:
    """An error google-genai cannot turn into its APIError is reported; the outcome stays
    error_event."""
    body = gemini_chunk(gemini_text("Hi")) + f"data: {json.dumps({'error': error})}\n\n".encode()
    report = check_stream(body, protocol="gemini")
    assert report.outcome.value == "error_event"
    [finding] = report.findings
    assert (finding.rule, finding.event_index) == ("schema_mismatch", 1)
    assert problem in finding.message


@pytest.mark.parametrize("code", [503, 503.0, 429.5])
def test_an_error_with_a_numeric_code_is_clean(code: float) -> None:
    """google-genai compares the code with 400 and 500: any number raises its APIError (a
    503.0 its ServerError), so a code that is a number is no shape problem."""
    error = {"code": code, "message": "m", "status": "UNAVAILABLE"}
    body = gemini_chunk(gemini_text("Hi")) + f"data: {json.dumps({'error': error})}\n\n".encode()
    report = check_stream(body, protocol="gemini")
    assert (report.outcome.value, report.findings) == ("error_event", ())


# -- short messages, bounded state (issue #13); no wire value: tests/test_privacy.py -------


def test_long_lists_in_messages_are_cut_short() -> None:
    """A chunk with a thousand bad candidates, and sixty-four unfinished ones, make short
    messages that end with a count."""
    bad = gemini_chunk(*(["x"] * 1000))
    unfinished = gemini_chunk(*(gemini_text("x", i) for i in range(64)))
    for body, count in ((bad, "and 997 more"), (unfinished, "and 61 more")):
        report = check_stream(body, protocol="gemini")
        assert any(count in f.message for f in report.findings), report.findings
        assert max(len(f.message) for f in report.findings) < 300


def test_a_hundred_thousand_candidate_indices_keep_the_state_bounded() -> None:
    """A hostile stream naming 100,000 candidate indices leaves at most 64 tracked."""
    checker = GeminiChecker()
    for i in range(100_000):
        data = json.dumps({"candidates": [gemini_text("x", i)]})
        checker.on_event(Event("message", data, offset=i), i)
    assert len(checker._candidates) <= 64


def test_the_terminal_is_the_chunk_that_finished_the_last_candidate() -> None:
    """With two candidates, the terminal is the chunk that finished the later one."""
    checker = GeminiChecker()
    chunks = [
        '{"candidates":[{"index":0,"content":{"parts":[{"text":"a"}]}},'
        '{"index":1,"content":{"parts":[{"text":"b"}]}}]}',
        '{"candidates":[{"index":1,"content":{"parts":[{"text":"c"}]},"finishReason":"STOP"}]}',
        '{"candidates":[{"index":0,"content":{"parts":[{"text":"d"}]},"finishReason":"STOP"}]}',
        '{"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3}}',
    ]
    offset = 0
    for index, data in enumerate(chunks):
        assert list(checker.on_event(Event("message", data, offset=offset), index)) == []
        offset += len(data) + 8
    assert list(checker.on_end(len(chunks), offset)) == []
    assert (checker.terminal_index, checker.error_index) == (2, None)


# -- Field types as google-genai's models enforce them (found by tests/test_oracle.py) -----

_FINAL = gemini_chunk({"finishReason": "STOP", "index": 0})


def _part(**part: object) -> dict[str, object]:
    return {"content": {"parts": [part], "role": "model"}, "index": 0}


#: A chunk google-genai refuses (ValidationError or AttributeError) -> its name.
MISTYPED: dict[str, bytes] = {
    "content.role": gemini_chunk({"content": {"parts": [{"text": "x"}], "role": 7}}),
    "parts entry a list": gemini_chunk({"content": {"parts": [[{"text": "x"}]]}}),
    "parts entry null": gemini_chunk({"content": {"parts": [None]}}),
    "parts text": gemini_chunk(_part(text=["x"])),
    "thought": gemini_chunk(_part(text="x", thought=7)),
    "thoughtSignature not base64": gemini_chunk(_part(text="", thoughtSignature="CiQB0e2Kb")),
    "thoughtSignature not a string": gemini_chunk(_part(text="", thoughtSignature=7)),
    "functionCall args a list": gemini_chunk(_part(functionCall={"name": "f", "args": []})),
    "functionCall name": gemini_chunk(_part(functionCall={"name": 7, "args": {}})),
    "modelVersion": gemini_chunk(gemini_text("x"), modelVersion=7),
    "responseId": gemini_chunk(gemini_text("x"), responseId=[]),
    "safetyRatings blocked": gemini_chunk(gemini_text("x", safetyRatings=[{"blocked": 7}])),
    "safetyRatings probability": gemini_chunk(
        gemini_text("x", safetyRatings=[{"probability": ["HIGH"]}])
    ),
    "promptFeedback.blockReason": gemini_chunk(promptFeedback={"blockReason": 7}),
    "usageMetadata details an object": gemini_chunk(
        gemini_text("x"), usageMetadata={"promptTokensDetails": {}}
    ),
    "usageMetadata details modality": gemini_chunk(
        gemini_text("x"), usageMetadata={"promptTokensDetails": [{"modality": 7}]}
    ),
    # A digit pydantic does not read as one (str.isdigit() does).
    "tokenCount in Arabic-Indic digits": gemini_chunk(gemini_text("x", tokenCount="\u0663")),
}

#: The look-alikes google-genai reads: lax-mode conversions, null, unknown enum values.
WELL_TYPED: dict[str, bytes] = {
    "role null": gemini_chunk({"content": {"parts": [{"text": "x"}], "role": None}}),
    "unknown part keys": gemini_chunk(_part(text="x", somethingNew={"a": 1})),
    "thought 1 and 'true'": gemini_chunk(_part(text="x", thought=1))
    + gemini_chunk(_part(text="y", thought="true")),
    "thoughtSignature base64 unpadded": gemini_chunk(_part(text="", thoughtSignature="abc")),
    "thoughtSignature base64 padded": gemini_chunk(_part(text="", thoughtSignature="CiQB0e2Kbw==")),
    "functionCall args an object": gemini_chunk(
        _part(functionCall={"name": "f", "args": {"city": "Paris"}})
    ),
    "numbers as strings": gemini_chunk(gemini_text("x", tokenCount="3", avgLogprobs="-0.5")),
    # Values google-genai reads that the rules read too, as the SDK does.
    "index '1' and 1.0": gemini_chunk(gemini_text("x"), gemini_text("y", index="1"))
    + gemini_chunk({"index": 1.0, "finishReason": "STOP"}),
    "usage counters as '7' and 9.0": gemini_chunk(
        gemini_text("x"), usageMetadata={"promptTokenCount": "7", "totalTokenCount": 9.0}
    ),
    "content.parts null": gemini_chunk({"index": 0, "content": {"role": "model", "parts": None}}),
    "candidates an empty object": gemini_chunk(gemini_text("x"))
    + gemini_chunk(candidates={}, usageMetadata={"promptTokenCount": 1}),
    # pydantic's lax mode reads both as the integer 3 and 1000.
    "integers as '3.0' and '1_000'": gemini_chunk(gemini_text("x", tokenCount="3.0"))
    + gemini_chunk(gemini_text("y", tokenCount="1_000")),
    "blocked 1": gemini_chunk(gemini_text("x", safetyRatings=[{"blocked": 1}])),
    "unknown blockReason": gemini_chunk(promptFeedback={"blockReason": "NEW_REASON"}),
    "usage details": gemini_chunk(
        gemini_text("x"),
        usageMetadata={"promptTokensDetails": [{"modality": "TEXT", "tokenCount": 4}]},
    ),
}


def _genai_reads(body: bytes) -> bool | None:
    """Whether google-genai reads ``body`` without raising; None when it is not installed."""
    try:
        from tests.oracle.clients import available, python_verdicts
    except ImportError:  # pragma: no cover
        return None
    if not available("gemini"):
        return None
    return python_verdicts("gemini", body, None)[0].ok


@pytest.mark.parametrize("name", sorted(MISTYPED))
def test_a_field_google_genai_refuses_is_a_schema_mismatch(name: str) -> None:
    """Each such chunk is a schema_mismatch (an error); the SDK fails on it."""
    body = MISTYPED[name] + _FINAL
    report = check_stream(body, protocol="gemini")
    assert [f.rule for f in report.findings if f.event_index == 0] == ["schema_mismatch"], name
    assert report.malformed
    assert _genai_reads(body) in (False, None)


@pytest.mark.parametrize("name", sorted(WELL_TYPED))
def test_what_google_genai_reads_stays_clean(name: str) -> None:
    body = WELL_TYPED[name] + _FINAL
    if name == "unknown blockReason":
        body = WELL_TYPED[name]  # a blocked prompt is the whole stream
    report = check_stream(body, protocol="gemini")
    assert report.rules() == [], name
    assert _genai_reads(body) in (True, None)


def test_the_mismatch_names_the_field_path_not_the_value() -> None:
    body = gemini_chunk(_part(text="", thoughtSignature="secret_value_1")) + _FINAL
    (finding,) = check_stream(body, protocol="gemini").findings
    assert "field `candidates[0].content.parts[0].thoughtSignature` is not valid base64" in (
        finding.message
    )
    assert "secret_value" not in finding.message


def test_the_rules_read_lax_values_as_the_sdk_does() -> None:
    """A counter sent as ``"9"`` then ``7`` went down, and a candidate indexed ``"1"`` is
    candidate 1: the rules see what google-genai reads, not a shape problem."""
    usage = gemini_chunk(gemini_text("x"), usageMetadata={"totalTokenCount": "9"})
    usage += gemini_chunk(gemini_text("y"), usageMetadata={"totalTokenCount": 7})
    assert check_stream(usage + _FINAL, protocol="gemini").rules() == ["usage_decreased"]
    second = gemini_chunk(gemini_text("x"), gemini_text("y", index="1"))
    report = check_stream(second + _FINAL, protocol="gemini")
    assert report.rules() == ["missing_finish_reason"]
    assert "candidate(s) 1 never received" in report.findings[0].message


def test_the_transcript_files_text_by_the_index_the_rules_read() -> None:
    """A candidate indexed ``"1"`` (google-genai reads 1) is candidate 1 in the transcript
    too; one indexed ``"first"`` is filed by its position, as the rules judge it."""
    transcript = Transcript()
    for data in (
        json.dumps({"candidates": [gemini_text("A"), gemini_text("B", "1")]}),
        json.dumps({"candidates": [gemini_text("a", 0), gemini_text("b", "first")]}),
    ):
        GeminiChecker.transcribe(data, transcript)
    assert transcript.texts() == ("Aa", "Bb")
