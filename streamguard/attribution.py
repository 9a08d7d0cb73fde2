"""Whose bug is it: a gateway's, or its upstream's? The one table that decides.

A gateway (an LLM proxy, a FastAPI relay) reads an upstream stream with an HTTP client and
writes its own stream to its client. With the middleware on its routes and a streamguard
transport on its client, both streams of one request are watched and linked
(``streamguard._session.Relay``), and each finding of the downstream stream is attributed:

* ``upstream``: a linked upstream stream already broke the same way: it has a finding of
  the same *rule class*, or of a class that explains it (a cut upstream explains a missing
  finish downstream), or it ended in a way that is that class (``unclosed``,
  ``connection_lost``: the stream was cut);
* ``gateway``: every linked upstream stream was checked and none broke that way, or the
  rule is one only a gateway can break (``GATEWAY_ONLY``);
* ``unknown``: no upstream stream was linked, or the only ones that could explain it were
  not checked (compressed, left out by the sample).

A stream's end is attributed too, when it is a failure an upstream can cause
(``ATTRIBUTED_OUTCOMES``: an in-band ``error_event``, a body left ``unclosed``, an
``app_error``): a gateway that meets an upstream cut or error often writes a well-formed
in-band error (LiteLLM does), so its stream has no finding to attribute and the end is
what the upstream's failure became. ``upstream`` when a linked upstream stream failed in a
way ``FAILURES`` lists (cut, errored, given up on while silent), ``gateway`` when every
linked upstream stream was checked and completed with no error-severity finding, else
``unknown`` (``attribute_outcome``).

Rule classes are how the mapping crosses protocols: a gateway that translates an
Anthropic upstream into an OpenAI Chat stream turns a missing ``message_stop`` into a
missing ``[DONE]`` (both ``missing_terminal``), and a missing ``message_delta`` (which
carries ``stop_reason``) into a missing ``finish_reason``. A rule not in the table (a
plugin protocol's) is a class of its own: only the same rule upstream explains it.

This module is pure (no I/O, no state): ``CLASSES`` and ``FAILURES`` are the tables,
``attribute`` and ``attribute_outcome`` apply them, and ``markdown_table`` and
``markdown_failures`` render them for ``docs/attribution.md`` (a test keeps the page in
step: ``python -m tests.test_attribution`` rewrites it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from streamguard.report import Finding, Outcome, Severity, StreamReport, UpstreamSummary
from streamguard.rules import RULES

__all__ = [
    "ATTRIBUTED_OUTCOMES",
    "ATTRIBUTIONS",
    "CLASSES",
    "FAILURES",
    "GATEWAY",
    "GATEWAY_ONLY",
    "MAX_LINKED_UPSTREAMS",
    "UNKNOWN",
    "UPSTREAM",
    "RuleClass",
    "UpstreamFailure",
    "UpstreamState",
    "attribute",
    "attribute_outcome",
    "failed_as",
    "findings_by_rule",
    "linked",
    "markdown_failures",
    "markdown_table",
    "rule_class",
    "summary_of",
    "summary_state",
    "upstream_classes",
]

#: The finding was already in an upstream stream of the same request.
UPSTREAM: Final = "upstream"
#: The upstream streams were checked and clean of it: the gateway introduced it.
GATEWAY: Final = "gateway"
#: No upstream stream was watched (or none that could tell was checked).
UNKNOWN: Final = "unknown"
#: The closed set of attributions: the ``attribution`` metric label's values.
ATTRIBUTIONS: Final[tuple[str, ...]] = (UPSTREAM, GATEWAY, UNKNOWN)

#: How many upstream streams one downstream report names; more are counted
#: (``StreamReport.upstreams_dropped``) and neither compared nor watched for leaks. A
#: gateway that fans a request out wider than this is rare, and the report stays bounded.
MAX_LINKED_UPSTREAMS: Final = 8

#: The class of the rules only a gateway's own code can break: the ASGI calls of the app,
#: and the gateway leaving an upstream stream open.
GATEWAY_ONLY: Final = "gateway_only"


class RuleClass(NamedTuple):
    """A way a stream breaks, whatever its protocol."""

    name: str
    #: What breaking this way means, for the docs.
    meaning: str
    #: The rules of every protocol that break this way.
    rules: tuple[str, ...]
    #: The outcomes of an upstream stream that are this class (a cut is an outcome too).
    outcomes: tuple[Outcome, ...] = ()
    #: The other classes whose upstream break explains a downstream finding of this one.
    explained_by: tuple[str, ...] = ()


#: The table: every rule of the built-in protocols, by class. A downstream finding of a
#: class is the upstream's when a linked upstream broke in that class or in one of its
#: ``explained_by`` classes.
CLASSES: Final[tuple[RuleClass, ...]] = (
    RuleClass(
        "cut",
        "the stream stopped before its end: no terminal signal, a last event never finished",
        ("missing_terminal", "unterminated_frame"),
        outcomes=(Outcome.UNCLOSED, Outcome.CONNECTION_LOST),
    ),
    RuleClass(
        "finish",
        "how the answer ended is missing, unknown, repeated, wrong or out of place",
        (
            "missing_finish_reason",
            "missing_message_delta",
            "missing_finish",
            "multiple_finish_reason",
            "unknown_finish_reason",
            "tool_calls_finished_as_stop",
            "unknown_stop_reason",
            "finish_reason_not_last",
            "content_after_finish",
            "chunk_after_finish",
            "done_text_mismatch",
            "status_mismatch",
            "completed_output_empty",
        ),
        explained_by=("cut",),
    ),
    RuleClass(
        "after_end",
        "events after the terminal signal, or the terminal signal twice",
        ("duplicate_terminal", "event_after_terminal"),
    ),
    RuleClass(
        "start",
        "the stream's opening event is missing, repeated or wrong",
        (
            "missing_message_start",
            "duplicate_message_start",
            "prepopulated_message_start",
            "missing_response_created",
            "duplicate_response_created",
            "missing_run_started",
            "duplicate_run_started",
            "role_not_first",
            "role_repeated",
        ),
    ),
    RuleClass(
        "framing",
        "the SSE framing or the bytes themselves",
        (
            "invalid_utf8",
            "event_too_large",
            "unknown_field",
            "event_without_data",
            "crlf_framing",
            "sdk_incompatible_framing",
            "duplicate_event_id",
        ),
    ),
    RuleClass(
        "payload",
        "an event's JSON, its shape or its type",
        (
            "invalid_json",
            "schema_mismatch",
            "envelope_field_missing",
            "unexpected_event_field",
            "unknown_event_type",
            "unknown_chunk_type",
            "event_type_mismatch",
            "event_name_mismatch",
            "invalid_jsonrpc",
            "invalid_state_patch",
            "state_delta_before_snapshot",
        ),
    ),
    RuleClass(
        "identity",
        "the ids that tie the events of one answer together",
        ("inconsistent_id", "response_id_changed", "sequence_gap", "run_id_mismatch"),
    ),
    RuleClass(
        "structure",
        "the parts of the answer (choices, items, blocks, tool calls) and their order",
        (
            "choice_index_invalid",
            "choice_out_of_order",
            "tool_call_index_invalid",
            "tool_call_header_missing",
            "tool_call_header_repeated",
            "tool_call_arguments_invalid",
            "tool_call_function_missing",
            "function_call_mixed",
            "tool_input_invalid",
            "item_out_of_order",
            "item_overlap",
            "item_not_open",
            "item_not_closed",
            "text_not_done",
            "item_status_unexpected",
            "block_index_out_of_order",
            "block_not_started",
            "block_overlap",
            "block_not_stopped",
            "block_open_at_limit",
            "block_after_message_delta",
            "delta_type_mismatch",
            "signature_not_last",
            "id_not_open",
            "id_already_open",
            "id_not_closed",
            "step_not_balanced",
            "tool_result_without_call",
            "duplicate_response",
            "unrequested_response",
            "response_on_standalone_stream",
        ),
    ),
    RuleClass(
        "usage",
        "the token usage: where it comes, how often, whether it adds up",
        (
            "usage_not_last",
            "usage_repeated",
            "usage_missing",
            "usage_unrequested",
            "usage_nonstandard",
            "usage_without_choices",
            "usage_total_mismatch",
            "usage_decreased",
        ),
    ),
    RuleClass(
        "timing",
        "the pace: a stall, a burst, a body left open after its end",
        ("stalled", "buffered_flush", "body_not_ended"),
    ),
    RuleClass(
        "head",
        "the response head (a relay may copy its upstream's headers)",
        ("content_length_on_stream", "bad_content_type_charset", "compressed_stream"),
    ),
    RuleClass(
        GATEWAY_ONLY,
        "the app's own ASGI calls, and upstream streams it left open: never an upstream's",
        ("response_not_finished", "body_after_end", "upstream_left_open"),
    ),
)

_CLASS_OF: Final[dict[str, str]] = {rule: each.name for each in CLASSES for rule in each.rules}
_OUTCOME_CLASSES: Final[dict[Outcome, str]] = {
    outcome: each.name for each in CLASSES for outcome in each.outcomes
}
_EXPLAINED_BY: Final[dict[str, frozenset[str]]] = {
    each.name: frozenset((each.name, *each.explained_by)) for each in CLASSES
}


def rule_class(rule: str) -> str:
    """The class of ``rule``; a rule the table does not hold is a class of its own."""
    return _CLASS_OF.get(rule, rule)


class UpstreamState(NamedTuple):
    """What attribution compares of one upstream stream: its findings' rules so far, how it
    ended (``None``: still open) and whether its frames were checked."""

    rules: Iterable[str]
    outcome: Outcome | None
    inspected: bool


def summary_state(upstream: UpstreamSummary) -> UpstreamState:
    """What attribution compares of an upstream stream a report names: its findings' rules,
    its end and whether it was checked, as the live link compares them (``check
    --upstream`` attributes a capture against another this way)."""
    return UpstreamState(
        tuple(rule for rule, _ in upstream.findings), upstream.outcome, upstream.inspected
    )


def findings_by_rule(findings: Iterable[Finding]) -> tuple[tuple[str, int], ...]:
    """``(rule, count)`` pairs, in the order each rule first came: how a report names an
    upstream stream's findings."""
    counts: dict[str, int] = {}
    for finding in findings:
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    return tuple(counts.items())


