"""The numbered-entity tracker (``streamguard.protocols._entities``): its rules on its own,
then as Anthropic content blocks and Responses output items and parts use it, through the
middleware (the scripted ASGI driver) as well as ``check_stream``."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry

from streamguard import StreamGuardMiddleware, StreamReport, check_stream, rules
from streamguard.protocols._base import MAX_KEPT_TEXT_CHARS, Checker, EventFindings, KeptText
from streamguard.protocols._entities import Entities, EntityKind
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.report import Finding
from streamguard.sse import Event
from tests.asgi_driver import ScriptedApp, body, http_scope, run, sse_start
from tests.helpers import ANTHROPIC_START, ANTHROPIC_STOP, anthropic_stream, frame, run_checker

# -- the tracker on its own ----------------------------------------------------------------

#: A kind with every rule, as a protocol declares one (the rules are Anthropic's).
THING = EntityKind(
    "thing",
    "index",
    "opened",
    "closed",
    not_open=rules.BLOCK_NOT_STARTED,
    not_closed=rules.BLOCK_NOT_STOPPED,
    out_of_order=rules.BLOCK_INDEX_OUT_OF_ORDER,
    overlap=rules.BLOCK_OVERLAP,
    open_at_limit=rules.BLOCK_OPEN_AT_LIMIT,
)


class Kept:
    """An entry that keeps text against the stream's budget, and says when it is forgotten."""

    def __init__(self, checker: Checker, chars: int = 0) -> None:
        self.text = KeptText()
        self.text.add(checker, "x" * chars)
        self.forgotten = False


def forget(checker: Checker, entry: Kept) -> None:
    entry.forgotten = True
    entry.text.release(checker)


def findings_of(checker: Checker, index: int = 7) -> EventFindings:
    return EventFindings(checker, Event("thing", "{}", offset=100), index)


def track(limit: int = 4, forget_oldest: bool = False) -> tuple[Checker, Entities[Kept]]:
    return AnthropicChecker(), Entities(THING, limit, forget, forget_oldest=forget_oldest)


def rules_of(found: EventFindings | list[Finding]) -> list[str]:
    items = found.items if isinstance(found, EventFindings) else found
    return [finding.rule for finding in items]


def test_openings_in_order_one_at_a_time_are_clean() -> None:
    """The legitimate look-alike: 0, 1, 2 each opened after the last closed."""
    checker, things = track()
    found = findings_of(checker)
    for index in range(3):
        things.check_opening(found, " (open)", index)
        assert things.keep(checker, index, Kept(checker))
        assert things.close(index) is not None
    things.check_closed(found, " (end)")
    assert rules_of(found) == []
    assert (things.opened, things.in_order) == (3, True)


@pytest.mark.parametrize(
    ("index", "how"),
    [
        (3, "index 3, expected 1"),
        (0, "index 0, is already open (an index is used once)"),
        (-1, "index -1, expected 1"),
    ],
)
def test_an_opening_at_another_index_than_the_next_is_out_of_order(index: int, how: str) -> None:
    checker, things = track()
    things.keep(checker, 0, Kept(checker))
    found = findings_of(checker)
    things.check_opening(found, " (open)", index)
    assert rules_of(found)[0] == "block_index_out_of_order"
    assert found.items[0].message == f"event 7 (open): {how}"
    assert (found.items[0].event_index, found.items[0].byte_offset) == (7, 100)


def test_an_index_used_before_says_so_only_while_the_order_held() -> None:
    """ "Already used" is said only when every index below the next one was used."""
    checker, things = track()
    things.keep(checker, 0, Kept(checker))
    things.close(0)
    found = findings_of(checker)
    things.check_opening(found, " (open)", 0)
    assert "was already used by an earlier thing" in found.items[0].message
    things.keep(checker, 5, Kept(checker))  # skips 1 to 4: the order no longer holds
    things.close(5)
    found = findings_of(checker)
    things.check_opening(found, " (open)", 2)
    assert found.items[0].message.endswith("index 2, expected 6")


def test_with_gaps_an_opening_may_skip_indices_but_not_use_one_again() -> None:
    """``gaps`` (Cohere's blocks: its client joins deltas by index, so a skipped index loses
    nothing): a start past the next index is clean, one at a used index is out of order."""
    checker, things = AnthropicChecker(), Entities(THING._replace(gaps=True), 4, forget)
    found = findings_of(checker)
    things.check_opening(found, " (open)", 2)
    things.keep(checker, 2, Kept(checker))
    things.close(2)
    assert rules_of(found) == []
    things.check_opening(found, " (open)", 2)
    assert rules_of(found) == ["block_index_out_of_order"]
    assert found.items[0].message == "event 7 (open): index 2, expected 3"


