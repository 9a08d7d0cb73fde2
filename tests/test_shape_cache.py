"""The shape cache (``streamguard.protocols._skeleton``): a frame that fits the skeleton of
one its checker vouched for skips the parse, and the report is the same to the byte.

Three layers of proof: the skeleton's own rules (a hole holds only what the full parser
takes), the engine's (nothing is cached across a change), and a differential run of every
fixture, every real-world capture and seeded mutants, each checked with learning on and
off, compared finding by finding, messages included.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic_core import from_json

from streamguard import check_stream
from streamguard.protocols import _skeleton
from streamguard.protocols._skeleton import (
    MAX_SKELETON_CHARS,
    MAX_SKELETONS,
    Holes,
    ShapeCache,
    learn,
)
from streamguard.report import Finding, Severity, StreamReport, repeated_finding

from . import equivalence

TEXT = frozenset({("delta", "text")})
HEAD = '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'


def delta(text: str) -> str:
    return HEAD + text + "}}"


def parses(data: str) -> bool:
    try:
        from_json(data)
    except ValueError:
        return False
    return True


# -- the skeleton --------------------------------------------------------------------------


def test_a_text_hole_takes_any_json_string() -> None:
    """A skeleton learned from one text fits frames whose text is any other JSON string."""
    skeleton = learn("content_block_delta", delta('"Hi"'), TEXT)
    assert skeleton is not None
    for text in [
        "",
        "x" * 5000,
        "caf\u00e9 \U0001f600",
        '\\n\\t\\\\\\/\\"',
        "\\u00e9\\ud83d\\ude00",
    ]:
        assert skeleton.match("content_block_delta", delta(f'"{text}"')) == ()


@pytest.mark.parametrize(
    "text",
    [
        '"\\x"',  # no such escape
        '"\\ud800"',  # a lone high surrogate
        '"\\udc00\\ud800"',  # a pair the wrong way round
        '"\\u00"',  # a short \u escape
        '"a\tb"',  # a raw control character
        '"a\x00"',
        '"a"b"',  # an unescaped quote: not one string
        '"a\\"',  # an escaped closing quote: unterminated
        "null",
        "1",
        '["a"]',
    ],
)
def test_a_text_hole_refuses_what_the_parser_refuses(text: str) -> None:
    """A hole that is not one JSON string misses, so the full parse reports it."""
    skeleton = learn("content_block_delta", delta('"Hi"'), TEXT)
    assert skeleton is not None
    assert skeleton.match("content_block_delta", delta(text)) is None


_HOLE_ALPHABET = st.sampled_from(
    [
        '"',
        "\\",
        "/",
        "b",
        "f",
        "n",
        "r",
        "t",
        "u",
        "0",
        "9",
        "a",
        "d",
        "D",
        "8",
        "c",
        "e",
        " ",
        "\t",
        "\x00",
        "\x7f",
        "\u00e9",
        "\U0001f600",
        "\ud800",
    ]
)


@given(st.lists(_HOLE_ALPHABET, max_size=14).map("".join))
@example("\\ud83d\\ude00")
@example("\\ud83d")
@example('\\"')
def test_a_fitting_frame_parses_as_the_template_does(inner: str) -> None:
    """Whatever the text, a frame the skeleton fits is JSON of the template's structure."""
    skeleton = learn("content_block_delta", delta('"Hi"'), TEXT)
    assert skeleton is not None
    frame = delta(f'"{inner}"')
    if skeleton.match("content_block_delta", frame) is not None:
        value = from_json(frame)
        assert isinstance(value["delta"]["text"], str)
        assert {**value, "delta": {**value["delta"], "text": "Hi"}} == from_json(delta('"Hi"'))


def test_every_literal_and_the_name_are_part_of_the_skeleton() -> None:
    """Another index, key order, spacing, type or event name misses."""
    skeleton = learn("content_block_delta", delta('"Hi"'), TEXT)
    assert skeleton is not None
    assert skeleton.match("message", delta('"Hi"')) is None
    for other in [
        delta('"Hi"').replace('"index":0', '"index":1'),
        delta('"Hi"')
        .replace('"index":0,', "")
        .replace('"type":"content_block_delta",', '"type":"content_block_delta","index":0,'),
        delta('"Hi"').replace('"index":0', '"index": 0'),
        delta('"Hi"').replace("text_delta", "thinking_delta"),
        delta('"Hi"')[:-1],
        delta('"Hi"') + "x",
    ]:
        if other != delta('"Hi"'):
            assert skeleton.match("content_block_delta", other) is None, other


def test_trailing_json_whitespace_may_differ() -> None:
    """Servers pad frames with a varying number of spaces: any JSON whitespace after the
    value fits, anything else does not."""
    skeleton = learn("content_block_delta", delta('"Hi"') + "   ", TEXT)
    assert skeleton is not None
    for padding in ["", " ", " \t\r\n" * 5]:
        assert skeleton.match("content_block_delta", delta('"Yo"') + padding) == ()
    for padding in ["\x0c", "\u2028", " x", "\u00a0"]:
        frame = delta('"Yo"') + padding
        assert not parses(frame)
        assert skeleton.match("content_block_delta", frame) is None


def test_a_frame_without_its_last_brace_misses_though_padded() -> None:
    """Found by ``fuzz/fuzz_shape_cache.py``: a frame learned with spaces before its last
    brace, then one that lacks that brace and ends in spaces. The brace before the spaces
    must not be read as the tail's: the frame is not JSON and takes the full parse."""
    skeleton = learn("content_block_delta", delta('"Hi"')[:-1] + "   }", TEXT)
    assert skeleton is not None
    assert skeleton.match("content_block_delta", delta('"Yo"')[:-1] + "      }") == ()
    for frame in [delta('"Yo"')[:-1] + "       ", delta('"Yo"')[:-1]]:
        assert not parses(frame)
        assert skeleton.match("content_block_delta", frame) is None


def test_padding_before_the_last_brace_takes_json_whitespace_only() -> None:
    """The padding hole before a closing brace (Anthropic pads there) takes any run of
    JSON whitespace, none included, and nothing else."""
    skeleton = learn("content_block_delta", delta('"Hi"')[:-1] + "   }", TEXT)
    assert skeleton is not None
    for padding in ["", " ", "\t\r\n  "]:
        assert skeleton.match("content_block_delta", delta('"Yo"')[:-1] + padding + "}") == ()
    for padding in [" x ", ",", "\u00a0", "\x0c"]:
        frame = delta('"Yo"')[:-1] + padding + "}"
        assert not parses(frame)
        assert skeleton.match("content_block_delta", frame) is None


def test_a_value_hole_reads_a_plain_integer_only() -> None:
    """A value hole gives its text, and misses on anything but an integer of 18 digits."""
    frame = '{"type":"response.output_text.delta","sequence_number":%s,"delta":%s}'
    skeleton = learn(
        "response.output_text.delta",
        frame % ("7", '"a"'),
        frozenset({("delta",)}),
        (("sequence_number",),),
    )
    assert skeleton is not None
    assert skeleton.match("response.output_text.delta", frame % ("12", '"b"')) == ["12"]
    assert skeleton.match("response.output_text.delta", frame % ("-0", '"b"')) == ["-0"]
    for number in ["1.0", "1e2", "012", "9" * 19, '"12"', "null", "+1"]:
        assert skeleton.match("response.output_text.delta", frame % (number, '"b"')) is None


def test_value_holes_come_in_the_order_the_checker_listed() -> None:
    """A string value hole gives its JSON text; the values come as listed, not as met; a
    frame without a listed value path is not learned."""
    frame = '{"seq":%s,"id":%s,"text":"t"}'
    listed = (("id",), ("seq",))
    skeleton = learn("x", frame % ("1", '"a"'), frozenset({("text",)}), listed)
    assert skeleton is not None
    assert skeleton.match("x", frame % ("2", '"b\\n"')) == ['"b\\n"', "2"]
    assert skeleton.match("x", frame % ("2", "7")) is None  # a string hole stays a string
    assert learn("x", '{"seq":1,"text":"t"}', frozenset({("text",)}), listed) is None


