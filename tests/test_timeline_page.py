"""The timeline page as a person reads it, asserted on the DOM headless Chromium builds:
the time axis, the lanes, the marks and groups, the findings table and its links, the
selected event's frame, several bands (a gateway's two sides), and hostile wire content
that stays text."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from streamguard import timeline
from streamguard.monitor import check_stream
from streamguard.timeline import Arrival, Stream, render_streams, timeline_of
from tests.chromium import Node, dump_dom, parse_dom

FIXTURES = Path(__file__).parent / "fixtures"


def _chunk(delta: str, finish: str = "null", extra: str = "") -> bytes:
    return (
        'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        f'"choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]{extra}}}\n\n'
    ).encode()


#: One chat stream with every shared kind: role, content, a tool call, finish, usage, the
#: terminal, and a comment between events.
CHAT = [
    Arrival(0.20, _chunk('{"role":"assistant","content":""}')),
    Arrival(0.35, _chunk('{"content":"Hel"}')),
    Arrival(0.40, b": keep-alive\n\n" + _chunk('{"content":"lo"}')),
    Arrival(
        0.90,
        _chunk(
            '{"tool_calls":[{"index":0,"id":"t","type":"function","function":'
            '{"name":"f","arguments":"{}"}}]}'
        ),
    ),
    Arrival(1.30, _chunk("{}", '"tool_calls"')),
    Arrival(
        1.31,
        b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n',
    ),
    Arrival(1.32, b"data: [DONE]\n\n"),
]


def _band(
    arrivals: list[Arrival],
    label: str = "stream",
    protocol: str = "openai_chat",
    timed: bool | None = None,
) -> Stream:
    report = check_stream(b"".join(a.data for a in arrivals), protocol=protocol)
    t = timeline_of(arrivals, report.protocol)
    return Stream(label, report, t.marks, timed=timed, blocks_left_out=t.blocks_left_out)


def _page(*bands: Stream, title: str = "a stream") -> str:
    return render_streams(list(bands), title=title)


def _dom(page: str, tmp_path: Path, fragment: str = "", script: str = "") -> Node:
    return parse_dom(dump_dom(page, tmp_path, fragment=fragment, script=script))


def _cx(node: Node) -> float:
    return float(node.attrs["cx"])


# -- the axis -------------------------------------------------------------------------------


def test_the_time_axis_has_ticks_with_units(tmp_path: Path) -> None:
    """A timed stream gets an axis of evenly spaced ticks labelled in ms or s, from 0."""
    dom = _dom(_page(_band(CHAT)), tmp_path)
    labels = [n.text for n in dom.find_all("text", "tick-label")]
    assert len(labels) >= 4
    assert all(re.fullmatch(r"\d+(\.\d+)? (ms|s)", label) for label in labels), labels
    assert labels[0] in ("0 ms", "0 s")
    ticks = [float(n.attrs["x1"]) for n in dom.find_all("line", "tick")]
    steps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) == len(labels)
    assert min(steps) > 0
    assert max(steps) - min(steps) < 0.5  # evenly spaced, to the drawing's rounding
    caption = dom.find_all("text", "axis-caption")[0].text
    assert "time since the request" in caption
    assert dom.by_id("layout-note-0") is None


def test_a_body_without_arrival_times_is_laid_out_by_index_and_says_so(tmp_path: Path) -> None:
    """Every event at 0 s (a plain body): marks one step apart in body order, index ticks,
    and a notice on the page, instead of every mark piled on the same spot."""
    untimed = [Arrival(0.0, b"".join(a.data for a in CHAT))]
    dom = _dom(_page(_band(untimed)), tmp_path)
    xs = [_cx(dom.by_id(f"event-{i}")) for i in range(7)]  # type: ignore[arg-type]
    assert xs == sorted(xs)
    assert len(set(xs)) == 7
    notice = dom.by_id("layout-note-0")
    assert notice is not None
    assert "no arrival times" in notice.text
    assert "laid out by index" in notice.text
    labels = [n.text for n in dom.find_all("text", "tick-label")]
    assert labels[0] == "#0"
    assert all(re.fullmatch(r"#\d+", label) for label in labels)
    assert "no arrival times" in dom.find_all("text", "axis-caption")[0].text


# -- lanes, sizes, first and terminal ---------------------------------------------------------


def _lane_of(dom: Node, mark: Node) -> str:
    lanes = {
        float(lane.find_all("line", "lane-line")[0].attrs["y1"]): lane.attrs["data-lane"]
        for lane in dom.find_all("g", "lane")
    }
    return lanes[float(mark.attrs["cy"])]


def test_events_sit_in_lanes_by_kind(tmp_path: Path) -> None:
    """Each shared kind has its lane, in a fixed order, and each event sits in its own."""
    dom = _dom(_page(_band(CHAT)), tmp_path)
    lanes = [lane.attrs["data-lane"] for lane in dom.find_all("g", "lane")]
    assert lanes == ["role", "content", "tool call", "finish", "usage", "terminal", "ping/comment"]
    assert [n.text for n in dom.find_all("text", "lane-label")] == lanes
    kinds = ["role", "content", "content", "tool call", "finish", "usage", "terminal"]
    for index, kind in enumerate(kinds):
        mark = dom.by_id(f"event-{index}")
        assert mark is not None, index
        assert _lane_of(dom, mark) == kind, index
    comment = dom.by_id("block-0")
    assert comment is not None
    assert _lane_of(dom, comment) == "ping/comment"


def test_a_protocol_gets_lanes_of_its_own_kinds(tmp_path: Path) -> None:
    """Anthropic's own event names become lanes beside the shared ones (its ping in the
    comments' lane); a plain SSE stream gets lanes from its event names; both bounded."""
    body = (FIXTURES / "realworld/anthropic/sdk_basic_text_with_ping.sse").read_bytes()
    (tmp_path / "a").mkdir()
    dom = _dom(_page(_band([Arrival(0.0, body)], protocol="anthropic")), tmp_path / "a")
    lanes = [lane.attrs["data-lane"] for lane in dom.find_all("g", "lane")]
    assert lanes[:3] == ["content", "finish", "terminal"]
    assert {"message_start", "content_block_start", "ping/comment"} <= set(lanes)
    names = b"".join(f"event: kind{i}\ndata: x\n\n".encode() for i in range(20))
    (tmp_path / "b").mkdir()
    dom = _dom(_page(_band([Arrival(0.0, names)], protocol="sse")), tmp_path / "b")
    lanes = [lane.attrs["data-lane"] for lane in dom.find_all("g", "lane")]
    assert lanes == [f"kind{i}" for i in range(timeline.MAX_OWN_LANES)] + ["other"]


