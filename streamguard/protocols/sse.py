"""Plain SSE: framing rules only and no terminal signal; optionally, JSON data.

A plain route carries whatever its app sends, so by default no payload is judged. A route
whose data is meant to be JSON says so (``{"protocol": "sse", "json": true}``): then every
event's data must parse as JSON, any JSON value, and data that does not (a Python ``repr``
of a dict, ``{'a': 1}``, is the classic, from ``str(payload)`` instead of
``json.dumps(payload)``) is ``invalid_json``, once per event. The ``[DONE]`` sentinel is
allowed, as the one non-JSON end marker LLM-style streams share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamguard import rules
from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._spec import ProtocolSpec
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["SPEC", "PlainSSEChecker"]

#: The data a JSON route may send that is not JSON: OpenAI's end-of-stream sentinel.
_SENTINEL = "[DONE]"


class PlainSSEChecker(Checker):
    """Accepts every event (or, with ``json_data``, every event whose data is JSON); the
    end of the body is the end of the stream."""

    __slots__ = ("json_data",)

    name = "sse"
    has_terminal = False
    RAISES = frozenset({rules.INVALID_JSON})

    def __init__(
        self,
        request: Mapping[str, Any] | None = None,
        path: str | None = None,
        *,
        json_data: bool = False,
    ) -> None:
        super().__init__(request, path)
        self.json_data = json_data

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        if not self.json_data or event.data == _SENTINEL:
            return NO_FINDINGS
        found: list[Finding] = []
        self.parse_value(event, index, found)  # any JSON value, not only an object
        return found


SPEC: ProtocolSpec = ProtocolSpec(
    name=PlainSSEChecker.name,
    checker=PlainSSEChecker,
    summary="any SSE stream: framing rules only (and, on a JSON route, data that parses)",
    event_names=frozenset({"message"}),
    takes_json_option=True,
)
