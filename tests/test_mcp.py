"""The MCP Streamable HTTP checker: its rules beyond the fixtures, the request facts it reads,
its bounds, its docs and the detection helpers the monitor wires into auto-detection."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamguard import StreamGuardMiddleware, StreamReport, check_stream
from streamguard.liveness import LivenessLimits
from streamguard.monitor import StreamEnd, StreamMonitor
from streamguard.protocols import CHECKERS, make_checker
from streamguard.protocols._jsonrpc import MAX_REQUEST_IDS, jsonrpc_id_key, jsonrpc_problem
from streamguard.protocols.auto import protocol_for_event, protocol_for_path
from streamguard.protocols.mcp import MAX_BATCH_ITEMS, MAX_EVENT_IDS, MCPChecker
from streamguard.protocols.openai_chat import OpenAIChatChecker
from streamguard.report import SKIP_REASONS
from streamguard.request import RequestFacts, add_http_facts, request_facts
from streamguard.rule_docs import mcp as mcp_docs
from streamguard.rules import RULES
from streamguard.sse import Event
from streamguard.testing import collect

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .helpers import peak_memory
from .sse_fixtures import fixtures


def sse(*messages: Any, event_ids: bool = False) -> bytes:
    """Each message as the SDK frames it (CRLF, ``event: message``), ids 1, 2, ... if asked."""
    out = b""
    for number, message in enumerate(messages, 1):
        data = message if isinstance(message, str) else json.dumps(message)
        head = f"id: {number}\r\n" if event_ids else ""
        out += f"{head}event: message\r\ndata: {data}\r\n\r\n".encode()
    return out


def request(id_: Any = 7, method: str = "tools/call") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": {"name": "t"}}


def result(id_: Any = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": {"content": []}}


def error(id_: Any = 7, code: Any = -32603) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": "failed"}}


PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": 7, "progress": 1},
}
GET = {"http_method": "GET"}


def found(body: bytes, request: Any = None) -> list[tuple[str, int | None]]:
    report = check_stream(body, protocol="mcp", request=request)
    return [(f.rule, f.event_index) for f in report.findings]


def test_the_checker_is_registered() -> None:
    """``mcp`` names this checker in the registry the config, CLI and auto use."""
    assert CHECKERS["mcp"] is MCPChecker


def test_progress_then_the_response_completes() -> None:
    """Notifications before the response, then the response: completed, nothing to report."""
    report = check_stream(sse(PROGRESS, PROGRESS, result()), protocol="mcp", request=request())
    assert (report.outcome.value, report.findings) == ("completed", ())


def test_an_error_response_is_the_in_band_error() -> None:
    """A JSON-RPC error answering the last owed request ends the stream as error_event."""
    report = check_stream(sse(PROGRESS, error()), protocol="mcp", request=request())
    assert (report.outcome.value, report.findings) == ("error_event", ())


def test_the_last_answer_decides_the_outcome_of_a_batch() -> None:
    """An error for one request of a batch and a result for the last: completed."""
    batch = [request(1), request(2)]
    report = check_stream(sse(error(1), result(2)), protocol="mcp", request=batch)
    assert (report.outcome.value, report.findings) == ("completed", ())


def test_the_body_must_end_after_the_last_answer() -> None:
    """The last owed response is the terminal signal: a body left open is body_not_ended."""
    now = [0.0]
    monitor = StreamMonitor(
        "mcp",
        request=request(),
        clock=lambda: now[0],
        liveness=LivenessLimits(body_end_grace_s=1.0),
        confirms_delivery=True,
    )
    monitor.feed(sse(PROGRESS, result()))
    monitor.delivered()
    now[0] = 5.0
    assert [f.rule for f in monitor.poll()] == ["body_not_ended"]
    assert monitor.finish(StreamEnd.BODY_ENDED).outcome.value == "completed"


def test_a_stream_that_owes_nothing_ends_clean_when_its_body_ends() -> None:
    """A GET's standalone stream and a POST of unknown requests complete at the body's end."""
    for facts in (GET, None, {"http_method": "POST"}):
        report = check_stream(sse(PROGRESS), protocol="mcp", request=facts)
        assert (report.outcome.value, report.findings) == ("completed", ()), facts
    empty = check_stream(b"", protocol="mcp", request=GET)
    assert (empty.outcome.value, empty.findings) == ("completed", ())


def test_a_resumable_stream_may_close_before_its_answer() -> None:
    """After an event with an id, the server may close and the client resume (2025-11-25)."""
    body = b"id: 0\r\ndata: \r\n\r\n" + sse(PROGRESS)
    assert found(body, request()) == []
    assert found(sse(PROGRESS), request()) == [("missing_terminal", 1)]


def test_responses_of_a_post_of_notifications_are_unrequested() -> None:
    """A POST that carried no request is owed nothing: any response answers nothing asked."""
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert found(sse(result(1)), notification) == [("unrequested_response", 0)]


def test_an_id_repeated_in_a_batch_is_owed_twice() -> None:
    """Two requests with one id (a client's bug) owe two answers; a third is a duplicate."""
    batch = [request(1), request(1)]
    assert found(sse(result(1), result(1)), batch) == []
    assert found(sse(result(1), result(1), result(1)), batch) == [("duplicate_terminal", 2)]


def test_a_second_answer_is_the_terminal_again_once_all_are_answered() -> None:
    """The last answer repeated is duplicate_terminal; an earlier one repeated while answers
    are still owed, or where nothing is known to be owed, duplicate_response."""
    assert found(sse(result(), error()), request()) == [("duplicate_terminal", 1)]
    assert found(sse(error(), result()), request()) == [("duplicate_terminal", 1)]
    batch = [request(1), request(2)]
    assert found(sse(result(1), result(1), result(2)), batch) == [("duplicate_response", 1)]
    assert found(sse([result(1), result(1)], result(2)), batch) == [("duplicate_response", 0)]
    assert found(sse(result(1), result(1)), {"http_method": "POST"}) == [("duplicate_response", 1)]
    report = check_stream(sse(result(), result()), protocol="mcp", request=request())
    assert report.findings[0].message == (
        "event 1 is a second response to the request with number id <1 chars #10220a3a>, "
        "after the POST's last owed request was answered (event 0); the client settled that "
        "call at the first"
    )


def test_ids_compare_by_json_type_and_value() -> None:
    """``1`` and ``1.0`` are one JSON number; ``"1"`` is another id."""
    assert found(sse(result(1.0)), request(1)) == []
    assert found(sse(result("1")), request(1)) == [
        ("unrequested_response", 0),
        ("missing_terminal", 1),
    ]
    assert jsonrpc_id_key(True) is None
    assert jsonrpc_id_key(None) is None
    assert jsonrpc_id_key(1) == jsonrpc_id_key(1.0) != jsonrpc_id_key("1")


def test_long_and_huge_ids_are_kept_by_digest() -> None:
    """An id never sizes what is kept: long strings and huge integers become 16 bytes."""
    long_id, huge = "x" * 10_000, 10**400
    for value in (long_id, huge, -huge):
        key = jsonrpc_id_key(value)
        assert isinstance(key, bytes)
        assert len(key) == 16
    assert jsonrpc_id_key(long_id) != jsonrpc_id_key("y" * 10_000)
    assert found(sse(result(long_id)), request(long_id)) == []
    assert found(sse(result(huge)), request(huge)) == []


def test_uncorrelated_errors_answer_nothing_and_are_not_reported() -> None:
    """An error without an id, or with id null, answers no request and breaks no rule."""
    no_id = {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    assert found(sse(error(None), no_id), GET) == []
    assert found(sse(error(None), result()), request()) == []


def test_a_resumed_get_may_replay_responses() -> None:
    """Only a GET without Last-Event-ID forbids responses; a resumption replays them."""
    resumed = {"http_method": "GET", "last_event_id": True}
    assert found(sse(result()), resumed) == []
    assert found(sse(result(), result()), resumed) == [("duplicate_response", 1)]
    assert found(sse(result()), GET) == [("response_on_standalone_stream", 0)]


def test_the_legacy_endpoint_event_allows_responses_on_a_get() -> None:
    """The 2024-11-05 HTTP+SSE stream opens with ``endpoint``; its responses are by design."""
    body = b"event: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n" + sse(result(0))
    assert found(body, GET) == []


def test_events_clients_skip_are_not_messages() -> None:
    """Empty data and names other than ``message`` are skipped, as the clients skip them."""
    body = b"data:\n\nevent: ping\ndata: {}\n\nretry: 5\ndata: \n\n" + sse(result())
    assert found(body, request()) == []


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (request(), None),
        (PROGRESS, None),
        (result(), None),
        (error(), None),
        (error(None), None),
        (error(7, -32603.0), None),
        ({"id": 7, "result": {}}, "field `jsonrpc` is missing"),
        ({"jsonrpc": 2.0, "method": "x"}, 'field `jsonrpc` is not the string "2.0"'),
        ({"jsonrpc": "2.0", "method": 3}, "field `method` is an int, not a string"),
        ({"jsonrpc": "2.0", "method": "x", "params": [1]}, "field `params` is a list"),
        ({"jsonrpc": "2.0", "method": "x", "id": None}, "field `id` is null"),
        ({"jsonrpc": "2.0", "method": "x", "result": {}}, "carries `result` or `error`"),
        ({"jsonrpc": "2.0", "id": 7}, "neither `method`"),
        ({**result(), "error": {"code": 1, "message": "x"}}, "both `result` and `error`"),
        ({"jsonrpc": "2.0", "result": {}}, "field `id` is missing"),
        ({"jsonrpc": "2.0", "id": True, "result": {}}, "field `id` is a bool"),
        ({"jsonrpc": "2.0", "id": 7, "result": 42}, "field `result` is an int, not an object"),
        ({"jsonrpc": "2.0", "id": 7, "error": "x"}, "field `error` is a str, not an object"),
        ({"jsonrpc": "2.0", "id": 7, "error": {"message": "x"}}, "`error.code` is missing"),
        (error(7, "-1"), "field `error.code` is a str, not an integer"),
        (error(7, 1.5), "field `error.code` is a float, not an integer"),
        ({"jsonrpc": "2.0", "id": 7, "error": {"code": 1}}, "`error.message` is missing"),
        ({"jsonrpc": "2.0", "id": [], "error": {"code": 1, "message": "x"}}, "field `id`"),
    ],
)
def test_jsonrpc_validity(message: dict[str, Any], problem: str | None) -> None:
    """What makes a message invalid JSON-RPC 2.0, named by field and type only."""
    said = jsonrpc_problem(message)
    if problem is None:
        assert said is None
    else:
        assert said is not None
        assert problem in said