def summary_of(report: StreamReport, route: str | None = None) -> UpstreamSummary:
    """An ended upstream stream as a downstream report names it (``check --upstream``
    makes one of a capture's report; a file has no route)."""
    return UpstreamSummary(
        protocol=report.protocol,
        route=route,
        outcome=report.outcome,
        findings=findings_by_rule(report.findings),
        inspected=report.inspected,
        started_at=report.started_at,
        ended_at=report.ended_at,
    )


def linked(report: StreamReport, upstreams: Sequence[UpstreamSummary]) -> StreamReport:
    """``report`` naming its upstream streams, each of its findings and its end attributed:
    what the live link hands the sinks, and what ``check --upstream`` prints."""
    rules = [finding.rule for finding in report.findings]
    states = [summary_state(upstream) for upstream in upstreams]
    return dataclasses.replace(
        report,
        upstreams=tuple(upstreams),
        attribution=attribute(rules, states),
        outcome_attribution=attribute_outcome(report.outcome, states),
    )


def upstream_classes(upstream: UpstreamState) -> frozenset[str]:
    """The classes an upstream stream broke in: its findings', and its end's."""
    classes = {rule_class(rule) for rule in upstream.rules}
    if upstream.outcome is not None and upstream.outcome in _OUTCOME_CLASSES:
        classes.add(_OUTCOME_CLASSES[upstream.outcome])
    return frozenset(classes)