def test_an_opening_while_others_are_open_is_an_overlap_listing_them() -> None:
    checker, things = track()
    for index in range(2):
        things.keep(checker, index, Kept(checker))
    found = findings_of(checker)
    things.check_opening(found, " (open)", 2)
    assert rules_of(found) == ["block_overlap"]
    assert found.items[0].message == (
        "event 7 (open): thing 2 opens while 2 other thing(s) are still open: 0, 1"
    )
    found = findings_of(checker)
    things.check_opening(found, " (open)", None)  # where it sits cannot be told
    assert found.items[0].message.startswith("event 7 (open): a thing opens while 2")


def test_a_once_per_stream_overlap_is_reported_once_and_says_so() -> None:
    checker = AnthropicChecker()
    items: Entities[Kept] = Entities(
        EntityKind(
            "item",
            "n",
            "added",
            "done",
            not_open=rules.ITEM_NOT_OPEN,
            not_closed=rules.ITEM_NOT_CLOSED,
            overlap=rules.ITEM_OVERLAP,
        ),
        4,
        forget,
    )
    items.keep(checker, 0, Kept(checker))
    found = findings_of(checker)
    items.check_opening(found, " (open)", 1)
    items.check_opening(found, " (open)", 1)
    assert rules_of(found) == ["item_overlap"]
    assert found.items[0].message.endswith("(reported once per stream)")


def test_a_kind_without_a_rule_does_not_make_its_check() -> None:
    checker = AnthropicChecker()
    parts: Entities[Kept] = Entities(
        EntityKind("part", "n", "added", "done", rules.ITEM_NOT_OPEN, rules.ITEM_NOT_CLOSED),
        4,
        forget,
    )
    parts.keep(checker, 0, Kept(checker))
    found = findings_of(checker)
    parts.check_opening(found, " (open)", 3)
    assert rules_of(found) == []


@pytest.mark.parametrize(
    ("opened", "in_order", "index", "state"),
    [
        (2, True, 5, "never opened"),
        (2, True, 1, "already closed"),
        (2, False, 1, "never opened, or already closed"),
        (2, True, -1, "never opened, or already closed"),
    ],
)
def test_an_event_for_an_entity_not_open_says_what_can_be_told(
    opened: int, in_order: bool, index: int, state: str
) -> None:
    checker, things = track()
    things.opened, things.in_order = opened, in_order
    found = findings_of(checker)
    things.not_open(found, " (delta)", index)
    assert rules_of(found) == ["block_not_started"]
    assert found.items[0].message == f"event 7 (delta): thing {index} is not open ({state})"


def test_past_the_bound_an_entity_is_counted_and_events_for_unknown_ones_not_judged() -> None:
    """Past ``limit`` a new entity is only counted; an event naming an index not held may
    be for it, so it is not judged, and a closing one takes it off the count."""
    checker, things = track(limit=2)
    assert things.keep(checker, 0, Kept(checker))
    assert things.keep(checker, 1, Kept(checker))
    assert not things.keep(checker, 2, Kept(checker))
    assert (sorted(things.open), things.untracked) == ([0, 1], 1)
    found = findings_of(checker)
    things.not_open(found, " (delta)", 2)
    things.not_open(found, " (stop)", 2, closes=True)
    assert (rules_of(found), things.untracked) == ([], 0)
    things.not_open(found, " (delta)", 2)  # none past the bound any more: judged
    assert rules_of(found) == ["block_not_started"]


def test_forget_oldest_keeps_the_new_entity_in_place_of_the_oldest() -> None:
    checker, things = track(limit=2, forget_oldest=True)
    oldest = Kept(checker, 10)
    things.keep(checker, 0, oldest)
    things.keep(checker, 1, Kept(checker))
    assert things.keep(checker, 2, Kept(checker))
    assert (sorted(things.open), things.untracked, oldest.forgotten) == ([1, 2], 0, True)


