"""One vocabulary for the shape of a JSON payload: a field's name, the kind of value it must
hold, and whether it may be left out, declared as data and checked by ``shape_problems``.

The agent protocols' official clients validate every payload with a schema (zod) and throw
on a mismatch, so their shapes are what those schemas require. An optional field is left
out, never ``null`` (zod's ``optional()`` refuses ``null``, the mistake a Python server
makes when it serialises ``None``), unless the field is ``nullable``. Anthropic's payloads
are declared here too (its SDK's models are pydantic's, lax: ``1.0`` is an integer there
as in JavaScript), and those of the clients that validate with pydantic, the MCP SDK and
google-genai: an optional field there may be null (``may``), and the ``LAX_*`` kinds ask
pydantic itself how its lax mode reads a value (``"7.0"`` is an integer to it, ``"\u0663"``
is not). The OpenAI protocols are checked by pydantic-core against TypedDicts
instead (``_shapes``, ``_payload``), which also reads the fields that are right when a
payload is not. The in-band ``error`` of every LLM protocol (OpenAI's two, Anthropic's,
Gemini's) is declared here whatever checks the rest of its payloads (``object_problems``).

Messages name schema fields only: a wrong value is named by its type, an enum value outside
its set by size and hash.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from streamguard import _wire

__all__ = [
    "ANY_VALUE",
    "ARRAY",
    "ARRAY_OF_LAX_INTEGERS",
    "ARRAY_OF_LAX_NUMBERS",
    "ARRAY_OF_STRICT_INTEGERS",
    "ARRAY_OF_STRINGS",
    "BASE64",
    "BOOLEAN",
    "EACH",
    "INTEGER",
    "LAX_BOOLEAN",
    "LAX_FRACTION",
    "LAX_INTEGER",
    "LAX_NUMBER",
    "LAX_STRING_OR_INTEGER",
    "MAX_SHAPE_DEPTH",
    "MAX_SHAPE_ITEMS",
    "MAX_SHAPE_OBJECTS",
    "NUMBER",
    "OBJECT",
    "OBJECT_OF_OBJECTS",
    "OBJECT_OF_SCHEMAS",
    "ONE",
    "ONE_OR_EACH",
    "STRICT_INTEGER",
    "STRICT_NUMBER",
    "STRING",
    "STRING_OR_ARRAY",
    "STRING_OR_EXACT_INTEGER",
    "STRING_OR_NUMBER",
    "Field",
    "Nested",
    "Shape",
    "declared",
    "is_number",
    "lax_integer",
    "may",
    "may_hold",
    "nested_problem",
    "object_problems",
    "opt",
    "req",
    "shape_problem",
    "shape_problems",
    "type_name",
    "usable",
]

#: Kinds of field value.
STRING: Final = "string"
BOOLEAN: Final = "boolean"
INTEGER: Final = "integer"
OBJECT: Final = "object"
ARRAY: Final = "array"
#: Any JSON value, ``null`` included; the key itself must be there when required.
ANY_VALUE: Final = "any"
#: An object of objects (the AI SDK's ``providerMetadata``: provider -> its fields).
OBJECT_OF_OBJECTS: Final = "object of objects"
#: A string or an array (AG-UI's ``TOOL_CALL_RESULT.content``: text or content parts).
STRING_OR_ARRAY: Final = "string or array"
#: A string or a number, not NaN (a JSON-RPC id).
STRING_OR_NUMBER: Final = "string or number"
#: A number, whole or not, never a boolean or NaN (google-genai compares an error's ``code``
#: with 400 and 500: any number works, a string or null raises ``TypeError``).
NUMBER: Final = "JSON number"
#: A string or an integer as JSON writes it, digits only (``500``; not ``500.0``, ``5e2`` or
#: ``true``): the MCP SDK's ``RequestId`` (a string or a strict int), and an OpenAI error's
#: ``code`` (openai-python types it a string; OpenRouter sends the HTTP status there).
STRING_OR_EXACT_INTEGER: Final = "string or integer written as digits"
#: An integer as JSON writes it (``7``; not ``7.0``, ``"7"`` or ``true``), and a number that
#: is an integer or a float (never a boolean; NaN too), and a list of such integers: the
#: OpenAI protocols' fields, checked as pydantic's strict mode reads the SDK's ``int`` and
#: ``float`` (the checks these declarations replaced were strict: a value the SDK's model
#: does not type is kept as sent by its ``construct_type``, and fails where it is used).
STRICT_INTEGER: Final = "integer written as digits"
STRICT_NUMBER: Final = "integer or float"
ARRAY_OF_STRICT_INTEGERS: Final = "array of integers written as digits"


def type_name(value: object) -> str:
    """A JSON value's type as a message names it: ``null``, ``list``, ``str``, ..."""
    return "null" if value is None else type(value).__name__


