"""Privacy: with the default configuration no log line and no metric carries request or stream data.

Canaries (all containing ``conftest.CANARY_MARKER``) are planted in the request body, the
headers, the query string, the path, an API key header and, per protocol, in message
content, tool arguments and in-band error messages. Each test checks its own log lines and
metric samples; ``conftest.pytest_sessionfinish`` also fails the whole run if any log
event of any test carries the marker.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import capture_logs

from streamguard import StreamGuardMiddleware, StreamReport, check_stream

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .conftest import CANARY_MARKER
from .helpers import (
    ANTHROPIC_DELTA,
    ANTHROPIC_START,
    ANTHROPIC_STOP,
    anthropic_stream,
    chat_call,
    chat_choice,
    chat_chunk,
    frame,
    gemini_chunk,
    gemini_text,
)
from .sse_fixtures import protocol_fixtures, realworld_fixtures

CANARY = f"{CANARY_MARKER}-5e1f"
CONTENT = f"{CANARY_MARKER}-content"
ARGUMENTS = json.dumps({"secret": f"{CANARY_MARKER}-arguments"})
ERROR = f"{CANARY_MARKER}-error-message"

PATHS = {
    "openai_chat": f"/t/{CANARY}/v1/chat/completions",
    "openai_responses": f"/t/{CANARY}/v1/responses",
    "anthropic": f"/t/{CANARY}/v1/messages",
    "gemini": f"/t/{CANARY}/v1beta/models/g:streamGenerateContent",
}


def _chat(i: int = 0, **delta: Any) -> dict[str, Any]:
    reason = delta.pop("finish_reason", None)
    choice = {"index": i, "delta": delta, "finish_reason": reason}
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [choice]}  # fmt: skip


def openai_chat(ending: str) -> list[bytes]:
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": ARGUMENTS}}  # fmt: skip
    frames = [
        frame(_chat(role="assistant", content="")),
        frame(_chat(content=CONTENT)),
        frame(_chat(tool_calls=[call])),
    ]
    if ending == "error":
        return [*frames, frame({"error": {"message": ERROR, "type": "server_error"}})]
    frames.append(frame(_chat(finish_reason="tool_calls")))
    if ending == "broken":  # content after the finish, then no [DONE]
        return [*frames, frame(_chat(content=CONTENT)), frame(_chat(content=CONTENT))]
    return [*frames, frame("[DONE]")]


def openai_responses(ending: str) -> list[bytes]:
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    def response(status: str, **fields: Any) -> dict[str, Any]:
        return {"id": "resp_1", "status": status, "instructions": CONTENT, **fields}

    emit("response.created", response=response("in_progress"))
    item = {"id": "msg_1", "type": "message", "status": "in_progress"}
    emit("response.output_item.added", output_index=0, item=item)
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    emit("response.content_part.added", part={"type": "output_text", "text": ""}, **where)
    emit("response.output_text.delta", delta=CONTENT, **where)
    emit("response.output_text.done", text=CONTENT, **where)
    emit("response.content_part.done", part={"type": "output_text", "text": CONTENT}, **where)
    emit("response.output_item.done", output_index=0, item={**item, "status": "completed"})
    call = {"id": "fc_1", "type": "function_call", "status": "in_progress"}
    emit("response.output_item.added", output_index=1, item=call)
    fc = {"item_id": "fc_1", "output_index": 1}
    emit("response.function_call_arguments.delta", delta=ARGUMENTS, **fc)
    emit("response.function_call_arguments.done", arguments=ARGUMENTS, **fc)
    emit("response.output_item.done", output_index=1, item={**call, "status": "completed"})
    if ending == "error":
        emit("error", code="server_error", message=ERROR, param=None)
        emit("response.failed", response=response("failed", error={"message": ERROR}))
    elif ending == "broken":  # a gap in the sequence, an item never closed, no terminal
        events.pop(2)
        events.append({**events[1], "sequence_number": 99})
    else:
        emit("response.completed", response=response("completed", usage={"total_tokens": 1}))
    return [frame(event, event["type"]) for event in events]


def anthropic(ending: str) -> list[bytes]:
    frames: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        frames.append(frame({"type": kind, **fields}, kind))

    message = {"id": "m1", "type": "message", "role": "assistant", "content": [], "model": "c",
               "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    emit("message_start", message=message)
    emit("content_block_start", index=0, content_block={"type": "text", "text": ""})
    emit("content_block_delta", index=0, delta={"type": "text_delta", "text": CONTENT})
    emit("content_block_stop", index=0)
    tool = {"type": "tool_use", "id": "tu_1", "name": "f", "input": {}}
    emit("content_block_start", index=1, content_block=tool)
    arguments = {"type": "input_json_delta", "partial_json": ARGUMENTS}
    emit("content_block_delta", index=1, delta=arguments)
    if ending == "error":
        emit("error", error={"type": "overloaded_error", "message": ERROR})
        return frames
    if ending == "broken":  # the open block, a delta into a stopped block, no message_stop
        emit("content_block_delta", index=0, delta={"type": "text_delta", "text": CONTENT})
        emit("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 0})
        return frames
    emit("content_block_stop", index=1)
    emit("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 5})
    emit("message_stop")
    return frames


def gemini(ending: str) -> list[bytes]:
    def chunk(*parts: dict[str, Any], **candidate: Any) -> bytes:
        content = {"role": "model", "parts": list(parts)}
        return frame({"candidates": [{"content": content, **candidate}], "modelVersion": "g"})

    frames = [
        chunk({"text": CONTENT}),
        chunk({"functionCall": {"name": "f", "args": json.loads(ARGUMENTS)}}),
    ]
    if ending == "error":
        return [*frames, frame({"error": {"code": 503, "message": ERROR, "status": "UNAVAILABLE"}})]
    if ending == "broken":  # a content-bearing finish, then more content, never finished
        return [*frames, chunk({"text": CONTENT}, finishReason="STOP"), chunk({"text": CONTENT})]
    return [*frames, chunk({"text": CONTENT}, finishReason="STOP")]


STREAMS = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
}
REQUEST = json.dumps(
    {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": CANARY}],
        "stream_options": {"include_usage": False},
        "api_key": CANARY,
        "metadata": {"user_id": CANARY},
    }
).encode()


def watch(frames: list[bytes], path: str) -> tuple[list[dict[str, Any]], str, StreamReport]:
    """Stream ``frames`` through the middleware under the default configuration."""
    registry = CollectorRegistry()
    steps = [
        "receive",
        sse_start((b"x-request-id", CANARY.encode()), (b"set-cookie", CANARY.encode())),
        *(body(part) for part in frames),
        body(b"", more=False),
    ]
    reports: list[StreamReport] = []
    middleware = StreamGuardMiddleware(  # every summary logged: a clean stream's too
        ScriptedApp(steps), metrics=registry, on_report=reports.append, logs={"summaries": "all"}
    )
    scope = http_scope(
        method="POST",
        path=path,
        raw_path=path.encode(),
        query_string=f"key={CANARY}&alt=sse".encode(),
        headers=[
            (b"authorization", f"Bearer {CANARY}".encode()),
            (b"x-api-key", CANARY.encode()),
            (b"x-goog-api-key", CANARY.encode()),
            (b"cookie", f"session={CANARY}".encode()),
            (b"user-agent", CANARY.encode()),
        ],
    )
    recorder = Recorder(incoming=[{"type": "http.request", "body": REQUEST, "more_body": False}])
    with capture_logs() as logs:
        _, raised = run(middleware, scope, recorder)
    assert raised is None
    [report] = reports
    return logs, generate_latest(registry).decode(), report


@pytest.mark.parametrize("ending", ["clean", "error", "broken"])
@pytest.mark.parametrize("protocol", sorted(STREAMS))
def test_no_request_or_stream_data_in_logs_or_metrics(protocol: str, ending: str) -> None:
    """Canaries in the request and in the stream reach neither the logs nor the metrics."""
    logs, metrics, report = watch(STREAMS[protocol](ending), PATHS[protocol])
    assert report.protocol == protocol
    assert report.malformed is (ending == "broken")
    assert logs, "the stream must have been logged"
    if ending == "broken":
        assert any(entry["event"] == "stream_violation" for entry in logs)
    assert CANARY_MARKER not in repr(logs)
    assert "streamguard_streams_total" in metrics
    assert CANARY_MARKER not in metrics


PART = {"item_id": "i", "output_index": 0, "content_index": 0}
TOOL_CALL = {"index": 0, "id": "c", "function": {"name": "f", "arguments": CANARY}}

#: Streams whose findings quote the offending payload in their message.
QUOTING = {
    "openai_chat:invalid_json": ("openai_chat", [frame('{"content": "' + CANARY + '"')]),
    "openai_chat:tool_call_arguments_invalid": (
        "openai_chat",
        [
            frame(_chat(role="assistant", content=None)),
            frame(_chat(tool_calls=[TOOL_CALL])),
            frame(_chat(finish_reason="tool_calls")),
            frame("[DONE]"),
        ],
    ),
    "openai_responses:done_text_mismatch": (
        "openai_responses",
        [
            frame(
                {"type": "response.created", "sequence_number": 0, "response": {"status": "queued"}}
            ),
            frame(
                {
                    "type": "response.output_item.added",
                    "sequence_number": 1,
                    "output_index": 0,
                    "item": {"id": "i", "type": "message"},
                }
            ),
            frame(
                {"type": "response.content_part.added", "sequence_number": 2, **PART, "part": {}}
            ),
            frame(
                {"type": "response.output_text.delta", "sequence_number": 3, **PART, "delta": "x"}
            ),
            frame(
                {"type": "response.output_text.done", "sequence_number": 4, **PART, "text": CANARY}
            ),
        ],
    ),
    "anthropic:invalid_json": ("anthropic", [frame(CANARY, "message_start")]),
    "gemini:invalid_json": ("gemini", [frame(CANARY)]),
}


@pytest.mark.parametrize("case", sorted(QUOTING))
def test_findings_that_quote_the_payload_leak_no_content(case: str) -> None:
    """A finding about a malformed payload does not copy the payload into the log."""
    protocol, frames = QUOTING[case]
    logs, metrics, report = watch(frames, PATHS[protocol])
    assert report.malformed or report.findings
    assert CANARY_MARKER not in metrics
    assert CANARY_MARKER not in repr(logs)


# -- each protocol's messages, canaries where a message could quote the wire ------------------

CHAT_CANARY = f"{CANARY_MARKER}-chat"
RESPONSES_CANARY = f"{CANARY_MARKER}-responses"
ANTHROPIC_CANARY = f"{CANARY_MARKER}-anthropic"
GEMINI_CANARY = f"{CANARY_MARKER}-gemini"
#: A number no message may print in full.
HUGE = 10**40


@dataclass(frozen=True)
class Canaried:
    """Streams of one protocol that put canaries where its messages could quote the wire."""

    protocol: str
    bodies: tuple[bytes, ...]
    #: Rules reported by at least one of the bodies.
    rules: frozenset[str]
    request: dict[str, Any] | None = None
    #: Besides the canary marker, what no message may contain (a huge number's digits).
    forbidden: tuple[str, ...] = ()


def _chat_canaried() -> Canaried:
    """Ids, object values, finish reasons, event names and indices of a chat stream."""
    chunk, choice, call = chat_chunk, chat_choice, chat_call
    body = (
        f"event: {CHAT_CANARY}\n".encode()
        + chunk(choices=[choice(0, role="assistant")])
        + chunk(id=CHAT_CANARY, created=10**30)  # inconsistent_id
        + chunk(object=CHAT_CANARY)  # schema_mismatch on object
        + chunk(choices=[choice(0, tool_calls=[call(CHAT_CANARY, "{}")])])  # index invalid
        + chunk(choices=[choice(0, role=CHAT_CANARY)])  # schema_mismatch, role_repeated
        + chunk(choices=[choice(0, finish_reason=CHAT_CANARY)])  # unknown_finish_reason
        + chunk(choices=[choice(0, content="x", finish_reason=CHAT_CANARY + "2")])
        + chunk(choices=[choice(10**30, content="x")])  # choice_index_invalid
        + chunk(
            choices=[], usage={"prompt_tokens": HUGE, "completion_tokens": 1, "total_tokens": 1}
        )
        + f'data: {{"error": {{"message": 5, "code": "{CHAT_CANARY}"}}}}\n\n'.encode()
    )
    rules = {
        "unexpected_event_field",
        "inconsistent_id",
        "schema_mismatch",
        "tool_call_index_invalid",
        "role_repeated",
        "unknown_finish_reason",
        "content_after_finish",
        "multiple_finish_reason",
        "choice_index_invalid",
        "usage_total_mismatch",
    }
    return Canaried("openai_chat", (body,), frozenset(rules), {"n": 1}, ("0" * 30,))


def _responses_canaried() -> Canaried:
    """Event names and types, ids, statuses, item types, indices and error fields."""
    secret = RESPONSES_CANARY

    def raw(kind: str, sequence: object, name: str | None = None, **fields: object) -> bytes:
        return frame({"type": kind, "sequence_number": sequence, **fields}, name or kind)

    def response(status: str, **fields: object) -> dict[str, object]:
        return {"id": f"resp_{secret}", "status": status, **fields}

    big = int("7" * 40)
    item = {"id": f"fc_{secret}", "type": secret, "status": secret}
    bodies = (
        raw(f"response.{secret}", big, response=response(secret))
        + raw("response.created", 1, response=response(secret))
        + raw("response.created", 2, response={"id": f"other_{secret}", "status": secret})
        + raw("response.output_item.added", 3, output_index=big, item=item)
        + raw("response.output_item.added", 4, output_index=0, item=item)
        + raw("response.output_text.delta", 5, secret, item_id=secret, output_index=0)
        + raw("response.output_text.delta", 6, item_id=secret, content_index=big, delta="x")
        + raw("response.output_item.done", 7, output_index=0, item=item)
        + raw("response.output_item.done", 8, output_index=0, item=item)
        + raw("response.completed", 9, response=response(secret))
        + raw(f"response.{secret}", 10, f"name.{secret}")
        + raw("response.completed", 11, response=response(secret)),
        raw("response.created", 0, response=response("in_progress"))
        + raw("error", 1, code=secret, message=secret, param=secret)
        + raw(f"response.{secret}", 2, f"name.{secret}")
        + raw("response.failed", 3, response=response(secret, error={"code": 5}))
        + raw(f"response.{secret}", 4),
        raw("response.created", 0, response=response("in_progress"))
        + raw("response.output_item.added", 1, output_index=0, item=item)
        + raw("response.incomplete", 2, response=response(secret)),
    )
    rules = {
        "missing_response_created",
        "duplicate_response_created",
        "sequence_gap",
        "status_mismatch",
        "response_id_changed",
        "item_out_of_order",
        "item_status_unexpected",
        "item_not_open",
        "item_not_closed",
        "event_type_mismatch",
        "event_after_terminal",
        "duplicate_terminal",
        "schema_mismatch",
    }
    return Canaried("openai_responses", bodies, frozenset(rules), forbidden=("7777777",))


def _anthropic(
    rules: set[str], *events: tuple[str, str], forbidden: tuple[str, ...] = ()
) -> Canaried:
    return Canaried("anthropic", (anthropic_stream(*events),), frozenset(rules), None, forbidden)


def _gemini(rules: set[str], body: bytes, forbidden: tuple[str, ...] = ()) -> Canaried:
    return Canaried("gemini", (body,), frozenset(rules), None, forbidden)


_A = ANTHROPIC_CANARY
_G = GEMINI_CANARY
CANARIED: dict[str, Canaried] = {
    "openai_chat": _chat_canaried(),
    "openai_responses": _responses_canaried(),
    # An event name, JSON type, block type or stop reason: only its size and hash.
    "anthropic: unknown event name": _anthropic(
        {"unknown_event_type"}, ANTHROPIC_START, (_A, f'{{"type":"{_A}"}}')
    ),
    "anthropic: name differs from type": _anthropic(
        {"event_name_mismatch"}, ANTHROPIC_START, ("content_block_delta", f'{{"type":"{_A}"}}')
    ),
    "anthropic: unnamed event": Canaried(
        "anthropic",
        (anthropic_stream(ANTHROPIC_START) + f'data: {{"type":"{_A}"}}\n\n'.encode(),),
        frozenset({"event_name_mismatch"}),
    ),
    "anthropic: type missing, odd name": _anthropic(
        {"schema_mismatch"}, ANTHROPIC_START, (_A, "{}")
    ),
    "anthropic: not JSON, odd name": _anthropic({"invalid_json"}, ANTHROPIC_START, (_A, _A)),
    "anthropic: not an object, odd name": _anthropic(
        {"invalid_json"}, ANTHROPIC_START, (_A, "[1]")
    ),
    "anthropic: unknown stop reason": _anthropic(
        {"unknown_stop_reason"},
        ANTHROPIC_START,
        (
            "message_delta",
            f'{{"type":"message_delta","delta":{{"stop_reason":"{_A}"}},'
            '"usage":{"output_tokens":2}}',
        ),
        ANTHROPIC_STOP,
    ),
    "anthropic: prepopulated stop reason": _anthropic(
        {"prepopulated_message_start"},
        (
            "message_start",
            '{"type":"message_start","message":{"id":"m","type":"message","role":'
            '"assistant","model":"c","content":[],"stop_reason":"' + _A + '",'
            '"usage":{"input_tokens":1,"output_tokens":1}}}',
        ),
        ANTHROPIC_STOP,
    ),
    "anthropic: block type of an unstopped block": _anthropic(
        {"block_not_stopped"},
        ANTHROPIC_START,
        (
            "content_block_start",
            '{"type":"content_block_start","index":0,"content_block":{"type":"' + _A + '"}}',
        ),
        ANTHROPIC_DELTA,
        ANTHROPIC_STOP,
    ),
    # A block index or token count of forty digits: named by its size, not written out.
    "anthropic: huge block index and token count": _anthropic(
        {"block_index_out_of_order", "usage_decreased"},
        ANTHROPIC_START,
        (
            "content_block_start",
            f'{{"type":"content_block_start","index":{HUGE},'
            '"content_block":{"type":"text","text":""}}',
        ),
        (
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},'
            f'"usage":{{"output_tokens":{HUGE}}}}}',
        ),
        (
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}',
        ),
        ANTHROPIC_STOP,
        forbidden=(str(HUGE),),
    ),
    # An event name, an index, a finishReason or an error field.
    "gemini: event name": _gemini(
        {"sdk_incompatible_framing"}, f"event: {_G}\ndata: {{}}\n\n".encode()
    ),
    "gemini: candidate index": _gemini({"schema_mismatch"}, gemini_chunk(gemini_text("x", _G))),
    "gemini: finish reason": _gemini(set(), gemini_chunk({"index": 0, "finishReason": _G})),
    "gemini: not JSON": _gemini({"invalid_json"}, f"data: {{'text': '{_G}'}}\n\n".encode()),
    "gemini: error code": _gemini(
        {"schema_mismatch"}, f'data: {{"error": {{"code": "{_G}"}}}}\n\n'.encode()
    ),
    # Usage counts of forty digits: named by their size, not written out.
    "gemini: huge usage counts": _gemini(
        {"usage_decreased"},
        gemini_chunk(gemini_text("a"), usageMetadata={"totalTokenCount": HUGE})
        + gemini_chunk(
            gemini_text("b", finishReason="STOP"), usageMetadata={"totalTokenCount": HUGE - 1}
        ),
        forbidden=(str(HUGE - 1),),
    ),
}


@pytest.mark.parametrize("case", sorted(CANARIED))
def test_finding_messages_quote_no_wire_value(case: str) -> None:
    """Names, ids, types, reasons, indices and error fields from the wire never reach a
    finding message of their protocol's rules: only a size, a hash or a documented token."""
    canaried = CANARIED[case]
    fired: set[str] = set()
    messages: list[str] = []
    for stream in canaried.bodies:
        report = check_stream(stream, protocol=canaried.protocol, request=canaried.request)
        fired |= set(report.rules())
        messages += [finding.message for finding in report.findings]
    assert canaried.rules <= fired, canaried.rules - fired
    leaks = [m for m in messages if any(s in m for s in (CANARY_MARKER, *canaried.forbidden))]
    assert leaks == []


