"""OpenAI Responses checker: streams built here (its fixtures: tests/test_fixtures.py)."""

from __future__ import annotations

import pytest

from streamguard import check_stream, rules
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS
from streamguard.protocols.openai_responses import MAX_OPEN_PARTS
from streamguard.report import Outcome, Severity
from streamguard.rule_docs import get_rule_doc
from tests.helpers import HOSTILE_DELTA, HOSTILE_ITEMS, ResponsesFeeder, frame

PROTOCOL = "openai_responses"


def event(kind: str, sequence: int, **fields: object) -> bytes:
    return frame({"type": kind, "sequence_number": sequence, **fields}, kind)


def lifecycle(kind: str, sequence: int, status: str, **fields: object) -> bytes:
    response = {"id": "resp_1", "status": status, "usage": None, "error": None, **fields}
    return event(kind, sequence, response=response)


CREATED = lifecycle("response.created", 0, "in_progress")
COMPLETED = lifecycle("response.completed", 1, "completed", usage={"total_tokens": 1})


def test_minimal_stream_is_clean() -> None:
    """created then completed, with nothing in between, is a complete stream."""
    report = check_stream(CREATED + COMPLETED, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_data_only_stream_without_event_names_is_clean() -> None:
    """The SDK reads only the JSON type, so a stream without event: lines is fine."""
    body = (CREATED + COMPLETED).replace(b"event: response.created\n", b"")
    body = body.replace(b"event: response.completed\n", b"")
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_schema_mismatch_names_the_field_path() -> None:
    """A wrongly typed nested field is reported with its path and the event index."""
    bad = event("response.completed", 1, response={"id": "resp_1", "status": 3})
    report = check_stream(CREATED + bad, protocol=PROTOCOL)
    # The event is still the terminal (clients act on its type), so the body did not end
    # without one: its wrong status is what is reported beside the shape.
    assert report.rules() == ["schema_mismatch", "status_mismatch"]
    assert report.outcome is Outcome.COMPLETED
    assert report.findings[0].event_index == 1
    assert report.findings[0].message.startswith("event 1: field `response.status` ")


def test_deeply_nested_json_is_a_finding_not_a_crash() -> None:
    """JSON nested past the parser's recursion limit is reported as invalid_json."""
    deep = b"data: " + b"[" * 10000 + b"]" * 10000 + b"\n\n"
    completed = lifecycle("response.completed", 2, "completed", usage={"total_tokens": 1})
    report = check_stream(CREATED + deep + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_json", 1)]


def test_resume_from_the_request_path() -> None:
    """starting_after in the request path also marks a stream as resumed."""
    body = COMPLETED.replace(b'"sequence_number": 1', b'"sequence_number": 8')
    report = check_stream(body, protocol=PROTOCOL, path="/v1/responses/resp_1?starting_after=7")
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())
    report = check_stream(body, protocol=PROTOCOL, path="/v1/responses")
    assert report.rules() == ["sequence_gap", "missing_response_created"]


def test_severities_follow_the_reference_tags() -> None:
    """SHOULD-level Responses rules are warnings; MUST-level ones are errors."""
    for name in ("sequence_gap", "item_overlap", "item_status_unexpected", "done_text_mismatch"):
        assert rules.RULES[name].severity is Severity.WARNING
    assert rules.RULES["event_type_mismatch"].severity is Severity.WARNING
    # The stream helper raises "Lifecycle response identity changed" (tests/test_oracle.py).
    assert rules.RULES["response_id_changed"].severity is Severity.ERROR
    for name in ("missing_response_created", "item_not_open", "item_not_closed"):
        assert rules.RULES[name].severity is Severity.ERROR
    for name in ("status_mismatch", "item_out_of_order"):
        assert rules.RULES[name].severity is Severity.ERROR


def test_duplicate_response_created_doc_example_fires() -> None:
    """The documented example of duplicate_response_created reports that rule."""
    body = (get_rule_doc("duplicate_response_created").example + "\n\n").encode()
    report = check_stream(body, protocol=PROTOCOL)
    assert "duplicate_response_created" in report.rules()


# -- lifecycle completeness (issue 12) ----------------------------------------------------


def test_a_second_response_created_is_reported_once_per_repeat() -> None:
    """Every response.created after the first is a duplicate_response_created."""
    second = lifecycle("response.created", 1, "in_progress")
    third = lifecycle("response.created", 2, "in_progress")
    completed = lifecycle("response.completed", 3, "completed", usage={"total_tokens": 1})
    report = check_stream(CREATED + second + third + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("duplicate_response_created", 1),
        ("duplicate_response_created", 2),
    ]


def test_queued_and_in_progress_may_repeat() -> None:
    """Background mode repeats response.queued and response.in_progress; only created is once."""
    body = lifecycle("response.created", 0, "queued")
    body += lifecycle("response.queued", 1, "queued") + lifecycle("response.queued", 2, "queued")
    body += lifecycle("response.in_progress", 3, "in_progress")
    body += lifecycle("response.in_progress", 4, "in_progress")
    body += lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_sequence_going_back_is_reported_after_a_gap() -> None:
    """A step back in sequence_number is reported even when a skip ahead came first."""
    body = CREATED + event("keepalive", 2) + event("keepalive", 3) + event("keepalive", 1)
    body += lifecycle("response.completed", 2, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("sequence_gap", 1),
        ("sequence_gap", 3),
    ]
    assert "expected 1: the numbering skips ahead" in report.findings[0].message
    assert "expected 4: the numbering repeats or goes back" in report.findings[1].message


def added(index: int, item_id: str, sequence: int, status: str = "in_progress") -> bytes:
    item = {"id": item_id, "type": "function_call", "status": status}
    return event("response.output_item.added", sequence, output_index=index, item=item)


def done(index: int, item_id: str, sequence: int) -> bytes:
    item = {"id": item_id, "type": "function_call", "status": "completed"}
    return event("response.output_item.done", sequence, output_index=index, item=item)


def arguments(kind: str, index: int, item_id: str, sequence: int, text: str) -> bytes:
    field = "delta" if kind.endswith(".delta") else "arguments"
    return event(kind, sequence, output_index=index, item_id=item_id, **{field: text})


def test_an_output_index_reused_while_open_is_out_of_order() -> None:
    """An item added at the index of an open item is out of order, and says so."""
    body = CREATED + added(0, "fc_1", 1) + added(0, "fc_2", 2) + done(0, "fc_2", 3)
    body += lifecycle("response.completed", 4, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert report.rules() == ["item_out_of_order", "item_overlap"]
    assert "output_index 0, is already open" in report.findings[0].message


def test_a_delta_after_its_arguments_are_done_is_reported() -> None:
    """A tool call's input delta after its .done is item_not_open; the clean order is not."""
    delta, final = "response.function_call_arguments.delta", "response.function_call_arguments.done"
    clean = CREATED + added(0, "fc_1", 1) + arguments(delta, 0, "fc_1", 2, "{}")
    clean += arguments(final, 0, "fc_1", 3, "{}") + done(0, "fc_1", 4)
    completed = lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    assert check_stream(clean + completed, protocol=PROTOCOL).findings == ()
    late = CREATED + added(0, "fc_1", 1) + arguments(delta, 0, "fc_1", 2, "{}")
    late += arguments(final, 0, "fc_1", 3, "{}") + arguments(delta, 0, "fc_1", 4, " ")
    late += done(0, "fc_1", 5)
    completed = lifecycle("response.completed", 6, "completed", usage={"total_tokens": 1})
    report = check_stream(late + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("item_not_open", 4)]
    assert "a delta follows the .done of its input" in report.findings[0].message


def test_an_event_naming_only_an_item_id_is_matched_by_id() -> None:
    """A delta without its output_index is schema_mismatch, and is still checked against
    the open item with its item_id."""
    body = CREATED + added(0, "fc_1", 1)
    body += event("response.function_call_arguments.delta", 2, item_id="fc_1", delta="{}")
    body += event("response.function_call_arguments.delta", 3, item_id="fc_9", delta="{}")
    body += done(0, "fc_1", 4)
    body += lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 2),
        ("schema_mismatch", 3),
        ("item_not_open", 3),
        ("text_not_done", 4),  # the input streamed, its .done never came
    ]