def attribute(rules: Sequence[str], upstreams: Sequence[UpstreamState]) -> tuple[str, ...]:
    """The attribution of each downstream finding (by its rule, in order), given the
    upstream streams linked to it."""
    if not upstreams:
        return (UNKNOWN,) * len(rules)
    broken = frozenset().union(*(upstream_classes(upstream) for upstream in upstreams))
    all_checked = all(upstream.inspected for upstream in upstreams)
    attributed = []
    for rule in rules:
        kind = rule_class(rule)
        if kind == GATEWAY_ONLY:
            attributed.append(GATEWAY)
        elif broken & _EXPLAINED_BY.get(kind, frozenset((kind,))):
            attributed.append(UPSTREAM)
        else:
            attributed.append(GATEWAY if all_checked else UNKNOWN)
    return tuple(attributed)


# -- a stream's end ---------------------------------------------------------------------------

#: The downstream outcomes that are attributed, the closed set of the ``outcome`` label of
#: ``streamguard_attributed_streams_total``: the ends a gateway's stream comes to when its
#: upstream failed. The in-band error the gateway wrote for it (LiteLLM's), the body it
#: left unfinished, the exception its read of the upstream raised through the app (a
#: relay's ``aiter_lines`` raises at a cut). The other ends are no upstream's doing:
#: ``completed``, and ``client_disconnect`` and ``cancelled`` (the client or the server
#: stopped the stream); ``connection_lost`` is a client side's.
ATTRIBUTED_OUTCOMES: Final[tuple[Outcome, ...]] = (
    Outcome.ERROR_EVENT,
    Outcome.UNCLOSED,
    Outcome.APP_ERROR,
)


