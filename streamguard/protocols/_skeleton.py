"""A frame's skeleton: its data with the values that vary from frame to frame as holes.

Theory of operation
-------------------
A healthy stream is thousands of frames of one shape: the same keys, the same ids, the
same literals, and only a piece of text (and perhaps a counter) new in each. Parsing each
one as JSON and walking it again costs more than the app spent writing it. So the engine
(``Checker.on_event``) keeps the skeletons of the last few frames a checker vouched for,
and a frame that fits one of them byte for byte, holes aside, is not parsed: the checker
takes the step it took for the frame the skeleton was learned from (``repeat_event``).

What makes that exact:

* **A checker vouches, the engine does not guess.** A handler calls ``Checker.repeatable``
  only when the frame it just checked changed nothing a later rule reads, beyond what its
  ``repeat_event`` does again (a counter); the engine learns the frame only if it found
  nothing, or its findings were vouched to come again (below); ``holes`` names the paths
  whose values it did not read (the text) and ``values`` the ones it reads on a repeat (a
  sequence number). Every other key, string, number and literal of the frame, and its
  event name, is part of the skeleton and must come again unchanged.
* **A hole is still JSON.** A text hole matches only a JSON string the full parser would
  take: no raw control character, only the escapes JSON has, a ``\\u`` surrogate only as a
  high and low pair (pydantic-core's parser refuses a lone one). A value hole holds what
  it held when learned: such a string, or a plain integer of at most 18 digits. Anything
  else misses, and the frame takes the full path, which reports what is wrong with it.
* **Whitespace may differ where the frame had some.** JSON ignores whitespace between
  tokens and after the value, and servers pad frames with a varying number of spaces: a
  run of it in the learned frame is a hole that takes any run (or none), and whitespace
  after the value is never part of the skeleton. A single space is the exception: it is
  how ``json.dumps`` separates, never padding, so it stays part of the piece around it
  (a frame spaced otherwise misses and is parsed). Whitespace inside a string is the
  string's.
* **Nothing is cached across a change.** The skeletons hold while every frame since they
  were learned changed nothing: a frame checked in full that the checker did not vouch
  for, a finding not vouched to come again, or a new phase forgets them all. A frame
  vouched for as ``UNCHANGED`` (a keepalive: no hole, nothing a rule reads) keeps them
  and is not learned.
* **A finding comes again only when vouched for.** A checker may vouch that the findings
  of a frame come again for any frame of its skeleton (a chunk whose shape is wrong the
  same way each time: the findings name paths and literals, never a hole's text). The
  entry then keeps each finding's rule, severity and message after ``event N``, and a
  fitting frame gets them on its own index and offset. The vouch is the checker's: a rule
  it reports once by its own bookkeeping must never be vouched for. The engine only
  refuses what it can see, a rule flagged ``once_per_stream`` or a finding placed on
  another frame: such a frame forgets the skeletons instead.

**A chunk that is one fitting frame is not parsed either.** Most servers send each frame
in a body message of its own. The monitor asks the checker's cache to fit such a chunk
whole (``ShapeCache.fit_frame``) when the parser holds nothing (``EventParser.at_boundary``):
an entry learns how its chunks are framed from the first chunk that was exactly one event
of its skeleton (``frame``: a ``data:`` line, perhaps after an ``event:`` line of its name,
then a blank line, LF or CRLF, and nothing else), and a chunk that starts and ends as its
framing and pieces do, with a value that fits the holes and holds no line ending, is the
event the parser would have made (``EventParser.passed`` makes it, counting the bytes) and
takes the repeat. On the compiled build the native kernel fits the chunk's bytes
(``_kernel.fit_holes``; ``_fit_entry``, which decodes and matches the text, is its
definition), and the data is decoded only when asked for (``ShapeCache.fitted_data``): a
checker whose ``repeat_event`` reads no event repeats the frame without one
(``Checker.repeat_unread``), so most fitted frames allocate nothing but what the checker
keeps. All entries framed share one style, so a chunk fits the entry ``find``
would have found first; anything else, or any doubt, goes to the parser. (A skeleton whose
data may start with whitespace is never framed after ``data:`` without a space: the
parser strips one space there.) On the compiled build, a chunk of several frames, or of
a frame cut across chunks, is taken a frame at a time (``StreamMonitor._check``; the
pure-Python build parses it, which costs it less): each frame the chunk ends
is fitted as a chunk of its own would be, and a frame's start left at a chunk's end is
held for the next one while the parser would make nothing of it yet (in a stream framed
with LF: a CR is never held).

Learning a skeleton reads the frame's JSON token by token in Python (the tokens found in
one call; tens of microseconds for a chat frame), so a stream whose frames never repeat
(a server that stamps each with a new id) must not pay it on each: after a skeleton is
dropped unused, learning waits twice as many vouched frames as before
(``MAX_LEARNING_WAIT`` at most); a hit resets the wait. The skeleton that fitted last is
tried first, and a full cache drops the one fitted least lately to learn a new one (a
skeleton learned from a rare variant, say a frame with no padding, would otherwise cost
every later frame a miss; an entry whose chunks are not framed yet is not put before
one whose are, which ``fit_frame`` would then stop at). A skeleton is also memory held
for the stream's life, about a kilobyte, and most open streams at any moment are
waiting: a stream makes its cache, and learns, only at its second vouched frame (a stream
that sends one and then waits holds none), and one its sweeper finds silent for a second
forgets its skeletons (``Checker.rest``, through ``StreamMonitor.poll``), to learn again
when it goes on.
A skeleton is its literal pieces (slices of the frame it was learned from) and, between
them, its holes' kinds: matching compares the first and last pieces, then walks the holes.
Compiled, it finds a text's closing quote and compares the piece after it: a text with no
escape and nothing unprintable is taken as it is, any other goes to the precompiled pattern
(``_STRING``), which decides. The pure-Python build calls each hole's pattern (one or two
unread holes in ``_match_few``), which costs it fewer interpreted steps. (One regular
expression per skeleton matched in one call, but ``re.compile``, written in Python, took
milliseconds for a chat frame: per stream, since each stream's id differs; and, compiled,
a pattern per hole cost a call per hole.) Memory is bounded:
at most ``MAX_SKELETONS`` per stream, each a few slices of a frame of at most
``MAX_SKELETON_CHARS`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from streamguard.protocols._payload import parse_json
from streamguard.report import Severity
from streamguard.sse import native_kernel

__all__ = [
    "MAX_HOLES",
    "MAX_LEARNING_WAIT",
    "MAX_SKELETONS",
    "MAX_SKELETON_CHARS",
    "UNCHANGED",
    "Again",
    "Entry",
    "Holes",
    "Path",
    "ShapeCache",
    "Skeleton",
    "framing",
    "json_string_text",
    "learn",
    "learning",
]

#: A JSON path: object keys and array indices, from the top.
Path = tuple[str | int, ...]

#: Frames longer than this are not learned (they are rare and their parse dominates).
MAX_SKELETON_CHARS: Final = 4096
#: The skeletons a stream keeps at once (the shapes a healthy stream alternates between).
MAX_SKELETONS: Final = 4
#: The holes one skeleton may have (each run of whitespace between tokens counts as one).
MAX_HOLES: Final = 16
#: The longest wait, in vouched frames, between two attempts to learn.
MAX_LEARNING_WAIT: Final = 1024

# A JSON string as pydantic-core reads it: no raw control character, the escapes JSON
# has, and a \u surrogate only as a high-low pair; no raw surrogate either (the parser
# decodes with replacement, so none comes from the wire, but the parse would refuse one).
_STRING: Final = re.compile(
    r'"[^"\\\x00-\x1f\ud800-\udfff]*(?:(?:\\["\\/bfnrt]'
    r"|\\u(?![dD][89a-fA-F])[0-9a-fA-F]{4}"
    r"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r'[^"\\\x00-\x1f\ud800-\udfff]*)*"'
)
#: Whether this module runs as Python source rather than compiled: each build takes the
#: faster way to find where a hole ends (a pattern's one call; compiled, a few steps).
_INTERPRETED: Final = __file__.endswith(".py")
#: ``str.isprintable``, called without a method lookup (on the per-frame path).
_PRINTABLE: Final = str.isprintable
#: What JSON counts as whitespace (``str.rstrip()`` alone would take more).
_JSON_WHITESPACE: Final = " \t\n\r"
_INTEGER: Final = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_DIGITS: Final = "0123456789"
_SPACE: Final = re.compile(r"[ \t\n\r]*")
#: A JSON token and the whitespace before it, as ``findall`` lists them: (whitespace,
#: mark, string, number, word, unterminated), all but one of the last five empty. (The
#: marks first, and a string's characters taken a run at a time: half the cost.) A string
#: with no closing quote is taken to the end of the data as ``unterminated``: else
#: ``findall`` would search again from each later quote, to the end each time.
_TOKENS: Final = re.compile(
    r"([ \t\n\r]*)(?:"
    r"([{}\[\]:,])"
    r'|("[^"\\]*(?:\\.[^"\\]*)*")'
    r"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(true|false|null)"
    r'|("[^"\\]*(?:\\.[^"\\]*)*\\?\Z))',
    re.DOTALL,
)


class Skeleton:
    """The learned frame: its event name, the literal pieces between its holes, and what
    each hole holds."""

    __slots__ = ("few", "kinds", "literals", "name", "order", "patterns")

    def __init__(
        self,
        name: str,
        literals: tuple[str, ...],
        kinds: tuple[int, ...],
        order: tuple[int, ...],
    ) -> None:
        self.name = name
        #: One more than the holes: before the first, between each two, after the last.
        self.literals = literals
        #: Each hole's kind (``_TEXT``, ``_STRING_VALUE``, ``_INTEGER_VALUE``, ``_PADDING``).
        self.kinds = kinds
        #: For each value hole, as the checker listed them, its place among those read.
        self.order = order
        #: Each hole's pattern, and whether there are one or two, none read: the
        #: pure-Python build matches those with a call or two (``_match_few``).
        self.patterns = tuple(_PATTERNS[kind] for kind in kinds)
        self.few = len(kinds) <= 2 and _STRING_VALUE not in kinds and _INTEGER_VALUE not in kinds

    def match(self, name: str, data: str) -> Sequence[str] | None:
        """The read holes' texts when ``data`` (an event named ``name``) fits, else None."""
        if name != self.name:
            return None
        literals = self.literals
        head = literals[0]
        if not data.startswith(head):
            return None
        tail = literals[-1]
        if not data.endswith(tail):
            data = data.rstrip(_JSON_WHITESPACE)  # whitespace may follow the value
            if not data.endswith(tail):
                return None
        cut = len(data) - len(tail)
        if cut < len(head):
            return None
        if _INTERPRETED and self.few:
            return self._match_few(data, cut)
        return self.match_holes(data, cut)

    def match_holes(self, data: str, cut: int) -> Sequence[str] | None:
        """``match`` for data known to start with the first piece and to end with the last
        one at ``cut``."""
        if _INTERPRETED and self.few:
            return self._match_few(data, cut)
        literals = self.literals
        position = len(literals[0])
        kinds = self.kinds
        last = len(kinds) - 1
        values: list[str] | None = None
        for number in range(len(kinds)):
            kind = kinds[number]
            if kind == _PADDING:
                if number == last:  # padding before the last piece (a closing brace)
                    if data[position:cut].strip(_JSON_WHITESPACE):
                        return None
                    return _NO_VALUES if values is None else self.in_order(values)
                found = _SPACE.match(data, position, cut)
                if found is None:
                    return None
                end = found.end()
            elif _INTERPRETED:  # a pattern's one call costs less than the steps compiled
                found = (_INTEGER if kind == _INTEGER_VALUE else _STRING).match(data, position, cut)
                if found is None:
                    return None
                end = found.end()
            else:
                end = (
                    _integer_end(data, position, cut)
                    if kind == _INTEGER_VALUE
                    else _string_end(data, position, cut)
                )
                if end < 0:
                    return None
            if kind >= _STRING_VALUE:
                if values is None:
                    values = []
                values.append(data[position:end])
            if number == last:
                if end != cut:  # the last hole reaches the last piece, and not into it
                    return None
            else:
                literal = literals[number + 1]
                position = end + len(literal)
                if position > cut or data[end:position] != literal:
                    return None
        return _NO_VALUES if values is None else self.in_order(values)

    def _match_few(self, data: str, cut: int) -> Sequence[str] | None:
        """``match_holes`` for one or two holes, none read, in fewer interpreted steps."""
        literals = self.literals
        patterns = self.patterns
        position = len(literals[0])
        if len(patterns) == 2:
            first = patterns[0].match(data, position, cut)
            if first is None:
                return None
            position = first.end()
            middle = literals[1]
            if not data.startswith(middle, position, cut):  # not into the last piece
                return None
            position += len(middle)
        last = patterns[-1]
        if last is _SPACE:  # padding: cheaper stripped than matched
            if data[position:cut].strip(_JSON_WHITESPACE):
                return None
        elif last.fullmatch(data, position, cut) is None:
            return None
        return _NO_VALUES

    def in_order(self, values: Sequence[str]) -> Sequence[str]:
        """The read holes' texts, in the order the checker listed their paths."""
        order = self.order
        return values if order == _IN_ORDER[len(order)] else [values[i] for i in order]