def test_event_size_is_visible(tmp_path: Path) -> None:
    """A mark's radius grows with its frame's size, which its title and data-size give."""
    big = _chunk('{"content":"%s"}' % ("x" * 3000))
    arrivals = [
        Arrival(0.1, _chunk('{"content":"a"}')),
        Arrival(0.2, big),
        Arrival(0.3, b"data: [DONE]\n\n"),
    ]
    dom = _dom(_page(_band(arrivals)), tmp_path)
    small, large = dom.by_id("event-0"), dom.by_id("event-1")
    assert small is not None
    assert large is not None
    assert large.attrs["data-size"] == str(len(big))
    assert float(large.attrs["r"]) > float(small.attrs["r"]) + 2
    assert f"{len(big)} bytes" in large.text


def test_the_first_event_and_the_terminal_are_marked(tmp_path: Path) -> None:
    dom = _dom(_page(_band(CHAT)), tmp_path)
    first, terminal = dom.by_id("event-0"), dom.by_id("event-6")
    assert first is not None
    assert "first-event" in first.classes
    assert terminal is not None
    assert "terminal" in terminal.classes
    assert [n.text for n in dom.find_all("text", "mark-label")] == ["first", "terminal"]
    assert all("first-event" not in n.classes for n in dom.find_all("circle")[1:] if n is not first)


