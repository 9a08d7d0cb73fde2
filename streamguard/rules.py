"""The rule catalog: one source of truth for checkers, metrics, logs, docs and the CLI.

Every rule has a stable snake_case ``name``. Names are public (dashboards and alerts
select on them), so a published name is never renamed; add a new rule instead.

Which protocols a rule applies to is not written here: the stream layer (the parser, the
monitor, the middleware) raises the rules whose ``scope`` says so on any stream, and every
other rule belongs to the protocols whose checkers declare they can raise it
(``Checker.RAISES`` and the rules of its lifecycle table), as the protocol registry records
them when it registers each protocol (``add_protocol``). So the catalog, the docs and the
metrics a route pre-creates cannot list a rule its protocol never raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from streamguard.report import SKIP_REASONS, Finding, Severity

__all__ = [
    "ALL_PROTOCOLS",
    "PROTOCOL",
    "RULES",
    "STREAM",
    "Rule",
    "get_rule",
    "rules_for",
    "skip_reasons_for",
]

ALL_PROTOCOLS: Final = "all"
DOCS_PAGE: Final = "rules.md"

Scope = Literal["stream", "protocol"]
#: Raised by the stream layer (parser, monitor, middleware) on a stream of any protocol.
STREAM: Final = "stream"
#: Raised by the checkers that declare it.
PROTOCOL: Final = "protocol"


@dataclass(frozen=True, slots=True)
class Rule:
    """A named check with a fixed severity; where it applies follows from ``scope``."""

    name: str
    severity: Severity
    summary: str
    scope: Scope = "protocol"
    #: Reported at most once per stream: every later occurrence is the same mistake.
    once_per_stream: bool = False

    @property
    def anchor(self) -> str:
        """Where the rule is explained in the docs."""
        return f"{DOCS_PAGE}#{self.name.replace('_', '-')}"

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocols whose checkers raise this rule; ``("all",)`` for a rule of the
        stream layer."""
        if self.scope == STREAM:
            return (ALL_PROTOCOLS,)
        return tuple(sorted(_RAISED_BY.get(self.name, ())))

    def finding(
        self, message: str, event_index: int | None = None, byte_offset: int | None = None
    ) -> Finding:
        """A finding of this rule, with a message that says what was seen and where."""
        return Finding(self.name, self.severity, message, event_index, byte_offset)


RULES: dict[str, Rule] = {}


def _rule(
    name: str,
    severity: Severity,
    summary: str,
    *,
    scope: Scope = "protocol",
    once_per_stream: bool = False,
) -> Rule:
    if name in RULES:
        raise ValueError(f"rule {name!r} is declared twice")
    rule = Rule(name, severity, summary, scope, once_per_stream)
    RULES[name] = rule
    return rule


#: Rule name -> the protocols whose checkers can raise it, and protocol -> the reasons its
#: checker can skip checks for: written by the protocol registry whenever the registered
#: protocols change (``index_protocols``), so this module imports nothing above it.
_RAISED_BY: dict[str, frozenset[str]] = {}
_SKIPS: dict[str, frozenset[str]] = {}
#: The rules protocols brought that the built-in catalog does not hold.
_ADDED: set[str] = set()

#: What the registry tells of one protocol: its name, the rules its checker raises, the
#: reasons it can skip checks for, and the rules of its own (a protocol of one's own).
ProtocolRules = tuple[str, frozenset["Rule"], frozenset[str], tuple["Rule", ...]]


def index_protocols(protocols: Iterable[ProtocolRules]) -> None:
    """Record which protocols raise each rule and skip checks for each reason, and add their
    own rules to the catalog (dropping those of protocols no longer registered). Nothing
    changes when a rule clashes: a ``ValueError`` names it. Called by the registry only."""
    protocols = list(protocols)
    added: dict[str, Rule] = {}
    for protocol, _raises, _skips, own in protocols:
        for rule in own:
            known = added.get(rule.name) or (None if rule.name in _ADDED else RULES.get(rule.name))
            if known is not None and known != rule:
                raise ValueError(
                    f"protocol {protocol!r} declares rule {rule.name!r}, which is declared "
                    "already, differently"
                )
            added[rule.name] = rule
    raised: dict[str, set[str]] = {}
    for protocol, raises, _skips, _own in protocols:
        for rule in raises:
            if rule.name not in added and (rule.name in _ADDED or RULES.get(rule.name) != rule):
                raise ValueError(
                    f"protocol {protocol!r} raises rule {rule.name!r}, which is not in the "
                    "catalog: declare it in its spec's rules"
                )
            raised.setdefault(rule.name, set()).add(protocol)
    for name in _ADDED - added.keys():
        del RULES[name]
    RULES.update(added)
    _ADDED.clear()
    _ADDED.update(added)
    _RAISED_BY.clear()
    _RAISED_BY.update((name, frozenset(names)) for name, names in raised.items())
    _SKIPS.clear()
    _SKIPS.update((protocol, skips) for protocol, _raises, skips, _own in protocols)


