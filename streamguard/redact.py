"""Redaction of a stream's body for a capture: structure kept, content replaced (issue 48).

A ``Redactor`` is fed one stream's body chunks in order and returns, for each, bytes that
replace what it has read so far: the redacted body is exactly as long as the body, byte for
byte in the same places, so that framing, event sizes, byte offsets and every rule judge
the capture as they judged the stream. Pure: no I/O, no clock; the same output for every
way of cutting the same body into chunks (a frame, a line, a string or a UTF-8 character cut
anywhere). What it holds back to decide is bounded (a field name, a short value, an escape,
a partial character: ``MAX_HELD_BYTES`` at most), never sized by the wire.

What is kept, and why:

- the SSE framing: line ends, field names (``data``, ``event``, ``id``, ``retry``), the
  ``retry`` value, a byte-order mark;
- JSON structure: brackets, commas, colons, whitespace, object keys, numbers, ``true``,
  ``false`` and ``null``; escapes stay escapes (``\\n`` stays ``\\n``, a ``\\u`` escape
  stays one, a surrogate escape stays a high or a low half), and bytes that are not UTF-8 or
  a raw control character in a string stay as they are, so that what did not parse still
  does not, and what did still does into the same shape;
- the protocols' vocabulary where the rules read it: the value of a discriminator key
  (``DISCRIMINATOR_KEYS``: ``type``, ``finish_reason``, ``role``...), an ``event:`` name
  and a sentinel (``[DONE]``) are kept when they are words of the registered protocols
  (their route tables, sentinels, event names and the string constants of their modules);
  another value of such a key becomes a token, so that distinct unknown types stay distinct.

What is replaced: every other string value, comment and non-JSON data, character by
character with a placeholder of its class (``CONTENT_MAP``: a lower-case letter becomes
``x``, an upper-case one ``X``, a digit ``1`` or ``0`` as it was zero or not, a character
of two, three or four UTF-8 bytes one of as many bytes); the map is a function of the
character alone, so that text split into deltas still joins into the redaction of the whole
(Responses compares a ``.done`` text with its deltas; what such a comparison can no longer
tell apart is ``CONTENT_RULES``'). Ids (``is_id_key``: ``id``,
``*_id``, ``*Id``, and the SSE ``id:`` field) become per-stream tokens of the same length
and class, equal for equal ids and distinct for distinct ones (up to ``MAX_TOKENS`` distinct
values a stream; past it they are replaced as content). JSON carried in a string that a
checker parses (``NESTED_JSON``: chat's tool-call ``arguments``, Anthropic's
``partial_json``) is redacted as JSON, fragment after fragment of the same tool call, so
that arguments that parsed still parse into the same shape, and the ones that did not
still do not.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Final

__all__ = [
    "CONTENT_MAP",
    "CONTENT_RULES",
    "DISCRIMINATOR_KEYS",
    "MAX_HELD_BYTES",
    "MAX_TOKENS",
    "NESTED_JSON",
    "Redactor",
    "is_id_key",
    "redact",
    "vocabulary",
    "word_keys",
]

#: The rules that compare two texts beyond their shape (a ``.done`` text with its joined
#: deltas): two texts that differ only in characters of one class (``ab`` sent as ``ba``)
#: redact alike, so a capture may lose such a finding. It never gains one: equal texts
#: redact alike too.
CONTENT_RULES: Final = frozenset({"done_text_mismatch"})
#: Keys whose string values name a kind, a phase or an end that the rules read: kept when
#: they are a protocol's word, else tokenized (distinct stays distinct).
DISCRIMINATOR_KEYS: Final = frozenset(
    {
        "type",
        "event",
        "object",
        "role",
        "finish_reason",
        "finishReason",
        "stop_reason",
        "status",
        "state",
        "kind",
        "method",
        "jsonrpc",
        "blockReason",
        "phase",
        # JSON Patch (AG-UI's state deltas): the operation and the pointers into the state,
        # whose keys are kept.
        "op",
        "path",
        "from",
    }
)
#: Keys of a request whose word values (``_WORD_VALUE``) the checks read, besides the
#: discriminators: the request facts that are words.
REQUEST_WORD_KEYS: Final = frozenset({"http_method", "model", "starting_after", "stream_mode"})
#: String fields a protocol's checker parses as JSON, joined across the frames of one
#: entity (the ``index`` values around them tell which).
NESTED_JSON: Final[dict[str, frozenset[str]]] = {
    "openai_chat": frozenset({"arguments"}),
    "anthropic": frozenset({"partial_json"}),
}
#: Distinct ids (and unknown discriminator values) tokenized per stream.
MAX_TOKENS: Final = 4096
#: Nested JSON fragments followed per stream (one per tool call).
_MAX_NESTED: Final = 256
#: The longest value held back to be compared or tokenized; a longer one is content.
_MAX_VALUE: Final = 256
_MAX_NAME: Final = 16
_MAX_DEPTH: Final = 64
_MAX_KEY: Final = 64
#: What a redactor may hold back at most, whatever it is fed.
MAX_HELD_BYTES: Final = _MAX_VALUE + _MAX_KEY + 16

_LITERALS: Final = frozenset({b"true", b"false", b"null", b"NaN", b"Infinity"})
_FIELDS: Final = frozenset({b"data", b"event", b"id", b"retry"})
_JSON_START: Final = frozenset(b'{["-0123456789tfnNI')
_BOM: Final = b"\xef\xbb\xbf"
_PLACEHOLDERS: Final = {2: "é".encode(), 3: "一".encode(), 4: "😀".encode()}


def _content_map() -> bytes:
    table = bytearray(range(256))
    for c in range(ord("a"), ord("z") + 1):
        table[c] = ord("w")
    for c in range(ord("A"), ord("Z") + 1):
        table[c] = ord("A")
    for c in range(ord("1"), ord("9") + 1):
        table[c] = ord("4")
    return bytes(table)


#: ASCII content, byte for byte: a lower-case letter to ``w``, an upper-case one to ``A``,
#: a digit to ``4`` (``0`` stays: a number keeps its leading zero, or its lack of one), the
#: rest (spaces, punctuation, controls) as it was. ``A``, ``w``, ``0`` and ``4`` are base64
#: digits whose low bits are zero, so a canonical base64 value (Gemini's
#: ``thoughtSignature``, which the checker decodes and encodes again) stays canonical.
CONTENT_MAP: Final = _content_map()
#: A run of plain ASCII content inside a JSON string.
_PLAIN_RUN: Final = re.compile(rb'[^"\\\x80-\xff]+')
_TEXT_RUN: Final = re.compile(rb"[^\r\n\x80-\xff]+")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_EVENT_NAME: Final = re.compile(rb"[A-Za-z0-9_./][A-Za-z0-9_.:/|-]{0,255}")
_NUMBERED: Final = re.compile(rb"[0-9_.:/-]*")
#: A discriminator's value that is a word (a kind, a state, a method), not text.
_WORD_VALUE: Final = re.compile(rb"[A-Za-z0-9_./][A-Za-z0-9_.:/-]{0,63}")


def is_id_key(key: str) -> bool:
    """Whether a value under ``key`` is an id the checkers compare for equality (or a list
    of them: ``*_ids``, the JSON-RPC ids a request's facts keep)."""
    if key in ("id", "ids"):
        return True
    if key.endswith(("_id", "_ids")):
        return True
    return len(key) > 3 and key.endswith(("Id", "Ids"))


_VOCABULARY: set[bytes] = set()
_SENTINELS: set[bytes] = set()
#: ``DISCRIMINATOR_KEYS`` and the names of the protocols' enum fields.
_ENUM_KEYS: set[bytes] = set()


def _strings(value: object, into: set[bytes]) -> None:
    if isinstance(value, str):
        if 0 < len(value) <= 64:
            into.add(value.encode())
    elif isinstance(value, dict):
        for key in value:
            _strings(key, into)
    elif isinstance(value, frozenset | set | tuple | list):
        for item in value:
            if isinstance(item, str | tuple):
                _strings(item, into)


def _attribute_names(value: object) -> Iterable[str]:
    """The attributes of a protocol module's object: its ``__slots__``, a compiled class's
    (mypyc's native classes have neither slots nor a ``__dict__`` to list, but name their
    attributes in ``__mypyc_attrs__``), or its ``__dict__``'s."""
    kind = type(value)
    names = getattr(kind, "__slots__", None) or getattr(kind, "__mypyc_attrs__", None)
    if names is not None:
        return (names,) if isinstance(names, str) else names
    return list(getattr(value, "__dict__", {}))


def vocabulary() -> frozenset[bytes]:
    """The words of the registered protocols: their route tables' types, sentinels, event
    names, the string constants of their modules (documented finish reasons, states, types)
    and the values of every enum field their shapes declare, which a discriminator's value
    or an ``event:`` name keeps. The enum fields' names join ``DISCRIMINATOR_KEYS``."""
    from streamguard.protocols import CHECKERS, load_plugins
    from streamguard.protocols._base import KNOWN_EVENT_NAMES
    from streamguard.protocols._fields import Field

    load_plugins()
    words: set[bytes] = set()
    sentinels: set[bytes] = set()
    keys: set[bytes] = set()
    seen: set[int] = set()

    def walk(value: object, depth: int) -> None:
        if depth > 12 or id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, Field):
            if value.values is not None:
                keys.add(value.name.encode())
                _strings(value.values, words)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, tuple | list | frozenset | set):
            for item in value:
                walk(item, depth + 1)
        elif type(value).__module__.startswith("streamguard.protocols"):
            for name in _attribute_names(value):
                walk(getattr(value, name, None), depth + 1)

    for checker in CHECKERS.values():
        _strings(dict(checker.ROUTES), words)
        _strings(dict(checker.SENTINELS), sentinels)
        module = sys.modules.get(checker.__module__)
        if isinstance(module, ModuleType):
            for name, value in vars(module).items():
                if name.lstrip("_").isupper():
                    _strings(value, words)
                if not isinstance(value, type | ModuleType) and not callable(value):
                    walk(value, 0)
    _strings(sorted(KNOWN_EVENT_NAMES), words)
    words |= sentinels
    _VOCABULARY.clear()
    _VOCABULARY.update(words)
    _SENTINELS.clear()
    _SENTINELS.update(sentinels)
    _ENUM_KEYS.clear()
    _ENUM_KEYS.update(keys | DISCRIMINATOR_KEYS_BYTES)
    return frozenset(words)


