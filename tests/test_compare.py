"""``differences_from_response``: the stream, assembled as the official client assembles it,
against the non-streamed response.

The reference for "assembled" is the official clients' own accumulators: openai's
``chat.completions.stream`` and ``responses.stream``, anthropic's ``messages.stream``. Each
reads a fixture stream through a mock transport; what it returns, dumped to JSON, has the
shape of the non-streamed response, and the collected stream must agree with it on every
aspect. A relay that drops, reorders or merges deltas then disagrees.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import pytest

from streamguard.testing import (
    Difference,
    assert_matches_response,
    collect_bytes,
    differences_from_response,
)
from tests.sse_fixtures import Fixture, fixtures

openai = pytest.importorskip("openai", reason="the openai SDK is a dev dependency")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is a dev dependency")


def _serving(body: bytes) -> httpx2.Client:
    """An HTTP client whose every request gets ``body`` as an event stream."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(answer))


def sdk_chat(body: bytes) -> dict[str, Any]:
    """openai's own assembly of a Chat stream (``get_final_completion``), as JSON."""
    client = openai.OpenAI(api_key="k", base_url="http://t/v1", http_client=_serving(body))
    with client.chat.completions.stream(model="m", messages=[]) as stream:
        final = stream.get_final_completion()
    dumped: dict[str, Any] = final.model_dump(mode="json", warnings=False)
    return dumped


def sdk_responses(body: bytes) -> dict[str, Any]:
    """openai's own assembly of a Responses stream (``get_final_response``), as JSON."""
    client = openai.OpenAI(api_key="k", base_url="http://t/v1", http_client=_serving(body))
    with client.responses.stream(model="m", input="hi") as stream:
        final = stream.get_final_response()
    dumped: dict[str, Any] = final.model_dump(mode="json", warnings=False)
    return dumped


def sdk_messages(body: bytes) -> dict[str, Any]:
    """anthropic's own assembly of a Messages stream (``get_final_message``), as JSON."""
    client = anthropic.Anthropic(api_key="k", base_url="http://t", http_client=_serving(body))
    with client.messages.stream(model="m", max_tokens=1, messages=[]) as stream:
        final = stream.get_final_message()
    dumped: dict[str, Any] = final.model_dump(mode="json", warnings=False)
    return dumped


SDKS = {"openai_chat": sdk_chat, "openai_responses": sdk_responses, "anthropic": sdk_messages}


def _clean(protocol: str) -> list[Fixture]:
    return [f for f in fixtures(protocol) if f.name.startswith(("clean", "ok_"))]


def _sdk_accepted() -> list[tuple[str, Fixture]]:
    return [(protocol, fixture) for protocol in SDKS for fixture in _clean(protocol)]


@pytest.mark.parametrize(
    ("protocol", "fixture"), _sdk_accepted(), ids=lambda value: getattr(value, "name", value)
)
def test_a_healthy_stream_matches_its_sdk_assembly(protocol: str, fixture: Fixture) -> None:
    """Each healthy fixture, collected, agrees with what the official client assembles."""
    try:
        assembled = SDKS[protocol](fixture.body)
    except Exception as error:  # an in-band error or a stream the SDK does not finish
        pytest.skip(f"the SDK assembles no answer: {type(error).__name__}")
    collected = collect_bytes(fixture.body, protocol=protocol, request=fixture.request)
    assert differences_from_response(collected, assembled) == []


def test_most_healthy_fixtures_are_compared() -> None:
    """The SDK assembles an answer for most healthy fixtures (the test above skips few)."""
    assembled = 0
    for protocol, fixture in _sdk_accepted():
        try:
            SDKS[protocol](fixture.body)
        except Exception:
            continue
        assembled += 1
    assert assembled >= 0.8 * len(_sdk_accepted()) >= 20


# -- a relay that drops, reorders or merges: each is a difference --------------------------

Edit = Any  # a function from the stream's JSON payloads to the relayed ones


def _relayed(body: bytes, edit: Edit) -> bytes:
    """``body`` with its JSON payloads passed through ``edit``; comments and ``[DONE]`` kept."""
    frames = [frame for frame in body.split(b"\n\n") if frame.strip()]
    payloads, rest = [], []
    for frame in frames:
        lines = frame.split(b"\n")
        data = [line[6:] for line in lines if line.startswith(b"data: ")]
        if data and data[0].startswith(b"{"):
            event = next((line for line in lines if line.startswith(b"event: ")), None)
            payloads.append((event, json.loads(b"\n".join(data))))
        elif not payloads:
            rest.append(frame)  # leading comments
    tail = [frame for frame in frames if frame.startswith(b"data: [DONE]")]
    out = list(rest)
    for event, payload in edit(payloads):
        head = [event] if event is not None else []
        out.append(b"\n".join([*head, b"data: " + json.dumps(payload).encode()]))
    return b"\n\n".join([*out, *tail]) + b"\n\n"


