"""OpenAI Chat Completions checker: streams built here (its fixtures: tests/test_fixtures.py)."""

from __future__ import annotations

import json

import pytest

from streamguard import check_stream, rules
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS
from streamguard.protocols.openai_chat import (
    MAX_CHECKED_N,
    MAX_TRACKED_CHOICES,
    MAX_TRACKED_TOOL_CALLS,
)
from streamguard.report import Outcome, Severity
from tests.conftest import CANARY_MARKER
from tests.helpers import (
    chat_call,
    chat_choice,
    chat_chunk,
    chat_event,
    chat_tool_calls_of_60_kb,
    frame,
)
from tests.sse_fixtures import FIXTURES

PROTOCOL = "openai_chat"


def check(body: bytes, request: dict[str, object] | None = None) -> list[tuple[str, int | None]]:
    report = check_stream(body, protocol=PROTOCOL, request=request)
    return [(finding.rule, finding.event_index) for finding in report.findings]


FINISH = chat_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
DONE = b"data: [DONE]\n\n"


def test_schema_mismatch_names_the_field_path_and_event() -> None:
    """A wrongly typed field is reported with its path and the event index."""
    bad = chat_chunk(choices=[{"index": 0, "delta": {"content": 5}, "finish_reason": None}])
    report = check_stream(chat_chunk() + bad + FINISH + DONE, protocol=PROTOCOL)
    (finding,) = report.findings
    assert finding.rule == "schema_mismatch"
    assert finding.event_index == 1
    assert finding.message.startswith("event 1: field `choices[0].delta.content` ")


def test_deeply_nested_json_is_a_finding_not_a_crash() -> None:
    """JSON nested past the parser's recursion limit is reported as invalid_json."""
    deep = b"data: " + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"\n\n"
    assert check(deep + chat_chunk() + FINISH + DONE) == [("invalid_json", 0)]


def test_huge_number_is_a_finding_not_a_crash() -> None:
    """An integer too large for the parser is reported as invalid_json."""
    body = b'data: {"id":"c","object":"chat.completion.chunk","created":' + b"9" * 5000
    assert check(body + b',"model":"m","choices":[]}\n\n' + FINISH + DONE) == [("invalid_json", 0)]


def test_json_that_is_not_an_object_is_invalid_json() -> None:
    """A payload that parses as a JSON array is not a chunk."""
    assert check(b"data: [1, 2]\n\n" + chat_chunk() + FINISH + DONE) == [("invalid_json", 0)]


def test_vllm_error_object_without_error_key_is_a_schema_mismatch() -> None:
    """vLLM's {"object": "error"} has no error key: the SDK does not raise, so it is malformed
    (its helper skips a chunk of another object; the id, model and created it lacks are
    the warning)."""
    vllm = b'data: {"object":"error","message":"boom","type":"BadRequestError","code":400}\n\n'
    report = check_stream(chat_chunk() + vllm, protocol=PROTOCOL)
    assert report.outcome is Outcome.UNCLOSED
    assert report.rules() == [
        "envelope_field_missing",
        "schema_mismatch",
        "missing_terminal",
        "missing_finish_reason",
    ]


