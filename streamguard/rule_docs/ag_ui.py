# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the AG-UI rules (``protocols/ag_ui.py``), and of the three id rules AG-UI
shares with the AI SDK UI message stream (``protocols/ai_sdk_ui.py``).

The client behaviour quoted is ``@ag-ui/client`` 1.0.0 (``verifyEvents``,
``transformHttpEventStream``, ``defaultApplyEvents``) and ``ai`` 7.0.173
(``processUIMessageStream``, ``DefaultChatTransport``).
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    rule_doc(
        "id_not_open",
        meaning="""
            An event continues or closes something it names by id, and nothing of that id is
            open: it never started, or it already ended. AG-UI: `TEXT_MESSAGE_CONTENT` or
            `TEXT_MESSAGE_END` without its `TEXT_MESSAGE_START`, the same for `TOOL_CALL_ARGS`
            and `TOOL_CALL_END`, the reasoning events, `STEP_FINISHED` for a step that did not
            start (steps are keyed by subagent and name), `SUBAGENT_FINISHED` or
            `SUBAGENT_ERROR` for a subagent that is not running, and a `*_CHUNK` shorthand
            without an id when no chunk stream of its kind is open. AI SDK: `text-delta`,
            `text-end`, `reasoning-delta` or `reasoning-end` for a part that is not open (a
            part still open at a `finish-step` counts as ended there, as `ai` 5 and 6 read it),
            `tool-input-delta` for a call without a `tool-input-start` in this stream, and a
            tool output, error, denial or approval request inside a step of this stream for a
            call no chunk of the stream introduced, or outside a step for a call a later chunk
            of the stream introduces (the answer came before its own call).""",
        clients="""
            Both official clients throw, and the whole response fails. `@ag-ui/client`'s
            `verifyEvents` raises `AGUIError` "Cannot send 'TEXT_MESSAGE_CONTENT' event: No
            active text message found with ID ...", which errors the run. The AI SDK's
            `processUIMessageStream` throws `UIMessageStreamError` "Received text-delta for
            missing text part with ID ... Ensure a "text-start" chunk is sent before any
            "text-delta" chunks"; `useChat` ends in its error state and the text already
            streamed stops there; "No tool invocation found for tool call ID ..." for an
            output of a call it holds no part for. Tool outputs and approvals for a
            `toolCallId` the AI SDK stream never introduces, sent before its first
            `start-step`, are not reported: a stream that continues an assistant message
            (after a tool approval) answers the previous response's calls there, as
            `streamText` does, and never introduces them again.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"Hello"}

            data: {"type":"TEXT_MESSAGE_END","messageId":"msg_1"}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        note="No `TEXT_MESSAGE_START` for `msg_1`: its content and its end name a message that is not open.",
        fix="""
            Send the start event before any content for an id, and no content after its end.
            When a handler emits events from several tasks, serialise them per id; when an
            upstream's message id changes mid-answer, end the old one and start the new one.
            In AG-UI, the `TEXT_MESSAGE_CHUNK` and `TOOL_CALL_CHUNK` shorthands open and close
            messages for you when a producer cannot know where one begins.""",
    ),
    rule_doc(
        "id_already_open",
        meaning="""
            A start event uses an id that is still open: `TEXT_MESSAGE_START`,
            `TOOL_CALL_START`, `REASONING_START`, `REASONING_MESSAGE_START`, `STEP_STARTED` or
            `SUBAGENT_STARTED` (AG-UI) again before its end, or `text-start` or
            `reasoning-start` (AI SDK) for a part that has not ended. A chunk shorthand that
            opens an id already opened by a start event counts too, and so does an AG-UI
            `TEXT_MESSAGE_START` or `TOOL_CALL_START` (or the chunk that opens one) for an id
            that already started and ended in the same run.""",
        clients="""
            `@ag-ui/client` throws: "Cannot send 'TEXT_MESSAGE_START' event: A text message
            with ID ... is already in progress. Complete it with 'TEXT_MESSAGE_END' first.",
            and the same for tool calls, reasoning, steps ("Step ... is already active") and
            subagents. The AI SDK client does not throw: it replaces its record of the active
            part and pushes a second one, so the first part stays in its `streaming` state
            forever and the text is split between two parts. A message or tool call started
            again after its end passes `verifyEvents`, but the client finds the one it holds
            by that id and appends to it: the second message's text runs on after the first's,
            and the second call's arguments after the first's (`{"city":"Paris"}{"city":
            "Rome"}`, which no tool can parse), and the second call is lost.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"TEXT_MESSAGE_START","messageId":"msg_1","role":"assistant"}

            data: {"type":"TEXT_MESSAGE_START","messageId":"msg_1","role":"assistant"}

            data: {"type":"TEXT_MESSAGE_END","messageId":"msg_1"}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            End a message, part, call or step before starting it again, or give the new one a
            new id. A retry that restarts a streamed answer should end (or, in the AI SDK,
            `reset-step`) the first attempt before it starts over.""",
    ),
    rule_doc(
        "id_not_closed",
        meaning="""
            The run or the message finished while something it opened was still open. AG-UI:
            `RUN_FINISHED` with a text message, tool call, reasoning message or span, step or
            subagent not yet ended (a chunk stream is closed for you at `RUN_FINISHED`). AI
            SDK: `finish` (or `[DONE]`, when no `finish` came) with a text or reasoning part
            not ended, or a tool call whose input started streaming (`tool-input-start`) and
            never became `tool-input-available` or `tool-input-error`. After an AI SDK `error`
            or `abort` chunk, and at `RUN_ERROR`, open parts are expected and not reported; a
            tool call with input and no output at `finish` is legitimate (a client-side tool,
            or one awaiting approval).""",
        clients="""
            `@ag-ui/client` throws at `RUN_FINISHED`: "Cannot send 'RUN_FINISHED' while text
            messages are still active" (and the same for steps, tool calls, reasoning and
            subagents), so the run that just completed is reported to the application as
            failed. The AI SDK client keeps the part in its `streaming` state: a UI that shows
            a cursor or spinner for streaming parts shows it forever, and a tool whose input
            never became available is never executed (`onToolCall` runs on
            `tool-input-available` only).""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"TEXT_MESSAGE_START","messageId":"msg_1","role":"assistant"}

            data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"Hello"}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            Close what you open on every path, including early returns and cancellation: a
            `finally` that sends the pending end events before `RUN_FINISHED` or `finish`. When
            a run fails, send `RUN_ERROR` (AG-UI) or an `error` chunk (AI SDK) instead of the
            normal finish.""",
    ),
    rule_doc(
        "missing_run_started",
        meaning="""
            The stream's first AG-UI event is neither `RUN_STARTED` nor `RUN_ERROR`: content,
            state or a `RUN_FINISHED` came before any run started. Events of an unknown type
            do not count (the client drops them). Reported once, on the first event; the rest
            of the stream is checked as if the run had started.""",
        clients="""
            `@ag-ui/client`'s `verifyEvents` throws "First event must be 'RUN_STARTED'" on the
            very first event, so the run fails before anything is shown. Servers that stream
            a `STATE_SNAPSHOT` or a greeting message before announcing the run, or that put
            `RUN_STARTED` behind a slow setup step and emit progress first, hit this.""",
        example="""
            data: {"type":"TEXT_MESSAGE_START","messageId":"msg_1","role":"assistant"}

            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            Send `RUN_STARTED` (with the request's `threadId` and `runId`) as the first event,
            before any other work; when the run cannot start, send `RUN_ERROR` alone.""",
    ),
    rule_doc(
        "duplicate_run_started",
        meaning="""
            `RUN_STARTED` arrived while a run was active: the previous one had not ended with
            `RUN_FINISHED` or `RUN_ERROR`. Several runs in one stream are legitimate one after
            another (a replay of a stored thread), never nested.""",
        clients="""
            `@ag-ui/client` throws "Cannot send 'RUN_STARTED' while a run is still active.
            The previous run must be finished with 'RUN_FINISHED' before starting a new run."
            A sub-agent that forwards its own `RUN_STARTED` into the parent's stream is the
            usual cause; AG-UI 1.0 has `SUBAGENT_STARTED` for that.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_2"}
            """,
        fix="""
            Finish a run before starting the next; forward a nested agent's events as a
            subagent (`SUBAGENT_STARTED` and its `subagentRunId`) or drop its run events.""",
    ),
    rule_doc(
        "state_delta_before_snapshot",
        meaning="""
            A `STATE_DELTA` (a JSON Patch) came before any `STATE_SNAPSHOT` in the stream, so
            it patches whatever state the client already holds. That is legitimate when the
            client sent its state in `RunAgentInput.state` and the agent patches exactly that;
            it is worth a look when the agent's state and the client's may differ. Info,
            reported once per stream.""",
        clients="""
            `@ag-ui/client` applies the patch with fast-json-patch to its current state; an
            operation on a path that is not there fails, and the client only logs "Failed to
            apply state patch" with `console.warn` and keeps the old state, so the UI silently
            drifts from the agent. The AG-UI state documentation describes snapshots as the
            way "to establish a new baseline for future delta updates".""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/count","value":2}]}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            Send a `STATE_SNAPSHOT` at the start of a run (or whenever the baseline may
            differ from what the client holds), then deltas against it.""",
    ),
    rule_doc(
        "invalid_state_patch",
        meaning="""
            A `STATE_DELTA.delta` or `ACTIVITY_DELTA.patch` holds an operation that is not
            valid JSON Patch (RFC 6902) as the AG-UI 1.0 schema types it: not an object, an
            `op` outside add, remove, replace, move, copy and test, a `path` (or a move's or
            copy's `from`) that is not an RFC 6901 JSON Pointer (empty, or `/`-prefixed tokens
            with `~` written as `~0` or `~1`), an add, replace or test without `value`. A patch
            that is well formed but does not apply to the client's state is not this rule.""",
        clients="""
            `@ag-ui/client` 1.0 validates every event with the core schema before applying it,
            and `STATE_DELTA.delta` is typed as a list of RFC 6902 operations, so an invalid
            one fails validation and the run ends in an error at that event. Earlier clients
            (0.0.x) applied the patch with fast-json-patch's validation on, which refuses the
            same operations; they logged "Failed to apply state patch" with `console.warn` and
            dropped the whole patch, so the UI silently drifted from the agent. Python code
            that builds patches by hand (`{"op": "set", ...}`, or a path `"count"` instead of
            `"/count"`) is the usual source.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"STATE_SNAPSHOT","snapshot":{"count":1}}

            data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"count","value":2}]}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            Build patches with a JSON Patch library (`jsonpatch.make_patch(old, new)` in
            Python) rather than by hand, or send a `STATE_SNAPSHOT`.""",
    ),
    rule_doc(
        "tool_result_without_call",
        meaning="""
            A `TOOL_CALL_RESULT` names a `toolCallId` that no `TOOL_CALL_START` (nor
            `TOOL_CALL_CHUNK`) started in any run of the stream, and that the run's echoed
            input (`RUN_STARTED.input.messages`, when the server sends it) does not hold. An
            info: a run that resumes an interrupted one (`RunAgentInput.resume`) may answer a
            call the client holds from an earlier response, which the stream cannot see.""",
        clients="""
            `@ag-ui/client` accepts the event. It places the result after the assistant message
            that holds the call; with no such message it appends a tool message that answers
            no call, and sends it back in the next run's `messages`, where model APIs that
            pair tool results with calls (OpenAI's "messages with role 'tool' must be a
            response to a preceding message with 'tool_calls'") refuse the request.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"TOOL_CALL_RESULT","messageId":"msg_2","toolCallId":"call_9","content":"42"}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}
            """,
        fix="""
            Emit `TOOL_CALL_START`, `TOOL_CALL_ARGS` and `TOOL_CALL_END` for a call before its
            result, and keep the call's id the same from start to result (a framework that
            renames ids between the model's call and its tool node breaks the pair).""",
    ),
    rule_doc(
        "run_id_mismatch",
        meaning="""
            `RUN_FINISHED` names a `runId` or a `threadId` other than its `RUN_STARTED`'s (a
            `RUN_ERROR` too, when it carries them, though its schema has no such field). The
            protocol identifies a run by the pair. A warning: `@ag-ui/client` does not compare
            them.""",
        clients="""
            `HttpAgent.runAgent` reads the run to its end either way. Code that tracks runs by
            id (a UI that shows a run's status, a server that links `parentRunId`s, a gateway
            that routes a thread's events) cannot match the end to its start: the run it
            started stays running, and one it never saw ends.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}

            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_2"}
            """,
        fix="""
            Send `RUN_FINISHED` with the `threadId` and `runId` of its `RUN_STARTED`, both
            taken from the `RunAgentInput` the client posted, rather than minting new ids for
            the end event.""",
    ),
    rule_doc(
        "crlf_framing",
        meaning="""
            The events of an AG-UI stream end with CR LF line endings (`data: ...\\r\\n\\r\\n`)
            instead of LF. That is valid SSE, and every WHATWG parser reads it, but not the
            official AG-UI client. The checker measures it from where events start: an event
            that is one `data: ` line is followed by 2 bytes of line endings with LF and 4
            with CR LF. Reported once per stream.""",
        clients="""
            `@ag-ui/client`'s SSE reader (`parseSSEStream`) splits the body on `\\n\\n` only.
            With CR LF framing it never finds a boundary: it buffers the whole response,
            dispatches nothing while the agent runs, and at the end joins every `data:` line
            into one text that `JSON.parse` rejects, so the run fails after the user waited
            for all of it. sse-starlette's `EventSourceResponse` uses CR LF by default, so
            yielding AG-UI events through it breaks the client; the Python SDK's
            `EventEncoder` writes LF.""",
        example="""
            data: {"type":"RUN_STARTED","threadId":"thread_1","runId":"run_1"}\\r\\n\\r\\n
            data: {"type":"RUN_FINISHED","threadId":"thread_1","runId":"run_1"}\\r\\n\\r\\n
            """,
        note="`\\r\\n` stands for the CR LF bytes on the wire.",
        fix="""
            Send `EventEncoder().encode(event)` strings through a plain `StreamingResponse`
            with `media_type="text/event-stream"`; with sse-starlette, pass `sep="\\n"` to
            `EventSourceResponse`.""",
    ),
)