def test_an_invalid_response_still_answers_its_id() -> None:
    """One mistake, one finding: a response without ``jsonrpc`` still answers request 7."""
    assert found(sse({"id": 7, "result": {}}), request()) == [("invalid_jsonrpc", 0)]


def test_data_that_is_not_a_message() -> None:
    """JSON that is neither an object nor an array is invalid_jsonrpc; non-JSON invalid_json."""
    assert found(sse('"hello"', "[]", "{", result()), request()) == [
        ("invalid_jsonrpc", 0),
        ("invalid_jsonrpc", 1),
        ("invalid_json", 2),
    ]


def test_a_batch_reports_each_rule_once_with_a_count() -> None:
    """A batch of many bad items makes one finding per rule, saying how many more."""
    batch = [{"jsonrpc": "1.0", "method": "x"}] * 500 + [result(9)] * 300 + [result()]
    report = check_stream(sse(batch), protocol="mcp", request=request())
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("invalid_jsonrpc", 0),
        ("unrequested_response", 0),
    ]
    assert report.findings[0].message.endswith("(and 499 more in this batch)")
    assert report.findings[1].message.endswith("(and 299 more in this batch)")
    assert report.outcome.value == "completed"


def test_event_ids_must_not_come_back() -> None:
    """An id in effect that returns after another is reported once; one carried over is not."""
    body = (
        b"id: a\ndata:\n\n"
        + sse(PROGRESS)  # no id line: "a" carried over
        + b"id: b\n"
        + sse(PROGRESS)
        + b"id: a\n"
        + sse(PROGRESS)
        + b"id: b\n"
        + sse(result())
    )
    assert found(body, request()) == [("duplicate_event_id", 3)]


