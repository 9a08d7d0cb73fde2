"""``streamguard conformance``: is an endpoint's streaming really OpenAI- (or Anthropic-)
compatible?

``streamguard probe`` checks one request. Servers that speak the OpenAI Chat Completions
protocol (vLLM, SGLang, llama.cpp's server, TGI, Ollama, gateways) break, in practice,
under one request option at a time: the finish reason dropped or ``""``, a finish on the
last choice only with ``n: 2``, tool-call headers repeated on every delta, streamed tool
calls ending ``stop``, a usage chunk that does not add up, a client that leaves and hangs
the next request. This module runs a battery of streaming requests against a live
endpoint, one variant at a time, and judges each. The same runs, with batteries of their
own, for the OpenAI Responses API (``--protocol openai_responses``,
``streamguard.conformance_responses``) and Anthropic Messages (``--protocol anthropic``,
``streamguard.conformance_anthropic``): a ``Battery`` is the protocol's variants, its base
request, its endpoint path and authentication, and the check every stream of it gets; the
runner, the reader and the outcomes are shared.

A variant is data (``Variant``): the changes it makes to a small base request, the checks
it adds, and what kind of exchange it is (one stream, an abort followed by health
requests, concurrent streams). Every stream is read through the probe's reader (the
command line passes it in, ``StreamReader``: bounded by ``--timeout``, ``--max-time`` and
``--max-bytes``), so its raw bytes go through the same engine the middleware runs, with
the request facts the variant sets (``streamguard.request.RequestFacts``: ``n``, ``stream_options``,
``max_tokens``, ``stop``, ``tool_choice``, ``logprobs``, ``response_format``). The checks
a variant adds read the chunks and those facts; their findings carry rule names of their
own (``CONFORMANCE_RULES``), local to this command: they are not rules of the middleware.

One outcome per variant (``VariantOutcome``):

* ``pass``: the stream was well formed and did what the variant asked;
* ``fail``: a finding at or above ``--fail-on`` (by default an error), an engine finding
  on the option the variant is about whatever its severity (``Variant.focus``), or a
  stream that did not complete;
* ``skipped``: the endpoint refused the option before streaming (an HTTP 4xx: the feature
  is unsupported, not broken), the model did not do what the variant needs (no tool call,
  a natural end before the length cap: "not exercised"), or the run's request budget was
  spent. A feature that was accepted but left no trace in a clean stream (no logprobs,
  text despite a forced tool call) is ``feature_ignored``, a warning: it fails only under
  ``--fail-on warning``. (One choice for ``n: 2`` is ``feature_ignored`` too, once: the
  engine, told ``n``, misses the other choice's finish, and that ``missing_finish_reason``,
  the same dropped parameter, is not counted again.)
* ``error``: the endpoint could not be reached, or answered 429, 5xx, or a 4xx to a
  request that exercises no option, before streaming (after the one retry);
* ``flaky`` (``--repeat``): the runs that judged disagree; it fails the run.

Every request is small: each variant sets ``max_tokens`` (at most ``DEFAULT_TOKEN_CAP``
unless it is the opt-in ``long`` variant; Responses ``max_output_tokens``), and
``--max-requests`` and ``--budget-tokens`` bound the run. A request that fails before its
first byte is retried at most once, within those budgets. The API key is read from an
environment variable and only ever sent, never shown, never saved.

``--save DIR`` writes each stream read in probe's capture format and the report with
every body sent; ``--replay DIR`` judges the captures again offline through the same
runners, its reader answering each request with the next capture saved for that body.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from streamguard._format import severity_at_least
from streamguard.conformance_anthropic import ANTHROPIC_BATTERY
from streamguard.conformance_base import (
    ABORT_CYCLES,
    CONCURRENT_STREAMS,
    CONFORMANCE_RULES,
    DEFAULT_TOKEN_CAP,
    Battery,
    Exchange,
    NotExercised,
    Variant,
    VariantFinding,
    found,
    json_object,
    mapping,
    sequence,
)
from streamguard.conformance_responses import RESPONSES_BATTERY
from streamguard.protocols.openai_chat import FINISH_REASONS
from streamguard.report import Outcome, Severity
from streamguard.request import RequestFacts
from streamguard.sse import EventParser
from streamguard.timeline import Arrival, write_capture

__all__ = [
    "CHAT_BATTERY",
    "CHAT_VARIANTS",
    "CONFORMANCE_RULES",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_TOKEN_CAP",
    "PROTOCOL",
    "PROTOCOLS",
    "Battery",
    "Exchange",
    "MaxTimeSpent",
    "NotExercised",
    "NotReplayable",
    "RunSettings",
    "RunSummary",
    "StreamRead",
    "StreamReader",
    "Variant",
    "VariantFinding",
    "VariantOutcome",
    "VariantResult",
    "api_key_from",
    "base_request",
    "battery",
    "capture_name",
    "chat_url",
    "concurrent_requests",
    "found",
    "has_content",
    "json_object",
    "load_saved",
    "mapping",
    "plan",
    "reference_markdown",
    "replay_settings",
    "replay_variants",
    "replayed",
    "run_conformance",
    "saved_json",
    "select",
    "sequence",
    "stream_read",
    "summary_json",
    "summary_text",
    "twin_body",
    "variant_request",
]

#: The protocol a run speaks unless ``--protocol`` names another.
PROTOCOL = "openai_chat"
#: Every protocol a run can speak (``--protocol``), each with its battery (``battery``).
PROTOCOLS: tuple[str, ...] = ("openai_chat", "openai_responses", "anthropic")
#: The environment variable the API key is read from unless ``--api-key-env`` names another.
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
#: How many findings of one rule a variant keeps (an endless stream repeats them).
MAX_FINDINGS_PER_RULE = 20
#: The largest non-streamed answer read (``--twin``), in bytes.
MAX_TWIN_BYTES = 4 * 1024 * 1024


class VariantOutcome(StrEnum):
    """How one variant came out."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"
    ERROR = "error"
    #: ``--repeat``: the runs that judged (pass, fail, error) disagree.
    FLAKY = "flaky"


#: The outcomes that make the command exit 1. A flaky variant fails the run: it broke in
#: at least one of its runs, and a client meets that run sooner or later (vllm#27572's
#: tool streams that end without a finish now and then); a run that was skipped (the model
#: did not do the thing) judged nothing and makes no variant flaky.
FAILED: frozenset[VariantOutcome] = frozenset(
    {VariantOutcome.FAIL, VariantOutcome.ERROR, VariantOutcome.FLAKY}
)
#: The most seconds a ``Retry-After`` is waited for before the one retry.
MAX_RETRY_AFTER = 10.0


def _delta(choice: Mapping[str, Any]) -> Mapping[str, Any]:
    delta = choice.get("delta")
    return delta if isinstance(delta, dict) else {}


_list = sequence
_found = found


# -- checks every stream gets ------------------------------------------------------------------


def check_common(exchange: Exchange) -> Iterator[VariantFinding]:
    """What every Chat stream owes a strict client, beyond the engine's rules: no ``""``
    finish reason; ``model`` and ``created`` the same on every chunk."""
    for _, choice in exchange.choices():
        if choice.get("finish_reason") == "":
            yield _found(
                "finish_reason_empty",
                f'choice {choice["index"]}: finish_reason "" (null until the finish)',
            )
            break
    for key in ("model", "created"):
        values = {json.dumps(chunk.get(key)) for chunk in exchange.chunks if key in chunk}
        if len(values) > 1:
            yield _found("chunk_field_changed", f"{key} takes {len(values)} values")


def check_usage(exchange: Exchange) -> Iterator[VariantFinding]:
    """With ``include_usage``: the usage stays within ``max_tokens`` per choice. (Its
    chunk's shape, its place, its sum and that it came at all are the engine's ``usage_*``
    rules, which fail the usage variants whatever their severity: ``USAGE_FOCUS``.)"""
    max_tokens = exchange.facts.get("max_tokens")
    n = exchange.facts.get("n") or 1
    for chunk in exchange.chunks:
        usage = chunk.get("usage")
        if not isinstance(usage, dict):
            continue
        completion = usage.get("completion_tokens")
        if type(max_tokens) is int and type(completion) is int and completion > max_tokens * n:
            yield _found(
                "usage_over_max_tokens",
                f"completion_tokens {completion} over max_tokens {max_tokens} x n {n}",
            )