def _string_end(data: str, position: int, cut: int) -> int:
    """Where the JSON string at ``position`` ends (past its closing quote), before ``cut``;
    -1 when there is none that the full parser would take."""
    if position >= cut or data[position] != '"':
        return -1
    close = data.find('"', position + 1, cut)
    if close < 0:
        return -1
    # The usual text: no escape, nothing unprintable (a control character is; so are a
    # few legitimate ones, such as a no-break space, which the pattern then decides).
    if data.find("\\", position + 1, close) < 0 and _PRINTABLE(data[position + 1 : close]):
        return close + 1
    found = _STRING.match(data, position, cut)
    return -1 if found is None else found.end()


def _integer_end(data: str, position: int, cut: int) -> int:
    """Where the plain integer at ``position`` ends, before ``cut`` (``_INTEGER``'s match,
    without its call): an optional minus, then 0 or at most 18 digits not led by 0; -1
    when there is none."""
    end = position
    if end < cut and data[end] == "-":
        end += 1
    if end >= cut or data[end] not in _DIGITS:
        return -1
    if data[end] == "0":
        return end + 1
    last = min(end + 18, cut)
    end += 1
    while end < last and data[end] in _DIGITS:
        end += 1
    return end


def json_string_text(value: str) -> str:
    """The text of a JSON string a hole took (so valid JSON): its inside when it has no
    escape, else what the parser reads."""
    if value.find("\\") < 0:
        return value[1:-1]
    text: str = parse_json(value)
    return text