def get_rule(name: str) -> Rule:
    """The rule called ``name``; a ``KeyError`` names the unknown rule."""
    try:
        return RULES[name]
    except KeyError:
        raise KeyError(f"unknown streamguard rule {name!r}") from None


def rules_for(protocol: str) -> list[Rule]:
    """The rules that can fire on a stream of ``protocol``."""
    return [
        rule
        for rule in RULES.values()
        if rule.scope == STREAM or protocol in _RAISED_BY.get(rule.name, ())
    ]


def skip_reasons_for(protocol: str) -> tuple[str, ...]:
    """The reasons (``report.SKIP_REASONS``, in that order) for which a stream of
    ``protocol`` can skip checks (its checker's ``SKIPS``); none for an unknown protocol."""
    skips = _SKIPS.get(protocol, frozenset())
    return tuple(reason for reason in SKIP_REASONS if reason in skips)


E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741

# -- Framing: the SSE layer, every protocol --------------------------------------------
INVALID_UTF8 = _rule(
    "invalid_utf8",
    E,
    "The body is not valid UTF-8; clients see U+FFFD or fail.",
    scope=STREAM,
)
UNTERMINATED_FRAME = _rule(
    "unterminated_frame",
    E,
    "Bytes follow the last blank line when the body ends; clients discard that event.",
    scope=STREAM,
)
EVENT_TOO_LARGE = _rule(
    "event_too_large",
    E,
    "One event grew past the size limit; the rest of the stream was not inspected.",
    scope=STREAM,
)
UNKNOWN_FIELD = _rule(
    "unknown_field",
    I,
    "A line names a field other than event, data, id or retry; clients ignore it.",
    scope=STREAM,
)
EVENT_WITHOUT_DATA = _rule(
    "event_without_data",
    W,
    "A block names an event (event: line) but has no data: line; clients drop it unseen.",
    scope=STREAM,
)

# -- Lifecycle: every protocol that defines a terminal signal --------------------------
MISSING_TERMINAL = _rule(
    "missing_terminal",
    E,
    "The body ended without the protocol's terminal signal; clients may hang or truncate.",
)
DUPLICATE_TERMINAL = _rule(
    "duplicate_terminal", E, "The protocol's terminal signal was sent more than once."
)
EVENT_AFTER_TERMINAL = _rule(
    "event_after_terminal", E, "An event followed the protocol's terminal signal."
)
RESPONSE_NOT_FINISHED = _rule(
    "response_not_finished",
    E,
    "The app returned without the final body message (more_body=False); the response is cut short.",
    scope=STREAM,
)
BODY_AFTER_END = _rule(
    "body_after_end",
    E,
    "The app sent body bytes after ending the body (more_body=False); the client never gets them.",
    scope=STREAM,
)
BODY_NOT_ENDED = _rule(
    "body_not_ended",
    E,
    "The terminal signal was sent but the body stayed open past the grace period.",
    scope=STREAM,
)
STALLED = _rule(
    "stalled",
    W,
    "No bytes were sent for longer than the idle limit.",
    scope=STREAM,
)
BUFFERED_FLUSH = _rule(
    "buffered_flush",
    W,
    "The whole stream reached the client in one burst instead of incrementally.",
    scope=STREAM,
)
UPSTREAM_LEFT_OPEN = _rule(
    "upstream_left_open",
    W,
    "An upstream stream read for this request was still open when the request ended; "
    "under load, leaked connections.",
    scope=STREAM,
    once_per_stream=True,
)
INVALID_JSON = _rule("invalid_json", E, "An event's data is not the JSON the protocol requires.")
SCHEMA_MISMATCH = _rule(
    "schema_mismatch", E, "An event's JSON does not have the protocol's documented shape."
)