@pytest.mark.parametrize(("forget_oldest", "order"), [(False, [1, 0]), (True, [0, 1])])
def test_an_entity_opened_again_is_the_newest_unless_the_oldest_is_pushed_out(
    forget_oldest: bool, order: list[int]
) -> None:
    """Reopened, an entity is the newest; where the oldest is pushed out (Anthropic's
    blocks) it keeps its place, as the checkers did before the tracker."""
    checker, things = track(limit=3, forget_oldest=forget_oldest)
    for index in (0, 1, 0):
        things.keep(checker, index, Kept(checker))
    assert list(things.open) == order


def test_an_entry_replaced_at_its_index_gives_its_room_back() -> None:
    checker, things = track()
    first = Kept(checker, 1_000)
    things.keep(checker, 0, first)
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS - 1_000
    things.keep(checker, 0, Kept(checker))
    assert first.forgotten
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS


def test_entities_still_open_at_the_end_are_one_finding_then_forgotten() -> None:
    checker, things = track(limit=2)
    kept = [Kept(checker, 5) for _ in range(2)]
    for index, entry in enumerate(kept):
        things.keep(checker, index, entry)
    things.keep(checker, 2, Kept(checker))  # past the bound: counted
    found = findings_of(checker)
    things.check_closed(found, " (end)")
    assert rules_of(found) == ["block_not_stopped"]
    assert found.items[0].message == "event 7 (end): 3 thing(s) were never closed: 0, 1 and 1 more"
    assert (things.open, things.untracked) == ({}, 0)
    assert all(entry.forgotten for entry in kept)
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS
    things.check_closed(found, " (end)")  # nothing open: nothing more
    assert len(found.items) == 1


def test_entities_cut_off_by_a_limit_are_open_at_limit() -> None:
    checker, things = track()
    things.keep(checker, 0, Kept(checker))
    found = findings_of(checker)
    things.check_closed(found, " (end)", "stop_reason 'max_tokens'")
    assert rules_of(found) == ["block_open_at_limit"]
    assert found.items[0].message.endswith(
        "1 thing(s) were never closed: 0, cut off by stop_reason 'max_tokens'"
    )


# -- Anthropic content blocks --------------------------------------------------------------


def block_start(index: int, kind: str = "text") -> tuple[str, str]:
    block = {"type": kind, "text": ""} if kind == "text" else {"type": kind, "id": "t", "name": "f"}
    payload = {"type": "content_block_start", "index": index, "content_block": block}
    return "content_block_start", json.dumps(payload)


def block_delta(index: int, text: str = "hi") -> tuple[str, str]:
    delta = {"type": "text_delta", "text": text}
    return "content_block_delta", json.dumps(
        {"type": "content_block_delta", "index": index, "delta": delta}
    )


def json_delta(index: int, fragment: str) -> tuple[str, str]:
    delta = {"type": "input_json_delta", "partial_json": fragment}
    return "content_block_delta", json.dumps(
        {"type": "content_block_delta", "index": index, "delta": delta}
    )