def test_learning_refuses_what_it_cannot_hold() -> None:
    """No skeleton for a frame without a hole, too long, with a hole's path twice or an
    escaped key."""
    assert learn("x", '{"delta":{"text":null}}', TEXT) is None
    assert learn("x", delta('"' + "a" * MAX_SKELETON_CHARS + '"'), TEXT) is None
    assert learn("x", '{"delta":{"text":"a","text":"b"}}', TEXT) is None
    assert learn("x", '{"delta":{"te\\u0078t":"a"}}', TEXT) is None
    assert learn("x", '{"delta":{"text":"a"}', TEXT) is None


def _learned(cache: ShapeCache, number: int, framed: bool = True) -> str:
    """Teach ``cache`` the skeleton of a frame whose ``a`` is ``number`` (and how a chunk
    of it alone is framed, if ``framed``); that frame."""
    frame = f'{{"a":{number},"text":"x"}}'
    assert cache.find("x", frame) is None
    cache.consider("x", frame, Holes((("text",),)), number)
    if framed:
        cache.frame(_framed(frame), frame)
    return frame


def _framed(frame: str) -> bytes:
    return f"event: x\ndata: {frame}\n\n".encode()


def _tokens(cache: ShapeCache) -> list[object]:
    return [entry.token for entry in cache.entries]


def test_the_skeleton_that_fitted_last_is_tried_first() -> None:
    """A later skeleton that fits, as an event or as a whole chunk, goes before the ones
    learned earlier."""
    cache = ShapeCache()
    frames = [_learned(cache, number) for number in range(3)]
    assert _tokens(cache) == [0, 1, 2]
    found = cache.find("x", frames[1].replace('"x"', '"y"'))
    assert found is not None
    assert found[0] == 1
    assert _tokens(cache) == [1, 0, 2]
    fitted = cache.fit_frame(_framed(frames[2].replace('"x"', '"z"')))
    assert fitted is not None
    assert fitted.token == 2
    assert _tokens(cache) == [2, 1, 0]


def test_an_entry_not_framed_is_not_put_before_one_that_is() -> None:
    """``fit_frame`` stops at the first entry whose chunks it cannot read: an entry that
    fits an event but is not framed stays behind the framed ones."""
    cache = ShapeCache()
    _learned(cache, 0)
    unframed = _learned(cache, 1, framed=False)
    assert cache.find("x", unframed) is not None
    assert _tokens(cache) == [0, 1]


def test_a_full_cache_drops_the_skeleton_fitted_least_lately() -> None:
    """Learning past ``MAX_SKELETONS`` drops the entry fitted least lately, not the one
    learned first, every entry having fitted."""
    cache = ShapeCache()
    frames = [_learned(cache, number) for number in range(MAX_SKELETONS)]
    for frame in frames:
        assert cache.find("x", frame) is not None
    assert cache.find("x", frames[1]) is not None
    assert _tokens(cache) == [1, 3, 2, 0]
    _learned(cache, 99)
    assert _tokens(cache) == [1, 3, 2, 99]


def test_a_stream_that_never_repeats_learns_rarely() -> None:
    """Frames that never fit their predecessor's skeleton make learning back off: about
    2 log2(n) attempts for n frames, not n."""
    cache = ShapeCache()
    holes = Holes((("delta", "text"),))
    attempts = 0
    frames = 20_000
    for number in range(frames):
        frame = f'{{"id":{number},"delta":{{"text":"a"}}}}'  # a new id each time
        assert cache.find("x", frame) is None
        before = [entry.skeleton for entry in cache.entries]
        cache.consider("x", frame, holes, None)
        attempts += [entry.skeleton for entry in cache.entries] != before
    assert attempts <= MAX_SKELETONS + 2 * frames.bit_length()
    assert attempts >= MAX_SKELETONS  # it did learn, then backed off


# -- the engine ----------------------------------------------------------------------------


def sse(name: str, payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()


START = sse(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    },
)
END = sse(
    "message_delta",
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 9},
    },
) + sse("message_stop", {"type": "message_stop"})


def block_start(index: int) -> bytes:
    block = {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "text", "text": ""},
    }
    return sse("content_block_start", block)


def block_stop(index: int) -> bytes:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


def text(index: int, words: str) -> bytes:
    payload = {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": words},
    }
    return sse("content_block_delta", payload)


def both_ways(chunks: list[bytes], **options: Any) -> tuple[StreamReport, StreamReport]:
    try:
        cached = check_stream(chunks, **options)
        _skeleton.learning(False)
        full = check_stream(chunks, **options)
    finally:
        _skeleton.learning(True)
    return cached, full


def test_a_delta_for_a_closed_block_is_reported_though_its_bytes_repeat() -> None:
    """The same delta bytes after the block stopped take the full path: the stop forgot
    the skeleton."""
    same = text(0, "again")
    chunks = [START, block_start(0), same, same, same, block_stop(0), same, END]
    cached, full = both_ways(chunks, protocol="anthropic")
    assert [f.rule for f in cached.findings] == ["block_not_started"]
    assert cached.findings == full.findings


def test_the_cache_is_used_on_a_healthy_stream() -> None:
    """A long healthy stream's text deltas fit the skeleton (the test above is not
    vacuous): every delta after the first two is a hit."""
    from streamguard import StreamMonitor

    monitor = StreamMonitor("anthropic")
    monitor.feed(START + block_start(0))
    for number in range(50):
        monitor.feed(text(0, f"word {number} "))
    checker: Any = monitor._checker
    assert sum(entry.hits for entry in checker._shapes.entries) == 48
    monitor.feed(block_stop(0))
    assert checker._shapes.entries == []


def test_a_ping_keeps_the_text_skeleton_and_delays_no_learning() -> None:
    """Pings between text deltas forget nothing and hold back no later learning: every
    delta but the first two is a hit, and so is a new block's second delta."""
    from streamguard import StreamMonitor
    from streamguard.monitor import StreamEnd

    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    monitor = StreamMonitor("anthropic")
    monitor.feed(START + block_start(0))
    for number in range(30):
        monitor.feed(ping if number % 10 == 5 else text(0, f"word {number} "))
    checker: Any = monitor._checker
    assert checker._shapes.skipped == 25
    monitor.feed(block_stop(0) + block_start(1))
    for number in range(5):
        monitor.feed(text(1, f"word {number} "))
    assert checker._shapes.skipped == 29
    monitor.feed(block_stop(1) + END)
    assert monitor.finish(StreamEnd.BODY_ENDED).findings == ()


def test_a_stream_that_waits_after_its_first_delta_holds_no_skeleton() -> None:
    """The first vouched frame makes no cache, the second teaches, the third fits."""
    from streamguard import StreamMonitor

    monitor = StreamMonitor("anthropic")
    monitor.feed(START + block_start(0) + text(0, "first"))
    checker: Any = monitor._checker
    assert checker._shapes is None
    monitor.feed(text(0, "second"))
    assert len(checker._shapes.entries) == 1
    monitor.feed(text(0, "third"))
    assert checker._shapes.skipped == 1


def _resting_monitor(clock: list[float]) -> Any:
    from streamguard import StreamMonitor

    monitor = StreamMonitor("anthropic", clock=lambda: clock[0])
    monitor.feed(START + block_start(0))
    for number in range(5):
        monitor.feed(text(0, f"word {number} "))
    return monitor


def test_a_stream_silent_past_the_rest_time_drops_its_skeletons() -> None:
    """A poll after a second of silence drops the skeletons; the stream learns again when
    it goes on, and its report is the one a stream never polled gets."""
    from streamguard.monitor import REST_AFTER_S, StreamEnd

    clock = [100.0]
    monitor = _resting_monitor(clock)
    checker: Any = monitor._checker
    assert checker._shapes.skipped == 3
    clock[0] += REST_AFTER_S
    monitor.poll()
    assert checker._shapes.entries == []
    for number in range(5, 10):
        monitor.feed(text(0, f"word {number} "))
    assert checker._shapes.skipped == 7  # the next frame taught again, four more fit
    monitor.feed(block_stop(0) + END)
    rested = monitor.finish(StreamEnd.BODY_ENDED)
    body = START + block_start(0) + b"".join(text(0, f"word {n} ") for n in range(10))
    assert facts(rested) == facts(check_stream([body, block_stop(0) + END], protocol="anthropic"))


