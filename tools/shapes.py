"""Generate the payload shapes streamguard checks from the official clients' own models.

    python -m tools.shapes            rewrite every generated module (``make shapes``)
    python -m tools.shapes --check    exit 1, naming each difference, if one is out of date

Each protocol is one ``Adapter``: the client's distribution, the version the project pins
(``constraints.txt``), the module it writes, and its event models by type. A pydantic
model is read as its client reads a parsed JSON payload: pydantic's lax mode where the
client validates its events (``TypeAdapter.validate_python``: cohere's ``parse_sse_obj``),
and every field becomes a declaration of ``streamguard.protocols._fields``:

- ``str`` is ``STRING``; ``int`` ``LAX_INTEGER``; ``float`` ``LAX_NUMBER``; ``bool``
  ``LAX_BOOLEAN``; ``Dict[str, Any]`` ``OBJECT``; a list of ``int`` / ``float``
  ``ARRAY_OF_LAX_INTEGERS`` / ``ARRAY_OF_LAX_NUMBERS``; a ``Literal`` of strings
  ``STRING`` with those values (``LAX``; ``STRICT`` reads scalars as sent, below);
- a model is a nested ``Shape`` (a list of models ``EACH``; a union of models
  ``alternatives``, one of which must fit);
- ``Optional[X] = None`` is ``may`` (left out or null), a field with another default
  ``opt`` (left out, never null), one without a default ``req``;
- ``Any``, and a union with ``Any`` (Fern's open enums: ``Union[Literal[...], Any]``),
  accept every value: not declared.

A field the adapter names as the event's tag (the route table dispatches on it) is left
out. An annotation this mapping does not know stops the generator: a new client release
that needs a new kind is a change to review, never a silently looser shape. Extra keys
are not declared: these models allow them.

What the client does with a payload its model refuses decides the severity: cohere's
stream iterator skips the event (its content lost), so every declared field is
error-level ``schema_mismatch``; ``tests/test_shapes_generated.py`` checks the generated
shapes against the client's own validation on a corpus of look-alikes.

openai-python validates nothing it streams (``construct_type`` keeps a value of the wrong
type as sent), so what fails is the code that reads the value: its adapters declare only
the fields such code reads (``checked``), read them strictly (``STRICT``), write by hand
the few declarations where the model's type is not what its readers need (``hand``, each
with its reason), and merge Responses' event models into one shape (``merged``): every
event, of a type the SDK knows or not, is checked against it. There the test compares
each generated declaration with the strict reading of the model's annotation.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core
import typing_extensions

from streamguard.protocols import _fields
from streamguard.protocols._fields import EACH, ONE, Field, Nested, Shape

__all__ = ["ADAPTERS", "Adapter", "Generated", "differences", "generate", "main"]

ROOT = Path(__file__).resolve().parent.parent
PROTOCOLS = ROOT / "streamguard" / "protocols"


#: Scalars, and lists of them (under ``list``), as pydantic's lax mode reads a parsed
#: payload: the clients that validate their events (cohere).
LAX: Mapping[Any, str] = {
    str: _fields.STRING,
    int: _fields.LAX_INTEGER,
    float: _fields.LAX_NUMBER,
    bool: _fields.LAX_BOOLEAN,
    (list, int): _fields.ARRAY_OF_LAX_INTEGERS,
    (list, float): _fields.ARRAY_OF_LAX_NUMBERS,
    (list, str): _fields.ARRAY_OF_STRINGS,
}
#: Scalars as sent: a client that builds its events without validating them
#: (openai-python's ``construct_type``) keeps a value of another type as it is, and the
#: code that reads it fails there, so a ``1.0`` is no ``int`` (the strict checks these
#: declarations replaced said the same).
STRICT: Mapping[Any, str] = {
    str: _fields.STRING,
    int: _fields.STRICT_INTEGER,
    float: _fields.STRICT_NUMBER,
    bool: _fields.BOOLEAN,
    (list, int): _fields.ARRAY_OF_STRICT_INTEGERS,
    (list, str): _fields.ARRAY_OF_STRINGS,
}


@dataclass(frozen=True)
class Adapter:
    """One protocol's client: where its models are and where their shapes go."""

    #: The protocol, as streamguard names it.
    protocol: str
    #: The client's distribution (``pip install NAME``), pinned in ``constraints.txt``.
    distribution: str
    #: The models' dotted name, for the header and the docs.
    source: str
    #: The event models by tag value (imports the client: called only when generating).
    events: Callable[[], Mapping[str, type[pydantic.BaseModel]]]
    #: The field each event model tags itself with (left out: the route table reads it).
    tag: str | None
    #: How the client's scalars read: pydantic's lax mode (``LAX``) or as sent (``STRICT``).
    scalars: Mapping[Any, str] = field(default_factory=lambda: LAX)
    #: For a client that does not validate its events, the fields checked, by model name
    #: (the rest are not declared); None: every field of every model.
    checked: Mapping[str, tuple[str, ...]] | None = None
    #: Declarations written by hand, by model name and field name: a ``Field`` in place of
    #: the model's (or beside them, for a field the model does not have), or, for a field
    #: holding a model, its ``(required, nullable)``. Each one's reason is a comment where
    #: the adapter's table is written.
    hand: Mapping[str, Mapping[str, Field | Nested | tuple[bool, bool]]] = field(
        default_factory=dict
    )
    #: Every event model read as one shape (named so), the fields they share merged: for a
    #: checker that checks every event, of a known type or not, against one shape.
    merged: str | None = None

    @property
    def module(self) -> str:
        return f"_generated_{self.protocol}"

    @property
    def path(self) -> Path:
        return PROTOCOLS / f"{self.module}.py"


