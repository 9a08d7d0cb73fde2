"""Turning a pydantic-core validation error on an event's data into a finding, and reading
what a payload that failed the check still carries.

The OpenAI checkers shape-check payloads against TypedDicts with pydantic-core: Responses
parses and checks each event in one pass (``validate_json``); chat parses first
(``parse_json``), lets a fast path vouch for the common chunk, and checks the rest of the
parsed object (``validate_python``). When the check fails, the first error says whether
the data was not JSON at all (``invalid_json``: syntax, recursion limit, a number out of
range, a non-object) or JSON of the wrong shape (``schema_mismatch``), and where; then
``lenient`` keeps the fields whose type is right, so the rules still run on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from types import NoneType, UnionType
from typing import Any, Final, Literal, NotRequired, Union, get_args, get_origin, get_type_hints

from pydantic import ValidationError
from pydantic_core import ErrorDetails, from_json

from streamguard import _wire, rules
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["field_path", "lenient", "not_json", "parse_json", "preview", "validation_finding"]

#: Parse one payload. Only object keys go to pydantic-core's process-wide string cache:
#: keys repeat on every frame, while values (the model's text) would fill the cache with
#: content, and are no faster to parse from it.
parse_json: Final[partial[Any]] = partial(from_json, cache_strings="keys")


#: pydantic-core error types whose ``msg`` is built from the schema alone (what was
#: expected, a length limit), never from the input. Any other type is named by its type
#: only: some messages embed what was sent (``union_tag_invalid`` quotes the tag it found,
#: custom and parsing errors quote their own text), and a finding message must not carry
#: wire values.
_INPUT_FREE_MESSAGES: Final = frozenset(
    {
        "missing",
        "literal_error",
        "json_invalid",
        "json_type",
        "recursion_loop",
        "none_required",
        "int_from_float",
        "int_parsing",
        "int_parsing_size",
        "float_parsing",
        "bool_parsing",
        "finite_number",
        "too_short",
        "too_long",
        "string_too_short",
        "string_too_long",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "multiple_of",
    }
)
#: The longest field name shown as is in a path; keys are schema field names here.
_MAX_SHOWN_KEY: Final = 64


def field_path(loc: Sequence[int | str]) -> str:
    """``("choices", 0, "delta", "role")`` as ``choices[0].delta.role``; ``$`` for the root.

    The schemas validated here are TypedDicts of declared fields, so string parts are the
    schema's own field names; as a guard against a future mapping type (whose keys would
    come from the wire), a part that is not a plain identifier is shown only by size and
    hash.
    """
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{_wire.number(part)}]"
            continue
        name = part if part.isidentifier() and len(part) <= _MAX_SHOWN_KEY else _wire.describe(part)
        path += f".{name}" if path else name
    return path or "$"


def _problem(error: ErrorDetails) -> str:
    """What a message may say about one validation error: its ``msg`` when that is built
    from the schema only, otherwise its error type."""
    kind = error["type"]
    if kind in _INPUT_FREE_MESSAGES or kind.endswith("_type"):
        return error["msg"]
    return f"invalid ({kind})"


def preview(data: str) -> str:
    """What a message may say about a payload: its size, never its content.

    Findings reach logs and the CLI by default, and payloads carry the model's text and the
    user's data; the opt-in ``excerpt`` on a finding is the only place content goes.
    """
    return f"{len(data)} characters"


def not_json(problem: object, data: str) -> str:
    """``invalid_json``'s words for ``data`` that did not parse (``problem``: the parser's
    fixed text and position), by every protocol: its size, never its content, and when its
    first line is a JSON document of its own, that two frames ran together.

    Two documents in one event's data (``data: {...}`` twice before a blank line) are
    almost always frames missing the blank line between them; the parser says only
    "trailing characters at line 2". Looked at only once the data failed to parse.
    """
    said = f"data is not JSON ({problem}): {preview(data)}"
    first_line, newline, rest = data.partition("\n")
    if newline and rest.strip() and first_line.lstrip()[:1] in ("{", "["):
        try:
            parse_json(first_line)
        except ValueError:
            return said
        said += (
            "; its first line is a JSON document of its own: frames ran together (a blank"
            " line missing between them?)"
        )
    return said


def validation_finding(error: ValidationError, event: Event, index: int) -> Finding:
    """The finding for the first problem pydantic-core reported on ``event``'s data."""
    errors = error.errors(include_url=False, include_input=False)
    first = errors[0]
    kind, loc = first["type"], first["loc"]
    if kind == "json_invalid":
        return rules.INVALID_JSON.finding(
            f"event {index}: {not_json(_problem(first), event.data)}",
            index,
            event.offset,
        )
    if not loc and kind in {"dict_type", "model_type"}:
        return rules.INVALID_JSON.finding(
            f"event {index}: data is JSON but not an object: {preview(event.data)}",
            index,
            event.offset,
        )
    extra = len(errors) - 1
    more = f" (and {extra} more problem(s))" if extra else ""
    return rules.SCHEMA_MISMATCH.finding(
        f"event {index}: field {field_path(loc)}: {_problem(first)}{more}", index, event.offset
    )


