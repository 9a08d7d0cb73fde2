# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the rule catalog: what each rule means, why clients break, how to fix it.

``streamguard.rules`` holds what the engine needs (name, protocols, severity, one-line
summary); this module holds what a person needs when a rule fires: the meaning in full, what
the official clients (openai-python, anthropic-python, google-genai, browsers'
``EventSource``) do with such a stream, an example of an offending frame as it appears on
the wire, and how to fix the sender. ``streamguard rules --format markdown`` renders both
into ``docs/rules.md``.

The client behaviour cited here comes from the SDK sources and captures summarised in the
project's protocol reference; where a client is not named, the statement is about the
protocol's documented guarantee, not about one implementation.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["RULE_DOCS", "RuleDoc", "get_rule_doc"]


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """The documentation of one rule (``streamguard.rules.Rule`` has the short form)."""

    #: The rule's name, as in ``streamguard.rules.RULES``.
    name: str
    #: What the rule checks and when it fires, longer than the rule's summary.
    meaning: str
    #: What real clients do with such a stream: which SDK breaks, and how.
    why_clients_break: str
    #: An offending frame (or the few frames that make the point) as wire text.
    example: str
    #: How to fix the sender.
    fix: str
    #: What to look at in the example; empty when the example speaks for itself.
    example_note: str = ""


_DOCS: dict[str, RuleDoc] = {}


def _prose(text: str) -> str:
    """One paragraph: the source's line breaks and indentation collapse to single spaces."""
    return " ".join(text.split())


def _wire(text: str) -> str:
    """Wire text written as an indented triple-quoted block: strip the common indentation."""
    lines = textwrap.dedent(text).strip().splitlines()
    return "\n".join(line.rstrip() for line in lines)


def _doc(
    name: str,
    *,
    meaning: str,
    clients: str,
    example: str,
    fix: str,
    note: str = "",
) -> None:
    if name in _DOCS:
        raise ValueError(f"rule {name!r} is documented twice")
    _DOCS[name] = RuleDoc(
        name=name,
        meaning=_prose(meaning),
        why_clients_break=_prose(clients),
        example=_wire(example),
        fix=_prose(fix),
        example_note=_prose(note),
    )


# -- Framing: the SSE layer, every protocol --------------------------------------------

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

# -- Lifecycle ---------------------------------------------------------------------------

_doc(
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
)

_doc(
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
)

_doc(
    "event_after_terminal",
    meaning="""
        An event arrived after the protocol's terminal signal, or after an in-band error
        that ended the stream: after an OpenAI Chat error payload only `[DONE]` may follow,
        after a Responses `error` event only `response.failed` (or a gateway `[DONE]`), and
        after an Anthropic `error` event or a Gemini error chunk nothing at all.""",
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
)

_doc(
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
)

_doc(
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
)

_doc(
    "body_not_ended",
    meaning="""
        The terminal signal arrived, but the body was still open `timers.body_end_grace_s`
        seconds later (default 5). Reported once, while the stream is still open (the
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
)

_doc(
    "stalled",
    meaning="""
        No body byte was sent for longer than `timers.idle_limit_s` (default 60 s).
        Keepalive comments count as bytes, since they keep proxies alive. Reported once per
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
)

_doc(
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
)

_doc(
    "invalid_json",
    meaning="""
        An event's data is not the JSON the protocol requires: not JSON at all, JSON that is
        not an object (a string, a list, a number), or JSON past the parser's limits (very
        deep nesting, a number too large). It applies to every protocol with JSON payloads,
        and to plain SSE on a route that opts in with `{"protocol": "sse", "json": true}`
        (there any JSON value counts, and the `[DONE]` sentinel is allowed). OpenAI's `[DONE]` sentinel is recognised before parsing, and an
        Anthropic `ping` with unparsable data is ignored, as the SDK skips pings by name.""",
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
)