# -- no blind spots: a malformed event is still checked (issue 12) ------------------------


def test_a_malformed_first_event_is_still_checked_for_its_type() -> None:
    """A first event with a string sequence_number is reported and is still not created."""
    first = b'data: {"type":"response.in_progress","sequence_number":"0",'
    first += b'"response":{"status":"in_progress"}}\n\n'
    completed = lifecycle("response.completed", 1, "completed", usage={"total_tokens": 1})
    report = check_stream(first + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 0),
        ("missing_response_created", 0),
    ]


def test_a_malformed_added_item_still_opens() -> None:
    """output_item.added with a wrongly typed item field still opens the item."""
    bad = event(
        "response.output_item.added",
        1,
        output_index=0,
        item={"id": "fc_1", "type": "function_call", "status": 5},
    )
    body = CREATED + bad + arguments("response.function_call_arguments.delta", 0, "fc_1", 2, "{")
    body += done(0, "fc_1", 3)
    body += lifecycle("response.completed", 4, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    # The item was followed: its input streamed and was never done (text_not_done).
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("schema_mismatch", 1),
        ("text_not_done", 3),
    ]
    assert report.findings[0].message.startswith("event 1: field `item.status` ")


def test_one_schema_mismatch_per_event() -> None:
    """An event with a wrong type and a missing required field gets one schema_mismatch."""
    bad = event("response.output_item.done", "4", item={"id": "fc_1"})
    report = check_stream(CREATED + added(0, "fc_1", 1) + bad, protocol=PROTOCOL)
    assert report.rules() == ["schema_mismatch", "missing_terminal"]


