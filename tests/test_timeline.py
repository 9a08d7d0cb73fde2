"""The HTML timeline: captures with arrival times, marks, and the page in headless Chromium."""

from __future__ import annotations

import io
import os
import re
import shutil
from pathlib import Path

import pytest

from streamguard import timeline
from streamguard.monitor import check_stream
from streamguard.timeline import Arrival, marks_from_arrivals, read_capture, render_html
from tests.chromium import chromium, run_chromium

HOSTILE = b"data: </script><script>document.title='owned'</script>\n\n"
CHUNKS = [
    Arrival(0.05, b'data: {"a":1}\n\n'),
    Arrival(0.10, b'data: {"a":2}\n\n' + HOSTILE),
    Arrival(2.50, b"data: [DONE]\n\n"),
    Arrival(2.60, b"data: late\n\n"),
]
BODY = b"".join(arrival.data for arrival in CHUNKS)


def _page(arrivals: list[Arrival] = CHUNKS) -> str:
    report = check_stream(b"".join(a.data for a in arrivals), protocol="openai_chat")
    return render_html(report, marks_from_arrivals(arrivals), title="a <test> stream")


def test_a_capture_round_trips() -> None:
    """write_capture then read_capture gives back the header and every chunk exactly."""
    out = io.StringIO()
    timeline.write_capture(out, {"url": "http://127.0.0.1/x", "status": 200}, CHUNKS)
    capture = read_capture(out.getvalue().splitlines())
    assert capture.header["url"] == "http://127.0.0.1/x"
    assert capture.header["format"] == timeline.CAPTURE_FORMAT
    assert capture.arrivals == tuple(CHUNKS)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "the capture is empty"),
        ("{not json\n", "line 1: the capture header is not JSON"),
        ('{"format": "other"}\n', "line 1: not a capture header"),
        (f'{{"format": "{timeline.CAPTURE_FORMAT}"}}\n{{"at": 1}}\n', "line 2: not a chunk"),
        (f'{{"format": "{timeline.CAPTURE_FORMAT}"}}\n{{"at": 1, "b64": "!"}}\n', "line 2"),
    ],
)
def test_a_bad_capture_says_which_line(text: str, error: str) -> None:
    """A capture that is not one is refused with the line and the reason."""
    with pytest.raises(ValueError, match=re.escape(error)):
        read_capture(text.splitlines())


def test_each_event_is_marked_when_the_chunk_that_completed_it_arrived() -> None:
    """Events complete on chunks: two in one chunk share its time; frames are exact bytes."""
    marks = marks_from_arrivals(CHUNKS)
    assert [(m.index, m.at, m.offset) for m in marks] == [
        (0, 0.05, 0),
        (1, 0.10, 15),
        (2, 0.10, 30),
        (3, 2.50, 30 + len(HOSTILE)),
        (4, 2.60, 44 + len(HOSTILE)),
    ]
    assert b"".join(m.frame for m in marks) == BODY


def test_an_event_split_across_chunks_arrives_with_its_last_byte() -> None:
    """A frame cut in two is marked at the second chunk's time."""
    marks = marks_from_arrivals([Arrival(0.0, b"data: {"), Arrival(1.5, b'"a":1}\n\n')])
    assert [(m.index, m.at, m.frame) for m in marks] == [(0, 1.5, b'data: {"a":1}\n\n')]


def test_frames_are_cut_at_the_bound() -> None:
    """A huge frame is shown only up to MAX_FRAME_BYTES."""
    big = b"data: " + b"x" * (timeline.MAX_FRAME_BYTES * 3) + b"\n\n"
    (mark,) = marks_from_arrivals([Arrival(0.0, big)])
    assert len(mark.frame) == timeline.MAX_FRAME_BYTES


def test_the_stream_is_data_never_markup() -> None:
    """A frame that tries to close the script element stays escaped data in the page."""
    page = _page()
    assert "<script>document.title" not in page
    assert "\\u003c/script>\\u003cscript>" in page
    assert "<title>streamguard: a &lt;test&gt; stream</title>" in page


def test_marks_findings_gaps_and_end_are_drawn() -> None:
    """Every event is a mark, the flagged one by severity, the 2.4 s gap labelled, the end shown."""
    page = _page()
    assert len(re.findall(r'<circle id="event-\d+"', page)) == 5
    assert re.search(r'<circle id="event-4" class="mark-event error"', page)
    assert "2.40 s gap" in page
    assert "end: completed" in page
    assert "event_after_terminal" in page


def test_marks_are_bounded_and_flagged_events_always_drawn() -> None:
    """Past MAX_MARKS events a sample is drawn, every event with a finding among them."""
    ticks = [Arrival(i / 1000, b'data: {"a":1}\n\n') for i in range(timeline.MAX_MARKS * 2)]
    page = _page([*ticks, Arrival(99.0, b"data: [DONE]\n\n"), Arrival(99.5, b"data: x\n\n")])
    drawn = re.findall(r'<circle id="event-(\d+)"', page)
    assert len(drawn) <= timeline.MAX_MARKS
    assert str(timeline.MAX_MARKS * 2 + 1) in drawn  # the event after [DONE]
    assert "events without findings not drawn" in page


def test_the_page_in_headless_chromium(tmp_path: Path) -> None:
    """Chromium runs the page: opening #event-2 selects that mark and shows its frame."""
    chromium()  # skips without one, fails under STREAMGUARD_REQUIRE_CHROMIUM
    page = tmp_path / "timeline.html"
    page.write_text(_page(), encoding="utf-8")
    url = page.as_uri() + "#event-2"
    dom = run_chromium(tmp_path / "profile", "--dump-dom", url).stdout
    assert re.search(r'id="event-2" class="mark-event[a-z ]* selected"', dom)
    assert "Event 2:" in dom
    # The hostile frame is shown as text in the <pre>, and it ran nothing.
    assert "&lt;/script&gt;&lt;script&gt;document.title='owned'" in dom
    assert "<title>streamguard: a &lt;test&gt; stream</title>" in dom
    shot = tmp_path / "timeline.png"
    run_chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,700", url)
    assert shot.stat().st_size > 1000
    kept = os.environ.get("STREAMGUARD_TEST_ARTIFACTS")
    if kept:  # CI keeps the screenshot with the test output
        shutil.copy(shot, Path(kept) / "timeline.png")


def test_gap_labels_are_bounded() -> None:
    """A stream that pauses between every event gets at most MAX_GAPS gap labels."""
    burst = b'data: {"a":1}\n\n' * 3  # three events per chunk: the median gap is 0
    paused = [Arrival(i * 1.0, burst) for i in range(timeline.MAX_GAPS * 2)]
    page = _page(paused)
    assert page.count('class="gap"') == timeline.MAX_GAPS
