"""Parsing one event's data, and what a message may say about data that is not JSON.

Every protocol parses a payload with ``parse_json`` (pydantic-core's parser) and words the
``invalid_json`` finding with ``not_json``; no message quotes a payload, only its size
(``preview``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from pydantic_core import from_json

__all__ = ["not_json", "parse_json", "preview"]

#: Parse one payload. Only object keys go to pydantic-core's process-wide string cache:
#: keys repeat on every frame, while values (the model's text) would fill the cache with
#: content, and are no faster to parse from it.
parse_json: Final[partial[Any]] = partial(from_json, cache_strings="keys")


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