def _cohere_events() -> Mapping[str, type[pydantic.BaseModel]]:
    from cohere.v2.types.v2chat_stream_response import V2ChatStreamResponse

    (union, *_) = typing.get_args(V2ChatStreamResponse)
    return {_literal_default(model, "type"): model for model in typing.get_args(union)}


def _openai_chat_events() -> Mapping[str, type[pydantic.BaseModel]]:
    from openai.types.chat import ChatCompletionChunk

    return {"chat.completion.chunk": ChatCompletionChunk}


def _openai_responses_events() -> Mapping[str, type[pydantic.BaseModel]]:
    from openai.types.responses import ResponseStreamEvent

    (union, *_) = typing.get_args(ResponseStreamEvent)  # Annotated[Union[...], discriminator]
    return {_literal_default(model, "type"): model for model in typing.get_args(union)}


# -- openai ------------------------------------------------------------------------------
#
# openai-python does not validate a stream's payloads: ``Stream`` builds each chunk or
# event with ``construct_type`` (``_models.py``), which keeps a value of the wrong type as
# sent and never raises. What fails is the code that reads it: the SDK's stream helpers
# (``ChatCompletionStreamState``, ``ResponseStreamState``), openai-agents, langchain-openai.
# So a field is declared only where such a reader uses it (``checked``), as strictly as it
# was before these shapes were generated (``STRICT``), and every declared field is an
# error-level ``schema_mismatch``. The hand-written declarations, and why:

