"""The long form of the rule catalog: what each rule means, why clients break, how to fix it.

``streamguard.rules`` holds what the engine needs (name, severity, one-line summary; a
rule's protocols come from the checkers that raise it); this package holds what a person
needs when a rule fires: the meaning in full, what the official clients (openai-python,
anthropic-python, google-genai, the MCP SDKs, browsers' ``EventSource``) do with such a
stream, an example of an offending frame as it appears on the wire, and how to fix the
sender. Its
modules mirror ``streamguard.protocols``:
``common`` holds the framing, lifecycle and HTTP rules the protocols share, and each
protocol's module the rules it raises (a rule Gemini shares with OpenAI Chat is documented
with one of them). ``markdown`` renders the catalog and these docs into
``docs/rules.md`` (``streamguard rules --format markdown``).

The client behaviour cited here comes from the SDK sources and captures summarised in the
project's protocol reference; where a client is not named, the statement is about the
protocol's documented guarantee, not about one implementation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from streamguard.rule_docs import (
    ag_ui,
    ai_sdk_ui,
    anthropic,
    common,
    gemini,
    mcp,
    openai_chat,
    openai_responses,
)
from streamguard.rule_docs._base import RuleDoc, rule_doc

__all__ = ["RULE_DOCS", "RuleDoc", "get_rule_doc", "index_protocol_docs", "rule_doc"]


def _by_name(docs: Iterable[RuleDoc]) -> Mapping[str, RuleDoc]:
    found: dict[str, RuleDoc] = {}
    for doc in docs:
        if doc.name in found:
            raise ValueError(f"rule {doc.name!r} is documented twice")
        found[doc.name] = doc
    return MappingProxyType(found)


_BUILT_IN: Mapping[str, RuleDoc] = _by_name(
    (
        *common.DOCS,
        *openai_chat.DOCS,
        *openai_responses.DOCS,
        *anthropic.DOCS,
        *gemini.DOCS,
        *ag_ui.DOCS,
        *ai_sdk_ui.DOCS,
        *mcp.DOCS,
    )
)
_docs: dict[str, RuleDoc] = dict(_BUILT_IN)
#: Every rule's documentation, by rule name, in catalog-section order: the built-in rules',
#: then those of the registered protocols' specs (``index_protocol_docs``).
RULE_DOCS: Mapping[str, RuleDoc] = MappingProxyType(_docs)


def index_protocol_docs(docs: Iterable[RuleDoc]) -> None:
    """The docs of the registered protocols' own rules, in place of those indexed before
    (called by the protocol registry); a rule documented twice is a ``ValueError``."""
    added = _by_name(docs)
    clash = sorted(added.keys() & _BUILT_IN.keys())
    if clash:
        raise ValueError(f"rule {clash[0]!r} is documented twice")
    _docs.clear()
    _docs.update(_BUILT_IN)
    _docs.update(added)


def get_rule_doc(name: str) -> RuleDoc:
    """The documentation of rule ``name``; a ``KeyError`` names an undocumented rule."""
    try:
        return RULE_DOCS[name]
    except KeyError:
        raise KeyError(f"no documentation for streamguard rule {name!r}") from None