def _is_object_of_objects(value: object) -> bool:
    return type(value) is dict and all(type(v) is dict for v in value.values())


def is_number(value: object) -> bool:
    """A JSON number (a bool is not one), NaN excluded."""
    return (type(value) is int or type(value) is float) and value == value


def _is_integer(value: object) -> bool:
    # JSON has one number type: ``1.0`` is an integer to JavaScript (zod's ``z.int()``).
    return type(value) is int or (type(value) is float and value.is_integer())


_ACCEPTS: dict[str, Callable[[object], bool]] = {
    STRING: lambda v: type(v) is str,
    BOOLEAN: lambda v: type(v) is bool,
    INTEGER: _is_integer,
    OBJECT: lambda v: type(v) is dict,
    ARRAY: lambda v: type(v) is list,
    ANY_VALUE: lambda v: True,
    OBJECT_OF_OBJECTS: _is_object_of_objects,
    STRING_OR_ARRAY: lambda v: type(v) is str or type(v) is list,
    STRING_OR_NUMBER: lambda v: type(v) is str or is_number(v),
    NUMBER: is_number,
    STRING_OR_EXACT_INTEGER: lambda v: type(v) is str or type(v) is int,
    STRICT_INTEGER: lambda v: type(v) is int,
    STRICT_NUMBER: lambda v: type(v) is int or type(v) is float,
}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a payload's shape."""

    name: str
    kind: str
    required: bool = True
    #: The strings the field may hold (an enum), or None for any value of its kind.
    values: frozenset[str] | None = None
    #: Whether ``null`` is tolerated where the field is optional (the client's
    #: compatibility layer turns it into an absent field).
    nullable: bool = False


def req(name: str, kind: str = STRING, values: Collection[str] | None = None) -> Field:
    """A field the payload must carry."""
    return Field(name, kind, True, None if values is None else frozenset(values))


def opt(
    name: str, kind: str = STRING, values: Collection[str] | None = None, *, nullable: bool = False
) -> Field:
    """A field the payload may leave out (and, unless ``nullable``, never sends as null)."""
    return Field(name, kind, False, None if values is None else frozenset(values), nullable)


def shape_problems(
    payload: Mapping[str, Any], fields: tuple[Field, ...], where: str = ""
) -> list[str]:
    """Everything wrong with ``payload`` for ``fields``. ``where`` is the payload's place
    in the event, named before each field (``message.usage``, say)."""
    prefix = f"{where}." if where else ""
    return [
        f"field `{prefix}{field.name}` {problem}"
        for field in fields
        if (problem := _field_problem(payload, field)) is not None
    ]


def shape_problem(
    payload: Mapping[str, Any], fields: tuple[Field, ...], where: str = ""
) -> str | None:
    """The first thing wrong with ``payload`` for ``fields``, or None (on every event of
    the agent protocols: no list is built for a payload that fits)."""
    for field in fields:
        if not field.required and field.name not in payload:
            continue  # the common case of an optional field, without a call
        problem = _field_problem(payload, field)
        if problem is not None:
            return (
                f"field `{where}.{field.name}` {problem}"
                if where
                else f"field `{field.name}` {problem}"
            )
    return None


def object_problems(value: object, fields: tuple[Field, ...], where: str) -> list[str]:
    """Everything wrong with ``value``, the object at ``where``, for ``fields``: that it is
    no object, or each of its fields of the wrong kind. Every LLM protocol checks its
    in-band ``error`` this way, so the messages read alike."""
    if type(value) is not dict:
        return [f"field `{where}` is {_a(type_name(value))}, not an object"]
    return shape_problems(value, fields, where)