# -- every rule's message, canaries in every field --------------------------------------------


def _canaried(value: Any, key: str | None, only: str | None) -> Any:
    """``value`` with every string (of ``only``'s key, or all) replaced by a canary."""
    if isinstance(value, dict):
        return {k: _canaried(v, k, only) for k, v in value.items()}
    if isinstance(value, list):
        return [_canaried(v, key, only) for v in value]
    if isinstance(value, str) and (only is None or key == only):
        return f"{CANARY_MARKER}-{key}-{'x' * 50}"
    if isinstance(value, int) and not isinstance(value, bool) and (only is None or key == only):
        return 10**40  # a number no message may print in full
    return value


def _plant(body: bytes, only: str | None) -> bytes:
    """Canaries in JSON values, event names and ids of each event of ``body``."""
    out: list[bytes] = []
    for line in body.split(b"\n"):
        field, colon, value = line.partition(b":")
        if colon and field == b"data":
            try:
                payload = json.loads(value)
            except ValueError:
                out.append(b"data: " + CANARY_MARKER.encode() + b"-data " + value)
                continue
            out.append(b"data: " + json.dumps(_canaried(payload, None, only)).encode())
        elif colon and field in (b"event", b"id") and only is None:
            out.append(field + b": " + CANARY_MARKER.encode() + b"-" + field)
        elif colon and not field and only is None:
            out.append(line)  # a comment: no rule quotes it
        elif colon and field not in (b"data", b"event", b"id", b"retry") and only is None:
            out.append(CANARY_MARKER.encode() + b"-field: x")
        else:
            out.append(line)
    return b"\n".join(out)