def block_stop(index: int) -> tuple[str, str]:
    return "content_block_stop", json.dumps({"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str = "end_turn") -> tuple[str, str]:
    payload = {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason},
        "usage": {"output_tokens": 3},
    }
    return "message_delta", json.dumps(payload)


def anthropic(*events: tuple[str, str]) -> StreamReport:
    body_ = anthropic_stream(ANTHROPIC_START, *events, ANTHROPIC_STOP)
    return check_stream(body_, protocol="anthropic")


def found(report: StreamReport) -> list[tuple[str, int | None]]:
    return [(finding.rule, finding.event_index) for finding in report.findings]


#: A ping between message_start and the blocks, so the first block is event 2.
PING = ("ping", '{"type":"ping"}')


def test_blocks_in_order_one_at_a_time_are_clean() -> None:
    """The look-alike of every block rule: 0 and 1 started, continued and stopped in turn."""
    report = anthropic(
        block_start(0),
        block_delta(0),
        block_stop(0),
        block_start(1),
        block_delta(1),
        block_stop(1),
        message_delta(),
    )
    assert (report.outcome.value, found(report)) == ("completed", [])


@pytest.mark.parametrize(
    ("events", "expected", "message"),
    [
        (
            [block_delta(0), message_delta()],
            [("block_not_started", 2)],
            "event 2 (content_block_delta): content block 0 is not open (never started)",
        ),
        (
            [block_start(0), block_stop(0), block_stop(0), message_delta()],
            [("block_not_started", 4)],
            "event 4 (content_block_stop): content block 0 is not open (already stopped)",
        ),
        (
            [block_start(1), block_stop(1), message_delta()],
            [("block_index_out_of_order", 2)],
            "event 2 (content_block_start): index 1, expected 0",
        ),
        (
            [block_start(0), block_start(1), block_stop(0), block_stop(1), message_delta()],
            [("block_overlap", 3)],
            "event 3 (content_block_start): content block 1 opens while 1 other content "
            "block(s) are still open: 0 ('text')",
        ),
        (
            [block_start(0), message_delta()],
            [("block_not_stopped", 3)],
            "event 3 (message_delta): 1 content block(s) were never stopped: 0 ('text')",
        ),
        (
            [block_start(0, "tool_use"), message_delta("max_tokens")],
            [("block_open_at_limit", 3)],
            "event 3 (message_delta): 1 content block(s) were never stopped: 0 ('tool_use'), "
            "cut off by stop_reason 'max_tokens'",
        ),
    ],
)
def test_each_block_rule_is_the_trackers(
    events: list[tuple[str, str]], expected: list[tuple[str, int]], message: str
) -> None:
    report = anthropic(PING, *events)
    assert found(report) == expected
    assert report.findings[0].message == message


def test_a_block_started_again_gives_its_kept_input_back() -> None:
    """A tool block started a second time at its index replaces the first, whose
    ``partial_json`` no longer counts against the stream's budget."""
    checker = AnthropicChecker()
    fragment = '{"pad": "' + "x" * 60_000 + '"}'
    stream = anthropic_stream(
        ANTHROPIC_START,
        block_start(0, "tool_use"),
        json_delta(0, fragment),
        block_start(0, "tool_use"),
        block_stop(0),
        message_delta(),
    )
    assert rules_of(run_checker(checker, stream)) == ["block_index_out_of_order", "block_overlap"]
    assert checker._kept_text_left == MAX_KEPT_TEXT_CHARS


# -- Responses output items and parts ------------------------------------------------------


def responses_event(kind: str, sequence: int, **fields: object) -> bytes:
    return frame({"type": kind, "sequence_number": sequence, **fields}, kind)


def response(kind: str, sequence: int, status: str) -> bytes:
    usage = {"total_tokens": 1} if status == "completed" else None
    payload = {"id": "resp_1", "status": status, "usage": usage, "error": None}
    return responses_event(kind, sequence, response=payload)


def item_event(kind: str, sequence: int, index: int, status: str = "in_progress") -> bytes:
    item = {"id": f"msg_{index}", "type": "message", "status": status, "content": []}
    return responses_event(kind, sequence, output_index=index, item=item)


def part_event(kind: str, sequence: int, index: int, part: int) -> bytes:
    text = {"type": "output_text", "text": "", "annotations": []}
    return responses_event(
        kind, sequence, output_index=index, item_id=f"msg_{index}", content_index=part, part=text
    )


def responses(*middle: tuple[str, int, int]) -> StreamReport:
    """A Responses stream: created, then ``(what, output_index, content_index)`` steps
    (``added``/``done`` an item, ``part+``/``part-`` a content part), then completed."""
    stream = response("response.created", 0, "in_progress")
    sequence = 1
    for what, index, part in middle:
        if what in ("added", "done"):
            status = "in_progress" if what == "added" else "completed"
            stream += item_event(f"response.output_item.{what}", sequence, index, status)
        else:
            kind = "added" if what == "part+" else "done"
            stream += part_event(f"response.content_part.{kind}", sequence, index, part)
        sequence += 1
    stream += response("response.completed", sequence, "completed")
    return check_stream(stream, protocol="openai_responses")


def test_items_and_parts_in_order_one_at_a_time_are_clean() -> None:
    report = responses(
        ("added", 0, 0),
        ("part+", 0, 0),
        ("part-", 0, 0),
        ("part+", 0, 1),
        ("part-", 0, 1),
        ("done", 0, 0),
        ("added", 1, 0),
        ("done", 1, 0),
    )
    assert (report.outcome.value, found(report)) == ("completed", [])


@pytest.mark.parametrize(
    ("steps", "expected", "message"),
    [
        (
            [("part+", 0, 0)],
            [("item_not_open", 1)],
            "event 1 ('response.content_part.added'): output item 0 is not open (never added)",
        ),
        (
            [("added", 0, 0), ("done", 0, 0), ("done", 0, 0)],
            [("item_not_open", 3)],
            "event 3 ('response.output_item.done'): output item 0 is not open (already done)",
        ),
        (
            [("added", 0, 0), ("part-", 0, 0), ("done", 0, 0)],
            [("item_not_open", 2)],
            "event 2 ('response.content_part.done'): content part 0 is not open (never added)",
        ),
        (
            [("added", 1, 0), ("done", 1, 0)],
            [("item_out_of_order", 1)],
            "event 1 ('response.output_item.added'): output_index 1, expected 0",
        ),
        (
            [("added", 0, 0), ("added", 1, 0), ("done", 0, 0), ("done", 1, 0)],
            [("item_overlap", 2)],
            "event 2 ('response.output_item.added'): output item 1 opens while 1 other output "
            "item(s) are still open: 0 (reported once per stream)",
        ),
        (
            [("added", 0, 0)],
            [("item_not_closed", 2)],
            "event 2 ('response.completed'): 1 output item(s) were never done: 0",
        ),
        (
            [("added", 0, 0), ("part+", 0, 0), ("part+", 0, 1), ("done", 0, 0)],
            [("item_not_closed", 4)],
            "event 4 ('response.output_item.done') for item 0: 2 part(s) were never done: "
            "content part 0, content part 1",
        ),
    ],
)
def test_each_item_and_part_rule_is_the_trackers(
    steps: list[tuple[str, int, int]], expected: list[tuple[str, int]], message: str
) -> None:
    report = responses(*steps)
    assert found(report) == expected
    assert report.findings[0].message == message


def test_the_two_protocols_word_a_lifecycle_rule_alike() -> None:
    """One tracker, one wording: only the nouns and verbs each protocol declares differ."""
    block = anthropic(block_start(0), block_stop(0), block_stop(0), message_delta())
    item = responses(("added", 0, 0), ("done", 0, 0), ("done", 0, 0))
    assert block.findings[0].message.endswith(": content block 0 is not open (already stopped)")
    assert item.findings[0].message.endswith(": output item 0 is not open (already done)")


# -- through the middleware ----------------------------------------------------------------


def guarded(stream: bytes, protocol: str, cut: int) -> StreamReport:
    """``stream`` served by a scripted app in pieces of ``cut`` bytes, behind the
    middleware; the report it gave."""
    pieces = [stream[i : i + cut] for i in range(0, len(stream), cut)]
    messages = [body(piece) for piece in pieces[:-1]] + [body(pieces[-1], more=False)]
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(
        ScriptedApp([sse_start(), *messages]),
        protocol=protocol,
        metrics=CollectorRegistry(),
        on_report=reports.append,
        logs={"enabled": False},
    )
    recorder, raised = run(middleware, http_scope())
    assert raised is None
    assert b"".join(m.get("body", b"") for m in recorder.sent[1:]) == stream  # not a byte changed
    [report] = reports
    return report


@pytest.mark.parametrize("cut", [7, 64, 100_000])
def test_the_middleware_reports_the_block_rules_at_the_same_events(cut: int) -> None:
    stream = anthropic_stream(
        ANTHROPIC_START,
        block_start(0),
        block_start(2),
        block_delta(1),
        message_delta(),
        ANTHROPIC_STOP,
    )
    report = guarded(stream, "anthropic", cut)
    direct = check_stream(stream, protocol="anthropic")
    assert (
        found(report)
        == found(direct)
        == [
            ("block_index_out_of_order", 2),
            ("block_overlap", 2),
            ("block_not_started", 3),
            ("block_not_stopped", 4),
        ]
    )
    assert [f.byte_offset for f in report.findings] == [f.byte_offset for f in direct.findings]


@pytest.mark.parametrize("cut", [5, 100_000])
def test_the_middleware_reports_the_item_rules_at_the_same_events(cut: int) -> None:
    stream = response("response.created", 0, "in_progress")
    stream += item_event("response.output_item.added", 1, 0)
    stream += item_event("response.output_item.added", 2, 2)
    stream += response("response.completed", 3, "completed")
    report = guarded(stream, "openai_responses", cut)
    assert found(report) == [("item_out_of_order", 2), ("item_overlap", 2), ("item_not_closed", 3)]
    assert report.findings[2].message.endswith("2 output item(s) were never done: 0, 2")