#: Chat: the fields the checker's rules and the SDK's helper read, by model.
_CHAT_CHECKED: Mapping[str, tuple[str, ...]] = {
    "ChatCompletionChunk": (
        "id",
        "object",
        "created",
        "model",
        "choices",
        "usage",
        "system_fingerprint",
        "service_tier",
        "obfuscation",
        "moderation",
    ),
    "Choice": ("index", "delta", "finish_reason", "logprobs"),
    "ChoiceDelta": ("role", "content", "refusal", "tool_calls", "function_call"),
    "ChoiceDeltaToolCall": ("index", "id", "type", "function"),
    "ChoiceDeltaToolCallFunction": ("name", "arguments"),
    "ChoiceDeltaFunctionCall": ("name", "arguments"),
    "ChoiceLogprobs": ("content", "refusal"),
    "ChatCompletionTokenLogprob": ("token", "logprob", "bytes", "top_logprobs"),
    "TopLogprob": ("token", "logprob", "bytes"),
    "CompletionUsage": ("prompt_tokens", "completion_tokens", "total_tokens"),
}
_CHAT_HAND: Mapping[str, Mapping[str, Field | Nested | tuple[bool, bool]]] = {
    "ChatCompletionChunk": {
        # A string; its value is checked by the checker (Azure's annotation chunk sends "").
        # Missing, null or another value, the SDK's stream helper skips the chunk (its
        # content lost): an error, as the model has it.
        "object": _fields.req("object"),
        # Missing or null, the SDK reads the chunk (the completion it assembles lacks the
        # field): the checker's warning, ``envelope_field_missing``; of another type, an
        # error as generated.
        "id": _fields.may("id"),
        "model": _fields.may("model"),
        "created": _fields.may("created", _fields.STRICT_INTEGER),
        # Null or absent on the usage chunk of compatible servers: a rule of its own
        # (``usage_without_choices``), not the shape.
        "choices": (False, True),
        # Any string: the model's literal grows with every tier OpenAI adds.
        "service_tier": _fields.may("service_tier"),
        # The SDK's helper merges it chunk to chunk as an object (a string breaks it); its
        # inner model is not read.
        "moderation": _fields.may("moderation", _fields.OBJECT),
        # Not in the model; read by the checker as sent: Azure's annotations and
        # OpenRouter's in-band error on an otherwise normal chunk.
        "prompt_filter_results": _fields.opt("prompt_filter_results", _fields.ANY_VALUE),
        "prompt_annotations": _fields.opt("prompt_annotations", _fields.ANY_VALUE),
        "error": _fields.opt("error", _fields.ANY_VALUE),
    },
    "Choice": {
        # Absent on Azure's async-filter annotation chunks; never null.
        "delta": (False, False),
        # Any string or null: a value outside the documented ones is its own warning.
        "finish_reason": _fields.may("finish_reason"),
    },
    "ChoiceDeltaToolCall": {
        # Any value: a missing or wrong index is its own rule (``tool_call_index_invalid``).
        "index": _fields.opt("index", _fields.ANY_VALUE),
        # Any string or null, as the SDK's helper copies it.
        "type": _fields.may("type"),
    },
}

#: Responses: the event fields the rules and the SDK's helper read, merged over the
#: event models (every event, of a type the SDK knows or not, is checked against one
#: shape; which fields an event type requires is the checker's ``_REQUIRED``).
_RESPONSES_CHECKED: Mapping[str, tuple[str, ...]] = {
    "ResponseStreamEvent": (
        "sequence_number",
        "output_index",
        "content_index",
        "summary_index",
        "item_id",
        "text",
        "refusal",
        "arguments",
        "input",
    ),
}
#: The stream helper hashes an output entry's ``type`` into its identity, and reads each
#: part's ``type`` when it parses a final response rebuilt from the items done.
_RESPONSES_ENTRY = Shape(fields=(_fields.req("type"),))
_RESPONSES_HAND: Mapping[str, Mapping[str, Field | Nested | tuple[bool, bool]]] = {
    "ResponseStreamEvent": {
        # The route table's discriminator: any string (an unknown type is legal).
        "type": _fields.req("type"),
        # A text delta must be a string (checked by the checker); an unknown event's
        # delta, or a shell call's object, may be anything.
        "delta": _fields.opt("delta", _fields.ANY_VALUE),
        # An error event's fields, flat or nested: checked by the checker, whose types
        # depend on the error's shape.
        "code": _fields.opt("code", _fields.ANY_VALUE),
        "message": _fields.opt("message", _fields.ANY_VALUE),
        "param": _fields.opt("param", _fields.ANY_VALUE),
        "error": _fields.opt("error", _fields.ANY_VALUE),
        # The response: what the rules read of it. A null ``output`` means "no output
        # yet" to the stream helper, which rebuilds it from the items done.
        "response": Nested(
            "response",
            Shape(
                fields=(
                    _fields.opt("id"),
                    _fields.opt("status"),
                    _fields.opt("error", _fields.ANY_VALUE),
                    _fields.opt("usage", _fields.ANY_VALUE),
                    _fields.opt("incomplete_details", _fields.ANY_VALUE),
                ),
                nested=(_fields.may_hold("output", _RESPONSES_ENTRY, EACH),),
            ),
            required=False,
        ),
        # An output item, whatever its type: the helper appends each added content part
        # to a message's content (a reasoning item's may be null; a message's null is
        # checked by the checker).
        "item": Nested(
            "item",
            Shape(
                fields=(_fields.opt("id"), _fields.opt("type"), _fields.opt("status")),
                nested=(_fields.may_hold("content", _RESPONSES_ENTRY, EACH),),
            ),
            required=False,
        ),
        # A content or summary part: the helper copies it, asserts its ``type`` and adds
        # the text deltas to its ``text``; a refusal part carries ``refusal`` instead.
        "part": Nested(
            "part",
            Shape(fields=(_fields.req("type"), _fields.opt("text"), _fields.opt("refusal"))),
            required=False,
        ),
    },
}

