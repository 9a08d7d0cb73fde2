"""The SSE parser: the WHATWG interpretation algorithm, chunk independence, bounds."""

from __future__ import annotations

import re
import tracemalloc
from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamguard import StreamEnd, StreamMonitor, sse
from streamguard._wire import describe
from streamguard.report import Finding
from streamguard.sse import Event, EventParser, Leftover

from .chunking import chunkings
from .helpers import fed

# -- a deliberately simple whole-input reference implementation -------------------------

_REFERENCE_LINE_ENDING = re.compile(rb"\r\n|\r|\n")


def reference_events(body: bytes) -> list[Event]:
    """The spec's algorithm over the whole body at once, written for clarity, not speed."""
    offset = 0
    if body.startswith(b"\xef\xbb\xbf"):
        offset = 3
    events: list[Event] = []
    data: list[bytes] = []
    event_type = b""
    last_id: str | None = None
    retry: int | None = None
    block_start: int | None = None
    position = offset
    for match in _REFERENCE_LINE_ENDING.finditer(body, offset):
        line = body[position : match.start()]
        line_start, position = position, match.end()
        if line == b"":
            if data:
                events.append(
                    Event(
                        event_type.decode("utf-8", "replace") or "message",
                        b"\n".join(data).decode("utf-8", "replace"),
                        last_id,
                        retry,
                        block_start if block_start is not None else line_start,
                    )
                )
            data, event_type, block_start = [], b"", None
            continue
        if block_start is None:
            block_start = line_start
        if line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data.append(value)
        elif name == b"event":
            event_type = value
        elif name == b"id" and b"\x00" not in value:
            last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value and all(48 <= byte <= 57 for byte in value):
            retry = int(value)
    return events


def split(items: list[Event | Finding]) -> tuple[list[Event], list[Finding]]:
    """What ``feed`` returned, as its events and its findings."""
    events = [item for item in items if isinstance(item, Event)]
    return events, [item for item in items if isinstance(item, Finding)]


def parse_items(chunks: list[bytes], max_event_bytes: int = 1 << 20) -> list[Event | Finding]:
    """Everything ``feed`` returned over ``chunks``, in order, then the findings of ``close``."""
    parser = EventParser(max_event_bytes=max_event_bytes)
    items: list[Event | Finding] = []
    for chunk in chunks:
        items += fed(parser, chunk)
    items += parser.close().findings
    return items


def parse_all(
    chunks: list[bytes], max_event_bytes: int = 1 << 20
) -> tuple[list[Event], list[Finding]]:
    return split(parse_items(chunks, max_event_bytes))


def data_of(events: list[Event]) -> list[str]:
    return [event.data for event in events]


# -- the spec's own examples (protocols.md §5.3) -----------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"data: YHOO\ndata: +2\ndata: 10\n\n", ["YHOO\n+2\n10"]),
        (b"data:test\n\ndata: test\n\n", ["test", "test"]),
        (b"data:  third\n\n", [" third"]),
        (b"data\n\ndata\ndata\n\ndata:", ["", "\n"]),
        (b": test stream\n\n", []),
        (b"\xef\xbb\xbfdata: a\n\n", ["a"]),
        (b"Data: x\n\n", []),
        (b"event: only\n\nid: 7\n\nretry: 10\n\n", []),
    ],
)
def test_spec_examples(body: bytes, expected: list[str]) -> None:
    """Each example of the spec's edge-case table parses to the spec's result."""
    events, _ = parse_all([body])
    assert data_of(events) == expected


def test_event_type_defaults_to_message_and_resets_after_dispatch() -> None:
    """The type is ``message`` unless set, and an ``event:`` line applies to one event only."""
    events, _ = parse_all([b"event: ping\ndata: 1\n\ndata: 2\n\n"])
    assert [(e.event, e.data) for e in events] == [("ping", "1"), ("message", "2")]


