# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the Anthropic Messages rules (``protocols/anthropic.py``).

``usage_decreased`` comes last: Gemini reports it too, and it is documented here, with its
first protocol.
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    # -- Anthropic only --------------------------------------------------------------------
    rule_doc(
        "event_name_mismatch",
        meaning="""
            The SSE `event:` name differs from the JSON `type`, or an event has a JSON `type`
            but no `event:` line at all. The docs promise both: "Each event will use an SSE
            event name … and include the matching event type in its data". streamguard then
            follows the JSON `type`.""",
        clients="""
            anthropic-python (and the TypeScript SDK) dispatch only on the SSE name: an event
            without a name, or with a name it does not know, is silently dropped, and a known
            name with a different `type` is processed as the name says. Content is lost without
            any error.""",
        example="""
            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

            """,
        note="No `event: content_block_delta` line: the SDK drops this delta.",
        fix="""
            Send `event: <type>` before each `data:` line, with the same value as the JSON
            `type`.""",
    ),
    rule_doc(
        "missing_message_start",
        meaning="""
            An event other than `ping` or `error` came before `message_start`. Reported once;
            the stream is then checked as if `message_start` had come.""",
        clients="""
            anthropic-python's `MessageStream` raises `RuntimeError('Unexpected event order,
            got content_block_start before "message_start"')`.""",
        example="""
            event: content_block_start
            data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

            """,
        note="This is the first event of the stream.",
        fix="""
            Send `message_start` (with the message id, model, role, empty content and usage)
            first.""",
    ),
    rule_doc(
        "duplicate_message_start",
        meaning="`message_start` was sent more than once in a stream.",
        clients="""
            A message stream describes one message: clients build it from `message_start`, so a
            second one either restarts the message (losing what came before) or is mixed into
            the first. It usually means two upstream streams (a retry, a failover) were
            concatenated.""",
        example="""
            event: message_start
            data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

            event: message_start
            data: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

            """,
        fix="""
            Send one `message_start` per stream; on an upstream retry, end the stream with an
            `error` event instead of starting a second message in it.""",
    ),
    rule_doc(
        "prepopulated_message_start",
        meaning="""
            `message_start` carries content blocks or a non-null `stop_reason`; the docs promise
            `content: []` and `stop_reason: null`. Seen in practice with programmatic tool
            calling, where the API sends finished blocks in `message_start`, so it is a warning;
            the block indices that follow are expected to continue after those blocks.""",
        clients="""
            Clients that assume an empty start (most hand-written accumulators) ignore the
            prepopulated blocks and then meet block indices that do not start at 0.""",
        example="""
            event: message_start
            data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"Done."}],"model":"claude-sonnet-4-5","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":3}}}

            """,
        fix="""
            If you generate the stream yourself, start with an empty message and send each
            block as `content_block_start` / `content_block_delta` / `content_block_stop`.""",
    ),
    rule_doc(
        "block_index_out_of_order",
        meaning="""
            A content block started with an index other than the next one: blocks are started
            once each, in order 0, 1, 2, ... (after any blocks a prepopulated `message_start`
            carried). The index "corresponds to its index in the final Message content
            array".""",
        clients="""
            anthropic-python's accumulator indexes `snapshot.content[event.index]`: a skipped
            index raises `IndexError` or sends the deltas into another block, and a restarted
            index overwrites a block.""",
        example="""
            event: content_block_start
            data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

            """,
        note="This is the first block of the message, so its index must be 0.",
        fix="Number content blocks 0, 1, 2, ... in the order they start.",
    ),
    rule_doc(
        "block_not_started",
        meaning="""
            A `content_block_delta` or `content_block_stop` names a block that is not open: it
            was never started, or it was already stopped.""",
        clients="""
            anthropic-python looks the block up with `snapshot.content[event.index]`: a block
            that was never started raises `IndexError`; a delta for a stopped block is appended
            to a block the application already considers finished.""",
        example="""
            event: content_block_stop
            data: {"type":"content_block_stop","index":0}

            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" more"}}

            """,
        fix="""
            Send each block's deltas between its `content_block_start` and its
            `content_block_stop`, with the block's own index.""",
    ),
    rule_doc(
        "block_overlap",
        meaning="""
            A content block started while another was still open. The API streams one block at
            a time. (Beyond 64 blocks open at once, streamguard forgets the oldest, so a
            hostile stream cannot grow its memory.)""",
        clients="""
            Clients that keep a "current block" (a UI rendering text, a tool-input parser)
            attach the new block's deltas to the old one, or close the wrong block.""",
        example="""
            event: content_block_start
            data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

            event: content_block_start
            data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

            """,
        fix="Send `content_block_stop` for a block before starting the next.",
    ),
    rule_doc(
        "block_not_stopped",
        meaning="""
            A content block was still open at `message_delta` or `message_stop`. When the stop
            reason is `max_tokens` or `model_context_window_exceeded`, an open block is
            expected and `block_open_at_limit` (a warning) is reported instead.""",
        clients="""
            Clients finalize a block on `content_block_stop`: the SDK's helpers emit the
            finished block then, a UI closes the block, an agent runs a finished `tool_use`.
            A block that is never stopped is never finalized.""",
        example="""
            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Bye."}}

            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}

            """,
        fix="Send `content_block_stop` for every block before `message_delta`.",
    ),
    rule_doc(
        "block_open_at_limit",
        meaning="""
            A content block was left open (no `content_block_stop`) by a `max_tokens` or
            `model_context_window_exceeded` stop. The API does this for real: the SDK's own
            test fixture has a `tool_use` block going straight to `message_delta` at
            `max_tokens`. So it is a warning, not an error.""",
        clients="""
            anthropic-python tolerates it, but the open block is incomplete: a `tool_use`
            block's partial JSON input is cut off and cannot be executed, and clients that wait
            for `content_block_stop` never finalize the block.""",
        example="""
            event: content_block_delta
            data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Pa"}}

            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":1024}}

            """,
        fix="""
            Nothing to fix in the stream if it comes from the API; raise `max_tokens` if calls
            are cut off. If you generate the stream, close the block before `message_delta`.""",
    ),
    rule_doc(
        "block_after_message_delta",
        meaning="""
            A `content_block_*` event followed `message_delta`. Content blocks come before it;
            after `message_delta` only more `message_delta`, `ping` and `message_stop` belong.
            Reported once per stream.""",
        clients="""
            Clients treat `message_delta` (final stop reason and usage) as the end of the
            content: the message is finalized, and blocks that come later are dropped or added
            after the application acted on the stop reason.""",
        example="""
            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}

            event: content_block_start
            data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

            """,
        fix="Send all content blocks before `message_delta`.",
    ),
    rule_doc(
        "delta_type_mismatch",
        meaning="""
            A delta's type does not fit its block's type: `text_delta` and `citations_delta`
            belong in `text` blocks, `input_json_delta` in `tool_use`, `server_tool_use` and
            `mcp_tool_use` blocks, `thinking_delta` and `signature_delta` in `thinking`
            blocks; blocks such as `redacted_thinking` and the `*_tool_result` blocks take no
            delta at all. Undocumented block or delta types are not judged.""",
        clients="""
            anthropic-python silently ignores a delta that does not fit its block, so that
            content is lost with no error.""",
        example="""
            event: content_block_start
            data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\":"}}

            """,
        fix="""
            Start a block of the right type for the content (`tool_use` for tool input,
            `thinking` for thinking) and send its deltas there.""",
    ),
    rule_doc(
        "signature_not_last",
        meaning="""
            A delta followed the `signature_delta` of a thinking block. The signature is
            "delivered in a signature_delta event just before the block's content_block_stop
            event" (the SDK's `SignatureDelta` docstring).""",
        clients="""
            The signature covers the thinking text sent before it. Clients that send the
            thinking block back in the next turn (required with tool use and extended
            thinking) send text the signature does not cover, which the API can reject.""",
        example="""
            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}

            event: content_block_delta
            data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" one more thought"}}

            """,
        fix="Send the `signature_delta` last in its thinking block, right before `content_block_stop`.",
    ),
    rule_doc(
        "tool_input_invalid",
        meaning="""
            The `partial_json` fragments of a tool block's `input_json_delta` events (in a
            `tool_use`, `server_tool_use` or `mcp_tool_use` block) do not join into a JSON
            object when the block's `content_block_stop` arrives: invalid JSON, JSON cut short,
            or a JSON value that is not an object. No fragments at all is fine (the input is
            the `{}` of `content_block_start`), and so is an empty first fragment. A block left
            open by a `max_tokens` stop is not judged, as its input is cut by design. The
            fragments count against the stream's kept-text budget (1 Mi characters); past it
            the block's input is not checked. A warning, because the docs allow fine-grained
            tool streaming to send partial or invalid JSON.""",
        clients="""
            The tool's input is the joined fragments. anthropic-python's `MessageStream`
            parses them as they arrive (jiter in partial mode) and raises "Unable to parse tool
            parameter JSON from model" on invalid JSON; JSON cut short passes as a partial
            object with fields missing, and a non-object breaks code that reads
            `block.input` as the dict the types promise. Agents then call the tool with wrong
            arguments or fail the turn.""",
        example="""
            event: content_block_delta
            data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}

            event: content_block_stop
            data: {"type":"content_block_stop","index":1}

            """,
        fix="""
            Send the whole input object across the fragments before `content_block_stop`; a
            proxy that re-chunks tool input must not drop or reorder fragments.""",
    ),
    rule_doc(
        "missing_message_delta",
        meaning="""
            `message_stop` arrived, but no `message_delta` carried a non-null `stop_reason`
            (nor did a prepopulated `message_start`).""",
        clients="""
            The stop reason reaches clients only through `message_delta`: without it the final
            message has `stop_reason: null`, and code that checks it (an agent loop running
            tools on `tool_use`, a UI warning on `max_tokens`) does nothing or the wrong
            thing.""",
        example="""
            event: content_block_stop
            data: {"type":"content_block_stop","index":0}

            event: message_stop
            data: {"type":"message_stop"}

            """,
        fix="""
            Send a `message_delta` with `delta.stop_reason` and cumulative
            `usage.output_tokens` before `message_stop`.""",
    ),
    rule_doc(
        "unknown_stop_reason",
        meaning="""
            `message_delta` carries a `stop_reason` outside the documented set: `end_turn`,
            `max_tokens`, `stop_sequence`, `tool_use`, `pause_turn`, `refusal`,
            `model_context_window_exceeded` and the beta `compaction`.""",
        clients="""
            The SDK types declare `stop_reason` as a closed set; application code that switches
            over it falls through, and an agent loop does not know whether to continue, run
            tools or stop.""",
        example="""
            event: message_delta
            data: {"type":"message_delta","delta":{"stop_reason":"stop","stop_sequence":null},"usage":{"output_tokens":12}}

            """,
        note="`stop` is OpenAI's finish reason; Anthropic's is `end_turn`.",
        fix="Map stop reasons to the documented values (a translating proxy: `stop` → `end_turn`).",
    ),
    rule_doc(
        "unknown_event_type",
        meaning="""
            An event type the protocol does not document. This is informational: the docs say
            "we may add new event types, and your code should handle unknown event types
            gracefully". Reported once per type, for at most eight types per stream.""",
        clients="""
            anthropic-python silently drops events it does not know, so anything they carry
            never reaches the application. Fine for genuinely new API events; a problem when a
            proxy renamed a documented event.""",
        example="""
            event: content_block_progress
            data: {"type":"content_block_progress","index":0,"progress":0.5}

            """,
        fix="""
            Nothing, if the event is a new API feature. If your code generates the stream, use
            the documented event types.""",
    ),
    # -- Shared with Gemini ----------------------------------------------------------------
    rule_doc(
        "usage_decreased",
        meaning="""
            A cumulative token count went down between two events. Anthropic:
            `usage.output_tokens` of a `message_delta` is below the one sent before (in
            `message_start` or an earlier `message_delta`); the docs say the counts in
            `message_delta` are cumulative. Gemini: `promptTokenCount`,
            `candidatesTokenCount`, `thoughtsTokenCount` or `totalTokenCount` in
            `usageMetadata` went down between chunks (absent counters are proto3's omitted
            zeros and are not judged). Reported once per stream for Gemini.""",
        clients="""
            Clients take the last value as the total: a count that went down under-reports the
            tokens used, and clients that add up differences get negative numbers.""",
        example="""
            data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"totalTokenCount":14}}

            data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":3,"totalTokenCount":12}}

            """,
        fix="""
            Send cumulative counts (the total so far), not per-chunk increments; a proxy that
            translates from a protocol with per-chunk counts must add them up.""",
    ),
)