#: Every generated protocol.
ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        protocol="cohere",
        distribution="cohere",
        source="cohere.v2.types.V2ChatStreamResponse",
        events=_cohere_events,
        tag="type",
    ),
    Adapter(
        protocol="openai_chat",
        distribution="openai",
        source="openai.types.chat.ChatCompletionChunk",
        events=_openai_chat_events,
        tag=None,
        scalars=STRICT,
        checked=_CHAT_CHECKED,
        hand=_CHAT_HAND,
    ),
    Adapter(
        protocol="openai_responses",
        distribution="openai",
        source="openai.types.responses.ResponseStreamEvent",
        events=_openai_responses_events,
        tag="type",
        scalars=STRICT,
        checked=_RESPONSES_CHECKED,
        hand=_RESPONSES_HAND,
        merged="ResponseStreamEvent",
    ),
)


def pinned_version(distribution: str) -> str:
    """The version ``constraints.txt`` pins the distribution at."""
    text = (ROOT / "constraints.txt").read_text()
    match = re.search(rf"^{re.escape(distribution)}==(\S+)$", text, re.MULTILINE | re.IGNORECASE)
    if match is None:
        raise LookupError(f"{distribution} is not pinned in constraints.txt")
    return match.group(1)


def _literal_default(model: type[pydantic.BaseModel], name: str) -> str:
    info = model.model_fields[name]
    value = info.default
    if value is pydantic_core.PydanticUndefined and typing.get_origin(info.annotation) is (
        typing.Literal
    ):  # openai-python's tags: a one-value literal, no default
        (value,) = typing.get_args(info.annotation)
    if type(value) is not str:
        raise TypeError(f"{model.__name__}.{name} has no string default to dispatch on")
    return value


# -- models -> shapes ------------------------------------------------------------------


class Unsupported(TypeError):
    """An annotation the mapping does not know: the generator stops rather than guess."""


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _strip(annotation: object) -> tuple[object, bool]:
    """The annotation without ``Annotated`` metadata and ``None``; whether ``None`` was in it."""
    if typing_extensions.get_origin(annotation) is typing_extensions.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is typing.Union:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        if len(members) == 1:
            return _strip(members[0])[0], nullable
        return typing.Union[tuple(members)], nullable  # noqa: UP007 (built from a tuple)
    return annotation, False


def _models_of(annotation: object) -> tuple[type[pydantic.BaseModel], ...] | None:
    """The models a model or a union of models names, or None."""
    if _is_model(annotation):
        return (annotation,)  # type: ignore[return-value]
    if typing.get_origin(annotation) is typing.Union:
        members = tuple(_strip(arg)[0] for arg in typing.get_args(annotation))
        if all(_is_model(member) for member in members):
            return members  # type: ignore[return-value]
    return None


