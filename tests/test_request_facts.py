"""The request facts a protocol reads come from its spec (``ProtocolSpec.request_facts``):
``streamguard.request`` reads only what every request has, the registry derives the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streamguard import StreamReport, request
from streamguard.httpx import StreamGuardTransport
from streamguard.protocols import (
    BUILT_IN,
    SPECS,
    ProtocolSpec,
    _jsonrpc,
    a2a,
    mcp,
    register,
    request_facts_read_by,
    unregister,
)
from streamguard.protocols.sse import PlainSSEChecker
from streamguard.request import GENERIC_FACT_KEYS, RequestBody, RequestFact, RequestFacts
from streamguard.request import request_facts as read_request
from streamguard.testing import collect

#: A body that holds a fact of every built-in protocol that reads one, and the head's keys.
EVERYTHING = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "stream": True,
    "n": 2,
    "stream_options": {"include_usage": True},
    "max_tokens": 9,
    "starting_after": 3,
    "http_method": "GET",
}


def test_request_alone_reads_only_what_every_request_has() -> None:
    """Imported without the registry, the request module knows no protocol's facts: only
    ``stream`` and the head's are read (the rest come from the specs)."""
    script = (
        f"from streamguard.request import RequestFacts\nprint(dict(RequestFacts({EVERYTHING!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == repr({"stream": True, "http_method": "GET"})


def test_each_protocol_declares_the_facts_its_checker_reads() -> None:
    """Chat, Responses, MCP and A2A declare their facts; the JSON-RPC ids are one reader,
    declared by both JSON-RPC protocols and read once."""
    declared = {
        spec.name: [key for fact in spec.request_facts for key in fact.keys] for spec in BUILT_IN
    }
    assert declared["openai_chat"][:2] == ["n", "stream_options"]
    assert declared["openai_responses"] == ["starting_after"]
    assert mcp.SPEC.request_facts == a2a.SPEC.request_facts == (_jsonrpc.REQUEST_IDS,)
    assert {name for name, keys in declared.items() if keys} == {
        "openai_chat",
        "openai_responses",
        "mcp",
        "a2a",
    }
    facts = RequestFacts(EVERYTHING)
    assert dict(facts) == {
        "stream": True,
        "n": 2,
        "stream_options": {"include_usage": True},
        "max_tokens": 9,
        "starting_after": 3,
        "jsonrpc_ids": (7,),
        "http_method": "GET",
    }
    assert facts.jsonrpc_methods == ("tools/call",)


def test_a_route_of_one_protocol_reads_only_its_facts() -> None:
    """``request_facts_read_by`` names a protocol's readers: a chat route's request keeps
    no JSON-RPC ids nor ``starting_after``; ``auto`` and an unknown name read them all."""
    body = json.dumps(EVERYTHING).encode()
    chat, _ = read_request(body, 1024, request_facts_read_by("openai_chat"))
    assert chat == {"stream": True, "n": 2, "stream_options": {"include_usage": True},
                    "max_tokens": 9}  # fmt: skip
    assert chat is not None
    assert chat.jsonrpc_methods is None
    responses, _ = read_request(body, 1024, request_facts_read_by("openai_responses"))
    assert responses == {"stream": True, "starting_after": 3}
    plain, _ = read_request(body, 1024, request_facts_read_by("sse"))
    assert plain == {"stream": True}
    assert request_facts_read_by("auto") is None
    assert request_facts_read_by("no_such_protocol") is None
    everything, _ = read_request(body, 1024, request_facts_read_by("auto"))
    assert everything == {k: v for k, v in RequestFacts(EVERYTHING).items() if k != "http_method"}


def _read_n(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    facts["n"] = "mine"


class _Own(PlainSSEChecker):
    name = "own_facts"


@pytest.fixture
def own_spec() -> Iterator[None]:
    yield
    if "own_facts" in SPECS:
        unregister("own_facts")


@pytest.mark.parametrize("key", ["n", "jsonrpc_ids", "stream", "http_method"])
def test_a_fact_another_reader_sets_is_refused_and_leaves_no_trace(
    own_spec: None, key: str
) -> None:
    """A protocol's own reader may not set a fact a built-in one or the request module
    sets: a ValueError that names it, and every request reads as before."""
    spec = ProtocolSpec(
        name="own_facts", checker=_Own, summary="x", request_facts=(RequestFact((key,), _read_n),)
    )
    with pytest.raises(ValueError, match=f"the request fact {key!r} is read already"):
        register(spec)
    assert "own_facts" not in SPECS
    assert RequestFacts({"n": 2})["n"] == 2


def test_sharing_a_built_in_reader_is_no_clash(own_spec: None) -> None:
    """The look-alike: a protocol that declares the same reader as another (A2A shares
    MCP's JSON-RPC ids) registers, and the reader still runs once."""
    register(
        ProtocolSpec(
            name="own_facts", checker=_Own, summary="x", request_facts=(_jsonrpc.REQUEST_IDS,)
        )
    )
    assert "own_facts" in SPECS
    assert RequestFacts(EVERYTHING)["jsonrpc_ids"] == (7,)
    assert sum(fact is _jsonrpc.REQUEST_IDS for fact in request._shared_facts) == 1


def test_no_protocol_fact_is_generic() -> None:
    """The facts the request module reads itself are no protocol's key."""
    keys = {key for spec in BUILT_IN for fact in spec.request_facts for key in fact.keys}
    assert not keys & GENERIC_FACT_KEYS


#: The requests whose facts the spy reader below was asked for (a test's own protocol).
_spied: list[object] = []


def _spy(body: RequestBody, facts: dict[str, Any], attributes: dict[str, Any]) -> None:
    _spied.append(body)


@pytest.fixture
def spied() -> Iterator[list[object]]:
    """A protocol of the test's own whose reader records every request it reads."""
    register(
        ProtocolSpec(
            name="own_facts",
            checker=_Own,
            summary="x",
            request_facts=(RequestFact(("spied",), _spy),),
        )
    )
    _spied.clear()
    yield _spied
    unregister("own_facts")


def _upstream() -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda request: httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=httpx.ByteStream(b"data: [DONE]\n\n"),
        )
    )