def word_keys() -> frozenset[str]:
    """The keys whose word values are kept: ``DISCRIMINATOR_KEYS`` and the protocols' enum
    fields (``vocabulary`` finds them)."""
    if not _ENUM_KEYS:
        vocabulary()
    return frozenset(key.decode() for key in _ENUM_KEYS)


def _utf8_length(lead: int) -> int:
    """How many bytes the UTF-8 character ``lead`` starts (0: not a lead byte)."""
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _continues(held: bytes | bytearray, byte: int) -> bool:
    """Whether ``byte`` may follow ``held``, the start of a UTF-8 character."""
    if not 0x80 <= byte <= 0xBF:
        return False
    if len(held) == 1:
        lead = held[0]
        if lead == 0xE0:
            return byte >= 0xA0
        if lead == 0xED:
            return byte <= 0x9F
        if lead == 0xF0:
            return byte >= 0x90
        if lead == 0xF4:
            return byte <= 0x8F
    return True


class _Chars:
    """Content redacted a character at a time, bytes that are not UTF-8 kept as they are;
    a character cut across chunks is held (three bytes at most)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = bytearray()

    def byte(self, byte: int, out: bytearray) -> None:
        held = self.held
        if held:
            if _continues(held, byte):
                held.append(byte)
                if len(held) == _utf8_length(held[0]):
                    out += held if bytes(held) == _BOM else _PLACEHOLDERS[len(held)]
                    held.clear()
                return
            out += held  # not UTF-8: kept, so that it is still reported
            held.clear()
        if byte < 0x80:
            out.append(CONTENT_MAP[byte])
        elif _utf8_length(byte):
            held.append(byte)
        else:
            out.append(byte)

    def flush(self, out: bytearray) -> None:
        out += self.held
        self.held.clear()


def _map_text(data: bytes | bytearray, out: bytearray) -> None:
    """Whole content (no character cut) redacted into ``out``."""
    chars = _Chars()
    for byte in data:
        chars.byte(byte, out)
    chars.flush(out)


class _Tokens:
    """A stream's ids and unknown words, each with its token: same length and classes,
    distinct for distinct values (a counter written into its letters and digits)."""

    __slots__ = ("given", "taken")

    def __init__(self) -> None:
        self.given: dict[bytes, bytes] = {}
        self.taken: set[bytes] = set()

    def token(self, value: bytes) -> bytes | None:
        """``value``'s token; ``None`` when it cannot have one (not plain ASCII, no letter
        or digit to write in, or the stream's tokens used up): redact it as content."""
        known = self.given.get(value)
        if known is not None:
            return known
        if len(self.given) >= MAX_TOKENS or not value.isascii():
            return None
        slots = [i for i, c in enumerate(value) if chr(c).isalnum()]
        if not slots:
            self.given[value] = value  # no letter or digit: nothing to hide
            self.taken.add(value)
            return value
        number = len(self.given)
        while True:
            candidate = self._render(value, slots, number)
            if candidate is None:
                return None
            if candidate not in self.taken:
                break
            number += 1
        self.given[value] = candidate
        self.taken.add(candidate)
        return candidate

    @staticmethod
    def _render(value: bytes, slots: list[int], number: int) -> bytes | None:
        out = bytearray(value.translate(CONTENT_MAP))
        for i in reversed(slots):
            c = value[i]
            if 0x30 <= c <= 0x39:
                number, digit = divmod(number, 10)
                out[i] = 0x30 + digit
            else:
                number, digit = divmod(number, 26)
                out[i] = (0x41 if c <= 0x5A else 0x61) + digit
            if not number:
                return bytes(out)
        return None


