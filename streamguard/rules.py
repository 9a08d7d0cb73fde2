"""The rule catalog: one source of truth for checkers, metrics, logs, docs and the CLI.

Every rule has a stable snake_case ``name``. Names are public (dashboards and alerts
select on them), so a published name is never renamed; add a new rule instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamguard.report import Finding, Severity

__all__ = ["ALL_PROTOCOLS", "RULES", "Rule", "get_rule", "rules_for"]

ALL_PROTOCOLS = "all"
DOCS_PAGE = "rules.md"


@dataclass(frozen=True, slots=True)
class Rule:
    """A named check with a fixed severity and the protocols it applies to."""

    name: str
    protocols: tuple[str, ...]
    severity: Severity
    summary: str

    @property
    def anchor(self) -> str:
        """Where the rule is explained in the docs."""
        return f"{DOCS_PAGE}#{self.name.replace('_', '-')}"

    def finding(
        self, message: str, event_index: int | None = None, byte_offset: int | None = None
    ) -> Finding:
        """A finding of this rule, with a message that says what was seen and where."""
        return Finding(self.name, self.severity, message, event_index, byte_offset)


RULES: dict[str, Rule] = {}


def _rule(name: str, protocols: tuple[str, ...], severity: Severity, summary: str) -> Rule:
    if name in RULES:
        raise ValueError(f"rule {name!r} is declared twice")
    rule = Rule(name, protocols, severity, summary)
    RULES[name] = rule
    return rule


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
        if ALL_PROTOCOLS in rule.protocols or protocol in rule.protocols
    ]


_ALL = (ALL_PROTOCOLS,)
E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741

# -- Framing: the SSE layer, every protocol --------------------------------------------
INVALID_UTF8 = _rule(
    "invalid_utf8", _ALL, E, "The body is not valid UTF-8; clients see U+FFFD or fail."
)
UNTERMINATED_FRAME = _rule(
    "unterminated_frame",
    _ALL,
    E,
    "Bytes follow the last blank line when the body ends; clients discard that event.",
)
EVENT_TOO_LARGE = _rule(
    "event_too_large",
    _ALL,
    E,
    "One event grew past the size limit; the rest of the stream was not inspected.",
)
UNKNOWN_FIELD = _rule(
    "unknown_field",
    _ALL,
    I,
    "A line names a field other than event, data, id or retry; clients ignore it.",
)

# -- Lifecycle: every protocol that defines a terminal signal --------------------------
MISSING_TERMINAL = _rule(
    "missing_terminal",
    _ALL,
    E,
    "The body ended without the protocol's terminal signal; clients may hang or truncate.",
)
DUPLICATE_TERMINAL = _rule(
    "duplicate_terminal", _ALL, E, "The protocol's terminal signal was sent more than once."
)
EVENT_AFTER_TERMINAL = _rule(
    "event_after_terminal", _ALL, E, "An event followed the protocol's terminal signal."
)
RESPONSE_NOT_FINISHED = _rule(
    "response_not_finished",
    _ALL,
    E,
    "The app returned without the final body message (more_body=False); the response is cut short.",
)
BODY_AFTER_END = _rule(
    "body_after_end",
    _ALL,
    E,
    "The app sent body bytes after ending the body (more_body=False); the client never gets them.",
)
BODY_NOT_ENDED = _rule(
    "body_not_ended",
    _ALL,
    E,
    "The terminal signal was sent but the body stayed open past the grace period.",
)
STALLED = _rule("stalled", _ALL, W, "No bytes were sent for longer than the idle limit.")
BUFFERED_FLUSH = _rule(
    "buffered_flush",
    _ALL,
    W,
    "The whole stream reached the client in one burst instead of incrementally.",
)
INVALID_JSON = _rule(
    "invalid_json", _ALL, E, "An event's data is not the JSON the protocol requires."
)
SCHEMA_MISMATCH = _rule(
    "schema_mismatch", _ALL, E, "An event's JSON does not have the protocol's documented shape."
)

# -- HTTP hygiene, checked on http.response.start --------------------------------------
CONTENT_LENGTH_ON_STREAM = _rule(
    "content_length_on_stream",
    _ALL,
    W,
    "An event stream declares a Content-Length; proxies and clients may cut it short.",
)
BAD_CONTENT_TYPE_CHARSET = _rule(
    "bad_content_type_charset",
    _ALL,
    W,
    "The Content-Type declares a charset other than utf-8; event streams are always UTF-8.",
)
COMPRESSED_STREAM = _rule(
    "compressed_stream",
    _ALL,
    W,
    "The stream is compressed (Content-Encoding); it cannot be inspected and compression "
    "often buffers it.",
)

# -- Rules shared by several LLM protocols ---------------------------------------------
MISSING_FINISH_REASON = _rule(
    "missing_finish_reason",
    ("openai_chat", "gemini"),
    E,
    "A choice or candidate never received its finish reason before the stream ended.",
)
CONTENT_AFTER_FINISH = _rule(
    "content_after_finish",
    ("openai_chat", "gemini"),
    E,
    "Content arrived for a choice or candidate after its finish reason.",
)

# -- OpenAI Chat Completions (protocols/openai_chat.py) --------------------------------
_CHAT = ("openai_chat",)
INCONSISTENT_ID = _rule(
    "inconsistent_id",
    _CHAT,
    E,
    "A chunk's id or created differs from the first chunk's; every chunk shares them.",
)
CHOICE_INDEX_INVALID = _rule(
    "choice_index_invalid",
    _CHAT,
    E,
    "A choice index is negative or not below the requested n.",
)
CHOICE_OUT_OF_ORDER = _rule(
    "choice_out_of_order",
    _CHAT,
    W,
    "A choice index first appeared before a lower one; the SDK helper mis-associates it.",
)
ROLE_NOT_FIRST = _rule(
    "role_not_first",
    _CHAT,
    W,
    "delta.role arrived on a later chunk of its choice instead of the first one.",
)
ROLE_REPEATED = _rule(
    "role_repeated",
    _CHAT,
    W,
    "delta.role was sent again for a choice; the SDK helper concatenates it.",
)
MULTIPLE_FINISH_REASON = _rule(
    "multiple_finish_reason",
    _CHAT,
    E,
    "A choice received a second non-null finish_reason.",
)
UNKNOWN_FINISH_REASON = _rule(
    "unknown_finish_reason",
    _CHAT,
    W,
    "A finish_reason outside stop, length, tool_calls, content_filter, function_call "
    "(e.g. OpenRouter's error); treated as the end of the choice.",
)
TOOL_CALL_INDEX_INVALID = _rule(
    "tool_call_index_invalid",
    _CHAT,
    E,
    "A tool_calls entry has no integer index, or a new index skips one (the SDK raises).",
)
TOOL_CALL_HEADER_MISSING = _rule(
    "tool_call_header_missing",
    _CHAT,
    W,
    "The first delta of a tool call lacks its id or function.name.",
)
TOOL_CALL_HEADER_REPEATED = _rule(
    "tool_call_header_repeated",
    _CHAT,
    W,
    "A later delta of a tool call sends its id or function.name again; the SDK helper "
    "concatenates them.",
)
TOOL_CALL_ARGUMENTS_INVALID = _rule(
    "tool_call_arguments_invalid",
    _CHAT,
    W,
    "A call's concatenated arguments do not parse as JSON when its choice finishes.",
)
FUNCTION_CALL_MIXED = _rule(
    "function_call_mixed",
    _CHAT,
    W,
    "A choice mixes the legacy function_call delta with tool_calls.",
)
USAGE_NOT_LAST = _rule(
    "usage_not_last",
    _CHAT,
    E,
    "The usage chunk came before a choice finished, or a chunk other than [DONE] followed it.",
)
USAGE_REPEATED = _rule(
    "usage_repeated", _CHAT, E, "More than one usage chunk (empty choices, non-null usage)."
)
USAGE_MISSING = _rule(
    "usage_missing",
    _CHAT,
    E,
    "stream_options.include_usage was requested but no chunk carried usage.",
)
USAGE_UNREQUESTED = _rule(
    "usage_unrequested",
    _CHAT,
    W,
    "A chunk carries non-null usage although include_usage was not requested.",
)
USAGE_NONSTANDARD = _rule(
    "usage_nonstandard",
    _CHAT,
    W,
    "Usage placed the way compatible providers do (on a choice chunk, or with choices null "
    "or absent) instead of a chunk of its own with empty choices.",
)
USAGE_TOTAL_MISMATCH = _rule(
    "usage_total_mismatch",
    _CHAT,
    W,
    "usage.total_tokens differs from prompt_tokens + completion_tokens.",
)
UNEXPECTED_EVENT_FIELD = _rule(
    "unexpected_event_field",
    _CHAT,
    W,
    "A chat chunk has an event: field; the stream is data-only, and the SDK routes thread.* "
    "names to the Assistants path.",
)

# -- OpenAI Responses (protocols/openai_responses.py) ----------------------------------
_RESPONSES = ("openai_responses",)
MISSING_RESPONSE_CREATED = _rule(
    "missing_response_created",
    _RESPONSES,
    E,
    "The first event is not response.created (and the stream is not a resumed one); "
    "the SDK raises.",
)
DUPLICATE_RESPONSE_CREATED = _rule(
    "duplicate_response_created",
    _RESPONSES,
    E,
    "response.created was sent more than once in one stream.",
)
SEQUENCE_GAP = _rule(
    "sequence_gap",
    _RESPONSES,
    W,
    "sequence_number did not start at 0 or rise by exactly one; resumption relies on it.",
)
ITEM_OUT_OF_ORDER = _rule(
    "item_out_of_order",
    _RESPONSES,
    E,
    "An output item was added with an output_index other than the next one (0, 1, 2, ...).",
)
ITEM_OVERLAP = _rule(
    "item_overlap", _RESPONSES, W, "An output item was added while another was still open."
)
ITEM_NOT_OPEN = _rule(
    "item_not_open",
    _RESPONSES,
    E,
    "An event points at an output item or content part that is not open (never added, "
    "already done, or a different item_id).",
)
ITEM_NOT_CLOSED = _rule(
    "item_not_closed",
    _RESPONSES,
    E,
    "An output item or content part was still open when its item or the response ended.",
)
ITEM_STATUS_UNEXPECTED = _rule(
    "item_status_unexpected",
    _RESPONSES,
    W,
    "An item's status is not in_progress when added, or not completed/incomplete when done.",
)
DONE_TEXT_MISMATCH = _rule(
    "done_text_mismatch",
    _RESPONSES,
    W,
    "A .done event's text differs from the concatenation of its deltas.",
)
STATUS_MISMATCH = _rule(
    "status_mismatch",
    _RESPONSES,
    E,
    "A lifecycle event's response.status (or its usage, incomplete_details, error) does "
    "not match the event.",
)
RESPONSE_ID_CHANGED = _rule(
    "response_id_changed",
    _RESPONSES,
    W,
    "response.id differs between lifecycle events.",
)
EVENT_TYPE_MISMATCH = _rule(
    "event_type_mismatch",
    _RESPONSES,
    W,
    "The SSE event name differs from the JSON type; the OpenAI SDK reads only the type.",
)

# -- Anthropic Messages (protocols/anthropic.py) ---------------------------------------
_ANTHROPIC = ("anthropic",)
EVENT_NAME_MISMATCH = _rule(
    "event_name_mismatch",
    _ANTHROPIC,
    E,
    "The SSE event name differs from the JSON type; the SDK dispatches on the name and "
    "silently drops unnamed or unknown events.",
)
MISSING_MESSAGE_START = _rule(
    "missing_message_start",
    _ANTHROPIC,
    E,
    "An event other than ping came before message_start; the SDK raises on it.",
)
DUPLICATE_MESSAGE_START = _rule(
    "duplicate_message_start", _ANTHROPIC, E, "message_start was sent more than once."
)
PREPOPULATED_MESSAGE_START = _rule(
    "prepopulated_message_start",
    _ANTHROPIC,
    W,
    "message_start carries content or a stop reason (seen with programmatic tool calling).",
)
BLOCK_INDEX_OUT_OF_ORDER = _rule(
    "block_index_out_of_order",
    _ANTHROPIC,
    E,
    "A content block started with an index other than the next one (0, 1, 2, ...).",
)
BLOCK_NOT_STARTED = _rule(
    "block_not_started",
    _ANTHROPIC,
    E,
    "A delta or stop names a content block that is not open (never started, or stopped).",
)
BLOCK_OVERLAP = _rule(
    "block_overlap",
    _ANTHROPIC,
    W,
    "A content block started while another was still open.",
)
BLOCK_NOT_STOPPED = _rule(
    "block_not_stopped",
    _ANTHROPIC,
    E,
    "A content block was still open at message_delta or message_stop.",
)
BLOCK_OPEN_AT_LIMIT = _rule(
    "block_open_at_limit",
    _ANTHROPIC,
    W,
    "A content block was left open by a max_tokens or context-window stop (observed, "
    "tolerated by the SDK).",
)
BLOCK_AFTER_MESSAGE_DELTA = _rule(
    "block_after_message_delta",
    _ANTHROPIC,
    E,
    "A content block event followed message_delta; blocks come before it.",
)
DELTA_TYPE_MISMATCH = _rule(
    "delta_type_mismatch",
    _ANTHROPIC,
    E,
    "A delta's type does not fit its block's type (e.g. input_json_delta in a text block).",
)
SIGNATURE_NOT_LAST = _rule(
    "signature_not_last",
    _ANTHROPIC,
    W,
    "A delta followed the signature_delta of a thinking block; the signature comes last.",
)
TOOL_INPUT_INVALID = _rule(
    "tool_input_invalid",
    _ANTHROPIC,
    W,
    "A tool block's input_json_delta fragments do not join into a JSON object at its "
    "content_block_stop.",
)
MISSING_MESSAGE_DELTA = _rule(
    "missing_message_delta",
    _ANTHROPIC,
    E,
    "message_stop arrived without a message_delta carrying a non-null stop_reason.",
)
UNKNOWN_STOP_REASON = _rule(
    "unknown_stop_reason",
    _ANTHROPIC,
    W,
    "message_delta carries a stop_reason outside the documented set.",
)
UNKNOWN_EVENT_TYPE = _rule(
    "unknown_event_type",
    _ANTHROPIC,
    I,
    "An event type the protocol does not document; legal, but the SDK drops it.",
)
# Shared with Gemini: both protocols promise cumulative usage.
USAGE_DECREASED = _rule(
    "usage_decreased",
    ("anthropic", "gemini"),
    W,
    "A cumulative token count went down between two events.",
)

# -- Gemini streamGenerateContent (protocols/gemini.py) --------------------------------
SDK_INCOMPATIBLE_FRAMING = _rule(
    "sdk_incompatible_framing",
    ("gemini",),
    W,
    "Framing other than one `data: ` line per event (an SSE comment, event:, id: or retry: "
    "line, `data:` without the space, a multi-line data); the official Python SDK "
    "(google-genai) reads only `data: ` lines and fails on these.",
)
FINISH_REASON_NOT_LAST = _rule(
    "finish_reason_not_last",
    ("gemini",),
    W,
    "A candidate's finishReason came on a chunk before more of its content (repeated on "
    "every chunk, or an empty finish before the content); relays that stop at the first "
    "finishReason lose the rest.",
)