def check_choices(exchange: Exchange) -> Iterator[VariantFinding]:
    """With ``n``: every index below ``n`` streamed something."""
    n = exchange.facts.get("n")
    if type(n) is not int or n < 2:
        return
    seen = {choice["index"] for _, choice in exchange.choices()}
    if seen <= {0}:
        yield _found("feature_ignored", f"n={n} was asked for, one choice streamed")
        return
    missing = [i for i in range(n) if i not in seen]
    if missing:
        yield _found("choice_missing", f"choice(s) {missing[:5]} never streamed (n={n})")


def _n_dropped(exchange: Exchange) -> bool:
    """Whether ``n`` was dropped and nothing else is wrong with the choices: ``n`` of 2 or
    more asked for, choice 0 alone streamed, and it finished (a gateway with LiteLLM's
    ``drop_params``)."""
    n = exchange.facts.get("n")
    if type(n) is not int or n < 2:
        return False
    seen = {choice["index"] for _, choice in exchange.choices()}
    return seen == {0} and 0 in exchange.finishes()


def _counted_once(findings: list[VariantFinding], exchange: Exchange) -> list[VariantFinding]:
    """One cause, one finding. With ``n`` dropped (``check_choices``' ``feature_ignored``),
    the engine, told ``n``, misses the finish of every choice that never came: its
    ``missing_finish_reason`` counts the same dropped parameter again, and is left out
    (as ``logprobs`` dropped gets ``feature_ignored`` alone). When choice 0 did not finish
    either, that is a second cause, and the engine's finding stays."""
    if not _n_dropped(exchange):
        return findings
    return [f for f in findings if not (f.source == "engine" and f.rule == "missing_finish_reason")]


def check_stop(exchange: Exchange) -> Iterator[VariantFinding]:
    """With ``stop``: the stop sequence never appears in the content."""
    stops = exchange.facts.get("stop") or ()
    for index, text in sorted(exchange.texts().items()):
        for stop in stops:
            if stop and stop in text:
                yield _found(
                    "stop_sequence_in_content",
                    f"choice {index}: the content holds a stop sequence ({len(stop)} chars)",
                )
    reasons = {r for rs in exchange.finishes().values() for r in rs}
    if reasons and reasons <= {"length"}:
        raise NotExercised("the answer hit max_tokens before the stop sequence")


def check_length(exchange: Exchange) -> Iterator[VariantFinding]:
    """With a small ``max_tokens``: the finish is ``length``, and the usage says exactly
    ``max_tokens`` completion tokens."""
    max_tokens = exchange.facts.get("max_tokens")
    usage = exchange.usage()
    completion = usage.get("completion_tokens") if usage is not None else None
    reasons = [r for rs in exchange.finishes().values() for r in rs]
    if not reasons:
        return  # no finish at all: the engine's missing_finish_reason
    if reasons[-1] == "length":
        if type(completion) is int and type(max_tokens) is int and completion != max_tokens:
            yield _found(
                "length_token_count",
                f"finish_reason length with completion_tokens {completion}, "
                f"max_tokens {max_tokens}",
            )
        return
    if type(completion) is int and completion == max_tokens:
        yield _found(
            "length_not_reported",
            f"completion_tokens reached max_tokens {max_tokens}, finish_reason is not length",
        )
        return
    raise NotExercised("the answer ended before max_tokens")


def check_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """With tools and a forced ``tool_choice``: each tool call's first delta has ``id``,
    ``type`` and ``function.name`` (the engine judges the header and its repeats, and that
    the arguments join to JSON), the ids of one choice are distinct, a named function is
    the one called, and the finish says ``tool_calls`` (``stop`` is accepted for a named
    function, as OpenAI answers it)."""
    facts = exchange.facts
    calls = exchange.tool_calls()
    if not calls:
        choice = facts.get("tool_choice")
        if choice in ("required", "function"):
            yield _found("feature_ignored", f"tool_choice {choice}: no tool call streamed")
            return
        raise NotExercised("the model called no tool")
    finishes = exchange.finishes()
    forced = facts.get("tool_choice_function")
    declared = {
        _dict(tool.get("function")).get("name")
        for tool in _list(exchange.request.get("tools"))
        if isinstance(tool, dict)
    }
    for index, by_call in sorted(calls.items()):
        ids = []
        for position, deltas in sorted(by_call.items()):
            first = deltas[0]
            if first.get("type") != "function":
                yield _found(
                    "tool_call_type_missing",
                    f"choice {index} tool call {position}: first delta without type function",
                )
            ids.append(first.get("id"))
            assembled = _assembled_name(deltas)
            if declared and assembled is not None and assembled not in declared:
                yield _found(
                    "tool_call_name_unknown",
                    f"choice {index} tool call {position}: the name fragments join to "
                    f"{len(assembled)} chars, no tool of the request",
                )
            name = (first.get("function") or {}).get("name")
            if isinstance(forced, str) and name != forced:
                yield _found(
                    "tool_choice_not_followed",
                    f"choice {index} tool call {position} is not the forced function",
                )
        if len({json.dumps(i) for i in ids}) < len(ids):
            yield _found("tool_call_id_duplicate", f"choice {index}: tool-call ids repeat")
        reasons = finishes.get(index, [])
        allowed = (
            {"tool_calls", "stop"} if facts.get("tool_choice") == "function" else {"tool_calls"}
        )
        if reasons and reasons[-1] not in allowed:
            yield _found(
                "tool_calls_finish_mismatch",
                f"choice {index} streamed {len(by_call)} tool call(s) and finished "
                f"{_token(reasons[-1])}",
            )


def _assembled_name(deltas: Sequence[Mapping[str, Any]]) -> str | None:
    """A tool call's name as the openai SDK's accumulator builds it: every ``function.name``
    string of its deltas, concatenated."""
    name = None
    for delta in deltas:
        part = _dict(delta.get("function")).get("name")
        if isinstance(part, str):
            name = part if name is None else name + part
    return name


def check_parallel_tools(exchange: Exchange) -> Iterator[VariantFinding]:
    """Parallel tool calls: at least two calls in one choice (else not exercised); their
    indices (checked by the engine) and ids (``check_tools``) are judged there."""
    calls = exchange.tool_calls()
    if calls and not any(len(by_call) >= 2 for by_call in calls.values()):
        raise NotExercised("the model made one tool call, not parallel ones")
    return iter(())


def check_logprobs(exchange: Exchange) -> Iterator[VariantFinding]:
    """With ``logprobs``: every chunk with content carries ``logprobs.content``, each entry
    ``top_logprobs`` entries as asked, and the entries' tokens join to the chunk's content."""
    width = exchange.facts.get("top_logprobs") or 0
    with_content = carrying = 0
    reported: set[str] = set()
    for _, choice in exchange.choices():
        content = _delta(choice).get("content")
        if not isinstance(content, str) or not content:
            continue
        with_content += 1
        entries = _list(_dict(choice.get("logprobs")).get("content"))
        if not entries:
            continue
        carrying += 1
        narrow = any(len(_list(_dict(e).get("top_logprobs"))) < width for e in entries)
        if narrow and "logprobs_width" not in reported:
            reported.add("logprobs_width")
            yield _found("logprobs_width", f"fewer top_logprobs than the {width} asked for")
        tokens = "".join(str(_dict(e).get("token", "")) for e in entries)
        if tokens != content and "logprobs_token_mismatch" not in reported:
            reported.add("logprobs_token_mismatch")
            yield _found(
                "logprobs_token_mismatch", "a chunk's logprob tokens do not join to its content"
            )
    if with_content and not carrying:
        yield _found("feature_ignored", "logprobs was asked for, no chunk carries logprobs")
    elif carrying < with_content:
        yield _found(
            "logprobs_missing",
            f"{with_content - carrying} of {with_content} content chunks without logprobs",
        )