#: The kinds of hole: a text (checked, not read), a string or an integer read again, and a
#: run of whitespace between tokens. The values' kinds come last (``kind >= _STRING_VALUE``).
_TEXT: Final = 0
_PADDING: Final = 1
_STRING_VALUE: Final = 2
_INTEGER_VALUE: Final = 3
#: Each kind's pattern (what the pure-Python build matches, and decides any doubt).
_PATTERNS: Final = {
    _TEXT: _STRING,
    _PADDING: _SPACE,
    _STRING_VALUE: _STRING,
    _INTEGER_VALUE: _INTEGER,
}

#: A match that reads no hole.
_NO_VALUES: Final[tuple[str, ...]] = ()
#: The order of value holes met as listed, by their number.
_IN_ORDER: Final = tuple(tuple(range(n)) for n in range(MAX_HOLES + 1))


def learn(
    name: str, data: str, text_holes: frozenset[Path], value_holes: tuple[Path, ...] = ()
) -> Skeleton | None:
    """The skeleton of ``data`` with a text hole at each path of ``text_holes`` that holds
    a string, and a value hole at each path of ``value_holes``, which must hold an integer
    or a string (a match gives their texts in that order); None when the frame is too
    long, holds anything that is no JSON token, leaves a container open or closes one it
    never opened, has no hole, lacks a value hole's path, or has a hole's path twice (a
    repeated key: which one the parser keeps is not the skeleton's business). A frame is
    learned only after the full parse took it as one JSON value, so nothing after that
    value is looked for here."""
    if len(data) > MAX_SKELETON_CHARS:
        return None
    literals: list[str] = []
    kinds: list[int] = []
    seen: set[Path] = set()
    read_paths: list[Path] = []  # the value holes' paths, in the frame's order
    # One entry per open container: its keys so far (an object) or its next index (an array).
    path: list[str | int] = []
    containers: list[bool] = []  # True: an object
    expecting_key = False
    cut = 0  # where the current literal piece starts
    filled = 0  # text and value holes (whitespace aside)
    position = 0  # where the token read next starts, its whitespace included
    space: str
    string: str
    number: str
    word: str
    mark: str
    # All tokens in one call: a ``match`` and its named groups per token cost twice as
    # much. ``findall`` skips what no token matches, and an unterminated string is not
    # counted, so the positions summed below fall short of the data's end exactly when
    # the frame is not all tokens (checked after the loop).
    for space, mark, string, number, word, _unterminated in _TOKENS.findall(data):
        start = position + len(space)
        if space and space != " ":
            # Whitespace between tokens: any amount (none included) gives the same value.
            # (One space, as ``json.dumps`` separates, stays in the piece: a hole each
            # would leave a Python server's frames with more holes than a skeleton takes.)
            if len(kinds) >= MAX_HOLES:
                return None
            literals.append(data[cut:position])
            kinds.append(_PADDING)
            cut = start
        if mark:
            position = start + 1
            if mark == "{":
                containers.append(True)
                path.append("")
                expecting_key = True
            elif mark == "[":
                containers.append(False)
                path.append(0)
                expecting_key = False
            elif mark == "}" or mark == "]":
                if not containers:
                    return None
                containers.pop()
                path.pop()
                expecting_key = False
            elif mark == ",":
                if not containers:
                    return None
                if containers[-1]:
                    expecting_key = True
                else:
                    index = path[-1]
                    path[-1] = index + 1 if isinstance(index, int) else 0
            continue
        if expecting_key:
            if not string or "\\" in string:
                return None  # an escaped key is not worth learning
            position = start + len(string)
            path[-1] = string[1:-1]
            expecting_key = False
            continue
        position = start + len(string or number or word)
        here = tuple(path)
        if here in text_holes:
            text, pattern, kind = string, _STRING, _TEXT
        elif here in value_holes:
            if string:
                text, pattern, kind = string, _STRING, _STRING_VALUE
            else:
                text, pattern, kind = number, _INTEGER, _INTEGER_VALUE
        else:
            continue
        if not text or pattern.fullmatch(text) is None:
            continue  # not what the hole holds (a null, a float): part of the skeleton
        if here in seen or len(kinds) >= MAX_HOLES:
            return None
        seen.add(here)
        filled += 1
        literals.append(data[cut:start])
        kinds.append(kind)
        if kind != _TEXT:
            read_paths.append(here)
        cut = position
    tail = data[cut:].rstrip(_JSON_WHITESPACE)
    if position != cut + len(tail):
        return None  # something no token matched
    if containers or not filled or len(read_paths) != len(value_holes):
        return None  # (a value hole's path missing, or holding neither kind)
    literals.append(tail)
    order = tuple(read_paths.index(wanted) for wanted in value_holes)
    return Skeleton(name, tuple(literals), tuple(kinds), order)