def _field_problem(payload: Mapping[str, Any], field: Field) -> str | None:
    if field.name not in payload:
        return "is missing" if field.required else None
    value = payload[field.name]
    if value is None and field.kind != ANY_VALUE:
        if field.required:
            return f"is null, not {_a(field.kind)}"
        if field.nullable:
            return None
        return "is null; an optional field is left out, never null"
    if not _ACCEPTS[field.kind](value):
        if field.kind == BASE64 and type(value) is str:
            return "is not valid base64"
        return f"is {_a(type_name(value))}, not {_a(field.kind)}"
    if field.values is not None and value not in field.values:
        return f"is {_wire.token(value, ())}, not one of {_listed(field.values)}"
    return None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _listed(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))


# -- nested shapes ---------------------------------------------------------------------------
#
# A payload whose fields hold objects and lists of objects of their own shape (an MCP
# result: ``tools[].inputSchema.type``) is declared as a ``Shape``: its flat ``Field``s,
# the ``Nested`` fields that hold objects (or lists of them), and, for a tagged union
# (content blocks by ``type``), one shape per tag value. ``nested_problem`` walks it. The
# walk is bounded whatever the payload: a shape's depth is the declared table's (the wire
# never adds a level), a list is read to its first ``MAX_SHAPE_ITEMS`` items, and a payload
# to its first ``MAX_SHAPE_OBJECTS`` objects; past those the rest goes unchecked.

#: The items of one list a nested shape checks.
MAX_SHAPE_ITEMS: Final = 1024
#: The objects of one payload a nested shape checks (lists of lists of objects multiply).
MAX_SHAPE_OBJECTS: Final = 4096
#: The deepest nesting walked; the declared tables are shallower, this guards a mistake.
MAX_SHAPE_DEPTH: Final = 8

#: Kinds as pydantic's lax mode reads a parsed payload (the models of the MCP SDK and of
#: google-genai): a number is also a string that spells one, a bool; an integral number
#: also a float without a fraction, a string such as ``"7"`` or ``"7.0"``; a truth value
#: also 0 and 1 and the strings pydantic reads as a bool. A value of the exact type is
#: taken at once; any other is asked of pydantic itself, so these kinds accept what those
#: clients' fields accept (``tests/test_fields.py`` compares each with the fields of the
#: clients' own models on a corpus of look-alikes).
LAX_NUMBER: Final = "number"
LAX_INTEGER: Final = "integral number"
LAX_BOOLEAN: Final = "truth value"
#: A number from 0 to 1, read as ``LAX_NUMBER`` is (MCP's priorities).
LAX_FRACTION: Final = "number from 0 to 1"
#: A string or an integral number as pydantic's lax mode reads ``str | int`` (an MCP
#: progress token: ``true`` reads as 1, ``0.5`` as neither; an MCP request id is a string
#: or a strict int, ``STRING_OR_EXACT_INTEGER``).
LAX_STRING_OR_INTEGER: Final = "string or integer"
#: A list of strings (its first ``MAX_SHAPE_ITEMS`` items are looked at).
ARRAY_OF_STRINGS: Final = "array of strings"
#: A list of integral numbers, or of numbers, each read as ``LAX_INTEGER`` / ``LAX_NUMBER``
#: is (cohere's ``logprobs.token_ids`` and ``logprobs.logprobs``; its first
#: ``MAX_SHAPE_ITEMS`` items are looked at).
ARRAY_OF_LAX_INTEGERS: Final = "array of integral numbers"
ARRAY_OF_LAX_NUMBERS: Final = "array of numbers"
#: An object whose values are objects or booleans (a JSON Schema's ``properties``: its
#: first ``MAX_SHAPE_ITEMS`` values are looked at).
OBJECT_OF_SCHEMAS: Final = "object of objects or booleans"
#: A string of base64 that pydantic decodes into ``bytes`` as google-genai's models do: the
#: standard alphabet, padding optional but never more than needed, no stray bits.
BASE64: Final = "base64 string"

_LAX_FLOAT: Final = TypeAdapter(float)
_LAX_INT: Final = TypeAdapter(int)
_LAX_BOOL: Final = TypeAdapter(bool)
_LAX_STRING_OR_INT: Final = TypeAdapter(str | int)