# -- JSON --------------------------------------------------------------------------------

# Lexer states.
_OUT: Final = 0
_NUMBER: Final = 1
_WORD: Final = 2
_STRING: Final = 3


class _Frame:
    """An open object or array: its key (the one it sits under, for an array), whether a
    key comes next (an object's), and the ``index`` it holds."""

    __slots__ = ("index", "is_object", "key", "want_key")

    def __init__(self, is_object: bool, key: bytes) -> None:
        self.is_object = is_object
        self.key = key
        self.want_key = is_object
        self.index: bytes | None = None


class _Json:
    """One event's data read as JSON: structure kept, string values redacted by their key.

    A string value is one of: content (mapped as it streams), held (a key's discriminator
    or id, up to ``_MAX_VALUE`` bytes, then decided), or nested JSON (decoded, redacted by
    the entity's inner lexer, encoded back escape for escape).
    """

    __slots__ = (
        "chars",
        "digits",
        "escape",
        "held",
        "inner",
        "key",
        "nested",
        "overflow",
        "owner",
        "role",
        "stack",
        "state",
        "string_key",
    )

    def __init__(self, owner: Redactor) -> None:
        self.owner = owner
        self.state = _OUT
        self.stack: list[_Frame] = []
        self.overflow = 0
        self.chars = _Chars()
        #: A bare word or a number being read, an escape being read.
        self.held = bytearray()
        self.escape = bytearray()
        self.digits = bytearray()
        #: The string being read: "key", "content", "hold", "nested".
        self.role = ""
        self.key = bytearray()
        self.string_key = b""
        self.nested: _Inner | None = None
        self.inner = bytearray()  # a nested string's pending UTF-8 bytes

    # -- structure --

    def _value_key(self) -> bytes:
        if not self.stack or self.overflow:
            return b""
        top = self.stack[-1]
        return top.key

    def _open(self, is_object: bool) -> None:
        if len(self.stack) >= _MAX_DEPTH or self.overflow:
            self.overflow += 1
            return
        self.stack.append(_Frame(is_object, self._value_key()))

    def _close(self) -> None:
        if self.overflow:
            self.overflow -= 1
        elif self.stack:
            self.stack.pop()

    def _start_string(self) -> None:
        top = self.stack[-1] if self.stack and not self.overflow else None
        if top is not None and top.is_object and top.want_key:
            self.role = "key"
            self.key.clear()
            top.want_key = False
            return
        key = self._value_key()
        self.string_key = key
        owner = self.owner
        if key in owner.nested_keys:
            self.role = "nested"
            indices = tuple(f.index for f in self.stack if f.index is not None)
            self.nested = owner.inner(key, indices)
        elif key in _ENUM_KEYS or _is_id(key):
            self.role = "hold"
            self.held.clear()
        else:
            self.role = "content"

    def feed(self, data: bytes | bytearray, out: bytearray) -> None:
        i = 0
        n = len(data)
        while i < n:
            if self.state == _STRING and not self.escape and self.role != "nested":
                # A run of plain ASCII inside a string, taken at once (as byte by byte).
                match = _PLAIN_RUN.match(data, i)
                if match is not None:
                    run = match.group()
                    role = self.role
                    if role == "content":
                        self.chars.flush(out)
                        out += run.translate(CONTENT_MAP)
                    elif role == "key":
                        room = _MAX_KEY + 1 - len(self.key)
                        if room > 0:
                            self.key += run[:room]
                        out += run
                    elif len(self.held) + len(run) <= _MAX_VALUE:
                        self.held += run
                    else:
                        self.byte(data[i], out)  # past the bound: as byte by byte
                        i += 1
                        continue
                    i = match.end()
                    continue
            self.byte(data[i], out)
            i += 1

    def byte(self, byte: int, out: bytearray) -> None:
        state = self.state
        if state == _STRING:
            self._string_byte(byte, out)
        elif state == _NUMBER:
            if byte in b"0123456789+-.eE":
                out.append(byte)
                if len(self.digits) < 24:
                    self.digits.append(byte)
                return
            self._end_number()
            self._out_byte(byte, out)
        elif state == _WORD:
            if 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A:
                held = self.held
                if held[:1] == b"~":  # a word too long to be a literal: mapped as it comes
                    out.append(CONTENT_MAP[byte])
                elif len(held) < 8:
                    held.append(byte)
                else:
                    out += held.translate(CONTENT_MAP)
                    out.append(CONTENT_MAP[byte])
                    held[:] = b"~"
                return
            self._end_word(out)
            self._out_byte(byte, out)
        else:
            self._out_byte(byte, out)

    def _end_number(self) -> None:
        self.state = _OUT
        top = self.stack[-1] if self.stack and not self.overflow else None
        if top is not None and top.is_object and top.key == b"index":
            top.index = bytes(self.digits)
        self.digits.clear()

    def _end_word(self, out: bytearray) -> None:
        held = self.held
        if held.startswith(b"~"):
            pass  # already written
        elif bytes(held) in _LITERALS:
            out += held
        else:
            out += held.translate(CONTENT_MAP)
        held.clear()
        self.state = _OUT

    def _out_byte(self, byte: int, out: bytearray) -> None:
        self.state = _OUT
        top = self.stack[-1] if self.stack and not self.overflow else None
        held = self.chars.held
        if held and not _continues(held, byte):
            self.chars.flush(out)  # not UTF-8: kept where it was, before this byte
        if byte >= 0x80 or held:
            self.chars.byte(byte, out)
            return
        if byte == 0x22:  # "
            out.append(byte)
            self.state = _STRING
            self._start_string()
            return
        if byte == 0x7B:  # {
            self._open(True)
        elif byte == 0x5B:  # [
            self._open(False)
        elif byte in b"}]":
            self._close()
        elif byte == 0x3A:  # :
            pass
        elif byte == 0x2C:  # ,
            if top is not None and top.is_object:
                top.want_key = True
        elif byte == 0x2D or 0x30 <= byte <= 0x39:
            self.state = _NUMBER
            self.digits.append(byte)
        elif 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A:
            self.state = _WORD
            self.held.append(byte)
            return
        out.append(byte)

    # -- strings --

    def _string_byte(self, byte: int, out: bytearray) -> None:
        role = self.role
        if role == "key":
            if self.escape or byte == 0x5C:
                self.escape += b"." if self.escape else b"\\"
                if len(self.escape) >= 2:  # kept as written: only the end of the key matters
                    self.escape.clear()
            elif byte == 0x22:
                self.state = _OUT
                top = self.stack[-1] if self.stack and not self.overflow else None
                if top is not None:
                    top.key = bytes(self.key) if len(self.key) <= _MAX_KEY else b""
                out.append(byte)
                return
            if len(self.key) <= _MAX_KEY:
                self.key.append(byte)
            out.append(byte)
            return
        if role == "hold":
            if byte == 0x22 and not self._held_escape_open():
                self._decide_held(out)
                out.append(byte)
                self.state = _OUT
                return
            self.held.append(byte)
            if len(self.held) > _MAX_VALUE:
                self._release_held(out)
            return
        if role == "nested":
            self._nested_byte(byte, out)
            return
        # content
        escape = self.escape
        if escape:
            escape.append(byte)
            self._escape_step(out)
            return
        if byte == 0x5C:
            self.chars.flush(out)
            escape.append(byte)
        elif byte == 0x22:
            self.chars.flush(out)
            out.append(byte)
            self.state = _OUT
        else:
            self.chars.byte(byte, out)

    def _held_escape_open(self) -> bool:
        """Whether the held value ends inside an escape (an odd run of backslashes)."""
        held = self.held
        count = 0
        for i in range(len(held) - 1, -1, -1):
            if held[i] != 0x5C:
                break
            count += 1
        return count % 2 == 1

    def _decide_held(self, out: bytearray) -> None:
        value = bytes(self.held)
        self.held.clear()
        owner = self.owner
        if self.string_key in _ENUM_KEYS and (value in _VOCABULARY or _WORD_VALUE.fullmatch(value)):
            out += value
            return
        token = owner.tokens.token(value) if b"\\" not in value else None
        if token is not None:
            out += token
        else:
            self._content(value, out)

    def _release_held(self, out: bytearray) -> None:
        """A held value grew past its bound: content from here on."""
        value = bytes(self.held)
        self.held.clear()
        self.role = "content"
        for byte in value:
            self._string_byte(byte, out)

    def _content(self, value: bytes, out: bytearray) -> None:
        """A whole string's content (its escapes complete) redacted into ``out``."""
        saved = self.role
        self.role = "content"
        for byte in value:
            self._string_byte(byte, out)
        self.chars.flush(out)
        if self.escape:
            out += self.escape
            self.escape.clear()
        self.role = saved
        self.state = _STRING

    def _escape_step(self, out: bytearray) -> None:
        """An escape in content: ``\\n`` and its kind kept, a ``\\u`` escape mapped."""
        escape = self.escape
        if len(escape) == 2:
            if escape[1] != 0x75:  # not \u: kept as it is (valid or not)
                out += escape
                escape.clear()
            return
        if escape[-1] not in _HEX:
            out += escape  # a bad \u escape: kept, so that it is still bad
            escape.clear()
            return
        if len(escape) == 6:
            out += _map_escape(bytes(escape))
            escape.clear()

    # -- nested JSON --

    def _nested_byte(self, byte: int, out: bytearray) -> None:
        """A byte of a string whose decoded text is JSON: decoded, redacted by the
        entity's inner lexer, written back in the same form."""
        inner = self.nested
        assert inner is not None
        escape = self.escape
        if escape:
            escape.append(byte)
            if len(escape) == 2 and escape[1] != 0x75:
                decoded = _SIMPLE_ESCAPES.get(escape[1])
                if decoded is None:
                    out += escape
                else:
                    inner.char(decoded)
                    out += escape  # kept: an escape stays the escape it was
                escape.clear()
            elif len(escape) > 2 and escape[-1] not in _HEX:
                out += escape
                escape.clear()
            elif len(escape) == 6:
                code = int(escape[2:].decode(), 16)
                mapped = inner.char(chr(code))
                out += escape if mapped is None else _escape_of(mapped, escape)
                escape.clear()
            return
        pending = self.inner
        if pending:
            if _continues(pending, byte):
                pending.append(byte)
                if len(pending) == _utf8_length(pending[0]):
                    text = bytes(pending).decode()
                    mapped = inner.char(text)
                    out += pending if mapped is None else mapped.encode()
                    pending.clear()
                return
            out += pending
            pending.clear()
        if byte == 0x5C:
            escape.append(byte)
        elif byte == 0x22:
            out.append(byte)
            self.state = _OUT
        elif byte >= 0x80:
            if _utf8_length(byte):
                pending.append(byte)
            else:
                out.append(byte)
        else:
            mapped = inner.char(chr(byte))
            out += bytes([byte]) if mapped is None else mapped.encode()

    def end_line(self, out: bytearray) -> None:
        """The data line ends: nothing is held across a line end."""
        if self.state == _WORD:
            self._end_word(out)
        elif self.state == _NUMBER:
            self._end_number()
        elif self.state == _STRING:
            if self.role == "hold":
                self._release_held(out)
            elif self.role == "key":
                pass
            out += self.escape
            self.escape.clear()
            out += self.inner
            self.inner.clear()
        self.chars.flush(out)

    def next_line(self) -> None:
        """Another data line of the same event: its data is joined with a newline."""
        # Outside a string a newline is whitespace; inside one, a raw newline the parser
        # rejects: either way nothing to redact.