def _corpus() -> list[tuple[str, str, bytes]]:
    return [
        (f"{fixture.path.parent.name}/{fixture.name}", fixture.protocol, fixture.body)
        for fixture in protocol_fixtures() + realworld_fixtures()
    ]


CORPUS = _corpus()


def test_no_rule_message_carries_a_wire_value() -> None:
    """Every fixture, with canaries in all its values or in one key's at a time: no leak."""
    leaks: list[str] = []
    fired: set[str] = set()
    for name, protocol, stream in CORPUS:
        keys: set[str] = set()
        for line in stream.split(b"\n"):
            if line.startswith(b"data:"):
                with contextlib.suppress(ValueError):
                    keys.update(_keys(json.loads(line[5:])))
        for only in [None, *sorted(keys)]:
            report = check_stream(_plant(stream, only), protocol=protocol)
            for finding in report.findings:
                fired.add(finding.rule)
                if CANARY_MARKER in finding.message or "0" * 40 in finding.message:
                    leaks.append(f"{name} ({only or 'all'}): {finding.rule}: {finding.message}")
    assert leaks == []
    assert len(fired) >= 40, sorted(fired)  # most of the catalog was exercised


def test_header_values_are_not_quoted() -> None:
    """Charset, Content-Length and Content-Encoding values from the head are sizes only."""
    from streamguard import StreamMonitor

    monitor = StreamMonitor("sse")
    found = monitor.check_head(
        f"text/event-stream; charset={CANARY}", f"9{CANARY}", f"{CANARY}-encoding"
    )
    assert sorted(f.rule for f in found) == [
        "bad_content_type_charset",
        "compressed_stream",
        "content_length_on_stream",
    ]
    assert all(CANARY_MARKER not in finding.message for finding in found)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)
