"""Turning a pydantic-core validation error on an event's data into a finding.

The OpenAI checkers parse and shape-check each payload in one pass with
``TypeAdapter(<TypedDict>).validate_json``. When that fails, the first error says whether
the data was not JSON at all (``invalid_json``: syntax, recursion limit, a number out of
range, a non-object) or JSON of the wrong shape (``schema_mismatch``), and where.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from streamguard import rules
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["field_path", "parse_json", "preview", "validation_finding"]

#: Parse one payload. Only object keys go to pydantic-core's process-wide string cache:
#: keys repeat on every frame, while values (the model's text) would fill the cache with
#: content, and are no faster to parse from it.
parse_json: partial[Any] = partial(from_json, cache_strings="keys")


def field_path(loc: Sequence[int | str]) -> str:
    """``("choices", 0, "delta", "role")`` as ``choices[0].delta.role``; ``$`` for the root."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "$"


def preview(data: str) -> str:
    """What a message may say about a payload: its size, never its content.

    Findings reach logs and the CLI by default, and payloads carry the model's text and the
    user's data; the opt-in ``excerpt`` on a finding is the only place content goes.
    """
    return f"{len(data)} characters"


def validation_finding(error: ValidationError, event: Event, index: int) -> Finding:
    """The finding for the first problem pydantic-core reported on ``event``'s data."""
    first = error.errors(include_url=False, include_input=False)[0]
    kind, msg, loc = first["type"], first["msg"], first["loc"]
    if kind == "json_invalid":
        return rules.INVALID_JSON.finding(
            f"event {index}: data is not JSON ({msg}): {preview(event.data)}",
            index,
            event.offset,
        )
    if not loc and kind in {"dict_type", "model_type"}:
        return rules.INVALID_JSON.finding(
            f"event {index}: data is JSON but not an object: {preview(event.data)}",
            index,
            event.offset,
        )
    extra = len(error.errors(include_url=False, include_input=False)) - 1
    more = f" (and {extra} more problem(s))" if extra else ""
    return rules.SCHEMA_MISMATCH.finding(
        f"event {index}: field {field_path(loc)}: {msg}{more}", index, event.offset
    )