def test_close_events_are_one_group_with_a_count(tmp_path: Path) -> None:
    """Forty content events a millisecond apart in a ten-second stream are one group mark
    with its count, not forty marks on top of one another; every event is drawn once."""
    burst = [Arrival(5.0 + i / 1000, _chunk('{"content":"t"}')) for i in range(40)]
    arrivals = [
        Arrival(0.1, _chunk('{"role":"assistant"}')),
        *burst,
        Arrival(10.0, b"data: [DONE]\n\n"),
    ]
    dom = _dom(_page(_band(arrivals)), tmp_path)
    (group,) = dom.find_all("g", "mark-group")
    assert group.attrs["data-count"] == "40"
    assert group.find_all("text", "count")[0].text == "40"
    assert group.attrs["data-keys"].split() == [f"event-{i}" for i in range(1, 41)]
    singles = [n.attrs["id"] for n in dom.find_all("circle", "mark-event")]
    assert sorted(singles) == ["event-0", "event-41"]


# -- the findings table and the selected event ---------------------------------------------


#: A stream whose event 1 has a finding, with a comment after it and an unfinished end.
FLAGGED = [
    Arrival(0.1, _chunk('{"role":"assistant","content":"hi"}')),
    Arrival(0.2, b'data: {"not": "a chunk"}\n\n: ping\n\n'),
    Arrival(0.3, _chunk("{}", '"stop"')),
    Arrival(0.4, b"data: [DONE]\n\ndata: cut"),
]


def test_the_findings_table_has_headers_and_links_each_row_to_its_event(
    tmp_path: Path,
) -> None:
    page = _page(_band(FLAGGED))
    dom = _dom(page, tmp_path)
    table = dom.by_id("findings-0")
    assert table is not None
    assert [th.text for th in table.find_all("th")] == ["severity", "rule", "event", "message"]
    rows = table.find_all("tr", "finding")
    assert rows
    for row in rows:
        (link,) = row.find_all("a")
        assert link.attrs["href"] == f"#{row.attrs['data-key']}"
        assert link.text == row.attrs["data-key"].replace("-", " ")
    assert any(row.attrs["data-key"] == "event-1" for row in rows)


def test_selecting_a_finding_selects_its_event(tmp_path: Path) -> None:
    """A click on a row's event link (as a person clicks) selects that mark and shows its
    frame and what it is."""
    click = 'document.querySelector("#findings-0 tr.finding[data-key=\\"event-1\\"] a").click();'
    dom = _dom(_page(_band(FLAGGED)), tmp_path, script=click)
    mark = dom.by_id("event-1")
    assert mark is not None
    assert "selected" in mark.classes
    assert [n.attrs["id"] for n in dom.iter() if "selected" in n.classes] == ["event-1"]
    selected = dom.by_id("selected")
    assert selected is not None
    assert selected.text.startswith("Event 1: ")
    frame = dom.by_id("frame")
    assert frame is not None
    assert frame.text == 'data: {"not": "a chunk"}\n\n'


def test_the_selected_frame_is_that_event_s_bytes_only(tmp_path: Path) -> None:
    """The comment after event 1 and the unfinished end after the terminal are not part of
    the frames before them: each is a mark of its own, and the unfinished end is what the
    unterminated_frame finding links to."""
    band = _band(FLAGGED)
    for fragment, frame, what in [
        ("event-1", 'data: {"not": "a chunk"}\n\n', "Event 1: "),
        ("event-3", "data: [DONE]\n\n", "Event 3: terminal, 14 bytes, at 400 ms"),
        ("block-0", ": ping\n\n", "Block 0: a comment block (a ping)"),
        ("event-4", "data: cut", "Event 4: the body's unfinished end"),
    ]:
        directory = tmp_path / fragment
        directory.mkdir()
        dom = _dom(_page(band), directory, fragment=fragment)
        assert dom.by_id("frame").text == frame, fragment  # type: ignore[union-attr]
        assert dom.by_id("selected").text.startswith(what), fragment  # type: ignore[union-attr]
        assert "selected" in dom.by_id(fragment).classes  # type: ignore[union-attr]
    rules = {f.rule: f.event_index for f in band.report.findings}
    assert rules["unterminated_frame"] == 4


def test_the_selected_view_says_what_the_event_is(tmp_path: Path) -> None:
    dom = _dom(_page(_band(CHAT)), tmp_path, fragment="event-3")
    text = dom.by_id("selected").text  # type: ignore[union-attr]
    assert re.fullmatch(r"Event 3: tool call, \d+ bytes, at 900 ms\.", text), text


# -- several bands ---------------------------------------------------------------------------