def _lax(adapter: TypeAdapter[Any], value: object) -> bool:
    """Whether pydantic's lax mode reads ``value`` through ``adapter``."""
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def lax_integer(value: object) -> int | None:
    """``value`` as pydantic's lax mode reads an ``int`` (``"7"``, ``7.0`` and ``true`` are
    7, 7 and 1), or None where it refuses it: a value a rule reads as its client does."""
    if type(value) is int:
        return value
    try:
        return _LAX_INT.validate_python(value)
    except ValidationError:
        return None


def _is_lax_number(value: object) -> bool:
    if type(value) is int and value.bit_length() <= 1023:
        return True  # (a larger one overflows a float: pydantic refuses it)
    return type(value) is float or _lax(_LAX_FLOAT, value)


def _is_lax_fraction(value: object) -> bool:
    try:
        number = _LAX_FLOAT.validate_python(value)
    except ValidationError:
        return False
    return 0 <= number <= 1


def _is_lax_integer(value: object) -> bool:
    return lax_integer(value) is not None


def _is_lax_boolean(value: object) -> bool:
    return type(value) is bool or _lax(_LAX_BOOL, value)


def _is_lax_string_or_integer(value: object) -> bool:
    return type(value) is str or type(value) is int or _lax(_LAX_STRING_OR_INT, value)


