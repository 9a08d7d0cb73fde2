"""MCP results and params checked by the method they answer (issue 27).

A response whose id answers a request of the POST has its ``result`` checked against the
shape the mcp 2.3 client's models enforce for that request's method (the request facts keep
the method per id); a server-to-client request's and a notification's ``params`` against
their method's. Each shape has a broken case that must be a ``schema_mismatch`` and a
legitimate look-alike that stays clean, and the last test holds the shapes to the client
itself: every value of the healthy fixtures retyped or removed, the SDK fails exactly when
streamguard reports it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import streamguard
from streamguard import StreamReport, check_stream
from streamguard.protocols import mcp
from streamguard.protocols._fields import MAX_SHAPE_ITEMS, MAX_SHAPE_OBJECTS
from streamguard.protocols._jsonrpc import JSONRPC_METHODS, MAX_REQUEST_IDS, OTHER_METHOD
from streamguard.request import RequestFacts, request_facts

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start
from .oracle.clients import available, python_verdicts
from .oracle.mutants import json_paths
from .sse_fixtures import fixtures


def sse(*messages: Any) -> bytes:
    return b"".join(b"data: " + json.dumps(m).encode() + b"\n\n" for m in messages)


def request(method: str, id_: Any = 7, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(value: Any, id_: Any = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def notification(method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def checked(method: str, value: Any) -> StreamReport:
    """The report of a stream that answers a ``method`` request with ``value``."""
    return check_stream(sse(result(value)), protocol="mcp", request=request(method))


def mismatches(report: StreamReport) -> list[str]:
    return [f.message for f in report.findings if f.rule == "schema_mismatch"]


# -- results, by method ------------------------------------------------------------------------

TEXT = {"type": "text", "text": "It is 18 degrees in Paris."}
TOOL = {"name": "get_weather", "inputSchema": {"type": "object"}}
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "ExampleServer", "version": "1.0.0"},
}

#: method -> (a healthy result, (a broken one, the path its finding must name), ...).
RESULTS: dict[str, tuple[Any, tuple[tuple[Any, str], ...]]] = {
    "initialize": (
        INIT,
        (
            ({**INIT, "protocolVersion": None}, "`result.protocolVersion` is null"),
            ({**INIT, "capabilities": []}, "`result.capabilities` is a list"),
            ({**INIT, "serverInfo": {"name": "s"}}, "`result.serverInfo.version` is missing"),
            ({**INIT, "serverInfo": {"name": 1, "version": "1"}}, "`result.serverInfo.name`"),
            (
                {**INIT, "capabilities": {"tools": {"listChanged": "sometimes"}}},
                "`result.capabilities.tools.listChanged`",
            ),
        ),
    ),
    "tools/list": (
        {"tools": [TOOL], "nextCursor": "n"},
        (
            ({"tools": {}}, "`result.tools` is a dict, not an array"),
            ({"tools": [TOOL, {"name": "x"}]}, "`result.tools[1].inputSchema` is missing"),
            ({"tools": [{"name": "x", "inputSchema": {}}]}, "`result.tools[0].inputSchema.type`"),
            ({"tools": [{"inputSchema": {"type": "object"}}]}, "`result.tools[0].name`"),
            ({"tools": [TOOL], "nextCursor": 2}, "`result.nextCursor` is an int"),
            ({"tools": ["get_weather"]}, "`result.tools[0]` is a str, not an object"),
        ),
    ),
    "tools/call": (
        {"content": [TEXT], "isError": False, "structuredContent": {"t": 18}},
        (
            ({"isError": False}, "`result.content` is missing"),
            ({"content": [{"type": "json"}]}, "`result.content[0].type` is"),
            ({"content": [{"text": "x"}]}, "`result.content[0].type` is missing"),
            ({"content": [{"type": "text"}]}, "`result.content[0].text` is missing"),
            ({"content": [{"type": "image", "data": "AA=="}]}, "`result.content[0].mimeType`"),
            ({"content": [TEXT], "isError": "nope"}, "`result.isError` is a str"),
            ({"content": [TEXT], "isError": None}, "`result.isError` is null"),
            ({"content": [TEXT], "structuredContent": [1]}, "`result.structuredContent`"),
            (
                {"content": [{"type": "resource", "resource": {"uri": "file:///a"}}]},
                "`result.content[0].resource.text` is missing",
            ),
            (
                {"content": [{"type": "resource_link", "uri": "file:///a"}]},
                "`result.content[0].name` is missing",
            ),
        ),
    ),
    "resources/list": (
        {"resources": [{"uri": "file:///a", "name": "a", "size": 3}]},
        (
            ({"resources": [{"uri": "file:///a"}]}, "`result.resources[0].name` is missing"),
            ({"resources": [{"uri": 1, "name": "a"}]}, "`result.resources[0].uri`"),
            (
                {"resources": [{"uri": "u", "name": "a", "size": "big"}]},
                "`result.resources[0].size`",
            ),
        ),
    ),
    "resources/templates/list": (
        {"resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "files"}]},
        (
            ({"resourceTemplates": [{"name": "f"}]}, "`result.resourceTemplates[0].uriTemplate`"),
            ({}, "`result.resourceTemplates` is missing"),
        ),
    ),
    "resources/read": (
        {"contents": [{"uri": "file:///a", "text": "x"}, {"uri": "file:///b", "blob": "AA=="}]},
        (
            ({"contents": [{"uri": "file:///a"}]}, "`result.contents[0].text` is missing"),
            (
                {"contents": [{"uri": "file:///a", "blob": 3}]},
                "`result.contents[0].blob` is an int",
            ),
            ({"contents": [{"text": "x"}]}, "`result.contents[0].uri` is missing"),
        ),
    ),
    "prompts/list": (
        {"prompts": [{"name": "review", "arguments": [{"name": "code", "required": True}]}]},
        (
            ({"prompts": [{"title": "t"}]}, "`result.prompts[0].name` is missing"),
            (
                {"prompts": [{"name": "r", "arguments": [{"required": True}]}]},
                "`result.prompts[0].arguments[0].name` is missing",
            ),
        ),
    ),
    "prompts/get": (
        {"messages": [{"role": "user", "content": TEXT}]},
        (
            ({"messages": [{"role": "system", "content": TEXT}]}, "`result.messages[0].role`"),
            ({"messages": [{"role": "user", "content": [TEXT]}]}, "`result.messages[0].content`"),
            ({"messages": [{"role": "user"}]}, "`result.messages[0].content` is missing"),
        ),
    ),
    "completion/complete": (
        {"completion": {"values": ["python", "pytorch"], "total": 10, "hasMore": True}},
        (
            ({"completion": {"values": "python"}}, "`result.completion.values` is a str"),
            ({"completion": {"values": [1]}}, "`result.completion.values` is a list"),
            ({"completion": {"values": [], "total": "many"}}, "`result.completion.total`"),
            ({}, "`result.completion` is missing"),
        ),
    ),
    "ping": ({}, (({"_meta": "x"}, "`result._meta` is a str"),)),
}

BROKEN = [
    pytest.param(method, broken, path, id=f"{method}-{number}")
    for method, (_, cases) in RESULTS.items()
    for number, (broken, path) in enumerate(cases)
]


def test_every_known_method_has_a_result_shape_and_a_case() -> None:
    """The request facts keep the methods the checker has shapes for, and the tests here
    cover every shape of the table (a method added to one is added to the others)."""
    assert set(mcp.RESULT_SHAPES) == set(JSONRPC_METHODS)
    uncovered = set(mcp.RESULT_SHAPES) - set(RESULTS)
    assert uncovered <= {"resources/subscribe", "resources/unsubscribe", "logging/setLevel"}


@pytest.mark.parametrize("method", sorted(RESULTS))
def test_a_healthy_result_of_each_method_is_clean(method: str) -> None:
    """The healthy result of each method, as the specification's examples write it."""
    report = checked(method, RESULTS[method][0])
    assert (report.outcome.value, report.findings) == ("completed", ())