# -- in-band error payloads (issue 12) ----------------------------------------------------

MESSAGE = "The server had an error."


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"code": 500, "message": MESSAGE, "param": None}, "field `code` is an int, not a string"),
        ({"code": "server_error", "param": None}, "field `message` is missing"),
        ({"code": None, "message": 7}, "field `message` is an int, not a string"),
        (
            {"code": None, "message": MESSAGE, "param": ["x"]},
            "field `param` is a list, not a string",
        ),
        ({"error": "quota exceeded"}, "field `error` is a str, not an object"),
        (
            {"error": {"type": "insufficient_quota", "code": 429}},
            "field `error.message` is missing",
        ),
        (
            {"error": {"code": 429, "message": MESSAGE}},
            "field `error.code` is an int, not a string",
        ),
        ({"error": {"type": 1, "message": MESSAGE}}, "field `error.type` is an int, not a string"),
    ],
)
def test_error_event_of_the_wrong_shape(fields: dict[str, object], problem: str) -> None:
    """An error event the SDK cannot read as typed is schema_mismatch; it still ends the stream."""
    report = check_stream(CREATED + event("error", 1, **fields), protocol=PROTOCOL)
    assert report.outcome is Outcome.ERROR_EVENT
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 1)]
    assert report.findings[0].message == f"event 1: {problem}"


@pytest.mark.parametrize(
    "fields",
    [
        {"message": MESSAGE},
        {"code": None, "message": MESSAGE, "param": None},
        {"code": "server_error", "message": MESSAGE, "param": "input"},
        {"error": {"type": "insufficient_quota", "code": "insufficient_quota", "message": MESSAGE}},
        {"error": {"type": "server_error", "code": None, "message": MESSAGE, "param": None}},
        {"error": None, "message": MESSAGE},
    ],
)
def test_error_event_of_either_documented_shape_is_clean(fields: dict[str, object]) -> None:
    """The flat and the nested error shapes, with nulls where the SDK allows them, are clean."""
    report = check_stream(CREATED + event("error", 1, **fields), protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.ERROR_EVENT, ())


@pytest.mark.parametrize(
    ("error", "rules_found"),
    [
        ({"code": "server_error", "message": MESSAGE}, []),
        ({"code": None, "message": MESSAGE}, []),
        ({"code": 500, "message": MESSAGE}, ["schema_mismatch"]),
        ({"code": "server_error"}, ["schema_mismatch"]),
        ("server_error", ["schema_mismatch"]),
        (None, ["status_mismatch"]),
    ],
)
def test_response_failed_error_shape(error: object, rules_found: list[str]) -> None:
    """response.failed's response.error is checked against the SDK's ResponseError."""
    failed = lifecycle("response.failed", 1, "failed", error=error)
    report = check_stream(CREATED + failed, protocol=PROTOCOL)
    assert report.outcome is Outcome.ERROR_EVENT
    assert report.rules() == rules_found


# -- bounded state (issue 13) -------------------------------------------------------------


