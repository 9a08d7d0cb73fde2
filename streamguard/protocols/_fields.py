"""One vocabulary for the shape of a JSON payload: a field's name, the kind of value it must
hold, and whether it may be left out, declared as data and checked by ``shape_problems``.

The agent protocols' official clients validate every payload with a schema (zod) and throw
on a mismatch, so their shapes are what those schemas require. An optional field is left
out, never ``null`` (zod's ``optional()`` refuses ``null``, the mistake a Python server
makes when it serialises ``None``), unless the field is ``nullable``. Anthropic's payloads
are declared here too (its SDK's models are pydantic's, lax: ``1.0`` is an integer there
as in JavaScript). The OpenAI protocols are checked by pydantic-core against TypedDicts
instead (``_shapes``, ``_payload``), which also reads the fields that are right when a
payload is not.

Messages name schema fields only: a wrong value is named by its type, an enum value outside
its set by size and hash.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from streamguard import _wire
from streamguard.protocols._base import type_name

__all__ = [
    "ANY_VALUE",
    "ARRAY",
    "BOOLEAN",
    "INTEGER",
    "OBJECT",
    "OBJECT_OF_OBJECTS",
    "STRING",
    "STRING_OR_ARRAY",
    "STRING_OR_NUMBER",
    "Field",
    "is_number",
    "opt",
    "req",
    "shape_problem",
    "shape_problems",
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
        return f"is {_a(type_name(value))}, not {_a(field.kind)}"
    if field.values is not None and value not in field.values:
        return f"is {_wire.token(value, ())}, not one of {_listed(field.values)}"
    return None


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _listed(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))
