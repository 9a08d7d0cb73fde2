"""OpenAI Chat Completions streaming (``protocol="openai_chat"``).

Theory of operation
-------------------

The stream is data-only SSE: one JSON chunk per event, ended by ``data: [DONE]``
(reference §1). ``[DONE]`` is recognised by prefix before any JSON parsing, as the SDK does
(``data.startswith("[DONE]")``). Every other payload is parsed and shape-checked in one
pass by pydantic-core against ``_Chunk`` (a strict TypedDict that declares only the fields
a rule reads; unknown keys are ignored, so providers' additions never matter).

The stream as a whole moves through four phases; every transition is in ``check_event``,
``on_event`` and ``_on_done``::

    STREAMING --usage chunk--> USAGE_SENT --[DONE]--> DONE
        |                          |
        +--{"error": ...}--> ERRORED --[DONE]--> DONE (outcome stays error_event)
        +--[DONE]--------------------------------> DONE

Each choice index has its own small machine (``_Choice``): unseen, open (a delta arrived),
finished (its one non-null ``finish_reason`` arrived). Each tool call of a choice
(``_ToolCall``) is opened by its first delta, which must carry the header (``id`` and
``function.name``); later deltas carry only argument fragments, which are joined and parsed
as JSON when the choice finishes.

What the request says (``stream_options.include_usage``, ``n``) sharpens the usage and
finish checks; without a request (``request=None``) the checks that need it are skipped
rather than guessed.

Azure's prompt-annotation chunk (``choices: []`` with ``prompt_filter_results``, empty
``id``/``object``, ``created: 0``) and its async-filter annotation chunks (choices without
``delta``) are part of the protocol: they are exempt from the ``object``/``id`` checks and
never count as content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from streamguard import rules
from streamguard.protocols._base import NO_FINDINGS, Checker
from streamguard.protocols._payload import parse_json, preview, validation_finding
from streamguard.report import Finding
from streamguard.sse import Event

__all__ = ["FINISH_REASONS", "OpenAIChatChecker"]

#: The documented ``finish_reason`` values; any other non-null value is non-standard.
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})

#: Past this many bytes of one call's arguments, stop collecting them (memory stays bounded)
#: and skip that call's JSON check.
MAX_ARGUMENT_CHARS = 1024 * 1024

_STRICT = ConfigDict(strict=True)


# -- The documented chunk shape (openai-python types/chat/chat_completion_chunk.py) --------


class _Function(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str | None
    arguments: str | None


class _ToolCallDelta(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    index: Any  # checked by hand: its own rule, tool_call_index_invalid
    id: str | None
    type: str | None
    function: _Function | None


class _Delta(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    role: Literal["developer", "system", "user", "assistant", "tool"] | None
    content: str | None
    refusal: str | None
    tool_calls: list[_ToolCallDelta] | None
    function_call: _Function | None


class _TopLogprob(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    token: str
    logprob: float
    bytes: NotRequired[list[int] | None]


class _TokenLogprob(_TopLogprob):
    top_logprobs: list[_TopLogprob]


class _Logprobs(TypedDict, total=False):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    content: list[_TokenLogprob] | None
    refusal: list[_TokenLogprob] | None


class _Choice(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    index: int
    delta: NotRequired[_Delta]  # absent on Azure async-filter annotation chunks
    finish_reason: NotRequired[str | None]
    logprobs: NotRequired[_Logprobs | None]


class _Usage(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _Chunk(TypedDict):
    __pydantic_config__ = _STRICT  # type: ignore[misc]
    id: str
    object: str  # a Literal, except on Azure's annotation chunk: checked by hand
    created: int
    model: str
    choices: NotRequired[list[_Choice] | None]  # null/absent: compat usage chunks only
    usage: NotRequired[_Usage | None]
    system_fingerprint: NotRequired[str | None]
    service_tier: NotRequired[str | None]
    obfuscation: NotRequired[str | None]
    prompt_filter_results: NotRequired[Any]
    prompt_annotations: NotRequired[Any]
    error: NotRequired[Any]  # OpenRouter: a truthy error on an otherwise normal chunk


_from_json = parse_json
_STR_OR_NONE = frozenset({str, type(None)})
#: The full shape check, run on the already-parsed chunk (no second parse) whenever the
#: fast check below does not vouch for it; it names the field path of the first problem.
_validate_chunk = TypeAdapter(_Chunk).validator.validate_python


# -- State ------------------------------------------------------------------------------


class _Phase(Enum):
    STREAMING = "streaming"
    USAGE_SENT = "usage_sent"  # the usage chunk arrived: only [DONE] may follow
    ERRORED = "errored"  # an in-band error payload arrived: only [DONE] may follow
    DONE = "done"


class _ToolCall:
    __slots__ = ("arguments", "arguments_chars", "has_id", "has_name", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self.has_id = False
        self.has_name = False
        self.arguments: list[str] | None = []  # None once past MAX_ARGUMENT_CHARS
        self.arguments_chars = 0

    def add_arguments(self, fragment: str) -> None:
        if self.arguments is None:
            return
        self.arguments_chars += len(fragment)
        if self.arguments_chars > MAX_ARGUMENT_CHARS:
            self.arguments = None
        else:
            self.arguments.append(fragment)


class _ChoiceState:
    __slots__ = ("deltas", "finish_reason", "finished_at", "legacy_function", "role_at", "tools")

    def __init__(self) -> None:
        self.deltas = 0  # chunks that carried a delta for this choice
        self.role_at: int | None = None
        self.finish_reason: str | None = None
        self.finished_at: int | None = None
        self.tools: dict[int, _ToolCall] = {}
        self.legacy_function: _ToolCall | None = None  # the deprecated function_call delta


class OpenAIChatChecker(Checker):
    """Checks an OpenAI Chat Completions stream chunk by chunk (reference §1)."""

    name = "openai_chat"

    def __init__(self, request: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        super().__init__(request, path)
        self._phase = _Phase.STREAMING
        self._choices: dict[int, _ChoiceState] = {}
        # The first ordinary chunk's id and created; every later one must repeat them.
        self._id: str | None = None
        self._created: int | None = None
        self._id_reported = False
        self._usage_at: int | None = None  # the standard usage chunk (empty choices)
        self._usage_seen = False  # any non-null usage, standard or not
        self._reported: set[str] = set()  # rules reported once per stream
        # What the request asked for; None when unknown.
        self._include_usage: bool | None = None
        self._n: int | None = None
        if request is not None:
            options = request.get("stream_options")
            self._include_usage = isinstance(options, Mapping) and (
                options.get("include_usage") is True
            )
            n = request.get("n", 1)
            self._n = n if type(n) is int and n >= 1 else None

    # -- lifecycle -----------------------------------------------------------------------

    def is_terminal(self, event: Event) -> bool:
        return event.data.startswith("[DONE]")

    def on_event(self, event: Event, index: int) -> Sequence[Finding]:
        if self.terminal_index is None and self._phase is not _Phase.ERRORED:
            return self.check_event(event, index)  # the common case, one call deep
        # After an in-band error only a [DONE] may follow (error := E D? EOF).
        if self._phase is _Phase.ERRORED:
            if self.is_terminal(event):
                self._phase = _Phase.DONE
                self.terminal_index = index
                return NO_FINDINGS
            return (
                rules.EVENT_AFTER_TERMINAL.finding(
                    f"event {index} follows the in-band error payload of event "
                    f"{self.error_index}; only [DONE] may follow it",
                    index,
                    event.offset,
                ),
            )
        return super().on_event(event, index)

    def check_end(self, events: int, offset: int) -> Sequence[Finding]:
        found = list(super().check_end(events, offset))
        if self._phase is _Phase.STREAMING or self._phase is _Phase.USAGE_SENT:
            found.extend(self._unfinished_choices(events, offset, "the body ended"))
        return found

    # -- one event ---------------------------------------------------------------------

    def check_event(self, event: Event, index: int) -> Sequence[Finding]:
        data = event.data
        if data.startswith("[DONE]"):
            return self._on_done(event, index)
        try:
            parsed = _from_json(data)
        except ValueError as error:  # syntax, recursion limit, number out of range
            return self._general(event, index, None, error)
        if event.event == "message" and type(parsed) is dict and self._fast_path(parsed):
            return NO_FINDINGS
        return self._general(event, index, parsed, None)

    def _general(
        self, event: Event, index: int, parsed: object, error: ValueError | None
    ) -> Sequence[Finding]:
        """Every chunk the fast path did not vouch for: the full shape check and all rules."""
        found: list[Finding] = []
        if event.event != "message" and "unexpected_event_field" not in self._reported:
            self._reported.add("unexpected_event_field")
            routed = " (the SDK routes thread.* names to Assistants)"
            found.append(
                rules.UNEXPECTED_EVENT_FIELD.finding(
                    f"event {index} is named {event.event[:40]!r}; chat streams are data-only"
                    + (routed if event.event.startswith("thread.") else ""),
                    index,
                    event.offset,
                )
            )
        if error is not None:
            found.append(
                rules.INVALID_JSON.finding(
                    f"event {index}: data is not JSON ({error}): {preview(event.data)}",
                    index,
                    event.offset,
                )
            )
            return found
        if type(parsed) is not dict:
            found.append(
                rules.INVALID_JSON.finding(
                    f"event {index}: data is JSON but not an object: {preview(event.data)}",
                    index,
                    event.offset,
                )
            )
            return found
        if parsed.get("error"):  # as the SDK: any truthy top-level error is an error
            return [*found, *self._on_error(event, index)]
        try:
            chunk: _Chunk = _validate_chunk(parsed)
        except ValidationError as invalid:
            found.append(validation_finding(invalid, event, index))
            return found
        choices = chunk.get("choices")
        usage = chunk.get("usage")
        if self._phase is _Phase.USAGE_SENT and not (usage is not None and choices == []):
            found.append(self._after_usage(event, index))  # a second one: usage_repeated
        if choices is None and usage is None:
            found.append(
                rules.SCHEMA_MISMATCH.finding(
                    f"event {index}: field choices: missing or null on a chunk without usage",
                    index,
                    event.offset,
                )
            )
            return found
        if not choices and (
            "prompt_filter_results" in chunk or "prompt_annotations" in chunk
        ):  # Azure's prompt-annotation chunk: its own empty id, object and created
            if usage is not None:
                self._on_usage(chunk, usage, event, index, found)
            return found
        # Azure's async-filter annotation chunks carry no delta (and Azure's empty ids).
        if (
            chunk["id"] != self._id
            or chunk["created"] != self._created
            or chunk["object"] != "chat.completion.chunk"
        ) and (not choices or any("delta" in choice for choice in choices)):
            self._check_identity(chunk, event, index, found)
        if choices:
            for choice in choices:
                self._on_choice(choice, event, index, found)
        if usage is not None:
            self._on_usage(chunk, usage, event, index, found)
        return found

    def _fast_path(self, chunk: dict[str, Any]) -> bool:
        """Handle the common chunk by hand; False sends it down the general path.

        Thousands of chunks per stream look alike: one more piece of text for a choice that
        is open and unfinished, with the stream's id, no logprobs and no usage. For such a
        chunk the only transition is "one more delta", and a few type checks give the same
        verdict as the full validator at a fraction of its cost. Anything else, or anything
        doubtful, returns False, so this is only ever an optimisation.
        """
        get = chunk.get
        choices = get("choices")
        if type(choices) is not list or len(choices) != 1 or self._phase is not _Phase.STREAMING:
            return False
        choice = choices[0]
        if type(choice) is not dict:
            return False
        delta = choice.get("delta")
        if type(delta) is not dict or len(delta) != 1 or type(delta.get("content")) is not str:
            return False
        number = choice.get("index")
        state = self._choices.get(number) if type(number) is int else None
        if state is None or state.finished_at is not None:
            return False
        created = get("created")
        if not (
            get("id") == self._id
            and type(created) is int
            and created == self._created
            and get("object") == "chat.completion.chunk"
            and type(get("model")) is str
            and get("usage") is None
            and not get("error")
            and choice.get("finish_reason") is None
            and choice.get("logprobs") is None
            and type(get("system_fingerprint")) in _STR_OR_NONE
            and type(get("service_tier")) in _STR_OR_NONE
            and type(get("obfuscation")) in _STR_OR_NONE
        ):
            return False
        state.deltas += 1
        return True

    # -- transitions -------------------------------------------------------------------

    def _on_done(self, event: Event, index: int) -> Sequence[Finding]:
        self._phase = _Phase.DONE
        self.terminal_index = index
        found = self._unfinished_choices(index, event.offset, f"[DONE] (event {index})")
        if self._include_usage and not self._usage_seen:
            found.append(
                rules.USAGE_MISSING.finding(
                    f"[DONE] (event {index}) arrived but no chunk carried usage although "
                    "stream_options.include_usage was requested",
                    index,
                    event.offset,
                )
            )
        return found

    def _on_error(self, event: Event, index: int) -> Sequence[Finding]:
        """An in-band error payload (truthy top-level ``error``) ends the stream."""
        self._phase = _Phase.ERRORED
        self.error_index = index
        return NO_FINDINGS

    def _after_usage(self, event: Event, index: int) -> Finding:
        """Any chunk after the usage chunk breaks 'usage right before [DONE]'."""
        self._phase = _Phase.STREAMING  # report once, then keep checking as usual
        return rules.USAGE_NOT_LAST.finding(
            f"event {index} follows the usage chunk (event {self._usage_at}); only [DONE] "
            "may follow it",
            index,
            event.offset,
        )

    def _check_identity(
        self, chunk: _Chunk, event: Event, index: int, found: list[Finding]
    ) -> None:
        if chunk["object"] != "chat.completion.chunk":
            found.append(
                rules.SCHEMA_MISMATCH.finding(
                    f"event {index}: field object: expected 'chat.completion.chunk', got "
                    f"{chunk['object'][:40]!r}",
                    index,
                    event.offset,
                )
            )
        if self._id is None:
            self._id, self._created = chunk["id"], chunk["created"]
        elif (chunk["id"] != self._id or chunk["created"] != self._created) and not (
            self._id_reported
        ):
            self._id_reported = True
            found.append(
                rules.INCONSISTENT_ID.finding(
                    f"event {index}: id {chunk['id'][:60]!r} / created {chunk['created']} "
                    f"differ from the first chunk's {self._id[:60]!r} / {self._created}",
                    index,
                    event.offset,
                )
            )

    def _on_choice(self, choice: _Choice, event: Event, index: int, found: list[Finding]) -> None:
        number = choice["index"]
        state = self._choices.get(number)
        if state is None:
            state = self._new_choice(number, event, index, found)
        delta = choice.get("delta")
        if delta is not None:
            if state.finished_at is not None:
                self._content_after_finish(number, state, delta, event, index, found)
            self._on_delta(number, state, delta, event, index, found)
        reason = choice.get("finish_reason")
        if reason is not None:
            self._on_finish(number, state, reason, event, index, found)

    def _new_choice(
        self, number: int, event: Event, index: int, found: list[Finding]
    ) -> _ChoiceState:
        if number < 0 or (self._n is not None and number >= self._n):
            bound = f" (the request asked for n={self._n})" if self._n is not None else ""
            found.append(
                rules.CHOICE_INDEX_INVALID.finding(
                    f"event {index}: choice index {number} is out of range{bound}",
                    index,
                    event.offset,
                )
            )
        elif self._choices and number < max(self._choices):
            found.append(
                rules.CHOICE_OUT_OF_ORDER.finding(
                    f"event {index}: choice {number} first appears after choice "
                    f"{max(self._choices)}",
                    index,
                    event.offset,
                )
            )
        state = self._choices[number] = _ChoiceState()
        return state

    def _on_delta(
        self,
        number: int,
        state: _ChoiceState,
        delta: _Delta,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        state.deltas += 1
        if delta.get("role") is not None:
            if state.role_at is not None:
                found.append(
                    rules.ROLE_REPEATED.finding(
                        f"event {index}: choice {number} sends delta.role again (first at "
                        f"event {state.role_at})",
                        index,
                        event.offset,
                    )
                )
            elif state.deltas > 1:
                found.append(
                    rules.ROLE_NOT_FIRST.finding(
                        f"event {index}: choice {number} sends delta.role on its chunk "
                        f"#{state.deltas}, not its first",
                        index,
                        event.offset,
                    )
                )
            if state.role_at is None:
                state.role_at = index
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            for call in tool_calls:
                self._on_tool_call(number, state, call, event, index, found)
        function_call = delta.get("function_call")
        if function_call is not None:
            self._on_function_call(number, state, function_call, event, index, found)

    def _on_tool_call(
        self,
        number: int,
        state: _ChoiceState,
        call: _ToolCallDelta,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        where = f"event {index}: choice {number}"
        position = call.get("index")
        if type(position) is not int or position < 0:
            found.append(
                rules.TOOL_CALL_INDEX_INVALID.finding(
                    f"{where}: tool_calls entry has index {position!r}; an integer >= 0 is "
                    "required",
                    index,
                    event.offset,
                )
            )
            return
        function = call.get("function") or {}
        has_id, has_name = bool(call.get("id")), bool(function.get("name"))
        tool = state.tools.get(position)
        if tool is None:
            if position != len(state.tools):
                found.append(
                    rules.TOOL_CALL_INDEX_INVALID.finding(
                        f"{where}: tool call index {position} first appears after "
                        f"{len(state.tools)} call(s); expected index {len(state.tools)}",
                        index,
                        event.offset,
                    )
                )
            tool = state.tools[position] = _ToolCall(position)
            if not (has_id and has_name):
                missing = " and ".join(
                    name for name, ok in (("id", has_id), ("function.name", has_name)) if not ok
                )
                found.append(
                    rules.TOOL_CALL_HEADER_MISSING.finding(
                        f"{where}: the first delta of tool call {position} has no {missing}",
                        index,
                        event.offset,
                    )
                )
        elif (has_id and tool.has_id) or (has_name and tool.has_name):
            again = " and ".join(
                name
                for name, repeated in (
                    ("id", has_id and tool.has_id),
                    ("function.name", has_name and tool.has_name),
                )
                if repeated
            )
            found.append(
                rules.TOOL_CALL_HEADER_REPEATED.finding(
                    f"{where}: tool call {position} sends its {again} again",
                    index,
                    event.offset,
                )
            )
        tool.has_id = tool.has_id or has_id
        tool.has_name = tool.has_name or has_name
        arguments = function.get("arguments")
        if arguments:
            tool.add_arguments(arguments)
        if state.legacy_function is not None:
            self._mixed(number, event, index, found)

    def _on_function_call(
        self,
        number: int,
        state: _ChoiceState,
        call: _Function,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        if state.legacy_function is None:
            state.legacy_function = _ToolCall(0)
            if state.tools:
                self._mixed(number, event, index, found)
        arguments = call.get("arguments")
        if arguments:
            state.legacy_function.add_arguments(arguments)

    def _mixed(self, number: int, event: Event, index: int, found: list[Finding]) -> None:
        if "function_call_mixed" not in self._reported:
            self._reported.add("function_call_mixed")
            found.append(
                rules.FUNCTION_CALL_MIXED.finding(
                    f"event {index}: choice {number} mixes function_call and tool_calls deltas",
                    index,
                    event.offset,
                )
            )

    def _content_after_finish(
        self,
        number: int,
        state: _ChoiceState,
        delta: _Delta,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        # Empty strings and empty lists carry nothing: only real content counts.
        kinds = [
            kind
            for kind in ("content", "refusal", "tool_calls", "function_call")
            if delta.get(kind)
        ]
        if kinds:
            found.append(
                rules.CONTENT_AFTER_FINISH.finding(
                    f"event {index}: choice {number} sends {', '.join(kinds)} after its "
                    f"finish_reason {state.finish_reason!r} (event {state.finished_at})",
                    index,
                    event.offset,
                )
            )

    def _on_finish(
        self,
        number: int,
        state: _ChoiceState,
        reason: str,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        if state.finished_at is not None:
            found.append(
                rules.MULTIPLE_FINISH_REASON.finding(
                    f"event {index}: choice {number} finishes again with {reason[:40]!r}; it "
                    f"finished with {state.finish_reason!r} at event {state.finished_at}",
                    index,
                    event.offset,
                )
            )
            return
        state.finish_reason, state.finished_at = reason, index
        if reason not in FINISH_REASONS:
            found.append(
                rules.UNKNOWN_FINISH_REASON.finding(
                    f"event {index}: choice {number} finishes with the non-standard "
                    f"finish_reason {reason[:40]!r}",
                    index,
                    event.offset,
                )
            )
        calls = list(state.tools.values())
        if state.legacy_function is not None:
            calls.append(state.legacy_function)
        for call in calls:
            if call.arguments is None:
                continue
            text = "".join(call.arguments)
            try:
                parse_json(text)
            except ValueError as error:
                what = (
                    "function_call" if call is state.legacy_function else f"tool call {call.index}"
                )
                found.append(
                    rules.TOOL_CALL_ARGUMENTS_INVALID.finding(
                        f"event {index}: choice {number} finished but the arguments of {what} "
                        f"are not JSON ({error}): {preview(text)}",
                        index,
                        event.offset,
                    )
                )
            call.arguments = None  # checked: free the text

    def _on_usage(
        self,
        chunk: _Chunk,
        usage: _Usage,
        event: Event,
        index: int,
        found: list[Finding],
    ) -> None:
        choices = chunk.get("choices")
        if self._include_usage is False and "usage_unrequested" not in self._reported:
            self._reported.add("usage_unrequested")
            found.append(
                rules.USAGE_UNREQUESTED.finding(
                    f"event {index} carries usage but stream_options.include_usage was not "
                    "requested",
                    index,
                    event.offset,
                )
            )
        if usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
            found.append(
                rules.USAGE_TOTAL_MISMATCH.finding(
                    f"event {index}: usage.total_tokens {usage['total_tokens']} != "
                    f"prompt_tokens {usage['prompt_tokens']} + completion_tokens "
                    f"{usage['completion_tokens']}",
                    index,
                    event.offset,
                )
            )
        self._usage_seen = True
        if choices or choices is None:
            # Compat placements (vLLM, continuous usage, usage on the finish chunk).
            if "usage_nonstandard" not in self._reported:
                self._reported.add("usage_nonstandard")
                where = "a chunk with choices" if choices else "a chunk with choices null or absent"
                found.append(
                    rules.USAGE_NONSTANDARD.finding(
                        f"event {index} carries usage on {where}; OpenAI sends it on a chunk of "
                        "its own with choices: []",
                        index,
                        event.offset,
                    )
                )
            return
        if self._usage_at is not None:
            found.append(
                rules.USAGE_REPEATED.finding(
                    f"event {index} is a second usage chunk (the first was event {self._usage_at})",
                    index,
                    event.offset,
                )
            )
            self._phase = _Phase.USAGE_SENT
            return
        self._usage_at = index
        self._phase = _Phase.USAGE_SENT
        unfinished = [n for n, state in self._choices.items() if state.finished_at is None]
        if unfinished:
            found.append(
                rules.USAGE_NOT_LAST.finding(
                    f"event {index}: the usage chunk arrives before choice(s) "
                    f"{', '.join(map(str, sorted(unfinished)))} finished",
                    index,
                    event.offset,
                )
            )

    def _unfinished_choices(self, index: int, offset: int, when: str) -> list[Finding]:
        expected = set(self._choices)
        if self._n is not None:
            expected.update(range(self._n))
        missing = sorted(n for n in expected if n not in self._choices or not self._finished(n))
        if not missing:
            return []
        never = [n for n in missing if n not in self._choices]
        detail = f" ({', '.join(map(str, never))} never appeared)" if never else ""
        return [
            rules.MISSING_FINISH_REASON.finding(
                f"{when}: choice(s) {', '.join(map(str, missing))} have no finish_reason{detail}",
                index,
                offset,
            )
        ]

    def _finished(self, number: int) -> bool:
        return self._choices[number].finished_at is not None