def _where(protocol: str, fixture: str, edit: Edit) -> list[str]:
    """Where the relayed stream differs from the SDK's assembly of the original one."""
    body = next(f for f in fixtures(protocol) if f.name == fixture).body
    reference = SDKS[protocol](body)
    assert differences_from_response(collect_bytes(body, protocol=protocol), reference) == []
    relayed = collect_bytes(_relayed(body, edit), protocol=protocol)
    return [difference.where for difference in differences_from_response(relayed, reference)]


def _content_chunks(payloads: list[Any]) -> list[int]:
    return [
        n
        for n, (_, chunk) in enumerate(payloads)
        if any(c.get("delta", {}).get("content") for c in chunk.get("choices", []))
    ]


def test_a_dropped_chat_delta_is_a_text_difference() -> None:
    """A relay that loses one content chunk changes the choice's text."""

    def drop(payloads: list[Any]) -> list[Any]:
        del payloads[_content_chunks(payloads)[2]]
        return payloads

    assert _where("openai_chat", "clean-text-include-usage", drop) == ["choices[0].text"]


def test_reordered_chat_deltas_are_a_text_difference() -> None:
    """A relay that swaps two content chunks changes the text, not its length."""

    def swap(payloads: list[Any]) -> list[Any]:
        a, b = _content_chunks(payloads)[1:3]
        payloads[a], payloads[b] = payloads[b], payloads[a]
        return payloads

    assert _where("openai_chat", "clean-text-include-usage", swap) == ["choices[0].text"]


def test_merged_tool_calls_are_tool_call_differences() -> None:
    """A relay that puts the second parallel call's deltas under the first's index."""

    def merge(payloads: list[Any]) -> list[Any]:
        for _, chunk in payloads:
            for choice in chunk.get("choices", []):
                for call in choice.get("delta", {}).get("tool_calls") or []:
                    call["index"] = 0
        return payloads

    assert _where("openai_chat", "clean-parallel-tool-calls", merge) == [
        "choices[0].tool_calls (count)",
        "choices[0].tool_calls[0].id",
        "choices[0].tool_calls[0].name",
        "choices[0].tool_calls[0].arguments",
    ]


def test_a_changed_finish_reason_and_a_lost_usage_chunk_are_differences() -> None:
    """The finish reason and the usage are compared too."""

    def edit(payloads: list[Any]) -> list[Any]:
        for _, chunk in payloads:
            for choice in chunk.get("choices", []):
                if choice.get("finish_reason") == "stop":
                    choice["finish_reason"] = "length"
        return [(e, chunk) for e, chunk in payloads if not chunk.get("usage")]

    assert _where("openai_chat", "clean-text-include-usage", edit) == [
        "choices[0].finish_reason",
        "usage",  # none streamed: the whole usage differs
    ]


def test_a_dropped_tool_input_delta_is_an_arguments_difference() -> None:
    """Anthropic: a lost ``input_json_delta`` changes the tool's input."""

    def drop(payloads: list[Any]) -> list[Any]:
        deltas = [
            n
            for n, (_, event) in enumerate(payloads)
            if event.get("delta", {}).get("type") == "input_json_delta"
            and event["delta"].get("partial_json")
        ]
        del payloads[deltas[-1]]
        return payloads

    assert _where("anthropic", "ok_tool_use_empty_first_json_delta", drop) == [
        "tool_calls[0].arguments"
    ]


def test_a_lost_message_delta_usage_is_a_usage_difference() -> None:
    """Anthropic: the output tokens come from ``message_delta``, over the start's."""

    def edit(payloads: list[Any]) -> list[Any]:
        for _, event in payloads:
            if event.get("type") == "message_delta":
                event["usage"] = {"output_tokens": 0}
        return payloads

    assert _where("anthropic", "ok_text_end_turn", edit) == ["usage.output_tokens"]


def test_a_dropped_responses_delta_is_a_streamed_text_difference() -> None:
    """Responses: the SDK's final answer is the terminal event's, so a lost
    ``output_text.delta`` shows as the text the deltas added up to."""

    def drop(payloads: list[Any]) -> list[Any]:
        deltas = [
            n for n, (_, e) in enumerate(payloads) if e["type"] == "response.output_text.delta"
        ]
        del payloads[deltas[1]]
        return payloads

    assert _where("openai_responses", "clean-text", drop) == ["text (as its deltas arrived)"]


# -- Gemini: no accumulator in google-genai, bodies as the API documents them ---------------