def test_event_ids_kept_are_bounded() -> None:
    """Past MAX_EVENT_IDS distinct ids, new ones are not kept, so a return to one is missed."""
    ids = [*range(MAX_EVENT_IDS + 10), MAX_EVENT_IDS + 5, 0]
    body = b"".join(f"id: {i}\ndata:\n\n".encode() for i in ids) + sse(result())
    assert found(body, request()) == [("duplicate_event_id", len(ids) - 1)]


def test_messages_never_quote_wire_values() -> None:
    """Ids, methods and event ids appear by type, size and hash only."""
    secret, number = "SECRET-ID-42", 987654321
    body = (
        f"id: {secret}\ndata:\n\n".encode()
        + sse({"jsonrpc": "2.0", "method": secret, "params": []})
        + b"id: other\n"
        + sse(result(secret), result(secret), result(number))
        + f"id: {secret}\n".encode()
        + sse({"jsonrpc": "2.0", "method": secret})
    )
    report = check_stream(body, protocol="mcp", request=request(secret))
    assert {f.rule for f in report.findings} >= {
        "invalid_jsonrpc",
        "duplicate_terminal",
        "unrequested_response",
        "duplicate_event_id",
        "event_after_terminal",
    }
    for finding in report.findings:
        assert secret not in finding.message
        assert str(number) not in finding.message
    standalone = check_stream(sse(result(secret)), protocol="mcp", request=GET)
    assert secret not in standalone.findings[0].message