@pytest.mark.parametrize(("method", "broken", "path"), BROKEN)
def test_a_result_the_client_rejects_is_a_schema_mismatch(
    method: str, broken: Any, path: str
) -> None:
    """A result of the wrong shape for its method: one schema_mismatch (error), at the
    response, naming the method and the path."""
    report = checked(method, broken)
    [finding] = report.findings
    assert (finding.rule, finding.severity.value, finding.event_index) == (
        "schema_mismatch",
        "error",
        0,
    )
    assert f"the result of {method}" in finding.message
    assert path in finding.message
    # The response still answers the request: the stream completes, one mistake one finding.
    assert report.outcome.value == "completed"


def test_open_objects_meta_nulls_and_absent_optionals_stay_clean() -> None:
    """MCP objects are open: unknown keys, ``_meta`` anywhere, optional fields left out or
    null (pydantic reads null as absent), numbers as strings pydantic reads, all clean."""
    tool = {
        **TOOL,
        "title": None,
        "annotations": {"readOnlyHint": "true", "vendorHint": 1},
        "outputSchema": None,
        "icons": None,
        "_meta": {"k": [1]},
        "x-vendor": {"any": "thing"},
    }
    assert checked("tools/list", {"tools": [tool], "nextCursor": None, "_meta": {}}).findings == ()
    content = [
        {"type": "text", "text": "t", "annotations": None, "_meta": {"a": 1}, "extra": 1},
        {"type": "resource_link", "uri": "u", "name": "n", "size": "12"},
    ]
    assert checked("tools/call", {"content": content, "isError": 0}).findings == ()
    assert checked("tools/call", {"content": []}).findings == ()  # isError left out
    assert checked("ping", {"anything": "goes"}).findings == ()
    init = {**INIT, "instructions": None, "capabilities": {}, "serverInfo": {**INIT["serverInfo"]}}
    assert checked("initialize", init).findings == ()


