"""What one protocol declares: a ``ProtocolSpec``, the single thing a protocol module exports.

Theory of operation
-------------------

Everything outside a protocol's own checker needs a few facts about it: the name it is
configured and labelled by, how ``protocol="auto"`` recognises it, which SSE event names it
defines (shown in messages as they are, and cached by the parser), which request facts
its checker reads and whether it reads the request's head, and the rules and rule docs it
brings. A protocol states them once, in its
module's ``SPEC``; the registry (``streamguard.protocols``) derives from the specs what
used to be written by hand in ten places: the checkers by name, the detection order, the
event names, which protocols raise which rule, the request facts read.

Detection is a list of signals, each a test with a rank: the registry merges the signals of
every protocol and tries them in rank order (lowest first), so a strong signal of one
protocol (Anthropic's event names) is tried before a weak one of another (the AI SDK's
default path). Most ranks of the built-in protocols are multiples of ten, and a few sit
between them (Cohere's, LangGraph's and A2A's), so a protocol of one's own can slot its
signals between any two.

A spec is plain data, checked when it is registered (``streamguard.protocols.register``):
a name clash, a checker whose ``name`` differs from the spec's, a rule declared twice, a
rule name that is not snake_case (or is over 64 characters), a rule without its doc (or a
doc without its rule), or a request fact that two readers set is a ``ValueError`` that
names it; a ``RAISES`` that is not a frozenset of ``Rule`` objects a ``TypeError``.

Every hook a spec hands the engine (its checker, its signals, its request readers) runs
behind a guard: whatever it raises, cancellation aside, is contained and counted, and a
finding of a rule the protocol does not declare is refused (``docs/plugins.md``, "The
boundary").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from streamguard.protocols._base import Checker
from streamguard.request import RequestFact
from streamguard.rule_docs._base import RuleDoc
from streamguard.rules import Rule
from streamguard.sse import Event

__all__ = [
    "NOT_JSON",
    "EventTest",
    "HeadersTest",
    "PathTest",
    "ProtocolSpec",
    "Signal",
]

_T = TypeVar("_T")

#: A path test sees the request path without its trailing slashes.
PathTest = Callable[[str], bool]
#: A headers test sees the response headers as raw ``(name, value)`` byte pairs.
HeadersTest = Callable[[Iterable[tuple[bytes, bytes]]], bool]
#: An event test sees the event and its data parsed as JSON, or ``NOT_JSON``.
EventTest = Callable[[Event, object], bool]


class _NotJSON:
    """The payload an event test sees when the event's data is not JSON."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


#: What an event test gets for data that does not parse as JSON (or does not start as it).
NOT_JSON: object = _NotJSON()


@dataclass(frozen=True, slots=True)
class Signal(Generic[_T]):
    """One way ``protocol="auto"`` recognises a protocol: ``test`` says yes or no, and the
    signals of every protocol are tried by ``rank``, lowest first."""

    rank: int
    test: _T


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolSpec:
    """Everything the engine, the seams and the docs know of one protocol."""

    #: The name routes are configured by and reports and metric labels carry.
    name: str
    #: The protocol's checker; its ``name`` is the spec's.
    checker: type[Checker]
    #: One line: what streams this is, for listings.
    summary: str
    #: Signals that the request path names the protocol (``protocol_source = "path"``).
    paths: tuple[Signal[PathTest], ...] = ()
    #: Signals that the response headers declare it (``protocol_source = "header"``).
    headers: tuple[Signal[HeadersTest], ...] = ()
    #: Signals that one event proves it (``protocol_source = "event"``).
    events: tuple[Signal[EventTest], ...] = ()
    #: The SSE event names the protocol defines: messages show them as they are (any other
    #: name from the wire only by size and hash), and the parser keeps them interned.
    event_names: frozenset[str] = frozenset()
    #: The request facts the checker reads beyond the generic ones (``stream`` and the
    #: head's): each a set of keys and their bounded reader. Protocols that read the same
    #: facts (MCP and A2A, the JSON-RPC ids) declare the same ``RequestFact``.
    request_facts: tuple[RequestFact, ...] = ()
    #: Whether the checker reads the request's head (``http_method``, ``last_event_id``)
    #: even when no body was read; otherwise such a request is unknown to it.
    reads_request_head: bool = False
    #: Whether the checker takes the route's ``json`` option (plain SSE's promise that its
    #: data is JSON).
    takes_json_option: bool = False
    #: Rules of the protocol's own that the built-in catalog does not hold (a protocol
    #: written outside the package declares its rules here); added to the catalog when the
    #: spec is registered.
    rules: tuple[Rule, ...] = ()
    #: The long form of those rules, for ``streamguard rules`` and the docs.
    rule_docs: tuple[RuleDoc, ...] = ()