@pytest.mark.parametrize(("protocol", "read"), [("openai_chat", 0), ("auto", 1)])
def test_the_client_seams_read_the_facts_of_the_route_protocol(
    spied: list[object], protocol: str, read: int
) -> None:
    """The httpx transport and ``collect`` read a request for its route's protocol's facts
    only; under ``auto`` for every registered protocol's (the spy's included)."""
    reports: list[StreamReport] = []
    transport = StreamGuardTransport(
        _upstream(), protocol=protocol, metrics=False, on_report=reports.append
    )
    with httpx.Client(transport=transport) as client:
        client.post("http://api.test/v1/chat/completions", json={"n": 2})
    # chat's own fact reached its checker either way: n=2 owes two choices' finishes
    assert [(report.protocol, report.rules()) for report in reports] == [
        ("openai_chat", ["missing_finish_reason"])
    ]
    assert len(spied) == read
    with (
        httpx.Client(transport=_upstream()) as client,
        client.stream("POST", "http://api.test/x", json={"n": 2}) as response,
    ):
        collect(response, protocol=protocol)
    assert len(spied) == 2 * read


def test_facts_read_as_a_mapping_with_get() -> None:
    """``RequestFacts.get`` (its own, not ``Mapping``'s raise-and-catch) answers as a dict:
    a fact kept, its default for one left out, never a key of the body it did not keep."""
    facts, _note = read_request(json.dumps({"stream": True, "n": 2, "secret": 1}).encode(), 10_000)
    assert facts is not None
    assert facts.get("n") == 2
    assert facts.get("stream") is True
    assert facts.get("stream_options") is None
    assert facts.get("stream_options", "absent") == "absent"
    assert facts.get("secret") is None
    assert dict(facts) == {key: facts.get(key) for key in facts}
