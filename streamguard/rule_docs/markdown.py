"""The rules page: the catalog and each rule's long form, as the markdown of ``docs/rules.md``."""

from __future__ import annotations

from streamguard.rule_docs import get_rule_doc
from streamguard.rules import RULES

__all__ = ["rules_markdown"]


def rules_markdown() -> str:
    """The rule catalog as a docs page: an index, then one section per rule.

    Each section carries an explicit HTML anchor equal to the fragment of ``Rule.anchor``
    (``invalid_utf8`` -> ``#invalid-utf8``), so links from logs, metrics and alerts land.
    Under the one-line summary from ``streamguard.rules`` come the long form from
    the modules beside this one: what the rule means, why clients break, an example frame
    and how to fix it. ``docs/rules.md`` is this text (``tests/test_docs.py`` checks it).
    """
    lines = [
        "# Rules",
        "",
        "Every finding names one of these rules. Names are stable: dashboards and alerts "
        "select on them, and a published name is never renamed. Severities: `error` "
        "(the stream is *malformed*: a client following the protocol can fail or lose data), "
        "`warning` (legal or tolerated by the official clients, but fragile or known to break "
        "some client) and `info` (worth knowing, harmless by itself). `protocols` says which "
        "checkers can report the rule; `all` means any stream, plain SSE included.",
        "",
        "`streamguard rules` prints this catalog as a table. In tests, "
        "`assert_stream_ok(..., allow=[...])`, the `streamguard_allow` marker and the "
        "`streamguard_allow` ini option take these names.",
        "",
        "| rule | protocols | severity | summary |",
        "|---|---|---|---|",
    ]
    for rule in RULES.values():
        fragment = rule.anchor.partition("#")[2]
        summary = rule.summary.replace("|", "\\|")
        lines.append(
            f"| [`{rule.name}`](#{fragment}) | {', '.join(rule.protocols)} | "
            f"{rule.severity.value} | {summary} |"
        )
    for rule in RULES.values():
        fragment = rule.anchor.partition("#")[2]
        doc = get_rule_doc(rule.name)
        lines += [
            "",
            f'<a id="{fragment}"></a>',
            "",
            f"## `{rule.name}`",
            "",
            f"**Severity:** {rule.severity.value} · **Protocols:** {', '.join(rule.protocols)}",
            "",
            rule.summary,
            "",
            f"**What it means.** {doc.meaning}",
            "",
            f"**Why clients break.** {doc.why_clients_break}",
            "",
            "**Example.**",
            "",
            "```text",
            doc.example,
            "```",
        ]
        if doc.example_note:
            lines += ["", doc.example_note]
        lines += ["", f"**How to fix.** {doc.fix}"]
    lines += [
        "",
        "---",
        "",
        "*Generated from `streamguard/rules.py` and `streamguard/rule_docs/` by "
        "`streamguard rules --format markdown > docs/rules.md`; edit those files, not this "
        "page.*",
    ]
    return "\n".join(lines) + "\n"
