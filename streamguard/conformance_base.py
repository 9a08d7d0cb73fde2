"""The pieces every conformance battery is made of (``streamguard conformance``).

A battery (``Battery``) is one protocol's variants (``Variant``, data: the changes each
makes to a small base request, the checks it adds, what kind of exchange it is) and what
a run needs to speak that protocol (its path, its authentication, its base request, the
check every stream of it gets, where an abort leaves). A check reads an ``Exchange`` (the
request sent, its facts, the stream's JSON events) and yields ``VariantFinding`` of the
``CONFORMANCE_RULES``, or raises ``NotExercised``. The Chat Completions battery and the
runner are ``streamguard.conformance``; the Responses and Anthropic batteries
``streamguard.conformance_responses`` and ``streamguard.conformance_anthropic``: each
builds on this module, and ``streamguard.conformance`` finds them by protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from streamguard.report import Severity
from streamguard.request import RequestFacts

__all__ = [
    "ABORT_CYCLES",
    "CONCURRENT_STREAMS",
    "CONFORMANCE_RULES",
    "DEFAULT_TOKEN_CAP",
    "Battery",
    "Check",
    "Exchange",
    "NotExercised",
    "Variant",
    "VariantFinding",
    "found",
    "json_object",
    "mapping",
    "sequence",
]

#: The ``max_tokens`` every default variant stays within: a full run costs a few hundred
#: output tokens (``plan`` and ``--dry-run`` give the exact worst case).
DEFAULT_TOKEN_CAP = 64
#: Open/close cycles after an abort (the MCP conformance suite's cancellation scenario).
ABORT_CYCLES = 5
#: Concurrent streams of the ``concurrent`` variant.
CONCURRENT_STREAMS = 4

#: The rules the variant checks add (the engine's own are in the rule catalog): each one's
#: severity and what it means. Local to this command; a finding's ``source`` says
#: ``variant``.
CONFORMANCE_RULES: dict[str, tuple[Severity, str]] = {
    "not_an_event_stream": (
        Severity.ERROR,
        "a 2xx answer to a streaming request that is not text/event-stream",
    ),
    "stream_incomplete": (
        Severity.ERROR,
        "the stream did not complete (connection lost, stalled, cut short)",
    ),
    "finish_reason_empty": (
        Severity.ERROR,
        'a finish_reason of "" (clients that map it to an enum fail)',
    ),
    "chunk_field_changed": (
        Severity.WARNING,
        "model or created differs between the chunks of one stream",
    ),
    "usage_over_max_tokens": (
        Severity.ERROR,
        "output tokens above the request's cap (max_tokens, max_output_tokens)",
    ),
    "choice_missing": (Severity.ERROR, "a choice index below n that never streamed"),
    "stop_sequence_in_content": (Severity.ERROR, "the content holds a requested stop sequence"),
    "length_not_reported": (
        Severity.ERROR,
        "the answer hit its token cap but did not say so (finish_reason length; Responses: "
        "response.incomplete, reason max_output_tokens; Anthropic: stop_reason max_tokens)",
    ),
    "length_token_count": (
        Severity.ERROR,
        "a truncation reported, but the output tokens are not the request's cap",
    ),
    "tool_call_type_missing": (
        Severity.WARNING,
        'a tool call\'s first delta without type "function"',
    ),
    "tool_call_id_duplicate": (Severity.ERROR, "two tool calls of one choice share an id"),
    "tool_calls_finish_mismatch": (
        Severity.ERROR,
        "tool calls streamed, but the finish does not say so (finish_reason tool_calls; "
        "Anthropic: stop_reason tool_use; Responses: status completed)",
    ),
    "tool_call_fields_missing": (
        Severity.ERROR,
        "a function call (Responses) or tool_use block (Anthropic) without its id or name",
    ),
    "tool_arguments_invalid": (
        Severity.ERROR,
        "a tool call's streamed arguments (Anthropic: input) do not join to a JSON object, "
        "or differ from the arguments its done event gives",
    ),
    "final_output_mismatch": (
        Severity.ERROR,
        "Responses: the terminal event's output text differs from the text the deltas streamed",
    ),
    "tool_choice_not_followed": (Severity.ERROR, "a forced function was not the one called"),
    "tool_call_name_unknown": (
        Severity.ERROR,
        "a tool call's name, assembled as clients assemble it, is no "
        "tool of the request (the name sent again on later deltas)",
    ),
    "logprobs_missing": (Severity.ERROR, "a content chunk without logprobs when others carry them"),
    "logprobs_width": (
        Severity.ERROR,
        "a logprobs entry without top_logprobs entries as requested",
    ),
    "logprobs_token_mismatch": (
        Severity.WARNING,
        "a chunk's logprob tokens do not join to its content",
    ),
    "json_content_invalid": (
        Severity.ERROR,
        "JSON mode finished stop, but the content is no JSON object",
    ),
    "json_schema_mismatch": (
        Severity.ERROR,
        "structured output without a property the schema requires",
    ),
    "feature_ignored": (Severity.WARNING, "the request's option left no trace in a clean stream"),
    "stream_differs_from_response": (
        Severity.ERROR,
        "the assembled stream differs from the non-streamed answer",
    ),
    "hang_after_abort": (
        Severity.ERROR,
        "after a client left mid-stream, the next request did not complete",
    ),
    "stream_id_shared": (Severity.ERROR, "two concurrent streams share a chunk id"),
    "cross_talk": (Severity.ERROR, "a concurrent stream carried another stream's marker"),
    "twin_unavailable": (
        Severity.WARNING,
        "--twin: the non-streamed request got no 200 JSON answer to compare with",
    ),
}


@dataclass(frozen=True, slots=True)
class VariantFinding:
    """One finding on a variant: the engine's (``source="engine"``) or the variant's."""

    rule: str
    severity: Severity
    message: str
    source: str = "variant"
    #: An engine finding on the option the variant is about (``Variant.focus``): it fails
    #: the variant whatever its severity.
    focus: bool = False


class NotExercised(Exception):
    """A check could not judge: the model did not do what the variant needs."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """What one streamed request gave, as a variant's checks read it."""

    request: Mapping[str, Any]
    facts: RequestFacts
    #: The JSON object of each event, in order (events that are no JSON object are left
    #: out; ``[DONE]`` among them).
    chunks: tuple[Mapping[str, Any], ...]

    def choices(self) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """Each ``(chunk, choice)`` in order, for choices that are objects with an index."""
        for chunk in self.chunks:
            choices = chunk.get("choices")
            if not isinstance(choices, list):
                continue
            for choice in choices:
                if isinstance(choice, dict) and type(choice.get("index")) is int:
                    yield chunk, choice

    def texts(self) -> dict[int, str]:
        """The content each choice index streamed, joined."""
        texts: dict[int, str] = {}
        for _, choice in self.choices():
            content = _delta(choice).get("content")
            if isinstance(content, str):
                texts[choice["index"]] = texts.get(choice["index"], "") + content
        return texts

    def finishes(self) -> dict[int, list[Any]]:
        """The non-null finish reasons of each choice index, in order."""
        finishes: dict[int, list[Any]] = {}
        for _, choice in self.choices():
            reason = choice.get("finish_reason")
            if reason is not None:
                finishes.setdefault(choice["index"], []).append(reason)
        return finishes

    def usage(self) -> Mapping[str, Any] | None:
        """The last non-null ``usage`` of the stream."""
        found = None
        for chunk in self.chunks:
            if isinstance(chunk.get("usage"), dict):
                found = chunk["usage"]
        return found

    def tool_calls(self) -> dict[int, dict[int, list[Mapping[str, Any]]]]:
        """The tool-call deltas of each choice, by tool-call index, in order."""
        calls: dict[int, dict[int, list[Mapping[str, Any]]]] = {}
        for _, choice in self.choices():
            for delta in sequence(_delta(choice).get("tool_calls")):
                if isinstance(delta, dict) and type(delta.get("index")) is int:
                    by_index = calls.setdefault(choice["index"], {})
                    by_index.setdefault(delta["index"], []).append(delta)
        return calls