def test_small_items_are_compared_beside_hostile_ones() -> None:
    """A small item keeps its deltas while hostile ones exhaust the budget, and the budget
    comes back when they are done; items past the tracking bound raise nothing."""
    feed = ResponsesFeeder()
    feed("response.created", response={"id": "resp_1", "status": "in_progress"})
    feed.open_item(0)
    where = {"item_id": "msg_0", "output_index": 0, "content_index": 0}
    feed("response.content_part.added", **where, part={"type": "output_text", "text": ""})
    feed("response.output_text.delta", **where, delta="Hel")
    feed.open_hostile_items(1)
    feed.finish_text_item(0, "Help")  # kept before the budget ran out: compared
    for index in range(1, 1 + HOSTILE_ITEMS):
        feed.finish_text_item(index, "x" * HOSTILE_DELTA)
    assert feed.checker.keep_text(MAX_KEPT_TEXT_CHARS)  # every kept character was given back
    feed.checker.free_text(MAX_KEPT_TEXT_CHARS)
    last = 1 + HOSTILE_ITEMS
    feed.open_item(last)
    feed.text_item(last, ["a"], "b")  # after the hostile items: compared again
    feed(
        "response.completed",
        response={"id": "resp_1", "status": "completed", "usage": {"total_tokens": 1}},
    )
    found = [(f.rule, f.event_index) for f in feed.findings]
    first_done = 4 + 2 * HOSTILE_ITEMS + HOSTILE_ITEMS
    assert found == [
        ("item_overlap", 4),
        ("done_text_mismatch", first_done),
        ("done_text_mismatch", feed.sequence - 4),
    ]
    assert feed.checker.keep_text(MAX_KEPT_TEXT_CHARS)


def test_unclosed_items_are_listed_in_one_bounded_message() -> None:
    """A terminal with 300 open items gives one item_not_closed naming three of them."""
    body = CREATED
    for index in range(HOSTILE_ITEMS):
        body += added(index, f"fc_{index}", 1 + index)
    completed = lifecycle(
        "response.completed", 1 + HOSTILE_ITEMS, "completed", usage={"total_tokens": 1}
    )
    report = check_stream(body + completed, protocol=PROTOCOL)
    assert report.rules() == ["item_overlap", "item_not_closed"]
    assert report.findings[0].message.endswith(
        "1 other output item(s) are still open: 0 (reported once per stream)"
    )
    assert report.findings[1].message.endswith(
        "300 output item(s) were never done: 0, 1, 2 and 297 more"
    )


def test_open_parts_past_the_bound_are_not_followed() -> None:
    """An item with more open parts than the bound raises nothing for the extra ones."""
    feed = ResponsesFeeder()
    feed("response.created", response={"id": "resp_1", "status": "in_progress"})
    feed.open_item(0)
    parts = MAX_OPEN_PARTS + 10
    for part in range(parts):
        where = {"item_id": "msg_0", "output_index": 0, "content_index": part}
        feed("response.content_part.added", **where, part={"type": "output_text", "text": ""})
        feed("response.output_text.delta", **where, delta="a")
    for part in range(parts):
        where = {"item_id": "msg_0", "output_index": 0, "content_index": part}
        feed("response.output_text.done", **where, text="a")
        feed("response.content_part.done", **where, part={"type": "output_text", "text": "a"})
    item = {"id": "msg_0", "type": "message", "status": "completed"}
    feed("response.output_item.done", output_index=0, item=item)
    assert feed.findings == []


def test_huge_wire_integers_are_neither_kept_nor_shown() -> None:
    """An output_index of 40 digits is out of order, shown by size, and not followed."""
    huge = int("7" * 40)
    body = CREATED + added(huge, "fc_1", 1)
    body += arguments("response.function_call_arguments.delta", huge, "fc_1", 2, "{}")
    completed = lifecycle("response.completed", 3, "completed", usage={"total_tokens": 1})
    report = check_stream(body + completed, protocol=PROTOCOL)
    assert report.rules() == ["item_out_of_order", "item_not_closed"]
    assert "<int of 133 bits>" in report.findings[0].message
    assert all("7777777" not in finding.message for finding in report.findings)


def test_a_huge_starting_after_in_the_path_is_ignored() -> None:
    """starting_after with thousands of digits is no resumption (and no crash)."""
    path = "/v1/responses/resp_1?starting_after=" + "9" * 5000
    report = check_stream(CREATED + COMPLETED, protocol=PROTOCOL, path=path)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


# -- items found by id (issue 13); no wire value in a message: tests/test_privacy.py -----


def test_an_item_done_without_output_index_closes_the_item_with_its_id() -> None:
    """output_item.done without output_index is schema_mismatch and still closes its item."""
    bad = event(
        "response.output_item.done",
        2,
        item={"id": "fc_1", "type": "function_call", "status": "completed"},
    )
    completed = lifecycle("response.completed", 3, "completed", usage={"total_tokens": 1})
    report = check_stream(CREATED + added(0, "fc_1", 1) + bad + completed, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 2)]