def _is_base64(value: object) -> bool:
    if type(value) is not str:
        return False
    body = value.rstrip("=")
    padding = len(value) - len(body)
    if not body.isascii() or len(body) % 4 == 1 or (padding and (len(value) % 4 or padding > 2)):
        return False
    try:
        raw = binascii.a2b_base64(body + "=" * (-len(body) % 4), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return binascii.b2a_base64(raw, newline=False).rstrip(b"=") == body.encode()


def _is_array_of_strings(value: object) -> bool:
    return type(value) is list and all(type(item) is str for item in value[:MAX_SHAPE_ITEMS])


def _is_array_of_lax_integers(value: object) -> bool:
    return type(value) is list and all(_is_lax_integer(item) for item in value[:MAX_SHAPE_ITEMS])


def _is_array_of_lax_numbers(value: object) -> bool:
    return type(value) is list and all(_is_lax_number(item) for item in value[:MAX_SHAPE_ITEMS])


def _is_array_of_strict_integers(value: object) -> bool:
    return type(value) is list and all(type(item) is int for item in value[:MAX_SHAPE_ITEMS])


def _is_object_of_schemas(value: object) -> bool:
    return type(value) is dict and all(
        type(item) is dict or type(item) is bool for item in islice(value.values(), MAX_SHAPE_ITEMS)
    )


_ACCEPTS[LAX_NUMBER] = _is_lax_number
_ACCEPTS[LAX_INTEGER] = _is_lax_integer
_ACCEPTS[LAX_FRACTION] = _is_lax_fraction
_ACCEPTS[LAX_BOOLEAN] = _is_lax_boolean
_ACCEPTS[ARRAY_OF_STRINGS] = _is_array_of_strings
_ACCEPTS[ARRAY_OF_LAX_INTEGERS] = _is_array_of_lax_integers
_ACCEPTS[ARRAY_OF_LAX_NUMBERS] = _is_array_of_lax_numbers
_ACCEPTS[ARRAY_OF_STRICT_INTEGERS] = _is_array_of_strict_integers
_ACCEPTS[LAX_STRING_OR_INTEGER] = _is_lax_string_or_integer
_ACCEPTS[OBJECT_OF_SCHEMAS] = _is_object_of_schemas
_ACCEPTS[BASE64] = _is_base64

#: How a ``Nested`` field holds its shape: one object, a list of objects, or either.
ONE: Final = "one"
EACH: Final = "each"
ONE_OR_EACH: Final = "one or each"


@dataclass(frozen=True, slots=True)
class Nested:
    """A field that holds an object of ``shape`` (``holds`` ``ONE``), a list of such objects
    (``EACH``) or either (``ONE_OR_EACH``). Optional ones may be null when ``nullable``.
    With ``empty_object_is_list``, ``{}`` reads as an empty list (google-genai's converter
    iterates the field, so an empty object becomes ``[]``)."""

    name: str
    shape: Shape
    holds: str = ONE
    required: bool = True
    nullable: bool = False
    empty_object_is_list: bool = False


@dataclass(frozen=True, slots=True)
class Shape:
    """An object's shape: its flat ``fields``, its ``nested`` ones, and, for a tagged union,
    the field ``tag`` names and the shape of each of its values (``variants``: the tag must
    be one of them). ``alternatives``, when given, are shapes one of which the object must
    fit (an untagged union: a resource's text or blob contents)."""

    fields: tuple[Field, ...] = ()
    nested: tuple[Nested, ...] = ()
    tag: str | None = None
    variants: Mapping[str, Shape] | None = None
    alternatives: tuple[Shape, ...] = ()


def may(name: str, kind: str = STRING, values: Collection[str] | None = None) -> Field:
    """A field a pydantic model declares ``X | None = None``: left out or null alike."""
    return opt(name, kind, values, nullable=True)


def may_hold(
    name: str, shape: Shape, holds: str = ONE, *, empty_object_is_list: bool = False
) -> Nested:
    """A nested field a pydantic model declares optional: left out or null alike."""
    return Nested(name, shape, holds, False, True, empty_object_is_list)


def nested_problem(payload: Mapping[str, Any], shape: Shape, where: str = "") -> str | None:
    """The first thing wrong with ``payload`` for ``shape`` (a nested one), or None. The
    message names the path (``result.tools[2].inputSchema``), never a value."""
    return _Walk().problem(payload, shape, where, 0)


class _Walk:
    """One walk of a nested shape, counting the objects it visits."""

    __slots__ = ("objects",)

    def __init__(self) -> None:
        self.objects = 0

    def problem(
        self, payload: Mapping[str, Any], shape: Shape, where: str, depth: int
    ) -> str | None:
        self.objects += 1
        if self.objects > MAX_SHAPE_OBJECTS or depth > MAX_SHAPE_DEPTH:
            return None  # past the bound: the rest goes unchecked
        problem = shape_problem(payload, shape.fields, where)
        if problem is not None:
            return problem
        if shape.alternatives:
            return self._alternatives(payload, shape.alternatives, where, depth)
        for nested in shape.nested:
            problem = self._nested(payload, nested, where, depth)
            if problem is not None:
                return problem
        if shape.tag is not None and shape.variants is not None:
            tag = Field(shape.tag, STRING, True, frozenset(shape.variants))
            problem = shape_problem(payload, (tag,), where)
            if problem is not None:
                return problem
            return self.problem(payload, shape.variants[payload[shape.tag]], where, depth)
        return None

    def _alternatives(
        self, payload: Mapping[str, Any], alternatives: tuple[Shape, ...], where: str, depth: int
    ) -> str | None:
        """None when ``payload`` fits one of the shapes; else the problem of the first whose
        first field it carries (the one it meant to be), or of the first."""
        problems: list[str] = []
        for alternative in alternatives:
            problem = self.problem(payload, alternative, where, depth)
            if problem is None:
                return None
            problems.append(problem)
        for alternative, problem in zip(alternatives, problems, strict=True):
            if alternative.fields and alternative.fields[0].name in payload:
                return problem
        return problems[0]

    def _nested(
        self, payload: Mapping[str, Any], nested: Nested, where: str, depth: int
    ) -> str | None:
        name = nested.name
        path = f"{where}.{name}" if where else name
        if name not in payload:
            return f"field `{path}` is missing" if nested.required else None
        value = payload[name]
        if value is None:
            if nested.required:
                return f"field `{path}` is null, not {_a(_holding(nested.holds))}"
            return (
                None
                if nested.nullable
                else (f"field `{path}` is null; an optional field is left out, never null")
            )
        if type(value) is dict and nested.holds != EACH:
            return self.problem(value, nested.shape, path, depth + 1)
        if nested.empty_object_is_list and value == {}:
            return None
        if type(value) is list and nested.holds != ONE:
            for number, item in enumerate(value[:MAX_SHAPE_ITEMS]):
                place = f"{path}[{number}]"
                if type(item) is not dict:
                    return f"field `{place}` is {_a(type_name(item))}, not an object"
                problem = self.problem(item, nested.shape, place, depth + 1)
                if problem is not None:
                    return problem
            return None
        return f"field `{path}` is {_a(type_name(value))}, not {_a(_holding(nested.holds))}"


def _holding(holds: str) -> str:
    return {ONE: OBJECT, EACH: ARRAY, ONE_OR_EACH: "object or array"}[holds]


# -- reading a payload through its shape -----------------------------------------------------
#
# The OpenAI checkers read a chunk or an event through its declared shape: only the fields
# declared, so a provider's additions never reach a rule (a delta with an extra key is
# still one piece of text), and, when the check failed, only those of the right kind, so
# the rules still run on what is right (no blind spot behind a ``schema_mismatch``).


#: Each shape ``declared`` has read, by identity, with the names it declares (flat and
#: nested). The shape is held beside its names so that its id is never another's: the
#: shapes are the protocols' module constants, a bounded set the wire never adds to.
_DECLARED_NAMES: dict[int, tuple[Shape, frozenset[str]]] = {}


def declared(payload: Mapping[str, Any], shape: Shape) -> dict[str, Any]:
    """``payload``, which fits ``shape``, with only the fields ``shape`` declares, nested
    objects and lists of them read the same way.

    A payload that carries no undeclared field at any level (the common chunk: a provider
    adds none) is returned itself, not copied: equal to the copy, keys in the wire's order.
    Its keys are looked up in the shape's names only until the first undeclared one, so
    the test is bounded by the shape, not by the payload."""
    if type(payload) is dict and _declares_all(payload, shape):
        return payload
    return _declared_copy(payload, shape)


def _declares_all(payload: dict[str, Any], shape: Shape) -> bool:
    """Whether ``shape`` declares every field of ``payload`` and of its nested objects."""
    known = _DECLARED_NAMES.get(id(shape))
    if known is None:
        names = frozenset(
            [field.name for field in shape.fields] + [nested.name for nested in shape.nested]
        )
        known = _DECLARED_NAMES[id(shape)] = (shape, names)
    names = known[1]
    for key in payload:
        if key not in names:
            return False
    for nested in shape.nested:
        value = payload.get(nested.name)
        if type(value) is dict:
            if not _declares_all(value, nested.shape):
                return False
        elif type(value) is list:
            for item in value:
                if type(item) is dict and not _declares_all(item, nested.shape):
                    return False
    return True


def _declared_copy(payload: Mapping[str, Any], shape: Shape) -> dict[str, Any]:
    view: dict[str, Any] = {}
    for field in shape.fields:
        if field.name in payload:
            view[field.name] = payload[field.name]
    for nested in shape.nested:
        name = nested.name
        if name not in payload:
            continue
        value = payload[name]
        if type(value) is dict:
            view[name] = declared(value, nested.shape)
        elif type(value) is list:
            view[name] = [
                declared(item, nested.shape) if type(item) is dict else item for item in value
            ]
        else:
            view[name] = value
    return view


#: ``_entry``'s answer for a list entry of the wrong kind.
_UNUSABLE: Final = object()


def usable(
    payload: Mapping[str, Any], shape: Shape, present: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """What the rules can use of ``payload``, which failed its check against ``shape``: each
    declared field of its kind (a null one left out, except where any value is declared),
    objects and lists of them read the same way.

    A list entry without its required fields is dropped, a list of the wrong kind reads as
    empty (it was there, and said nothing usable), and an object of the wrong kind is
    dropped, unless its field is in ``present``, whose presence itself counts (a chat
    choice's ``delta``): then it reads as empty.
    """
    view: dict[str, Any] = {}
    for field in shape.fields:
        if field.name in payload:
            value = payload[field.name]
            if field.kind == ANY_VALUE or (value is not None and _ACCEPTS[field.kind](value)):
                view[field.name] = value
    for nested in shape.nested:
        name = nested.name
        if name not in payload:
            continue
        value = payload[name]
        if nested.holds == EACH:
            if value is None:
                continue
            entries = (
                [_entry(nested.shape, item, present) for item in value]
                if type(value) is list
                else []
            )
            view[name] = [entry for entry in entries if entry is not _UNUSABLE]
        elif type(value) is dict:
            view[name] = usable(value, nested.shape, present)
        elif name in present:
            view[name] = {}
    return view


def _entry(shape: Shape, value: object, present: frozenset[str]) -> object:
    """A list entry as ``usable`` keeps it (an object with its required fields), or
    ``_UNUSABLE``."""
    if type(value) is not dict:
        return _UNUSABLE
    view = usable(value, shape, present)
    for field in shape.fields:
        if field.required and field.name not in view:
            return _UNUSABLE
    for nested in shape.nested:
        if nested.required and nested.name not in view:
            return _UNUSABLE
    return view