_doc(
    "schema_mismatch",
    meaning="""
        An event's JSON does not have the protocol's documented shape: a required field
        missing or null, or a field of the wrong JSON type. Examples: an OpenAI chunk whose
        `object` is not `chat.completion.chunk`, a `delta.content` that is a number, a chunk
        without `choices` and without usage; a Responses event without the fields its type
        requires (`response`, `output_index`, `item_id`, ...); an Anthropic `message_delta`
        without `usage.output_tokens`, an `error` event without `error.type` and
        `error.message`, or `data: [DONE]` in an Anthropic stream; a Gemini chunk whose
        `candidates` is not a list. Only the fields the rules read are checked, and unknown
        fields are always allowed.""",
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
)

# -- HTTP hygiene ------------------------------------------------------------------------

_doc(
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
)

_doc(
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
)

_doc(
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
)

# -- Shared by several LLM protocols -----------------------------------------------------

_doc(
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
)

_doc(
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
)

# -- OpenAI Chat Completions ---------------------------------------------------------------

_CHUNK = '"object":"chat.completion.chunk","created":1727346171,"model":"gpt-4o"'

_doc(
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
)

_doc(
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
)

_doc(
    "choice_out_of_order",
    meaning="""
        A choice index appeared for the first time after a higher one (choice 1 before
        choice 0). Interleaving the choices afterwards is fine; only the order of first
        appearance matters.""",
    clients="""
        openai-python's stream helper (`ChatCompletionStream`) looks a choice up by its
        index in the list it has built and appends a new one when it is missing, so when
        choice 1 comes first it is stored at position 0, and the deltas of the two choices
        are then mixed up.""",
    example=f"""
        data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":1,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}

        data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}

        """,
    fix="""
        Send each choice's first chunk in index order (0, 1, 2, ...) before interleaving
        them.""",
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
    "usage_nonstandard",
    meaning="""
        Usage placed the way some compatible providers do instead of on a chunk of its own
        with `choices: []`: on a chunk that also carries choices (vLLM's continuous usage,
        usage on the finish chunk), or on a chunk whose `choices` is null or absent.
        Reported once per stream.""",
    clients="""
        Clients that read usage from the empty-choices chunk, as OpenAI sends it, miss it;
        clients that iterate `chunk.choices` fail on a null `choices`.""",
    example=f"""
        data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":91}}}}

        """,
    fix="Send usage on a separate chunk with `choices: []`, right before `[DONE]`.",
)

_doc(
    "usage_total_mismatch",
    meaning="`usage.total_tokens` differs from `prompt_tokens + completion_tokens`.",
    clients="""
        Clients and dashboards that bill on `total_tokens` and those that add the parts
        disagree; one of the counts is wrong.""",
    example=f"""
        data: {{"id":"chatcmpl-9x",{_CHUNK},"choices":[],"usage":{{"prompt_tokens":79,"completion_tokens":12,"total_tokens":80}}}}

        """,
    fix="Compute `total_tokens` as the sum of the two counts.",
)

_doc(
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
)

# -- OpenAI Responses ----------------------------------------------------------------------

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
    "response_id_changed",
    meaning="`response.id` differs between lifecycle events of one stream.",
    clients="""
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
)

_doc(
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
)

# -- Anthropic Messages --------------------------------------------------------------------

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

_doc(
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
)

# -- Gemini --------------------------------------------------------------------------------

_doc(
    "sdk_incompatible_framing",
    meaning="""
        A Gemini stream uses framing other than one `data: <json>` line and a blank line
        per event: an SSE comment (a keepalive), an `event:`, `id:` or `retry:` line,
        `data:` without the space, data split over several `data:` lines, or bytes such as
        a comment or a BOM before the first event. All of this is valid SSE, so it is a
        warning. Reported once per stream.""",
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
)

_doc(
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
)

RULE_DOCS: Mapping[str, RuleDoc] = MappingProxyType(_DOCS)
"""Every rule's documentation, by rule name, in catalog-section order."""


def get_rule_doc(name: str) -> RuleDoc:
    """The documentation of rule ``name``; a ``KeyError`` names an undocumented rule."""
    try:
        return RULE_DOCS[name]
    except KeyError:
        raise KeyError(f"no documentation for streamguard rule {name!r}") from None