def test_a_resumed_stream_takes_unfollowable_items_on_trust() -> None:
    """A resumed stream's event for an item at a huge index is neither followed nor flagged."""
    delta = arguments("response.function_call_arguments.delta", 10**30, "fc_1", 8, "{}")
    completed = lifecycle("response.completed", 9, "completed", usage={"total_tokens": 1})
    report = check_stream(delta + completed, protocol=PROTOCOL, request={"starting_after": 7})
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


# -- what the official stream helper reads (issue 27: the oracle's blind spots) ------------

DONE = b"data: [DONE]\n\n"


def test_a_done_after_the_terminal_is_a_clean_gateway_ending() -> None:
    """The look-alike: a gateway's [DONE] after response.completed ends a clean stream."""
    report = check_stream(CREATED + COMPLETED + DONE, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


def test_a_terminal_after_a_done_is_never_read() -> None:
    """openai-python stops at [DONE]: a response.completed after it is never read, so the
    stream ends unfinished for the client (it raises "Didn't receive a
    `response.completed` event"), however complete the body looks."""
    report = check_stream(CREATED + DONE + COMPLETED, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("event_after_terminal", 2),
        ("missing_terminal", 3),
    ]
    assert report.outcome is Outcome.UNCLOSED
    assert "follows the [DONE] sent as event 1 before any terminal event" in (
        report.findings[0].message
    )
    assert "no terminal event before the [DONE] sent as event 1" in report.findings[1].message
    # A [DONE] as the very first event: the client reads nothing at all.
    report = check_stream(DONE + CREATED + COMPLETED, protocol=PROTOCOL)
    assert report.rules() == ["event_after_terminal", "event_after_terminal", "missing_terminal"]
    # Nothing follows the early [DONE]: the body ends unfinished, as before.
    report = check_stream(CREATED + DONE, protocol=PROTOCOL)
    assert (report.rules(), report.outcome) == (["missing_terminal"], Outcome.UNCLOSED)


def text_item(sequence: int, **item: object) -> bytes:
    fields = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant"}
    return event("response.output_item.added", sequence, output_index=0, item={**fields, **item})


def text_events(*middle: bytes, content: object = ()) -> bytes:
    """created, a message item whose first part is opened by ``middle``'s events, done."""
    body = CREATED + text_item(1, content=list(content) if content == () else content)
    body += b"".join(middle)
    n = 2 + len(middle)
    body += event(
        "response.output_item.done",
        n,
        output_index=0,
        item={"id": "msg_1", "type": "message", "status": "completed", "content": []},
    )
    return body + lifecycle("response.completed", n + 1, "completed", usage={"total_tokens": 1})


def part_event(kind: str, sequence: int, part: object) -> bytes:
    where = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    return event(kind, sequence, **where, part=part)


def text_delta(kind: str, sequence: int, delta: object) -> bytes:
    where = {"output_index": 0, "item_id": "msg_1", "content_index": 0}
    if kind == "response.function_call_arguments.delta":
        del where["content_index"]
    return event(kind, sequence, **where, delta=delta)


@pytest.mark.parametrize("delta", [None, {}, 7, ["a"]], ids=["null", "object", "int", "list"])
@pytest.mark.parametrize(
    "kind", ["response.output_text.delta", "response.function_call_arguments.delta"]
)
def test_a_text_delta_that_is_not_a_string(kind: str, delta: object) -> None:
    """The stream helper adds each output_text / function_call_arguments delta to a string:
    anything else raises TypeError there, so it is a schema_mismatch (an error)."""
    report = check_stream(CREATED + text_delta(kind, 1, delta), protocol=PROTOCOL)
    (shape,) = [f for f in report.findings if f.rule == "schema_mismatch"]
    assert shape.event_index == 1
    assert shape.severity is Severity.ERROR
    assert shape.message.startswith("event 1: field delta: a string on ")


def test_a_string_delta_and_an_unknown_events_delta_are_clean() -> None:
    """The look-alikes: an empty string delta, and an unknown response.* event whose delta
    is an object (unknown types are legal, and the helper does not read them)."""
    part = {"type": "output_text", "text": "", "annotations": []}
    body = text_events(
        part_event("response.content_part.added", 2, part),
        text_delta("response.output_text.delta", 3, ""),
        event("response.vendor_progress.delta", 4, delta={"step": 1}),
        event(
            "response.output_text.done",
            5,
            output_index=0,
            item_id="msg_1",
            content_index=0,
            text="",
        ),
        part_event("response.content_part.done", 6, part),
    )
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


@pytest.mark.parametrize(
    ("output", "path"),
    [
        (7, "response.output"),
        ("x", "response.output"),
        ({}, "response.output"),
        ([None], "response.output[0]"),
        ([[]], "response.output[0]"),
        ([{"type": {}}], "response.output[0].type"),
        ([{"type": 7}], "response.output[0].type"),
        ([{"id": "msg_1"}], "response.output[0].type"),
    ],
)
@pytest.mark.parametrize("kind", ["response.created", "response.completed"])
def test_a_response_output_the_stream_helper_cannot_read(
    kind: str, output: object, path: str
) -> None:
    """response.output is a list of items, each with a string type: the helper iterates it
    and reads (and hashes) each entry's type, so anything else raises there."""
    created = lifecycle("response.created", 0, "in_progress", output=[])
    completed = lifecycle("response.completed", 1, "completed", usage={"total_tokens": 1})
    if kind == "response.created":
        created = lifecycle(kind, 0, "in_progress", output=output)
    else:
        completed = lifecycle(kind, 1, "completed", usage={"total_tokens": 1}, output=output)
    report = check_stream(created + completed, protocol=PROTOCOL)
    assert report.rules() == ["schema_mismatch"]
    assert report.findings[0].message.startswith(
        f"event {0 if kind == 'response.created' else 1}: field `{path}` "
    )
    assert report.outcome is Outcome.COMPLETED  # the terminal is still read as one


@pytest.mark.parametrize(
    "output",
    [None, [], [{"type": "message", "id": "msg_1", "status": "completed", "content": []}]],
    ids=["null", "empty", "a message"],
)
def test_a_response_output_of_the_documented_shape_is_clean(output: object) -> None:
    """The look-alikes: null (the helper rebuilds the output), empty, and real items."""
    created = lifecycle("response.created", 0, "in_progress", output=output)
    completed = lifecycle(
        "response.completed", 1, "completed", usage={"total_tokens": 1}, output=output
    )
    report = check_stream(created + completed, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


@pytest.mark.parametrize("content", [7, "x", {}, None], ids=["int", "str", "object", "null"])
def test_a_message_item_content_that_is_not_a_list(content: object) -> None:
    """The helper appends each content part to the added message's content: a content that
    is not a list (null included, on a message) raises AttributeError there."""
    report = check_stream(text_events(content=content), protocol=PROTOCOL)
    (shape,) = [f for f in report.findings if f.rule == "schema_mismatch"]
    assert shape.event_index == 1
    assert shape.message.startswith("event 1")
    assert "item.content" in shape.message


def test_item_content_look_alikes_are_clean() -> None:
    """A reasoning item's content may be null (its type says Optional), and a function call
    has none."""
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": [], "content": None}
    call = {"id": "fc_1", "type": "function_call", "status": "in_progress", "name": "f"}
    body = CREATED
    body += event("response.output_item.added", 1, output_index=0, item=reasoning)
    body += event("response.output_item.done", 2, output_index=0, item=reasoning)
    body += event("response.output_item.added", 3, output_index=1, item=call)
    body += event(
        "response.output_item.done", 4, output_index=1, item={**call, "status": "completed"}
    )
    body += lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


@pytest.mark.parametrize(
    ("part", "path"),
    [
        ("x", "part"),
        (None, "part"),
        ([], "part"),
        ({"text": ""}, "part.type"),
        ({"type": {}, "text": ""}, "part.type"),
        ({"type": "output_text", "text": 7}, "part.text"),
        ({"type": "output_text", "text": None}, "part.text"),
        ({"type": "refusal", "refusal": []}, "part.refusal"),
    ],
)
def test_a_content_part_the_stream_helper_cannot_read(part: object, path: str) -> None:
    """The helper copies an added part with to_dict(), asserts its type on the next delta
    and adds the deltas to its text: a part that is not an object, or whose type or text is
    of the wrong type, raises there."""
    body = text_events(part_event("response.content_part.added", 2, part))
    report = check_stream(body, protocol=PROTOCOL)
    assert "schema_mismatch" in report.rules()
    (shape,) = [f for f in report.findings if f.rule == "schema_mismatch"]
    assert shape.event_index == 2
    assert shape.message.startswith(f"event 2: field `{path}` ")


@pytest.mark.parametrize(
    "part",
    [
        {"type": "output_text", "text": "", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": ""},
        {"type": "summary_text", "text": ""},
    ],
    ids=["output_text", "refusal", "summary_text"],
)
def test_content_parts_of_the_documented_shapes_are_clean(part: object) -> None:
    body = text_events(
        part_event("response.content_part.added", 2, part),
        part_event("response.content_part.done", 3, part),
    )
    report = check_stream(body, protocol=PROTOCOL)
    assert (report.outcome, report.findings) == (Outcome.COMPLETED, ())


# -- text_not_done and completed_output_empty (issue 27) --------------------------------------

MESSAGE_ITEM = {"id": "msg_1", "type": "message", "status": "in_progress", "content": []}
TEXT_PART = {"type": "output_text", "text": "", "annotations": []}
PARTS = {
    "content_index": ("response.content_part.added", "response.content_part.done"),
    "summary_index": (
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
    ),
}


def text_part(family: str, index_field: str, with_done: bool, sequence: int = 1) -> bytes:
    """An item with one part (content or summary) carrying one text delta of ``family``,
    closed by its part's done and its item's done, with or without the text's .done."""
    opens, closes = PARTS[index_field]
    where = {"item_id": "msg_1", "output_index": 0, index_field: 0}
    final = "refusal" if family == "response.refusal" else "text"
    body = event("response.output_item.added", sequence, output_index=0, item=MESSAGE_ITEM)
    body += event(opens, sequence + 1, part=TEXT_PART, **where)
    body += event(f"{family}.delta", sequence + 2, delta="Hi", **where)
    sequence += 3
    if with_done:
        body += event(f"{family}.done", sequence, **{final: "Hi"}, **where)
        sequence += 1
    body += event(closes, sequence, part={**TEXT_PART, "text": "Hi"}, **where)
    item = {**MESSAGE_ITEM, "status": "completed"}
    return body + event("response.output_item.done", sequence + 1, output_index=0, item=item)


@pytest.mark.parametrize(
    ("family", "index_field"),
    [
        ("response.output_text", "content_index"),
        ("response.refusal", "content_index"),
        ("response.reasoning_text", "content_index"),
        ("response.reasoning_summary_text", "summary_index"),
    ],
)
def test_a_part_closed_after_its_deltas_without_its_text_done(
    family: str, index_field: str
) -> None:
    """A part whose deltas streamed, closed without its text's .done, is text_not_done (a
    warning: the helper's final response is intact, its .done event never fires); the same
    part with its .done is clean."""
    completed = lifecycle("response.completed", 7, "completed", usage={"total_tokens": 1})
    clean = CREATED + text_part(family, index_field, with_done=True) + completed
    assert check_stream(clean, protocol=PROTOCOL).findings == ()
    completed = lifecycle("response.completed", 6, "completed", usage={"total_tokens": 1})
    body = CREATED + text_part(family, index_field, with_done=False) + completed
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.event_index, f.severity) for f in report.findings] == [
        ("text_not_done", 4, Severity.WARNING)
    ]
    label = "content part" if index_field == "content_index" else "summary part"
    assert f"{label} 0 closes without its '{family}.done'" in report.findings[0].message


def test_a_part_without_deltas_closed_without_a_text_done_is_clean() -> None:
    """The look-alike: a part that streamed no text event owes no .done (an empty part, an
    encrypted reasoning item's)."""
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    body = CREATED + event("response.output_item.added", 1, output_index=0, item=MESSAGE_ITEM)
    body += event("response.content_part.added", 2, part=TEXT_PART, **where)
    body += event("response.content_part.done", 3, part=TEXT_PART, **where)
    body += event("response.output_item.done", 4, output_index=0, item=MESSAGE_ITEM)
    body += lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    assert check_stream(body, protocol=PROTOCOL).rules() == ["item_status_unexpected"]


def test_a_part_left_open_is_item_not_closed_not_also_text_not_done() -> None:
    """A part closed only by its item's done (neither its text's .done nor its own) is
    item_not_closed, reported once."""
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    body = CREATED + event("response.output_item.added", 1, output_index=0, item=MESSAGE_ITEM)
    body += event("response.content_part.added", 2, part=TEXT_PART, **where)
    body += event("response.output_text.delta", 3, delta="Hi", **where)
    item = {**MESSAGE_ITEM, "status": "completed"}
    body += event("response.output_item.done", 4, output_index=0, item=item)
    body += lifecycle("response.completed", 5, "completed", usage={"total_tokens": 1})
    assert check_stream(body, protocol=PROTOCOL).rules() == ["item_not_closed"]


def test_a_tool_call_done_after_its_argument_deltas_without_their_done() -> None:
    """A function call's input deltas, then its output_item.done without
    function_call_arguments.done: text_not_done at the item's done."""
    delta = "response.function_call_arguments.delta"
    body = CREATED + added(0, "fc_1", 1) + arguments(delta, 0, "fc_1", 2, "{}")
    body += done(0, "fc_1", 3)
    body += lifecycle("response.completed", 4, "completed", usage={"total_tokens": 1})
    report = check_stream(body, protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("text_not_done", 3)]
    assert "item 0 is done without its 'response.function_call_arguments.done'" in (
        report.findings[0].message
    )


def _completed_with(output: object, sequence: int) -> bytes:
    fields = {} if output is ... else {"output": output}
    return lifecycle(
        "response.completed", sequence, "completed", usage={"total_tokens": 1}, **fields
    )


def test_completed_with_an_empty_output_after_items_were_done() -> None:
    """response.completed with output [] after an item was done: the stream helper's final
    response loses it (get_final_response().output is [], tests/test_oracle.py), an error."""
    body = CREATED + text_part("response.output_text", "content_index", with_done=True)
    report = check_stream(body + _completed_with([], 7), protocol=PROTOCOL)
    assert [(f.rule, f.event_index, f.severity) for f in report.findings] == [
        ("completed_output_empty", 7, Severity.ERROR)
    ]
    assert "response.output is empty after 1 output item(s) were done" in (
        report.findings[0].message
    )


@pytest.mark.parametrize(
    "output", [None, ..., [{"type": "message"}]], ids=["null", "absent", "listed"]
)
def test_completed_with_a_null_absent_or_listed_output_is_clean(output: object) -> None:
    """The look-alikes: a null or absent output (the helper rebuilds it from the items
    done), or one that lists the item."""
    body = CREATED + text_part("response.output_text", "content_index", with_done=True)
    assert check_stream(body + _completed_with(output, 7), protocol=PROTOCOL).findings == ()


def test_completed_with_an_empty_output_and_no_items_is_clean() -> None:
    """The look-alike: a response that streamed no item has nothing to lose."""
    assert check_stream(CREATED + _completed_with([], 1), protocol=PROTOCOL).findings == ()


def test_completed_output_empty_after_a_resumed_stream_counts_the_items_it_saw() -> None:
    """A resumed stream's items done after its first event count too; an incomplete
    response with an empty output is not judged (the helper raises on it anyway)."""
    body = text_part("response.output_text", "content_index", with_done=True, sequence=8)
    report = check_stream(
        body + _completed_with([], 14), protocol=PROTOCOL, request={"starting_after": 7}
    )
    assert report.rules() == ["completed_output_empty"]
    incomplete = lifecycle(
        "response.incomplete",
        7,
        "incomplete",
        output=[],
        incomplete_details={"reason": "max_output_tokens"},
    )
    body = CREATED + text_part("response.output_text", "content_index", with_done=True)
    assert check_stream(body + incomplete, protocol=PROTOCOL).findings == ()


@pytest.mark.parametrize(
    "entry", [[], "x", 7, {"text": "Hi"}], ids=["list", "str", "int", "untyped"]
)
def test_a_done_item_content_entry_that_is_not_a_typed_part(entry: object) -> None:
    """Each entry of an item's content is a part: an object with a string type. With a
    null output on response.completed, the helper parses the items done and reads each
    entry's type (AttributeError on a list: the oracle's retyped mutant of
    clean-completed-output-null); the look-alike, a real part, is clean."""
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "Hi", "annotations": []}

    def body(content_entry: object) -> bytes:
        stream = CREATED + event("response.output_item.added", 1, output_index=0, item=MESSAGE_ITEM)
        stream += event("response.content_part.added", 2, part=TEXT_PART, **where)
        stream += event("response.output_text.delta", 3, delta="Hi", **where)
        stream += event("response.output_text.done", 4, text="Hi", **where)
        stream += event("response.content_part.done", 5, part=part, **where)
        item = {**MESSAGE_ITEM, "status": "completed", "content": [content_entry]}
        stream += event("response.output_item.done", 6, output_index=0, item=item)
        return stream + _completed_with(None, 7)

    assert check_stream(body(part), protocol=PROTOCOL).findings == ()
    report = check_stream(body(entry), protocol=PROTOCOL)
    assert [(f.rule, f.event_index) for f in report.findings] == [("schema_mismatch", 6)]
    assert "item.content[0]" in report.findings[0].message