def test_falsy_error_key_is_an_ordinary_chunk() -> None:
    """A chunk with "error": null is not an in-band error, as for the SDK."""
    report = check_stream(chat_chunk(error=None) + FINISH + DONE, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_usage_checks_need_the_request() -> None:
    """Without a request, neither usage_missing nor usage_unrequested can fire."""
    usage = chat_chunk(
        choices=[], usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    )
    assert check(chat_chunk() + FINISH + DONE) == []
    assert check(chat_chunk() + FINISH + usage + DONE) == []
    assert check(chat_chunk() + FINISH + DONE, {"stream_options": {"include_usage": True}}) == [
        ("usage_missing", 2)
    ]
    assert check(chat_chunk() + FINISH + usage + DONE, {"stream": True}) == [
        ("usage_unrequested", 2)
    ]


def test_severities_follow_the_reference_tags() -> None:
    """SHOULD-level chat rules are warnings; MUST-level ones, and those on which the SDK's
    stream helper raises (measured by tests/test_oracle.py), are errors."""
    warnings = {name for name, rule in rules.RULES.items() if rule.severity is Severity.WARNING}
    assert {
        "role_not_first",
        "role_repeated",
        "unknown_finish_reason",
        "tool_call_header_missing",
        "tool_call_header_repeated",
        "tool_call_arguments_invalid",
        "function_call_mixed",
        "usage_unrequested",
        "usage_nonstandard",
        "usage_total_mismatch",
        "unexpected_event_field",
    } <= warnings
    for name in (
        "inconsistent_id",
        "multiple_finish_reason",
        "usage_missing",
        "usage_repeated",
        "choice_out_of_order",
        "usage_without_choices",
        "tool_call_function_missing",
    ):
        assert rules.RULES[name].severity is Severity.ERROR


def test_tool_call_arguments_are_checked_once_per_call() -> None:
    """Each call's arguments are parsed at its choice's finish, and only then."""
    header = {"index": 0, "id": "call_1", "type": "function"}
    first = chat_chunk(
        choices=[
            {
                "index": 0,
                "delta": {"tool_calls": [{**header, "function": {"name": "f", "arguments": "{"}}]},
                "finish_reason": None,
            }
        ]
    )
    rest = chat_chunk(
        choices=[
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
                "finish_reason": "tool_calls",
            }
        ]
    )
    assert check(first + rest + DONE) == []
    assert check(first + FINISH + DONE) == [("tool_call_arguments_invalid", 1)]


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("created", 1.0),
        ("created", "1"),
        ("model", 5),
        ("system_fingerprint", 5),
        ("service_tier", 5),
        ("obfuscation", 5),
        ("usage", "none"),
        ("choices.index", True),
        ("choices.logprobs", "none"),
        ("choices.finish_reason", 5),
        ("choices.delta.content", 5),
    ],
)
def test_common_chunk_with_a_mistyped_field_is_a_schema_mismatch(where: str, value: object) -> None:
    """The fast path for ordinary content chunks never waves through a mistyped field."""
    fields: dict[str, object] = {
        "system_fingerprint": None,
        "service_tier": "default",
        "obfuscation": "ab",
        "usage": None,
    }
    choice: dict[str, object] = {
        "index": 0,
        "delta": {"content": "x"},
        "logprobs": None,
        "finish_reason": None,
    }
    bad_fields, bad_choice = dict(fields), dict(choice)
    if where == "choices.delta.content":
        bad_choice["delta"] = {"content": value}
    elif where.startswith("choices."):
        bad_choice[where.removeprefix("choices.")] = value
    else:
        bad_fields[where] = value
    good = chat_chunk(**fields, choices=[choice])
    body = good + good + chat_chunk(**bad_fields, choices=[bad_choice]) + FINISH + DONE
    assert check(body) == [("schema_mismatch", 2)]


# -- Bounds: nothing a client or an upstream sends sizes the work without a limit ---------


def test_n_above_the_checked_bound_is_not_used() -> None:
    """A request n above MAX_CHECKED_N sizes no check: the choices seen are judged alone."""
    body = chat_chunk() + FINISH + DONE
    assert check(body, {"n": MAX_CHECKED_N}) == [("missing_finish_reason", 2)]
    assert check(body, {"n": MAX_CHECKED_N + 1}) == []
    assert check(body, {"n": 10_000_000}) == []


def test_messages_list_a_few_choices_then_a_count() -> None:
    """A message about many choices names five of them and counts the rest."""
    report = check_stream(
        chat_chunk() + FINISH + DONE, protocol=PROTOCOL, request={"n": MAX_CHECKED_N}
    )
    (finding,) = report.findings
    missing = MAX_CHECKED_N - 1
    assert finding.message == (
        f"[DONE] (event 2): choice(s) 1, 2, 3, 4, 5 and {missing - 5} more have no "
        f"finish_reason (1, 2, 3, 4, 5 and {missing - 5} more never appeared)"
    )


def test_choices_past_the_tracked_bound_go_unchecked() -> None:
    """A stream cannot grow the choice table past MAX_TRACKED_CHOICES; later choices are skipped."""
    many = MAX_TRACKED_CHOICES + 50
    body = b"".join(chat_chunk(choices=[chat_choice(i, content="x")]) for i in range(many))
    # One more chunk per untracked choice would be content after its finish if it were tracked.
    late = chat_chunk(choices=[chat_choice(many - 1, content="x", finish_reason="stop")])
    report = check_stream(body + late + late + DONE, protocol=PROTOCOL)
    (finding,) = report.findings
    assert finding.rule == "missing_finish_reason"
    assert finding.message.endswith(f"and {MAX_TRACKED_CHOICES - 5} more have no finish_reason")


