"""What a stream's request asked for: the few facts request-aware checks read.

A client sizes the request body, so it is parsed under bounds (its size, and how many
objects and arrays it may hold) and reduced at once to ``RequestFacts``: a handful of
small, type-checked values. The raw bytes and the parsed tree are dropped as soon as the
facts are out, so an open stream holds a few hundred bytes of request whatever was sent.
Every check that reads a fact treats a missing one as "unknown" and skips, never guesses.

The middleware and the client-side helpers (``streamguard.testing``) both call
``request_facts``, so they read the same request the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic_core import from_json

__all__ = ["MAX_REQUESTED_CHOICES", "MAX_REQUEST_CONTAINERS", "RequestFacts", "request_facts"]

#: A request body with more ``{`` and ``[`` bytes than this is not parsed: an agent's long
#: history has a few thousand objects, while 1 MiB of ``[{},{},…]`` has 350,000, and the
#: parse would build all of them.
MAX_REQUEST_CONTAINERS = 20_000

#: An ``n`` above this is not believed: per-choice checks are skipped rather than sized by a
#: client (``{"n": 10000000}`` would otherwise make the checker count ten million choices).
MAX_REQUESTED_CHOICES = 128

#: The largest value kept for an integer fact (``starting_after``): a JSON number can have
#: 100,000 digits.
_MAX_FACT_INT = 2**53


_ABSENT: Any = object()


class RequestFacts(Mapping[str, Any]):
    """The request's facts, read like the JSON object they came from (``facts.get("n")``).

    Only ``stream``, ``n``, ``stream_options.include_usage`` and ``starting_after`` are
    kept, and only when their types are right; everything else in the request is gone. An
    ``n`` that is present but unusable reads as ``None``: per-choice counts go unchecked.
    """

    __slots__ = ("_include_usage", "_n", "_starting_after", "_stream")

    def __init__(self, request: Mapping[str, Any]) -> None:
        stream = request.get("stream")
        self._stream: Any = stream if type(stream) is bool else _ABSENT
        n = request.get("n", _ABSENT)
        if n is not _ABSENT and not (type(n) is int and 1 <= n <= MAX_REQUESTED_CHOICES):
            n = None
        self._n: Any = n
        options = request.get("stream_options")
        self._include_usage: Any = (
            options.get("include_usage") is True if isinstance(options, Mapping) else _ABSENT
        )
        starting_after = request.get("starting_after")
        self._starting_after: Any = (
            starting_after
            if type(starting_after) is int and 0 <= starting_after <= _MAX_FACT_INT
            else _ABSENT
        )

    def __getitem__(self, key: str) -> Any:
        if key == "stream_options" and self._include_usage is not _ABSENT:
            return {"include_usage": self._include_usage}
        value = {"stream": self._stream, "n": self._n, "starting_after": self._starting_after}.get(
            key, _ABSENT
        )
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        for key in ("stream", "n", "stream_options", "starting_after"):
            if key in self:
                yield key

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"RequestFacts({dict(self)!r})"


def request_facts(
    body: bytes | bytearray | memoryview, limit: int
) -> tuple[RequestFacts | None, str | None]:
    """The facts of a JSON request body, or ``None`` and why they are not available.

    ``limit`` is the largest body parsed, in bytes. The note never quotes the body.
    """
    if not body:
        return None, None
    if len(body) > limit:
        return None, f"request body over request_peek_bytes={limit}: request checks skipped"
    raw = bytes(body)
    if raw.count(b"{") + raw.count(b"[") > MAX_REQUEST_CONTAINERS:
        return None, (
            f"request body holds over {MAX_REQUEST_CONTAINERS} JSON objects and arrays: "
            "request checks skipped"
        )
    try:
        request = from_json(raw, cache_strings=False)
    except ValueError:
        return None, "request body is not JSON: request checks skipped"
    if not isinstance(request, dict):
        return None, "request body is not a JSON object: request checks skipped"
    return RequestFacts(request), None