def test_numbers_are_read_as_pydantic_reads_them() -> None:
    """An integer spelled ``"12.0"`` or ``"1_000"`` is one to the client's pydantic models;
    a digit that is not ASCII (``str.isdigit`` says yes, ``int`` reads it) is not."""
    for size in ("12.0", "1_000", 12.0):
        link = {"type": "resource_link", "uri": "u", "name": "n", "size": size}
        assert checked("tools/call", {"content": [link]}).findings == (), size
    link = {"type": "resource_link", "uri": "u", "name": "n", "size": "\u0663"}
    assert checked("tools/call", {"content": [link]}).rules() == ["schema_mismatch"]


def test_results_that_answer_no_known_method_are_unchecked() -> None:
    """No method known, nothing checked: a method outside the known set, an id the request
    did not carry (only unrequested_response), an error answer, and no request at all."""
    odd = {"tools": "not a list"}
    body = sse(result(odd))
    assert check_stream(body, protocol="mcp", request=request("vendor/run")).findings == ()
    assert check_stream(body, protocol="mcp").findings == ()
    stray = check_stream(
        sse(result(odd, id_=8), result({"tools": []})),
        protocol="mcp",
        request=request("tools/list"),
    )
    assert stray.rules() == ["unrequested_response"]
    failed = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "m"}}
    assert check_stream(sse(failed), protocol="mcp", request=request("tools/list")).findings == ()
    # A string id and a number id differ: "7" answers no tools/list request.
    typed = check_stream(
        sse(result(odd, id_="7"), result({"tools": []})),
        protocol="mcp",
        request=request("tools/list"),
    )
    assert typed.rules() == ["unrequested_response"]


def test_a_second_answer_is_not_checked_again() -> None:
    """The duplicate is its own finding; its shape is not judged a second time."""
    report = check_stream(
        sse(result({"tools": []}), result({"tools": 1})),
        protocol="mcp",
        request=request("tools/list"),
    )
    assert report.rules() == ["duplicate_terminal"]


