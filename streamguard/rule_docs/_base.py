"""What one rule's documentation holds, and how it is written in the source.

The docs modules write prose as indented triple-quoted paragraphs and wire text as indented
blocks; ``rule_doc`` turns both into the exact text the docs page shows, so the modules can
be formatted freely without changing a byte of ``docs/rules.md``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["RuleDoc", "rule_doc"]


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """The documentation of one rule (``streamguard.rules.Rule`` has the short form)."""

    #: The rule's name, as in ``streamguard.rules.RULES``.
    name: str
    #: What the rule checks and when it fires, longer than the rule's summary.
    meaning: str
    #: What real clients do with such a stream: which SDK breaks, and how.
    why_clients_break: str
    #: An offending frame (or the few frames that make the point) as wire text.
    example: str
    #: How to fix the sender.
    fix: str
    #: What to look at in the example; empty when the example speaks for itself.
    example_note: str = ""


def _prose(text: str) -> str:
    """One paragraph: the source's line breaks and indentation collapse to single spaces."""
    return " ".join(text.split())


def _wire(text: str) -> str:
    """Wire text written as an indented triple-quoted block: strip the common indentation."""
    lines = textwrap.dedent(text).strip().splitlines()
    return "\n".join(line.rstrip() for line in lines)


def rule_doc(
    name: str,
    *,
    meaning: str,
    clients: str,
    example: str,
    fix: str,
    note: str = "",
) -> RuleDoc:
    """A rule's documentation from source text: prose collapsed, wire text dedented."""
    return RuleDoc(
        name=name,
        meaning=_prose(meaning),
        why_clients_break=_prose(clients),
        example=_wire(example),
        fix=_prose(fix),
        example_note=_prose(note),
    )