# -- what the request rules out: invalid ids, the bound, resumption ----------------------------

#: A server that never answers: one progress notification, then the body ends.
NEVER_ANSWERS = sse(PROGRESS)
RESUMED = {"http_method": "GET", "last_event_id": True}


@pytest.mark.parametrize("bad", [True, False, {}, {"k": "SECRET"}, [], ["SECRET"], None])
def test_a_request_id_that_is_no_id_is_a_finding(bad: Any) -> None:
    """A request whose id is no JSON-RPC id (MCP: a string or a number, never null) is
    invalid_jsonrpc, made once, before the body's findings, naming the id's type only."""
    report = check_stream(NEVER_ANSWERS * 3, protocol="mcp", request=request(bad))
    assert [(f.rule, f.event_index) for f in report.findings] == [("invalid_jsonrpc", None)]
    message = report.findings[0].message
    assert message.startswith("request: a request of the POST has an `id` that is a ")
    assert "SECRET" not in message
    assert ("MCP forbids a null id" in message) is (bad is None)


def test_an_invalid_id_is_reported_on_a_body_without_events() -> None:
    """With no event to hang it on, the end of the body reports the request."""
    assert found(b"", request(True)) == [("invalid_jsonrpc", None)]
    # An aborted stream runs no end rules, but an event already made it.
    monitor = StreamMonitor("mcp", request=request({}))
    monitor.feed(NEVER_ANSWERS)
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    assert report.rules() == ["invalid_jsonrpc"]


def test_the_other_requests_of_a_batch_with_an_invalid_id_are_still_owed() -> None:
    """A batch where one id is ``{}``: that request is a finding, the others still owe
    answers (missing_terminal when the server never answers, clean when it does)."""
    batch = [request(1), request({}), request("b"), PROGRESS]
    assert found(NEVER_ANSWERS, batch) == [("invalid_jsonrpc", None), ("missing_terminal", 1)]
    report = check_stream(sse(result("b"), error(1)), protocol="mcp", request=batch)
    assert (report.outcome.value, report.rules()) == ("error_event", ["invalid_jsonrpc"])
    several = [request(True), request({}), request(True), request(3)]
    [invalid, missing] = check_stream(NEVER_ANSWERS, protocol="mcp", request=several).findings
    assert "3 requests of the POST have an `id` that is a bool or a dict" in invalid.message
    assert missing.rule == "missing_terminal"
    assert "1 of the POST's 1 request(s) unanswered" in missing.message


def test_valid_ids_and_notifications_make_no_request_finding() -> None:
    """String, integer and fractional ids are ids; a notification owes nothing."""
    for good in ("a", "", 0, -7, 2**70, 1.5):
        assert found(sse(result(good)), request(good)) == [], good
    assert found(NEVER_ANSWERS, PROGRESS) == []
    assert found(NEVER_ANSWERS, [PROGRESS, PROGRESS]) == []


def test_a_batch_over_the_bound_still_owes_the_answers_read() -> None:
    """Past MAX_REQUEST_IDS the first ids are still owed: a server that never answers a
    batch of 65 is missing_terminal, as for 64, and the report says what was skipped."""
    for size in (1, MAX_REQUEST_IDS, MAX_REQUEST_IDS + 1, 5000):
        batch = [request(i) for i in range(size)]
        report = check_stream(NEVER_ANSWERS, protocol="mcp", request=batch)
        assert (report.outcome.value, report.rules()) == ("unclosed", ["missing_terminal"]), size
        over = size > MAX_REQUEST_IDS
        assert report.skipped_checks == (("request_ids_over_bound",) if over else ()), size
        assert len(report.notes) == over
        if over:
            message = report.findings[0].message
            assert f"at least {MAX_REQUEST_IDS} of the POST's {size} request(s)" in message
            assert report.notes[0].startswith(
                f"the POST carried {size} JSON-RPC requests and only the first "
                f"{MAX_REQUEST_IDS} were read: the answers to the other "
                f"{size - MAX_REQUEST_IDS} were not matched"
            )