def test_tool_calls_past_the_tracked_bound_go_unchecked() -> None:
    """Past MAX_TRACKED_TOOL_CALLS per stream, a new tool call is neither tracked nor checked."""
    calls = [chat_call(i, "{}") for i in range(MAX_TRACKED_TOOL_CALLS)]
    tracked = chat_chunk(choices=[chat_choice(0, tool_calls=calls)])
    headerless = chat_chunk(
        choices=[chat_choice(0, tool_calls=[chat_call(MAX_TRACKED_TOOL_CALLS, "{", header=False)])]
    )
    finish = chat_chunk(choices=[chat_choice(0, finish_reason="tool_calls")])
    assert check(tracked + headerless + finish + DONE) == []
    # Below the bound the same headerless call is reported, and its arguments checked.
    fewer = chat_chunk(choices=[chat_choice(0, tool_calls=calls[:-1])])
    below = chat_chunk(
        choices=[
            chat_choice(0, tool_calls=[chat_call(MAX_TRACKED_TOOL_CALLS - 1, "{", header=False)])
        ]
    )
    assert check(fewer + below + finish + DONE) == [
        ("tool_call_header_missing", 1),
        ("tool_call_arguments_invalid", 2),
    ]


def test_past_the_kept_text_budget_a_small_tool_call_is_still_checked() -> None:
    """After 300 calls of 60 KB (their memory: tests/test_hostile.py), a small call is still
    checked at the finish."""
    checker, found = chat_tool_calls_of_60_kb()
    assert found == []
    finish = chat_chunk(choices=[chat_choice(0, finish_reason="tool_calls")])
    found = checker.on_event(chat_event(finish), 302)
    assert [(f.rule, f.message) for f in found] == [
        (
            "tool_call_arguments_invalid",
            "event 302: choice 0 finished but the arguments of tool call 300 are not JSON "
            "(EOF while parsing an object at line 1 column 1): 1 characters",
        )
    ]


def test_a_finished_choice_gives_its_kept_arguments_back() -> None:
    """Arguments checked at a choice's finish free their room for the next choice's."""
    quarter = MAX_KEPT_TEXT_CHARS // 4 - 100  # four fragments: events stay under 1 MiB

    def call(choice: int, opening: str) -> bytes:
        pieces = [opening, *["x" * quarter] * 3, '"}']
        first = chat_chunk(
            choices=[chat_choice(choice, role="assistant", tool_calls=[chat_call(0, "")])]
        )
        rest = (
            chat_chunk(
                choices=[
                    chat_choice(choice, tool_calls=[{"index": 0, "function": {"arguments": p}}])
                ]
            )
            for p in pieces
        )
        finish = chat_chunk(choices=[chat_choice(choice, finish_reason="tool_calls")])
        return first + b"".join(rest) + finish

    body = call(0, '{"pad": "') + call(1, '{"pad": ') + DONE  # the second lacks a quote
    assert check(body, {"n": 2}) == [("tool_call_arguments_invalid", 13)]


# -- Privacy: a shape message quotes no input (every rule: tests/test_privacy.py) ----------

CANARY = f"{CANARY_MARKER}-chat"


def test_schema_messages_carry_no_input() -> None:
    """A value outside its field's set (a role) is named by size and hash, a value of the
    wrong type by its type: neither is quoted."""
    for delta in ({"role": CANARY}, {"content": {CANARY: 1}}, {"role": [CANARY]}):
        bad = chat_chunk(choices=[{"index": 0, "delta": delta, "finish_reason": None}])
        report = check_stream(chat_chunk() + bad + FINISH + DONE, protocol=PROTOCOL)
        (shape,) = [f for f in report.findings if f.rule == "schema_mismatch"]
        assert shape.message.startswith("event 1: field `choices[0].delta."), shape.message
        assert CANARY_MARKER not in shape.message, shape.message


# -- No blind spots: a chunk of the wrong shape is still checked ---------------------------

TEXT_CREATED = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": "1755012345",
    "model": "m",
}


def loose(**fields: object) -> bytes:
    """A chunk whose ``created`` is a string (the wrong type), with ``fields`` added."""
    return frame({**TEXT_CREATED, **fields})


