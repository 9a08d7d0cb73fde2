"""The long-form rule documentation: complete for every rule, and examples that fire."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from streamguard import check_stream
from streamguard.protocols import CHECKERS
from streamguard.rule_docs import (
    RULE_DOCS,
    RuleDoc,
    _by_name,
    anthropic,
    common,
    gemini,
    get_rule_doc,
    openai_chat,
    openai_responses,
)
from streamguard.rules import ALL_PROTOCOLS, RULES

#: Rules whose example is a complete stream on its own: checking it (with this protocol and
#: request) must report the rule. The others show a fragment (it needs the events before
#: it), an HTTP head, ASGI messages, raw bytes written as escapes, or a timing.
SELF_CONTAINED: dict[str, tuple[str, dict[str, Any] | None]] = {
    "unknown_field": ("sse", None),
    "missing_terminal": ("openai_chat", None),
    "duplicate_terminal": ("openai_chat", None),
    "event_after_terminal": ("openai_chat", None),
    "invalid_json": ("openai_chat", None),
    "schema_mismatch": ("openai_chat", None),
    "missing_finish_reason": ("gemini", None),
    "content_after_finish": ("openai_chat", None),
    "inconsistent_id": ("openai_chat", None),
    "envelope_field_missing": ("openai_chat", None),
    "choice_index_invalid": ("openai_chat", {"n": 1}),
    "choice_out_of_order": ("openai_chat", None),
    "role_not_first": ("openai_chat", None),
    "role_repeated": ("openai_chat", None),
    "multiple_finish_reason": ("openai_chat", None),
    "unknown_finish_reason": ("openai_chat", None),
    "tool_call_index_invalid": ("openai_chat", None),
    "tool_call_header_missing": ("openai_chat", None),
    "tool_call_header_repeated": ("openai_chat", None),
    "tool_call_function_missing": ("openai_chat", None),
    "tool_call_arguments_invalid": ("openai_chat", None),
    "function_call_mixed": ("openai_chat", None),
    "usage_not_last": ("openai_chat", None),
    "usage_repeated": ("openai_chat", None),
    "usage_missing": ("openai_chat", {"stream_options": {"include_usage": True}}),
    "usage_unrequested": ("openai_chat", {"stream": True}),
    "usage_nonstandard": ("openai_chat", None),
    "usage_without_choices": ("openai_chat", None),
    "usage_total_mismatch": ("openai_chat", None),
    "unexpected_event_field": ("openai_chat", None),
    "missing_response_created": ("openai_responses", None),
    "sequence_gap": ("openai_responses", None),
    "item_out_of_order": ("openai_responses", None),
    "item_overlap": ("openai_responses", None),
    "item_not_open": ("openai_responses", None),
    "item_not_closed": ("openai_responses", None),
    "status_mismatch": ("openai_responses", None),
    "response_id_changed": ("openai_responses", None),
    "event_type_mismatch": ("openai_responses", None),
    "event_name_mismatch": ("anthropic", None),
    "missing_message_start": ("anthropic", None),
    "duplicate_message_start": ("anthropic", None),
    "prepopulated_message_start": ("anthropic", None),
    "block_index_out_of_order": ("anthropic", None),
    "block_not_started": ("anthropic", None),
    "block_overlap": ("anthropic", None),
    "block_after_message_delta": ("anthropic", None),
    "delta_type_mismatch": ("anthropic", None),
    "missing_message_delta": ("anthropic", None),
    "unknown_stop_reason": ("anthropic", None),
    "unknown_event_type": ("anthropic", None),
    "usage_decreased": ("gemini", None),
    "sdk_incompatible_framing": ("gemini", None),
}


def test_every_rule_has_documentation() -> None:
    missing = sorted(RULES.keys() - RULE_DOCS.keys())
    assert not missing, f"rules without an entry in streamguard/rule_docs/: {missing}"


def test_no_documentation_names_an_unknown_rule() -> None:
    unknown = sorted(RULE_DOCS.keys() - RULES.keys())
    assert not unknown, f"streamguard/rule_docs/ documents unknown rules: {unknown}"


def test_docs_follow_the_catalog_order() -> None:
    assert list(RULE_DOCS) == list(RULES)


_MODULES = (common, openai_chat, openai_responses, anthropic, gemini)


def test_each_rule_is_documented_beside_a_protocol_that_raises_it() -> None:
    """The docs modules mirror protocols/: stream-level rules in common, a rule of one
    protocol with that protocol, a rule several protocols raise with one of them or in
    common."""
    for module in _MODULES:
        short = module.__name__.rpartition(".")[2]
        assert short == "common" or short in CHECKERS, short
        for doc in module.DOCS:
            protocols = RULES[doc.name].protocols
            if protocols == (ALL_PROTOCOLS,):
                assert short == "common", (short, doc.name)
            else:
                shared = len(protocols) > 1 and short == "common"
                assert short in protocols or shared, (short, doc.name, protocols)


def test_a_rule_documented_twice_is_an_error() -> None:
    """Assembling the docs refuses a second entry for one rule, naming it."""
    doc = get_rule_doc("stalled")
    with pytest.raises(ValueError, match="'stalled' is documented twice"):
        _by_name([doc, doc])


@pytest.mark.parametrize("name", list(RULES))
def test_documentation_is_complete(name: str) -> None:
    doc = RULE_DOCS[name]
    assert doc.name == name
    for field in ("meaning", "why_clients_break", "example", "fix"):
        value = getattr(doc, field)
        assert value.strip(), f"{name}: {field} is empty"
        assert value == value.strip(), f"{name}: {field} has surrounding whitespace"
    assert len(doc.meaning) > len(RULES[name].summary), f"{name}: meaning is not longer"
    assert "```" not in doc.example, f"{name}: the example would break its code block"
    assert not re.search(r"\s{2,}", doc.meaning + doc.why_clients_break + doc.fix)


@pytest.mark.parametrize("name", list(RULES))
def test_rule_names_mentioned_in_the_docs_exist(name: str) -> None:
    """A backticked name that looks like a rule (`something_like_this` and a rule-ish
    word) must be in the catalog, so renaming a rule cannot leave dangling references."""
    doc = RULE_DOCS[name]
    text = " ".join((doc.meaning, doc.why_clients_break, doc.fix, doc.example_note))
    for mentioned in re.findall(r"`([a-z]+(?:_[a-z0-9]+)+)`", text):
        if mentioned in RULES or not mentioned.endswith(_RULE_SUFFIXES):
            continue
        if mentioned in _NOT_RULES:
            continue
        pytest.fail(f"{name}: the docs mention `{mentioned}`, which is not a rule")


#: Endings of rule names; a backticked identifier with one of them is checked.
_RULE_SUFFIXES = (
    "_terminal",
    "_framing",
    "_finished",
    "_ended",
    "_invalid",
    "_mismatch",
    "_missing",
    "_repeated",
    "_decreased",
    "_open",
    "_closed",
    "_started",
    "_stopped",
)
#: Protocol fields and values that end like rule names.
_NOT_RULES = frozenset(
    {
        "model_context_window_exceeded",
        "incomplete",
    }
)


@pytest.mark.parametrize("name", sorted(SELF_CONTAINED))
def test_self_contained_example_fires_its_rule(name: str) -> None:
    protocol, request = SELF_CONTAINED[name]
    body = (RULE_DOCS[name].example + "\n\n").encode()
    report = check_stream(body, protocol=protocol, request=request)
    assert name in report.rules(), f"{name}: its example gives {report.rules()}"


def test_rule_doc_is_frozen_and_lookup_names_unknown_rules() -> None:
    doc = get_rule_doc("missing_terminal")
    assert isinstance(doc, RuleDoc)
    with pytest.raises(dataclasses.FrozenInstanceError):
        doc.fix = "x"  # type: ignore[misc]
    with pytest.raises(KeyError, match="no_such_rule"):
        get_rule_doc("no_such_rule")
    with pytest.raises(TypeError):
        RULE_DOCS["x"] = doc  # type: ignore[index]