#: What a field of a payload shape holds, as ``lenient`` reads it: ``("any", None)``, one of
#: some ``("scalar", types)``, an ``("object", TypedDict)``, or a ``("list", what)``.
_Holds = tuple[str, Any]
#: Per shape: its fields and what they hold, and its required fields (made on first use).
_SHAPES: dict[type, tuple[dict[str, _Holds], frozenset[str]]] = {}
#: ``_read``'s answer for a value of the wrong type.
_UNUSABLE: Final = object()


def lenient(
    shape: type, raw: Mapping[str, Any], present: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """What the rules can use of a payload the strict check refused: each field of ``shape``
    (a TypedDict) that has the declared type, objects and lists read the same way.

    A list entry without its required fields is dropped, a list of the wrong type reads as
    empty (it was there, and said nothing usable), and an object of the wrong type is
    dropped, unless its field is in ``present``, whose presence itself counts (a chat
    choice's ``delta``): then it reads as empty.
    """
    view: dict[str, Any] = {}
    for name, (kind, what) in _shape(shape)[0].items():
        if name not in raw:
            continue
        value = raw[name]
        if kind == "object" and type(value) is dict:
            view[name] = lenient(what, value, present)
        elif kind == "object" and name in present:
            view[name] = {}
        elif kind == "list" and value is not None:
            entries = (
                [_read(what, entry, present) for entry in value] if type(value) is list else []
            )
            view[name] = [entry for entry in entries if entry is not _UNUSABLE]
        elif kind == "any" or (kind == "scalar" and type(value) in what):
            view[name] = value
    return view


def _read(holds: _Holds, value: Any, present: frozenset[str]) -> Any:
    """A list entry as ``lenient`` keeps it (an object with its required fields), or
    ``_UNUSABLE``."""
    kind, what = holds
    if kind == "any" or (kind == "scalar" and type(value) in what):
        return value
    if kind != "object" or type(value) is not dict:
        return _UNUSABLE
    view = lenient(what, value, present)
    return view if _shape(what)[1] <= view.keys() else _UNUSABLE


def _shape(shape: type) -> tuple[dict[str, _Holds], frozenset[str]]:
    known = _SHAPES.get(shape)
    if known is None:
        # Read from the annotations: with postponed annotations, ``__required_keys__`` cannot
        # tell a NotRequired field.
        hints = get_type_hints(shape, include_extras=True)
        required = {name for name, hint in hints.items() if get_origin(hint) is not NotRequired}
        total: bool = getattr(shape, "__total__", True)
        fields = {name: _holds(hint) for name, hint in hints.items()}
        known = _SHAPES[shape] = fields, frozenset(required if total else ())
    return known


def _holds(hint: Any) -> _Holds:
    """What a field annotated ``hint`` holds (``X | None`` as ``X``: a null says nothing)."""
    if get_origin(hint) is NotRequired:
        (hint,) = get_args(hint)
    if get_origin(hint) in (Union, UnionType):
        (hint,) = (arg for arg in get_args(hint) if arg is not NoneType)
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return ("any", None)
    if origin is Literal:
        return ("scalar", frozenset(type(arg) for arg in args))
    if origin is list:
        return ("list", _holds(args[0]))
    if hasattr(hint, "__required_keys__"):
        return ("object", hint)
    return ("scalar", frozenset({hint}))