# -- HTTP hygiene, checked on http.response.start --------------------------------------
CONTENT_LENGTH_ON_STREAM = _rule(
    "content_length_on_stream",
    W,
    "An event stream declares a Content-Length; proxies and clients may cut it short.",
    scope=STREAM,
)
BAD_CONTENT_TYPE_CHARSET = _rule(
    "bad_content_type_charset",
    W,
    "The Content-Type declares a charset other than utf-8; event streams are always UTF-8.",
    scope=STREAM,
)
COMPRESSED_STREAM = _rule(
    "compressed_stream",
    W,
    "The stream is compressed (Content-Encoding); it cannot be inspected and compression "
    "often buffers it.",
    scope=STREAM,
)

# -- Rules shared by several LLM protocols ---------------------------------------------
MISSING_FINISH_REASON = _rule(
    "missing_finish_reason",
    E,
    "A choice or candidate never received its finish reason before the stream ended.",
)
CONTENT_AFTER_FINISH = _rule(
    "content_after_finish",
    E,
    "Content arrived for a choice or candidate after its finish reason.",
)

# -- OpenAI Chat Completions (protocols/openai_chat.py) --------------------------------
INCONSISTENT_ID = _rule(
    "inconsistent_id",
    E,
    "A chunk's id or created differs from the first chunk's; every chunk shares them.",
    once_per_stream=True,
)
ENVELOPE_FIELD_MISSING = _rule(
    "envelope_field_missing",
    W,
    "A chat chunk lacks its id, model or created, or sends it null; clients read the chunk, "
    "and the completion they assemble lacks that field.",
    once_per_stream=True,
)
CHOICE_INDEX_INVALID = _rule(
    "choice_index_invalid",
    E,
    "A choice index is negative or not below the requested n.",
)
CHOICE_OUT_OF_ORDER = _rule(
    "choice_out_of_order",
    E,
    "A choice index first appeared before a lower one; the SDK stream helper raises "
    "IndexError or mis-associates the choices.",
)
ROLE_NOT_FIRST = _rule(
    "role_not_first",
    W,
    "delta.role arrived on a later chunk of its choice instead of the first one.",
)
ROLE_REPEATED = _rule(
    "role_repeated",
    W,
    "delta.role was sent again for a choice; the SDK helper concatenates it.",
)
MULTIPLE_FINISH_REASON = _rule(
    "multiple_finish_reason",
    E,
    "A choice received a second non-null finish_reason.",
)
UNKNOWN_FINISH_REASON = _rule(
    "unknown_finish_reason",
    W,
    "A finish_reason outside stop, length, tool_calls, content_filter, function_call "
    "(e.g. OpenRouter's error); treated as the end of the choice.",
)
TOOL_CALLS_FINISHED_AS_STOP = _rule(
    "tool_calls_finished_as_stop",
    W,
    "A choice streamed tool calls, then finished with stop though the request forced no "
    "function; agent loops that branch on tool_calls never run the tools.",
)
TOOL_CALL_INDEX_INVALID = _rule(
    "tool_call_index_invalid",
    E,
    "A tool_calls entry has no integer index, or a new index skips one (the SDK raises).",
)
TOOL_CALL_HEADER_MISSING = _rule(
    "tool_call_header_missing",
    W,
    "The first delta of a tool call lacks its id or function.name.",
)
TOOL_CALL_HEADER_REPEATED = _rule(
    "tool_call_header_repeated",
    W,
    "A later delta of a tool call sends its id or function.name again; the SDK helper "
    "concatenates them.",
)
TOOL_CALL_FUNCTION_MISSING = _rule(
    "tool_call_function_missing",
    E,
    "A tool_calls delta entry has no function object; the SDK stream helper fails an "
    "assertion on it.",
)
TOOL_CALL_ARGUMENTS_INVALID = _rule(
    "tool_call_arguments_invalid",
    W,
    "A call's concatenated arguments do not parse as JSON when its choice finishes.",
)
FUNCTION_CALL_MIXED = _rule(
    "function_call_mixed",
    W,
    "A choice mixes the legacy function_call delta with tool_calls.",
    once_per_stream=True,
)
USAGE_NOT_LAST = _rule(
    "usage_not_last",
    E,
    "The usage chunk came before a choice finished, or a chunk other than [DONE] followed it.",
)
USAGE_REPEATED = _rule(
    "usage_repeated", E, "More than one usage chunk (empty choices, non-null usage)."
)
USAGE_MISSING = _rule(
    "usage_missing",
    E,
    "stream_options.include_usage was requested but no chunk carried usage.",
)
USAGE_UNREQUESTED = _rule(
    "usage_unrequested",
    W,
    "A chunk carries non-null usage although include_usage was not requested.",
    once_per_stream=True,
)
USAGE_NONSTANDARD = _rule(
    "usage_nonstandard",
    W,
    "Usage placed the way compatible providers do, on a chunk that also carries choices, "
    "instead of a chunk of its own with empty choices.",
    once_per_stream=True,
)
USAGE_WITHOUT_CHOICES = _rule(
    "usage_without_choices",
    E,
    "The usage chunk has choices null or absent (vLLM and other compatible servers) instead "
    "of choices []; the SDK stream helper raises TypeError on it.",
    once_per_stream=True,
)
USAGE_TOTAL_MISMATCH = _rule(
    "usage_total_mismatch",
    W,
    "usage.total_tokens differs from prompt_tokens + completion_tokens.",
)
UNEXPECTED_EVENT_FIELD = _rule(
    "unexpected_event_field",
    W,
    "A chat chunk has an event: field; the stream is data-only, and the SDK routes thread.* "
    "names to the Assistants path.",
    once_per_stream=True,
)

