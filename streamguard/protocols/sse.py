"""Plain SSE: framing rules only and no terminal signal; optionally, JSON data.

A plain route carries whatever its app sends, so by default no payload is judged. A route
whose data is meant to be JSON says so (``{"protocol": "sse", "json": true}``): then every
event's data must parse as JSON, any JSON value, and data that does not (a Python ``repr``
of a dict, ``{'a': 1}``, is the classic, from ``str(payload)`` instead of
``json.dumps(payload)``) is ``invalid_json``, once per event. The ``[DONE]`` sentinel is
allowed, as the one non-JSON end marker LLM-style streams share.

An ``auto`` route that no protocol claimed is plain SSE too, with no promise about its data
(``looks_at_json``): there only data that is plainly *meant* as JSON and does not parse is
``invalid_json``. Data is meant as JSON when it opens like a JSON container with content
(``_OPENS_LIKE_JSON``: ``{`` then a quote, ``[`` then ``{``, ``[`` or a quote), and either

- it is itself the ``repr`` of a dict or a list of one line (``{'a': 1}``, ``[{'a': None}]``:
  single-quoted, closed by its bracket), which is never text for a reader; or
- its first line is a JSON document of its own (frames that ran together: a blank line
  missing between them); or
- the stream has sent a JSON object (or an array of objects or arrays) in some other event:
  its data is JSON, and this event's was meant to be. A broken event that comes before the
  stream's first JSON one is kept (the first only, one finding) and reported at the body's
  end, once the stream has shown its data is JSON (not when the client left first).

Plain text that starts with a bracket stays clean: ``[DONE]``, a log line ``[INFO] ...``,
a markdown link ``[text](url)`` or ``[[wiki]]``, a template ``{name} joined``, an LLM
token such as ``{"`` or ``{'`` in a stream of raw text (no event of it is a JSON object).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from streamguard import rules
from streamguard.protocols.engine import NO_FINDINGS, Checker, ProtocolSpec, not_json, parse_json
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["SPEC", "PlainSSEChecker"]

#: The data a JSON route may send that is not JSON: OpenAI's end-of-stream sentinel.
_SENTINEL = "[DONE]"
#: What may follow a container's opening bracket (after blanks) for data to open like JSON
#: with content: a key of an object; an object or a string in an array. A letter, a digit
#: or a second bracket after ``[`` is how text opens (``[INFO]``, ``[DONE]``, ``[1] a
#: footnote``, ``[[wiki]]``).
_OPENS_LIKE_JSON: Final[dict[str, str]] = {"{": "\"'", "[": "{\"'"}
#: How far past the bracket the next character is looked for.
_LOOKAHEAD: Final = 64
_REPR_NOTE: Final = "; it reads as a Python repr (single quotes: str() instead of json.dumps()?)"


class PlainSSEChecker(Checker):
    """Accepts every event (or, with ``json_data``, every event whose data is JSON; or,
    with ``looks_at_json``, every event but data meant as JSON that does not parse); the
    end of the body is the end of the stream."""

    __slots__ = ("_json_seen", "_waiting", "json_data", "looks_at_json")

    name = "sse"
    has_terminal = False
    RAISES = frozenset({rules.INVALID_JSON})

    def __init__(
        self,
        request: Mapping[str, Any] | None = None,
        path: str | None = None,
        *,
        json_data: bool = False,
        looks_at_json: bool = False,
    ) -> None:
        super().__init__(request, path)
        self.json_data = json_data
        #: An ``auto`` route that fell back to plain SSE (see the module docstring).
        self.looks_at_json = looks_at_json and not json_data
        self._json_seen = False  # an event's data was a JSON object (or array of them)
        self._waiting: Finding | None = None  # broken JSON before the first JSON event

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        if self.json_data:
            if event.data == _SENTINEL:
                return NO_FINDINGS
            found: list[Finding] = []
            self.parse_value(event, index, found)  # any JSON value, not only an object
            return found
        if self.looks_at_json:
            return self._meant_as_json(event, index)
        return NO_FINDINGS

    def _meant_as_json(self, event: Event, index: int) -> Sequence[Finding]:
        data = event.data
        follows = _OPENS_LIKE_JSON.get(data[:1])
        after = data[1:_LOOKAHEAD].lstrip()[:1]
        if follows is None or not after or after not in follows:
            return NO_FINDINGS
        try:
            value = parse_json(data)
        except ValueError as error:
            detail = f": {not_json(error, data)}"
            if _python_repr(data):
                return [self.finding(rules.INVALID_JSON, event, index, detail + _REPR_NOTE)]
            if _first_line_a_document(data):  # frames ran together (not_json says so)
                self._json_seen = True
                return [self.finding(rules.INVALID_JSON, event, index, detail)]
            if self._json_seen:
                detail += "; the stream's other events are JSON"
                return [self.finding(rules.INVALID_JSON, event, index, detail)]
            if self._waiting is None:
                self._waiting = self.finding(
                    rules.INVALID_JSON,
                    event,
                    index,
                    detail + "; a later event of the stream is JSON",
                )
            return NO_FINDINGS
        if not self._json_seen and _a_document(value):
            self._json_seen = True
        return NO_FINDINGS

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        # Broken JSON that came before the stream's first JSON event, now proved meant as
        # JSON; reported here, not with that later event (whose excerpt it would carry).
        waiting = self._waiting
        if waiting is None or not self._json_seen:
            return NO_FINDINGS
        return [waiting]


def _a_document(value: object) -> bool:
    """A JSON object with content, or an array of objects or arrays: what a stream of JSON
    sends, and no token of a stream of text (a number or a word can parse as JSON)."""
    if type(value) is dict:
        return len(value) > 0
    if type(value) is list:
        return len(value) > 0 and type(value[0]) in (dict, list)
    return False


def _first_line_a_document(data: str) -> bool:
    """Whether data of several lines has a JSON document as its first line: frames that
    ran together, each line JSON of its own."""
    first_line, newline, _ = data.partition("\n")
    if not newline:
        return False
    try:
        return _a_document(parse_json(first_line))
    except ValueError:
        return False


def _python_repr(data: str) -> bool:
    """Data that reads as ``str()`` of a dict or a list: one line, a single-quoted first
    key or item, closed by the bracket it opened with."""
    if "\n" in data:
        return False
    closing = "}" if data[:1] == "{" else "]"
    if not data.rstrip().endswith(closing):
        return False
    inside = data[1:].lstrip()
    if data[:1] == "[" and inside[:1] == "{":
        inside = inside[1:].lstrip()
    return inside[:1] == "'"


SPEC: ProtocolSpec = ProtocolSpec(
    name=PlainSSEChecker.name,
    checker=PlainSSEChecker,
    summary="any SSE stream: framing rules only (and, on a JSON route, data that parses)",
    event_names=frozenset({"message"}),
    takes_json_option=True,
)
