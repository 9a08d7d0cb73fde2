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

# -- OpenAI Responses (protocols/openai_responses.py) ----------------------------------

# -- Anthropic Messages (protocols/anthropic.py) ---------------------------------------

# -- Gemini streamGenerateContent (protocols/gemini.py) --------------------------------
