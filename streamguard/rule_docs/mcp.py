# ruff: noqa: E501 -- the wire examples are single long lines, as they are on the wire
"""The long form of the MCP Streamable HTTP rules (``protocols/mcp.py``).

The client behaviour quoted is the official Python SDK, ``mcp`` 2.3.0
(``StreamableHTTPTransport``: ``_handle_sse_response``, ``_handle_sse_event``), and the
TypeScript SDK's ``StreamableHTTPClientTransport`` and ``Protocol``; the wire rules are the
specification's transport page (revisions 2025-03-26, 2025-06-18 and 2025-11-25). Each
example is a whole stream; the request it answers is named in its note. MCP's terminal
signal is the response to the POST's last request: the shared lifecycle rules
(``missing_terminal``, ``duplicate_terminal``, ``event_after_terminal``) are documented in
``common``, and ``docs/mcp.md`` says what they mean for MCP.
"""

from __future__ import annotations

from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["DOCS"]

#: The documentation of each rule, in catalog order.
DOCS: tuple[RuleDoc, ...] = (
    rule_doc(
        "invalid_jsonrpc",
        meaning="""
            A message in an event's data is not a JSON-RPC 2.0 message as MCP defines it:
            `jsonrpc` missing or other than the string "2.0"; a request or notification whose
            `method` is not a string or whose `params` is not an object; a response with both
            `result` and `error`, or neither; a `result` that is not an object; an `error`
            that is not an object with an integer `code` and a string `message`; an id that is
            not a string or a number (or `null`, for an error that answers nothing). The data
            may also be a 2025-03-26 batch array; an empty array, or an item that is not an
            object, is invalid too, and within one batch each rule is reported once with a
            count. The POST's own requests are held to the same ids: a request whose `id` is
            `true`, an object, an array or `null` (which MCP forbids) is reported once per
            stream, before the body's findings, and is owed no answer; the other requests of
            its batch still are.""",
        clients="""
            Both official clients validate every message against the JSON-RPC schema before
            they look at it. The Python SDK logs "Error parsing SSE message" and, on a POST's
            stream, fails the call with a parse error in place of the answer; the TypeScript
            SDK reports the error and drops the message, so a call whose response was the
            invalid message waits for its request timeout. A response that is invalid only
            in another field is still counted as the answer to its id here, so one mistake
            makes one finding.""",
        example="""
            event: message
            data: {"jsonrpc":"2.0","id":7,"error":{"code":"-32602","message":"Invalid params"}}
            """,
        note="The request was `tools/call` with id 7; the error's `code` is a string, not an integer.",
        fix="""
            Build messages with the SDK's types (`JSONRPCResponse`, `JSONRPCError`) or a
            JSON-RPC library, and serialise them as they are: error codes are integers
            (-32602, not "-32602"), a result is an object (wrap a bare value, as tools do with
            `content`), and a response carries `result` or `error`, never both. Refuse a
            request whose id is no string or number with HTTP 400 and an Invalid Request
            error (-32600, `id` null), as the Python SDK does, rather than open a stream.""",
    ),
    rule_doc(
        "duplicate_response",
        meaning="""
            A request was answered a second time while its stream still owed other answers: in
            a 2025-03-26 batch POST, before the answer to the batch's last request, or within
            one batch event; or on a stream whose requests are not known (a POST whose body was
            not read, a GET that resumes one). The usual case, one request per POST answered
            twice, is the terminal signal sent again: `duplicate_terminal`. Ids compare by JSON
            type and value, so the string "7" and the number 7 are different ids.""",
        clients="""
            The first response settles the call; the second finds nothing waiting for it. The
            Python SDK stops reading a POST's stream at the first response, so it never sees
            the second (nor, for a batch, the answers after the first). The TypeScript SDK
            reads on and reports "Received a response for an unknown message ID" through its
            error handler. A second, different answer is a server bug the client silently
            ignores.""",
        example="""
            data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"one"}],"isError":false}}

            data: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"one"}],"isError":false}}

            data: {"jsonrpc":"2.0","id":2,"result":{"tools":[]}}
            """,
        note="The POST was a batch of two requests, `tools/call` with id 1 and `tools/list` with id 2; request 1 is answered twice before request 2.",
        fix="""
            Send exactly one response per request: a handler that both returns a result and
            reports an error, or a retry wrapper that re-sends the response, answers twice.
            End the stream right after the last response.""",
    ),
    rule_doc(
        "unrequested_response",
        meaning="""
            A response carries an id that no request of the POST carried: a response to an
            earlier POST sent on this one's stream, or an id the server rewrote. Ids compare by
            JSON type and value, as JSON-RPC requires the response's id to be the request's:
            the string "7" does not answer the number 7. Error responses without an id (or
            with `id: null`, JSON-RPC's answer to a request that could not be read) answer
            nothing and are not reported.""",
        clients="""
            The Python SDK takes the first response on a POST's stream as that POST's answer,
            whatever its id (it overwrites the id with the request's), and stops reading: the
            call settles with a response meant for another request, and the real answer is
            lost. The TypeScript SDK matches responses by id, reports "Received a response for
            an unknown message ID" and keeps waiting for the real answer until its request
            timeout. (It converts ids with `Number()`, so there the string "7" passes for the
            number 7; clients in other languages compare ids exactly.)""",
        example="""
            event: message
            data: {"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}
            """,
        note="The request was `tools/call` with id 7; the response answers id 6, an earlier request.",
        fix="""
            Route each response to the stream of the POST that carried its request, and echo
            the request's id exactly as it came, with its JSON type: keep it as the SDKs type
            it (`str | int`), never `str(id)`.""",
    ),
    rule_doc(
        "response_on_standalone_stream",
        meaning="""
            A JSON-RPC response arrived on a stream opened by a GET, the standalone stream a
            server uses for its own requests and notifications. The specification says the
            server must not send a response there unless the GET resumes an earlier stream
            (a `Last-Event-ID` header), so the check applies only to a GET without one. An
            error response without an id may go there: it answers no request, and the Python
            SDK routes such errors to the GET stream. A stream that starts with the legacy
            HTTP+SSE transport's `endpoint` event carries responses by design and is not
            judged.""",
        clients="""
            The response is not where the client waits for it: the POST that asked reads its
            own stream, which then ends without an answer (the Python SDK fails the call as
            abandoned, the TypeScript SDK waits for its timeout), while the response on the GET
            stream settles the call only if it happens to arrive first, and is otherwise
            reported as a response to an unknown id.""",
        example="""
            event: message
            data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}

            event: message
            data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}
            """,
        note="The stream answers a GET without `Last-Event-ID`.",
        fix="""
            Send each response on the stream of the POST that carried its request (or as its
            JSON body). Only server requests and notifications that belong to no request go to
            the GET stream.""",
    ),
    rule_doc(
        "duplicate_event_id",
        meaning="""
            The SSE event id in effect came back to a value an earlier event of the stream had,
            after other ids in between. Event ids are the cursor a client resumes from with
            `Last-Event-ID`, and the specification requires them to be unique across all
            streams of a session; this check sees one stream. An id that stays the same from
            one event to the next is the same cursor (SSE carries the last id over to events
            without an `id:` line), so a repeat on consecutive events cannot be told apart and
            is not reported. Reported once per stream; a warning, because it harms only a
            client that resumes.""",
        clients="""
            A client that lost the connection resumes with the last id it saw, and the server
            replays what followed that id. With the id used twice, the server's event store
            cannot tell which event was meant: it replays from the first one (the client sees
            messages twice, a response included) or finds the wrong stream, and the resumed
            call gets someone else's answer or none.""",
        example="""
            id: 1
            data:

            id: 2
            event: message
            data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"total":2}}

            id: 1
            event: message
            data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}
            """,
        note="The request was `tools/call` with id 7; the first event is a priming event, and its id comes back on the response.",
        fix="""
            Mint event ids from one counter (or store) for the whole session, as the SDKs'
            event stores do: never restart numbering per stream or per process without a
            stream prefix.""",
    ),
)