def test_chunks_with_a_text_created_are_still_checked_for_repeated_roles() -> None:
    """A server that sends created as text and repeats the role gets both findings on every
    chunk."""
    body = (
        loose(choices=[chat_choice(0, role="assistant", content="")])
        + loose(choices=[chat_choice(0, role="assistant", content="Hi")])
        + loose(choices=[chat_choice(0, finish_reason="stop")])
        + DONE
    )
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 0),
        ("schema_mismatch", 1),
        ("role_repeated", 1),
        ("schema_mismatch", 2),
    ]
    assert report.findings[0].message == (
        "event 0: field `created` is a str, not an integer written as digits"
    )


def test_a_mistyped_finish_chunk_still_finishes_its_choice() -> None:
    """The finish on a chunk of the wrong shape counts: no missing_finish_reason follows."""
    finish = chat_chunk(model=5, choices=[chat_choice(0, finish_reason="stop")])
    assert check(chat_chunk() + finish + DONE) == [("schema_mismatch", 1)]
    again = chat_chunk(model=5, choices=[chat_choice(0, content="late", finish_reason="stop")])
    assert check(chat_chunk() + finish + again + DONE) == [
        ("schema_mismatch", 1),
        ("schema_mismatch", 2),
        ("content_after_finish", 2),
        ("multiple_finish_reason", 2),
    ]


def test_a_mistyped_usage_chunk_still_counts_for_usage_order() -> None:
    """A usage chunk with a text created before the finish is usage_not_last, and usage is
    seen."""
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 3}
    body = chat_chunk() + loose(choices=[], usage=usage) + FINISH + DONE
    assert check(body, {"stream_options": {"include_usage": True}}) == [
        ("schema_mismatch", 1),
        ("usage_total_mismatch", 1),
        ("usage_not_last", 1),
        ("usage_not_last", 2),
    ]


def test_tool_call_rules_run_on_a_chunk_with_a_mistyped_field() -> None:
    """A tool call delta with a mistyped type field still has its index and header checked."""
    gap = {**chat_call(1, "{}"), "type": 5}
    body = chat_chunk(choices=[chat_choice(0, tool_calls=[gap])]) + FINISH + DONE
    assert check(body) == [
        ("schema_mismatch", 0),
        ("tool_call_index_invalid", 0),
    ]


def test_a_mistyped_field_is_not_read_as_content() -> None:
    """A value of the wrong type is reported once, and the rules never read it."""
    late = chat_chunk(choices=[chat_choice(0, content=42, role=7)])
    assert check(chat_chunk() + FINISH + late + DONE) == [("schema_mismatch", 2)]


# -- The envelope: id, model and created read whole by every client ----------------------


@pytest.mark.parametrize("field", ["id", "model", "created"])
@pytest.mark.parametrize("null", [False, True], ids=["missing", "null"])
def test_a_chunk_without_its_id_model_or_created_is_a_warning(field: str, null: bool) -> None:
    """The SDK's helper and plain iteration read such chunks whole (tests/oracle: the
    completion they assemble lacks the field): a warning, once per stream, not a
    schema_mismatch."""

    def envelope(**fields: object) -> bytes:
        chunk = json.loads(chat_chunk(**fields)[len(b"data: ") : -2])
        if null:
            chunk[field] = None
        else:
            del chunk[field]
        return frame(chunk)

    role = envelope(choices=[chat_choice(0, role="assistant", content="")])
    finish = envelope(choices=[chat_choice(0, finish_reason="stop")])
    report = check_stream(role + envelope() + finish + DONE, protocol=PROTOCOL)
    (finding,) = report.findings
    assert (finding.rule, finding.severity, finding.event_index) == (
        "envelope_field_missing",
        Severity.WARNING,
        0,
    )
    assert finding.message == (f"event 0: field {field} missing or null (reported once per stream)")
    assert report.outcome is Outcome.COMPLETED


def test_a_chunk_without_object_is_still_an_error() -> None:
    """The SDK's helper skips a chunk whose object is not chat.completion.chunk (its content
    lost: the oracle's helper raises on a stream of them), so a missing object stays a
    schema_mismatch."""
    chunk = json.loads(chat_chunk()[len(b"data: ") : -2])
    del chunk["object"]
    assert check(chat_chunk() + frame(chunk) + FINISH + DONE) == [("schema_mismatch", 1)]


def test_an_envelope_field_of_the_wrong_type_is_still_an_error() -> None:
    """Only missing or null is the warning; a created sent as text is a schema_mismatch."""
    assert check(chat_chunk(created="1") + FINISH + DONE) == [("schema_mismatch", 0)]