DISCRIMINATOR_KEYS_BYTES: Final = frozenset(key.encode() for key in DISCRIMINATOR_KEYS)
_SIMPLE_ESCAPES: Final = {
    0x22: '"',
    0x5C: "\\",
    0x2F: "/",
    0x62: "\b",
    0x66: "\f",
    0x6E: "\n",
    0x72: "\r",
    0x74: "\t",
}


def _is_id(key: bytes) -> bool:
    return bool(key) and is_id_key(key.decode("utf-8", "replace"))


def _map_code(code: int) -> int:
    """A ``\\u`` escape's character redacted: the class kept, a surrogate half kept a half."""
    if 0xD800 <= code <= 0xDBFF:
        return 0xD83D
    if 0xDC00 <= code <= 0xDFFF:
        return 0xDE00
    if code < 0x80:
        return CONTENT_MAP[code]
    if code == 0xFEFF:
        return code
    return 0xE9 if code < 0x800 else 0x4E00


def _map_escape(escape: bytes) -> bytes:
    code = int(escape[2:].decode(), 16)
    return b"\\u%04x" % _map_code(code)


def _escape_of(mapped: str, escape: bytearray) -> bytes:
    return b"\\u%04x" % ord(mapped) if len(escape) == 6 else mapped.encode()


class _Inner:
    """JSON inside a string (a tool call's arguments), read as its checker joins it: the
    fragments of one entity in order. ``char`` says what each decoded character becomes:
    ``None`` to keep it, else its replacement. Structure, escapes and the literals are
    kept; string content, and a number's digits (the tool's arguments are content), are
    mapped as a string's, which keeps what parsed parsing and what did not failing."""

    __slots__ = ("escape", "state", "word")

    def __init__(self) -> None:
        self.state = _OUT
        self.escape = 0  # characters of an escape still to come
        self.word = ""

    def char(self, char: str) -> str | None:
        code = ord(char)
        state = self.state
        if state == _STRING:
            if self.escape:
                self.escape -= 1
                if self.escape == 4 and char != "u":
                    self.escape = 0
                return None  # an escape's letters and digits kept: its hex must stay hex
            if char == "\\":
                self.escape = 5
                return None
            if char == '"':
                self.state = _OUT
                return None
            return _mapped(code)
        if state == _NUMBER:
            if char in "0123456789+-.eE":
                return _mapped(code) if char.isdigit() else None
            self.state = _OUT
        elif state == _WORD:
            if char.isascii() and char.isalpha():
                if len(self.word) < 8:
                    self.word += char
                return self._literal_prefix(char)
            self.state = _OUT
            self.word = ""
        if char == '"':
            self.state = _STRING
            return None
        if char == "-" or (char.isascii() and char.isdigit()):
            self.state = _NUMBER
            return _mapped(code)
        if code < 0x80 and char.isalpha():
            self.state = _WORD
            self.word = char
            return self._literal_prefix(char)
        return _mapped(code) if code >= 0x80 else None

    def _literal_prefix(self, char: str) -> str | None:
        """A letter outside a string: kept while the word is a literal's start (``true``),
        mapped otherwise (a word that is no literal is not JSON either way)."""
        word = self.word
        for literal in ("true", "false", "null"):
            if literal.startswith(word):
                return None
        return chr(CONTENT_MAP[ord(char)])