def test_a_skeleton_forgotten_unused_at_rest_backs_learning_off() -> None:
    """A stream whose frames come seconds apart learns, rests, and learns again rarely: a
    skeleton forgotten at rest with no hit backs learning off, as any other does."""
    from streamguard import StreamMonitor
    from streamguard.monitor import REST_AFTER_S

    clock = [100.0]
    monitor = StreamMonitor("anthropic", clock=lambda: clock[0])
    monitor.feed(START + block_start(0) + text(0, "one") + text(0, "two"))
    checker: Any = monitor._checker
    assert len(checker._shapes.entries) == 1
    clock[0] += REST_AFTER_S
    monitor.poll()
    assert (checker._shapes.entries, checker._shapes.wait) == ([], 1)


@pytest.mark.parametrize("by_frame", [False, True])
def test_a_rest_asked_while_a_chunk_is_taken_forgets_for_its_later_frames(
    by_frame: bool,
) -> None:
    """A poll from an ``on_event`` callback, in the middle of a chunk, empties the cache
    its later frames are fitted to: a delta for a stopped block is still reported."""
    from streamguard import StreamMonitor, monitor
    from streamguard.monitor import StreamEnd

    chunks = [START + block_start(0), text(0, "a"), text(0, "b"), text(0, "c")]
    chunks += [text(0, "d") + block_stop(0) + text(0, "e") + text(0, "f"), END]
    clock = [100.0]
    polled: list[Any] = []

    def on_event(event: Any, index: int) -> None:
        if index == 5 and polled:  # the first event of the chunk of four
            clock[0] += 2.0
            polled[0].poll()

    saved = monitor._BY_FRAME[0]
    monitor._BY_FRAME[0] = by_frame
    try:
        watched = StreamMonitor("anthropic", clock=lambda: clock[0], on_event=on_event)
        polled.append(watched)
        for chunk in chunks:
            watched.feed(chunk)
        report = watched.finish(StreamEnd.BODY_ENDED)
    finally:
        monitor._BY_FRAME[0] = saved
    expected = check_stream([b"".join(chunks)], protocol="anthropic")
    assert [f.rule for f in report.findings] == ["block_not_started"] * 2
    assert facts(report) == facts(expected)


def test_a_stream_polled_while_it_sends_keeps_its_skeletons() -> None:
    """A poll less than the rest time after the last bytes drops nothing."""
    from streamguard.monitor import REST_AFTER_S

    clock = [100.0]
    monitor = _resting_monitor(clock)
    checker: Any = monitor._checker
    shapes = checker._shapes
    clock[0] += REST_AFTER_S / 2
    monitor.poll()
    assert checker._shapes is shapes
    assert len(shapes.entries) == 1


# -- the differential run ----------------------------------------------------------------

#: Hostile texts written into a hole of a late frame (valid and not).
HOSTILE = [
    '"\\x41"',
    '"\\ud800"',
    '"\\ud83d\\ude00"',
    '"a\tb"',
    '"\\u00e9"',
    '"' + "long " * 3000 + '"',
    "null",
    "42",
    '{"nested":"x"}',
    '"\\\\"',
    '"\\/"',
    '"unterminated',
]


#: Where a text hole's string starts in the frames of the protocols that vouch.
TEXT_MARKS = (b'"text":"', b'"content":"', b'"delta":"', b'"arguments":"')


def with_text(frame: bytes, text: bytes) -> bytes | None:
    """``frame`` with the first string after a ``TEXT_MARKS`` key replaced by ``text`` (a
    JSON value's bytes, valid or not); None when it has none."""
    for mark in TEXT_MARKS:
        at = frame.find(mark)
        if at < 0:
            continue
        start = at + len(mark) - 1
        end = start + 1
        while end < len(frame) and frame[end : end + 1] != b'"':
            end += 2 if frame[end : end + 1] == b"\\" else 1
        if end >= len(frame):
            return None
        return frame[:start] + text + frame[end + 1 :]
    return None


SEQUENCE = re.compile(rb'"sequence_number":\s*\d+')


def stretched(body: bytes) -> bytes:
    """``body`` with each text frame followed by three more like it, other texts in
    them: the runs of look-alike frames the cache is for (fixtures are short)."""
    out: list[bytes] = []
    for frame in equivalence.frames(body):
        out.append(frame)
        if b"delta" not in frame.lower() and b"_CONTENT" not in frame and b'"parts"' not in frame:
            continue  # a block's or a part's start: not a delta (Gemini's chunks all are)
        for number in range(3):
            again = with_text(frame, b'" more %d"' % number)
            if again is not None:
                out.append(again)
    body = b"".join(out)
    if b'"sequence_number":' in body:  # Responses: number the copies on
        numbers = itertools.count()
        body = SEQUENCE.sub(lambda m: b'"sequence_number":%d' % next(numbers), body)
    return body


def hole_mutants(body: bytes, rng: random.Random) -> Iterator[bytes]:
    """``body`` with the text of one of its later text frames replaced by hostile ones."""
    frames = equivalence.frames(body)
    candidates = [i for i, frame in enumerate(frames) if with_text(frame, b'""') is not None]
    if len(candidates) < 3:
        return
    for hostile in rng.sample(HOSTILE, 4):
        target = rng.choice(candidates[2:])
        changed = with_text(frames[target], hostile.encode())
        if changed is not None:
            yield b"".join([*frames[:target], changed, *frames[target + 1 :]])


def facts(report: StreamReport) -> dict[str, Any]:
    """Everything a report says, messages included."""
    return {
        "protocol": report.protocol,
        "outcome": report.outcome,
        "events": report.events,
        "findings": [
            (f.rule, f.severity, f.event_index, f.byte_offset, f.message) for f in report.findings
        ],
        "dropped": report.findings_dropped,
        "skipped": report.skipped_checks,
        "internal_error": report.internal_error,
    }


#: The protocols whose checkers vouch for a kind of frame (``Checker.repeatable``).
VOUCHING = ("ag_ui", "anthropic", "ai_sdk_ui", "gemini", "openai_chat", "openai_responses")


def hits(protocol: str, body: bytes, request: Any = None) -> int:
    """How many frames of ``body`` skipped the parse."""
    from streamguard import StreamMonitor

    monitor = StreamMonitor(protocol, request=request)
    monitor.feed(body)
    checker: Any = monitor._checker
    shapes = checker._shapes
    return 0 if shapes is None else int(shapes.skipped)


@pytest.mark.parametrize("protocol", VOUCHING)
def test_the_stretched_fixtures_exercise_the_cache(protocol: str) -> None:
    """The differential run below is not vacuous: most stretched fixtures with a text
    frame skip the parse of some."""
    fixtures = [s for s in equivalence.streams(total=0) if s.protocol == protocol]
    longer = [(stretched(s.body), s.request) for s in fixtures if stretched(s.body) != s.body]
    assert len(longer) >= 10
    skipping = sum(hits(protocol, body, request) > 0 for body, request in longer)
    assert skipping >= len(longer) // 2, (skipping, len(longer))