# -- In-band errors: the SDK reads message, type, param and code from them -----------------


@pytest.mark.parametrize(
    ("error", "problem"),
    [
        ('"rate limited"', "field `error` is a str, not an object"),
        ('{"message": 5, "type": "server_error"}', "field `error.message` is an int, not a string"),
        ('{"type": "server_error"}', "field `error.message` is missing"),
        ('{"message": "m", "code": ["x"]}', "field `error.code` is a list, not a string or"),
        ('{"message": "m", "code": 502.0}', "field `error.code` is a float, not a string or"),
        ('{"message": "m", "code": true}', "field `error.code` is a bool, not a string or"),
        ('{"message": "m", "type": 1, "param": 2}', "field `error.param` is an int, not a string"),
    ],
)
def test_an_error_payload_of_the_wrong_shape_is_a_schema_mismatch(error: str, problem: str) -> None:
    """An in-band error whose fields the SDK cannot read is reported, and still ends the stream."""
    body = chat_chunk() + b'data: {"error": ' + error.encode() + b"}\n\n"
    report = check_stream(body, protocol=PROTOCOL)
    assert report.outcome is Outcome.ERROR_EVENT
    (finding,) = report.findings
    assert (finding.rule, finding.event_index) == ("schema_mismatch", 1)
    assert problem in finding.message


@pytest.mark.parametrize(
    "error",
    [
        '{"message": "m", "type": "server_error", "param": null, "code": null}',
        '{"message": "m", "type": "invalid_request_error", "param": "n", "code": "bad"}',
        '{"code": 502, "message": "Provider disconnected"}',  # OpenRouter's integer codes
        '{"message": ""}',
    ],
)
def test_error_payloads_the_sdk_reads_are_clean(error: str) -> None:
    """OpenAI's documented error object and OpenRouter's numeric code end the stream cleanly."""
    report = check_stream(
        chat_chunk() + b'data: {"error": ' + error.encode() + b"}\n\n", protocol=PROTOCOL
    )
    assert (report.outcome, report.findings) == (Outcome.ERROR_EVENT, ())


# -- What the oracle (tests/test_oracle.py) found the SDK's stream helper fails on ----------

USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
_ROLE = chat_chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}])


@pytest.mark.parametrize("choices", [{"choices": None}, {}], ids=["null", "absent"])
def test_usage_without_choices_is_an_error(choices: dict[str, object]) -> None:
    """vLLM's usage chunk with choices null or absent: the stream helper raises TypeError."""
    usage = frame(
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        | choices
        | {"usage": USAGE}
    )
    request = {"stream_options": {"include_usage": True}}
    report = check_stream(_ROLE + FINISH + usage + DONE, protocol=PROTOCOL, request=request)
    assert [(f.rule, f.severity, f.event_index) for f in report.findings] == [
        ("usage_without_choices", Severity.ERROR, 2)
    ]


def test_usage_on_a_choice_chunk_stays_a_warning_and_choices_empty_is_clean() -> None:
    """The look-alikes: usage on the finish chunk (the helper reads it) is the warning
    usage_nonstandard; OpenAI's own usage chunk (choices []) is clean."""
    request = {"stream_options": {"include_usage": True}}
    on_finish = chat_chunk(
        choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}], usage=USAGE
    )
    report = check_stream(_ROLE + on_finish + DONE, protocol=PROTOCOL, request=request)
    assert [(f.rule, f.severity) for f in report.findings] == [
        ("usage_nonstandard", Severity.WARNING)
    ]
    standard = chat_chunk(choices=[], usage=USAGE)
    assert check(_ROLE + FINISH + standard + DONE, request) == []


def _tool_delta(call: dict[str, object]) -> bytes:
    return chat_chunk(choices=[{"index": 0, "delta": {"tool_calls": [call]}}])


_CALL_HEADER = _tool_delta(
    {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
)
_TOOL_FINISH = chat_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])


@pytest.mark.parametrize(
    "later", [{"index": 0}, {"index": 0, "function": None}], ids=["absent", "null"]
)
def test_a_tool_call_delta_without_function_is_an_error(later: dict[str, object]) -> None:
    """The stream helper asserts each delta of a function call carries ``function``."""
    body = _CALL_HEADER + _tool_delta(later) + _TOOL_FINISH + DONE
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.severity, f.event_index) for f in report.findings] == [
        ("tool_call_function_missing", Severity.ERROR, 1)
    ]