def test_a_batch_over_the_bound_answered_in_any_order_is_clean() -> None:
    """Answers to requests not read, before or after the last one read, break no rule: they
    may answer a request that was not read, or one whose id a request not read repeats."""
    size = MAX_REQUEST_IDS + 3
    batch = [request(i) for i in range(size)]
    answers = [result(i) for i in reversed(range(size))]
    # The ids read answered first: the stream goes on, with notifications and the answers
    # to the requests not read, and no terminal was seen.
    read_first = [*answers[3:], PROGRESS, *answers[:3]]
    bodies = (sse(*answers), sse(answers), sse(*answers, result(0)), sse(*read_first))
    for data in bodies:
        report = check_stream(data, protocol="mcp", request=batch)
        assert (report.outcome.value, report.findings) == ("completed", ())
        assert report.skipped_checks == ("request_ids_over_bound",)
    # The ids read still make a missing answer a finding, whatever else came.
    partial = sse(*[result(i) for i in range(1, size)], result(9999))
    assert found(partial, batch) == [("missing_terminal", size)]


def test_a_resumed_get_says_the_standalone_check_was_skipped() -> None:
    """A GET with Last-Event-ID may replay responses: response_on_standalone_stream is off,
    and the report says so; a GET without it, or a POST, skips nothing."""
    resumed = check_stream(sse(result()), protocol="mcp", request=RESUMED)
    assert (resumed.findings, resumed.skipped_checks) == ((), ("resumed_stream",))
    assert resumed.notes == (
        "a GET that resumes with Last-Event-ID may replay the responses of an earlier "
        "stream: response_on_standalone_stream went unchecked",
    )
    standalone = check_stream(sse(result()), protocol="mcp", request=GET)
    assert standalone.rules() == ["response_on_standalone_stream"]
    assert (standalone.notes, standalone.skipped_checks) == ((), ())
    posted = check_stream(sse(result()), protocol="mcp", request=request())
    assert (posted.findings, posted.notes, posted.skipped_checks) == ((), (), ())


def test_a_post_whose_body_was_not_read_says_its_checks_were_skipped() -> None:
    """Head facts alone (the body over request_peek_bytes, not JSON, ...): nothing is known
    to be owed, and the report says that the per-request checks were skipped."""
    head = add_http_facts(None, "POST", [])
    report = check_stream(NEVER_ANSWERS, protocol="mcp", request=head)
    assert (report.outcome.value, report.findings) == ("completed", ())
    assert report.skipped_checks == ("request_body_unread",)
    assert report.notes[0].startswith("the POST's body was not read")
    # Offline without a request, or with a body read that holds no request: nothing said.
    for facts in (None, {"http_method": "POST"}, PROGRESS):
        assert check_stream(NEVER_ANSWERS, protocol="mcp", request=facts).skipped_checks == ()


def test_the_checker_names_what_it_skipped() -> None:
    """``checks_skipped`` on the checker itself: reasons from SKIPS, notes without ids."""
    over = [request(f"SECRET-{i}") for i in range(MAX_REQUEST_IDS + 2)]
    checks = {
        "over": MCPChecker(RequestFacts(over)),
        "resumed": MCPChecker(RESUMED),
        "unread": MCPChecker(add_http_facts(None, "POST", [])),
        "get": MCPChecker(GET),
        "post": MCPChecker(RequestFacts(request())),
        "none": MCPChecker(),
    }
    said = {name: [r for r, _ in checker.checks_skipped()] for name, checker in checks.items()}
    assert said == {
        "over": ["request_ids_over_bound"],
        "resumed": ["resumed_stream"],
        "unread": ["request_body_unread"],
        "get": [],
        "post": [],
        "none": [],
    }
    for checker in checks.values():
        for reason, note in checker.checks_skipped():
            assert reason in MCPChecker.SKIPS
            assert "SECRET" not in note
    assert set(MCPChecker.SKIPS) <= set(SKIP_REASONS)


def test_skipped_checks_are_not_claimed_for_an_unchecked_stream() -> None:
    """A stream whose frames were not checked at all (not sampled, compressed) is counted
    as unchecked; it does not also name the checks its request ruled out."""
    monitor = StreamMonitor("mcp", request=RESUMED)
    monitor.stop_inspecting()
    monitor.feed(sse(result()))
    report = monitor.finish(StreamEnd.BODY_ENDED)
    assert (report.inspected, report.skipped_checks, report.notes) == (False, (), ())