def test_two_streams_are_two_bands_on_one_time_axis(tmp_path: Path) -> None:
    """A gateway's two sides: each a band with its lanes, both on the same scale (the same
    second is at the same x), each selectable by its own fragment."""
    upstream = [Arrival(a.at - 0.1, a.data) for a in CHAT]
    page = _page(_band(CHAT, "downstream"), _band(upstream, "upstream"), title="gateway")
    dom = _dom(page, tmp_path, fragment="b1-event-2")
    bands = dom.find_all("g", "band")
    assert [b.attrs["id"] for b in bands] == ["band-0", "band-1"]
    assert bands[0].find_all("text", "band-label")[0].text.startswith("downstream")
    assert bands[1].find_all("text", "band-label")[0].text.startswith("upstream")
    ticks = [
        [(n.text, n.attrs["x"]) for n in band.find_all("text", "tick-label")] for band in bands
    ]
    assert ticks[0] == ticks[1]
    down, up = dom.by_id("event-2"), dom.by_id("b1-event-2")
    assert down is not None
    assert up is not None
    assert _cx(up) < _cx(down)  # the upstream chunk arrived 100 ms earlier
    assert "selected" in up.classes
    assert "selected" not in down.classes
    assert dom.by_id("selected").text.startswith("upstream: Event 2: ")  # type: ignore[union-attr]
    assert dom.by_id("findings-1") is not None


def test_a_band_without_times_says_so_beside_a_timed_one(tmp_path: Path) -> None:
    untimed = [Arrival(0.0, b"".join(a.data for a in CHAT))]
    page = _page(_band(CHAT, "downstream"), _band(untimed, "upstream"))
    dom = _dom(page, tmp_path)
    assert dom.by_id("layout-note-0") is None
    note = dom.by_id("layout-note-1")
    assert note is not None
    assert note.text.startswith("upstream: this capture has no arrival")
    captions = [n.text for n in dom.find_all("text", "axis-caption")]
    assert "time since the request" in captions[0]
    assert "no arrival times" in captions[1]


# -- hostile content ----------------------------------------------------------------------------

HOSTILE_NAME = "<img src=x onerror=\"document.title='owned'\">"
HOSTILE = [
    Arrival(0.1, f"event: {HOSTILE_NAME}\ndata: x\n\n".encode()),
    Arrival(0.2, b'data: {"type": "</script><script>document.title=\'owned\'</script>"}\n\n'),
    Arrival(0.3, b": <img src=x onerror=\"document.title='owned'\">\n\n"),
    Arrival(0.4, b"data: </script><svg onload=\"document.title='owned'\"></svg>\n\n"),
]


def test_hostile_wire_content_in_lanes_titles_and_frames_stays_text(tmp_path: Path) -> None:
    """Event names and types become lane labels and titles, frames are shown: all of it
    is text in the DOM; no element it spells exists and no script it holds ran."""
    band = _band(HOSTILE, label="<b>label</b>", protocol="sse")
    page = _page(band, title="<i>title</i>")
    for fragment in ("event-0", "event-1", "block-0", "event-2"):
        directory = tmp_path / fragment
        directory.mkdir()
        dom = _dom(page, directory, fragment=fragment)
        assert dom.find_all("img") == []
        assert dom.find_all("i") == []
        assert [n for n in dom.find_all("svg") if n.attrs.get("onload")] == []
        assert dom.find_all("b")
        assert all(n.text != "label" for n in dom.find_all("b"))
        assert dom.find_all("title")[0].text == "streamguard: <i>title</i>"
        assert "owned" not in dom.find_all("title")[0].text
        assert dom.by_id("frame").text  # type: ignore[union-attr]
    lanes = [n.text for n in dom.find_all("text", "lane-label")]
    assert HOSTILE_NAME[: timeline._KIND_CHARS - 1] + "…" in lanes
    hostile_type = "</script><script>document.title='owned'</script>"
    assert hostile_type[: timeline._KIND_CHARS - 1] + "…" in lanes
    assert dom.by_id("frame").text == (  # type: ignore[union-attr]
        "data: </script><svg onload=\"document.title='owned'\"></svg>\n\n"
    )