def _holds_models(annotation: object) -> bool:
    """Whether the annotation is a model, a union of models, or a list of either."""
    if typing.get_origin(annotation) is list:
        annotation = _strip(typing.get_args(annotation)[0])[0]
    return _models_of(annotation) is not None


def _accepts_anything(annotation: object) -> bool:
    if annotation is Any:
        return True
    return typing.get_origin(annotation) is typing.Union and Any in typing.get_args(annotation)


class _Reader:
    """Turns models into shapes, naming each model's shape once."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        #: Model -> its shape, in the order first met (nested ones first).
        self.shapes: dict[type[pydantic.BaseModel], Shape] = {}

    def shape(self, model: type[pydantic.BaseModel], skip: str | None = None) -> Shape:
        if skip is None and model in self.shapes:
            return self.shapes[model]
        if model.model_config.get("extra") == "forbid":
            raise Unsupported(f"{model.__name__} forbids extra keys: no kind says so")
        hand = self.adapter.hand.get(model.__name__, {})
        checked = None if self.adapter.checked is None else self.adapter.checked[model.__name__]
        fields: list[Field] = []
        nested: list[Nested] = []
        for name, info in model.model_fields.items():
            if name == skip or (checked is not None and name not in checked):
                continue
            if info.alias not in (None, name) or info.validation_alias is not None:
                raise Unsupported(f"{model.__name__}.{name} is read under an alias")
            written = hand.get(name)
            declared = (
                written
                if isinstance(written, Field | Nested)
                else self._field(model, name, info, written)
            )
            if isinstance(declared, Field):
                fields.append(declared)
            elif isinstance(declared, Nested):
                nested.append(declared)
        for name, written in hand.items():  # the fields the model does not have
            if name not in model.model_fields:
                if isinstance(written, Field):
                    fields.append(written)
                elif isinstance(written, Nested):
                    nested.append(written)
                else:
                    raise Unsupported(f"{model.__name__}.{name}: no such field to hold")
        shape = Shape(tuple(fields), tuple(nested))
        if skip is None:
            self.shapes[model] = shape
        return shape

    def merged(self, models: tuple[type[pydantic.BaseModel], ...], name: str) -> Shape:
        """One shape for every model in ``models``: each field checked that some of them
        declare, of the kind they all give it, required where every one requires it."""
        hand = self.adapter.hand.get(name, {})
        checked = None if self.adapter.checked is None else self.adapter.checked[name]
        seen: dict[str, list[Field | Nested]] = {}
        for model in models:
            for field_name, info in model.model_fields.items():
                if field_name in hand or (checked is not None and field_name not in checked):
                    continue
                declared = self._field(model, field_name, info, None)
                if declared is not None:
                    seen.setdefault(field_name, []).append(declared)
        fields: list[Field] = []
        nested: list[Nested] = []
        for field_name, found in seen.items():
            if len(found) < len(models):
                found = [_optional(each) for each in found]
            first = found[0]
            if any(each != first for each in found):
                raise Unsupported(f"{name}.{field_name}: the models give it different kinds")
            if isinstance(first, Field):
                fields.append(first)
            else:
                nested.append(first)
        for written in hand.values():
            if isinstance(written, Field):
                fields.append(written)
            elif isinstance(written, Nested):
                nested.append(written)
            else:
                raise Unsupported(f"{name}: a merged shape's nested fields are written whole")
        return Shape(tuple(fields), tuple(nested))

    def _field(
        self,
        model: type[pydantic.BaseModel],
        name: str,
        info: pydantic.fields.FieldInfo,
        presence: tuple[bool, bool] | None,
    ) -> Field | Nested | None:
        annotation, nullable = _strip(info.annotation)
        required = info.is_required()
        if nullable and (required or info.default is not None):
            raise Unsupported(f"{model.__name__}.{name}: nullable with a non-null default")
        if _accepts_anything(annotation):
            return None
        if presence is not None and not _holds_models(annotation):
            raise Unsupported(f"{model.__name__}.{name}: a presence for a field of no model")
        scalars = self.adapter.scalars
        if nullable:

            def make(kind: str, values: tuple[str, ...] | None = None) -> Field:
                return _fields.may(name, kind, values)

        elif required:

            def make(kind: str, values: tuple[str, ...] | None = None) -> Field:
                return _fields.req(name, kind, values)

        else:

            def make(kind: str, values: tuple[str, ...] | None = None) -> Field:
                return _fields.opt(name, kind, values)

        if annotation in scalars:
            return make(scalars[annotation])
        if typing.get_origin(annotation) is typing.Literal:
            values = typing.get_args(annotation)
            if not all(type(value) is str for value in values):
                raise Unsupported(f"{model.__name__}.{name}: a literal other than strings")
            return make(_fields.STRING, tuple(sorted(values)))
        origin = typing.get_origin(annotation)
        if origin is dict:
            key, value = typing.get_args(annotation)
            if key is str and value is Any:
                return make(_fields.OBJECT)
        holds = ONE
        if origin is list:
            (item,) = typing.get_args(annotation)
            item = _strip(item)[0]
            if (list, item) in scalars:
                return make(scalars[list, item])
            annotation, holds = item, EACH
        models = _models_of(annotation)
        if models is not None:
            shapes = tuple(self.shape(member) for member in models)
            shape = shapes[0] if len(shapes) == 1 else Shape(alternatives=shapes)
            if presence is not None:
                required, nullable = presence
            return Nested(name, shape, holds, required, nullable)
        raise Unsupported(f"{model.__name__}.{name}: no kind for {info.annotation!r}")


def _optional(declared: Field | Nested) -> Field | Nested:
    """A field some of the merged models leave out: optional, null or not as declared."""
    return dataclasses.replace(declared, required=False)


@dataclass(frozen=True)
class Generated:
    """One protocol's shapes, as objects and as the module's source."""

    adapter: Adapter
    version: str
    #: Tag value -> the event's shape.
    events: dict[str, Shape]
    #: Every model's shape, named, in the order the module defines them.
    named: dict[str, Shape]
    source: str
    #: Each shape of a model and the model it was read from (a merged shape is read from
    #: every event model).
    models: tuple[tuple[Shape, tuple[type[pydantic.BaseModel], ...]], ...] = ()


def generate(adapter: Adapter) -> Generated:
    """The protocol's shapes from the installed client."""
    version = importlib.metadata.version(adapter.distribution)
    reader = _Reader(adapter)
    models = adapter.events()
    named: dict[str, tuple[str, Shape]] = {}
    if adapter.merged is not None:
        shape = reader.merged(tuple(models.values()), adapter.merged)
        events = {"*": shape}
        named[_constant(adapter.merged)] = (f"Every model of ``{adapter.source}``, merged", shape)
    else:
        events = {tag: reader.shape(model, adapter.tag) for tag, model in models.items()}
    for model, shape in reader.shapes.items():
        named[_constant(model.__name__)] = (f"``{model.__qualname__}``", shape)
    source = _render(adapter, version, events, named)
    shapes = {name: shape for name, (_, shape) in named.items()}
    read = tuple((shape, (model,)) for model, shape in reader.shapes.items())
    if adapter.merged is not None:
        read += ((events["*"], tuple(models.values())),)
    return Generated(adapter, version, events, shapes, source, read)