#: The structured-output schema the ``json_schema`` variant asks for.
_CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def check_json(exchange: Exchange) -> Iterator[VariantFinding]:
    """JSON mode / structured output: content that finished ``stop`` parses as a JSON
    object (holding the schema's required properties, for ``json_schema``)."""
    finishes = exchange.finishes()
    for index, text in sorted(exchange.texts().items()):
        reasons = finishes.get(index, [])
        if not reasons or reasons[-1] != "stop":
            raise NotExercised(f"choice {index} did not finish stop")
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            yield _found("json_content_invalid", f"choice {index}: content is no JSON object")
            continue
        if exchange.facts.get("response_format") == "json_schema":
            missing = [key for key in _CITY_SCHEMA["required"] if key not in value]
            if missing:
                yield _found("json_schema_mismatch", f"choice {index}: missing {missing}")


_dict = mapping


def _token(value: Any) -> str:
    """A finish reason as a message shows it: a documented one by name, else its type."""
    if isinstance(value, str) and value in FINISH_REASONS:
        return value
    return f"({type(value).__name__})"


# -- the battery -------------------------------------------------------------------------------

#: The engine's usage rules: the focus of the variants that ask for usage.
USAGE_FOCUS: frozenset[str] = frozenset(
    {
        "usage_missing",
        "usage_nonstandard",
        "usage_not_last",
        "usage_repeated",
        "usage_total_mismatch",
        "usage_unrequested",
    }
)
#: The engine's tool-call rules: the focus of the tool variants.
TOOL_FOCUS: frozenset[str] = frozenset(
    {
        "tool_call_arguments_invalid",
        "tool_call_header_missing",
        "tool_call_header_repeated",
        "tool_call_index_invalid",
    }
)


_WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
_COUNT = "Count from one to twenty in words, separated by spaces, nothing else."
_LONG = "Write a long story about a lighthouse keeper."

#: The Chat Completions battery, in the order it runs.
CHAT_VARIANTS: tuple[Variant, ...] = (
    Variant(
        "plain",
        "a plain stream: framing, role first, one finish per choice, [DONE] last",
        {"max_tokens": 16},
        twin_ignores=frozenset({"tool_call_ids"}),
    ),
    Variant(
        "usage_on",
        "stream_options.include_usage: one usage chunk, choices [], last, summed right",
        {"max_tokens": 16, "stream_options": {"include_usage": True}},
        (check_usage,),
        feature="stream_options",
        focus=USAGE_FOCUS,
    ),
    Variant(
        "usage_off",
        "stream_options.include_usage false: no usage chunk",
        {"max_tokens": 16, "stream_options": {"include_usage": False}},
        feature="stream_options",
        focus=USAGE_FOCUS,
    ),
    Variant(
        "n2",
        "n: 2: both choices stream, each with its role and one finish",
        {"max_tokens": 16, "n": 2, "stream_options": {"include_usage": True}},
        (check_choices, check_usage),
        feature="n",
        focus=USAGE_FOCUS,
    ),
    Variant(
        "stop",
        "a stop sequence the answer must hit: finish stop, the sequence not in the content",
        {"max_tokens": 32, "stop": [" five"]},
        (check_stop,),
        feature="stop",
    ),
    Variant(
        "length",
        "max_tokens 5: finish length, completion_tokens 5",
        {"max_tokens": 5, "stream_options": {"include_usage": True}},
        (check_length, check_usage),
        feature="max_tokens",
        focus=USAGE_FOCUS,
    ),
    Variant(
        "tool_required",
        "tool_choice required: tool-call deltas shaped per index, finish tool_calls",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [_WEATHER_TOOL],
            "tool_choice": "required",
        },
        (check_tools,),
        feature="tool_choice",
        twin_ignores=frozenset({"text", "tool_call_ids"}),
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tool_named",
        "tool_choice naming a function: that function called, finish tool_calls or stop",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [_WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        },
        (check_tools,),
        feature="tool_choice",
        twin_ignores=frozenset({"text", "tool_call_ids"}),
        focus=TOOL_FOCUS,
    ),
    Variant(
        "tools_parallel",
        "parallel tool calls (two cities): distinct ids, indices from 0, each parses",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": [
                {
                    "role": "user",
                    "content": "What is the weather in Paris and in Tokyo? Call the tool "
                    "once per city.",
                }
            ],
            "tools": [_WEATHER_TOOL],
            "tool_choice": "required",
            "parallel_tool_calls": True,
        },
        (check_tools, check_parallel_tools),
        feature="parallel_tool_calls",
        focus=TOOL_FOCUS,
    ),
    Variant(
        "logprobs",
        "logprobs with top_logprobs 2: every content chunk carries them, tokens join",
        {"max_tokens": 16, "logprobs": True, "top_logprobs": 2},
        (check_logprobs,),
        feature="logprobs",
    ),
    Variant(
        "json_object",
        "JSON mode: the content parses as a JSON object",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": [
                {"role": "user", "content": 'Answer in JSON: {"city": <the capital of France>}'}
            ],
            "response_format": {"type": "json_object"},
        },
        (check_json,),
        feature="response_format",
    ),
    Variant(
        "json_schema",
        "structured output: the content parses and holds the schema's required keys",
        {
            "max_tokens": DEFAULT_TOKEN_CAP,
            "messages": [{"role": "user", "content": "Name the capital of France, as JSON."}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "city", "strict": True, "schema": _CITY_SCHEMA},
            },
        },
        (check_json,),
        feature="response_format",
    ),
    Variant(
        "abort",
        f"leave after the first content delta; then a health request, {ABORT_CYCLES} "
        "open/close cycles and another health request must complete",
        {"max_tokens": DEFAULT_TOKEN_CAP, "messages": [{"role": "user", "content": _LONG}]},
        kind="abort",
    ),
    Variant(
        "long",
        "opt-in: a long answer (max_tokens 1024): framing and stalls at volume",
        {"max_tokens": 1024, "messages": [{"role": "user", "content": _LONG}]},
        opt_in=True,
    ),
    Variant(
        "concurrent",
        f"opt-in: {CONCURRENT_STREAMS} streams at once, each with its own marker: each "
        "valid, ids unique, no marker in another stream",
        {"max_tokens": 16},
        kind="concurrent",
        opt_in=True,
    ),
)