# -- OpenAI Responses (protocols/openai_responses.py) ----------------------------------
MISSING_RESPONSE_CREATED = _rule(
    "missing_response_created",
    E,
    "The first event is not response.created (and the stream is not a resumed one); "
    "the SDK raises.",
)
DUPLICATE_RESPONSE_CREATED = _rule(
    "duplicate_response_created",
    E,
    "response.created was sent more than once in one stream.",
)
SEQUENCE_GAP = _rule(
    "sequence_gap",
    W,
    "sequence_number did not start at 0 or rise by exactly one; resumption relies on it.",
)
ITEM_OUT_OF_ORDER = _rule(
    "item_out_of_order",
    E,
    "An output item was added with an output_index other than the next one (0, 1, 2, ...).",
)
ITEM_OVERLAP = _rule(
    "item_overlap",
    W,
    "An output item was added while another was still open.",
    once_per_stream=True,
)
ITEM_NOT_OPEN = _rule(
    "item_not_open",
    E,
    "An event points at an output item or content part that is not open (never added, "
    "already done, or a different item_id).",
)
ITEM_NOT_CLOSED = _rule(
    "item_not_closed",
    E,
    "An output item or content part was still open when its item or the response ended.",
)
ITEM_STATUS_UNEXPECTED = _rule(
    "item_status_unexpected",
    W,
    "An item's status is not in_progress when added, or not completed/incomplete when done.",
)
DONE_TEXT_MISMATCH = _rule(
    "done_text_mismatch",
    W,
    "A .done event's text differs from the concatenation of its deltas.",
)
TEXT_NOT_DONE = _rule(
    "text_not_done",
    W,
    "A part (or a tool call's input) whose deltas streamed was closed without its .done "
    "event; clients waiting for that event never get it.",
)
COMPLETED_OUTPUT_EMPTY = _rule(
    "completed_output_empty",
    E,
    "response.completed carries an empty output after output items were streamed; the "
    "SDK's final response loses them.",
)
STATUS_MISMATCH = _rule(
    "status_mismatch",
    E,
    "A lifecycle event's response.status (or its usage, incomplete_details, error) does "
    "not match the event.",
)
RESPONSE_ID_CHANGED = _rule(
    "response_id_changed",
    E,
    "response.id differs between lifecycle events; the SDK stream helper raises.",
)
EVENT_TYPE_MISMATCH = _rule(
    "event_type_mismatch",
    W,
    "The SSE event name differs from the JSON type; the OpenAI SDK reads only the type.",
    once_per_stream=True,
)

