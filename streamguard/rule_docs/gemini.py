# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the Gemini rules (``protocols/gemini.py``)."""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    rule_doc(
        "sdk_incompatible_framing",
        meaning="""
            A Gemini stream uses framing other than one `data: <json>` line and a blank line
            per event: an SSE comment (a keepalive), an `event:`, `id:` or `retry:` line,
            `data:` without the space, data split over several `data:` lines, or bytes such as
            a comment or a BOM before the first event. All of this is valid SSE, but the
            official Python SDK fails on it, so it is an error (docs/rules.md, "How severe a
            rule is"). Reported once per stream.""",
        clients="""
            google-genai's SSE reader (`_iter_response_stream`) is not a WHATWG parser: it
            recognises only lines that start with exactly `data: `, and brace-counts every
            other non-empty line as raw JSON, so such a line makes the SDK raise
            `UnknownApiResponseError`. Browsers and other SSE clients read the same stream
            fine.""",
        example="""
            data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}]}

            : keepalive

            data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}]}

            """,
        fix="""
            On Gemini-shaped routes send exactly `data: ` (with the space) and one line of JSON
            per event, and no keepalive comments; do not let a generic SSE helper add pings or
            event names there.""",
    ),
    rule_doc(
        "finish_reason_not_last",
        meaning="""
            A Gemini candidate received a `finishReason` on a chunk that was not its last
            content: more content for the same candidate followed. Two forms are real: legacy
            (2024) streams that repeat `finishReason: "STOP"` on every chunk, and OpenAI-to-Gemini
            translators that send an empty chunk with `finishReason: "STOP"` before the content.
            Both still end `completed` when the last chunk carries a finish; this rule reports
            the deviation once per candidate. Content without a `finishReason` after a finish
            that itself carried content is `content_after_finish` instead (an error: the stream
            said it was done), and a second finish on a chunk without content is not judged.""",
        clients="""
            The severity is a warning, not an error, because the official client reads these
            streams whole: google-genai does not stop at a `finishReason`, it yields every chunk
            and its chat helper keeps the last finish it saw; and the protocol reference lists
            both forms among the oddities of real streams, so the outcome stays `completed`. It
            is not silent, because the field's documented meaning is "the model has stopped"
            and code that relays or renders the stream acts on the first one. A client that
            ends the answer at the first `finishReason` shows one chunk of a legacy stream
            (zotero-pdf-translate's Gemini reader, PR #806, had to ignore the field because
            "every chunk has finishReason STOP") and nothing of a stream that opens with an
            empty finish (CLIProxyAPI #5651: a translator stamped `STOP` on the contentless
            chunks before the text, and the Kelivo client dropped the entire reply). Relays
            that translate to OpenAI Chat pass it on: LiteLLM's stream wrapper
            (`CustomStreamWrapper`) forwards a finish reason that arrives on a chunk without
            content at once, as an OpenAI chunk with `finish_reason`, so an empty finish before
            the content reaches OpenAI clients as a finished choice ahead of the answer.""",
        example="""
            data: {"candidates":[{"content":{"parts":[{"text":"Once"}],"role":"model"},"finishReason":"STOP","index":0}]}

            data: {"candidates":[{"content":{"parts":[{"text":" upon a time."}],"role":"model"},"finishReason":"STOP","index":0}]}

            """,
        fix="""
            Send `finishReason` only on each candidate's last chunk, and never on an empty chunk
            before the content; a translating proxy must hold the upstream's finish until the
            content it ends has been sent.""",
    ),
)
