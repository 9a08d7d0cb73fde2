# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the rules every protocol shares (protocols ``all`` in the catalog).

SSE framing (``streamguard/sse.py``), the stream's lifecycle (the engine in
``protocols/_base.py`` and the monitor) and the HTTP hygiene of the response head. A rule of
one or a few protocols is documented beside them, in the module of its first protocol.
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    # -- Framing: the SSE layer, every protocol --------------------------------------------
    rule_doc(
        "invalid_utf8",
        meaning="""
            A byte sequence that is not valid UTF-8 appeared in an event's data, its event name,
            its id, a comment or a field line. Event streams are always UTF-8 (WHATWG HTML
            §9.2.5). streamguard decodes the bytes with U+FFFD replacement, as the spec's
            decoder does, keeps checking, and reports the first such place once per stream.
            Multi-byte characters split across body messages are fine: the parser joins the
            bytes before it decodes.""",
        clients="""
            A spec-following decoder (browsers' `EventSource`) silently turns each bad byte into
            U+FFFD, so the user sees `�` in the answer and nothing reports an error. A client
            that decodes strictly (`bytes.decode()` with the default `errors="strict"`) raises
            `UnicodeDecodeError` in the middle of the stream. When the bad bytes are inside a
            JSON payload, the replacement character can also make the JSON invalid.""",
        example="""
            data: {"choices":[{"index":0,"delta":{"content":"caf\\xc3"}}]}

            data: {"choices":[{"index":0,"delta":{"content":"\\xa9 au lait"}}]}
            """,
        note="""
            `\\xc3` and `\\xa9` stand for single raw bytes: the two bytes of `é` (`c3 a9`) were
            split between two *events*, so neither event is valid UTF-8 on its own.""",
        fix="""
            Encode text to UTF-8 only at the end, one whole event at a time, and never cut a
            token buffer at a byte boundary; decode upstream bytes with an incremental decoder
            (`codecs.getincrementaldecoder("utf-8")`) before re-emitting them. Check that no
            layer encodes with Latin-1 or cp1252.""",
    ),
    rule_doc(
        "unterminated_frame",
        meaning="""
            When the body ended, bytes were left after the last blank line: the final event was
            never completed by its empty line. The finding gives the number of bytes and where
            they start, and says whether they held data. It is judged when the body ends
            (`more_body=False`, or the end of a captured file) or the app returns without
            ending it, never when the client left, the app raised or the task was
            cancelled.""",
        clients="""
            The WHATWG algorithm discards an unfinished event at the end of the stream, and so
            do openai-python and anthropic-python: the last event is silently lost. When that
            event is the terminal (`data: [DONE]`, `message_stop`), the client sees a stream
            without its end. google-genai is the exception: it yields the trailing buffer, so
            the same stream reads differently with different clients.""",
        example="""
            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

            data: [DONE]
            """,
        note="""
            The body ends right after `data: [DONE]` and a single line ending: the blank line
            that would dispatch `[DONE]` never came.""",
        fix="""
            End every event with a blank line (`\\n\\n`), the last one included. Helpers that
            format events (sse-starlette's `EventSourceResponse`, a `ServerSentEvent`)
            do this for you; hand-written generators often forget it on the final frame.""",
    ),
    rule_doc(
        "event_too_large",
        meaning="""
            One event grew past `max_event_bytes` (default 1,048,576 bytes, set in
            `StreamGuardConfig` or with `check_stream(max_event_bytes=...)`), measured from the
            first byte of the event to the end of the current line. To keep memory bounded,
            streamguard stops inspecting the stream at that point: the rest of the body is
            passed through and counted but not checked, and the report says
            `inspected=False`. A body with no line ending at all reaches this too.""",
        clients="""
            SSE clients hold an event in memory until its blank line arrives, so every client
            buffers the whole event before the application sees any of it: nothing streams
            while it grows, and a body that never sends a line ending is held until the
            connection ends. Very large events are usually a sign that the body is not event
            framing at all (a JSON document or a binary body labelled `text/event-stream`).""",
        example="""
            data: {"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAA…(1.4 MB of base64 on one line)…
            """,
        fix="""
            If large events are legitimate (inline images, big tool results), raise
            `max_event_bytes` for that route. Otherwise find the sender that writes without
            line endings, or send large payloads by reference instead of inline.""",
    ),
    rule_doc(
        "unknown_field",
        meaning="""
            A line names a field other than `event`, `data`, `id` or `retry` (field names are
            case-sensitive, so `Data:` is unknown). Each distinct name is reported once, and at
            most eight names per stream. A line with no colon is a field whose name is the
            whole line, so a raw JSON line without a `data: ` prefix lands here too. This is
            informational: such lines are legal and ignored.""",
        clients="""
            Spec-following clients, openai-python and anthropic-python ignore the line, so
            whatever it carried never reaches the application: a payload sent as `Data:` or as
            a bare JSON line is silently dropped. google-genai reads only lines that start with
            `data: ` and treats every other non-empty line as raw JSON, so there an unknown
            field line makes the SDK raise.""",
        example="""
            {"id":"chatcmpl-9x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}

            """,
        note="""
            The JSON was written without its `data: ` prefix: the parser reads a field named
            `{"id"` and clients drop the line.""",
        fix="""
            Prefix each payload line with `data: ` (lower case) and use `event:` for names;
            put anything else in the JSON payload.""",
    ),
    rule_doc(
        "event_without_data",
        meaning="""
            A block of lines ends with its blank line after an `event:` line but without any
            `data:` line. The SSE spec's dispatch drops such a block: there is no event to
            hand on, and its name is forgotten. A block of comments, or of `id:` or `retry:`
            lines only, names nothing and is not reported. Seen where a proxy or a hand-written
            server flushes the `event:` line apart from its data: the data then arrives in a
            block of its own, as an unnamed `message` event.""",
        clients="""
            Every spec-following client (browsers' `EventSource`, openai-python,
            anthropic-python, the `eventsource-parser` behind most JavaScript SDKs) drops the
            block silently. When the data follows in a block of its own, it is dispatched
            without its name: anthropic-python then reads an event whose name and JSON type
            disagree (`event_name_mismatch`), and a client that routes by name misses it.""",
        example="""
            event: content_block_delta

            data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}

            """,
        note="""
            The name and its data were flushed as two blocks: the first is dropped, the second
            arrives as a `message` event.""",
        fix="""
            Write each event as one block, `event:` and `data:` lines together, then one blank
            line; with sse-starlette or Starlette's `StreamingResponse`, yield the whole frame
            as one string.""",
    ),
    # -- Lifecycle -------------------------------------------------------------------------
    rule_doc(
        "missing_terminal",
        meaning="""
            The body ended (`more_body=False`, the end of a captured file, or the app returned
            without ending it) but the protocol's terminal signal never arrived: `data: [DONE]`
            for OpenAI Chat, `message_stop` for Anthropic,
            `response.completed`, `response.incomplete` or `response.failed` for OpenAI
            Responses. The stream's outcome is `unclosed`. It does not fire when an in-band
            error event ended the stream (outcome `error_event`), when the client left, the app
            raised or the task was cancelled, nor for plain SSE, which has no terminal. Gemini
            has no terminal event: its truncation is reported as `missing_finish_reason`.""",
        clients="""
            Most clients do not notice. openai-python ends the iteration without an error when
            the body ends before `[DONE]`, and anthropic-python's raw stream does too, so a
            truncated answer looks like a complete one; the application shows half an answer.
            Stricter helpers fail late: openai-python's Responses `get_final_response()` raises
            "Didn't receive a `response.completed` event", and anthropic-python's
            `MessageStream` helpers assert when the final message is asked for.""",
        example="""
            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" and then"},"finish_reason":null}]}

            """,
        note="The body ends here: no finish chunk, no `data: [DONE]`.",
        fix="""
            Make every exit path of the generator send the terminal signal, including early
            returns, tool-call paths and upstream errors. When the upstream fails mid-stream,
            send the protocol's in-band error event instead of returning silently. A proxy that
            generates its own frames (rather than forwarding upstream bytes) must generate the
            terminal too.""",
    ),
    rule_doc(
        "duplicate_terminal",
        meaning="""
            The terminal signal was sent a second time: a second `data: [DONE]`, a second
            `message_stop`, or a second terminal lifecycle event in a Responses stream. (One
            gateway `data: [DONE]` after a Responses terminal is accepted; a second one is a
            duplicate.) Only the first counts as the end; each repetition is reported.""",
        clients="""
            openai-python stops reading at the first `[DONE]` and openai-node ignores what
            follows, so the duplicate itself is harmless to them; the damage is what it
            reveals. It almost always means two layers both end the stream, typically a proxy
            that forwards the upstream terminal and then appends its own, and such a proxy
            usually also gets other frames wrong. Clients that count events or re-stream the
            body further forward both terminals.""",
        example="""
            data: [DONE]

            data: [DONE]

            """,
        fix="""
            Decide which layer owns the terminal: either forward the upstream's terminal
            unchanged or drop it and emit your own, never both.""",
    ),
    rule_doc(
        "event_after_terminal",
        meaning="""
            An event arrived after the protocol's terminal signal, or after an in-band error
            that ended the stream: after an OpenAI Chat error payload only `[DONE]` may follow,
            after a Responses `error` event only `response.failed` (or a gateway `[DONE]`), and
            after an Anthropic `error` event or a Gemini error chunk nothing at all. In a
            Responses stream a gateway `[DONE]` counts as the end too: anything after a
            `[DONE]` that came before the terminal, the terminal included, is reported here
            (and the body's end as `missing_terminal`).""",
        clients="""
            Clients stop at the terminal: openai-python leaves the loop at `[DONE]`, and the
            Anthropic and Responses helpers consider the message final. Whatever comes after
            is never shown, so content sent there is silently lost. After an error, the SDKs
            raise (openai-python's `APIError`, anthropic-python's `APIStatusError`) and never
            read the rest.""",
        example="""
            data: [DONE]

            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"P.S."},"finish_reason":null}]}

            """,
        fix="""
            Send the terminal last. If late data such as usage has to be sent, send it before
            the terminal, where the protocol puts it (OpenAI's usage chunk comes right before
            `[DONE]`).""",
    ),
    rule_doc(
        "response_not_finished",
        meaning="""
            The app returned without ever sending the final `http.response.body` message (the
            one with `more_body=False`); the outcome is `unclosed`. The testing helpers
            (`collect`, `streamguard probe`) report the same rule from the client side when the
            connection closes before the body ended, with the transport error in the
            message.""",
        clients="""
            The ASGI server has to close the connection without finishing the response (uvicorn
            logs "ASGI callable returned without completing response."). Over HTTP/1.1 chunked
            encoding the client never receives the final zero-length chunk, so httpx-based
            clients, the official SDKs among them, raise `RemoteProtocolError` ("peer closed
            connection without sending complete message body") instead of ending the stream
            cleanly, after whatever events did arrive.""",
        example="""
            send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
            send({"type": "http.response.body", "body": b"data: [DONE]\\n\\n", "more_body": True})
            # the app returns here: no {"type": "http.response.body", "more_body": False}
            """,
        note="These are ASGI messages, not wire bytes: the problem is the message that is missing.",
        fix="""
            End the body with `more_body=False` on every path. With Starlette's
            `StreamingResponse` or sse-starlette this happens when the generator finishes; a
            custom ASGI response or middleware that sends body messages itself must send the
            final one, also when it stops early.""",
    ),
    rule_doc(
        "body_after_end",
        meaning="""
            The app sent an `http.response.body` message after the one with `more_body=False`
            that ended the body. The stream's report was already made when the body ended, so
            this finding goes to the metrics and logs only, once per stream.""",
        clients="""
            The response is over on the wire: uvicorn raises "Unexpected ASGI message
            'http.response.body' sent, after response already completed." into the app and
            the bytes never reach the client, so whatever the app meant to add (a last event,
            the terminal signal sent twice) is lost, and the app task fails.""",
        example="""
            send({"type": "http.response.body", "body": b"data: [DONE]\\n\\n", "more_body": False})
            send({"type": "http.response.body", "body": b"data: [DONE]\\n\\n", "more_body": False})
            """,
        note="These are ASGI messages, not wire bytes: the problem is the message after the end.",
        fix="""
            Send `more_body=False` once, with or after the last bytes. A response class that
            ends the body itself (Starlette's `StreamingResponse`) must not be sent to again by
            a wrapper or a background task holding the same `send`.""",
    ),
    rule_doc(
        "body_not_ended",
        meaning="""
            The terminal signal reached the server, but the body was still open
            `timers.body_end_grace_s` seconds later (default 5). The grace starts when the
            server takes the message carrying the terminal, not when it was sent to it: a
            slow reader can hold a large final write. Reported once, while the stream is still open (the
            middleware's sweeper polls open streams) or at its end if no poll saw it. It is a
            timing rule: only the middleware applies it, with timers enabled; offline checks
            (`check_stream`, `streamguard check`) and `collect` have no clock to judge it.""",
        clients="""
            A client that reads the body to its end waits: anthropic-python and google-genai
            have no sentinel and read until the body ends, browsers' `EventSource` keeps the
            connection open, and SDKs that drain the response before closing it wait too. The
            user's request looks finished but the connection (and a worker slot, a connection
            pool entry, a load balancer slot) stays busy until some timeout cuts it.""",
        example="""
            event: message_stop
            data: {"type":"message_stop"}

            : keepalive

            : keepalive

            """,
        note="`message_stop` was sent, then the generator kept the body open with keepalives.",
        fix="""
            Return from the generator (end the body) right after the terminal frame. Stop
            keepalive tasks when the stream ends, and do not wait for upstream cleanup
            (closing an upstream connection, writing logs) before ending the body.""",
    ),
    rule_doc(
        "stalled",
        meaning="""
            No body byte was sent for longer than `timers.idle_limit_s` (default 60 s).
            Keepalive comments count as bytes, since they keep proxies alive. A message the
            server has not taken yet (a client that reads slowly) is no silence of the app:
            the limit counts from when the server takes it. Reported once per
            stall while the stream is open (new bytes end a stall), or at the end when the
            longest silence exceeded the limit and no poll reported it. A timing rule: only the
            middleware applies it, with timers enabled.""",
        clients="""
            Idle connections get cut by whatever sits in between: nginx's
            `proxy_read_timeout` defaults to 60 s, and load balancers and corporate proxies have
            their own idle timeouts; the client then sees a connection reset or a truncated
            stream. Clients with a read timeout give up on their own (httpx's default is 5 s;
            the SDKs set longer ones). Users see a frozen answer long before any timeout.""",
        example="""
            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"o3","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

            """,
        note="…then nothing for 90 seconds while the upstream model reasons.",
        fix="""
            Send a comment line (`: ping` and a blank line) every 15 seconds or so while waiting,
            as the WHATWG spec suggests and sse-starlette's `ping` option does, except on Gemini
            routes, where comments break the official Python SDK (see
            `sdk_incompatible_framing`). Look for upstream calls without a timeout.""",
    ),
    rule_doc(
        "buffered_flush",
        meaning="""
            The stream did not arrive incrementally. With at least `timers.burst_min_events`
            events (default 16), either every event came in one body message, or every event
            came within `timers.burst_window_s` (default 0.02 s) of the first while the first
            took more than `timers.burst_first_event_ratio` windows (default 20, so 0.4 s) to
            arrive: a long silence, then everything at once, carried by at most two body
            messages or by at least `timers.burst_min_events_per_message` events per message
            (default 8). A fast generator that sends one event per message after a slow first
            token is not a flush, unless `timers.burst_timing_only` is on. Judged once, at a clean end, by
            the middleware only. It sees what the app sends, so it catches buffering inside
            the app and the middleware placed inside streamguard, not a proxy in front of
            it.""",
        clients="""
            Clients get a correct stream, all of it late: the point of streaming (first tokens
            in a few hundred milliseconds) is lost, time-to-first-token equals the full
            generation time, and clients with a first-byte timeout can give up before anything
            arrives.""",
        example="""
            data: {"choices":[{"index":0,"delta":{"content":"The"}}],…}

            data: {"choices":[{"index":0,"delta":{"content":" quick"}}],…}

            … 200 more events, all in one http.response.body message …

            data: [DONE]

            """,
        fix="""
            Yield each event as soon as it exists: do not collect the answer into a list before
            returning a `StreamingResponse`, do not wrap the generator in code that joins it,
            and keep compression (`GZipMiddleware`) away from `text/event-stream`. Behind nginx,
            also set `X-Accel-Buffering: no` or `proxy_buffering off` for the route.""",
    ),
    rule_doc(
        "upstream_left_open",
        meaning="""
            A gateway's stream: the app read an upstream stream through a streamguard
            transport for this request, and that upstream stream was still open (its
            response neither read to the end nor closed) when the request was over: the
            downstream body had ended and the app had returned. Only a downstream stream
            with linked upstream streams can have it (the middleware on the app's routes,
            the transport on its HTTP client; see [Attribution](attribution.md)); reported
            once per downstream stream, and the upstream stream's own report says
            `abandoned` when it finally ends. An upstream closed by a background task
            (Starlette's `BackgroundTask(response.aclose)`) is closed before the app returns,
            and is no leak.""",
        clients="""
            The gateway's client gets its whole answer: nothing breaks for it. The upstream
            connection does: it stays checked out of the HTTP client's pool (httpx's default
            pool holds 100 connections) and the provider keeps generating, and billing,
            tokens nobody reads. Under load the pool runs dry and new requests wait for
            `PoolTimeout`, long after the streams that leaked them ended.""",
        example="""
            upstream = await client.send(request, stream=True)
            async for line in upstream.aiter_lines():
                yield line + "\\n"
                if line == "data: [DONE]":
                    break  # the upstream response is never closed
            """,
        note="Python, not wire text: the relay's generator stops reading and never closes the response.",
        fix="""
            Read an upstream stream inside `async with client.stream(...)`, or close it in a
            `finally` (`await response.aclose()`), or hand the close to the response
            (`StreamingResponse(..., background=BackgroundTask(response.aclose))`).""",
    ),
    rule_doc(
        "invalid_json",
        meaning="""
            An event's data is not the JSON the protocol requires: not JSON at all, JSON that is
            not an object (a string, a list, a number), or JSON past the parser's limits (very
            deep nesting, a number too large). It applies to every protocol with JSON payloads,
            and to plain SSE on a route that opts in with `{"protocol": "sse", "json": true}`
            (there any JSON value counts, and the `[DONE]` sentinel is allowed). On an `auto`
            route that no protocol claimed (plain SSE by default) only data plainly meant as
            JSON is judged: the one-line Python `repr` of a dict or a list (`{'a': 1}`), frames
            run together, and data that opens like a JSON object or list but does not parse
            in a stream whose other events are JSON objects; text that merely starts with a
            bracket (`[INFO] …`, `[DONE]`, a markdown link, a template `{name}`) is not.
            OpenAI's `[DONE]` sentinel is recognised before parsing, and an
            Anthropic `ping` with unparsable data is ignored, as the SDK skips pings by name.
            When the data's first line is a JSON document of its own (`data: {...}` twice
            before one blank line), the message says the frames ran together: a server or
            proxy dropped the blank line between two events, and the client reads them as
            one.""",
        clients="""
            The SDKs parse every event's data and raise mid-stream: openai-python's
            `json.loads` raises `JSONDecodeError`, anthropic-python does the same for every
            event name it knows, and google-genai raises `UnknownApiResponseError`. The
            application gets an exception after having shown part of the answer.""",
        example="""
            data: data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}

            """,
        note="""
            The app yielded a pre-formatted `"data: …\\n\\n"` string to sse-starlette's
            `EventSourceResponse`, which wrapped it again.""",
        fix="""
            Serialise payloads with `json.dumps` (not `str(dict)`), one JSON object per event,
            and let a single layer add the `data: ` framing: give sse-starlette dicts or JSON
            strings, not pre-formatted frames.""",
    ),
    rule_doc(
        "schema_mismatch",
        meaning="""
            An event's JSON does not have the protocol's documented shape: a required field
            missing or null, or a field of the wrong JSON type. Examples: an OpenAI chunk whose
            `object` is not `chat.completion.chunk`, a `delta.content` that is a number, a chunk
            without `choices` and without usage; a Responses event without the fields its type
            requires (`response`, `output_index`, `item_id`, ...); an Anthropic `message_delta`
            without `usage.output_tokens`, an `error` event without `error.type` and
            `error.message`, or `data: [DONE]` in an Anthropic stream; a Gemini chunk whose
            `candidates` is not a list. Where the official client validates with pydantic
            (google-genai, the MCP SDK) a value is judged as its lax mode reads it: `"3"` or
            `3.0` for a count is no mismatch. Unknown fields are always allowed.""",
        clients="""
            Typed clients meet the wrong shape in different places. openai-python builds chunks
            without validation (`construct`), so a wrong type passes through and breaks the
            application's own code later (`text += delta.content` with a number). Helpers that
            accumulate a final message (openai-python's `ChatCompletionStream`,
            anthropic-python's `MessageStream`) read the documented fields and fail when they
            are missing; TypeScript clients trust the declared types and fail in the UI.""",
        example="""
            data: {"id":"chatcmpl-9x","object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":42},"finish_reason":null}]}

            """,
        fix="""
            Build payloads from the protocol's types (the official SDK's models serialise to
            the right shape) rather than by hand, and test the endpoint with
            `assert_stream_ok` against real client code.""",
    ),
    # -- HTTP hygiene ----------------------------------------------------------------------
    rule_doc(
        "content_length_on_stream",
        meaning="""
            A watched event stream was sent with a `Content-Length` header. Checked once, on
            `http.response.start` (and by `collect` and `streamguard probe` on the response
            head).""",
        clients="""
            An event stream's length is not known in advance. With `Content-Length`, clients and
            proxies read exactly that many bytes and consider the response complete: a longer
            stream is cut at that byte (often in the middle of an event, which is then
            discarded), a shorter one leaves the client waiting for bytes that never come.
            Servers also stop using chunked transfer encoding for it.""",
        example="""
            HTTP/1.1 200 OK
            content-type: text/event-stream; charset=utf-8
            content-length: 1432
            """,
        fix="""
            Do not set `Content-Length` on streams. Starlette's `StreamingResponse` does not; a
            proxy that re-streams an upstream response must drop the upstream's
            `Content-Length` (and `Content-Encoding`) headers along with the other hop-by-hop
            headers.""",
    ),
    rule_doc(
        "bad_content_type_charset",
        meaning="""
            The `Content-Type` of the stream declares a `charset` other than `utf-8` (or
            `utf8`, any case). Event streams are always UTF-8; the parameter may be present
            but must say so.""",
        clients="""
            Browsers' `EventSource` and the official SDKs decode UTF-8 whatever the header
            says, but generic HTTP clients believe the header: httpx's `iter_text()` and
            `iter_lines()` decode with the declared charset, so a client built on them turns
            every non-ASCII character into mojibake. The same stream then reads differently in
            different clients.""",
        example="""
            HTTP/1.1 200 OK
            content-type: text/event-stream; charset=iso-8859-1
            """,
        fix="""
            Send `text/event-stream` or `text/event-stream; charset=utf-8` (what Starlette's
            `StreamingResponse(media_type="text/event-stream")` sends).""",
    ),
    rule_doc(
        "compressed_stream",
        meaning="""
            The stream has a `Content-Encoding` other than `identity` (gzip, br, ...). The
            compressed bytes cannot be parsed as SSE, so streamguard passes the body through
            uninspected (the report says `inspected=False`) and counts the response among the
            skipped ones. The middleware sees compression applied inside it (a compressing
            middleware added before streamguard); compression added by an outer layer or a
            proxy is invisible to it, but `collect` and `streamguard probe` see it on the
            client side.""",
        clients="""
            A compressor emits output when its block fills or when it is flushed, so events
            arrive late and in bursts: tokens stall, then appear in batches. Whether Starlette's
            `GZipMiddleware` compresses `text/event-stream` depends on the Starlette version
            (newer ones exclude it by default) and on the middleware order.""",
        example="""
            HTTP/1.1 200 OK
            content-type: text/event-stream
            content-encoding: gzip
            """,
        fix="""
            Exclude `text/event-stream` from compression (in Starlette, a version whose
            `GZipMiddleware` skips it, or no compression on streaming routes; in nginx,
            `gzip off` for the location).""",
    ),
)