#: Whether streams learn skeletons: one switch for the process (``learning``).
_LEARNING: Final[list[bool]] = [True]


def learning(on: bool) -> None:
    """Let streams learn skeletons (the default), or not: a stream that starts learning
    nothing checks every frame in full (one already open keeps what it learned). The
    differential tests check each stream both ways and compare the reports."""
    _LEARNING[0] = on


#: A finding a frame of a skeleton makes again: its rule, severity and the message after
#: ``event N`` (``Checker.repeatable``'s ``again``); the frame's own index and offset fill it.
Again = tuple[str, Severity, str]


class Entry:
    """A learned skeleton, with the checker's token, the findings its frames make again,
    its hits and, once known, how its chunks are framed."""

    __slots__ = ("again", "framed_head", "framed_tail", "hits", "kind_codes", "padded",
                 "pieces", "prefix_size", "skeleton", "suffix_size", "token")  # fmt: skip

    def __init__(self, skeleton: Skeleton, token: object, again: tuple[Again, ...]) -> None:
        self.skeleton = skeleton
        self.token = token
        self.again = again
        self.hits = 0
        #: The skeleton as the native kernel reads it (``_fit_holes``): its literal pieces
        #: as UTF-8, its holes' kinds one byte each.
        self.pieces = tuple(literal.encode() for literal in skeleton.literals)
        self.kind_codes = bytes(skeleton.kinds)
        #: How a chunk that is exactly one event of this skeleton starts and ends, once a
        #: chunk showed it (``ShapeCache.frame``): its lines before the data's value, then
        #: the first literal piece; the last piece, then the blank line. ``None``: unknown.
        self.framed_head: bytes | None = None
        self.framed_tail = b""
        self.prefix_size = 0
        self.suffix_size = 0
        #: Whether a padding hole could take a line ending, which would split the chunk.
        self.padded = _PADDING in skeleton.kinds


