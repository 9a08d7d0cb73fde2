"""The long form of the AI SDK UI message stream rules (``protocols/ai_sdk_ui.py``).

The id rules it shares with AG-UI are documented in ``rule_docs/ag_ui.py``. The client
behaviour quoted is ``ai`` 7.0.173 (``DefaultChatTransport``, ``processUIMessageStream``,
``uiMessageChunkSchema``).
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    rule_doc(
        "unknown_chunk_type",
        meaning="""
            A chunk's `type` is not one the AI SDK defines (`start`, `text-delta`,
            `tool-input-available`, `finish`, ... as of `ai` 7.0.173) and does not start with
            `data-`, the protocol's extension point for custom parts. Each unknown type is
            reported once per stream. An error: the official reader of the AI SDK version
            streamguard knows fails on it (a newer AI SDK may define the type; until
            streamguard learns it, such a stream breaks every older client).""",
        clients="""
            The official reader validates every chunk against `uiMessageChunkSchema`, a union
            of the known chunk shapes; a chunk that matches none fails, and
            `DefaultChatTransport` rethrows the validation error ("Type validation failed"),
            so `useChat` ends in its error state at that chunk and drops the rest of the
            answer. Unlike AG-UI's client, which drops unknown events with a warning, the AI
            SDK has no tolerance for them: custom payloads must be `data-*` chunks.""",
        example="""
            data: {"type":"start","messageId":"msg_1"}

            data: {"type":"progress","percent":40}

            data: {"type":"finish"}

            data: [DONE]
            """,
        fix="""
            Send custom payloads as `data-<name>` chunks (`{"type":"data-progress","data":
            {"percent":40}}`, with `"transient": true` when they should not be kept in the
            message), and keep the server's AI SDK version in step with the client's.""",
    ),
    rule_doc(
        "chunk_after_finish",
        meaning="""
            A chunk other than `data: [DONE]` followed the `finish` chunk, which says the
            assistant message is complete. The AI SDK's own servers send `finish` last
            (`streamText` and `createUIMessageStream` close right after it); a second `start`
            and `finish` pair usually means two results were merged without `sendFinish:
            false` on the first and `sendStart: false` on the second. Reported once per
            stream; an `error` chunk after `finish` is not reported.""",
        clients="""
            The client keeps reading after `finish` and adds what follows to the same message,
            so the chat does not break outright; but code that acts on `finish` (persisting
            the message, stopping a spinner, starting the next automatic request) has already
            acted on an incomplete message, and a second `start` with a different
            `messageId` makes `useChat` push the message into the list a second time.""",
        example="""
            data: {"type":"start","messageId":"msg_1"}

            data: {"type":"finish","finishReason":"stop"}

            data: {"type":"text-start","id":"txt_2"}

            data: {"type":"text-delta","id":"txt_2","delta":"One more thing"}

            data: {"type":"text-end","id":"txt_2"}

            data: [DONE]
            """,
        fix="""
            Send `finish` once, as the last chunk before `[DONE]`. When merging several
            `streamText` results into one response, pass `sendFinish: false` to all but the
            last and `sendStart: false` to all but the first.""",
    ),
    rule_doc(
        "step_not_balanced",
        meaning="""
            The `start-step` and `finish-step` chunks do not alternate: a `finish-step` with no
            step open, a `start-step` while one is open, or a step still open at `finish` (or
            at `[DONE]` when no `finish` came). A
            step is one model call; `streamText` brackets every one. Streams that use no steps
            at all are fine.""",
        clients="""
            The client marks a step's start with a `step-start` part and, since `ai` 7.0.x,
            does nothing at `finish-step`; earlier versions (5.x, 6.x and early 7.0) forget the
            open text and reasoning parts at `finish-step`, so a part that goes on after an
            unbalanced `finish-step` throws "Received text-delta for missing text part" there.
            Tools and `convertToModelMessages` group tool calls by step, so a missing boundary
            merges two model calls into one step when the conversation is sent back.""",
        example="""
            data: {"type":"start","messageId":"msg_1"}

            data: {"type":"start-step"}

            data: {"type":"start-step"}

            data: {"type":"finish-step"}

            data: {"type":"finish"}

            data: [DONE]
            """,
        fix="""
            Emit `start-step` before each model call's chunks and `finish-step` after them,
            on every path; or emit neither.""",
    ),
    rule_doc(
        "missing_finish",
        meaning="""
            The stream opened a message with `start` and reached `[DONE]` without the
            `finish` chunk, and no `error` or `abort` chunk explains it. The protocol page
            lists `finish` as the message's last part, and every AI SDK server sends it
            (`streamText`, `createUIMessageStream` around them). Not reported on a stream
            with neither `start` nor `finish`: a `createUIMessageStream` writer that sends
            only parts, or a fragment continuing the previous message, is legitimate. A
            warning: the client reads the stream.""",
        clients="""
            `readUIMessageStream` and `useChat` keep the message, but without a finish reason,
            and the `onFinish` of server code that watches the chunks (`toUIMessageStream`'s
            `onFinish`, persistence keyed on `finish`) never runs, so the saved conversation
            lags behind what the user saw; the LangGraph streams of `@ai-sdk/langchain` ended
            this way, with a `start-step` never finished, until vercel/ai#11624, and broke
            multi-turn chats.""",
        example="""
            data: {"type":"start","messageId":"msg_1"}

            data: {"type":"start-step"}

            data: {"type":"text-start","id":"txt_1"}

            data: {"type":"text-delta","id":"txt_1","delta":"Hello"}

            data: {"type":"text-end","id":"txt_1"}

            data: [DONE]
            """,
        note="No `finish-step` and no `finish`: `step_not_balanced` and `missing_finish`.",
        fix="""
            Send `finish-step` after each step and `finish` (with its `finishReason`) before
            `[DONE]`, on every path that ends the stream normally; end with an `error` or
            `abort` chunk on the others.""",
    ),
)