def test_a_tool_call_delta_with_an_empty_fragment_is_clean() -> None:
    """The look-alike: a later delta whose function carries an empty fragment."""
    empty = _tool_delta({"index": 0, "function": {"arguments": ""}})
    assert check(_CALL_HEADER + empty + _TOOL_FINISH + DONE) == []


def _no_index(delta: dict[str, object], finish: str | None = None) -> bytes:
    return chat_chunk(choices=[{"delta": delta, "finish_reason": finish}])


def test_a_single_choice_without_index_is_read_as_choice_0() -> None:
    """A lone choice without index (the helper raises TypeError): each chunk is a
    schema_mismatch, and the choice is still checked as choice 0, so a repeated role and a
    missing finish are reported instead of silenced."""
    body = (
        _no_index({"role": "assistant", "content": ""})
        + _no_index({"role": "assistant", "content": "Hi"})
        + DONE
    )
    assert check(body) == [
        ("schema_mismatch", 0),
        ("schema_mismatch", 1),
        ("role_repeated", 1),
        ("missing_finish_reason", 2),
    ]
    finished = _no_index({"role": "assistant", "content": "Hi"}) + _no_index({}, "stop") + DONE
    assert check(finished) == [("schema_mismatch", 0), ("schema_mismatch", 1)]


def test_choices_without_index_are_not_guessed_with_several_choices() -> None:
    """The look-alike: with n=2 (or a second choice seen) a missing index is not choice 0."""
    body = _no_index({"role": "assistant", "content": ""}) + _no_index({"role": "assistant"})
    assert check(body + DONE, {"n": 2}) == [
        ("schema_mismatch", 0),
        ("schema_mismatch", 1),
        ("missing_finish_reason", 2),
    ]


def test_moderation_must_be_an_object() -> None:
    """``moderation`` is an object or null (the helper merges it as one); a string on a
    mid-stream text chunk is not let through by the fast path."""
    body = _ROLE + chat_chunk(moderation="flagged") + FINISH + DONE
    assert check(body) == [("schema_mismatch", 1)]
    for clean in ({"moderation": None}, {"moderation": {"input": None, "output": None}}):
        assert check(_ROLE + chat_chunk(**clean) + FINISH + DONE) == []


_TOOL_STREAM = (FIXTURES / "openai_chat" / "tool_calls_finished_as_stop.sse").read_bytes()
_TOOLS = [{"type": "function", "function": {"name": "get_weather"}}]
_REQUEST = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}


@pytest.mark.parametrize(
    ("tool_choice", "reported"),
    [
        (None, True),  # absent: auto
        ("auto", True),
        ("required", True),
        ({"type": "function", "function": {"name": "get_weather"}}, False),  # forced: stop
        ("none", False),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}, False),
    ],
)
def test_tool_calls_finished_with_stop_depend_on_the_request(
    tool_choice: object, reported: bool
) -> None:
    """``stop`` after tool calls is OpenAI's own answer to a forced function, and the bug
    of gateways otherwise; a tool_choice the checker cannot read judges nothing."""
    request: dict[str, object] = {**_REQUEST, "tools": _TOOLS}
    if tool_choice is not None:
        request["tool_choice"] = tool_choice
    report = check_stream(_TOOL_STREAM, protocol="openai_chat", request=request)
    expected = [("tool_calls_finished_as_stop", 6)] if reported else []
    assert [(f.rule, f.event_index) for f in report.findings] == expected
    if reported:
        assert report.findings[0].severity is Severity.WARNING


def test_tool_calls_finished_as_stop_needs_the_request_and_the_tool_calls() -> None:
    unknown = check_stream(_TOOL_STREAM, protocol="openai_chat")  # no request
    assert "tool_calls_finished_as_stop" not in unknown.rules()
    text = (FIXTURES / "openai_chat" / "clean-text-include-usage.sse").read_bytes()
    request = {**_REQUEST, "tools": _TOOLS}
    assert (
        "tool_calls_finished_as_stop"
        not in check_stream(text, protocol="openai_chat", request=request).rules()
    )
    cut = _TOOL_STREAM.replace(b'"finish_reason":"stop"', b'"finish_reason":"length"')
    assert check_stream(cut, protocol="openai_chat", request=request).findings == ()