def test_a_batch_checks_each_answer_by_its_own_request() -> None:
    """A 2025-03-26 batch: each answer judged by the method its id called, in a batch
    array or alone; the one broken answer is the one reported."""
    batch = [
        request("tools/call", 1),
        request("resources/read", "b"),
        notification("notifications/cancelled", {"requestId": 0}),
    ]
    healthy = sse(
        result({"contents": []}, id_="b"),
        [
            notification("notifications/message", {"level": "debug", "data": None}),
            result({"content": [TEXT]}, id_=1),
        ],
    )
    assert check_stream(healthy, protocol="mcp", request=batch).findings == ()
    swapped = sse(result({"content": [TEXT]}, id_="b"), result({"contents": []}, id_=1))
    messages = mismatches(check_stream(swapped, protocol="mcp", request=batch))
    assert len(messages) == 2
    assert "the result of resources/read" in messages[0]
    assert "`result.contents` is missing" in messages[0]
    assert "the result of tools/call" in messages[1]
    in_batch = sse([result({"contents": []}, id_="b"), result({"content": 1}, id_=1)])
    [message] = mismatches(check_stream(in_batch, protocol="mcp", request=batch))
    assert message.startswith("event 0 (batch item 1) (the result of tools/call)")


def test_an_id_two_requests_share_with_different_methods_is_unchecked() -> None:
    """Which request an answer is for cannot be told: neither shape is applied."""
    batch = [request("tools/list", 1), request("resources/read", 1)]
    body = sse(result({"contents": []}, id_=1), result({"tools": []}, id_=1))
    assert check_stream(body, protocol="mcp", request=batch).findings == ()
    same = [request("tools/list", 1), request("tools/list", 1)]
    body = sse(result({"tools": []}, id_=1), result({"tools": 2}, id_=1))
    assert mismatches(check_stream(body, protocol="mcp", request=same))


# -- params of server requests and notifications ---------------------------------------------