def _constant(name: str) -> str:
    """``ChatContentDeltaEventDelta`` -> ``CHAT_CONTENT_DELTA_EVENT_DELTA``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


# -- shapes -> source --------------------------------------------------------------------

_KIND_NAMES = {
    getattr(_fields, name): name
    for name in _fields.__all__
    if name.isupper()
    and type(getattr(_fields, name)) is str
    and name not in {"ONE", "EACH"}
    and name != "ONE_OR_EACH"
}


def _field_source(field: Field) -> str:
    maker = "may" if field.nullable else "req" if field.required else "opt"
    args = [repr(field.name), _KIND_NAMES[field.kind]]
    if field.values is not None:
        args.append(repr(tuple(sorted(field.values))))
    return f"{maker}({', '.join(args)})"


def _render(
    adapter: Adapter,
    version: str,
    events: dict[str, Shape],
    named: dict[str, tuple[str, Shape]],
) -> str:
    by_shape = {id(shape): name for name, (_, shape) in named.items()}
    used_kinds: set[str] = set()
    used_makers: set[str] = {"Shape"}

    def shape_source(shape: Shape, indent: str, *, define: bool = False) -> str:
        if not define and id(shape) in by_shape:
            return by_shape[id(shape)]
        inner = indent + "    "
        parts: list[str] = []
        if shape.fields:
            items = "".join(f"{inner}    {_field_source(f)},\n" for f in shape.fields)
            parts.append(f"{inner}fields=(\n{items}{inner}),\n")
            for f in shape.fields:
                used_kinds.add(_KIND_NAMES[f.kind])
                used_makers.add("may" if f.nullable else "req" if f.required else "opt")
        if shape.nested:
            items = "".join(
                f"{inner}    {nested_source(n, inner + '    ')},\n" for n in shape.nested
            )
            parts.append(f"{inner}nested=(\n{items}{inner}),\n")
        if shape.alternatives:
            items = "".join(
                f"{inner}    {shape_source(a, inner + '    ')},\n" for a in shape.alternatives
            )
            parts.append(f"{inner}alternatives=(\n{items}{inner}),\n")
        if not parts:
            return "Shape()"
        return "Shape(\n" + "".join(parts) + indent + ")"

    def nested_source(nested: Nested, indent: str) -> str:
        holds = {ONE: "ONE", EACH: "EACH"}[nested.holds]
        shape = shape_source(nested.shape, indent)
        if not nested.required and nested.nullable:
            used_makers.add("may_hold")
            if nested.holds == ONE:
                return f"may_hold({nested.name!r}, {shape})"
            used_kinds.add(holds)
            return f"may_hold({nested.name!r}, {shape}, {holds})"
        used_makers.add("Nested")
        used_kinds.add(holds)
        return (
            f"Nested({nested.name!r}, {shape}, {holds}, "
            f"required={nested.required}, nullable={nested.nullable})"
        )

    body: list[str] = []
    merged = None if adapter.merged is None else _constant(adapter.merged)
    for name, (said, shape) in sorted(named.items(), key=lambda item: item[0] == merged):
        body += [
            f"#: {said}.",
            f"{name}: Final = {shape_source(shape, '', define=True)}",
            "",
        ]
    if merged is not None:
        said = "The one shape every event is checked against, whatever its type, under ``*``."
    elif adapter.tag is None:
        said = "The payload's shape, by the value it is named by."
    else:
        tag = f"``{adapter.tag}``"
        said = f"Each event's shape, by its {tag} (the tag itself is the route table's)."
    body += [f"#: {said}", "EVENTS: Final[Mapping[str, Shape]] = {"]
    for tag, shape in events.items():
        body.append(f"    {tag!r}: {shape_source(shape, '    ')},")
    body += ["}", ""]
    # isort's order, as ruff applies it: constants, then classes, then functions.
    imports = sorted(
        used_kinds | used_makers,
        key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n),
    )
    header = [
        f'"""The {adapter.protocol} payload shapes, generated by ``tools/shapes.py`` from',
        f"``{adapter.source}`` of {adapter.distribution} {version}: do not edit; regenerate",
        "with ``make shapes`` (``tests/test_shapes_generated.py`` fails when this drifts from",
        'the installed client)."""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from typing import Final",
        "",
        f"from streamguard.protocols._fields import {', '.join(imports)}",
        "",
        '__all__ = ["CLIENT", "EVENTS", "SOURCE", "VERSION"]',
        "",
        "#: The client these shapes were generated from, its version and its models.",
        f"CLIENT: Final = {adapter.distribution!r}",
        f"VERSION: Final = {version!r}",
        f"SOURCE: Final = {adapter.source!r}",
        "",
    ]
    return "\n".join(header + body)