def test_last_event_id_persists_and_empty_id_resets_it() -> None:
    """``id`` stays in effect across events; an empty ``id`` sets it to the empty string."""
    events, _ = parse_all([b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"])
    assert [e.id for e in events] == ["1", "1", ""]


def test_id_containing_nul_is_ignored() -> None:
    """An ``id`` value with U+0000 leaves the last event ID unchanged."""
    events, _ = parse_all([b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"])
    assert [e.id for e in events] == ["1", "1"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b"500", 500), (b"+5", None), (b"  7", None), (b"1_000", None), (b"", None), (b"12a", None)],
)
def test_retry_accepts_only_ascii_digits(value: bytes, expected: int | None) -> None:
    """``retry`` is set only by a value made of ASCII digits, unlike the SDKs' ``int()``."""
    events, _ = parse_all([b"retry:" + value + b"\ndata: x\n\n"])
    assert events[0].retry == expected


def test_only_first_colon_splits_and_one_space_is_removed() -> None:
    """The value is everything after the first colon, minus exactly one leading space."""
    events, _ = parse_all([b'data: {"a": "b:c"}\n\n', b"event:  two\ndata:x\n\n"])
    assert [(e.event, e.data) for e in events] == [("message", '{"a": "b:c"}'), (" two", "x")]


@pytest.mark.parametrize("ending", [b"\n", b"\r", b"\r\n"])
def test_every_line_ending(ending: bytes) -> None:
    """CR, LF and CRLF each end a line, and two of them end an event."""
    body = b"data: a" + ending + b"data: b" + ending + ending + b"data: c" + ending + ending
    events, findings = parse_all([body])
    assert data_of(events) == ["a\nb", "c"]
    assert findings == []


def test_cr_at_chunk_end_and_lf_at_next_start_are_one_line_ending() -> None:
    """A CRLF split across two chunks ends one line, not two (which would dispatch early)."""
    events, _ = parse_all([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert data_of(events) == ["a\nb"]


def test_lone_cr_at_chunk_end_followed_by_text() -> None:
    """A CR at a chunk's end followed by an ordinary byte is a lone CR line ending."""
    events, _ = parse_all([b"data: a\r", b"data: b\r", b"\r"])
    assert data_of(events) == ["a\nb"]


def test_unicode_line_separators_are_data_not_line_endings() -> None:
    """U+2028, U+2029, U+0085, VT and FF inside data are kept: only CR and LF split lines."""
    payload = '{"t": "a\u2028b\u2029c\x85d\x0be\x0cf"}'
    events, findings = parse_all([b"data: " + payload.encode() + b"\n\n"])
    assert data_of(events) == [payload]
    assert findings == []


def test_bom_is_stripped_only_at_the_very_start() -> None:
    """A leading BOM is dropped; a BOM later is part of the line, so that field is unknown."""
    events, findings = parse_all([b"\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\ndata: c\n\n"])
    assert data_of(events) == ["a", "c"]
    assert [f.rule for f in findings] == ["unknown_field"]
    assert findings[0].byte_offset == 12


def test_bom_split_across_chunks_is_stripped() -> None:
    """A leading BOM cut into one-byte chunks is still recognised and stripped."""
    events, _ = parse_all([b"\xef", b"\xbb", b"\xbf", b"data: a\n\n"])
    assert data_of(events) == ["a"]
    assert events[0].offset == 3


def test_offsets_count_body_bytes_from_the_event_start() -> None:
    """Each event's offset is where its block's first line began, comments included."""
    body = b"\xef\xbb\xbf: hi\ndata: a\n\n\r\nevent: x\r\ndata: b\r\n\r\n"
    events, _ = parse_all([body])
    assert [e.offset for e in events] == [3, 19]


def test_invalid_utf8_is_replaced_and_reported_once() -> None:
    """Invalid bytes become U+FFFD and give one ``invalid_utf8`` finding for the stream."""
    events, findings = parse_all([b"data: a\xff\n\ndata: \xc3\n\n: \xfe\n\n"])
    assert data_of(events) == ["a\ufffd", "\ufffd"]
    assert [(f.rule, f.event_index, f.byte_offset) for f in findings] == [("invalid_utf8", 0, 0)]


def test_invalid_utf8_in_a_comment_is_reported() -> None:
    """A comment is part of the stream's bytes, which must all be UTF-8."""
    _, findings = parse_all([b": \xff\n\ndata: a\n\n"])
    assert [f.rule for f in findings] == ["invalid_utf8"]


def test_multibyte_character_split_across_chunks_is_not_invalid() -> None:
    """A UTF-8 sequence cut by a chunk boundary decodes whole and gives no finding."""
    encoded = "data: héllo €\n\n".encode()
    cut_at = encoded.index("€".encode()) + 1
    events, findings = parse_all([encoded[:cut_at], encoded[cut_at:]])
    assert data_of(events) == ["héllo €"]
    assert findings == []


@pytest.mark.parametrize(
    ("tail", "offset"),
    [(b"data: [DONE]", 9), (b"data: [DONE]\n", 9), (b": ping", 9), (b"\r", None)],
)
def test_unterminated_frame_at_close(tail: bytes, offset: int | None) -> None:
    """Bytes after the last blank line at the end are ``unterminated_frame``; a lone CR is not."""
    events, findings = parse_all([b"data: a\n\n" + tail])
    assert data_of(events) == ["a"]
    if offset is None:
        assert findings == []
    else:
        assert [(f.rule, f.event_index, f.byte_offset) for f in findings] == [
            ("unterminated_frame", 1, offset)
        ]


def test_stream_ending_on_blank_line_is_clean() -> None:
    """A body whose last bytes are a blank line leaves nothing pending."""
    _, findings = parse_all([b"data: a\n\n: keepalive\n\n"])
    assert findings == []


def test_event_too_large_stops_inspection_but_counts_bytes() -> None:
    """Past ``max_event_bytes`` one finding is made and nothing more is parsed."""
    chunks = [b"data: ok\n\n", b"data: " + b"x" * 20, b"\n\ndata: later\n\n"]
    parser = EventParser(max_event_bytes=16)
    assert data_of(split(fed(parser, chunks[0]))[0]) == ["ok"]
    events, findings = split(fed(parser, chunks[1]))
    assert events == []
    assert [f.rule for f in findings] == ["event_too_large"]
    assert fed(parser, chunks[2]) == []
    assert parser.close().findings == []
    assert parser.inspecting is False
    # The parser counts no bytes; its monitor counts them all, inspected or not.
    monitor = StreamMonitor("sse", max_event_bytes=16)
    for chunk in chunks:
        monitor.feed(chunk)
    assert monitor.finish(StreamEnd.BODY_ENDED).bytes == 10 + 26 + 15


def test_event_at_exactly_the_limit_is_accepted() -> None:
    """An event whose content is exactly ``max_event_bytes`` long is not too large."""
    body = b"data: " + b"x" * 10 + b"\n\n"  # 16 bytes of content
    events, findings = parse_all([body], max_event_bytes=16)
    assert data_of(events) == ["x" * 10]
    assert findings == []


def test_long_line_without_ending_is_bounded() -> None:
    """A line that never ends is cut off at the limit, whatever the chunk sizes."""
    parser = EventParser(max_event_bytes=1000)
    found: list[Event | Finding] = []
    for _ in range(10_000):
        found += fed(parser, b"x" * 7)
    assert [f.rule for f in split(found)[1]] == ["event_too_large"]
    assert not parser._partial


def test_unknown_fields_are_reported_once_each() -> None:
    """An unknown field name gives one ``info`` finding per name, however often it recurs."""
    _, findings = parse_all([b"foo: 1\ndata: a\n\nfoo: 2\nbar\ndata: b\n\n"])
    assert [(f.rule, f.severity.value) for f in findings] == [
        ("unknown_field", "info"),
        ("unknown_field", "info"),
    ]


def test_a_named_block_without_data_is_reported_and_dropped() -> None:
    """``event: x`` alone is dropped by the dispatch: a warning at the block's byte, and
    the data that follows in a block of its own arrives unnamed."""
    events, findings = parse_all([b"data: a\n\nevent: delta\n\ndata: b\n\n"])
    assert [(f.rule, f.severity.value, f.byte_offset) for f in findings] == [
        ("event_without_data", "warning", 9)
    ]
    assert "delta" not in findings[0].message  # the stream's name is not shown
    assert [(e.event, e.data) for e in events] == [("message", "a"), ("message", "b")]


@pytest.mark.parametrize(
    "block",
    [b": keep-alive\n\n", b"id: 7\n\n", b"retry: 1000\n\n", b"event: x\ndata: y\n\n", b"\n"],
)
def test_blocks_that_name_nothing_or_carry_data_are_not_event_without_data(block: bytes) -> None:
    """Comments, id: and retry: blocks, a named event with its data, a stray blank line."""
    _, findings = parse_all([b"data: a\n\n" + block + b"data: b\n\n"])
    assert findings == []


def test_rejects_a_nonpositive_limit() -> None:
    """A limit below one byte is a configuration error that names the value."""
    with pytest.raises(ValueError, match="max_event_bytes must be at least 1, got 0"):
        EventParser(max_event_bytes=0)


# -- chunk independence, property-tested against the reference ----------------------------

_line_ending = st.sampled_from([b"\n", b"\r", b"\r\n"])
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
).map(lambda s: s.encode())
_line = st.one_of(
    st.builds(lambda v: b"data:" + v, _text),
    st.builds(lambda v: b"data: " + v, _text),
    st.just(b"data"),
    st.builds(lambda v: b"event: " + v, _text),
    st.sampled_from([b"event: \xff", b"event: ok\xc3"]),  # invalid UTF-8 in a name
    st.builds(lambda v: b"id: " + v, _text),
    st.just(b"id: a\x00b"),
    st.builds(lambda v: b"retry: " + v, st.sampled_from([b"10", b"x", b"", b"+1"])),
    st.builds(lambda v: b": " + v, _text),
    st.builds(lambda v: b"\xef\xbb\xbf" + v, st.just(b"data: bom")),
    st.sampled_from([b"", b"", b"\xff\xfe", b"data: \xe2\x82", b"Data: x", b"x:y"]),
)


@st.composite
def sse_bodies(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_line, _line_ending), max_size=30))
    if draw(st.booleans()):  # one line ending throughout, as real servers send
        ending = draw(_line_ending)
        lines = [(line, ending) for line, _ in lines]
    body = b"".join(line + ending for line, ending in lines)
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    if draw(st.booleans()):
        body += draw(_line)  # an unfinished last line
    return body


#: Cut points, taken modulo the body's length + 1 (repeated points give empty chunks).
cut_points = st.lists(st.integers(0, 1 << 16), max_size=40)


def cut_at(body: bytes, points: list[int]) -> list[bytes]:
    bounds = [0, *sorted(point % (len(body) + 1) for point in points), len(body)]
    return [body[a:b] for a, b in pairwise(bounds)]


def bytewise(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


#: Inputs once found to give different findings whole and cut (issue 12): the one-event fast
#: path decoded the first ``event:`` line's name, which a later line replaces, so invalid
#: UTF-8 in it was reported whole and not when the line path read it.
CUT_DEPENDENT_ONCE = [
    b"event: \xff\nevent: \n\n",
    b"event: \xff\n\n\n",
    b"event: ok\xc3\nretry: 10\n\n",
    b"event: \xff\r\nData: x\r\n\r\n",
]
BYTEWISE = list(range(64))  # as cut points: every byte its own chunk, for these short bodies


@settings(max_examples=500, deadline=None)
@given(body=sse_bodies(), points=cut_points)
def test_events_match_reference_for_any_chunking(body: bytes, points: list[int]) -> None:
    """For any body and any cutting, the events equal the whole-input reference's."""
    events, _ = parse_all(cut_at(body, points))
    assert events == reference_events(body)


@settings(max_examples=500, deadline=None)
@given(body=sse_bodies(), points=cut_points, limit=st.sampled_from([8, 40, 1 << 20]))
@example(body=CUT_DEPENDENT_ONCE[0], points=BYTEWISE, limit=1 << 20)
@example(body=CUT_DEPENDENT_ONCE[1], points=BYTEWISE, limit=1 << 20)
@example(body=CUT_DEPENDENT_ONCE[2], points=[8], limit=1 << 20)
@example(body=CUT_DEPENDENT_ONCE[3], points=[3, 12], limit=40)
def test_findings_do_not_depend_on_chunking(body: bytes, points: list[int], limit: int) -> None:
    """For any body, the findings of any cutting equal those of the whole body."""
    assert parse_all(cut_at(body, points), limit) == parse_all([body], limit)


@settings(max_examples=500, deadline=None)
@given(sse_bodies())
@example(CUT_DEPENDENT_ONCE[0])
@example(CUT_DEPENDENT_ONCE[1])
@example(CUT_DEPENDENT_ONCE[2])
@example(CUT_DEPENDENT_ONCE[3])
def test_one_byte_at_a_time_equals_whole(body: bytes) -> None:
    """Feeding one byte at a time gives the same events and findings as one chunk."""
    assert parse_all(bytewise(body)) == parse_all([body])


#: After each blank line: how servers cut a stream (one event per chunk), which is what
#: takes the parser's one-event fast path.
_FRAME_ENDS = re.compile(rb"(?<=\n\n)|(?<=\r\r)|(?<=\r\n\r\n)")


@settings(max_examples=500, deadline=None)
@given(sse_bodies())
@example(CUT_DEPENDENT_ONCE[0])
@example(CUT_DEPENDENT_ONCE[3])
@example(b"event: x\r\ndata: a\rb\r\n\r\n")  # a lone CR inside what looks like one event
@example(b"ev\rent: x\r\ndata: a\r\n\r\n")
@example(b"event: x\ry\ndata: a\r\n\r\n")  # a stray CR, and an LF where a CRLF would be
def test_one_event_per_chunk_equals_bytewise_and_reference(body: bytes) -> None:
    """Cut after every blank line, as servers send, a body parses as bytewise and as the spec."""
    framewise = parse_all(_FRAME_ENDS.split(body))
    assert framewise == parse_all(bytewise(body))
    assert framewise[0] == reference_events(body)


@st.composite
def data_heavy_bodies(draw: st.DrawFn) -> bytes:
    """Events of several data lines each: what data-line compaction is for."""
    events = []
    for _ in range(draw(st.integers(1, 4))):
        lines = [b"data: " + draw(_text) for _ in range(draw(st.integers(1, 12)))]
        events.append(b"\n".join(lines) + draw(_line_ending) * 2)
    return b"".join(events)


@settings(max_examples=300, deadline=None)
@given(
    body=st.one_of(sse_bodies(), data_heavy_bodies()),
    points=cut_points,
    limit=st.sampled_from([40, 1 << 20]),
)
def test_windows_and_compaction_change_nothing(body: bytes, points: list[int], limit: int) -> None:
    """With tiny windows and eager compaction, events and findings are those of the reference."""
    with pytest.MonkeyPatch.context() as small_buffers:
        small_buffers.setattr(sse, "_WINDOW", 16)
        small_buffers.setattr(sse, "_MAX_HELD_DATA_LINES", 1)
        events, findings = parse_all(cut_at(body, points), limit)
        whole = parse_all([body], limit)
    if limit > len(body):
        assert events == reference_events(body)
    assert (events, findings) == whole == parse_all([body], limit)


def test_fixed_chunkings_agree() -> None:
    """The shared chunking helper's cuttings all agree on a mixed body."""
    body = b"\xef\xbb\xbf: c\r\nevent: x\rdata: \xe2\x82\xac\r\n\r\nid: 1\ndata\n\ndata: tail"
    results = {name: parse_all(chunks) for name, chunks in chunkings(body)}
    assert len({repr(result) for result in results.values()}) == 1


@settings(max_examples=300, deadline=None)
@given(body=sse_bodies(), points=cut_points, limit=st.sampled_from([8, 40, 1 << 20]))
def test_findings_come_before_the_event_they_were_found_in(
    body: bytes, points: list[int], limit: int
) -> None:
    """feed returns events and findings in stream order, the same order however cut."""
    items = parse_items(cut_at(body, points), limit)
    assert items == parse_items([body], limit)
    dispatched = 0
    for item in items:
        if isinstance(item, Event):
            dispatched += 1
        else:
            assert item.event_index == dispatched


def test_feed_returns_findings_with_the_events() -> None:
    """A finding is returned by the feed that made it, just before the event it is in."""
    parser = EventParser()
    items = fed(parser, b"data: a\n\nfoo: 1\ndata: b\n\n")
    assert [getattr(item, "data", None) or getattr(item, "rule", None) for item in items] == [
        "a",
        "unknown_field",
        "b",
    ]
    assert parser.events_dispatched == 2


def test_close_returns_the_unfinished_event() -> None:
    """close() gives the last findings and the pending event, judged by its first data line."""
    parser = EventParser()
    assert split(fed(parser, b"data: a\n\nevent: x\ndata: {}\ndata: more\n")) == (
        [Event("message", "a", None, None, 0)],
        [],
    )
    findings, pending = parser.close()
    assert [f.rule for f in findings] == ["unterminated_frame"]
    assert pending == Event("x", "{}", None, None, 9)
    assert parser.close() == Leftover([], None)
    cut = EventParser()
    fed(cut, b"data: " + b"x" * (100 * 1024))  # a first line never ended: its start only
    leftover = cut.close()
    assert leftover.pending is not None
    assert leftover.pending.data == "x" * (64 * 1024 - 6)
    assert EventParser().close() == Leftover([], None)


def test_body_of_only_a_bom_prefix_is_an_unterminated_frame() -> None:
    """Two bytes that could begin a BOM, then the end, are bytes after the last blank line."""
    assert [f.rule for f in parse_all([b"\xef", b"\xbb"])[1]] == ["unterminated_frame"]
    assert [f.rule for f in parse_all([b"\xef\xbb"], max_event_bytes=1)[1]] == ["event_too_large"]


def test_feed_after_close_is_a_usage_error() -> None:
    """Feeding a closed parser is a bug in the caller and says so."""
    parser = EventParser()
    parser.close()
    with pytest.raises(RuntimeError, match=r"feed\(\) called after close\(\)"):
        fed(parser, b"data: a\n\n")


def test_invalid_utf8_in_an_event_name_is_located_at_the_event() -> None:
    """A bad byte in an event name is reported at the event's start, whole or byte by byte."""
    body = b"data: a\n\nevent: x\xff\ndata: b\n\n"
    whole = parse_all([body])
    assert whole == parse_all([body[i : i + 1] for i in range(len(body))])
    assert [(f.rule, f.byte_offset) for f in whole[1]] == [("invalid_utf8", 9)]


# -- invalid UTF-8: one rule, whatever the cutting ----------------------------------------


@pytest.mark.parametrize("body", CUT_DEPENDENT_ONCE)
def test_invalid_utf8_in_an_overridden_event_line_is_reported_however_cut(body: bytes) -> None:
    """Clients decode every line, so a bad name a later line replaces is still reported."""
    for chunks in ([body], bytewise(body)):
        _, findings = parse_all(chunks)
        assert [f.byte_offset for f in findings if f.rule == "invalid_utf8"] == [0]


@pytest.mark.parametrize(
    ("line", "offset"),
    [
        (b"retry: 1\xff", 9),
        (b"id: a\x00\xff", 9),
        (b"event: \xfe", 9),  # a line of the event: located at the event's start
        (b"x\xff: y", 9),
    ],
)
def test_invalid_utf8_in_any_field_line_is_reported(line: bytes, offset: int) -> None:
    """Lines whose value is ignored (a bad retry, an id with NUL, an unknown field) count too."""
    _, findings = parse_all([b"data: a\n\n" + line + b"\ndata: b\n\n"])
    assert ("invalid_utf8", offset) in [(f.rule, f.byte_offset) for f in findings]


def test_invalid_utf8_in_the_data_of_an_unfinished_event_is_reported_at_close() -> None:
    """Whole data lines of an event the body never ended were read, so they are checked."""
    body = b"data: a\n\nid: 1\ndata: \xff\n"
    for chunks in ([body], bytewise(body)):
        _, findings = parse_all(chunks)
        assert [(f.rule, f.byte_offset) for f in findings] == [
            ("invalid_utf8", 9),
            ("unterminated_frame", 9),
        ]


def test_an_unfinished_last_line_is_not_checked_for_utf8() -> None:
    """A body cut inside a character is one unterminated frame, not also invalid UTF-8."""
    _, findings = parse_all([b"data: a\n\ndata: \xe2\x82"])
    assert [f.rule for f in findings] == ["unterminated_frame"]


# -- privacy: no wire value in a finding message ------------------------------------------


def test_unknown_field_message_describes_the_name_without_showing_it() -> None:
    """The message gives the name's size and hash and the offset, never the name's bytes."""
    name = b"SGCANARY_secret_field"
    _, findings = parse_all([b"data: a\n\n" + name + b": value\n\n"])
    [finding] = findings
    assert "SGCANARY" not in finding.message
    assert describe(name) in finding.message
    assert "at byte 9" in finding.message


@pytest.mark.parametrize("name", [b"Data", b"EVENT", b"data ", b" id"])
def test_unknown_field_that_misspells_a_known_one_says_so(name: bytes) -> None:
    """A known name in other letters or with spaces is named as such, the value unshown."""
    _, findings = parse_all([name + b": x\n\n"])
    assert "a known field name, spelled differently" in findings[0].message
    _, findings = parse_all([b"datum: x\n\n"])
    assert "spelled differently" not in findings[0].message


def test_an_ai_sdk_4_data_stream_line_is_named() -> None:
    """A body of AI SDK 4 data stream lines read as SSE says which protocol it is."""
    _, findings = parse_all([b'0:"Hello"\n0:" world"\nd:{"finishReason":"stop"}\n'])
    assert "AI SDK 4 data stream" in findings[0].message
    _, findings = parse_all([b"xy: 1\n\n"])
    assert "AI SDK 4" not in findings[0].message


# -- memory: bounded by max_event_bytes, with a small constant ----------------------------

MIB = 1 << 20


def peak_while_parsing(chunks: list[bytes], limit: int) -> tuple[int, list[Event]]:
    """tracemalloc's peak over parsing ``chunks`` (allocated before), and the events."""
    parser = EventParser(max_event_bytes=limit)
    items: list[Event | Finding] = []
    tracemalloc.start()
    try:
        for chunk in chunks:
            items += fed(parser, chunk)
        items += fed(parser, b"")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert parser.close().findings == []
    events, findings = split(items)
    assert findings == []
    return peak, events


@pytest.mark.parametrize("chunk_size", [MIB, 64 * 1024, 997])
@pytest.mark.parametrize("line", [b"data:xy\n", b"data\r\n"])
def test_an_event_of_many_short_data_lines_is_held_compactly(chunk_size: int, line: bytes) -> None:
    """A 1 MiB event of short data lines peaks well under 3x the limit, however it is cut."""
    body = line * ((MIB - 16) // len(line)) + line[-1:]
    chunks = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
    peak, events = peak_while_parsing(chunks, MIB)
    assert len(events) == 1
    value = line.split(b":")[1].strip() if b":" in line else b""
    assert events[0].data == "\n".join([value.decode()] * ((MIB - 16) // len(line)))
    assert peak < 2 * MIB, peak


def test_long_unknown_field_names_are_not_kept() -> None:
    """Unknown field names are remembered to report each once, but not at their full size."""
    chunks = [b"%d" % i + b"n" * (MIB // 2) + b": x\n\n" for i in range(8)]
    parser = EventParser(max_event_bytes=MIB)
    items: list[Event | Finding] = []
    tracemalloc.start()
    try:
        for chunk in chunks:
            items += fed(parser, chunk)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [f.rule for f in split(items)[1]] == ["unknown_field"] * 8
    assert held < 64 * 1024, held


def test_large_chunks_are_read_in_windows_without_cutting_a_crlf() -> None:
    """A chunk far past the window, CRLFs on every boundary, gives the reference's events."""
    frames = [b"event: e%d\r\ndata: %s\r\n\r\n" % (i, b"x" * (i % 50)) for i in range(5000)]
    body = b"".join(frames) + b"data: lone\rdata: cr\r\r"
    assert len(body) > 4 * sse._WINDOW
    events, findings = parse_all([body])
    assert events == reference_events(body)
    assert findings == []