class Holes:
    """What a checker vouches for a kind of frame: the paths of its text holes (checked to
    be JSON strings, not read) and of its value holes (an integer or a string, whose texts
    ``repeat_event`` gets in this order)."""

    __slots__ = ("text", "values")

    def __init__(self, text: tuple[Path, ...], values: tuple[Path, ...] = ()) -> None:
        self.text: frozenset[Path] = frozenset(text)
        self.values = values


#: What a checker vouches for a frame that changed nothing and has no hole (a keepalive):
#: the skeletons learned hold across it, and nothing is learned from it (a skeleton
#: without a hole is refused; trying would only delay the next learning).
UNCHANGED: Final = Holes(())


def _to_front(entries: list[Entry], entry: Entry) -> None:
    """``entry`` fitted: it is tried first from now on (a stream's frames come in runs of
    one shape, and a skeleton that fits only a few of them, learned first, would otherwise
    cost every frame a miss). The loop that found it returns at once: the list may change."""
    entries.remove(entry)
    entries.insert(0, entry)


class ShapeCache:
    """A stream's skeletons, with the checker's token for each, and the learning wait."""

    __slots__ = (
        "_fitted_chunk",
        "_fitted_data",
        "_fitted_start",
        "_fitted_stop",
        "countdown",
        "entries",
        "fitted",
        "fitted_values",
        "last",
        "skipped",
        "style",
        "wait",
    )

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        #: Frames that fit a skeleton, over the stream's life (for tests and benchmarks).
        self.skipped = 0
        #: Vouched frames to let pass before the next attempt to learn, and the last wait.
        self.countdown = 0
        self.wait = 0
        #: The entry the frame being checked fitted or taught, if any (``frame`` reads it).
        self.last: Entry | None = None
        #: How the framed entries' chunks are framed, their event names aside (``frame``).
        self.style: bytes | None = None
        #: Chunks ``fit_frame`` fitted, which the parser did not read (of ``skipped``).
        self.fitted = 0
        #: The read values of the last chunk ``fit_frame`` fitted; its data is decoded
        #: only when asked for (``fitted_data``): a frame repeated without its event never is.
        self.fitted_values: Sequence[str] = _NO_VALUES
        self._fitted_chunk = b""
        self._fitted_start = self._fitted_stop = 0
        self._fitted_data: str | None = ""

    @property
    def fitted_data(self) -> str:
        """The data of the last chunk ``fit_frame`` fitted, as the parser would read it."""
        data = self._fitted_data
        if data is None:
            chunk = self._fitted_chunk
            data = self._fitted_data = chunk[self._fitted_start : self._fitted_stop].decode()
        return data

    def find(self, name: str, data: str) -> tuple[object, Sequence[str], tuple[Again, ...]] | None:
        """The token, read values and findings again of the skeleton ``data`` fits, if one
        does."""
        entries = self.entries
        for entry in entries:
            values = entry.skeleton.match(name, data)
            if values is not None:
                first = entries[0]
                if entry is not first and (
                    entry.framed_head is not None or first.framed_head is None
                ):
                    _to_front(entries, entry)
                entry.hits += 1
                self.skipped += 1
                self.wait = 0
                self.last = entry
                return entry.token, values, entry.again
        return None

    def fit_frame(self, chunk: bytes) -> Entry | None:
        """``find`` for a whole chunk, read at an event boundary (``EventParser.at_boundary``):
        the entry when the chunk is exactly one event that fits a framed skeleton, which
        ``find`` would then have found first; its data and read values are left in
        ``fitted_data`` and ``fitted_values``.

        The entries are tried in ``find``'s order, and the search stops at one whose
        framing is unknown. All framed entries share one style (``frame``), so the chunk
        is framed as each of them is, and its data, as the parser reads it, is what lies
        between the framing's lines. A chunk fitted here ends with an entry's last piece,
        which never ends in whitespace, so ``find`` strips nothing from its data either:
        an earlier entry whose head or tail it misses here is one ``find`` misses too.
        """
        entries = self.entries
        for entry in entries:
            head = entry.framed_head
            if head is None:
                return None
            if chunk.startswith(head) and chunk.endswith(entry.framed_tail):
                values = fit_entry(chunk, entry)
                if values is None:
                    return None  # the parser reports it, or finds more lines than one
                if type(values) is bool:
                    continue
                assert not isinstance(values, bool)
                if entry is not entries[0]:
                    _to_front(entries, entry)
                entry.hits += 1
                self.skipped += 1
                self.fitted += 1
                self.wait = 0
                self.fitted_values = values
                self._fitted_chunk = chunk
                self._fitted_start = entry.prefix_size  # (two slots: no tuple per frame)
                self._fitted_stop = len(chunk) - entry.suffix_size
                self._fitted_data = None
                return entry
        return None

    def frame(self, chunk: bytes, data: str) -> None:
        """``chunk`` was exactly one event whose data, ``data``, fitted or taught the last
        entry: learn from it how such a chunk is framed, unless it is framed in a way
        ``fit_frame`` cannot read alike (see ``framing``)."""
        entry = self.last
        self.last = None
        if entry is None or entry.framed_head is not None:
            return
        framed = framing(chunk, data, entry.skeleton)
        if framed is None:
            return
        prefix, suffix, style = framed
        if self.style is None:
            self.style = style
        elif style != self.style:
            return  # a second way of framing: its chunks are parsed
        entry.framed_head = prefix + entry.skeleton.literals[0].encode()
        entry.framed_tail = entry.skeleton.literals[-1].encode() + suffix
        entry.prefix_size = len(prefix)
        entry.suffix_size = len(suffix)

    def consider(
        self, name: str, data: str, holes: Holes, token: object, again: tuple[Again, ...] = ()
    ) -> None:
        """A frame the checker vouched for missed every skeleton: learn it (unless
        waiting)."""
        if not _LEARNING[0]:
            return
        if self.countdown:
            self.countdown -= 1
            return
        skeleton = learn(name, data, holes.text, holes.values)
        if skeleton is None:
            self._back_off()
            return
        entries = self.entries
        if len(entries) >= MAX_SKELETONS and entries.pop().hits == 0:
            self._back_off()  # (the last: the one fitted least lately, or never)
        entry = Entry(skeleton, token, again)
        entries.append(entry)
        self.last = entry

    def forget(self) -> None:
        """Something changed: no skeleton holds any more."""
        entries = self.entries
        self.last = None
        if entries:
            if any(entry.hits == 0 for entry in entries):
                self._back_off()
            entries.clear()
            self.style = None

    def _back_off(self) -> None:
        self.wait = min(self.wait * 2 or 1, MAX_LEARNING_WAIT)
        self.countdown = self.wait


