"""An incremental, sans-I/O parser for the WHATWG "event stream" format.

Theory of operation
-------------------

``EventParser.feed`` takes body bytes exactly as the app sends them and returns the events
that became complete, following the "event stream interpretation" algorithm of the HTML
standard (§9.2.6) to the letter. Chunk boundaries carry no meaning: the same bytes give the
same events, findings and offsets however they are cut.

The parser works on bytes and holds only what it must:

* ``_partial`` — the current unfinished *line* (no line ending in it yet), in one
  ``bytearray``, so a line sent a few bytes at a time costs its length and no more;
* the fields of the current unfinished *event*: its ``data`` lines, its type;

(the line and the data lines exist only while there are some, or once a chunk took the
general path: a stream whose chunks are whole events, idle or not, holds neither);
* ``_last_id`` and ``_retry``, which persist across events as the spec says.

Memory is bounded by ``max_event_bytes`` whatever the chunks hold: between calls the parser
holds about that much at most (the unfinished line, the event's data) plus the last event
ID. An event's data lines are kept as separate ``bytes`` only while they are few: past
``_MAX_HELD_DATA_LINES`` they are joined into one ``bytearray`` (amortised O(1) per line),
since a ``bytes`` object per two-byte value costs twenty times the value. A chunk longer
than ``_WINDOW`` is interpreted one window of whole lines at a time, so the line objects a
call makes stay bounded too. The common one-line event never reaches either. Within a call,
a line as long as the limit is copied a few times on its way to becoming the event's text.

A chunk is searched for line endings with ``bytes.find``-class C calls; only whole lines
reach the Python loop, and a data value is decoded from UTF-8 once, when its event is
dispatched. Three things need care at chunk boundaries:

* a CR that ends one chunk may be the first half of a CRLF. It ends the line at once, and
  an LF at the very start of the next chunk is then skipped (``_skip_lf``);
* a UTF-8 byte-order mark is stripped only at the very start of the stream, so the first
  bytes are held until three have arrived or they can no longer be a BOM;
* the size limit is measured from the start of the event to the end of the current line's
  content (line endings of earlier lines included), so a split CRLF cannot change it.

Problems with the bytes themselves (invalid UTF-8, an event past ``max_event_bytes``, an
unfinished event when the input ends) become ``Finding``s. Like the events, they are only
ever return values, as an httpx decoder's output is, but apart: ``feed`` returns the
events a chunk completed, ``take_findings`` the findings made meanwhile (each with the
index of the event it was found in, so a caller that wants one stream order sorts by it),
and ``close`` returns the last findings with the event left unfinished, if any. A finding
waits in the parser until taken; the parser makes each kind once per stream, except
unknown field names (up to eight) and ``event_without_data`` (one for each such block: as
many as a chunk holds, which a caller taking them after each feed bounds; the monitor caps
what it keeps). Nothing outside the parser writes its state;
``inspecting`` and ``events_dispatched`` are read-only. Past the size limit the parser
stops inspecting and ignores what follows, so memory stays bounded whatever arrives. A
finding's message gives offsets and sizes only: a field name is shown as
``_wire.describe`` shows any wire value.

Invalid UTF-8 follows one rule, whatever the cutting: clients decode the whole stream before
they parse it, so every complete line must be UTF-8, kept or not (an ``event:`` line a later
one overrides, a comment, an unknown field). The first bad line found is reported, once per
stream: data lines when their event is dispatched (or when the body ends before that), since
decoding them once is the hot path; every other line as it is read. Lines of an event are
located at the event's start, other lines at their own. The unfinished line the body may end
with is not checked: clients discard it, and ``unterminated_frame`` already reports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from hashlib import blake2b
from itertools import repeat
from typing import Any, Final, NamedTuple

from streamguard import rules
from streamguard._wire import describe
from streamguard.report import Finding

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "NATIVE_KERNEL",
    "Event",
    "EventParser",
    "Leftover",
    "native_kernel",
    "share_event_names",
    "skim_frame",
]

DEFAULT_MAX_EVENT_BYTES = 1024 * 1024

_BOM: Final = b"\xef\xbb\xbf"
_LINE_ENDING: Final = re.compile(rb"\r\n|\r|\n")
_CR: Final = 0x0D
_COLON: Final = 0x3A
_MAX_CACHED_EVENT_NAMES: Final = 64
#: Event names the protocols define, decoded once for every stream of the process: filled
#: from the protocols' specs as they are registered (``share_event_names``), never from the
#: wire. A name a stream sends is cached for that stream only, so no upstream can fill a
#: process-wide table (and push every later stream's names into its own).
_SHARED_EVENT_NAMES: Final[dict[bytes, str]] = {}
#: How many names the protocols may share; the registry's input is code, but bounded still.
_MAX_SHARED_EVENT_NAMES: Final = 1024
_MAX_CACHED_EVENT_NAME_BYTES: Final = 64
#: Past this many data lines in one event, they are joined into one ``bytearray``.
_MAX_HELD_DATA_LINES = 32
#: A chunk longer than this is interpreted a window of about this many bytes at a time.
_WINDOW = 32 * 1024
#: Unknown field names are remembered (to report each once) up to this many, and a name
#: longer than ``_MAX_KEPT_NAME_BYTES`` only by a digest.
_MAX_UNKNOWN_FIELDS: Final = 8
_MAX_KEPT_NAME_BYTES: Final = 64
_FIELD_NAMES: Final = frozenset((b"data", b"event", b"id", b"retry"))
#: The one-character part codes of the AI SDK 4 data stream protocol (``0:`` text, ``9:``
#: a tool call, ``d:`` the finish...): a body of such lines read as SSE.
_DATA_STREAM_PARTS: Final = frozenset(bytes([code]) for code in b"0123456789abcdefghijk")
#: How much of the first data line of an event left unfinished ``close`` returns.
_PENDING_LINE_BYTES: Final = 64 * 1024


class Event(NamedTuple):
    """One dispatched event.

    ``id`` and ``retry`` are the last event ID and reconnection time *in effect* when the
    event was dispatched (the spec keeps both across events); ``offset`` is the byte
    offset in the body where the event's first line began.

    A ``NamedTuple`` rather than a frozen dataclass: it is just as immutable and has no
    per-instance ``__dict__``, and it is built five times faster, which matters at one
    instance per frame (a frozen dataclass's ``__init__`` was the parser's largest cost).
    """

    event: str
    data: str
    id: str | None = None
    retry: int | None = None
    offset: int = 0


_new_event: Final = tuple.__new__
#: ``Event`` as a constant: compiled, read without a look-up in the module per event.
_EVENT: Final = Event


class Leftover(NamedTuple):
    """What ``EventParser.close`` returns: the last findings and the unfinished event."""

    findings: list[Finding]
    #: The event being built when the input ended, as its first data line shows it (at most
    #: 64 KiB of that line): clients discard it, but it can still tell what a body whose
    #: frames were never ended by a blank line was meant to be. ``None`` with no data line.
    pending: Event | None


def share_event_names(names: Iterable[str]) -> None:
    """Decode ``names`` once for every stream, in place of the names shared before: the
    protocols' own event names (set by the protocol registry). Names over 64 bytes, and any
    past the table's bound, stay per stream, as names from the wire do."""
    _SHARED_EVENT_NAMES.clear()
    for name in names:
        raw = name.encode("utf-8")
        if len(raw) <= _MAX_CACHED_EVENT_NAME_BYTES:
            if len(_SHARED_EVENT_NAMES) >= _MAX_SHARED_EVENT_NAMES:
                break
            _SHARED_EVENT_NAMES[raw] = name