SAMPLING = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
    "maxTokens": 100,
}
FORM = {
    "message": "Please provide your GitHub username",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
URL = {"mode": "url", "elicitationId": "e-1", "url": "https://example.com", "message": "m"}

#: method -> (healthy params, (broken params or None for none, the path named), ...).
PARAMS: dict[str, tuple[Any, tuple[tuple[Any, str], ...]]] = {
    "sampling/createMessage": (
        SAMPLING,
        (
            ({"messages": SAMPLING["messages"]}, "`params.maxTokens` is missing"),
            ({**SAMPLING, "maxTokens": "lots"}, "`params.maxTokens`"),
            (
                {**SAMPLING, "messages": [{"role": "robot", "content": TEXT}]},
                "`params.messages[0].role`",
            ),
            (
                {**SAMPLING, "messages": [{"role": "user", "content": [{"type": "tool_use"}]}]},
                "`params.messages[0].content[0].id` is missing",
            ),
            ({**SAMPLING, "modelPreferences": {"speedPriority": "fast"}}, "speedPriority"),
            (None, "`params` is missing"),
        ),
    ),
    "elicitation/create": (
        FORM,
        (
            ({"message": "m"}, "`params.requestedSchema` is missing"),
            ({**FORM, "requestedSchema": {"type": "object"}}, "requestedSchema.properties"),
            ({**URL, "url": None}, "`params.url` is null"),
            ({**FORM, "mode": None}, "`params.mode` is null"),
        ),
    ),
    "notifications/progress": (
        {"progressToken": "t", "progress": 50, "total": 100, "message": "half"},
        (
            ({"progressToken": "t", "progress": "half"}, "`params.progress` is a str"),
            ({"progress": 1}, "`params.progressToken` is missing"),
            ({"progressToken": 0.5, "progress": 1}, "`params.progressToken` is a float"),
            (None, "`params` is missing"),
        ),
    ),
    "notifications/message": (
        {"level": "error", "logger": "database", "data": {"error": "Connection failed"}},
        (
            ({"level": "verbose", "data": "x"}, "`params.level` is"),
            ({"level": "info"}, "`params.data` is missing"),
            ({"level": "info", "data": 1, "logger": 2}, "`params.logger`"),
        ),
    ),
    "notifications/resources/updated": ({"uri": "file:///a"}, (({}, "`params.uri` is missing"),)),
    "notifications/cancelled": (
        {"requestId": 3, "reason": "user"},
        (({"requestId": [3]}, "`params.requestId` is a list"),),
    ),
    "notifications/elicitation/complete": (
        {"elicitationId": "e-1"},
        (({}, "`params.elicitationId` is missing"),),
    ),
}


def _message(method: str, params: Any) -> dict[str, Any]:
    if method.startswith("notifications/"):
        return notification(method, params)
    return request(method, 100, params)


def _streamed(*messages: Any) -> StreamReport:
    """``messages`` before the answer to a tools/call."""
    body = sse(*messages, result({"content": [TEXT]}))
    return check_stream(body, protocol="mcp", request=request("tools/call"))


PARAMS_BROKEN = [
    pytest.param(method, broken, path, id=f"{method}-{number}")
    for method, (_, cases) in PARAMS.items()
    for number, (broken, path) in enumerate(cases)
]


def test_every_params_shape_has_its_cases() -> None:
    assert set(mcp.PARAMS_SHAPES) == set(PARAMS)


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_healthy_params_of_each_method_are_clean(method: str) -> None:
    assert _streamed(_message(method, PARAMS[method][0])).findings == ()


@pytest.mark.parametrize(("method", "broken", "path"), PARAMS_BROKEN)
def test_params_the_client_rejects_are_a_schema_mismatch(
    method: str, broken: Any, path: str
) -> None:
    """The client answers a server request it cannot read with an error and drops a
    notification it cannot read: one schema_mismatch at that event, naming the method."""
    report = _streamed(_message(method, broken))
    [finding] = report.findings
    assert (finding.rule, finding.severity.value, finding.event_index) == (
        "schema_mismatch",
        "error",
        0,
    )
    assert f"({method})" in finding.message
    assert path in finding.message


def test_params_look_alikes_stay_clean() -> None:
    """Methods whose params are optional, without them; a URL elicitation; an unknown
    method with any params; extra keys and ``_meta`` in params; a sampling message whose
    content is a list of blocks."""
    report = _streamed(
        request("ping", 100),
        request("roots/list", 101),
        notification("notifications/tools/list_changed"),
        notification("notifications/resources/list_changed", {"_meta": {}}),
        request("elicitation/create", 102, URL),
        request("elicitation/create", 103, {**FORM, "mode": "form", "x": 1}),
        notification("vendor/thing", {"progress": "anything"}),
        request("vendor/ask", 104, {"maxTokens": "x"}),
        notification("notifications/progress", {"progressToken": True, "progress": "0.5"}),
        request(
            "sampling/createMessage",
            105,
            {
                **SAMPLING,
                "messages": [{"role": "assistant", "content": [TEXT, TEXT]}],
                "_meta": {"progressToken": 1},
                "vendor": {},
            },
        ),
    )
    assert report.findings == ()


def test_a_cancelled_request_id_is_read_as_the_sdk_reads_a_request_id() -> None:
    """``notifications/cancelled`` names a RequestId: a string or a strict int to the SDK, so
    ``"3"`` and ``3`` are clean and ``3.0`` and ``true`` are refused (a progress token, in
    pydantic's lax mode, takes both)."""
    for good in ("3", 3):
        cancelled = notification("notifications/cancelled", {"requestId": good})
        assert _streamed(cancelled).findings == (), good
    for bad in (3.0, True):
        cancelled = notification("notifications/cancelled", {"requestId": bad})
        assert _streamed(cancelled).rules() == ["schema_mismatch"], bad
    progress = notification("notifications/progress", {"progressToken": 3.0, "progress": 1})
    assert _streamed(progress).findings == ()


def test_invalid_jsonrpc_is_one_finding_not_two() -> None:
    """A message that is not JSON-RPC is that finding alone: its params are not judged."""
    broken = {"jsonrpc": "1.0", "method": "notifications/progress", "params": {}}
    assert _streamed(broken).rules() == ["invalid_jsonrpc"]


# -- the request facts -------------------------------------------------------------------------


def test_the_facts_keep_the_method_of_each_request_id() -> None:
    """Aligned with jsonrpc_ids; a known method as it is, any other as "other"; the
    mapping of facts unchanged."""
    batch = [
        request("tools/call", 1),
        notification("notifications/initialized"),
        request("resources/read", "b"),
        request("x" * 10_000, 3),
        request({"not": "a string"}, 4),  # type: ignore[arg-type]
        {"jsonrpc": "2.0", "id": 5, "result": {}},
        request("ping", None),  # no id: only its type is kept, no method either
    ]
    facts = RequestFacts(batch)
    assert facts["jsonrpc_ids"] == (1, "b", 3, 4)
    assert facts.jsonrpc_methods == ("tools/call", "resources/read", OTHER_METHOD, OTHER_METHOD)
    assert "jsonrpc_methods" not in facts
    assert dict(facts) == {"jsonrpc_ids": (1, "b", 3, 4), "jsonrpc_invalid_ids": ("null",)}
    assert RequestFacts({"model": "m"}).jsonrpc_methods is None
    read, _ = request_facts(json.dumps(request("initialize")).encode(), 1024)
    assert read is not None
    assert read.jsonrpc_methods == ("initialize",)


def test_the_methods_kept_are_bounded() -> None:
    """As many methods as ids (the first MAX_REQUEST_IDS), each a known token."""
    batch = [request(f"m{i}" * 100, i) for i in range(MAX_REQUEST_IDS + 50)]
    methods = RequestFacts(batch).jsonrpc_methods
    assert methods is not None
    assert len(methods) == MAX_REQUEST_IDS
    assert set(methods) == {OTHER_METHOD}


# -- bounds and what a message may show --------------------------------------------------------


def test_a_finding_names_the_path_never_the_value() -> None:
    secret = "SECRET-VALUE"
    cases = [
        checked("tools/call", {"content": [{"type": secret}]}),
        checked("tools/call", {"content": [TEXT], "isError": secret}),
        checked("prompts/get", {"messages": [{"role": secret, "content": TEXT}]}),
        _streamed(notification("notifications/message", {"level": secret, "data": secret})),
        checked("tools/list", {"tools": [{"name": "t", "inputSchema": {"type": secret}}]}),
    ]
    for report in cases:
        [finding] = report.findings
        assert finding.rule == "schema_mismatch"
        assert secret not in finding.message


def test_the_walk_is_bounded() -> None:
    """A list is read to its first MAX_SHAPE_ITEMS items, a payload to its first
    MAX_SHAPE_OBJECTS objects: a mistake past them goes unchecked, whatever the size."""
    tools = [TOOL] * (MAX_SHAPE_ITEMS + 10)
    late = [*tools[:MAX_SHAPE_ITEMS], {"name": "late"}]
    assert checked("tools/list", {"tools": late}).findings == ()
    early = [*tools[: MAX_SHAPE_ITEMS - 1], {"name": "late"}]
    assert mismatches(checked("tools/list", {"tools": early}))
    # Nested lists multiply: the object budget stops the walk first.
    prompt = {"name": "p", "arguments": [{"name": "a"}] * MAX_SHAPE_ITEMS}
    prompts = [prompt] * 8 + [{"title": "no name"}]
    assert 8 * (MAX_SHAPE_ITEMS + 1) > MAX_SHAPE_OBJECTS
    assert checked("prompts/list", {"prompts": prompts}).findings == ()


@pytest.mark.skipif(
    streamguard.compiled, reason="a compiled module's functions cannot be patched to count calls"
)
def test_no_shape_is_walked_for_an_unknown_id_or_a_notification_without_params(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost stays what it was where nothing is owed a shape: a response to an id whose
    method is not known and a notification whose params are optional walk nothing."""
    walked: list[object] = []
    real = mcp.nested_problem

    def counting(*args: Any, **kwargs: Any) -> str | None:
        walked.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(mcp, "nested_problem", counting)
    body = sse(
        notification("notifications/tools/list_changed"),
        notification("notifications/prompts/list_changed"),
        result({"x": 1}, id_=9),
        result({"x": 1}),
    )
    check_stream(body, protocol="mcp", request=request("vendor/run"))
    check_stream(body, protocol="mcp")
    assert walked == []
    check_stream(sse(result({"tools": []})), protocol="mcp", request=request("tools/list"))
    assert walked == [mcp.RESULT_SHAPES["tools/list"]]


# -- through the middleware ----------------------------------------------------------------------


def test_the_middleware_checks_the_result_by_the_method_the_app_read() -> None:
    """The POST body the app read gives the method; the broken initialize result is
    reported on the live stream."""
    reports: list[StreamReport] = []

    def watched(request_body: bytes, data: bytes) -> StreamReport:
        incoming = [{"type": "http.request", "body": request_body}]
        steps = ["receive", sse_start(), body(data), body(b"", more=False)]
        from streamguard import StreamGuardMiddleware

        middleware = StreamGuardMiddleware(
            ScriptedApp(steps), protocol="mcp", metrics=False, on_report=reports.append
        )
        run(middleware, http_scope("POST", "/mcp"), Recorder(incoming=incoming))
        return reports[-1]

    posted = json.dumps(request("initialize")).encode()
    broken = watched(posted, sse(result({**INIT, "protocolVersion": None})))
    assert broken.rules() == ["schema_mismatch"]
    assert "`result.protocolVersion` is null" in broken.findings[0].message
    assert watched(posted, sse(result(INIT))).findings == ()
    other = json.dumps(request("vendor/init")).encode()
    assert watched(other, sse(result({**INIT, "protocolVersion": None}))).findings == ()


# -- held to the client --------------------------------------------------------------------------

_RETYPED: tuple[Any, ...] = ("retyped", 7, None, [], {}, True, 0.5)
_REMOVED = object()


def _probes(payload: Any) -> list[tuple[str, Any]]:
    """Every value of ``payload`` (past the envelope) retyped to each JSON type, and every
    key removed."""
    found: list[tuple[str, Any]] = []
    for path in list(json_paths(payload))[1:]:
        if path[0] in ("jsonrpc", "id", "method"):
            continue
        old = payload
        for key in path:
            old = old[key]
        for new in (*_RETYPED, _REMOVED):
            if new is not _REMOVED and type(new) is type(old):
                continue
            if new is _REMOVED and not isinstance(path[-1], str):
                continue
            changed = copy.deepcopy(payload)
            parent = changed
            for key in path[:-1]:
                parent = parent[key]
            if new is _REMOVED:
                del parent[path[-1]]
            else:
                parent[path[-1]] = new
            shown = "removed" if new is _REMOVED else type(new).__name__
            found.append((f"{'.'.join(map(str, path))}={shown}", changed))
    return found


@pytest.mark.slow
def test_the_shapes_are_those_the_mcp_client_refuses() -> None:
    """Each value of every healthy MCP fixture's messages, retyped or removed: the mcp
    client (by method, as its session validates) fails exactly when streamguard reports a
    schema_mismatch or invalid_jsonrpc (never stricter than the client, never blinder)."""
    if not available("mcp"):
        pytest.skip("the mcp SDK is not installed")
    problems = []
    probes = 0
    for fixture in fixtures("mcp"):
        if not fixture.name.startswith("ok_"):
            continue
        if not all(v.ok for v in python_verdicts("mcp", fixture.body, fixture.request)):
            continue  # a batch (mcp 2.3 reads none) or an id-less error: the exceptions table
        lines = fixture.body.replace(b"\r\n", b"\n").split(b"\n")
        for number, line in enumerate(lines):
            if not line.startswith(b"data: "):
                continue
            try:
                payload = json.loads(line[6:])
            except ValueError:
                continue
            if not isinstance(payload, dict):
                continue  # batches: mcp 2.3 reads none (the oracle's exceptions table)
            for name, changed in _probes(payload):
                if name.startswith("error.code="):
                    continue  # jsonrpc_problem's (not by method): an int, not a bool
                edited = list(lines)
                edited[number] = b"data: " + json.dumps(changed).encode()
                body = b"\n".join(edited)
                (verdict,) = python_verdicts("mcp", body, fixture.request)
                rules = fixture.check(body).rules()
                flagged = "schema_mismatch" in rules or "invalid_jsonrpc" in rules
                probes += 1
                if verdict.ok == flagged:
                    problems.append(
                        f"{fixture.name} event {number // 2} {name}: mcp ok={verdict.ok}, "
                        f"flagged={flagged} ({(verdict.error or '')[:120]})"
                    )
    assert probes > 1000
    assert not problems, problems
