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
  for, a finding not vouched to come again, or a new phase forgets them all.
* **A finding comes again only when vouched for.** A checker may vouch that the findings
  of a frame come again for any frame of its skeleton (a chunk whose shape is wrong the
  same way each time: the findings name paths and literals, never a hole's text). The
  entry then keeps each finding's rule, severity and message after ``event N``, and a
  fitting frame gets them on its own index and offset. The vouch is the checker's: a rule
  it reports once by its own bookkeeping must never be vouched for. The engine only
  refuses what it can see, a rule flagged ``once_per_stream`` or a finding placed on
  another frame: such a frame forgets the skeletons instead.

Learning a skeleton reads the frame's JSON a token at a time in Python (tens of
microseconds), so a stream whose frames never repeat (a server that stamps each with a new
id) must not pay it on each: after a skeleton is dropped unused, learning waits twice as
many vouched frames as before (``MAX_LEARNING_WAIT`` at most); a hit resets the wait.
A skeleton is its literal pieces (slices of the frame it was learned from) and, between
them, a precompiled pattern per hole: matching is a ``startswith`` per piece and a
``match`` per hole. (One regular expression per skeleton matched a little faster, but
``re.compile``, written in Python, took milliseconds for a chat frame: per stream, since
each stream's id differs.) Memory is bounded: at most ``MAX_SKELETONS`` per stream, each
a few slices of a frame of at most ``MAX_SKELETON_CHARS`` characters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from streamguard.report import Severity

__all__ = [
    "MAX_HOLES",
    "MAX_LEARNING_WAIT",
    "MAX_SKELETONS",
    "MAX_SKELETON_CHARS",
    "Again",
    "Holes",
    "Path",
    "ShapeCache",
    "Skeleton",
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
#: What JSON counts as whitespace (``str.rstrip()`` alone would take more).
_JSON_WHITESPACE: Final = " \t\n\r"
_INTEGER: Final = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")
_SPACE: Final = re.compile(r"[ \t\n\r]*")
_TOKEN: Final = re.compile(
    r"[ \t\n\r]*(?:"
    r'(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<word>true|false|null)"
    r"|(?P<mark>[{}\[\]:,]))",
    re.DOTALL,
)


class Skeleton:
    """The learned frame: its event name, the literal pieces between its holes, and each
    hole's pattern and whether it is read."""

    __slots__ = ("holes", "literals", "name", "order", "read")

    def __init__(
        self,
        name: str,
        literals: tuple[str, ...],
        holes: tuple[re.Pattern[str], ...],
        read: tuple[bool, ...],
        order: tuple[int, ...],
    ) -> None:
        self.name = name
        #: One more than the holes: before the first, between each two, after the last.
        self.literals = literals
        self.holes = holes
        self.read = read
        #: For each value hole, as the checker listed them, its place among those read.
        self.order = order

    def match(self, name: str, data: str) -> Sequence[str] | None:
        """The read holes' texts when ``data`` (an event named ``name``) fits, else None."""
        if name != self.name:
            return None
        literals = self.literals
        head = literals[0]
        if not data.startswith(head):
            return None
        holes = self.holes
        if self.order or len(holes) > 2:
            return self._match_each(data, len(head))
        # One or two holes, none read (a piece of text, perhaps padding): a few calls.
        tail = literals[-1]
        if not data.endswith(tail):
            data = data.rstrip(_JSON_WHITESPACE)  # whitespace may follow the value
            if not data.endswith(tail):
                return None
        cut = len(data) - len(tail)
        position = len(head)
        if cut < position:
            return None
        if len(holes) == 2:
            first = holes[0].match(data, position, cut)
            if first is None:
                return None
            position = first.end()
            middle = literals[1]
            if not data.startswith(middle, position, cut):  # not into the tail's bytes
                return None
            position += len(middle)
        last = holes[-1]
        if last is _SPACE:  # padding: cheaper stripped than matched
            if data[position:cut].strip(_JSON_WHITESPACE):
                return None
        elif last.fullmatch(data, position, cut) is None:
            return None
        return _NO_VALUES

    def _match_each(self, data: str, position: int) -> Sequence[str] | None:
        """``match`` past the first piece, hole by hole."""
        literals = self.literals
        values: list[str] | None = None
        read = self.read
        for number, hole in enumerate(self.holes):
            found = hole.match(data, position)
            if found is None:
                return None
            end = found.end()
            if read[number]:
                if values is None:
                    values = []
                values.append(data[position:end])
            literal = literals[number + 1]
            if not data.startswith(literal, end):
                return None
            position = end + len(literal)
        if position != len(data) and data[position:].strip(_JSON_WHITESPACE):
            return None  # only whitespace may follow the value
        if values is None:
            return _NO_VALUES
        order = self.order
        return values if order == _IN_ORDER[len(order)] else [values[i] for i in order]


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
    long, is not one JSON value, has no hole, lacks a value hole's path, or has a hole's
    path twice (a repeated key: which one the parser keeps is not the skeleton's
    business)."""
    if len(data) > MAX_SKELETON_CHARS:
        return None
    literals: list[str] = []
    patterns: list[re.Pattern[str]] = []
    read_flags: list[bool] = []
    seen: set[Path] = set()
    read_paths: list[Path] = []  # the value holes' paths, in the frame's order
    # One entry per open container: its keys so far (an object) or its next index (an array).
    path: list[str | int] = []
    containers: list[bool] = []  # True: an object
    expecting_key = False
    cut = 0  # where the current literal piece starts
    filled = 0  # text and value holes (whitespace aside)
    position = 0
    end = len(data)
    while position < end:
        token = _TOKEN.match(data, position)
        if token is None:
            if data[position:].strip(_JSON_WHITESPACE):
                return None
            break  # whitespace after the value
        start = token.start(token.lastgroup or 0)
        if start > position and data[position:start] != " ":
            # Whitespace between tokens: any amount (none included) gives the same value.
            # (One space, as ``json.dumps`` separates, stays in the piece: a hole each
            # would leave a Python server's frames with more holes than a skeleton takes.)
            if len(patterns) >= MAX_HOLES:
                return None
            literals.append(data[cut:position])
            patterns.append(_SPACE)
            read_flags.append(False)
            cut = start
        position = token.end()
        mark = token.group("mark")
        if mark is not None:
            if mark == "{":
                containers.append(True)
                path.append("")
                expecting_key = True
            elif mark == "[":
                containers.append(False)
                path.append(0)
                expecting_key = False
            elif mark in "}]":
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
            key = token.group("string")
            if key is None or "\\" in key:
                return None  # an escaped key is not worth learning
            path[-1] = key[1:-1]
            expecting_key = False
            continue
        here = tuple(path)
        if here in text_holes:
            group, pattern, read = "string", _STRING, False
        elif here in value_holes:
            if token.group("string") is not None:
                group, pattern, read = "string", _STRING, True
            else:
                group, pattern, read = "number", _INTEGER, True
        else:
            continue
        text = token.group(group)
        if text is None or pattern.fullmatch(text) is None:
            continue  # not what the hole holds (a null, a float): part of the skeleton
        if here in seen or len(patterns) >= MAX_HOLES:
            return None
        seen.add(here)
        filled += 1
        literals.append(data[cut : token.start(group)])
        patterns.append(pattern)
        read_flags.append(read)
        if read:
            read_paths.append(here)
        cut = position
    if containers or not filled or len(read_paths) != len(value_holes):
        return None  # (a value hole's path missing, or holding neither kind)
    literals.append(data[cut:].rstrip(_JSON_WHITESPACE))
    order = tuple(read_paths.index(wanted) for wanted in value_holes)
    return Skeleton(name, tuple(literals), tuple(patterns), tuple(read_flags), order)


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


class _Entry:
    __slots__ = ("again", "hits", "skeleton", "token")

    def __init__(self, skeleton: Skeleton, token: object, again: tuple[Again, ...]) -> None:
        self.skeleton = skeleton
        self.token = token
        self.again = again
        self.hits = 0


class Holes:
    """What a checker vouches for a kind of frame: the paths of its text holes (checked to
    be JSON strings, not read) and of its value holes (an integer or a string, whose texts
    ``repeat_event`` gets in this order)."""

    __slots__ = ("text", "values")

    def __init__(self, text: tuple[Path, ...], values: tuple[Path, ...] = ()) -> None:
        self.text: frozenset[Path] = frozenset(text)
        self.values = values


class ShapeCache:
    """A stream's skeletons, with the checker's token for each, and the learning wait."""

    __slots__ = ("countdown", "entries", "skipped", "wait")

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        #: Frames that fit a skeleton, over the stream's life (for tests and benchmarks).
        self.skipped = 0
        #: Vouched frames to let pass before the next attempt to learn, and the last wait.
        self.countdown = 0
        self.wait = 0

    def find(self, name: str, data: str) -> tuple[object, Sequence[str], tuple[Again, ...]] | None:
        """The token, read values and findings again of the skeleton ``data`` fits, if one
        does."""
        for entry in self.entries:
            values = entry.skeleton.match(name, data)
            if values is not None:
                entry.hits += 1
                self.skipped += 1
                self.wait = 0
                return entry.token, values, entry.again
        return None

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
        if len(entries) >= MAX_SKELETONS and entries.pop(0).hits == 0:
            self._back_off()
        entries.append(_Entry(skeleton, token, again))

    def forget(self) -> None:
        """Something changed: no skeleton holds any more."""
        entries = self.entries
        if entries:
            if any(entry.hits == 0 for entry in entries):
                self._back_off()
            entries.clear()

    def _back_off(self) -> None:
        self.wait = min(self.wait * 2 or 1, MAX_LEARNING_WAIT)
        self.countdown = self.wait