def _formatted(source: str) -> str:
    """``source`` as ruff formats it (the checked-in module passes ``ruff format --check``)."""
    import subprocess

    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff), "format", "--stdin-filename", "generated.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


# -- comparing ---------------------------------------------------------------------------


def differences(old: Mapping[str, Shape], new: Mapping[str, Shape]) -> Iterator[str]:
    """Each declaration that differs between two protocols' event shapes, by event and field
    path (``content-delta: delta.message.content.text: may STRING -> absent``)."""
    for tag in sorted(set(old) | set(new)):
        if tag not in new:
            yield f"{tag}: event no longer in the client's models"
        elif tag not in old:
            yield f"{tag}: event new in the client's models"
        else:
            yield from (f"{tag}: {line}" for line in _shape_differences(old[tag], new[tag], ""))


def _describe(field: Field) -> str:
    return _field_source(field)


def _shape_differences(old: Shape, new: Shape, where: str) -> Iterator[str]:
    prefix = f"{where}." if where else ""
    old_fields = {f.name: f for f in old.fields}
    new_fields = {f.name: f for f in new.fields}
    for name in sorted(set(old_fields) | set(new_fields)):
        a, b = old_fields.get(name), new_fields.get(name)
        if a != b:
            was = "absent" if a is None else _describe(a)
            now = "absent" if b is None else _describe(b)
            yield f"field `{prefix}{name}`: {was} -> {now}"
    old_nested = {n.name: n for n in old.nested}
    new_nested = {n.name: n for n in new.nested}
    for name in sorted(set(old_nested) | set(new_nested)):
        c, d = old_nested.get(name), new_nested.get(name)
        path = f"{prefix}{name}"
        if c is None or d is None:
            was, now = ("absent" if n is None else "nested" for n in (c, d))
            yield f"field `{path}`: {was} -> {now}"
        elif (c.holds, c.required, c.nullable) != (d.holds, d.required, d.nullable):
            was, now = ((n.holds, n.required, n.nullable) for n in (c, d))
            yield f"field `{path}`: (holds, required, nullable) {was} -> {now}"
        else:
            yield from _shape_differences(c.shape, d.shape, path)
    if len(old.alternatives) != len(new.alternatives):
        yield f"field `{where}`: {len(old.alternatives)} alternatives -> {len(new.alternatives)}"
    for number, (e, f) in enumerate(zip(old.alternatives, new.alternatives, strict=False)):
        yield from _shape_differences(e, f, f"{where}<{number}>")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.shapes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a module is out of date")
    args = parser.parse_args(argv)
    stale = 0
    for adapter in ADAPTERS:
        pinned = pinned_version(adapter.distribution)
        generated = generate(adapter)
        if generated.version != pinned:
            print(
                f"{adapter.distribution} {generated.version} is installed, {pinned} pinned",
                file=sys.stderr,
            )
            return 2
        source = _formatted(generated.source)
        current = adapter.path.read_text() if adapter.path.exists() else ""
        if source == current:
            continue
        if args.check:
            stale += 1
            committed = importlib.import_module(f"streamguard.protocols.{adapter.module}")
            print(f"{adapter.path.relative_to(ROOT)} is out of date:", file=sys.stderr)
            for line in differences(committed.EVENTS, generated.events):
                print(f"  {line}", file=sys.stderr)
        else:
            adapter.path.write_text(source)
            written = adapter.path.relative_to(ROOT)
            print(f"wrote {written} from {adapter.distribution} {generated.version}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