class EventParser:
    """Turns body bytes into ``Event``s (and ``Finding``s), one chunk at a time."""

    # Slots, and nothing made before it is needed: one parser lives per open stream.
    __slots__ = (
        "_bom_window",
        "_closed",
        "_data",
        "_event_names",
        "_event_start",
        "_event_type",
        "_events",
        "_findings",
        "_inspecting",
        "_last_id",
        "_offset",
        "_partial",
        "_retry",
        "_seen_invalid_utf8",
        "_seen_unknown_fields",
        "_skip_lf",
        "max_event_bytes",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be at least 1, got {max_event_bytes!r}")
        self.max_event_bytes = max_event_bytes
        #: Absolute offset of the first byte not yet consumed as part of a whole line.
        self._offset = 0
        self._partial: bytearray | None = None
        self._skip_lf = False
        self._bom_window: bytes | None = b""  # None once the BOM question is settled
        # The event being built.
        self._event_start: int | None = None
        #: Its data lines; once there are many, the first element is a ``bytearray``
        #: holding all but the last of them, joined (see ``_compact_data``).
        self._data: list[bytes | bytearray] | None = None
        #: Its type, decoded when its ``event:`` line is read ("message" when unset).
        self._event_type = "message"
        # State the spec keeps across events.
        self._last_id: str | None = None
        self._retry: int | None = None
        # Bookkeeping.
        #: How many events ``feed`` has returned so far.
        self._events = 0
        #: Findings made by the current call, not yet returned; ``None`` while there are none.
        self._findings: list[Finding] | None = None
        self._inspecting = True
        self._seen_invalid_utf8 = False
        self._seen_unknown_fields: set[bytes] | None = None  # made by the first one
        self._closed = False
        #: Event names this stream uses beyond the process-wide cache, decoded once.
        self._event_names: dict[bytes, str] | None = None

    @property
    def inspecting(self) -> bool:
        """False once an event grew past ``max_event_bytes``: the rest is ignored."""
        return self._inspecting

    @property
    def events_dispatched(self) -> int:
        """How many events ``feed`` has returned so far."""
        return self._events

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the body; return the events it completed, in order.

        The framing findings it made wait in the parser until ``take_findings``: each
        carries the index of the event it was found in, so the findings of all calls,
        joined, are the same however the bytes are cut."""
        if not self._inspecting or not data:
            return []
        if self._closed:
            raise RuntimeError("EventParser.feed() called after close()")
        if self._bom_window is not None:
            data = self._strip_bom(data)
            if not data:
                return []
        if self._skip_lf:
            self._skip_lf = False
            if data[0] == 0x0A:
                self._offset += 1
                data = data[1:]
                if not data:
                    return []

        if (
            data[-1:] == b"\n"
            and self._event_start is None
            and not self._partial
            and len(data) <= self.max_event_bytes
        ):
            event = self._single_event(data)
            if event is not None:
                return [event]

        last_lf = data.rfind(b"\n")
        # Most streams never send a CR: one scan for it answers both questions below.
        last_cr = data.rfind(b"\r")
        last_end = last_lf if last_lf > last_cr else last_cr
        if last_end < 0:
            self._hold(data)
            return []

        if last_end == len(data) - 1:  # the usual case: the chunk ends on a line ending
            whole = data
            rest = b""
        else:
            whole = data[: last_end + 1]
            rest = data[last_end + 1 :]
        partial = self._partial
        if partial:
            whole = b"".join((partial, whole))  # one copy, the held part included
            self._partial = None
        if last_cr == last_end and not rest:
            self._skip_lf = True

        # The chunk's lines decide: a held partial line adds one line at most.
        if last_end < _WINDOW:
            events = self._consume_lines(whole, last_cr >= 0)
        else:
            events = self._consume_windows(whole, last_cr >= 0)
        if rest and self._inspecting:
            self._hold(rest)
        return events

    @property
    def has_findings(self) -> bool:
        """Whether findings wait to be taken (cheaper to ask than to take none)."""
        return self._findings is not None

    def at_boundary(self, size: int) -> bool:
        """Whether a chunk of ``size`` bytes fed now would start a fresh event with nothing
        held before it: then a chunk that is exactly one ``data:`` line (after at most an
        ``event:`` line) and a blank line takes ``_single_event``'s path, and ``passed``
        may stand in for the feed (``_skeleton.ShapeCache.fit_frame``)."""
        return (
            self._event_start is None
            and self._partial is None
            and self._bom_window is None
            and not self._skip_lf
            and self._findings is None
            and self._inspecting
            and not self._closed
            and 0 < size <= self.max_event_bytes
        )

    def passed(self, size: int, name: str, data: str) -> Event:
        """The event a chunk of ``size`` bytes at a boundary (``at_boundary``) makes when it
        is one ``data:`` line of ``data``, named ``name``: as ``feed`` would return it,
        the bytes counted, without reading them again."""
        event = _new_event(_EVENT, (name, data, self._last_id, self._retry, self._offset))
        self._offset += size
        self._events += 1
        return event

    def passed_unread(self, size: int) -> None:
        """``passed`` for an event no one reads (``Checker.repeat_unread``): the chunk's
        bytes and its event counted, the event not made."""
        self._offset += size
        self._events += 1

    def take_findings(self) -> list[Finding]:
        """The framing findings made since they were last taken, in the order found."""
        found = self._findings
        if found is None:
            return []
        self._findings = None
        return found

    def close(self) -> Leftover:
        """End of input: report what never completed; return the last findings and the
        unfinished event, if any.

        ``inspecting`` stays true unless the close itself found the event too large, so
        the caller can tell whether the whole body was inspected.
        """
        pending = None
        if self._inspecting and not self._closed:
            pending = self._pending_event()
            self._closed = True
            if self._bom_window:
                # Fewer than three bytes in the whole body, all of them a BOM prefix.
                self._hold(self._bom_window)
                self._bom_window = None
        partial = self._partial
        if self._inspecting and (self._event_start is not None or partial):
            start = self._event_start if self._event_start is not None else self._offset
            size = self._offset + (0 if partial is None else len(partial)) - start
            data = self._data
            if data:
                # Its data lines were read whole but are decoded only at dispatch.
                self._decode(b"\n".join(data), start)
            if data or (partial is not None and partial.startswith(b"data")):
                what = "clients discard the unfinished event"
            else:
                what = "it holds no data, but the frame is cut"
            self._found(
                rules.UNTERMINATED_FRAME.finding(
                    f"{size} byte(s) after the last blank line at the end of the body "
                    f"(starting at byte {start}); {what}",
                    self._events,
                    start,
                )
            )
            self._event_start = None
            self._partial = self._data = None
        found, self._findings = self._findings, None
        return Leftover(found or [], pending)

    # -- internals ----------------------------------------------------------------------

    def _pending_event(self) -> Event | None:
        """The event being built, as the start of its first data line shows it."""
        limit = _PENDING_LINE_BYTES
        data, partial = self._data, self._partial
        if data:
            first = data[0][:limit]
        elif partial is not None and partial.startswith(b"data:"):
            first = partial[5:limit]
            if first[:1] == b" ":
                first = first[1:]
        else:
            return None
        line = bytes(first).partition(b"\n")[0]
        start = self._event_start if self._event_start is not None else self._offset
        return _EVENT(self._event_type, line.decode("utf-8", "replace"), None, None, start)

    def _strip_bom(self, data: bytes) -> bytes:
        assert self._bom_window is not None
        # No concatenation for the usual first chunk: compiled, ``b"" + data`` copies it.
        window = self._bom_window + data if self._bom_window else data
        if len(window) < len(_BOM) and _BOM.startswith(window):
            self._bom_window = window
            return b""
        self._bom_window = None
        if window.startswith(_BOM):
            self._offset = len(_BOM)
            return window[len(_BOM) :]
        return window

    def _hold(self, fragment: bytes) -> None:
        """Keep part of an unfinished line, unless the event grows past the limit."""
        partial = self._partial
        if partial is None:
            partial = self._partial = bytearray(fragment)
        else:
            partial += fragment
        start = self._event_start if self._event_start is not None else self._offset
        if self._offset + len(partial) - start > self.max_event_bytes:
            self._too_large(start)

    def _too_large(self, start: int) -> None:
        self._found(
            rules.EVENT_TOO_LARGE.finding(
                f"the event starting at byte {start} grew past max_event_bytes="
                f"{self.max_event_bytes}; the rest of the stream is passed through unchecked",
                self._events,
                start,
            )
        )
        self._inspecting = False
        self._partial = self._data = None
        self._event_type = "message"

    def _single_event(self, data: bytes) -> Event | None:
        """The fast path for a chunk that is exactly one fresh event, as most servers send
        (``_single_frame`` reads its shape); returns ``None`` (having changed nothing) for
        anything else, which the general path takes. It slices out only the value (and
        the name), so a large event costs one copy before its decoding.
        """
        start, first, end = _single_frame(data)
        if start < 0:
            return None
        try:
            text = data[start + 6 if data[start + 5] == 0x20 else start + 5 : end].decode()
        except UnicodeDecodeError:
            return None  # the general path reports it
        # Only now is the chunk known to be this event: the name is decoded (and, if it is
        # not UTF-8, reported) as the general path would on reading its line.
        event_type = (
            self._event_name(data[7 if data[6] == 0x20 else 6 : first], self._offset)
            if start
            else "message"
        )
        event = _new_event(_EVENT, (event_type, text, self._last_id, self._retry, self._offset))
        self._offset += len(data)
        self._events += 1
        return event

    def skim(self, data: bytes, hints: tuple[bytes, ...]) -> bool:
        """Count a chunk at a boundary (``at_boundary``) that is exactly one fresh event of
        ASCII bytes holding none of ``hints``, as ``feed`` would, without making the
        event; False (having changed nothing) for any other (``skim_frame``). For a reader
        that needs only to know the event was there (the every-stream tier,
        ``StreamMonitor.check_framing_only``): ASCII is valid UTF-8, and
        ``_single_frame``'s shapes hold no field but ``event`` and ``data``, so ``feed``
        would have made no finding either."""
        if not skim_frame(data, hints):
            return False
        self._offset += len(data)
        self._events += 1
        return True

    def _consume_lines(self, whole: bytes, has_cr: bool) -> list[Event]:
        """Interpret ``whole``, which holds complete lines, each with its line ending.

        This is the hot path, so it keeps state in locals and inlines the dispatch.
        """
        endings: repeat[int] | list[int]
        if not has_cr:  # a held partial line never holds a CR: it would have ended it
            lines = whole.split(b"\n")
            endings = repeat(1)
        else:
            lines = whole.split(b"\r\n")
            pairs = len(lines) - 1
            if whole.count(b"\r") == pairs and whole.count(b"\n") == pairs:
                endings = repeat(2)  # CRLF only, as sse-starlette sends
            else:
                lines = _LINE_ENDING.split(whole)
                endings = [len(ending) for ending in _LINE_ENDING.findall(whole)]
        lines.pop()  # the empty tail after the last line ending

        events: list[Event] = []
        offset = self._offset
        event_start = self._event_start
        data = self._data
        if data is None:
            data = self._data = []
        limit = self.max_event_bytes
        # Only a region that could hold an oversized event needs the per-line size check.
        check_size = offset + len(whole) - (offset if event_start is None else event_start) > limit
        for line, ending in zip(lines, endings, strict=False):
            if line:
                if event_start is None:
                    event_start = offset
                if check_size and offset + len(line) - event_start > limit:
                    self._offset = offset + len(line) + ending
                    self._too_large(event_start)
                    return events
                if line[:5] == b"data:":
                    data.append(line[6:] if line[5:6] == b" " else line[5:])
                elif line[:6] == b"event:":
                    self._event_type = self._event_name(
                        line[7:] if line[6:7] == b" " else line[6:], event_start
                    )
                elif line[0] == _COLON:
                    if not line.isascii():  # a comment: only its encoding matters
                        self._decode(line, offset)
                else:
                    self._field(line, offset)
            elif data:
                if len(data) == 1:
                    raw = data[0]
                elif type(data[0]) is bytes:
                    raw = b"\n".join(data)
                else:
                    raw = self._joined_data()
                try:
                    text = raw.decode()
                except UnicodeDecodeError:
                    text = self._decode(raw, event_start or 0)
                events.append(
                    _new_event(
                        Event, (self._event_type, text, self._last_id, self._retry, event_start)
                    )
                )
                self._events += 1
                data.clear()
                self._event_type = "message"
                event_start = None
            else:  # a blank line ends a block with no data: nothing to dispatch
                if self._event_type != "message":
                    self._dataless(offset if event_start is None else event_start)
                self._event_type = "message"
                event_start = None
            offset += len(line) + ending
        self._offset = offset
        self._event_start = event_start
        if len(data) > _MAX_HELD_DATA_LINES:
            self._compact_data()
        return events

    def _consume_windows(self, whole: bytes, has_cr: bool) -> list[Event]:
        """``_consume_lines`` over a long ``whole``, a window of whole lines at a time.

        One call makes a ``bytes`` object per line, and a line of a few bytes costs ten
        times its size as an object, so a large chunk is cut after the first line ending
        past every ``_WINDOW`` bytes (a CRLF is never cut in two: the search from the cut
        point matches the whole CRLF, or its LF when the CR came just before).
        """
        events: list[Event] = []
        start, size = 0, len(whole)
        while start < size and self._inspecting:
            end = start + _WINDOW
            if end >= size:
                end = size
            elif has_cr:
                found = _LINE_ENDING.search(whole, end)
                assert found is not None  # ``whole`` ends with a line ending
                end = found.end()
            else:
                end = whole.find(b"\n", end) + 1
            events += self._consume_lines(whole[start:end], has_cr)
            start = end
        return events

    def _compact_data(self) -> None:
        """Join all but the last data line into one ``bytearray`` at ``_data[0]``.

        The last line stays a separate element, so the list holds at least two once
        compacted (the single-line test on the dispatch path is unchanged) and stays
        non-empty exactly while the event has data.
        """
        data = self._data
        assert data is not None
        last = data.pop()
        joined = data[0]
        if type(joined) is not bytearray:
            joined = bytearray(b"\n".join(data))
        elif len(data) > 1:
            joined += b"\n"
            joined += b"\n".join(data[1:])
        data.clear()
        data += (joined, last)

    def _joined_data(self) -> bytearray:
        """The compacted data lines and the rest, joined in place of the compacted ones."""
        data = self._data
        assert data is not None
        joined = data[0]
        assert type(joined) is bytearray
        joined += b"\n"
        joined += b"\n".join(data[1:])
        return joined

    def _field(self, line: bytes, line_start: int) -> None:
        if not line.isascii():  # kept or not, the line must be UTF-8
            self._decode(line, line_start)
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"event":  # a bare "event" line: an empty value
            self._event_type = "message"
        elif name == b"data":  # a bare "data" line: an empty value
            if self._data is None:
                self._data = []
            self._data.append(value)
        elif name == b"id":
            if b"\0" not in value:  # the line was checked above: no second report
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():  # bytes.isdigit is ASCII-only, as the spec requires
                self._retry = int(value)
        else:
            self._unknown_field(name, line_start)

    def _unknown_field(self, name: bytes, line_start: int) -> None:
        """Report a field name once; the first few names are remembered, long ones hashed."""
        seen = self._seen_unknown_fields
        if seen is None:
            seen = self._seen_unknown_fields = set()
        key = name if len(name) <= _MAX_KEPT_NAME_BYTES else blake2b(name, digest_size=16).digest()
        if key in seen or len(seen) >= _MAX_UNKNOWN_FIELDS:
            return
        seen.add(key)
        # A known name in other letters or with spaces is the usual cause; saying so
        # reveals only that the name is one of four.
        if name.strip().lower() in _FIELD_NAMES:
            hint = " (a known field name, spelled differently: names are exact)"
        elif name in _DATA_STREAM_PARTS:
            # ``0:"text"``, ``d:{...}``: AI SDK 4's data stream, which ai 5's clients and
            # every SSE client drop line by line (saying so names a protocol, not the data).
            hint = ' (a line like 0:"text" is the AI SDK 4 data stream protocol, not SSE)'
        else:
            hint = ""
        self._found(
            rules.UNKNOWN_FIELD.finding(
                f"unknown field {describe(name)} at byte {line_start} is ignored by clients{hint}",
                self._events,
                line_start,
            )
        )

    def _dataless(self, at: int) -> None:
        """The block starting at byte ``at``, named by an ``event:`` line, ended without a
        ``data:`` line: the spec's dispatch drops it. A block of comments or of ``id:`` or
        ``retry:`` lines names nothing and is not reported. The name is the stream's: not
        shown."""
        self._found(
            rules.EVENT_WITHOUT_DATA.finding(
                f"the block at byte {at} has an event: line but no data: line; clients drop "
                "it without dispatching (a name flushed apart from its data?)",
                self._events,
                at,
            )
        )

    def _found(self, finding: Finding) -> None:
        if self._findings is None:
            self._findings = []
        self._findings.append(finding)

    def _event_name(self, raw: bytes, where: int) -> str:
        """Decode an event type; streams use a few names, so they are decoded once.

        The protocols' own names come from a fixed process-wide table, so an idle stream of
        a known protocol carries no cache of its own; other names are cached per stream.
        """
        name = _SHARED_EVENT_NAMES.get(raw)
        if name is not None:
            return name
        names = self._event_names
        if names is not None:
            name = names.get(raw)
            if name is not None:
                return name
        if not raw:
            return "message"  # an empty type is the default
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            return self._decode(raw, where)  # reported (once per stream); not cached
        if len(raw) <= _MAX_CACHED_EVENT_NAME_BYTES:
            if names is None:
                names = self._event_names = {}
            if len(names) < _MAX_CACHED_EVENT_NAMES:
                names[raw] = name
        return name

    def _decode(self, raw: bytes | bytearray, where: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self._invalid_utf8(where)
            return raw.decode("utf-8", "replace")

    def _invalid_utf8(self, where: int) -> None:
        if not self._seen_invalid_utf8:
            self._seen_invalid_utf8 = True
            self._found(
                rules.INVALID_UTF8.finding(
                    f"invalid UTF-8 in the event starting at byte {where}; clients decode it "
                    "as U+FFFD (reported once per stream)",
                    self._events,
                    where,
                )
            )


def _single_frame(data: bytes) -> tuple[int, int, int]:
    """Where a chunk that is exactly one fresh event, as most servers send it, has its data
    line (``start``), the end of its first line (``first``) and the end of its value
    (``end``); ``(-1, -1, -1)`` for any other chunk.

    The shapes are ``data: …`` and ``event: …`` + ``data: …``, with LF or CRLF endings.
    Byte scans dominate the cost, so it makes as few as it can: one for the CRs and one for
    the LFs, which stops early in a chunk of many lines. (Spaces and CRs are compared as
    constants: a module global costs a lookup here.)
    """
    if data[-2:] == b"\n\n":
        # A CR asked for as the byte's value: ``b"\r" in data`` first tries the bytes as an
        # integer, and the TypeError it makes and drops cost more than the scan.
        if 0x0D in data:
            return -1, -1, -1
        end = len(data) - 2  # where the data line's ending is
        first = data.find(b"\n")
        if first == end:
            start = 0
        elif data.find(b"\n", first + 1) == end:
            start = first + 1
        else:
            return -1, -1, -1
    elif data[-4:] == b"\r\n\r\n":
        end = len(data) - 4
        first = data.find(b"\n") - 1  # where the first line's CRLF starts
        if first == end:
            start, crs = 0, 2
        elif data[first] == 0x0D and data.find(b"\n", first + 2) == end + 1:
            start, crs = first + 2, 3
        else:
            return -1, -1, -1
        # The LFs found are the only ones before the final CRLF, and each follows a CR; a
        # CR anywhere else would end a line of its own.
        if data.count(b"\r") != crs:
            return -1, -1, -1
    else:
        return -1, -1, -1
    if data[start : start + 5] != b"data:" or (start and data[:6] != b"event:"):
        return -1, -1, -1
    return start, first, end


def _skim_frame(data: bytes, hints: tuple[bytes, ...]) -> bool:
    """Whether ``data`` is one fresh event of ASCII bytes (``_single_frame``) that holds none
    of ``hints``: the definition ``streamguard._kernel.skim_frame`` computes natively."""
    if not data.isascii() or _single_frame(data)[0] < 0:
        return False
    # (``find``, not ``in``: ``in`` first tries the needle as an integer, and the TypeError
    # it makes and drops costs more than the scan.)
    return all(data.find(hint) < 0 for hint in hints)


def native_kernel(name: str) -> Any | None:
    """The native kernel's function ``name`` (``streamguard/_kernel.c``), where it was built
    and the compiled core runs; None in a process that asked for the pure-Python core
    (``streamguard._build``), which runs the function's Python definition and no native
    code. (The kernel is built with the compiled core, all or nothing, so this module
    being compiled says the core is.)"""
    if not __file__.endswith(".py"):  # (this module is an extension: the compiled core)
        try:
            from streamguard import _kernel
        except ImportError:
            return None
        return getattr(_kernel, name)
    return None


_NATIVE: Final[Callable[[bytes, tuple[bytes, ...]], bool] | None] = native_kernel("skim_frame")
#: Whether the native kernel runs the per-frame scans (``streamguard info`` says so).
NATIVE_KERNEL: Final = _NATIVE is not None
#: ``_skim_frame``, natively where the kernel was built.
skim_frame: Final[Callable[[bytes, tuple[bytes, ...]], bool]] = (
    _skim_frame if _NATIVE is None else _NATIVE
)
