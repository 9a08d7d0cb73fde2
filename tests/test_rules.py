"""The rule catalog: stable, complete and consistent."""

from __future__ import annotations

import re

import pytest

from streamguard.report import Severity
from streamguard.rules import ALL_PROTOCOLS, RULES, get_rule, rules_for

# Names published in DESIGN.md for the framing, lifecycle and HTTP-hygiene layer.
CORE_NAMES = {
    "invalid_utf8",
    "unterminated_frame",
    "event_too_large",
    "missing_terminal",
    "duplicate_terminal",
    "event_after_terminal",
    "body_not_ended",
    "invalid_json",
    "schema_mismatch",
    "stalled",
    "buffered_flush",
    "content_length_on_stream",
    "bad_content_type_charset",
    "compressed_stream",
}


def test_core_rules_exist() -> None:
    """Every framing, lifecycle and hygiene rule named in the design is in the catalog."""
    assert set(RULES) >= CORE_NAMES


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_is_well_formed(name: str) -> None:
    """Each rule has a snake_case name, a severity, protocols and a one-line summary."""
    rule = RULES[name]
    assert rule.name == name
    assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", name)
    assert isinstance(rule.severity, Severity)
    assert rule.protocols
    assert rule.summary.endswith(".")
    assert "\n" not in rule.summary
    assert rule.anchor == f"rules.md#{name.replace('_', '-')}"


def test_finding_carries_the_rule_name_and_severity() -> None:
    """``Rule.finding`` stamps the rule's name and severity on the finding."""
    finding = get_rule("missing_terminal").finding("no [DONE]", 3, 120)
    assert (finding.rule, finding.severity, finding.event_index, finding.byte_offset) == (
        "missing_terminal",
        Severity.ERROR,
        3,
        120,
    )


def test_unknown_rule_lookup_names_the_rule() -> None:
    """Looking up a name that does not exist says which name."""
    with pytest.raises(KeyError, match="unknown streamguard rule 'nope'"):
        get_rule("nope")


def test_rules_for_includes_the_shared_rules() -> None:
    """A protocol's rules are its own plus those that apply to every protocol."""
    shared = {rule.name for rule in RULES.values() if ALL_PROTOCOLS in rule.protocols}
    assert shared <= {rule.name for rule in rules_for("sse")}
    assert "missing_finish_reason" in {rule.name for rule in rules_for("gemini")}
    assert "missing_finish_reason" not in {rule.name for rule in rules_for("sse")}