class UpstreamFailure(NamedTuple):
    """A way an upstream stream fails that explains its gateway's failed end."""

    name: str
    #: What failing this way means, for the docs.
    meaning: str
    #: The upstream's outcomes that are this failure.
    outcomes: tuple[Outcome, ...] = ()
    #: The upstream's findings that are this failure when it was not read to its end (on a
    #: stream that completed, the gateway read past it).
    rules: tuple[str, ...] = ()


#: The table of an end's attribution: a downstream end of ``ATTRIBUTED_OUTCOMES`` is the
#: upstream's when a linked upstream stream failed in one of these ways.
FAILURES: Final[tuple[UpstreamFailure, ...]] = (
    UpstreamFailure(
        "cut",
        "the stream stopped before its end: no terminal signal, or the connection broke",
        outcomes=(Outcome.UNCLOSED, Outcome.CONNECTION_LOST),
    ),
    UpstreamFailure(
        "error",
        "the stream ended with its protocol's in-band error",
        outcomes=(Outcome.ERROR_EVENT,),
    ),
    UpstreamFailure(
        "stall",
        "the stream went silent and was not read to its end: the gateway's read gave up "
        "on it (its read timeout), or was still waiting when its own stream ended",
        rules=("stalled",),
    ),
)


def failed_as(upstream: UpstreamState) -> str | None:
    """The failure (``FAILURES``) an upstream stream shows, or ``None``."""
    rules = frozenset(upstream.rules)
    unfinished = upstream.outcome is not Outcome.COMPLETED
    for failure in FAILURES:
        if upstream.outcome in failure.outcomes:
            return failure.name
        if unfinished and not rules.isdisjoint(failure.rules):
            return failure.name
    return None


def _completed_cleanly(upstream: UpstreamState) -> bool:
    """Checked, read to its end, and with no error-severity finding: an answer every client
    reads whole (the severity rule), so nothing in it made the gateway fail. A rule the
    catalog does not hold counts as an error: it cannot clear the gateway."""
    if not upstream.inspected or upstream.outcome is not Outcome.COMPLETED:
        return False
    for rule in upstream.rules:
        known = RULES.get(rule)
        if known is None or known.severity is Severity.ERROR:
            return False
    return True


def attribute_outcome(outcome: Outcome, upstreams: Sequence[UpstreamState]) -> str | None:
    """Whose a downstream stream's end is, given the upstream streams linked to it;
    ``None`` for an end that is not attributed (not in ``ATTRIBUTED_OUTCOMES``).

    ``upstream`` when any linked upstream failed (``failed_as``), ``gateway`` when every
    one completed cleanly (``_completed_cleanly``), else ``unknown``: none was linked, or
    one was not checked, still open, closed early by the gateway (``client_disconnect``)
    or completed with an error-severity finding, which the gateway may have failed on or
    not."""
    if outcome not in ATTRIBUTED_OUTCOMES:
        return None
    if not upstreams:
        return UNKNOWN
    if any(failed_as(upstream) is not None for upstream in upstreams):
        return UPSTREAM
    if all(_completed_cleanly(upstream) for upstream in upstreams):
        return GATEWAY
    return UNKNOWN


def markdown_table() -> str:
    """``CLASSES`` as the Markdown table of ``docs/attribution.md``."""
    lines = [
        "| class | what broke | rules | upstream outcomes | also the upstream's when it broke as |",
        "|---|---|---|---|---|",
    ]
    for each in CLASSES:
        rules = ", ".join(f"`{rule}`" for rule in each.rules)
        outcomes = ", ".join(f"`{outcome.value}`" for outcome in each.outcomes)
        explained = ", ".join(f"`{name}`" for name in each.explained_by)
        lines.append(f"| `{each.name}` | {each.meaning} | {rules} | {outcomes} | {explained} |")
    return "\n".join(lines) + "\n"


def markdown_failures() -> str:
    """``FAILURES`` as the second Markdown table of ``docs/attribution.md``."""
    lines = [
        "| failure | what the upstream stream showed | its outcomes | its findings, when it "
        "was not read to its end |",
        "|---|---|---|---|",
    ]
    for each in FAILURES:
        outcomes = ", ".join(f"`{outcome.value}`" for outcome in each.outcomes)
        rules = ", ".join(f"`{rule}`" for rule in each.rules)
        lines.append(f"| `{each.name}` | {each.meaning} | {outcomes} | {rules} |")
    return "\n".join(lines) + "\n"
