"""The shape vocabulary (``protocols/_fields``): kinds, ``object_problems``, and the in-band
error every LLM protocol checks with it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from streamguard import check_stream
from streamguard.protocols._fields import (
    LAX_BOOLEAN,
    LAX_INTEGER,
    LAX_NUMBER,
    LAX_STRING_OR_INTEGER,
    NUMBER,
    STRING_OR_EXACT_INTEGER,
    object_problems,
    opt,
    req,
    shape_problems,
)


@pytest.mark.parametrize(
    ("value", "fits"),
    [
        (500, True),
        (500.0, True),
        (429.5, True),
        (True, False),
        ("500", False),
        (float("nan"), False),
    ],
)
def test_a_number_is_any_json_number(value: object, fits: bool) -> None:
    """Whole or not, a number fits; a boolean, a string of digits and NaN do not."""
    assert (shape_problems({"code": value}, (req("code", NUMBER),)) == []) is fits


@pytest.mark.parametrize(
    ("value", "fits"), [("E42", True), (502, True), (502.0, False), (False, False), (None, True)]
)
def test_a_string_or_exact_integer(value: object, fits: bool) -> None:
    """A string or digits fit; a fraction or a boolean does not; null only where nullable."""
    field = opt("code", STRING_OR_EXACT_INTEGER, nullable=True)
    assert (shape_problems({"code": value}, (field,)) == []) is fits


def test_object_problems_names_a_value_that_is_no_object() -> None:
    """Not an object: one problem, naming the place and the type, never the value."""
    assert object_problems("secret", (req("message"),), "error") == [
        "field `error` is a str, not an object"
    ]


def test_object_problems_lists_each_field_of_an_object() -> None:
    """An object: each field of the wrong kind, in the declared order, by its path."""
    fields = (req("code", NUMBER), req("message"), opt("status", nullable=True))
    assert object_problems({"code": "500", "status": 14}, fields, "error") == [
        "field `error.code` is a str, not a JSON number",
        "field `error.message` is missing",
        "field `error.status` is an int, not a string",
    ]
    assert object_problems({"code": 500, "message": "m", "status": None}, fields, "error") == []


IN_BAND_ERROR_NOT_AN_OBJECT = {
    "openai_chat": b'data: {"error": "overloaded"}\n\n',
    "gemini": b'data: {"error": "overloaded"}\n\n',
    "anthropic": b'event: error\ndata: {"type": "error", "error": "overloaded"}\n\n',
    "openai_responses": (
        b'event: error\ndata: {"type": "error", "sequence_number": 0, "error": "overloaded", '
        b'"message": "m", "code": null, "param": null}\n\n'
    ),
}


@pytest.mark.parametrize("protocol", sorted(IN_BAND_ERROR_NOT_AN_OBJECT))
def test_every_llm_protocol_words_a_malformed_in_band_error_alike(protocol: str) -> None:
    """An ``error`` that is no object reads the same in every LLM protocol's finding."""
    report = check_stream(IN_BAND_ERROR_NOT_AN_OBJECT[protocol], protocol=protocol)
    assert report.outcome.value == "error_event"
    [shape] = [finding for finding in report.findings if finding.rule == "schema_mismatch"]
    assert shape.event_index == 0
    assert "field `error` is a str, not an object" in shape.message
    assert "overloaded" not in shape.message


#: Values a payload may hold where a lax kind is declared: right, wrong and look-alikes.
LAX_CORPUS: tuple[object, ...] = (
    *(
        0,
        1,
        2,
        -7,
        10**20,
        2**1023,
        2**1024 - 1,
        -(2**1023),
        10**400,
        0.0,
        1.0,
        0.5,
        7.0,
        7.5,
        -0.0,
        1e308,
        1e-9,
    ),
    *(True, False, None, [], {}, [1], {"a": 1}),
    *("", " ", "7", " 7 ", "+7", "-7", "1_000", "7.0", "7.5", "1e3", "0x10", "\u00b2"),
    *("\u0663", "nan", "inf", "-inf", "0.5", "1", "0", "2"),
    *("true", "false", " true", "TRUE", "On", "off", "yes", "yes ", "n", "t", "f", "maybe"),
)

#: Each kind -> the clients' own fields declared with it: (module, model, field name).
CLIENT_FIELDS: dict[str, tuple[tuple[str, str, str], ...]] = {
    LAX_INTEGER: (
        ("mcp_types", "ResourceLink", "size"),
        ("google.genai.types", "Candidate", "token_count"),
    ),
    LAX_NUMBER: (
        ("mcp_types", "ProgressNotificationParams", "progress"),
        ("google.genai.types", "Candidate", "avg_logprobs"),
    ),
    LAX_BOOLEAN: (
        ("mcp_types", "ToolAnnotations", "read_only_hint"),
        ("google.genai.types", "Part", "thought"),
    ),
    LAX_STRING_OR_INTEGER: (("mcp_types", "ProgressNotificationParams", "progress_token"),),
    STRING_OR_EXACT_INTEGER: (("mcp_types", "CancelledNotificationParams", "request_id"),),
}


@pytest.mark.parametrize(
    ("kind", "where"),
    [(kind, where) for kind, fields in CLIENT_FIELDS.items() for where in fields],
    ids=lambda value: value if isinstance(value, str) else ".".join(value[1:]),
)
def test_a_kind_accepts_what_the_clients_field_accepts(kind: str, where: tuple[str, ...]) -> None:
    """Each kind takes exactly the values the client's own field, as its pydantic model
    declares it, reads (null aside: every one of these fields is optional there)."""
    module, model, name = where
    field = getattr(pytest.importorskip(module), model).model_fields[name]
    client: TypeAdapter[Any] = TypeAdapter(field.annotation)

    def client_reads(value: object) -> bool:
        try:
            client.validate_python(value)
        except ValidationError:
            return False
        return True

    fields = (req("value", kind),)
    differs = [
        value
        for value in LAX_CORPUS
        if value is not None
        and (not shape_problems({"value": value}, fields)) != client_reads(value)
    ]
    assert differs == []
