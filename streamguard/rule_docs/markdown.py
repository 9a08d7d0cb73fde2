"""The rules page: the catalog and each rule's long form, as the markdown of ``docs/rules.md``."""

from __future__ import annotations

from types import ModuleType
from typing import Final

from streamguard.protocols import (
    _generated_cohere,
    _generated_openai_chat,
    _generated_openai_responses,
)
from streamguard.rule_docs import get_rule_doc
from streamguard.rules import RULES

__all__ = ["GENERATED_SHAPES", "rules_markdown"]

#: The modules ``tools/shapes.py`` writes, by protocol (each names its client and version).
GENERATED_SHAPES: Final[dict[str, ModuleType]] = {
    "cohere": _generated_cohere,
    "openai_chat": _generated_openai_chat,
    "openai_responses": _generated_openai_responses,
}


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
        "select on them, and a published name is never renamed. Each rule has one severity, "
        "set by the rule below; `protocols` says which checkers can report the rule; `all` "
        "means any stream, plain SSE included.",
        "",
        '<a id="severity"></a>',
        "",
        "## How severe a rule is",
        "",
        "Severity follows the official clients of the protocol (openai, anthropic, "
        "google-genai, the MCP SDK, the `ai` package, `@ag-ui/client`, ...):",
        "",
        "- **error**: an official client of the protocol raises, rejects the stream, or "
        "silently loses or misattributes data on it. A stream with an error finding is "
        "*malformed*.",
        "- **warning**: the official clients cope, but the protocol's docs are broken, or a "
        "common relay or client trips on it.",
        "- **info**: worth knowing, harmless by itself.",
        "",
        "The oracle suite (`tests/test_oracle.py`) holds this: the official clients read every "
        "fixture and seeded mutants of the healthy ones (an event dropped, duplicated or "
        "swapped, the body cut mid-frame, a value retyped), and the suite fails when a client "
        "fails on a body that streamguard reports with no error finding and no failing "
        "outcome, or when a healthy fixture gets an error. The few known, argued "
        "disagreements (a client stricter than the spec, a protocol-version difference, an "
        "SDK that raises by design on a complete stream, such as the openai stream helper on "
        "a `length` finish) are listed with their reason in one table, "
        "`tests/oracle/exceptions.py`.",
        "",
        '<a id="generated-shapes"></a>',
        "",
        "## Shapes generated from the clients",
        "",
        "Where a protocol's payload shapes are generated from its official client's own "
        "models (`tools/shapes.py`, `make shapes`), a payload that client's models refuse is "
        "a `schema_mismatch` exactly where the client refuses it; "
        "`tests/test_shapes_generated.py` fails when the installed client, at the pinned "
        "version, differs from the checked-in module. openai-python validates no stream "
        "payload (it builds each with `construct_type`, which keeps a value of the wrong "
        "type as sent): there the shape holds the fields its readers use (the SDK's stream "
        "helpers, openai-agents, langchain-openai, the checker's rules), typed as its models "
        "type them and read strictly (`7.0` is no integer), with the few declarations "
        "written by hand, each with its reason, in `tools/shapes.py`; Responses' event "
        "models are merged into one shape, since every event, of a type the SDK knows or "
        "not, is checked.",
        "",
        "| protocol | client | version | models | module |",
        "|---|---|---|---|---|",
        *(
            f"| {protocol} | `{module.CLIENT}` | {module.VERSION} | `{module.SOURCE}` | "
            f"`streamguard/protocols/_generated_{protocol}.py` |"
            for protocol, module in GENERATED_SHAPES.items()
        ),
        "",
        "## Catalog",
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