#: A variant's check: findings on an exchange, or ``NotExercised``.
Check = Callable[[Exchange], Iterable[VariantFinding]]


@dataclass(frozen=True, slots=True)
class Variant:
    """One request of the battery: the body it sends and what it adds to the checks."""

    name: str
    summary: str
    #: Merged over the base request (``model``, one user message, ``stream``,
    #: ``temperature: 0``, ``max_tokens``).
    body: Mapping[str, Any] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    #: ``stream`` (one request), ``abort`` (leave after the first content, then health
    #: requests and open/close cycles), ``concurrent`` (streams at once, with markers).
    kind: str = "stream"
    #: Run only when asked for by name (``--variants long,...`` or ``all``).
    opt_in: bool = False
    #: The request parameter the variant exercises: a 4xx naming it is "unsupported".
    feature: str | None = None
    #: With ``--twin``: the aspects of the non-streamed answer not compared (None: no
    #: twin for this variant; ``usage`` is never compared).
    twin_ignores: frozenset[str] | None = None
    #: The engine's rules that judge the option under test: a finding of one of them
    #: fails this variant even when the engine rates it a warning (in production a
    #: warning; here, the very thing the variant asks about).
    focus: frozenset[str] = frozenset()

    def requests(self, twin: bool) -> int:
        """How many requests the variant sends."""
        if self.kind == "abort":
            return ABORT_CYCLES + 3
        if self.kind == "concurrent":
            return CONCURRENT_STREAMS
        return 2 if twin and self.twin_ignores is not None else 1