def test_the_middleware_reports_skipped_checks() -> None:
    """Through the middleware: a batch over the bound, a resumed GET and a body over
    request_peek_bytes each put their reason and a note on the report."""
    batch = json.dumps([request(i) for i in range(MAX_REQUEST_IDS + 1)]).encode()
    report = _watched(http_scope("POST", "/mcp"), batch, NEVER_ANSWERS)
    assert (report.rules(), report.skipped_checks) == (
        ["missing_terminal"],
        ("request_ids_over_bound",),
    )
    resumed = http_scope("GET", "/mcp", headers=[(b"last-event-id", b"1_3")])
    assert _watched(resumed, b"", sse(result())).skipped_checks == ("resumed_stream",)
    huge = json.dumps({**request(), "params": {"pad": "x" * 2_000_000}}).encode()
    report = _watched(http_scope("POST", "/mcp"), huge, NEVER_ANSWERS)
    assert (report.findings, report.skipped_checks) == ((), ("request_body_unread",))
    assert any("request_peek_bytes" in note for note in report.notes)
    assert any(note.startswith("the POST's body was not read") for note in report.notes)


def test_the_end_log_names_the_skipped_checks() -> None:
    """The stream's end log carries the reasons (known tokens), never a note or an id."""
    from structlog.testing import capture_logs

    steps = ["receive", sse_start(), body(sse(result("SECRET"))), body(b"", more=False)]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol="mcp", metrics=False, logs={"summaries": "all"}
    )
    resumed = http_scope("GET", "/mcp", headers=[(b"last-event-id", b"SECRET")])
    with capture_logs() as logs:
        run(middleware, resumed, Recorder(incoming=[{"type": "http.request", "body": b""}]))
    [end] = [entry for entry in logs if entry["event"] == "stream_completed"]
    assert end["skipped_checks"] == ["resumed_stream"]
    assert "SECRET" not in repr(logs)
    with capture_logs() as logs:
        run(middleware, http_scope("GET", "/mcp"), Recorder(incoming=[{"type": "http.request"}]))
    assert all("skipped_checks" not in entry for entry in logs)


# -- the request's facts ----------------------------------------------------------------------


def test_request_facts_keep_the_ids_of_the_requests_only() -> None:
    """A body's JSON-RPC requests give their ids; notifications and responses give none."""
    facts, note = request_facts(json.dumps(request("a")).encode(), 1024)
    assert note is None
    assert facts is not None
    assert dict(facts) == {"jsonrpc_ids": ("a",)}
    batch = [request(1), PROGRESS, result(3), request("1")]
    facts, _ = request_facts(json.dumps(batch).encode(), 1024)
    assert facts is not None
    assert facts["jsonrpc_ids"] == (1, "1")
    assert RequestFacts(PROGRESS)["jsonrpc_ids"] == ()
    assert "jsonrpc_ids" not in RequestFacts({"model": "m", "stream": True})


def test_request_ids_are_bounded() -> None:
    """The first MAX_REQUEST_IDS requests are read; the rest are counted, never kept."""
    batch = [request(i) for i in range(MAX_REQUEST_IDS + 1000)]
    facts = RequestFacts(batch)
    assert facts["jsonrpc_ids"] == tuple(range(MAX_REQUEST_IDS))
    assert facts["jsonrpc_requests_unread"] == 1000
    exactly = RequestFacts(batch[:MAX_REQUEST_IDS])
    assert len(exactly["jsonrpc_ids"]) == MAX_REQUEST_IDS
    assert "jsonrpc_requests_unread" not in exactly
    # An invalid id counts toward the bound: what is kept never passes it.
    mixed = RequestFacts([request({})] * 10 + batch)
    assert len(mixed["jsonrpc_ids"]) + len(mixed["jsonrpc_invalid_ids"]) == MAX_REQUEST_IDS
    assert mixed["jsonrpc_requests_unread"] == 1010


def test_request_ids_that_are_no_ids_are_kept_by_type() -> None:
    """An id that is no JSON-RPC id is kept as its JSON type alone; valid ones beside it."""
    facts = RequestFacts([request(True), request({"k": "SECRET"}), request(1), request(None)])
    assert facts["jsonrpc_ids"] == (1,)
    assert facts["jsonrpc_invalid_ids"] == ("bool", "dict", "null")
    assert "jsonrpc_invalid_ids" not in RequestFacts(request("a"))
    assert RequestFacts(request([1]))["jsonrpc_invalid_ids"] == ("list",)