def test_the_page_data_is_json_that_cannot_close_its_script() -> None:
    page = _page(_band(HOSTILE, protocol="sse"))
    data = page.split('id="streamguard-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data
    items = json.loads(data)["bands"][0]["items"]
    assert "</script>" in items["event-2"]["frame"]


# -- bounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["x" * 200, "é" * 40])
def test_own_kind_names_are_cut(kind: str) -> None:
    marks = timeline_of([Arrival(0.0, f"event: {kind}\ndata: 1\n\n".encode())], "sse").marks
    assert len(marks[0].kind) == timeline._KIND_CHARS
    assert marks[0].kind.endswith("…")


def test_blocks_between_events_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body of comments alone cannot make more marks than MAX_TIMELINE_EVENTS."""
    monkeypatch.setattr(timeline, "MAX_TIMELINE_EVENTS", 10)
    t = timeline_of([Arrival(0.0, b": ping\n\n" * 25 + b"data: x\n\n")], "sse")
    assert sum(not m.event for m in t.marks) == 10
    assert t.blocks_left_out == 15
    assert [m.index for m in t.marks if m.event] == [0]


def test_chunk_times_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_TIMELINE_CHUNKS arrival times the page stops reading, at an event's start."""
    monkeypatch.setattr(timeline, "MAX_TIMELINE_CHUNKS", 5)
    arrivals = [Arrival(i / 10, b"data: %d\n\n" % i) for i in range(9)]
    t = timeline_of(arrivals, "sse")
    assert not t.complete
    assert [m.index for m in t.marks] == [0, 1, 2, 3, 4]
    assert t.covered_bytes == sum(len(a.data) for a in arrivals[:5])


def test_a_sampled_page_keeps_the_first_event_and_the_terminal() -> None:
    """Past MAX_MARKS marks an even sample is drawn, but never without the first event
    and the terminal (here a comment comes first and the terminal last, where an even
    sample skips them)."""
    chunk = _chunk('{"content":"t"}')
    arrivals = [
        Arrival(0.01, b": hello\n\n"),
        *(Arrival(0.02 + i / 10_000, chunk) for i in range(timeline.MAX_MARKS * 2)),
        Arrival(5.0, b"data: [DONE]\n\n"),
    ]
    page = _page(_band(arrivals))
    assert re.search(r'<circle id="event-0" class="mark-event first-event"', page)
    last = timeline.MAX_MARKS * 2
    assert re.search(rf'<circle id="event-{last}" class="mark-event[a-z ]* terminal"', page)


def _fixture_bodies() -> list[tuple[str, Path]]:
    return [
        (path.parent.name, path)
        for path in sorted(FIXTURES.glob("*/*.sse"))
        if path.parent.name != "realworld"
    ]


@pytest.mark.parametrize(("protocol", "path"), _fixture_bodies(), ids=lambda v: str(v)[-40:])
def test_every_fixture_is_drawn_one_mark_per_event(protocol: str, path: Path) -> None:
    """Every protocol fixture renders: each event the report counts is one mark, in a
    lane of its kind, with at most MAX_OWN_LANES lanes of the protocol's own."""
    body = path.read_bytes()
    band = _band([Arrival(0.0, body)], protocol=protocol)
    events = [m for m in band.marks if m.event and m.kind != timeline.UNFINISHED]
    assert [m.index for m in events] == list(range(band.report.events))
    shared = {*timeline._SHARED_LANES, *timeline._LAST_LANES}
    assert len({m.kind for m in band.marks} - shared) <= timeline.MAX_OWN_LANES
    page = _page(band)
    assert page.count('class="lane"') == len({m.kind for m in band.marks})


def test_kinds_of_jsonrpc_results_and_langgraph_namespaces() -> None:
    """An A2A result is named by its own kind; LangGraph's subgraph namespaces share
    their stream mode's lane."""
    a2a = b'data: {"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t"}}\n\n'
    graph = b"event: values|tools:1234\ndata: {}\n\nevent: values|tools:5678\ndata: {}\n\n"
    assert [m.kind for m in timeline_of([Arrival(0.0, a2a)], "sse").marks] == ["artifact-update"]
    assert [m.kind for m in timeline_of([Arrival(0.0, graph)], "langgraph").marks] == [
        "values",
        "values",
    ]