# -- Anthropic Messages (protocols/anthropic.py) ---------------------------------------
EVENT_NAME_MISMATCH = _rule(
    "event_name_mismatch",
    E,
    "The SSE event name differs from the JSON type; the SDK dispatches on the name and "
    "silently drops unnamed or unknown events.",
)
MISSING_MESSAGE_START = _rule(
    "missing_message_start",
    E,
    "An event other than ping came before message_start; the SDK raises on it.",
)
DUPLICATE_MESSAGE_START = _rule(
    "duplicate_message_start", E, "message_start was sent more than once."
)
PREPOPULATED_MESSAGE_START = _rule(
    "prepopulated_message_start",
    W,
    "message_start carries content or a stop reason (seen with programmatic tool calling).",
)
BLOCK_INDEX_OUT_OF_ORDER = _rule(
    "block_index_out_of_order",
    E,
    "A content block started with an index other than the next one (0, 1, 2, ...).",
)
BLOCK_NOT_STARTED = _rule(
    "block_not_started",
    E,
    "A delta or stop names a content block that is not open (never started, or stopped).",
)
BLOCK_OVERLAP = _rule(
    "block_overlap",
    W,
    "A content block started while another was still open.",
)
BLOCK_NOT_STOPPED = _rule(
    "block_not_stopped",
    E,
    "A content block was still open at message_delta or message_stop.",
)
BLOCK_OPEN_AT_LIMIT = _rule(
    "block_open_at_limit",
    W,
    "A content block was left open by a max_tokens or context-window stop (observed, "
    "tolerated by the SDK).",
)
BLOCK_AFTER_MESSAGE_DELTA = _rule(
    "block_after_message_delta",
    E,
    "A content block event followed message_delta; blocks come before it.",
    once_per_stream=True,
)
DELTA_TYPE_MISMATCH = _rule(
    "delta_type_mismatch",
    E,
    "A delta's type does not fit its block's type (e.g. input_json_delta in a text block).",
)
SIGNATURE_NOT_LAST = _rule(
    "signature_not_last",
    W,
    "A delta followed the signature_delta of a thinking block; the signature comes last.",
)
TOOL_INPUT_INVALID = _rule(
    "tool_input_invalid",
    W,
    "A tool block's input_json_delta fragments do not join into a JSON object at its "
    "content_block_stop.",
)
MISSING_MESSAGE_DELTA = _rule(
    "missing_message_delta",
    E,
    "message_stop arrived without a message_delta carrying a non-null stop_reason.",
)
UNKNOWN_STOP_REASON = _rule(
    "unknown_stop_reason",
    W,
    "message_delta carries a stop_reason outside the documented set.",
)
UNKNOWN_EVENT_TYPE = _rule(
    "unknown_event_type",
    I,
    "An event type the protocol does not document; legal, but the SDK drops it.",
)
# Shared with Gemini: both protocols promise cumulative usage.
USAGE_DECREASED = _rule(
    "usage_decreased",
    W,
    "A cumulative token count went down between two events.",
)

# -- Gemini streamGenerateContent (protocols/gemini.py) --------------------------------
SDK_INCOMPATIBLE_FRAMING = _rule(
    "sdk_incompatible_framing",
    E,
    "Framing other than one `data: ` line per event (an SSE comment, event:, id: or retry: "
    "line, `data:` without the space, a multi-line data); the official Python SDK "
    "(google-genai) reads only `data: ` lines and fails on these.",
    once_per_stream=True,
)
FINISH_REASON_NOT_LAST = _rule(
    "finish_reason_not_last",
    W,
    "A candidate's finishReason came on a chunk before more of its content (repeated on "
    "every chunk, or an empty finish before the content); relays that stop at the first "
    "finishReason lose the rest.",
)