def framing(chunk: bytes, data: str, skeleton: Skeleton) -> tuple[bytes, bytes, bytes] | None:
    """How ``chunk``, one event whose data is ``data``, frames it: the bytes before the
    data's value, those after, and the style (both, the event's name left out). None
    unless a chunk framed alike is one the parser reads as one event of the skeleton's
    name with exactly the value between them: ``data:`` (perhaps after an ``event:`` line
    of that name) and one blank line, with LF or CRLF line endings and no other line, and
    nothing the framing would change: no line ending in a piece, and after ``data:``
    without its space, data that starts with a piece that does not start with whitespace
    (the parser strips one space there)."""
    if chunk.endswith(b"\r\n\r\n"):
        suffix = b"\r\n\r\n"
    elif chunk.endswith(b"\n\n"):
        suffix = b"\n\n"
    else:
        return None  # (most chunks cut at random, checked first)
    value = data.encode()
    start = len(chunk) - len(suffix) - len(value)
    if start < 5 or chunk[start : len(chunk) - len(suffix)] != value:
        return None
    prefix = chunk[:start]
    line_end = b"\r\n" if len(suffix) == 4 else b"\n"
    data_line = prefix[prefix.rfind(line_end) + len(line_end) :] if line_end in prefix else prefix
    if data_line not in (b"data:", b"data: "):
        return None
    name = skeleton.name
    if data_line == prefix:
        if name != "message":
            return None
        style = prefix
    else:
        event_line = prefix[: len(prefix) - len(data_line) - len(line_end)]
        named = event_line[7:] if event_line.startswith(b"event: ") else event_line[6:]
        if not event_line.startswith(b"event:") or not named or named != name.encode():
            return None
        style = event_line[: len(event_line) - len(named)] + line_end + data_line
    pieces = "".join(skeleton.literals)
    if "\n" in pieces or "\r" in pieces:
        return None  # (an event line holds no stray CR: the name would not be the same)
    first = skeleton.literals[0]
    if data_line == b"data:" and (not first or first[0] in _JSON_WHITESPACE):
        return None  # the parser strips a space there: the data would start otherwise
    return prefix, suffix, style + b"|" + suffix


