# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the OpenAI Chat Completions rules (``protocols/openai_chat.py``).

The finish-reason rules come first: Gemini reports them too, and they are documented here,
with their first protocol.
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

_CHUNK = '"object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o"'

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    # -- Shared with Gemini ----------------------------------------------------------------
    rule_doc(
        "missing_finish_reason",
        meaning="""
            A choice (OpenAI Chat) or candidate (Gemini) never received its finish reason. In
            OpenAI Chat it is judged at `[DONE]`, or at the end of the body if `[DONE]` never
            came; with the request known, every index below `n` is expected, so a choice that
            never appeared is reported too. In Gemini, which has no terminal event, a
            `finishReason` on each candidate's last chunk is the only sign that the model
            stopped: at the end of the body, a candidate without one (or a stream in which no
            candidate ever got one) means the response is truncated, and the outcome is
            `unclosed`. A blocked prompt or an error chunk ends a Gemini stream without it.""",
        clients="""
            Clients decide what to do next from the finish reason: run the tool calls on
            `tool_calls`, tell the user the answer was cut on `length`, accept it on `stop`.
            Without one, agent loops stall or guess, and a chat UI cannot tell a cut answer from
            a finished one. google-genai raises nothing when a stream ends without a
            `finishReason`, so the truncation goes unnoticed.""",
        example="""
            data: {"candidates":[{"content":{"parts":[{"text":"There are **3**"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"bH6L"}

            """,
        note="The body ends after this chunk: candidate 0 never received a `finishReason`.",
        fix="""
            Send a final chunk with the finish reason for every choice or candidate before the
            stream ends, also when the upstream stopped early (use `length` / `MAX_TOKENS` or
            an in-band error, not silence). A translating proxy must map the upstream's stop
            reason rather than drop it.""",
    ),
    rule_doc(
        "content_after_finish",
        meaning="""
            Content arrived for a choice or candidate after its finish reason. In OpenAI Chat,
            a delta with non-empty `content`, `refusal`, `tool_calls` or `function_call` for a
            choice that already finished; empty deltas are fine. In Gemini, a chunk that brings
            content without a `finishReason` after a finish that itself carried content
            (reported once per candidate). Legacy Gemini streams that repeat
            `finishReason: "STOP"` on every chunk, and translators that send an empty `STOP`
            chunk before the content, are `finish_reason_not_last` (a warning) instead. In
            OpenAI Chat the same two patterns are errors: a `finish_reason` repeated on every
            chunk (each repeat with text is reported here, and each repeat is also
            `multiple_finish_reason`), and a `finish_reason` on a chunk before the content,
            since openai-python's stream helper ends the choice at the first finish reason it
            sees (see the next paragraph); that a vendor shipped the pattern does not make it
            safe for the clients that read it.""",
        clients="""
            Clients treat the finish reason as the end of that choice: a UI marks the message
            final, an accumulator hands the finished message to the application, an agent
            starts the tool calls. Content that arrives later is dropped or appended after the
            application already acted on the finished message. openai-python's chat stream
            helper emits `content.done` as soon as the choice has both a finish reason and some
            text, so with the finish first its `content.done` carries only the first piece of
            text, later pieces still arrive as `content.delta` after it, and with a
            `response_format` it validates that first piece as the final answer and raises.""",
        example="""
            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" Anything else?"},"finish_reason":null}]}

            """,
        fix="""
            Emit the finish reason on the choice's last chunk only. Proxies that merge or
            reorder upstream chunks must keep the finish chunk after the content.""",
    ),
    # -- OpenAI Chat only ------------------------------------------------------------------
    rule_doc(
        "inconsistent_id",
        meaning="""
            A chunk's `id` differs from the first chunk's. Every chunk of one completion shares
            it ("Each chunk has the same ID" in the SDK's types). Azure's prompt-annotation and
            async-filter chunks, which carry empty ids by design, are exempt. Reported once per
            stream. A `created` timestamp that moves on mid-stream is not reported: the SDK's
            types promise it constant too, but Groq, xAI, Perplexity, Ollama and Azure-hosted
            models all advance it by a second during long answers, and no client keys
            anything by it.""",
        clients="""
            Clients and proxies that key what they accumulate by `id` (logging, caching,
            multiplexing, usage accounting) split one answer in two, or attribute part of it to
            another request. A changing `id` usually means two upstream completions were
            spliced into one stream, for example a retry that resumed on a new completion.""",
        example=f"""
            data: {{"id":"chatcmpl-A1",{_CHUNK},"choices":[{{"index":0,"delta":{{"content":"Hel"}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-B7",{_CHUNK},"choices":[{{"index":0,"delta":{{"content":"lo"}},"finish_reason":null}}]}}

            """,
        fix="""
            Generate the id and timestamp once per completion and put them on every chunk. A
            proxy that retries upstream must not splice the retry into the same stream; end
            the stream with an error instead.""",
    ),
    rule_doc(
        "envelope_field_missing",
        meaning="""
            A chunk lacks its `id`, `model` or `created`, or sends it as `null`: the fields
            every chunk of a completion carries beside `object` (vLLM's error object, for
            one, carries none of them). Reported once per stream. The same field of another type (`"created": "1755012345"`) is a
            `schema_mismatch`, and so is a missing `object`: the SDK's stream helper skips a
            chunk whose `object` is not `chat.completion.chunk`, and its content with it.""",
        clients="""
            openai-python reads such a chunk whole, with its stream helper and by plain
            iteration (the oracle suite reads both): nothing fails. The completion it
            assembles lacks the field, so code that logs, caches or bills by the answer's
            id or model finds `None` there.""",
        example="""
            data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}

            data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

            data: [DONE]

            """,
        fix="""
            Put the completion's `id`, `model` and `created` (a Unix timestamp in seconds) on
            every chunk, the usage chunk included.""",
    ),
    rule_doc(
        "choice_index_invalid",
        meaning="""
            A choice's `index` is negative, or (when the request is known) not below the `n` it
            asked for (default 1).""",
        clients="""
            Clients keep one slot per requested choice and route each delta by its index. An
            index outside `0..n-1` lands nowhere or in the wrong slot: openai-python's stream
            helper appends a choice whose index it has not seen at the end of its list, so the
            text ends up attributed to another choice.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":1,"delta":{{"content":"Hi"}},"finish_reason":null}}]}}

            """,
        note="The request did not set `n`, so the only valid index is 0.",
        fix="""
            Number choices from 0 to `n - 1`. A proxy that fans one request out to several
            upstream calls must renumber their choices.""",
    ),
    rule_doc(
        "choice_out_of_order",
        meaning="""
            A choice index appeared for the first time after a higher one (choice 1 before
            choice 0). Interleaving the choices afterwards is fine; only the order of first
            appearance matters.""",
        clients="""
            openai-python's stream helper (`ChatCompletionStream`) looks a choice up by its
            index in the list it has built and appends a new one when it is missing, so when
            choice 1 comes first it is stored at position 0, and the deltas of the two choices
            are then mixed up; when the lower index never comes first (choice 1 alone, or 2
            after 0) it raises `IndexError` (measured with openai 3.57). An error.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":1,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}

            """,
        fix="""
            Send each choice's first chunk in index order (0, 1, 2, ...) before interleaving
            them.""",
    ),
    rule_doc(
        "role_not_first",
        meaning="""
            `delta.role` arrived on a later chunk of its choice instead of the first one.
            OpenAI sends the role once, on the first chunk of each choice.""",
        clients="""
            Clients take the role from a choice's first delta: a UI creates the message bubble
            for it, an accumulator starts the message snapshot from it. A role that comes later
            is ignored or, in accumulators that concatenate string fields, appended.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"content":"Hello"}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"!"}},"finish_reason":null}}]}}

            """,
        fix="Put `role` on the first delta of each choice, and only there.",
    ),
    rule_doc(
        "role_repeated",
        meaning="""
            `delta.role` was sent again for a choice that already had it. Some compatible
            servers send the role on every chunk.""",
        clients="""
            openai-python's stream helper accumulates deltas by concatenating string fields
            (`lib/streaming/_deltas.py`), so a role sent twice becomes `"assistantassistant"` in
            the accumulated message; code that checks the role, or sends the message back in
            the next request, then fails.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"Hel"}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"lo"}},"finish_reason":null}}]}}

            """,
        fix="Send `role` on the first delta of each choice only.",
    ),
    rule_doc(
        "multiple_finish_reason",
        meaning="""
            A choice received a second non-null `finish_reason`. Each choice finishes exactly
            once. A server that repeats the finish reason on every chunk (`"finish_reason":
            "stop"` throughout) gets this on each repeat, and `content_after_finish` on each
            repeat that carries text. It stays an error, not a warning, even where a vendor's
            own server did it: severity follows what the official client does with such a
            stream, and it breaks there (next paragraph).""",
        clients="""
            Clients act on the finish reason (run tool calls on `tool_calls`, warn on `length`):
            a second one makes them act twice, or act on whichever one their code happens to
            keep. openai-python's stream helper (`client.chat.completions.stream()`,
            `ChatCompletionStreamState`) takes the first non-null `finish_reason` as the end of
            the choice: it emits `content.done` and `tool_calls.function.arguments.done` there
            with the text so far, and with a `response_format` or strict tools it validates
            that partial text and raises (and raises at once on a `length` or `content_filter`
            finish). Clients that stop reading at the first finish reason drop the rest of the
            answer, while relays that keep the last one (Vercel's AI SDK) survive it, so the
            stream looks fine in one client and breaks in another. It usually means a proxy
            forwards the upstream finish chunk and adds its own, or a server sets the field on
            every chunk.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"length"}}]}}

            """,
        fix="Send one finish chunk per choice; a proxy forwards the upstream's or makes its own.",
    ),
    rule_doc(
        "unknown_finish_reason",
        meaning="""
            A `finish_reason` outside the documented `stop`, `length`, `tool_calls`,
            `content_filter` and `function_call`, such as OpenRouter's `error`. It is still
            taken as the end of the choice.""",
        clients="""
            The SDK types declare `finish_reason` as a closed `Literal`. openai-python passes an
            unknown value through unvalidated, so it reaches application code whose `match` or
            `if` chain over the documented values falls through; TypeScript code that switches
            over the union does the same. Helpers that raise on specific reasons
            (openai-python raises `LengthFinishReasonError` on `length` when parsing) do not
            recognise it.""",
        example="""
            data: {"id":"gen-1727346171","object":"chat.completion.chunk","created":1727346171,"model":"openai/gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"error"}]}

            """,
        fix="""
            Map the provider's reasons to the documented ones (`stop`, `length`, `tool_calls`,
            `content_filter`), and report errors with an in-band error payload rather than a
            finish reason.""",
    ),
    rule_doc(
        "tool_calls_finished_as_stop",
        meaning="""
            A choice streamed `tool_calls` deltas, then finished with `finish_reason: "stop"`
            although the request forced no function (its `tool_choice` was absent, `auto` or
            `required`). OpenAI's API finishes such a choice with `tool_calls`; `stop` after
            tool calls is right only when the request named one function, and is not
            reported then. Seen in Ollama's OpenAI-compatible endpoint and in gateways that
            map another provider's stop reason (LiteLLM with Gemini 3 and OCI upstreams). Not
            judged when the request is unknown or its `tool_choice` is another value.""",
        clients="""
            The official SDKs read the stream whole and keep the tool calls: neither fails.
            Agent loops that branch on the finish reason (`if finish_reason ==
            "tool_calls"`: common in hand-written loops and some frameworks) take the answer
            as final and never run the tools, so the conversation stops without an error.""",
        example="""
            data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1755012345,"model":"llama3.1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}

            data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1755012345,"model":"llama3.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

            """,
        fix="""
            Finish a choice that called tools with `finish_reason: "tool_calls"` (map the
            upstream's stop reason when it has no such value); keep `stop` for a choice that
            only answered in text, or whose request forced one function.""",
    ),
    rule_doc(
        "tool_call_index_invalid",
        meaning="""
            A `tool_calls` entry has no integer `index` (or a negative one), or a tool call's
            first delta uses an index that skips one: the calls of a choice are numbered 0, 1,
            2, ... in order of first appearance.""",
        clients="""
            openai-python's stream helper merges list deltas by their `index`
            (`lib/streaming/_deltas.py`): it raises when an entry has no integer index, and a
            new index past the end of the list is appended at the end, so a skipped index shifts
            every later call and arguments get merged into the wrong call.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"id":"call_abc","type":"function","function":{{"name":"get_weather","arguments":""}}}}]}},"finish_reason":null}}]}}

            """,
        note="The `tool_calls` entry has no `index`.",
        fix="""
            Give every `tool_calls` entry its integer `index`, numbering each choice's calls
            from 0 in the order they start, and repeat the same index on every later delta of
            that call.""",
    ),
    rule_doc(
        "tool_call_header_missing",
        meaning="""
            The first delta of a tool call lacks its `id` or its `function.name`. OpenAI sends
            both on a call's first delta, with empty or partial `arguments`, and only argument
            fragments afterwards.""",
        clients="""
            The client needs the name to pick the function and the id to send the result back
            (`tool_call_id` in the next request). Accumulating clients that take them from the
            first delta end up with an empty name or id: the tool cannot be dispatched, or the
            follow-up request is rejected.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{{\\"city\\":"}}}}]}},"finish_reason":null}}]}}

            """,
        fix="""
            Send `id`, `type: "function"` and `function.name` on the first delta of each call,
            before any argument fragments.""",
    ),
    rule_doc(
        "tool_call_header_repeated",
        meaning="""
            A later delta of a tool call sends its `id` or `function.name` again. Some
            compatible servers repeat the whole header on every delta.""",
        clients="""
            openai-python's stream helper concatenates string fields across deltas, so a name
            sent twice becomes `"get_weatherget_weather"` and an id `"call_abccall_abc"`: the
            application looks up a function that does not exist, and the next request names an
            unknown tool call.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_abc","type":"function","function":{{"name":"get_weather","arguments":""}}}}]}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_abc","function":{{"name":"get_weather","arguments":"{{\\"city\\":\\"Paris\\"}}"}}}}]}},"finish_reason":null}}]}}

            """,
        fix="""
            Send the header (`id`, `function.name`) on a call's first delta only; later deltas
            carry `index` and `function.arguments`.""",
    ),
    rule_doc(
        "tool_call_function_missing",
        meaning="""
            A `tool_calls` entry of a delta has no `function` object (the key is absent or
            null). The API sends `function` on every delta of a function call: the name on the
            first, the argument fragments (possibly `""`) on every later one.""",
        clients="""
            openai-python's stream helper (`client.chat.completions.stream()`) asserts
            `tool_call_delta.function is not None` for every delta of a function tool call, so
            it fails with `AssertionError` on the first such delta (measured with openai 3.57);
            plain iteration of `create(stream=True)` reads on.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0}}]}},"finish_reason":null}}]}}

            """,
        fix="""
            Send `function` on every tool-call delta, with `arguments: ""` when a delta carries
            no fragment.""",
    ),
    rule_doc(
        "tool_call_arguments_invalid",
        meaning="""
            When a choice finished, the concatenated `function.arguments` of one of its tool
            calls (or of its legacy `function_call`) did not parse as JSON. Arguments longer
            than 1 MiB are not collected and not checked. A warning: a call cut off by
            `finish_reason: "length"` is expected to be incomplete.""",
        clients="""
            Applications `json.loads` the arguments to call the tool, and that raises; helpers
            that parse arguments for strict function tools (openai-python's `parse`/`stream`
            helpers with `pydantic_function_tool`) fail the same way. It usually means argument
            fragments were lost, duplicated or reordered on the way.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"call_abc","type":"function","function":{{"name":"get_weather","arguments":"{{\\"city\\": \\"Par"}}}}]}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"tool_calls"}}]}}

            """,
        fix="""
            Forward every argument fragment, in order, exactly once; do not trim or re-encode
            fragments (each is a piece of one JSON text, not a JSON value of its own).""",
    ),
    rule_doc(
        "function_call_mixed",
        meaning="""
            One choice mixes the deprecated `delta.function_call` with `delta.tool_calls`.
            Reported once per stream.""",
        clients="""
            Clients read one form or the other: code written for `tool_calls` ignores
            `function_call` and the reverse, so part of the call is lost, and accumulators
            build two half calls.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"function_call":{{"name":"get_weather","arguments":""}}}},"finish_reason":null}}]}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"arguments":"{{}}"}}}}]}},"finish_reason":null}}]}}

            """,
        fix="Use `tool_calls` only (`function_call` is deprecated), or `function_call` only.",
    ),
    rule_doc(
        "usage_not_last",
        meaning="""
            With `stream_options.include_usage`, OpenAI sends usage on a chunk of its own with
            `choices: []`, right before `[DONE]`. This rule fires when that usage chunk arrives
            before every choice has finished, or when a chunk other than `[DONE]` follows it.""",
        clients="""
            The SDK's types document usage as null "except for the last chunk", so clients
            treat the usage chunk as the end of the content: they finalize the message,
            record the token counts and may stop reading. Content that comes after it is lost
            or counted without usage.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}

            """,
        fix="Send the usage chunk after every choice's finish chunk, immediately before `[DONE]`.",
    ),
    rule_doc(
        "usage_repeated",
        meaning="More than one usage chunk (a chunk with `choices: []` and non-null `usage`).",
        clients="""
            Clients that add up usage chunks count the tokens twice; clients that keep the
            last one may keep the wrong one. Billing and quota figures built on them
            disagree with the provider's.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            """,
        fix="Send one usage chunk per stream.",
    ),
    rule_doc(
        "usage_missing",
        meaning="""
            The request asked for usage (`"stream_options": {"include_usage": true}`), but
            `[DONE]` arrived and no chunk carried non-null usage. It needs the request: the
            middleware reads the request body the app reads (up to `request_peek_bytes`),
            `streamguard check` takes `--request`, `streamguard probe` uses the JSON sent with
            `--data`. Without a request the rule is skipped, never guessed.""",
        clients="""
            Clients that asked for usage to meter or bill the call get none: openai-python's
            accumulated completion has `usage=None`, and cost tracking built on it records zero
            tokens or fails.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}

            data: [DONE]

            """,
        note="The request had `stream_options.include_usage: true`.",
        fix="""
            Honour `stream_options.include_usage`; a proxy must pass `stream_options` through
            to the upstream (or compute usage itself) and forward the usage chunk.""",
    ),
    rule_doc(
        "usage_unrequested",
        meaning="""
            A chunk carries non-null `usage` although the request did not set
            `stream_options.include_usage` (needs the request, like `usage_missing`). Reported
            once per stream.""",
        clients="""
            Clients that did not ask for usage do not expect the extra chunk with empty
            `choices`; the common `chunk.choices[0].delta.content` then raises `IndexError` on
            it.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            """,
        fix="Send the usage chunk only when `include_usage` was requested.",
    ),
    rule_doc(
        "usage_nonstandard",
        meaning="""
            Usage placed the way some compatible providers do instead of on a chunk of its own
            with `choices: []`: on a chunk that also carries choices (vLLM's continuous usage,
            usage on the finish chunk). Reported once per stream. A usage chunk whose
            `choices` is null or absent is `usage_without_choices`, an error, since the
            official stream helper fails on it.""",
        clients="""
            Clients that read usage from the empty-choices chunk, as OpenAI sends it, miss it;
            the official SDK reads it either way.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            """,
        fix="Send usage on a separate chunk with `choices: []`, right before `[DONE]`.",
    ),
    rule_doc(
        "usage_without_choices",
        meaning="""
            The usage chunk has `choices: null` or no `choices` at all, as vLLM and some other
            compatible servers send it, instead of `choices: []`. Split from
            `usage_nonstandard` (which stays a warning for usage on a chunk that carries
            choices) because the official client fails here. Reported once per stream.""",
        clients="""
            openai-python's stream helper (`client.chat.completions.stream()`) iterates
            `chunk.choices` of every chunk and raises `TypeError: 'NoneType' object is not
            iterable` on this one (measured with openai 3.57); plain iteration of
            `create(stream=True)` reads on, but any code that loops over `choices` fails
            the same way.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":null,"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

            """,
        fix="Send the usage chunk with `choices: []`.",
    ),
    rule_doc(
        "usage_total_mismatch",
        meaning="`usage.total_tokens` differs from `prompt_tokens + completion_tokens`.",
        clients="""
            Clients and dashboards that bill on `total_tokens` and those that add the parts
            disagree; one of the counts is wrong.""",
        example=f"""
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":80}}}}

            """,
        fix="Compute `total_tokens` as the sum of the two counts.",
    ),
    rule_doc(
        "unexpected_event_field",
        meaning="""
            A chat chunk carries an `event:` line. Chat Completions streams are data-only: no
            `event:`, `id:` or `retry:`. Reported once per stream.""",
        clients="""
            openai-python dispatches on the event name: unnamed events are chat chunks, named
            ones go down its Assistants-style path (`thread.*` names), which wraps the payload
            as `{"data": ..., "event": name}` before building the object, so `chunk.choices`
            is not where the application looks; a named `error` event raises.""",
        example=f"""
            event: chunk
            data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"content":"Hi"}},"finish_reason":null}}]}}

            """,
        fix="Send `data:` lines only for Chat Completions streams.",
    ),
)