def test_a_json_array_that_is_no_batch_stays_unread() -> None:
    """A JSON array without a JSON-RPC message is still not a request object."""
    facts, note = request_facts(b"[1, 2]", 1024)
    assert facts is None
    assert note == "request body is not a JSON object: request checks skipped"


def test_the_head_adds_the_method_and_last_event_id() -> None:
    """add_http_facts adds the method and Last-Event-ID; alone, facts of the head only."""
    head = add_http_facts(None, "GET", [(b"Last-Event-ID", b"7")])
    assert head is not None
    assert dict(head) == {"http_method": "GET", "last_event_id": True}
    assert not head.body_read
    facts = add_http_facts(RequestFacts(request()), "POST", [(b"accept", b"*/*")])
    assert facts is not None
    assert facts.body_read
    assert dict(facts) == {"jsonrpc_ids": (7,), "http_method": "POST"}
    assert add_http_facts(None, "BREW", []) is None


def test_head_only_facts_stay_unknown_to_other_protocols() -> None:
    """A GET's facts reach the MCP checker; to a chat checker the request stays unknown."""
    head = add_http_facts(None, "GET", [])
    chat = make_checker("openai_chat", head)
    assert isinstance(chat, OpenAIChatChecker)
    assert chat.request is None
    assert make_checker("mcp", head).request is head
    two_choices = b"".join(
        b"data: "
        + json.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "m",
                "choices": [{"index": i, "delta": {"content": "x"}, "finish_reason": "stop"}],
            }
        ).encode()
        + b"\n\n"
        for i in (0, 1)
    )
    body = two_choices + b"data: [DONE]\n\n"
    assert check_stream(body, protocol="openai_chat", request=head).findings == ()


# -- the middleware and the client-side helpers -----------------------------------------------


def _watched(scope: dict[str, Any], request_body: bytes, data: bytes) -> StreamReport:
    """The report of ``data`` streamed by an app that read ``request_body`` first."""
    reports: list[StreamReport] = []
    incoming = [{"type": "http.request", "body": request_body}]
    steps = ["receive", sse_start(), body(data), body(b"", more=False)]
    middleware = StreamGuardMiddleware(
        ScriptedApp(steps), protocol="mcp", metrics=False, on_report=reports.append
    )
    run(middleware, scope, Recorder(incoming=incoming))
    [report] = reports
    return report


def test_the_middleware_reads_the_method_the_ids_and_last_event_id() -> None:
    """A POST's ids come from the body the app read; a GET's method and resumption from the
    head."""
    posted = json.dumps(request()).encode()
    report = _watched(http_scope("POST", "/mcp"), posted, sse(PROGRESS))
    assert report.rules() == ["missing_terminal"]
    report = _watched(http_scope("GET", "/mcp"), b"", sse(result()))
    assert report.rules() == ["response_on_standalone_stream"]
    resumed = http_scope("GET", "/mcp", headers=[(b"last-event-id", b"1_3")])
    assert _watched(resumed, b"", sse(result())).rules() == []


def test_collect_reads_the_method_of_the_request_sent() -> None:
    """streamguard.testing.collect tells a GET's stream from a POST's, as the middleware does."""

    def handler(sent: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=httpx.ByteStream(sse(result())),
        )

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        with client.stream("GET", "http://test/mcp") as response:
            assert collect(response).report.rules() == ["response_on_standalone_stream"]
        with client.stream("POST", "http://test/mcp", json=request()) as response:
            assert collect(response).report.findings == ()
        with client.stream("POST", "http://test/mcp", json=request(8)) as response:
            assert collect(response).report.rules() == [
                "unrequested_response",
                "missing_terminal",
            ]


# -- auto-detection -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [("/mcp", True), ("/api/mcp/", True), ("/mcp/sse", False), ("/xmcp", False), (None, False)],
)
def test_the_conventional_endpoint_marks_the_protocol(path: str | None, expected: bool) -> None:
    """``/mcp`` (the SDK's default endpoint) is MCP, wherever it is mounted."""
    assert (protocol_for_path(path) == "mcp") is expected


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (Event("message", json.dumps(PROGRESS)), True),
        (Event("message", json.dumps([result(1)])), True),
        (Event("endpoint", "/messages/?session_id=1"), True),
        (Event("endpoint", "hello"), False),
        (Event("message", '{"jsonrpc":"1.0","method":"x"}'), False),
        (Event("message", "[]"), False),
        (Event("message", ""), False),
        (Event("message", '{"type":"RUN_STARTED","threadId":"t","runId":"r"}'), False),
    ],
)
def test_a_first_event_decides_by_jsonrpc(event: Event, expected: bool) -> None:
    """A JSON-RPC 2.0 message (or batch), or the legacy endpoint event, proves MCP."""
    assert (protocol_for_event(event) == "mcp") is expected