# -- fitting a framed chunk: its definition, and the native kernel's ------------------------


def _fit_entry(chunk: bytes, entry: Entry) -> Sequence[str] | bool | None:
    """Whether the data of ``chunk``, framed as ``entry``'s chunks are (its head and tail
    already seen), fits ``entry``'s skeleton: the read values' texts when it does, False
    when it does not, None when no skeleton can fit it (not UTF-8: the parser reports it;
    or a line ending where a padding hole could take one: more lines than one)."""
    try:
        data = chunk[entry.prefix_size : len(chunk) - entry.suffix_size].decode()
    except UnicodeDecodeError:
        return None
    if entry.padded and ("\n" in data or "\r" in data):
        return None
    skeleton = entry.skeleton
    cut = len(data) - len(skeleton.literals[-1])
    if cut < len(skeleton.literals[0]):
        return False  # the head and the tail overlap
    values = skeleton.match_holes(data, cut)
    return False if values is None else values


def _fit_entry_natively(chunk: bytes, entry: Entry) -> Sequence[str] | bool | None:
    """``_fit_entry`` by the native kernel (``_kernel.fit_holes``), which reads the bytes
    where the definition decodes them: the same answer (``tests/test_kernel.py``)."""
    assert _FIT_HOLES is not None
    values = _FIT_HOLES(
        chunk,
        entry.prefix_size,
        len(chunk) - entry.suffix_size,
        entry.pieces,
        entry.kind_codes,
        entry.padded,
    )
    if values is None or type(values) is bool:
        return values
    assert not isinstance(values, bool)
    return entry.skeleton.in_order(values) if values else _NO_VALUES


#: The native kernel's ``fit_holes``, where the compiled core runs (``sse.native_kernel``).
_FIT_HOLES: Final[Callable[..., tuple[str, ...] | bool | None] | None] = native_kernel("fit_holes")
#: ``_fit_entry``, natively where the kernel was built.
fit_entry: Final[Callable[[bytes, Entry], Sequence[str] | bool | None]] = (
    _fit_entry if _FIT_HOLES is None else _fit_entry_natively
)