def base_request(model: str) -> dict[str, Any]:
    """The request every Chat Completions variant starts from."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": _COUNT}],
        "stream": True,
        "temperature": 0,
        "max_tokens": 16,
    }


def variant_request(variant: Variant, model: str) -> dict[str, Any]:
    """The body a Chat Completions variant sends."""
    return CHAT_BATTERY.request(variant, model)


def chat_url(base_url: str) -> str:
    """The Chat Completions URL of a base URL (``http://host/v1``), or the URL itself when
    it already names the endpoint."""
    return CHAT_BATTERY.url(base_url)


def has_content(data: str) -> bool:
    """Whether an event's data is a chunk with content: where the abort variant leaves."""
    try:
        chunk = json.loads(data)
    except ValueError:
        return False
    if not isinstance(chunk, dict):
        return False
    return any(
        isinstance(choice, dict) and bool(_delta(choice).get("content"))
        for choice in _list(chunk.get("choices"))
    )


#: The Chat Completions battery (``--protocol openai_chat``, the default).
CHAT_BATTERY = Battery(
    protocol="openai_chat",
    title="OpenAI Chat Completions",
    variants=CHAT_VARIANTS,
    path="/chat/completions",
    api_key_env=DEFAULT_API_KEY_ENV,
    base_request=base_request,
    common=check_common,
    has_content=has_content,
)


_BATTERIES: dict[str, Battery] = {
    battery.protocol: battery for battery in (CHAT_BATTERY, RESPONSES_BATTERY, ANTHROPIC_BATTERY)
}


def battery(protocol: str) -> Battery:
    """The battery of ``protocol`` (one of ``PROTOCOLS``); ``KeyError`` for another."""
    return _BATTERIES[protocol]


# -- running -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How a run talks to the endpoint and judges the variants."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    twin: bool = False
    fail_on: Severity = Severity.ERROR
    max_requests: int | None = None
    #: The protocol spoken (``PROTOCOLS``): which battery's requests, path and headers.
    protocol: str = PROTOCOL
    #: ``--repeat``: how many times each variant runs.
    repeat: int = 1
    #: ``--budget-tokens``: the most worst-case output tokens the run's requests may
    #: allow, summed (None: no bound).
    budget_tokens: int | None = None
    #: One retry of a request that failed before its first byte (a connect error, or a
    #: 429 or 5xx answered before any stream), within the budgets.
    retry: bool = True
    #: ``--save``: the directory each stream is written to, in probe's capture format.
    save: Path | None = None

    @property
    def battery(self) -> Battery:
        return battery(self.protocol)

    def headers(self) -> dict[str, str]:
        headers = {
            "accept": "text/event-stream",
            "accept-encoding": "identity",
            "content-type": "application/json",
        }
        headers.update(self.battery.auth_headers(self.api_key))
        return headers


@dataclass(frozen=True, slots=True)
class VariantResult:
    """What one variant came to."""

    name: str
    outcome: VariantOutcome
    #: Why a variant was skipped or errored; empty for pass and fail.
    reason: str
    request: Mapping[str, Any]
    findings: tuple[VariantFinding, ...]
    requests: int
    #: Seconds: the first byte after the request, the longest gap between chunks, and the
    #: whole read; None when not measured.
    time_to_first_byte: float | None = None
    max_gap: float | None = None
    duration: float | None = None
    #: What made each retry (``HTTP 503``, ``ConnectError``): at most one per request,
    #: before its first byte.
    retries: tuple[str, ...] = ()
    #: ``--repeat``: the outcome of each run, in order (one run: its outcome).
    runs: tuple[VariantOutcome, ...] = ()
    #: Every body the variant sent, in order (retries and twins included; never a key).
    bodies: tuple[Mapping[str, Any], ...] = ()
    #: ``--save``: the capture files of the variant's streams, in order.
    captures: tuple[str, ...] = ()
    #: ``--replay``: what of the variant could not be judged again offline.
    note: str = ""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A whole run: the endpoint (credentials left out), the model, each variant."""

    endpoint: str
    model: str
    results: tuple[VariantResult, ...]
    protocol: str = PROTOCOL
    #: The worst-case output tokens of the requests sent, retries included (what
    #: ``--budget-tokens`` bounds).
    tokens: int = 0

    @property
    def failed(self) -> bool:
        return any(result.outcome in FAILED for result in self.results)

    @property
    def requests(self) -> int:
        return sum(result.requests for result in self.results)


@dataclass(slots=True)
class StreamRead:
    """One streamed request as the run's reader read it (``stream_read`` builds it)."""

    status: int
    is_event_stream: bool
    head: bytes
    body: bytes
    outcome: Outcome
    findings: tuple[VariantFinding, ...]
    time_to_first_byte: float | None
    max_gap: float | None
    duration: float | None
    stopped: str | None
    #: The answer's ``Retry-After`` in seconds, when it gave one as a number (the reader
    #: sets it; None otherwise).
    retry_after: float | None = None
    #: What ``--save`` writes and ``--replay`` reads again: the response head's media
    #: headers, each chunk with its arrival time, how the read ended (a
    #: ``streamguard.monitor.StreamEnd`` value) and the type of the error that ended it.
    content_type: str | None = None
    content_encoding: str | None = None
    content_length: str | None = None
    arrivals: tuple[Arrival, ...] = ()
    end: str | None = None
    cause: str | None = None


#: How a run reads one streamed request: ``(client, url, body, headers,
#: abort_after_content) -> StreamRead``, raising httpx's errors from before the response.
#: The command line gives the probe's reader (``streamguard.cli``), bounded by
#: ``--timeout``, ``--max-time`` and ``--max-bytes``; this module never imports it (the
#: command line is the layer above).
StreamReader = Callable[[Any, str, Mapping[str, Any], Mapping[str, str], bool], StreamRead]


class _Endpoint:
    """The endpoint under test: one httpx client, every request bounded."""

    def __init__(
        self,
        httpx: Any,
        settings: RunSettings,
        read: StreamReader,
        new_client: Callable[[float], Any] | None = None,
        request_budget: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.httpx = httpx
        self.settings = settings
        self.read = read
        self.battery = settings.battery
        self.url = self.battery.url(settings.base_url)
        #: Makes a client with the run's ``--timeout`` (the reader's, when it bounds the
        #: requests through the client: ``--max-time``); the concurrent variant's too.
        self.new_client: Callable[[float], Any] = new_client or (
            lambda timeout: httpx.Client(timeout=timeout)
        )
        self.client = self.new_client(settings.timeout)
        #: Bounds one request the run makes outside its reader (``--twin``'s answer) as the
        #: reader bounds a stream (``--max-time``), through a client of ``new_client``.
        self.request_budget: Callable[[], AbstractContextManager[Any]] = (
            request_budget or contextlib.nullcontext
        )
        # What the run sent (retries included), and what the variant under way may still
        # spend on retries without passing --max-requests or --budget-tokens. The
        # concurrent variant's threads count too: under a lock.
        self._lock = threading.Lock()
        self.sent = 0
        self.sent_tokens = 0
        self.retries: list[str] = []
        self.spare_requests = 0
        self.spare_tokens = 0
        self.bodies: list[Mapping[str, Any]] = []
        #: ``--save``: the variant under way, the endpoint as its captures name it, and
        #: the capture files its streams were written to, in the order they were read.
        #: Each is written as it is read: a variant's streams (the abort's eight, times
        #: ``--repeat``) are never held at once.
        self.variant = ""
        self.shown_endpoint = ""
        self.captures: list[str] = []

    def close(self) -> None:
        self.client.close()

    def _count(self, body: Mapping[str, Any]) -> None:
        with self._lock:
            self.sent += 1
            self.sent_tokens += self.battery.worst_case_tokens(body)
            self.bodies.append(body)

    def _may_retry(self, body: Mapping[str, Any], cause: str) -> bool:
        """Whether one more request for ``body`` fits the budgets; if so, it is booked."""
        tokens = self.battery.worst_case_tokens(body)
        with self._lock:
            if not self.settings.retry or self.spare_requests < 1 or self.spare_tokens < tokens:
                return False
            self.spare_requests -= 1
            self.spare_tokens -= tokens
            self.retries.append(cause)
            return True

    def stream(
        self, body: Mapping[str, Any], abort_after_content: bool = False, client: Any = None
    ) -> StreamRead:
        """Send ``body`` and read the stream through the run's reader (the engine with the
        request's facts); with ``abort_after_content``, leave after the first event that
        carries content. Raises httpx's errors from before the response.

        A request that failed before its first byte (it could not connect, or it was
        answered 429 or 5xx, not a stream) is sent once more, after the answer's
        ``Retry-After`` (at most ``MAX_RETRY_AFTER``), when the budgets leave room for it;
        never once a stream began."""
        headers = self.settings.headers()
        for attempt in (1, 2):
            self._count(body)
            try:
                read = self.read(
                    client or self.client, self.url, body, headers, abort_after_content
                )
            except self.httpx.ConnectError as exc:
                if attempt == 1 and self._may_retry(body, type(exc).__name__):
                    continue
                raise
            if self.settings.save is not None:
                with self._lock:  # the concurrent variant's threads number theirs too
                    name = capture_name(self.variant, len(self.captures) + 1)
                    self.captures.append(name)
                _write_capture(
                    self.settings.save / name, self.variant, body, read, self.shown_endpoint,
                    self.settings,
                )  # fmt: skip
                read.arrivals = ()  # written: the chunks are not kept
            retryable = read.status == 429 or read.status >= 500
            before_stream = retryable and not read.is_event_stream
            if attempt == 1 and before_stream and self._may_retry(body, f"HTTP {read.status}"):
                time.sleep(min(read.retry_after or 0.0, MAX_RETRY_AFTER))
                continue
            return read
        raise AssertionError("unreachable: the second attempt returns or raises")

    def answer(self, body: Mapping[str, Any]) -> Any:
        """The non-streamed answer to ``body`` (``stream`` false), read within
        ``MAX_TWIN_BYTES``; None when it is not a 200 JSON object."""
        twin = twin_body(body)
        self._count(twin)
        headers = {**self.settings.headers(), "accept": "application/json"}
        data = bytearray()
        with (
            self.request_budget(),
            self.client.stream(
                "POST", self.url, content=json.dumps(twin).encode(), headers=headers
            ) as response,
        ):
            for piece in response.iter_bytes():
                data += piece
                if len(data) > MAX_TWIN_BYTES:
                    return None
            if response.status_code != 200:
                return None
        try:
            value = json.loads(bytes(data))
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def twin_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body ``--twin`` sends for a streamed request's ``body``: the same, unstreamed."""
    twin = {k: v for k, v in body.items() if k != "stream_options"}
    twin["stream"] = False
    return twin


def stream_read(
    probed: Any, arrivals: Iterable[Arrival], started: float, keep_arrivals: bool = True
) -> StreamRead:
    """A ``StreamRead`` from what the probe's reader gave: its ``_Probed`` (duck-typed:
    ``status_code``, ``is_event_stream``, ``head``, ``report``, ``stopped_by``,
    ``error``) and the recorded arrivals (``at``, ``data``; at most ``--max-bytes``), read
    once: the body is joined from them and the longest gap measured as they pass; they are
    kept (for ``--save``) only when ``keep_arrivals``."""
    pieces: list[bytes] = []
    kept: list[Arrival] = []
    max_gap = previous = None
    for arrival in arrivals:
        if previous is not None:
            gap = arrival.at - previous
            max_gap = gap if max_gap is None else max(max_gap, gap)
        previous = arrival.at
        pieces.append(arrival.data)
        if keep_arrivals:
            kept.append(arrival)
    body = b"".join(pieces)
    del pieces
    report = probed.report
    return StreamRead(
        status=probed.status_code,
        is_event_stream=probed.is_event_stream,
        head=probed.head,
        body=body,
        outcome=report.outcome,
        findings=tuple(
            VariantFinding(f.rule, f.severity, f.message, "engine") for f in report.findings
        ),
        time_to_first_byte=(
            None if report.first_byte_at is None else report.first_byte_at - started
        ),
        max_gap=max_gap,
        duration=report.duration,
        stopped=probed.stopped_by or probed.error,
        content_type=probed.content_type,
        content_encoding=probed.content_encoding,
        arrivals=tuple(kept),
    )


#: The event data a variant's checks read, in bytes. Their parsed JSON takes about ten
#: times its text (a small chunk's dicts, keys and strings), and an endless stream of tiny
#: events fills ``--max-bytes`` with them: past this bound the events are counted, not
#: parsed or kept, and the variant's own checks do not run on a part of the stream (the
#: engine has judged all of it as it arrived). A real answer of the battery is far below:
#: 64 tokens of chat chunks are about 13 KB, the opt-in long variant's 1024 about 200 KB.
MAX_JUDGED_EVENT_BYTES = 1024 * 1024
#: The body is handed to the event parser in pieces of this many bytes: the events of one
#: piece are parsed and dropped before the next (never a list of every event of the body).
_PARSE_PIECE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Chunks:
    """The JSON objects of a body's events, as far as ``MAX_JUDGED_EVENT_BYTES`` of event
    data go, and how many events past it were left out."""

    kept: tuple[Mapping[str, Any], ...]
    left_out: int

    def note(self) -> str:
        return (
            f"{self.left_out} events past the first {MAX_JUDGED_EVENT_BYTES} bytes of event "
            "data were not kept: the variant's own checks did not run"
        )


def _chunks(body: bytes) -> _Chunks:
    """The JSON object of each event of ``body`` (bounded by ``--max-bytes``), parsed no
    further than ``MAX_JUDGED_EVENT_BYTES`` of event data."""
    parser = EventParser()
    kept: list[Mapping[str, Any]] = []
    size = left_out = 0
    for start in range(0, len(body), _PARSE_PIECE_BYTES):
        for event in parser.feed(body[start : start + _PARSE_PIECE_BYTES]):
            if left_out or size + len(event.data) > MAX_JUDGED_EVENT_BYTES:
                left_out += 1
                continue
            size += len(event.data)
            try:
                value = json.loads(event.data)
            except ValueError:
                continue
            if isinstance(value, dict):
                kept.append(value)
    parser.close()
    return _Chunks(tuple(kept), left_out)


def _capped(findings: Iterable[VariantFinding]) -> tuple[VariantFinding, ...]:
    kept: list[VariantFinding] = []
    per_rule: dict[str, int] = {}
    for finding in findings:
        per_rule[finding.rule] = per_rule.get(finding.rule, 0) + 1
        if per_rule[finding.rule] <= MAX_FINDINGS_PER_RULE:
            kept.append(finding)
    return tuple(kept)


def _in_focus(variant: Variant, finding: VariantFinding) -> bool:
    """Whether ``finding`` is one of the engine's rules the variant is about."""
    return finding.source == "engine" and finding.rule in variant.focus


def _judge(
    variant: Variant,
    request: Mapping[str, Any],
    findings: Sequence[VariantFinding],
    settings: RunSettings,
    requests: int,
    not_exercised: str | None = None,
    timing: tuple[float | None, float | None, float | None] = (None, None, None),
) -> VariantResult:
    findings = tuple(
        replace(f, focus=True) if _in_focus(variant, f) else f for f in _capped(findings)
    )
    failing = any(severity_at_least(f.severity, settings.fail_on) or f.focus for f in findings)
    if failing:
        outcome, reason = VariantOutcome.FAIL, ""
    elif not_exercised is not None:
        outcome, reason = VariantOutcome.SKIPPED, f"not exercised: {not_exercised}"
    else:
        outcome, reason = VariantOutcome.PASS, ""
    return VariantResult(variant.name, outcome, reason, request, findings, requests, *timing)


def _refused(variant: Variant, request: Mapping[str, Any], read: StreamRead) -> VariantResult:
    """A stream request answered with no event stream: unsupported, an error or a fail."""
    if 400 <= read.status < 500 and read.status != 429 and variant.feature is not None:
        named = variant.feature.encode() in read.head
        said = "names" if named else "does not name"
        reason = f"unsupported: HTTP {read.status} before the stream (the error {said} "
        reason += f"{variant.feature})"
        return VariantResult(variant.name, VariantOutcome.SKIPPED, reason, request, (), 1)
    if read.status >= 400:  # 429, 5xx, or a 4xx to a request that exercises no option
        reason = f"HTTP {read.status} before the stream"
        return VariantResult(variant.name, VariantOutcome.ERROR, reason, request, (), 1)
    finding = _found("not_an_event_stream", f"HTTP {read.status}, not text/event-stream")
    return VariantResult(variant.name, VariantOutcome.FAIL, "", request, (finding,), 1)


def _stream_findings(read: StreamRead) -> list[VariantFinding]:
    findings = list(read.findings)
    if read.outcome is not Outcome.COMPLETED:
        why = f" ({read.stopped})" if read.stopped else ""
        findings.append(_found("stream_incomplete", f"the stream ended {read.outcome.value}{why}"))
    return findings


def _variant_checks(
    battery: Battery, variant: Variant, exchange: Exchange
) -> tuple[list[VariantFinding], str | None]:
    findings: list[VariantFinding] = []
    not_exercised = None
    for check in (battery.common, *variant.checks):
        try:
            findings.extend(check(exchange))
        except NotExercised as exc:
            not_exercised = not_exercised or str(exc)
    return findings, not_exercised


def _run_stream(endpoint: _Endpoint, variant: Variant) -> VariantResult:
    settings = endpoint.settings
    request = endpoint.battery.request(variant, settings.model)
    read = endpoint.stream(request)
    if not read.is_event_stream:
        return _refused(variant, request, read)
    findings = _stream_findings(read)
    chunks = _chunks(read.body)
    requests = 1
    if chunks.left_out:
        # Judging a part of the stream would make up findings (a finish, a choice, a
        # tool call past the part): the engine's findings and the outcome stand alone.
        timing = (read.time_to_first_byte, read.max_gap, read.duration)
        judged = _judge(variant, request, findings, settings, requests, chunks.note(), timing)
        return replace(judged, note=chunks.note())
    exchange = Exchange(request, RequestFacts(request), chunks.kept)
    more, not_exercised = _variant_checks(endpoint.battery, variant, exchange)
    findings = _counted_once(findings + more, exchange)
    if settings.twin and variant.twin_ignores is not None:
        requests += 1
        findings += _twin_findings(endpoint, variant, request, read.body)
    timing = (read.time_to_first_byte, read.max_gap, read.duration)
    return _judge(variant, request, findings, settings, requests, not_exercised, timing)


def _twin_findings(
    endpoint: _Endpoint, variant: Variant, request: Mapping[str, Any], body: bytes
) -> list[VariantFinding]:
    """The non-streamed answer to the same request against the assembled stream, through
    ``streamguard.testing``'s comparison (the official clients' accumulation)."""
    from streamguard.testing import collect_bytes, differences_from_response

    answer = endpoint.answer(request)
    if answer is None:
        return [_found("twin_unavailable", "no 200 JSON answer to the request sent unstreamed")]
    collected = collect_bytes(body, protocol=PROTOCOL, request=request)
    ignore = {"usage", *(variant.twin_ignores or ())}
    return [
        _found("stream_differs_from_response", str(difference))
        for difference in differences_from_response(collected, answer, ignore=ignore)
    ]


def _run_abort(endpoint: _Endpoint, variant: Variant) -> VariantResult:
    """Leave a stream after its first content; then a health request, open/close cycles and
    a health request again, each within ``--timeout``: a hang is ``hang_after_abort``."""
    httpx = endpoint.httpx
    settings = endpoint.settings
    request = endpoint.battery.request(variant, settings.model)
    health = endpoint.battery.base_request(settings.model)
    findings: list[VariantFinding] = []
    not_exercised = None
    requests = 0
    steps = [("abort", True), ("health", False)]
    steps += [("cycle", True)] * ABORT_CYCLES + [("health", False)]
    for number, (step, abort) in enumerate(steps):
        requests += 1
        try:
            read = endpoint.stream(request if abort else health, abort_after_content=abort)
        except (httpx.TimeoutException, MaxTimeSpent) as exc:
            if number == 0:
                raise  # the abort's own request: nothing was aborted yet
            if step == "cycle":
                what = f"open/close cycle {number - 1} of {ABORT_CYCLES}"
            elif number == 1:
                what = "the health request after the abort"
            else:
                what = f"the health request after {ABORT_CYCLES} open/close cycles"
            within = (
                str(exc).removeprefix("no response head ")
                if isinstance(exc, MaxTimeSpent)
                else f"within --timeout {settings.timeout:g} s"
            )
            findings.append(_found("hang_after_abort", f"{what} got no answer {within}"))
            break
        if not read.is_event_stream:
            if number == 0:
                return _refused(variant, request, read)
            findings.append(
                _found("stream_incomplete", f"{step} request answered HTTP {read.status}")
            )
            continue
        if number == 0 and read.stopped != "abort":
            # No content to leave after: the stream ended, or a bound stopped its read.
            not_exercised = "the stream ended before its first content"
            if read.stopped is not None and read.stopped.startswith("--max-"):
                not_exercised = f"no content before the read stopped at {read.stopped}"
            break
        if not abort:
            findings += _stream_findings(read)
    return _judge(variant, request, findings, settings, requests, not_exercised)


#: What a plan shows for a run's id in the concurrent variant's markers.
_PLAN_RUN = "<run>"


def _marker(run: str, k: int) -> str:
    return f"MARK{run}X{k}"


def concurrent_requests(request: Mapping[str, Any], run: str) -> list[dict[str, Any]]:
    """The concurrent variant's bodies: ``request``, each asking to repeat its own marker."""
    return [
        {
            **request,
            "messages": [{"role": "user", "content": f"Repeat exactly: {_marker(run, k)}"}],
        }
        for k in range(CONCURRENT_STREAMS)
    ]


def _run_concurrent(endpoint: _Endpoint, variant: Variant) -> VariantResult:
    """``CONCURRENT_STREAMS`` streams at once, each asked to repeat its own marker."""
    settings = endpoint.settings
    run = uuid.uuid4().hex[:8]
    markers = [_marker(run, k) for k in range(CONCURRENT_STREAMS)]
    requests = concurrent_requests(endpoint.battery.request(variant, settings.model), run)
    reads: list[StreamRead | BaseException | None] = [None] * len(requests)

    def one(k: int) -> None:
        with endpoint.new_client(settings.timeout) as client:
            try:
                reads[k] = endpoint.stream(requests[k], client=client)
            except Exception as exc:  # reported below, per stream
                reads[k] = exc

    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    findings: list[VariantFinding] = []
    ids: dict[str, int] = {}
    for k, read in enumerate(reads):
        if not isinstance(read, StreamRead):
            what = type(read).__name__
            findings.append(_found("stream_incomplete", f"stream {k}: {what}"))
            continue
        if not read.is_event_stream:
            findings.append(_found("stream_incomplete", f"stream {k}: HTTP {read.status}"))
            continue
        for finding in _stream_findings(read):
            findings.append(
                VariantFinding(
                    finding.rule, finding.severity, f"stream {k}: {finding.message}", finding.source
                )
            )
        # A part of the stream still shows a shared id or another stream's marker.
        chunks = _chunks(read.body).kept
        for stream_id in {c.get("id") for c in chunks if isinstance(c.get("id"), str)}:
            if stream_id in ids:
                findings.append(
                    _found("stream_id_shared", f"streams {ids[stream_id]} and {k} share an id")
                )
            ids[str(stream_id)] = k
        text = "".join(Exchange(requests[k], RequestFacts(requests[k]), chunks).texts().values())
        for j, marker in enumerate(markers):
            if j != k and marker in text:
                findings.append(_found("cross_talk", f"stream {k} carried stream {j}'s marker"))
    return _judge(variant, requests[0], findings, settings, len(requests))


_RUNNERS: dict[str, Callable[[_Endpoint, Variant], VariantResult]] = {
    "stream": _run_stream,
    "abort": _run_abort,
    "concurrent": _run_concurrent,
}


def select(names: Sequence[str] | None, protocol: str = PROTOCOL) -> tuple[Variant, ...]:
    """The variants of ``protocol``'s battery ``names`` selects (``all``: every one, the
    opt-in ones too; None: the default ones); ``KeyError`` names an unknown one."""
    variants = battery(protocol).variants
    if not names:
        return tuple(v for v in variants if not v.opt_in)
    if list(names) == ["all"]:
        return variants
    known = {v.name: v for v in variants}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(", ".join(unknown))
    return tuple(v for v in variants if v.name in set(names))


def run_conformance(
    settings: RunSettings,
    variants: Sequence[Variant],
    read: StreamReader,
    shown_endpoint: str,
    on_result: Callable[[VariantResult], None] | None = None,
    new_client: Callable[[float], Any] | None = None,
    request_budget: Callable[[], AbstractContextManager[Any]] | None = None,
) -> RunSummary:
    """Run ``variants`` one at a time against the endpoint, each ``settings.repeat``
    times, each stream read by ``read``; ``shown_endpoint`` is the endpoint as the report
    shows it (no credentials). A variant whose requests would pass ``--max-requests`` or
    ``--budget-tokens`` is skipped, not run. ``new_client`` makes each httpx client of
    the run from ``--timeout`` (by default a plain one); ``request_budget`` bounds the
    requests made outside ``read`` (``--twin``'s answers) as ``read`` bounds its own.
    Needs httpx."""
    import httpx

    endpoint = _Endpoint(httpx, settings, read, new_client, request_budget)
    results: list[VariantResult] = []
    try:
        for variant in variants:
            request = endpoint.battery.request(variant, settings.model)
            needed, tokens = _needs(endpoint.battery, variant, settings)
            why = _not_run(settings, endpoint.sent, endpoint.sent_tokens, needed, tokens)
            if why is not None:
                skipped = VariantOutcome.SKIPPED
                result = VariantResult(variant.name, skipped, why, request, (), 0, runs=(skipped,))
            else:
                endpoint.spare_requests = _spare(settings.max_requests, endpoint.sent + needed)
                endpoint.spare_tokens = _spare(
                    settings.budget_tokens, endpoint.sent_tokens + tokens
                )
                sent, retried = endpoint.sent, len(endpoint.retries)
                endpoint.variant, endpoint.shown_endpoint = variant.name, shown_endpoint
                endpoint.captures = []
                runs = [_run_once(httpx, endpoint, variant) for _ in range(settings.repeat)]
                result = replace(
                    _combined(runs),
                    requests=endpoint.sent - sent,
                    retries=tuple(endpoint.retries[retried:]),
                    bodies=tuple(endpoint.bodies[sent:]),
                    captures=tuple(endpoint.captures),
                )
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        endpoint.close()
    return RunSummary(
        shown_endpoint, settings.model, tuple(results), settings.protocol, endpoint.sent_tokens
    )


#: The room for retries when no budget bounds it (each request retries at most once).
_UNBOUNDED = 1 << 62


def _spare(limit: int | None, committed: int) -> int:
    """What a budget leaves for retries once the variant's own requests are counted."""
    return _UNBOUNDED if limit is None else max(0, limit - committed)


def _needs(battery: Battery, variant: Variant, settings: RunSettings) -> tuple[int, int]:
    """The requests a variant sends over its ``--repeat`` runs, and their worst-case
    output tokens (retries aside)."""
    bodies = _bodies(battery, variant, settings.model, settings.twin)
    tokens = sum(battery.worst_case_tokens(body) for body in bodies)
    return len(bodies) * settings.repeat, tokens * settings.repeat


def _not_run(
    settings: RunSettings, spent: int, spent_tokens: int, needed: int, tokens: int
) -> str | None:
    """Why a variant is not run (its requests would pass a budget), or None: the run and
    the plan decide alike."""
    if settings.max_requests is not None and spent + needed > settings.max_requests:
        return f"not run: --max-requests {settings.max_requests} spent"
    if settings.budget_tokens is not None and spent_tokens + tokens > settings.budget_tokens:
        return f"not run: --budget-tokens {settings.budget_tokens} spent"
    return None


def _run_once(httpx: Any, endpoint: _Endpoint, variant: Variant) -> VariantResult:
    try:
        return _RUNNERS[variant.kind](endpoint, variant)
    except NotReplayable as exc:
        request = endpoint.battery.request(variant, endpoint.settings.model)
        reason = f"not re-judged offline: {exc}"
        return VariantResult(variant.name, VariantOutcome.SKIPPED, reason, request, (), 0)
    except MaxTimeSpent as exc:
        request = endpoint.battery.request(variant, endpoint.settings.model)
        return VariantResult(variant.name, VariantOutcome.ERROR, str(exc), request, (), 1)
    except httpx.HTTPError as exc:
        request = endpoint.battery.request(variant, endpoint.settings.model)
        reason = f"request failed: {type(exc).__name__}"
        return VariantResult(variant.name, VariantOutcome.ERROR, reason, request, (), 1)


def _combined(runs: Sequence[VariantResult]) -> VariantResult:
    """One result for a variant's runs. Runs that judged (pass, fail, error) and disagree
    make it ``flaky``, with the findings of the runs that did not pass; runs that agree
    give their outcome, with the first such run's findings; skipped runs judged nothing
    (the model did not do the thing) and count only when every run was skipped."""
    outcomes = tuple(run.outcome for run in runs)
    judged = [run for run in runs if run.outcome is not VariantOutcome.SKIPPED]
    verdicts = {run.outcome for run in judged}
    if len(verdicts) > 1:
        counts = ", ".join(
            f"{outcomes.count(outcome)} {outcome.value}"
            for outcome in VariantOutcome
            if outcome in outcomes
        )
        failed = [run for run in judged if run.outcome is not VariantOutcome.PASS]
        return replace(
            runs[0],
            outcome=VariantOutcome.FLAKY,
            reason=f"flaky: {counts} of {len(runs)} runs",
            findings=_capped(finding for run in failed for finding in run.findings),
            runs=outcomes,
        )
    return replace(judged[0] if judged else runs[0], runs=outcomes)


# -- the plan and the report -------------------------------------------------------------------


def _bodies(battery: Battery, variant: Variant, model: str, twin: bool) -> list[dict[str, Any]]:
    """Every request body a variant sends, in order (``_run_abort`` sends the abort's
    request for the abort and each cycle, the base request for the two health checks;
    ``_run_concurrent`` one per stream; a twin the same body unstreamed)."""
    request = battery.request(variant, model)
    if variant.kind == "abort":
        health = battery.base_request(model)
        return [request, health, *[request] * ABORT_CYCLES, health]
    if variant.kind == "concurrent":
        return concurrent_requests(request, _PLAN_RUN)
    if twin and variant.twin_ignores is not None:
        return [request, twin_body(request)]
    return [request]


def plan(settings: RunSettings, variants: Sequence[Variant]) -> list[dict[str, Any]]:
    """What a run would send, variant by variant (each ``--repeat`` times): the requests,
    the body of the first,
    every body in the order sent (``bodies``; the concurrent variant's markers carry
    ``<run>`` where a run puts its own id), and the worst-case output tokens (the cap x
    ``n``, summed over its requests), and why it would not run (``not_run``: it would pass
    ``--max-requests`` or ``--budget-tokens``; None when it runs). A retry, made only when
    a request fails before its first byte, is not planned: it comes out of the budgets."""
    rows = []
    chosen = settings.battery
    spent = spent_tokens = 0
    for variant in variants:
        bodies = _bodies(chosen, variant, settings.model, settings.twin) * settings.repeat
        needed, tokens = _needs(chosen, variant, settings)
        why = _not_run(settings, spent, spent_tokens, needed, tokens)
        if why is None:
            spent, spent_tokens = spent + needed, spent_tokens + tokens
        rows.append(
            {
                "variant": variant.name,
                "requests": needed,
                "max_output_tokens": tokens,
                "request": bodies[0],
                "bodies": bodies,
                "not_run": why,
            }
        )
    return rows


def _finding_json(finding: VariantFinding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "source": finding.source,
        "focus": finding.focus,
        "message": finding.message,
    }


def summary_json(summary: RunSummary) -> dict[str, Any]:
    """The run as one JSON object (the API key is never part of it)."""
    from streamguard import __version__

    return {
        "endpoint": summary.endpoint,
        "model": summary.model,
        "protocol": summary.protocol,
        "streamguard": __version__,
        "requests": summary.requests,
        "max_output_tokens": summary.tokens,
        "failed": summary.failed,
        "variants": [
            {
                "name": result.name,
                "outcome": result.outcome.value,
                "reason": result.reason,
                "requests": result.requests,
                "note": result.note,
                "runs": [outcome.value for outcome in result.runs],
                "retries": list(result.retries),
                "captures": list(result.captures),
                "request": result.request,
                "findings": [_finding_json(f) for f in result.findings],
                "timing": {
                    "time_to_first_byte_s": result.time_to_first_byte,
                    "max_gap_s": result.max_gap,
                    "duration_s": result.duration,
                },
            }
            for result in summary.results
        ],
    }


def _rules(result: VariantResult) -> str:
    counts: dict[str, int] = {}
    for finding in result.findings:
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    return ", ".join(rule if n == 1 else f"{rule} x{n}" for rule, n in counts.items())


def summary_text(summary: RunSummary) -> str:
    """The run for a terminal: one row per variant, then each variant's findings."""
    from streamguard._table import table

    rows = [["variant", "outcome", "findings"]]
    for result in summary.results:
        shown = _rules(result) or result.reason or "-"
        rows.append([result.name, result.outcome.value, shown])
    lines = [f"endpoint {summary.endpoint}, model {summary.model}", "", table(rows)]
    for result in summary.results:
        if result.retries:
            causes = ", ".join(result.retries)
            lines += ["", f"{result.name}: retried before the first byte ({causes})"]
        if result.note:
            lines += ["", f"{result.name}: {result.note}"]
    for result in summary.results:
        if not result.findings:
            continue
        lines += ["", f"{result.name}:"]
        for finding in result.findings:
            focus = " (the variant's focus: fails it)" if finding.focus else ""
            lines.append(f"  {finding.severity.value} {finding.rule}{focus}: {finding.message}")
    counts = dict.fromkeys(VariantOutcome, 0)
    for result in summary.results:
        counts[result.outcome] += 1
    lines += [
        "",
        ", ".join(
            f"{counts[o]} {o.value}"
            for o in VariantOutcome
            if o is not VariantOutcome.FLAKY or counts[o]
        )
        + f"; {summary.requests} requests",
    ]
    return "\n".join(lines)


# -- --save and --replay ----------------------------------------------------------------------

#: The largest ``conformance.json`` ``--replay`` reads, in bytes.
MAX_SAVED_SUMMARY_BYTES = 16 * 1024 * 1024
#: A capture file's name as ``--save`` writes it (``capture_name``): a variant's name, then
#: a number from 2 for its second stream on. ``--replay`` reads no other name.
_CAPTURE_NAME = re.compile(r"[a-z0-9_]{1,64}(-[0-9]{1,6})?\.jsonl")
SAVED_SUMMARY = "conformance.json"


class MaxTimeSpent(Exception):
    """The reader's ``--max-time`` passed before the response head arrived (a head sent
    byte by byte): the request has nothing to judge; the message says so."""


class NotReplayable(Exception):
    """``--replay``: a request of the saved run has no capture to read again."""


def capture_name(variant: str, k: int) -> str:
    """The file of a variant's ``k``-th stream (from 1): ``plain.jsonl``, ``abort-2.jsonl``."""
    return f"{variant}.jsonl" if k == 1 else f"{variant}-{k}.jsonl"


def _write_capture(
    path: Path,
    variant: str,
    body: Mapping[str, Any],
    read: StreamRead,
    endpoint: str,
    settings: RunSettings,
) -> None:
    """Write one stream a variant read in probe's capture format (``probe --save``'s
    header, with what ``--replay`` needs besides: the request, how the read ended)."""
    header = {
        "url": endpoint,
        "status": read.status,
        "content_type": read.content_type,
        "protocol": settings.protocol,
        "variant": variant,
        "request": body,
        "content_encoding": read.content_encoding,
        "content_length": read.content_length,
        "end": read.end,
        "cause": read.cause,
        "stopped": read.stopped,
    }
    with open(path, "w", encoding="utf-8") as out:
        write_capture(out, header, read.arrivals)


def saved_json(summary: RunSummary, settings: RunSettings) -> dict[str, Any]:
    """``DIR/conformance.json``: the summary JSON (each variant's capture files among it)
    with what ``--replay`` needs besides: the run's ``repeat`` and ``twin``, and per variant
    every body sent."""
    saved = summary_json(summary)
    saved["repeat"] = settings.repeat
    saved["twin"] = settings.twin
    for shown, result in zip(saved["variants"], summary.results, strict=True):
        shown["bodies"] = list(result.bodies)
    return saved


def _read_within(file: Any, limit: int) -> bytes:
    """At most ``limit`` bytes of ``file``, read in pieces: ``read(limit)`` would allocate
    the whole limit up front, however small the file."""
    data = bytearray()
    while len(data) < limit:
        piece = file.read(min(_PARSE_PIECE_BYTES, limit - len(data)))
        if not piece:
            break
        data += piece
    return bytes(data)


def load_saved(directory: Path) -> dict[str, Any]:
    """The ``conformance.json`` of a ``--save`` directory, checked for what ``--replay``
    reads; ``ValueError`` says what is wrong."""
    path = directory / SAVED_SUMMARY
    try:
        with open(path, "rb") as file:
            data = _read_within(file, MAX_SAVED_SUMMARY_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    if len(data) > MAX_SAVED_SUMMARY_BYTES:
        raise ValueError(f"{path}: larger than {MAX_SAVED_SUMMARY_BYTES} bytes")
    try:
        saved = json.loads(data)
    except ValueError:
        raise ValueError(f"{path}: not JSON") from None
    if not isinstance(saved, dict) or saved.get("protocol") not in PROTOCOLS:
        raise ValueError(f"{path}: not a conformance run saved by --save")
    known = {v.name for v in battery(saved["protocol"]).variants}
    for variant in sequence(saved.get("variants")):
        names = sequence(mapping(variant).get("captures"))
        if mapping(variant).get("name") not in known or not all(
            isinstance(n, str) and _CAPTURE_NAME.fullmatch(n) for n in names
        ):
            raise ValueError(f"{path}: a variant that --save did not write")
    if not isinstance(saved.get("model"), str) or type(saved.get("repeat")) is not int:
        raise ValueError(f"{path}: not a conformance run saved by --save")
    return saved


def replay_settings(saved: Mapping[str, Any]) -> RunSettings:
    """The settings a replay runs with: the saved run's protocol, model and repeat; no
    twin (its answers were not streams: nothing was saved), no budget (nothing is sent)."""
    return RunSettings(
        base_url=str(saved.get("endpoint", "")),
        model=saved["model"],
        protocol=saved["protocol"],
        repeat=max(1, saved["repeat"]),
    )


def replay_variants(saved: Mapping[str, Any]) -> tuple[Variant, ...]:
    """The saved variants a replay judges again: those that ran (they have captures),
    but the concurrent one (its streams' markers are new each run)."""
    chosen = battery(saved["protocol"])
    ran = {v["name"] for v in saved["variants"] if v.get("captures")}
    return tuple(v for v in chosen.variants if v.name in ran and v.kind != "concurrent")


def replayed(saved: Mapping[str, Any], summary: RunSummary) -> RunSummary:
    """The replay's summary in the saved run's order: each variant judged again, with a
    note on what could not be, and the variants that could not be judged at all."""
    chosen = battery(saved["protocol"])
    kinds = {v.name: v for v in chosen.variants}
    judged = {result.name: result for result in summary.results}
    results = []
    for shown in saved["variants"]:
        name = shown["name"]
        variant = kinds[name]
        result = judged.get(name)
        if result is None:
            if variant.kind == "concurrent" and shown.get("captures"):
                why = "not re-judged offline: concurrent streams need a live exchange"
            else:
                why = f"not re-judged offline: no capture (live: {shown.get('outcome')})"
            request = chosen.request(variant, summary.model)
            result = VariantResult(name, VariantOutcome.SKIPPED, why, request, (), 0)
        notes = [result.note] if result.note else []
        if variant.kind == "abort":
            notes.append(
                "the health requests are judged again from their captures; how long they "
                "took (a hang) is not"
            )
        if saved.get("twin") and variant.twin_ignores is not None:
            notes.append("--twin's non-streamed answer is not judged again offline")
        captures = tuple(str(name) for name in shown.get("captures", ()))
        results.append(replace(result, note="; ".join(notes), captures=captures))
    return replace(summary, results=tuple(results))


def api_key_from(env: str | None) -> str | None:
    """The API key in the environment variable ``env`` (None when unset or empty)."""
    if env is None:
        return None
    return os.environ.get(env) or None


def reference_markdown() -> str:
    """The variants and the conformance rules as markdown tables: the generated part of
    ``docs/conformance.md`` (a test keeps the page in step)."""
    lines: list[str] = []
    for protocol in PROTOCOLS:
        chosen = battery(protocol)
        lines += [
            f"### {chosen.title} (`--protocol {protocol}`)",
            "",
            f"`POST {{base}}{chosen.path}`; the key from `{chosen.api_key_env}`; every "
            f"request sets `{chosen.cap_key}`.",
            "",
            "| variant | requests | what it checks |",
            "|---|---|---|",
        ]
        for variant in chosen.variants:
            name = f"`{variant.name}`" + (" (opt-in)" if variant.opt_in else "")
            summary = variant.summary.removeprefix("opt-in: ")
            lines.append(f"| {name} | {variant.requests(twin=False)} | {summary} |")
        lines.append("")
    lines += ["### Rules", "", "| rule | severity | meaning |", "|---|---|---|"]
    for rule, (severity, meaning) in CONFORMANCE_RULES.items():
        lines.append(f"| `{rule}` | {severity.value} | {meaning} |")
    return "\n".join(lines) + "\n"
