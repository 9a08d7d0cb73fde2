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
from streamguard.rule_docs._base import RuleDoc

__all__ = ["RULE_DOCS", "RuleDoc", "get_rule_doc"]


def _by_name(docs: Iterable[RuleDoc]) -> Mapping[str, RuleDoc]:
    found: dict[str, RuleDoc] = {}
    for doc in docs:
        if doc.name in found:
            raise ValueError(f"rule {doc.name!r} is documented twice")
        found[doc.name] = doc
    return MappingProxyType(found)


RULE_DOCS: Mapping[str, RuleDoc] = _by_name(
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
"""Every rule's documentation, by rule name, in catalog-section order."""


def get_rule_doc(name: str) -> RuleDoc:
    """The documentation of rule ``name``; a ``KeyError`` names an undocumented rule."""
    try:
        return RULE_DOCS[name]
    except KeyError:
        raise KeyError(f"no documentation for streamguard rule {name!r}") from None
