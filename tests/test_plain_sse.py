"""Plain SSE: no payload rules by default; with a route's ``"json": true``, data must be JSON."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from streamguard import StreamEnd, StreamMonitor
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
    """An "auto" monitor takes json_data too, and the plain SSE it settles on judges no JSON."""
    monitor = StreamMonitor("auto", json_data=True)
    monitor.feed(sse("{'a': 1}"))
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
