# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the OpenAI Responses rules (``protocols/openai_responses.py``)."""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    rule_doc(
        "missing_response_created",
        meaning="""
            The first event is not `response.created`. A resumed stream (a request with
            `starting_after`, in the JSON body or the query string) starts mid-sequence and is
            exempt.""",
        clients="""
            openai-python's Responses stream helper builds its snapshot from
            `response.created` and raises `RuntimeError("Expected to have received
            response.created before …")` on any other first event.""",
        example="""
            event: response.in_progress
            data: {"type":"response.in_progress","sequence_number":0,"response":{"id":"resp_68a1","object":"response","status":"in_progress","output":[]}}

            """,
        fix="Start every new response stream with `response.created` (sequence number 0).",
    ),
    rule_doc(
        "duplicate_response_created",
        meaning="""
            A second `response.created` arrived in the same stream. A stream carries one
            response: `response.created` opens it once, and `response.queued` and
            `response.in_progress` (which may follow) are the only other opening events. A
            gateway that retries upstream and splices the second attempt into the same body
            produces it, as does one that concatenates two responses.""",
        clients="""
            openai-python builds its snapshot from the first `response.created` and ignores
            later ones: the second response's items are appended to the first one's `output`,
            and as their `output_index` starts again at 0 they replace the first response's
            items in the index later events are routed by. The streamed snapshot mixes both
            attempts (the first one's id and settings, both attempts' items) while the final
            response is the second's, and a client that resumes with `starting_after` cannot
            tell which response the number belongs to.""",
        example="""
            event: response.created
            data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68a1","object":"response","status":"in_progress","output":[]}}

            event: response.created
            data: {"type":"response.created","sequence_number":1,"response":{"id":"resp_68a2","object":"response","status":"in_progress","output":[]}}

            """,
        fix="""
            Send one response per stream. A proxy that retries upstream must either retry
            before it has sent anything or end the stream with an error (an `error` event, or
            `response.failed`), never splice a second `response.created` into the body.""",
    ),
    rule_doc(
        "sequence_gap",
        meaning="""
            `sequence_number` did not start at 0 (or at `starting_after + 1` on a resumed
            stream), or did not rise by exactly one from one event to the next; keepalive events
            take numbers too. A skip ahead and a step back (a repeated or decreasing number) are
            each reported once per stream.""",
        clients="""
            Resumption relies on it: a client that reconnects with `starting_after=N` gets the
            events numbered above N, and openai-python skips events whose number is not above
            its `starting_after`. With gaps or repeats, a resumed stream skips or repeats
            events.""",
        example="""
            event: response.output_text.delta
            data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel"}

            event: response.output_text.delta
            data: {"type":"response.output_text.delta","sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"lo"}

            """,
        fix="""
            Number every event of a response, keepalives included, consecutively from 0. A
            proxy that drops or injects events must renumber.""",
    ),
    rule_doc(
        "item_out_of_order",
        meaning="""
            `response.output_item.added` arrived with an `output_index` other than the next one
            (0, 1, 2, ...), including an index an earlier item already used.""",
        clients="""
            openai-python appends each added item to `snapshot.output` and then indexes
            `snapshot.output[event.output_index]` for every later event of the item, so an
            out-of-order index makes it update the wrong item or raise `IndexError`.""",
        example="""
            event: response.output_item.added
            data: {"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}

            """,
        note="No item was added yet, so the next index is 0.",
        fix="Add output items with consecutive `output_index` values starting at 0.",
    ),
    rule_doc(
        "item_overlap",
        meaning="""
            An output item was added while another was still open (added, not yet done). The
            API sends items one at a time. Reported once per stream.""",
        clients="""
            Clients that render or process "the current item" (a message, then a function call)
            assume one open item at a time and attach the events of the second item to the
            first.""",
        example="""
            event: response.output_item.added
            data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","status":"in_progress","summary":[]}}

            event: response.output_item.added
            data: {"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}

            """,
        fix="Send `response.output_item.done` for an item before adding the next.",
    ),
    rule_doc(
        "item_not_open",
        meaning="""
            An event points at an output item or content part that is not open: an
            `output_index` or `item_id` that was never added or is already done, an `item_id`
            that differs from the open item at that index, a `content_index` /
            `summary_index` whose part was not added (or already done), or a delta that follows
            the `.done` event of its part's text (or of a tool call's input).""",
        clients="""
            openai-python's accumulator indexes `snapshot.output[event.output_index]` and
            `output.content[event.content_index]`: an event for a part that does not exist
            raises `IndexError` or lands in another part, and text is lost or misplaced.""",
        example="""
            event: response.output_text.delta
            data: {"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}

            """,
        note="No `response.content_part.added` for content part 0 of `msg_1` came before it.",
        fix="""
            Open each item (`output_item.added`) and each part (`content_part.added`,
            `reasoning_summary_part.added`) before any event that refers to it, and refer to
            it with the same `item_id`.""",
    ),
    rule_doc(
        "item_not_closed",
        meaning="""
            An output item was still open when the response completed (`response.completed` or
            `response.incomplete`; a `response.failed` may leave items open), or an item's
            `output_item.done` came while one of its content or summary parts was still
            open.""",
        clients="""
            Clients finalize on the `.done` events: a function call is executed when its
            `output_item.done` arrives, a message is stored when its part is done. An item that
            never closes is never acted on.""",
        example="""
            event: response.output_item.added
            data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"get_weather","arguments":""}}

            event: response.completed
            data: {"type":"response.completed","sequence_number":3,"response":{"id":"resp_68a1","status":"completed","usage":{"input_tokens":20,"output_tokens":9,"total_tokens":29}}}

            """,
        fix="""
            Send `content_part.done` for each part and `output_item.done` for each item before
            the terminal event.""",
    ),
    rule_doc(
        "item_status_unexpected",
        meaning="""
            An item's `status` is not `in_progress` on `response.output_item.added`, or is not
            `completed`, `incomplete` or `failed` on `response.output_item.done`. Items without
            a `status` are not judged.""",
        clients="""
            Clients that show progress or decide whether an item is final read its status: an
            item added as `completed` looks final before its content arrived, one done as
            `in_progress` never looks finished.""",
        example="""
            event: response.output_item.done
            data: {"type":"response.output_item.done","sequence_number":9,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}}

            """,
        fix="""
            Add items with `status: "in_progress"` and finish them with `completed` (or
            `incomplete`).""",
    ),
    rule_doc(
        "done_text_mismatch",
        meaning="""
            A `.done` event's final text differs from the concatenation of the deltas of the
            same part: `output_text`, `refusal`, `reasoning_text`, `reasoning_summary_text`,
            `function_call_arguments` and `custom_tool_call_input`. Only judged when deltas
            were seen, and up to 1 MiB of them per part.""",
        clients="""
            Clients render the deltas live and store the `.done` text (or the other way round),
            so the user saw one text and the conversation history holds another; function
            arguments executed from the `.done` event differ from what was streamed.""",
        example="""
            event: response.output_text.delta
            data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}

            event: response.output_text.done
            data: {"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello!"}

            """,
        fix="""
            Build the `.done` text by joining the deltas you sent, or send deltas that add up
            to the final text.""",
    ),
    rule_doc(
        "text_not_done",
        meaning="""
            A content part's or summary part's text deltas streamed, and the part was closed
            (`response.content_part.done`, `response.reasoning_summary_part.done`) without the
            `.done` event of its text (`response.output_text.done`, `response.refusal.done`,
            `response.reasoning_text.done`, `response.reasoning_summary_text.done`); or a tool
            call's input deltas streamed and its `response.output_item.done` came without
            `response.function_call_arguments.done` (or `custom_tool_call_input.done`). A part
            closed by its item's `output_item.done` while still open is `item_not_closed`.""",
        clients="""
            openai-python's stream helper builds its final response from `response.completed`,
            which still holds the text, so it copes; but the `.done` events are what
            event-driven clients act on (the helper's `response.output_text.done` event, with
            its `parsed` structured output; openai-node's `on("response.output_text.done")`):
            those never fire for this part. A relay that filters events by name is the usual
            cause. A warning: the official helper's final response is intact.""",
        example="""
            event: response.output_text.delta
            data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}

            event: response.content_part.done
            data: {"type":"response.content_part.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hello","annotations":[]}}

            """,
        fix="""
            Send the text's `.done` event (with the joined text) before closing its part, and
            `function_call_arguments.done` before a function call's `output_item.done`.""",
    ),
    rule_doc(
        "completed_output_empty",
        meaning="""
            `response.completed` carries `response.output: []` although output items were
            streamed and done in this stream. A `null` or absent `output` is not this rule:
            the stream helper rebuilds that from the items done.""",
        clients="""
            openai-python's stream helper takes `response.completed`'s `output` as the final
            response's whenever it is a list: `get_final_response()` then has no output items
            and `output_text` is empty, without any error. Every item the stream delivered is
            silently lost to a client that reads the final response, so it is an error. A
            gateway that rebuilds the terminal event without copying the output is the usual
            cause.""",
        example="""
            event: response.output_item.done
            data: {"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[]}]}}

            event: response.completed
            data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_68a1","status":"completed","output":[],"usage":{"input_tokens":20,"output_tokens":9,"total_tokens":29}}}

            """,
        fix="""
            Put every done item in `response.completed`'s `response.output`, in order (or,
            if it cannot be rebuilt, send `null` rather than an empty list).""",
    ),
    rule_doc(
        "status_mismatch",
        meaning="""
            A lifecycle event's `response.status` does not match the event:
            `response.created`, `response.queued` and `response.in_progress` carry
            `in_progress` or `queued`; `response.completed` carries `completed` and a non-null
            `usage`; `response.incomplete` carries `incomplete` and
            `incomplete_details.reason`; `response.failed` carries `failed` and a non-null
            `error`.""",
        clients="""
            Clients branch on the final response's status and read its `usage`, `error` or
            `incomplete_details`: a `completed` response without usage breaks token
            accounting, a `failed` one without `error` gives the user nothing to show.""",
        example="""
            event: response.completed
            data: {"type":"response.completed","sequence_number":12,"response":{"id":"resp_68a1","status":"in_progress","usage":null}}

            """,
        fix="""
            Set the response's status (and usage, error or incomplete details) to match the
            lifecycle event that carries it.""",
    ),
    rule_doc(
        "response_id_changed",
        meaning="""
            `response.id` differs between lifecycle events of one stream
            (`response.created`, `response.in_progress`, `response.completed`, ...).""",
        clients="""
            openai-python's stream helper (`client.responses.stream()`) raises
            `RuntimeError: Lifecycle response identity changed.` (measured with openai 3.57).
            Clients keep the id to resume (`GET /v1/responses/{id}?stream=true`), to chain the
            next turn (`previous_response_id`) or to cancel; with a changing id they use the
            wrong one. It usually means two responses were spliced into one stream.""",
        example="""
            event: response.created
            data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_68a1","status":"in_progress"}}

            event: response.completed
            data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_77b2","status":"completed","usage":{"input_tokens":20,"output_tokens":9,"total_tokens":29}}}

            """,
        fix="Use one response id for every lifecycle event of a stream.",
    ),
    rule_doc(
        "event_type_mismatch",
        meaning="""
            The SSE `event:` name differs from the JSON `type`. Events without an `event:` line
            are fine. Reported once per stream.""",
        clients="""
            openai-python reads only the JSON `type`, so it is not affected; browsers'
            `EventSource` listeners (`addEventListener(name)`) and clients that dispatch on the
            SSE name, as Anthropic's SDKs do for their protocol, see a different event than
            the SDK does.""",
        example="""
            event: response.output_text.delta
            data: {"type":"response.output_text.done","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hello"}

            """,
        fix="Name each event after its JSON `type`, or send no `event:` line.",
    ),
)