@pytest.mark.parametrize("fixture", fixtures("mcp"), ids=lambda fixture: fixture.name)
def test_fixtures_are_detected_and_judged_as_configured(fixture: Any) -> None:
    """On ``/mcp`` and on an unknown path, a fixture is judged as with protocol="mcp"."""
    configured = fixture.check()
    by_path = check_stream(fixture.body, request=fixture.request, path="/mcp")
    assert (by_path.protocol_source, by_path.findings) == ("path", configured.findings)
    by_event = check_stream(fixture.body, request=fixture.request, path="/stream")
    if by_event.protocol_source == "event":
        assert by_event.findings == configured.findings


# -- docs ---------------------------------------------------------------------------------------

#: The request each rule's example answers.
EXAMPLE_REQUESTS: dict[str, Any] = {
    "invalid_jsonrpc": request(),
    "duplicate_response": [request(1), request(2, "tools/list")],
    "unrequested_response": request(),
    "response_on_standalone_stream": GET,
    "duplicate_event_id": request(),
}


def test_every_rule_is_documented_with_its_protocol() -> None:
    """This protocol's rules are its own, documented in rule_docs/mcp.py."""
    own = {doc.name for doc in mcp_docs.DOCS}
    assert own == set(EXAMPLE_REQUESTS)
    for name in own:
        # A2A's JSON-RPC responses are checked by MCP's invalid_jsonrpc, shared.
        shared_with = ("a2a", "mcp") if name == "invalid_jsonrpc" else ("mcp",)
        assert RULES[name].protocols == shared_with
    raised = {r.name for r in MCPChecker.RAISES | MCPChecker.LIFECYCLE.rules}
    shared = {
        "invalid_json",
        "missing_terminal",
        "duplicate_terminal",
        "event_after_terminal",
        "schema_mismatch",  # results and params by method: the shape rule of every protocol
    }
    assert raised - shared == own


@pytest.mark.parametrize("doc", mcp_docs.DOCS, ids=lambda doc: doc.name)
def test_each_example_fires_its_rule(doc: Any) -> None:
    """Every example in this protocol's rule docs is a whole stream that breaks its rule."""
    report = check_stream(
        (doc.example + "\n\n").encode(), protocol="mcp", request=EXAMPLE_REQUESTS[doc.name]
    )
    assert doc.name in report.rules()


def test_every_raised_rule_has_a_fixture() -> None:
    """Each rule the checker can raise fires on at least one of its fixtures."""
    raised = {r.name for r in MCPChecker.RAISES | MCPChecker.LIFECYCLE.rules}
    seen = {rule for fixture in fixtures("mcp") for rule in fixture.check().rules()}
    assert raised <= seen


def test_the_docstring_names_what_it_reads() -> None:
    """The module docstring names the request facts and wire features the checker reads."""
    source = Path(__file__).parent.parent / "streamguard" / "protocols" / "mcp.py"
    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    for phrase in ("Last-Event-ID", "jsonrpc_ids", "priming", "endpoint", "2025-03-26"):
        assert phrase in doc


def test_a_huge_batch_costs_what_a_small_one_does() -> None:
    """A 1 MiB batch of half a million items makes findings for at most MAX_BATCH_ITEMS."""
    frame = b"data: [" + b",".join([b"1"] * 500_000) + b"]\n\n"
    report, peak = peak_memory(lambda: check_stream([frame], protocol="mcp"))
    assert report.rules() == ["invalid_jsonrpc"]
    assert f"(and {MAX_BATCH_ITEMS - 1} more in this batch)" in report.findings[0].message
    assert peak < 16 * 1024 * 1024, peak  # the parsed list itself is about 4 MB


def test_a_body_cannot_claim_the_heads_facts() -> None:
    """``http_method`` and ``last_event_id`` keys in a client's body are not head facts."""
    sent = json.dumps({**request(), "http_method": "GET", "last_event_id": True}).encode()
    facts, _ = request_facts(sent, 1024)
    assert facts is not None
    assert dict(facts) == {"jsonrpc_ids": (7,)}
    head = add_http_facts(facts, "HEAD", [])  # a method outside the list: none is known
    assert head is not None
    assert dict(head) == {"jsonrpc_ids": (7,)}