@dataclass(frozen=True, slots=True)
class Battery:
    """One protocol's battery: its variants and what a run needs to speak the protocol."""

    #: The protocol's name (``streamguard.protocols``): its checker reads every stream.
    protocol: str
    #: A short name for reports and help ("OpenAI Chat Completions").
    title: str
    variants: tuple[Variant, ...]
    #: The endpoint's path below the base URL (``/chat/completions``).
    path: str
    #: The environment variable the API key is read from by default.
    api_key_env: str
    #: The request every variant starts from, for a model (the health request of the
    #: abort variant too).
    base_request: Callable[[str], dict[str, Any]]
    #: The check every stream of the protocol gets, before the variant's own.
    common: Check
    #: Whether an event's data carries content: where the abort variant leaves.
    has_content: Callable[[str], bool]
    #: The body key of the output-token cap every request sets (``max_tokens``,
    #: ``max_output_tokens``): what the worst case of a request is made of.
    cap_key: str = "max_tokens"
    #: How the API key is sent: ``authorization: Bearer`` or ``x-api-key``.
    key_header: str = "authorization"
    #: Headers every request of the protocol carries (``anthropic-version``).
    fixed_headers: Mapping[str, str] = field(default_factory=dict)

    def url(self, base_url: str) -> str:
        """The endpoint's URL for a base URL (``http://host/v1``), or the URL itself when
        it already names the endpoint. The path goes after the base URL's path, before its
        query, which is kept (Azure's ``?api-version=``)."""
        parts = urlsplit(base_url)
        path = parts.path.rstrip("/")
        if not path.endswith(self.path):
            path += self.path
        return urlunsplit(parts._replace(path=path))

    def request(self, variant: Variant, model: str) -> dict[str, Any]:
        """The body ``variant`` sends."""
        return {**self.base_request(model), **variant.body}

    def worst_case_tokens(self, body: Mapping[str, Any]) -> int:
        """The most output tokens ``body`` allows: its cap times its choices."""
        return int(body.get(self.cap_key, 0)) * int(body.get("n", 1))

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The headers that authenticate a request (and the protocol's fixed ones)."""
        headers = dict(self.fixed_headers)
        if api_key:
            if self.key_header == "authorization":
                headers["authorization"] = f"Bearer {api_key}"
            else:
                headers[self.key_header] = api_key
        return headers

    def shown_auth(self, api_key: str | None) -> str:
        """How a dry run names the authentication, the key left out."""
        if not api_key:
            return f"no {self.key_header} header"
        if self.key_header == "authorization":
            return "authorization: Bearer ***"
        return f"{self.key_header}: ***"


def _delta(choice: Mapping[str, Any]) -> Mapping[str, Any]:
    delta = choice.get("delta")
    return delta if isinstance(delta, dict) else {}


def sequence(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one (a check reads what it finds)."""
    return value if isinstance(value, list) else []


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed, when it is a JSON object (the arguments of a tool call, JSON mode's
    content); None otherwise."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def found(rule: str, message: str) -> VariantFinding:
    """A finding of one of ``CONFORMANCE_RULES``, at its severity."""
    return VariantFinding(rule, CONFORMANCE_RULES[rule][0], message)