def _mapped(code: int) -> str | None:
    """A decoded character of content redacted (``None``: kept as it is)."""
    if code < 0x80:
        mapped = CONTENT_MAP[code]
        return None if mapped == code else chr(mapped)
    if 0xD800 <= code <= 0xDFFF:
        return None
    if code == 0xFEFF:
        return None
    if code < 0x800:
        return "é"
    if code < 0x10000:
        return "一"
    return "😀"


# -- the stream --------------------------------------------------------------------------

# Line states.
_NAME: Final = 0
_VALUE: Final = 1


class Redactor:
    """One stream's body redacted as it is fed (the module docstring says what is kept).

    ``protocol`` is the stream's protocol (its report's), which says which strings hold
    JSON its checker parses. ``feed`` returns the redaction of what it has read so far,
    minus what it holds to decide (``MAX_HELD_BYTES`` at most); ``close`` returns the rest.
    The outputs joined are exactly as long as the inputs joined.
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_field",
        "_first_data",
        "_held",
        "_name",
        "_nested",
        "_state",
        "_text",
        "nested_keys",
        "tokens",
    )

    def __init__(self, protocol: str = "sse") -> None:
        if not _VOCABULARY:
            vocabulary()
        self.nested_keys: frozenset[bytes] = frozenset(
            key.encode() for key in NESTED_JSON.get(protocol, frozenset())
        )
        self.tokens = _Tokens()
        self._nested: dict[tuple[bytes, tuple[bytes, ...]], _Inner] = {}
        self._state = _NAME
        self._after_cr = False
        self._name = bytearray()
        self._field = b""
        #: The value of an ``event:``/``id:`` line, or the start of an event's first data
        #: line (a sentinel?), held to decide.
        self._held = bytearray()
        self._first_data = True
        #: This event's data: undecided (``None`` until its first byte that is not a
        #: space), read as JSON, or as text.
        self._data: _Json | None = None
        self._text: _Chars | None = None

    def inner(self, key: bytes, indices: tuple[bytes, ...]) -> _Inner:
        """The inner lexer of the entity ``indices`` name, for its ``key`` fragments."""
        found = self._nested.get((key, indices))
        if found is None:
            found = _Inner()
            if len(self._nested) < _MAX_NESTED:  # past it, each fragment read alone
                self._nested[(key, indices)] = found
        return found

    def redact_json(self, value: object, key: str = "") -> object:
        """A parsed JSON value (the request a stream answers) redacted as the body's JSON
        is, with the same tokens: an id the request sends and the stream answers stays
        equal to it."""
        if isinstance(value, dict):
            return {k: self.redact_json(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_json(item, key) for item in value]
        if not isinstance(value, str):
            return value
        raw = value.encode("utf-8", "surrogatepass")
        out = bytearray()
        word = key.encode() in _ENUM_KEYS or key in REQUEST_WORD_KEYS
        if word and (raw in _VOCABULARY or _WORD_VALUE.fullmatch(raw)):
            return value
        token = self.tokens.token(raw) if word or is_id_key(key) else None
        if token is not None:
            return token.decode()
        _map_text(raw, out)
        return out.decode("utf-8", "surrogatepass")

    def feed(self, chunk: bytes) -> bytes:
        out = bytearray()
        i = 0
        n = len(chunk)
        while i < n:
            byte = chunk[i]
            if self._after_cr:
                self._after_cr = False
                if byte == 0x0A:  # the LF of a CRLF
                    out.append(byte)
                    i += 1
                    continue
            if byte == 0x0A or byte == 0x0D:
                self._end_line(out)
                out.append(byte)
                self._after_cr = byte == 0x0D
                i += 1
                continue
            if self._state == _VALUE and self._field == b"data" and not self._held:
                data = self._data
                if data is not None:
                    end = _line_end(chunk, i)
                    data.feed(chunk[i:end], out)
                    i = end
                    continue
                if self._text is not None:
                    end = _line_end(chunk, i)
                    text = self._text
                    for b in chunk[i:end]:
                        text.byte(b, out)
                    i = end
                    continue
            self._byte(byte, out)
            i += 1
        return bytes(out)

    def close(self) -> bytes:
        """The rest of the redaction: what was held to decide, as it is now decided."""
        out = bytearray()
        self._end_line(out)
        return bytes(out)

    def gap(self) -> bytes:
        """Bytes were left out here (a capture's cap): return what was held (as ``close``),
        and read what follows as the start of a line of a new event, with the stream's
        tokens kept. Its first line, cut anywhere, is then redacted as a field no parser
        reads: content never passes a gap."""
        rest = self.close()
        self._after_cr = False
        self._end_event()
        return rest

    # -- lines --

    def _byte(self, byte: int, out: bytearray) -> None:
        if self._state == _NAME:
            if byte == 0x3A:  # :
                self._name_done(out)
                out.append(byte)
                self._state = _VALUE
                return
            self._name.append(byte)
            if len(self._name) > _MAX_NAME:
                self._name_done(out)
                self._state = _VALUE
            return
        field = self._field
        if field == b"data":
            self._data_byte(byte, out)
        elif field in (b"event", b"id"):
            self._held.append(byte)
            if len(self._held) > _MAX_VALUE:
                _map_text(self._held, out)
                self._held.clear()
                self._field = b"?"
        elif field == b"retry":
            out.append(byte)
        else:
            self._comment(byte, out)

    def _comment(self, byte: int, out: bytearray) -> None:
        if self._text is None:
            self._text = _Chars()
        self._text.byte(byte, out)

    def _name_done(self, out: bytearray) -> None:
        name = bytes(self._name)
        self._name.clear()
        if name in _FIELDS or (name.startswith(_BOM) and name[3:] in _FIELDS):
            out += name  # a BOM that starts the stream is the parser's to strip
            self._field = name.removeprefix(_BOM)
        else:
            # A comment (no name) or a field no parser reads, reported once per name.
            token = self.tokens.token(name) if len(name) <= _MAX_NAME else None
            if token is None:
                _map_text(name, out)
            else:
                out += token
            self._field = b"?"
        if self._field == b"data" and self._data is not None:
            self._data.next_line()
        if self._field != b"data" or self._data is None:
            self._text = None

    def _data_byte(self, byte: int, out: bytearray) -> None:
        if self._first_data:
            self._held.append(byte)
            if len(self._held) > 16:
                self._release_data(out, sentinel=False)
            return
        self._start_data(byte)
        if self._data is not None:
            self._data.byte(byte, out)
        elif self._text is not None:
            self._text.byte(byte, out)
        else:
            out.append(byte)  # a space before the data's first character

    def _start_data(self, byte: int) -> None:
        if self._data is None and self._text is None and byte not in b" \t":
            if byte in _JSON_START:
                self._data = _Json(self)
            else:
                self._text = _Chars()

    def _release_data(self, out: bytearray, *, sentinel: bool) -> None:
        held = bytes(self._held)
        self._held.clear()
        self._first_data = False
        value = held[1:] if held.startswith(b" ") else held
        if sentinel and value.rstrip(b" \t") in _SENTINELS:
            out += held
            # Read as the checker reads it, so that a line after it finds the data as it is.
            discard = bytearray()
            for byte in held:
                self._data_byte(byte, discard)
            return
        for byte in held:
            self._data_byte(byte, out)

    def _end_line(self, out: bytearray) -> None:
        if self._state == _NAME:
            if not self._name:
                self._end_event()
                return
            self._name_done(out)
        field = self._field
        if field == b"data":
            if self._held:
                self._release_data(out, sentinel=True)
            if self._first_data:
                self._first_data = False
            if self._data is not None:
                self._data.end_line(out)
            elif self._text is not None:
                self._text.flush(out)
        elif field in (b"event", b"id") and self._held:
            value = bytes(self._held)
            self._held.clear()
            self._held_field(field, value, out)
        elif self._text is not None:
            self._text.flush(out)
            self._text = None
        self._state = _NAME
        self._field = b""

    def _held_field(self, field: bytes, value: bytes, out: bytearray) -> None:
        lead = value[1:] if value.startswith(b" ") else value
        space = value[: len(value) - len(lead)]
        if field == b"event" and (lead in _VOCABULARY or _EVENT_NAME.fullmatch(lead)):
            # A kind, as a discriminator's value is (LangGraph's, with the namespace of
            # the graph node after a ``|``).
            out += value
            return
        if field == b"event" and b"|" in lead:
            # The mode before the namespace is what LangGraph's checker reads: redacted
            # on its own, as the rest is.
            head, _, tail = lead.partition(b"|")
            out += space
            self._held_field(field, head, out)
            out += b"|"
            self._held_field(field, tail, out)
            return
        if field == b"id" and _NUMBERED.fullmatch(lead):
            out += value  # a cursor of numbers (``1_2``), which a resumption reads
            return
        token = self.tokens.token(lead)
        if token is None:
            _map_text(value, out)
        else:
            out += space + token

    def _end_event(self) -> None:
        """A blank line: the event is dispatched, the next one starts afresh."""
        self._data = None
        self._text = None
        self._first_data = True
        self._field = b""


def _line_end(chunk: bytes, start: int) -> int:
    """Where the line that ``start`` is on ends in ``chunk`` (its length if it does not)."""
    lf = chunk.find(b"\n", start)
    cr = chunk.find(b"\r", start)
    if lf < 0:
        return len(chunk) if cr < 0 else cr
    return lf if cr < 0 else min(lf, cr)


def redact(body: bytes | Iterable[bytes], protocol: str = "sse") -> bytes:
    """``body`` (one piece or its chunks) redacted whole."""
    redactor = Redactor(protocol)
    chunks = [body] if isinstance(body, bytes | bytearray) else body
    out = b"".join(redactor.feed(bytes(chunk)) for chunk in chunks)
    return out + redactor.close()
