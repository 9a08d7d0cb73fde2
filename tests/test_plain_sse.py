"""Plain SSE: no payload rules by default; with a route's ``"json": true``, data must be JSON."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streamguard import (
    StreamEnd,
    StreamGuardMiddleware,
    StreamMonitor,
    StreamReport,
    check_stream,
)
from streamguard.config import RouteConfig, StreamGuardConfig
from streamguard.protocols import (
    AnthropicChecker,
    Checker,
    GeminiChecker,
    PlainSSEChecker,
    make_checker,
)
from streamguard.report import Finding
from streamguard.sse import EventParser
from tests.asgi_driver import ScriptedApp, body, run, sse_start
from tests.chunking import chunkings
from tests.conftest import CANARY_MARKER
from tests.helpers import fed

CANARY = f"{CANARY_MARKER}-plain"


def check(chunks: list[bytes], checker: Checker) -> list[Finding]:
    """What ``check_stream`` does for one checker: parse the chunks, check every event,
    then the end of the body."""
    parser = EventParser()
    found: list[Finding] = []
    index = offset = 0
    for chunk in [*chunks, b""]:
        offset += len(chunk)
        for item in fed(parser, chunk):
            if isinstance(item, Finding):
                found.append(item)
                continue
            found.extend(checker.on_event(item, index))
            index += 1
    found.extend(parser.close().findings)
    found.extend(checker.on_end(index, offset))
    return found


def sse(*datas: str) -> bytes:
    return b"".join(f"data: {data}\n\n".encode() for data in datas)


#: A JSON route's body: a Python repr of a dict among JSON values of every kind.
MIXED = sse(
    '{"a": 1}',
    "{'a': 1}",
    "[1, 2]",
    '"text"',
    "42",
    "null",
    f"{{'secret': '{CANARY}'}}",
    "[DONE]",
)


def test_plain_sse_judges_no_payload_by_default() -> None:
    """Without the option, a Python repr is as good as anything else."""
    assert check([MIXED], make_checker("sse")) == []


@pytest.mark.parametrize("chunking", [name for name, _ in chunkings(MIXED)])
def test_json_route_reports_each_event_that_is_not_json(chunking: str) -> None:
    """With json_data, every event whose data does not parse is invalid_json, once, however
    the body is cut; JSON values of any kind and the [DONE] sentinel are clean."""
    chunks = dict(chunkings(MIXED))[chunking]
    found = check(chunks, make_checker("sse", json_data=True))
    assert [(f.rule, f.event_index) for f in found] == [("invalid_json", 1), ("invalid_json", 6)]


def test_invalid_json_message_carries_no_content() -> None:
    """The message names the event and the data's size, never the data."""
    [finding] = check([sse(f"{{'secret': '{CANARY}'}}")], make_checker("sse", json_data=True))
    assert CANARY_MARKER not in finding.message
    assert "characters" in finding.message
    assert (finding.event_index, finding.byte_offset) == (0, 0)


def test_an_event_with_empty_data_is_not_json() -> None:
    """``data:`` with nothing after it dispatches an empty string, which is not JSON."""
    found = check([b"data:\n\n" + sse("{}")], make_checker("sse", json_data=True))
    assert [(f.rule, f.event_index) for f in found] == [("invalid_json", 0)]


@pytest.mark.parametrize(
    ("protocol", "checker_class"),
    [("anthropic", AnthropicChecker), ("gemini", GeminiChecker)],
)
def test_other_protocols_ignore_the_option(protocol: str, checker_class: type[Checker]) -> None:
    """make_checker takes json_data for every protocol and gives it to the plain one only."""
    checker = make_checker(protocol, json_data=True)
    assert isinstance(checker, checker_class)
    assert not isinstance(checker, PlainSSEChecker)


def test_auto_ignores_the_option() -> None:
    """An "auto" monitor takes json_data too, and the plain SSE it settles on does not hold
    its data to JSON: text a JSON route would report stays clean. (Data plainly meant as
    JSON, a Python repr, is reported on an auto route with or without the option: see
    test_auto_reports_data_meant_as_json.)"""
    for json_data in (False, True):
        monitor = StreamMonitor("auto", json_data=json_data)
        monitor.feed(sse("hello") + sse("{name} joined"))
        report = monitor.finish(StreamEnd.BODY_ENDED)
        assert (report.protocol, report.protocol_source, report.rules()) == ("sse", "default", [])


def test_the_checker_is_plain_sse_with_or_without_the_option() -> None:
    """The option changes the payload check, not the protocol or its end."""
    for json_data in (False, True):
        checker = make_checker("sse", json_data=json_data)
        assert isinstance(checker, PlainSSEChecker)
        assert (checker.name, checker.has_terminal, checker.json_data) == ("sse", False, json_data)


def test_route_config_takes_json_true() -> None:
    """``{"protocol": "sse", "json": true}`` sets json_data; json_data is accepted too."""
    config = StreamGuardConfig(routes={"/events": {"protocol": "sse", "json": True}})
    assert config.routes["/events"].json_data is True
    assert RouteConfig(protocol="sse", json_data=True) == RouteConfig(protocol="sse", json=True)
    assert RouteConfig(protocol="sse").json_data is False
    restored = json.loads(config.model_dump_json(by_alias=True))
    assert restored["routes"]["/events"]["json"] is True