def differences(streams: Iterator[equivalence.Stream], seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    for stream in streams:
        bodies = [stream.body]
        if stream.recipe == "fixture":
            longer = stretched(stream.body)
            bodies += [longer, *hole_mutants(longer, rng)]
        for body in bodies:
            variant = equivalence.Stream(
                stream.id, stream.protocol, body, stream.request, stream.options
            )
            _, chunks = equivalence.chunk(variant, seed)
            for mode in stream.modes:
                options = dict(stream.options, protocol=mode, request=stream.request)
                cached, full = both_ways(chunks, **options)
                if facts(cached) != facts(full):
                    yield f"{stream.id} ({mode}): {facts(cached)} != {facts(full)}"


def test_every_fixture_and_capture_gives_the_same_report_both_ways(by_frame: bool) -> None:
    """Every fixture and real-world capture, and hostile texts in their late frames."""
    streams = equivalence.streams(total=0)
    assert list(differences(streams, seed=1))[:5] == []


def stretched_corpus() -> equivalence.Corpus:
    """The equivalence corpus with every source stretched: its mutants then break runs
    of look-alike frames, where the cache is at work."""
    corpus = equivalence.Corpus()
    for name, group in corpus.groups.items():
        corpus.groups[name] = [replace(s, body=stretched(s.body)) for s in group]
    fixtures = [s for group in corpus.groups.values() for s in group if "@" not in s.id]
    corpus.partners = {
        name: fixtures if name == equivalence.AUTO else group
        for name, group in corpus.groups.items()
    }
    return corpus


@pytest.mark.slow
def test_a_hundred_thousand_mutants_give_the_same_report_both_ways() -> None:
    """Seeded mutants of every group's stretched sources (retyped values, dropped keys, cut
    frames, bad bytes...) give the same report with and without the cache."""
    streams = stretched_corpus().streams(total=100_000, seed=26)
    assert list(differences(streams, seed=26))[:5] == []


# -- frames that make the same finding again ------------------------------------------------

#: What a uniform mutation writes in place of a value (``None``: the key is dropped).
RETYPES: tuple[object, ...] = (None, "x", 7, [], {}, True)
_DROPPED = object()


def _paths(value: object, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            if len(prefix) < 3:
                yield from _paths(inner, (*prefix, key))


def _rewritten(payload: dict[str, Any], path: tuple[str, ...], new: object) -> bool:
    """``payload`` with the value at ``path`` dropped or replaced; False when it has none."""
    *parents, last = path
    target: Any = payload
    for key in parents:
        target = target.get(key) if isinstance(target, dict) else None
    if not isinstance(target, dict) or last not in target:
        return False
    if new is _DROPPED:
        del target[last]
    else:
        target[last] = new
    return True


def uniformly_broken(body: bytes, rng: random.Random) -> Iterator[bytes]:
    """``body`` with one key of its text frames dropped or retyped in every frame that has
    it, as a server that gets one field wrong does on every chunk: runs of frames that fail
    the shape check alike."""
    frames = equivalence.frames(body)
    texts = [f for f in frames if with_text(f, b'""') is not None and f.count(b"data:") == 1]
    if len(texts) < 3:
        return
    head, _, data = texts[-1].partition(b"data:")
    try:
        sample = json.loads(data)
    except ValueError:
        return
    paths = sorted(set(_paths(sample)))
    for path in rng.sample(paths, min(2, len(paths))):
        new = rng.choice([_DROPPED, *RETYPES])
        out: list[bytes] = []
        for frame in frames:
            head, mark, data = frame.partition(b"data:")
            payload: Any = None
            if mark and frame.count(b"data:") == 1:
                text = data.rstrip(b"\r\n")
                try:
                    payload = json.loads(text)
                except ValueError:
                    payload = None
            if isinstance(payload, dict) and _rewritten(payload, path, new):
                line = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
                frame = head + mark + b" " + line + data[len(data.rstrip(b"\r\n")) :]
            out.append(frame)
        yield b"".join(out)


def broken_streams() -> Iterator[equivalence.Stream]:
    """Every fixture of a vouching protocol, stretched, with one key broken throughout."""
    rng = random.Random(2026)
    for stream in equivalence.streams(total=0):
        if stream.protocol not in VOUCHING or "@" in stream.id:
            continue
        for number, body in enumerate(uniformly_broken(stretched(stream.body), rng)):
            yield replace(stream, id=f"{stream.id}~{number}", body=body)


def test_frames_broken_alike_give_the_same_report_both_ways() -> None:
    """A key dropped or retyped in every frame gives the same findings, messages, indices
    and offsets with the cache as without, under every chunking."""
    streams = list(broken_streams())
    assert len(streams) >= 150
    assert list(differences(iter(streams), seed=3))[:5] == []


def test_a_chunk_broken_alike_skips_the_parse_and_repeats_its_finding() -> None:
    """A chat stream whose every chunk lacks ``object`` fits the skeleton after its first
    broken text chunk, and each fitting chunk still gets its own ``schema_mismatch``."""
    from benchmarks.check_openai import REQUEST, openai_chat_frames

    frames = [
        f.replace(b'"object":"chat.completion.chunk",', b"") for f in openai_chat_frames()[:60]
    ]
    body = b"".join(frames)
    assert hits("openai_chat", body, REQUEST) >= 50
    cached, full = both_ways(frames, protocol="openai_chat", request=REQUEST)
    assert facts(cached) == facts(full)
    shape = [f.event_index for f in cached.findings if f.rule == "schema_mismatch"]
    assert shape == list(range(len(frames)))


def test_a_finding_reported_once_per_stream_is_not_made_again() -> None:
    """Chunks lacking ``object`` that start to be named ``event: delta`` mid-stream
    (``unexpected_event_field`` is reported once per stream): the first of them is checked
    in full, and the repeats make the shape finding only."""
    from benchmarks.check_openai import REQUEST, openai_chat_frames

    frames = [
        (b"event: delta\n" if number >= 10 else b"")
        + f.replace(b'"object":"chat.completion.chunk",', b"")
        for number, f in enumerate(openai_chat_frames()[:40])
    ]
    cached, full = both_ways(frames, protocol="openai_chat", request=REQUEST)
    assert facts(cached) == facts(full)
    once = [f.event_index for f in cached.findings if f.rule == "unexpected_event_field"]
    assert once == [10]
    assert hits("openai_chat", b"".join(frames), REQUEST) >= 30


class _Echo:
    """Builds a checker that reports ``rule`` on every frame and vouches that the finding
    comes again (a checker breaking the contract, to test the engine's own guard)."""

    @staticmethod
    def make(rule: Any) -> Any:
        from streamguard.protocols._base import Checker

        class Echo(Checker):
            name = "sse"
            has_terminal = False

            def check_event(self, event: Any, index: int) -> Any:
                found: list[Any] = []
                self.report(found, rule, event, index, ": again")
                self.repeatable(Holes((("text",),)), None, again=True)
                return found

        return Echo()


def _echoed(rule: Any) -> list[tuple[str, int | None, int | None, str]]:
    from streamguard.sse import Event

    checker = _Echo.make(rule)
    found = []
    for number in range(6):
        data = json.dumps({"text": f"piece {number}"})
        found += checker.on_event(Event("message", data, offset=100 * number), number)
    return [(f.rule, f.event_index, f.byte_offset, f.message) for f in found]


def test_a_repeated_finding_is_placed_on_its_own_frame() -> None:
    """A finding made again carries the repeated frame's index, offset and ``event N``."""
    from streamguard import rules

    assert _echoed(rules.SCHEMA_MISMATCH) == [
        ("schema_mismatch", n, 100 * n, f"event {n}: again") for n in range(6)
    ]


def test_the_engine_never_repeats_a_finding_reported_once_per_stream() -> None:
    """Even when a checker vouches that it comes again, a once-per-stream rule's finding is
    not cached: the frames after the first report nothing, as checked in full."""
    from streamguard import rules

    assert rules.UNEXPECTED_EVENT_FIELD.once_per_stream
    assert [event for _, event, _, _ in _echoed(rules.UNEXPECTED_EVENT_FIELD)] == [0]


def _tool_call_stream(fragments: list[str]) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        payload = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    head = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    return [
        chunk({"role": "assistant", "tool_calls": [{"index": 0, **head}]}),
        *(chunk({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in fragments),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


@pytest.mark.parametrize(
    ("fragments", "rules"),
    [
        (['{"city"', ': "Par', 'is", "n"', ": 1", "}"], []),
        (['{"city"', ': "Par', 'is", "n"', ": 1", "}}"], ["tool_call_arguments_invalid"]),
        (['{"city"', ': "Pa\\u00e9', '\\"', "", ' "}'], []),
    ],
)
def test_argument_fragments_skip_the_parse_and_are_kept(
    fragments: list[str], rules: list[str]
) -> None:
    """A tool call's argument fragments fit the skeleton of the first; each is still kept,
    so arguments that are not JSON at the finish are reported both ways."""
    chunks = _tool_call_stream(fragments)
    assert hits("openai_chat", b"".join(chunks)) >= len([f for f in fragments if f]) - 2
    cached, full = both_ways(chunks, protocol="openai_chat")
    assert facts(cached) == facts(full)
    assert [f.rule for f in cached.findings] == rules


def test_a_finding_that_names_a_longer_number_is_not_rebased() -> None:
    """A finding on event 1 whose message starts ``event 10`` (another event) is not a
    message ``event N`` prefixed: the engine must not make it ``event 20`` on event 2."""
    from streamguard import rules
    from streamguard.protocols._base import Checker
    from streamguard.sse import Event

    class Elsewhere(Checker):
        name = "sse"
        has_terminal = False

        def check_event(self, event: Any, index: int) -> Any:
            self.repeatable(Holes((("text",),)), None, again=True)
            return [rules.SCHEMA_MISMATCH.finding("event 10 is named", index, event.offset)]

    checker = Elsewhere()
    messages = []
    for number in range(1, 5):
        data = json.dumps({"text": f"piece {number}"})
        found = checker.on_event(Event("message", data, offset=100 * number), number)
        messages += [f.message for f in found]
    assert messages == ["event 10 is named"] * 4


def _gemini_chunk(text: str, candidates: int, finish: str | None = None) -> bytes:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 8, "candidatesTokenCount": candidates, "totalTokenCount": 9}
    payload = {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "g"}
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\r\n\r\n"


def test_a_gemini_counter_that_goes_down_is_reported_though_its_chunk_repeats() -> None:
    """Gemini's text chunks fit one skeleton, their usage counters read on each repeat: a
    counter that goes down is reported (once per stream) as in full, and the chunks after
    it fit again."""
    counts = [1, 2, 3, 4, 2, 5, 6, 1, 7, 8]
    chunks = [_gemini_chunk(f"piece {n}", count) for n, count in enumerate(counts)]
    chunks.append(_gemini_chunk("", 9, "STOP"))
    assert hits("gemini", b"".join(chunks)) >= 6
    cached, full = both_ways(chunks, protocol="gemini")
    assert facts(cached) == facts(full)
    assert [(f.rule, f.event_index) for f in cached.findings] == [("usage_decreased", 4)]


@pytest.mark.parametrize("lax", ['"1"', "1.0", "true"])
def test_a_gemini_counter_in_a_lax_form_is_read_on_every_chunk(lax: str) -> None:
    """A counter google-genai reads as 1 from ``"1"``, ``1.0`` or ``true`` is no plain
    number a hole reads, so its chunks are not learned: one that went down after a 5 is
    reported with the cache as without it."""

    def chunk(text: str, total: str) -> bytes:
        payload = f'{{"candidates":[{{"content":{{"parts":[{{"text":"{text}"}}]}}}}],'
        return f'data: {payload}"usageMetadata":{{"totalTokenCount":{total}}}}}\n\n'.encode()

    chunks = [chunk(text, lax) for text in "abc"] + [chunk("d", "5"), chunk("e", lax)]
    chunks.append(b'data: {"candidates":[{"finishReason":"STOP"}]}\n\n')
    cached, full = both_ways(chunks, protocol="gemini")
    assert facts(cached) == facts(full)
    assert [(f.rule, f.event_index) for f in cached.findings] == [("usage_decreased", 4)]


def _pydantic_chat(deltas: list[dict[str, Any]]) -> list[bytes]:
    """Chunks as a pydantic server writes them: every field, null ones included."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        payload = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return b"data: " + json.dumps({**payload, "choices": [choice]}).encode() + b"\n\n"

    return [
        *map(chunk, deltas),
        chunk({"role": None, "content": None}, "stop"),
        b"data: [DONE]\n\n",
    ]


def test_a_content_chunk_with_null_fields_skips_the_parse() -> None:
    """``{"role": null, "content": "..."}`` (FastAPI's ``model_dump_json``) is one more
    piece of text, and fits the skeleton like the bare ``{"content": "..."}``."""
    nulls = {"role": None, "refusal": None, "tool_calls": None, "function_call": None}
    deltas = [{"role": "assistant", "content": ""}] + [
        {**nulls, "content": f" t{n}"} for n in range(20)
    ]
    chunks = _pydantic_chat(deltas)
    assert hits("openai_chat", b"".join(chunks)) >= 18
    cached, full = both_ways(chunks, protocol="openai_chat")
    assert facts(cached) == facts(full)
    assert not cached.findings


@pytest.mark.parametrize(
    "other", [{"role": "assistant"}, {"refusal": "no"}, {"reasoning_content": None}]
)
def test_a_content_chunk_with_another_field_set_takes_the_full_path(other: Any) -> None:
    """A field beside the text that is set, or unknown, is not the plain chunk: a role sent
    again is reported on every chunk, both ways."""
    deltas = [{"role": "assistant", "content": ""}] + [
        {**other, "content": f" t{n}"} for n in range(6)
    ]
    chunks = _pydantic_chat(deltas)
    cached, full = both_ways(chunks, protocol="openai_chat")
    assert facts(cached) == facts(full)
    if "role" in other:
        assert [f.event_index for f in cached.findings if f.rule == "role_repeated"] == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]


# -- whole chunks: a chunk that is one fitting frame is not parsed (``fit_frame``) ----------


def _watch(chunks: list[bytes], learn: bool, **options: Any) -> tuple[Any, ...]:
    """The events a monitor dispatched, its report, and how many chunks it fitted whole."""
    from streamguard import StreamMonitor
    from streamguard.monitor import StreamEnd

    seen: list[tuple[int, int, Any]] = []  # (the chunk that completed it, index, event)
    fed: list[Any] = []  # each chunk's findings, as its feed returned them
    _skeleton.learning(learn)
    try:
        monitor = StreamMonitor(
            on_event=lambda event, index: seen.append((len(fed), index, event)),
            excerpt_chars=40,
            **options,
        )
        for chunk in chunks:
            fed.append(list(monitor.feed(chunk)))
        report = monitor.finish(StreamEnd.BODY_ENDED)
    finally:
        _skeleton.learning(True)
    shapes: Any = getattr(monitor._checker, "frame_cache", None)
    excerpts = [finding.excerpt for finding in report.findings]
    return (seen, fed), facts(report), excerpts, 0 if shapes is None else shapes.fitted


def _anthropic_run(frame: Any = text, words: int = 40) -> list[bytes]:
    return [START, block_start(0), *(frame(0, f" w{i}") for i in range(words)), block_stop(0), END]


def _reframed(chunks: list[bytes], old: bytes, new: bytes) -> list[bytes]:
    return [chunk.replace(old, new) for chunk in chunks]


def _chat_run(words: int = 40) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        payload = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [choice]}  # fmt: skip
        return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"

    deltas = [chunk({"role": "assistant", "content": ""})]
    deltas += [chunk({"content": f" w{i}"}) for i in range(words)]
    return [*deltas, chunk({}, "stop"), b"data: [DONE]\n\n"]


def _in_the_middle(chunks: list[bytes], odd: bytes) -> list[bytes]:
    middle = len(chunks) // 2
    return [*chunks[:middle], odd, *chunks[middle:]]


_ANTHROPIC = _anthropic_run()
_CHAT = _chat_run()
_ID_LINE = b"id: 7\nevent: content_block_delta\n"

#: Streams whose chunks are mostly one frame each, fitted whole, with look-alikes among
#: them that must be parsed: (name, protocol, chunks, whether some chunk is fitted).
WHOLE_CHUNKS: list[tuple[str, str, list[bytes], bool]] = [
    ("anthropic", "anthropic", _ANTHROPIC, True),
    ("chat", "openai_chat", _CHAT, True),
    ("no space after data:", "openai_chat", _reframed(_CHAT, b"data: ", b"data:"), True),
    ("CRLF", "anthropic", _reframed(_ANTHROPIC, b"\n", b"\r\n"), True),
    (
        "an id on every frame",
        "anthropic",
        _reframed(_ANTHROPIC, b"event: content_block_delta\n", _ID_LINE),
        False,
    ),
    ("a comment on every frame", "openai_chat", _reframed(_CHAT, b"data: ", b": c\ndata: "), False),
    ("an id, once", "anthropic", _in_the_middle(_ANTHROPIC, b"id: 9\n" + text(0, "a")), True),
    (
        "trailing spaces",
        "anthropic",
        _in_the_middle(_ANTHROPIC, text(0, "x")[:-2] + b" \n\n"),
        True,
    ),
    ("two frames in one chunk", "anthropic", _in_the_middle(_ANTHROPIC, text(0, "a") * 2), True),
    (
        "a frame cut in two",
        "anthropic",
        [*_ANTHROPIC[:20], text(0, "ab")[:30], text(0, "ab")[30:], *_ANTHROPIC[20:]],
        True,
    ),
    (
        "invalid UTF-8 in a text",
        "anthropic",
        _in_the_middle(_ANTHROPIC, text(0, "caf\u00e9").replace(b"\xc3\xa9", b"\xe9")),
        True,
    ),
    (
        "a raw control character in a text",
        "anthropic",
        _in_the_middle(_ANTHROPIC, text(0, "a").replace(b'"a"', b'"a\x01"')),
        True,
    ),
    (
        "a raw line ending in a text",
        "anthropic",
        _in_the_middle(_ANTHROPIC, text(0, "a").replace(b'"a"', b'"a\rb"')),
        True,
    ),
    (
        "escapes and a no-break space",
        "anthropic",
        _in_the_middle(_ANTHROPIC, text(0, 'a"\\\n\u00a0b\U0001f600')),
        True,
    ),
    (
        "a second way of framing",
        "openai_chat",
        [*_CHAT[:20], *_reframed(_CHAT[20:], b"data: ", b"event: message\ndata: ")],
        True,
    ),
    (
        "two spaces after data:",
        "openai_chat",
        _in_the_middle(_CHAT, _CHAT[5].replace(b"data: ", b"data:  ")),
        True,
    ),
    ("a line held unfinished", "anthropic", _in_the_middle(_ANTHROPIC, b": keep"), True),
    ("an id line held", "anthropic", _in_the_middle(_ANTHROPIC, b"id: 5\n"), True),
    (  # from a review: data that may start with padding, framed after "data:" alone
        "a tab after data:",
        "openai_chat",
        [_CHAT[0], _CHAT[1].replace(b"data: ", b"data:\t"), *_CHAT[2:]],
        True,
    ),
    ("a BOM", "openai_chat", [b"\xef\xbb\xbf" + _CHAT[0], *_CHAT[1:]], True),
    ("a ping", "anthropic", _in_the_middle(_ANTHROPIC, sse("ping", {"type": "ping"})), True),
    ("a frame cut off by the end", "anthropic", [*_ANTHROPIC[:20], text(0, "z")[:40]], True),
]


@pytest.mark.parametrize(
    ("protocol", "chunks", "fitted"),
    [case[1:] for case in WHOLE_CHUNKS],
    ids=[case[0] for case in WHOLE_CHUNKS],
)
def test_a_chunk_fitted_whole_is_dispatched_as_the_parser_would(
    protocol: str, chunks: list[bytes], fitted: bool, by_frame: bool
) -> None:
    """Each event (name, data, id, retry, offset), finding, excerpt and report is the same
    whether whole chunks are fitted or every chunk is parsed and checked in full."""
    seen, report, excerpts, count = _watch(chunks, True, protocol=protocol)
    assert (seen, report, excerpts) == _watch(chunks, False, protocol=protocol)[:3]
    assert (count > 0) is fitted, count


def _cut(chunks: list[bytes], size: int) -> list[bytes]:
    body = b"".join(chunks)
    return [body[start : start + size] for start in range(0, len(body), size)]


#: Cuttings of the same streams across frames: (name, chunk size).
CUTS = [("bytewise", 1), ("7 bytes", 7), ("97 bytes", 97), ("1000 bytes", 1000)]


@pytest.fixture(params=[True, False], ids=["by frame", "by chunk"])
def by_frame(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Both ways a learning monitor may take a chunk that is not one frame: a frame at a
    time (the compiled build's way) or parsed whole (the pure-Python build's)."""
    from streamguard import monitor

    saved = monitor._BY_FRAME[0]
    monitor._BY_FRAME[0] = request.param
    try:
        yield request.param
    finally:
        monitor._BY_FRAME[0] = saved


@pytest.mark.parametrize(("cut", "size"), CUTS, ids=[cut[0] for cut in CUTS])
@pytest.mark.parametrize(
    ("name", "protocol", "chunks"),
    [case[:3] for case in WHOLE_CHUNKS],
    ids=[case[0] for case in WHOLE_CHUNKS],
)
def test_frames_cut_across_chunks_are_dispatched_as_the_parser_would(
    name: str, protocol: str, chunks: list[bytes], cut: str, size: int, by_frame: bool
) -> None:
    """Cut anywhere, each event is dispatched by the same chunk, each chunk's feed returns
    the same findings, and the report is the same, whether frames are fitted or parsed."""
    chunks = _cut(chunks, size)
    seen, report, excerpts, count = _watch(chunks, True, protocol=protocol)
    assert (seen, report, excerpts) == _watch(chunks, False, protocol=protocol)[:3]
    if by_frame and name in ("anthropic", "chat", "no space after data:"):
        assert count > 0  # frames cut across chunks were fitted, not parsed


@given(st.binary(max_size=24).map(lambda b: bytes(b"\r\nx"[c % 3] for c in b)), st.booleans())
@example(b"\n\n", False)
@example(b"\r\n\r", True)
@example(b"x\r\n\r\n", True)
def test_a_frame_ends_after_the_first_blank_line(data: bytes, crlf: bool) -> None:
    """``_frame_end`` finds the first blank line of the framing's line ending, as a
    search for the whole ending does, from every start."""
    from streamguard.monitor import _frame_end

    ending = b"\r\n\r\n" if crlf else b"\n\n"
    for start in range(len(data) + 1):
        at = data.find(ending, start)
        assert _frame_end(data, start, crlf) == (at + len(ending) if at >= 0 else -1)


def _unfinished_frame_line_by_line(data: bytes, start: int) -> bool:
    """The reference: ``_unfinished_frame`` as first written, one search per line from
    ``start``."""
    if data.find(b"\r", start) >= 0:
        return False
    while (end := data.find(b"\n", start)) >= 0:
        if not data.startswith(b"data:", start):
            if not data.startswith(b"event:", start):
                return False
            try:
                data[start:end].decode()
            except UnicodeDecodeError:
                return False
        start = end + 1
    return True


_HELD_LINES = st.lists(st.sampled_from([b'data: {"a":', b"event: x", b"data:", b"event:"]))
_PIECES = [b"data:", b"event:", b" x", b"\n", b"\r", b"\xff", b"\xc3\xa9", b"id: 1"]


@given(_HELD_LINES, st.lists(st.sampled_from(_PIECES), max_size=8))
@example([], [b"data:", b" x"])
@example([b"event: x"], [b"\n"])  # a blank line after the held ones
@example([b"data:"], [b"event:", b"\xff", b"\n", b"data:"])
@example([], [b"\r"])
def test_a_held_frame_is_read_as_line_by_line(held: list[bytes], pieces: list[bytes]) -> None:
    """``_unfinished_frame`` decides as a search per line from ``start`` does, when the
    lines before ``start`` are ``data:`` or ``event:`` lines (as a held frame's are)."""
    from streamguard.monitor import _unfinished_frame

    head = b"".join(line + b"\n" for line in held)
    data = head + b"".join(pieces)
    start = len(head)
    assert _unfinished_frame(data, start) == _unfinished_frame_line_by_line(data, start)


def test_an_event_too_large_is_reported_though_its_chunk_fits() -> None:
    """A fitting chunk larger than ``max_event_bytes`` is read by the parser, which
    reports it and stops."""
    chunks = _in_the_middle(_anthropic_run(), text(0, "x" * 400))
    seen, report, excerpts, count = _watch(chunks, True, protocol="anthropic", max_event_bytes=300)
    assert count > 0
    assert (seen, report, excerpts) == _watch(
        chunks, False, protocol="anthropic", max_event_bytes=300
    )[:3]
    assert "event_too_large" in [finding[0] for finding in report["findings"]]


def test_a_frame_whose_findings_come_again_is_fitted_whole() -> None:
    """Chat chunks that each lack ``object`` are fitted whole and each still reported."""
    chunks = [chunk.replace(b'"object":"chat.completion.chunk",', b"") for chunk in _chat_run()]
    seen, report, excerpts, count = _watch(chunks, True, protocol="openai_chat")
    assert count >= 30
    assert (seen, report, excerpts) == _watch(chunks, False, protocol="openai_chat")[:3]
    mismatches = [f for f in report["findings"] if f[0] == "schema_mismatch"]
    assert len(mismatches) == len(chunks) - 1


def test_framing_refuses_what_the_parser_reads_otherwise() -> None:
    """Only a ``data:`` line, perhaps after an ``event:`` line of the skeleton's name, and
    one blank line, each line ending alike, frame a skeleton."""
    data = '{"type":"content_block_delta","delta":{"text":"a"}}'
    skeleton = learn("content_block_delta", data, TEXT)
    assert skeleton is not None
    good = f"event: content_block_delta\ndata: {data}\n\n".encode()
    assert _skeleton.framing(good, data, skeleton) is not None
    assert _skeleton.framing(good.replace(b"\n", b"\r\n"), data, skeleton) is not None
    for chunk in (
        good.replace(b"event: content_block_delta", b"event: ping"),  # another name
        good.replace(b"event:", b"id: 1\nevent:"),  # another line
        good.replace(b"data:", b": c\ndata:"),
        good.replace(b"\n\n", b"\r\n\r\n"),  # line endings that differ
        good.replace(b"\n", b"\r\n", 1),
        good.replace(b"\n\n", b"\r\n"),
        f"data: {data}\n\n".encode(),  # a message, not the skeleton's event
        good.replace(b"data: ", b"data: x"),  # not the value
    ):
        assert _skeleton.framing(chunk, data, skeleton) is None, chunk
    tabbed = learn("message", "\t" + data, TEXT)  # the first hole is padding: no first piece
    assert tabbed is not None
    assert _skeleton.framing(f"data:\t{data}\n\n".encode(), "\t" + data, tabbed) is None
    assert _skeleton.framing(f"data: \t{data}\n\n".encode(), "\t" + data, tabbed) is not None
    spaced = learn("message", " " + data, TEXT)
    assert spaced is not None
    assert _skeleton.framing(f"data: {' ' + data}\n\n".encode(), " " + data, spaced) is not None
    assert _skeleton.framing(f"data:{' ' + data}\n\n".encode(), " " + data, spaced) is None


def test_a_chunk_fits_the_entry_find_would_find_first() -> None:
    """Two skeletons that fit one frame (one space between tokens; a padding hole), framed
    two ways: a chunk framed the second way is parsed, since ``find`` would take the first
    skeleton, which a chunk framed so never fits whole."""
    cache = ShapeCache()
    holes = Holes((("text",),))
    spaced, padded = '{"a": 1, "text": "x"}', '{"a":  1, "text": "x"}'
    for data, chunk in (
        (spaced, f"data: {spaced}\n\n".encode()),
        (padded, f"event: message\ndata: {padded}\n\n".encode()),
    ):
        assert cache.find("message", data) is None
        cache.consider("message", data, holes, data)
        cache.frame(chunk, data)
    assert [entry.framed_head is not None for entry in cache.entries] == [True, False]
    chunk = f"event: message\ndata: {spaced}\n\n".encode()
    first = cache.find("message", spaced)
    assert first is not None
    assert first[0] == spaced
    fitted = cache.fit_frame(chunk)
    assert fitted is None or fitted.token == first[0]


@given(st.text(alphabet="-0123456789x,", max_size=24), st.integers(0, 3), st.integers(0, 24))
@example("0123", 0, 4)
@example("-", 0, 1)
@example("1234567890123456789", 0, 19)
def test_an_integer_hole_ends_where_its_pattern_does(data: str, position: int, cut: int) -> None:
    """The integer hole's scan ends exactly where ``_INTEGER`` would match (within the
    data, as ``match_holes`` calls it)."""
    cut = min(cut, len(data))
    position = min(position, cut)
    found = _skeleton._INTEGER.match(data, position, cut)
    assert _skeleton._integer_end(data, position, cut) == (-1 if found is None else found.end())


@given(st.text())
@example('a"b\\')
@example("\u2028\x7f")
def test_a_text_read_from_a_hole_is_the_parsed_string(text: str) -> None:
    """``json_string_text`` gives what the JSON parser reads from the string a hole took."""
    for encoded in (json.dumps(text), json.dumps(text, ensure_ascii=False)):
        assert _skeleton.json_string_text(encoded) == from_json(encoded)


@given(st.text(alphabet='ab"\\\x01\u00a0\u2028\ud800 ', max_size=16), st.integers(0, 16))
@example('"a\\"b"', 0)
@example('"a\x01"', 0)
@example('"\u00a0"', 0)
def test_a_string_hole_ends_where_its_pattern_does(data: str, cut: int) -> None:
    """The compiled build's scan for a text hole's end agrees with ``_STRING`` (the
    pure-Python build calls the pattern itself)."""
    cut = min(cut, len(data))
    found = _skeleton._STRING.match(data, 0, cut)
    assert _skeleton._string_end(data, 0, cut) == (-1 if found is None else found.end())


@given(
    st.sampled_from(["schema_mismatch", "x"]),
    st.sampled_from(list(Severity)),
    st.text(max_size=20),
    st.integers(0, 10**12),
    st.integers(0, 10**12),
)
def test_a_repeated_finding_is_the_finding_the_constructor_makes(
    rule: str, severity: Severity, message: str, index: int, offset: int
) -> None:
    """``repeated_finding`` (no dataclass ``__init__``) makes the same value as ``Finding``:
    equal, with the same hash, repr and fields, and still frozen."""
    made = repeated_finding(rule, severity, message, index, offset)
    expected = Finding(rule, severity, message, index, offset)
    assert (made, hash(made), repr(made)) == (expected, hash(expected), repr(expected))
    assert type(made) is Finding
    assert made.excerpt is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.rule = "y"  # type: ignore[misc]


# -- learning: all tokens in one call, as one at a time ----------------------------------

_ONE_TOKEN: re.Pattern[str] = re.compile(
    r"[ \t\n\r]*(?:"
    r'(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<word>true|false|null)"
    r"|(?P<mark>[{}\[\]:,]))",
    re.DOTALL,
)


def learn_a_token_at_a_time(
    name: str, data: str, text_holes: frozenset[Any], value_holes: tuple[Any, ...] = ()
) -> tuple[Any, ...] | None:
    """The reference: ``learn`` as it was written before it took its tokens in one call,
    one ``match`` per token; its skeleton as (name, pieces, kinds, order)."""
    if len(data) > MAX_SKELETON_CHARS:
        return None
    pieces: list[str] = []
    kinds: list[int] = []
    seen: set[Any] = set()
    read: list[Any] = []
    path: list[Any] = []
    objects: list[bool] = []
    expecting_key = False
    cut = position = 0
    while position < len(data):
        token = _ONE_TOKEN.match(data, position)
        if token is None:
            if data[position:].strip(" \t\n\r"):
                return None
            break
        start = token.start(token.lastgroup or 0)
        if start > position and data[position:start] != " ":
            if len(kinds) >= _skeleton.MAX_HOLES:
                return None
            pieces.append(data[cut:position])
            kinds.append(_skeleton._PADDING)
            cut = start
        position = token.end()
        mark = token.group("mark")
        if mark is not None:
            if mark in "{[":
                objects.append(mark == "{")
                path.append("" if mark == "{" else 0)
                expecting_key = mark == "{"
            elif mark in "}]":
                if not objects:
                    return None
                objects.pop()
                path.pop()
                expecting_key = False
            elif mark == ",":
                if not objects:
                    return None
                expecting_key = objects[-1]
                if not expecting_key:
                    path[-1] = path[-1] + 1 if isinstance(path[-1], int) else 0
            continue
        if expecting_key:
            key = token.group("string")
            if key is None or "\\" in key:
                return None
            path[-1] = key[1:-1]
            expecting_key = False
            continue
        here = tuple(path)
        if here in text_holes:
            group, pattern, kind = "string", _skeleton._STRING, _skeleton._TEXT
        elif here in value_holes and token.group("string") is not None:
            group, pattern, kind = "string", _skeleton._STRING, _skeleton._STRING_VALUE
        elif here in value_holes:
            group, pattern, kind = "number", _skeleton._INTEGER, _skeleton._INTEGER_VALUE
        else:
            continue
        text = token.group(group)
        if text is None or pattern.fullmatch(text) is None:
            continue
        if here in seen or len(kinds) >= _skeleton.MAX_HOLES:
            return None
        seen.add(here)
        pieces.append(data[cut : token.start(group)])
        kinds.append(kind)
        if kind != _skeleton._TEXT:
            read.append(here)
        cut = position
    if objects or len(kinds) == kinds.count(_skeleton._PADDING) or len(read) != len(value_holes):
        return None
    pieces.append(data[cut:].rstrip(" \t\n\r"))
    order = tuple(read.index(wanted) for wanted in value_holes)
    return name, tuple(pieces), tuple(kinds), order


_KEYS = st.sampled_from(["text", "seq", "id", "delta"] * 3 + ["t\\u0065xt", ""])
_SCALARS = st.one_of(
    st.text(alphabet="ab ", max_size=4).map(json.dumps),
    st.text(alphabet="ab ", max_size=4).map(json.dumps),
    st.integers(0, 99).map(str),
    st.text(alphabet='ab"\\\n\x01\u00e9\ud83d ', max_size=6).map(json.dumps),
    st.sampled_from(['"a\\"', '"\\u00e9"', '"\\ud83d\\ude00"', '"\\q"']),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["1.5", "-0", "1e5", "012", "true", "false", "null", "NaN"]),
)
_SPACES = st.sampled_from([""] * 6 + [" ", "  ", "\t", "\n", "\r\n "])


@st.composite
def _json_texts(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON text with varied whitespace, odd scalars (some no JSON parser takes) and keys
    escaped or repeated. At the top, mostly an object whose keys are mostly the holes'
    paths, with a nested ``delta`` object, so that most texts have a hole to learn."""
    if depth == 0:
        kind = draw(st.sampled_from([1] * 6 + [0, 2]))
    else:
        kind = 1 if depth < 2 else draw(st.sampled_from([0, 0, 0, 1, 2] if depth < 4 else [0]))
    if kind == 0:
        return str(draw(_SPACES) + draw(_SCALARS))
    count = draw(st.integers(1 if depth < 2 else 0, 2))
    items = [(draw(_KEYS), draw(_json_texts(depth + 2))) for _ in range(count)]
    if depth < 2 and draw(st.integers(0, 4)):  # mostly a text to take
        items.insert(draw(st.integers(0, len(items))), ("text", draw(_SCALARS)))
    if depth == 0:
        items.insert(draw(st.integers(0, len(items))), ("delta", draw(_json_texts(1))))
    if kind == 2:
        text = "[" + ",".join(value for _key, value in items) + draw(_SPACES) + "]"
    else:
        inner = ",".join(f'{draw(_SPACES)}"{k}"{draw(_SPACES)}:{v}' for k, v in items)
        text = "{" + inner + draw(_SPACES) + "}"
    return draw(_SPACES) + text


_PATHS = st.lists(
    st.sampled_from(
        [("text",), ("seq",), ("id",), ("delta", "text"), ("delta",), (0,), (0, "text"), ("",), ()]
    ),
    min_size=1,
    max_size=3,
)


@given(
    _json_texts(),
    _PATHS,
    st.one_of(st.just([]), _PATHS.map(lambda paths: paths[:1])),
    st.text(alphabet='@x ,}"\\\t\n\x0b\xa0', max_size=2),
    st.integers(0, 10**4),
)
@example('{"text":"a"} x', [("text",)], [], "", 0)
@example('{"text":@"a"}', [("text",)], [], "", 0)
@example('{"seq":1,"text":"a"}', [("text",)], [("seq",)], "", 0)
@example('[{"text":"a"},{"text":"b"}]', [(0, "text"), (1, "text")], [], "", 0)
@example('{"text":"a"}  ', [("text",)], [], "", 0)
@example('{"text":"a"}\t', [("text",)], [], "}", 12)
@example('{"text":"a"} 1', [("text",)], [], "", 0)  # (a second value: the parse refuses it)
@example('{"text":"a"}{"x":1}', [("text",)], [], "", 0)
@example('"a"', [()], [], "", 0)
@example('{"text":"a"' + ',\t"x":1' * 16 + "}", [("text",)], [], "", 0)  # MAX_HOLES
@example('{"text":"a\\', [("text",)], [], "", 0)
@example('{"text":"a\\"}', [("text",)], [], "", 0)
@example('{"text":"a\\\n"}', [("text",)], [], "", 0)
def test_learning_takes_its_tokens_in_one_call_as_one_at_a_time(
    data: str, text_paths: list[Any], value_paths: list[Any], stray: str, at: int
) -> None:
    """``learn`` makes the skeleton (or refuses) exactly as reading one token per call
    did, on any text, well formed or not."""
    at = min(at, len(data))
    data = data[:at] + stray + data[at:]
    text_holes, value_holes = frozenset(text_paths), tuple(dict.fromkeys(value_paths))
    skeleton = learn("x", data, text_holes, value_holes)
    made = (
        None
        if skeleton is None
        else (skeleton.name, skeleton.literals, skeleton.kinds, skeleton.order)
    )
    assert made == learn_a_token_at_a_time("x", data, text_holes, value_holes)


def test_an_unterminated_string_is_one_token_to_the_end() -> None:
    """A string with no closing quote is taken to the data's end as one token, so learning
    scans such a frame once, not again from each later quote; it is not learned."""
    data = '{"text":"a","x":"' + '\\"' * 2000 + "}"
    tokens = _skeleton._TOKENS.findall(data)
    assert len(tokens) == 8
    assert tokens[-1][-1] == data[16:]
    assert learn("x", data, frozenset({("text",)})) is None


# -- a fitted frame repeated without its event (``Checker.repeat_unread``) ------------------


def _repeat_reader(reads_event: bool) -> tuple[list[str], Any, int]:
    """A protocol whose checker vouches for every frame (its ``text`` a hole) and whose
    ``repeat_event`` keeps the data of the event it is handed, fed a framed stream without
    an ``on_event`` reader: the data it was handed, the report, the chunks fitted."""
    from streamguard import StreamMonitor
    from streamguard.monitor import StreamEnd
    from streamguard.protocols import ProtocolSpec, register, unregister
    from streamguard.protocols._base import Checker

    handed: list[str] = []

    class Reader(Checker):
        name = "repeat_reader"
        has_terminal = False
        REPEAT_READS_EVENT = reads_event

        def check_event(self, event: Any, index: int) -> Any:
            self.repeatable(Holes((("text",),)))
            return ()

        def repeat_event(self, event: Any, index: int, token: object, values: Any) -> Any:
            handed.append(event.data)
            return ()

    register(ProtocolSpec(name="repeat_reader", checker=Reader, summary="a test's"))
    try:
        monitor = StreamMonitor("repeat_reader")
        for number in range(12):
            monitor.feed(b'data: {"text": "piece %d"}\n\n' % number)
        report = monitor.finish(StreamEnd.BODY_ENDED)
    finally:
        unregister("repeat_reader")
    shapes: Any = monitor._checker.frame_cache  # type: ignore[union-attr]
    return handed, report, shapes.fitted


def test_a_checker_whose_repeat_reads_the_event_is_handed_it() -> None:
    """A checker that may read the event (a plugin's, by default) gets each fitted frame's
    own; one that says it reads none is handed the unread placeholder, its frames counted
    all the same: the events, bytes and offsets are the parser's."""
    handed, report, fitted = _repeat_reader(reads_event=True)
    assert fitted > 5
    assert handed == [f'{{"text": "piece {n}"}}' for n in range(12 - len(handed), 12)]
    unread, unread_report, unread_fitted = _repeat_reader(reads_event=False)
    assert unread_fitted == fitted
    assert unread == [""] * len(handed)
    sent = sum(len(b'data: {"text": "piece %d"}\n\n' % n) for n in range(12))
    assert (
        (unread_report.events, unread_report.bytes) == (report.events, report.bytes) == (12, sent)
    )