def _gemini(name: str) -> Any:
    return collect_bytes(next(f for f in fixtures("gemini") if f.name == name).body)


def test_gemini_text_stream_matches_its_response() -> None:
    """The chunks' text, last finishReason and last usageMetadata are the response's."""
    body = {
        "candidates": [
            {
                "content": {
                    "parts": [{"text": "There are **3** r's in strawberry. Want more?"}],
                    "role": "model",
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 16, "totalTokenCount": 25},
        "modelVersion": "gemini-2.5-flash",
    }
    assert differences_from_response(_gemini("ok_text_stop"), body) == []
    body["candidates"][0]["finishReason"] = "MAX_TOKENS"
    body["usageMetadata"]["totalTokenCount"] = 26
    assert [str(d) for d in differences_from_response(_gemini("ok_text_stop"), body)] == [
        "candidates[0].finish_reason: streamed 'STOP', response 'MAX_TOKENS'",
        "usage.totalTokenCount: streamed 25, response 26",
    ]


def test_gemini_function_call_and_two_candidates() -> None:
    """Function calls compare by name and args; each candidate by its index."""
    usage = {"promptTokenCount": 9, "candidatesTokenCount": 8, "totalTokenCount": 17}
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    body: dict[str, Any] = {
        "candidates": [{"content": {"parts": [call]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
    }
    assert differences_from_response(_gemini("ok_tool_call"), body) == []
    call["functionCall"]["args"] = {"city": "Lyon"}
    assert [d.where for d in differences_from_response(_gemini("ok_tool_call"), body)] == [
        "candidates[0].tool_calls[0].arguments"
    ]
    two = {
        "candidates": [
            {"content": {"parts": [{"text": "Aa."}]}, "finishReason": "STOP", "index": 0},
            {"content": {"parts": [{"text": "B"}]}, "finishReason": "STOP", "index": 1},
        ],
    }
    found = differences_from_response(_gemini("ok_two_candidates"), two, ignore={"usage"})
    assert [str(d) for d in found] == ["candidates[1].text: streamed 'Bb.', response 'B'"]


# -- the call itself --------------------------------------------------------------------------


def test_assert_matches_response_lists_every_difference() -> None:
    """The assertion names the protocol, counts the differences and lists each one."""
    collected = _gemini("ok_text_stop")
    with pytest.raises(AssertionError) as raised:
        assert_matches_response(collected, b'{"candidates": []}')
    assert str(raised.value).splitlines()[0] == (
        "the gemini stream, assembled, differs from the response in 2 way(s):"
    )
    assert "  - candidates[0]: streamed 'present', response 'absent'" in str(raised.value)


def test_ignore_leaves_aspects_out() -> None:
    """``ignore`` drops aspects; tool-call ids alone can be left out (two calls never share
    them); an unknown aspect is a ValueError."""
    body = sdk_chat(
        next(f for f in fixtures("openai_chat") if f.name == "clean-parallel-tool-calls").body
    )
    for call in body["choices"][0]["message"]["tool_calls"]:
        call["id"] = "call_other"
    del body["usage"]
    collected = collect_bytes(
        next(f for f in fixtures("openai_chat") if f.name == "clean-parallel-tool-calls").body
    )
    assert differences_from_response(collected, body, ignore={"tool_call_ids", "usage"}) == []
    assert {d.where for d in differences_from_response(collected, body, ignore={"usage"})} == {
        "choices[0].tool_calls[0].id",
        "choices[0].tool_calls[1].id",
    }
    with pytest.raises(ValueError, match="unknown aspects"):
        differences_from_response(collected, body, ignore={"texts"})


def test_a_protocol_without_a_non_streamed_form_is_a_value_error() -> None:
    """Plain SSE and the agent protocols have no non-streamed response to compare with."""
    with pytest.raises(ValueError, match="has no non-streamed form"):
        differences_from_response(collect_bytes(b"data: x\n\n", protocol="sse"), {})


def test_difference_reads_as_one_line() -> None:
    """A difference says where, what streamed and what the response said."""
    assert str(Difference("text", "Hi", "Hi!")) == "text: streamed 'Hi', response 'Hi!'"


def test_testing_guide_lists_the_protocols_compared() -> None:
    """docs/testing.md's table of assemblies names exactly the protocols the helper compares."""
    from pathlib import Path

    from streamguard.protocols import CHECKERS
    from streamguard.testing._compare import _PROTOCOLS

    page = (Path(__file__).resolve().parent.parent / "docs" / "testing.md").read_text()
    table = page.split("| protocol | assembled as |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(listed) == sorted(_PROTOCOLS)
    assert set(listed) <= set(CHECKERS)