@pytest.mark.parametrize("protocol", ["auto", "openai_chat", "anthropic"])
def test_route_config_refuses_json_off_plain_sse(protocol: str) -> None:
    """The option on a protocol that defines its own payloads would be ignored: an error."""
    with pytest.raises(ValidationError) as caught:
        StreamGuardConfig(routes={"/x": {"protocol": protocol, "json": True}})
    assert "json: true applies to plain SSE routes" in str(caught.value)


# -- an auto route that fell back to plain SSE: data meant as JSON (issue 27) ----------------

#: Bodies no protocol claims, with the invalid_json findings ``auto`` gives them (event
#: index, and what the message says besides "data is not JSON").
MEANT_AS_JSON = {
    "python-repr-alone": (sse("{'event': 'token', 'text': 'Hello'}"), [(0, "Python repr")]),
    "python-repr-of-a-list": (sse("[{'a': None, 'b': True}]"), [(0, "Python repr")]),
    "python-repr-every-event": (
        sse("{'a': 1}", "{'a': 2}"),
        [(0, "Python repr"), (1, "Python repr")],
    ),
    "broken-after-json": (
        sse('{"a": 1}', '{"a": True}'),
        [(1, "the stream's other events are JSON")],
    ),
    "broken-before-json": (
        sse('{"a": True}', '{"a": 1}'),
        [(0, "a later event of the stream is JSON")],
    ),
    "frames-ran-together": (
        b'data: {"a": 1}\ndata: {"a": 2}\n\n',
        [(0, "frames ran together")],
    ),
}

#: Plain text that opens with a bracket, on an auto route: clean.
LOOK_ALIKES = {
    "log-lines-beside-json": sse('{"level": "info"}', "[INFO] starting", "[WARN] {x} low"),
    "markdown-beside-json": sse('{"a": 1}', "[a link](https://example.com)", "[[wiki page]]"),
    "footnote-and-template": sse("[1] a footnote", "{name} joined", '{"a": 1}'),
    # A chunk of text can parse as JSON (a number, a word, a list of strings): no proof the
    # stream's data is JSON, so the broken ``{"`` before it stays clean.
    "json-tokens-of-a-text-stream": sse('{"', "name", '":', "1", "true", "[]", '["a"]'),
    "python-tokens-of-a-text-stream": sse("x = {'", "a", "': ", "1}", "{'", "b': 2}"),
    "a-lone-truncated-object": sse('{"a": 1'),
    "a-repr-over-two-lines": b"data: {'a': 1,\ndata:  'b': 2}\n\n",
    "json-only": sse('{"a": 1}', "[1, 2]", '"text"', "[]", "{}"),
}


@pytest.mark.parametrize("name", sorted(MEANT_AS_JSON))
def test_auto_reports_data_meant_as_json(name: str) -> None:
    """On an auto route no protocol claimed, data that is a Python repr, frames run together,
    or broken JSON in a stream of JSON events is invalid_json, however the bytes are cut."""
    data, expected = MEANT_AS_JSON[name]
    for how, chunks in chunkings(data):
        report = check_stream(chunks)
        assert (report.protocol, report.protocol_source) == ("sse", "default"), how
        found = [(f.rule, f.event_index) for f in report.findings]
        assert found == [("invalid_json", index) for index, _ in expected], how
        for finding, (_, says) in zip(report.findings, expected, strict=True):
            assert "data is not JSON" in finding.message
            assert says in finding.message


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_auto_leaves_text_that_opens_with_a_bracket_clean(name: str) -> None:
    """The look-alikes: text that starts with ``[`` or ``{`` in a stream with or without
    JSON events, tokens of a raw text stream, a truncated object alone, and JSON."""
    report = check_stream(LOOK_ALIKES[name])
    assert (report.protocol, report.protocol_source) == ("sse", "default")
    assert report.findings == ()


def test_a_configured_plain_route_still_judges_no_payload() -> None:
    """``protocol="sse"`` without the json option promises nothing about the data: a repr
    stays clean there (only auto guesses, and only a JSON route holds every event to JSON)."""
    data = sse("{'a': 1}", '{"a": 1}', '{"a": True}')
    assert check_stream(data, protocol="sse").findings == ()
    assert check_stream(data, protocol="sse", json_data=True).rules() == [
        "invalid_json",
        "invalid_json",
    ]


def test_a_broken_event_before_the_json_is_not_reported_when_the_client_left() -> None:
    """The finding held for broken JSON before the stream's first JSON event is made at the
    body's end: a stream the client left is not judged on it."""
    monitor = StreamMonitor("auto")
    monitor.feed(sse('{"a": True}', '{"a": 1}'))
    report = monitor.finish(StreamEnd.CLIENT_DISCONNECT)
    assert report.findings == ()


def test_the_middleware_reports_a_repr_on_an_unlisted_route() -> None:
    """Through the middleware (an unlisted route is auto): sse-starlette's str(dict) data."""
    reports: list[StreamReport] = []
    steps = [
        sse_start(),
        body(b"data: {'event': 'token', 'text': 'Hello'}\r\n\r\n"),
        body(b"data: {'event': 'done'}\r\n\r\n", more=False),
    ]
    run(StreamGuardMiddleware(ScriptedApp(steps), on_report=reports.append, metrics=False))
    [report] = reports
    assert (report.protocol, report.protocol_source) == ("sse", "default")
    assert [(f.rule, f.event_index) for f in report.findings] == [
        ("invalid_json", 0),
        ("invalid_json", 1),
    ]