# -- AG-UI (protocols/ag_ui.py) --------------------------------------------------------
# The three id_* rules are shared with the AI SDK UI message stream (the same mistake:
# a start, delta, end protocol keyed by ids); AG-UI documents them, as their first protocol.
ID_NOT_OPEN = _rule(
    "id_not_open",
    E,
    "A content, delta or end event names a message, part, tool call or step that is not "
    "open (never started, or already ended); the official client throws.",
)
ID_ALREADY_OPEN = _rule(
    "id_already_open",
    E,
    "A start event reuses the id of a message, part, tool call or step that is still open.",
)
ID_NOT_CLOSED = _rule(
    "id_not_closed",
    E,
    "A message, part, tool call or step was still open when its run or message finished.",
)
MISSING_RUN_STARTED = _rule(
    "missing_run_started",
    E,
    "The first event is not RUN_STARTED (nor RUN_ERROR); @ag-ui/client rejects the run.",
)
DUPLICATE_RUN_STARTED = _rule(
    "duplicate_run_started",
    E,
    "RUN_STARTED arrived while a run was still active (before its RUN_FINISHED or RUN_ERROR).",
)
STATE_DELTA_BEFORE_SNAPSHOT = _rule(
    "state_delta_before_snapshot",
    I,
    "A STATE_DELTA came before any STATE_SNAPSHOT; it patches whatever state the client holds.",
    once_per_stream=True,
)
INVALID_STATE_PATCH = _rule(
    "invalid_state_patch",
    E,
    "A STATE_DELTA or ACTIVITY_DELTA holds an operation that is not valid JSON Patch; "
    "@ag-ui/client rejects the event and the run fails.",
)
TOOL_RESULT_WITHOUT_CALL = _rule(
    "tool_result_without_call",
    I,
    "A TOOL_CALL_RESULT answers a tool call no event of the stream started (nor the run's "
    "echoed input holds); unless the client's history holds it, the result answers no call.",
)
RUN_ID_MISMATCH = _rule(
    "run_id_mismatch",
    W,
    "RUN_FINISHED (or a RUN_ERROR that carries them) names another runId or threadId than "
    "its RUN_STARTED; code that tracks runs by id cannot match the run's end to its start.",
)
CRLF_FRAMING = _rule(
    "crlf_framing",
    E,
    "Events are framed with CR LF line endings; @ag-ui/client splits events on LF LF only, "
    "so it reads nothing until the body ends and then fails.",
    once_per_stream=True,
)

# -- AI SDK UI message stream (protocols/ai_sdk_ui.py) ---------------------------------
UNKNOWN_CHUNK_TYPE = _rule(
    "unknown_chunk_type",
    E,
    "A chunk type the AI SDK does not define (and not data-*); the official client's schema "
    "rejects it and the chat ends in an error.",
)
CHUNK_AFTER_FINISH = _rule(
    "chunk_after_finish",
    W,
    "A chunk other than [DONE] followed the finish chunk; finish ends the message.",
    once_per_stream=True,
)
STEP_NOT_BALANCED = _rule(
    "step_not_balanced",
    W,
    "finish-step without an open step, start-step while one is open, or a step still open "
    "at finish or at [DONE].",
)
MISSING_FINISH = _rule(
    "missing_finish",
    W,
    "A message opened with start reached [DONE] without the finish chunk (nor error or "
    "abort); the client reads it, but it has no finish reason and code waiting for finish "
    "never runs.",
)

# -- MCP Streamable HTTP (protocols/mcp.py) ----------------------------------------------
INVALID_JSONRPC = _rule(
    "invalid_jsonrpc",
    E,
    'A message is not valid JSON-RPC 2.0 (`jsonrpc` other than "2.0", a response without '
    "exactly one of `result` and `error`, an error `code` that is not an integer, ...), or a "
    "request of the POST has an id that is no string or number; the official MCP clients "
    "fail the call.",
)
DUPLICATE_RESPONSE = _rule(
    "duplicate_response",
    E,
    "A request was answered a second time before the POST's last answer (or where the POST's "
    "requests are unknown); the last answer repeated is duplicate_terminal.",
)
UNREQUESTED_RESPONSE = _rule(
    "unrequested_response",
    E,
    "A response carries an id that no request of the POST carried.",
)
RESPONSE_ON_STANDALONE_STREAM = _rule(
    "response_on_standalone_stream",
    E,
    "A JSON-RPC response arrived on the standalone GET stream, which carries only server "
    "requests and notifications (unless it resumes a stream with Last-Event-ID).",
)
DUPLICATE_EVENT_ID = _rule(
    "duplicate_event_id",
    W,
    "An SSE event id came back after other ids in the stream; a client resuming from it "
    "with Last-Event-ID is replayed the wrong events.",
    once_per_stream=True,
)
