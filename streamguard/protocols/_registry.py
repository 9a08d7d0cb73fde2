"""The protocol registry's machinery: the registered specs, and what is derived from them
(``streamguard.protocols`` says how; it registers the built-in protocols here).

It imports no protocol, so that ``streamguard.protocols.engine``, which every protocol
imports, can offer ``register`` to a plugin's module without an import cycle.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from streamguard import rules
from streamguard.protocols._base import KNOWN_EVENT_NAMES, Checker
from streamguard.protocols._spec import ProtocolSpec, Signal
from streamguard.request import (
    GENERIC_FACT_KEYS,
    RequestFact,
    RequestFacts,
    share_request_facts,
)
from streamguard.rule_docs import index_protocol_docs
from streamguard.rules import Rule
from streamguard.sse import share_event_names

__all__ = [
    "AUTO",
    "CHECKERS",
    "ENTRY_POINT_GROUP",
    "MAX_RULE_NAME_CHARS",
    "PLUGIN_RULES",
    "SPECS",
    "event_signals",
    "header_signals",
    "load_plugins",
    "make_checker",
    "path_signals",
    "reader_of",
    "register",
    "register_built_in",
    "request_facts_read_by",
    "unregister",
]

#: The protocol setting that asks the monitor to detect the protocol of each stream.
AUTO = "auto"
#: The entry-point group an installed distribution names its protocols' specs in.
ENTRY_POINT_GROUP = "streamguard.protocols"

#: The built-in protocols' specs (``register_built_in``): their rules are the catalog's.
_built_in: list[ProtocolSpec] = []
_specs: dict[str, ProtocolSpec] = {}
#: Every registered protocol's spec, by name, in registration order (read-only).
SPECS: Mapping[str, ProtocolSpec] = MappingProxyType(_specs)
#: Every registered protocol's checker, by name, in registration order. Written by
#: ``register`` and ``unregister`` only.
CHECKERS: dict[str, type[Checker]] = {}

#: The rules each protocol *not* built in may make findings of (its checker's ``RAISES``,
#: its lifecycle's rules and the rules of every stream), by protocol name: a finding of
#: any other rule is refused as it is made (``StreamMonitor``), so a plugin never gives a
#: rule the catalog does not hold (one named from the wire) a metric series or a log line.
#: Built-in checkers are not looked up here: their findings are held to the catalog by
#: their tests and the fuzz targets.
PLUGIN_RULES: dict[str, frozenset[str]] = {}

#: The detection signals of every protocol, merged and sorted by rank: (rank, test, name).
path_signals: list[tuple[int, Any, str]] = []
header_signals: list[tuple[int, Any, str]] = []
event_signals: list[tuple[int, Any, str]] = []


def register(spec: ProtocolSpec) -> None:
    """Make ``spec``'s protocol known everywhere a built-in one is: routes, ``"auto"``,
    the CLI, the pytest helpers, metrics labels and the rule catalog.

    Registering the same spec again does nothing. Another spec under a taken name, a
    checker that is no ``Checker`` or whose ``name`` is not the spec's, a rule that
    clashes with the catalog, a rule the metrics and the docs could not carry (a name that
    is not snake_case or is over ``MAX_RULE_NAME_CHARS``, a rule without its doc or a doc
    without its rule) or a ``RAISES`` that is not a frozenset of ``Rule`` objects is an
    error that names it, and nothing is registered.
    """
    if not isinstance(spec, ProtocolSpec):
        raise TypeError(f"register() takes a ProtocolSpec, not {type(spec).__name__}")
    name = spec.name
    if _specs.get(name) is spec:
        return
    if name in _specs or name == AUTO:
        raise ValueError(f"protocol {name!r} is registered already")
    checker = spec.checker
    if not (isinstance(checker, type) and issubclass(checker, Checker)):
        raise TypeError(f"protocol {name!r}: its checker must be a Checker subclass")
    if checker.name != name:
        raise ValueError(
            f"protocol {name!r}: its checker {checker.__name__} is named {checker.name!r}; "
            f"set the class's name to {name!r}"
        )
    _check_rules(spec)
    try:
        _index([*_specs.values(), spec])
        _check_docs(spec)  # (after a clash with the catalog, which says more)
    except Exception:
        _index(list(_specs.values()))  # as it was: a refused spec leaves no trace
        raise
    _specs[name] = spec
    CHECKERS[name] = checker


#: What a rule's name may be: snake_case, as every built-in rule's is, and short. It is a
#: label value of ``streamguard_violations_total`` and part of a docs anchor.
_RULE_NAME = re.compile(r"[a-z][a-z0-9_]*")
MAX_RULE_NAME_CHARS = 64


def _check_rules(spec: ProtocolSpec) -> None:
    """Refuse what a spec says of its rules that the catalog, the docs and the metrics could
    not carry: a ``TypeError`` or ``ValueError`` that names it and says what to change.

    ``rules``: ``Rule`` objects with snake_case names of at most ``MAX_RULE_NAME_CHARS``
    (``_check_docs``: each documented, once the catalog took them). The checker's
    ``RAISES``: a frozenset of ``Rule`` objects (whether each is in the catalog is checked
    when the catalog is indexed).
    What a checker raises and does not declare cannot be seen here: such a finding is
    refused when it is made (``StreamMonitor``, ``UndeclaredRule``).
    """
    name = spec.name
    raises = spec.checker.RAISES
    if not isinstance(raises, frozenset) or not all(isinstance(r, Rule) for r in raises):
        raise TypeError(
            f"protocol {name!r}: its checker's RAISES must be a frozenset of Rule objects "
            "(streamguard.rules), such as frozenset({INVALID_JSON, MY_RULE})"
        )
    for rule in spec.rules:
        if not isinstance(rule, Rule):
            raise TypeError(
                f"protocol {name!r}: its rules must be Rule objects (streamguard.rules)"
            )
        if len(rule.name) > MAX_RULE_NAME_CHARS:
            raise ValueError(
                f"protocol {name!r}: a rule's name is {len(rule.name)} characters; rule names "
                f"are at most {MAX_RULE_NAME_CHARS} characters"
            )
        if not _RULE_NAME.fullmatch(rule.name):
            raise ValueError(
                f"protocol {name!r}: rule {rule.name!r}: rule names are snake_case "
                "(lowercase letters, digits and underscores, starting with a letter)"
            )


def _check_docs(spec: ProtocolSpec) -> None:
    """Refuse a spec whose own rules and their docs do not match one for one (the rules
    page has a section per rule): a ``ValueError`` that says what to add or drop."""
    name = spec.name
    own = {rule.name for rule in spec.rules}
    documented = {doc.name for doc in spec.rule_docs}
    for rule in spec.rules:
        if rule.name not in documented:
            raise ValueError(
                f"protocol {name!r}: rule {rule.name!r} has no rule_docs entry; add "
                f"rule_doc({rule.name!r}, meaning=..., clients=..., example=..., fix=...) "
                "to the spec's rule_docs (streamguard.rule_docs.rule_doc)"
            )
    extra = sorted(documented - own)
    if extra:
        raise ValueError(
            f"protocol {name!r}: its rule_docs documents {extra[0]!r}, which is not one of "
            "its rules; declare the rule in the spec's rules, or drop its doc"
        )


def unregister(name: str) -> None:
    """Forget protocol ``name`` (a test's, or a plugin being reloaded); a ``KeyError`` for
    a protocol not registered."""
    if name not in _specs:
        raise KeyError(f"protocol {name!r} is not registered")
    _index([spec for spec in _specs.values() if spec.name != name])
    del _specs[name]
    CHECKERS.pop(name, None)


def _index(specs: list[ProtocolSpec]) -> None:
    """Derive from ``specs`` what the rest of streamguard reads: the request facts and the
    rule catalog's index and docs first, since they alone can refuse."""
    read = _request_facts(specs)
    index_protocol_docs(doc for spec in specs for doc in spec.rule_docs)
    rules.index_protocols(
        (
            spec.name,
            spec.checker.RAISES | spec.checker.LIFECYCLE.rules,
            spec.checker.SKIPS,
            spec.rules,
        )
        for spec in specs
    )
    PLUGIN_RULES.clear()
    PLUGIN_RULES.update(
        (spec.name, frozenset(rule.name for rule in rules.rules_for(spec.name)))
        for spec in specs
        if not any(spec is built_in for built_in in _built_in)
    )
    path_signals[:] = _merged((spec.name, spec.paths) for spec in specs)
    header_signals[:] = _merged((spec.name, spec.headers) for spec in specs)
    event_signals[:] = _merged((spec.name, spec.events) for spec in specs)
    names = [name for spec in specs for name in sorted(spec.event_names)]
    KNOWN_EVENT_NAMES.clear()
    KNOWN_EVENT_NAMES.update(names)
    share_event_names(names)
    share_request_facts(read)


def _request_facts(specs: list[ProtocolSpec]) -> list[RequestFact]:
    """Every reader the ``specs`` declare, once each, in order; a ``ValueError`` when two
    readers would set the same fact (a protocol's own reader must use keys of its own, or
    declare the same ``RequestFact`` as the protocol it shares them with)."""
    read: list[RequestFact] = []
    setters: dict[str, str] = {}  # fact key -> the protocol whose reader sets it
    for spec in specs:
        for fact in spec.request_facts:
            if any(fact is other for other in read):
                continue
            for key in fact.keys:
                if key in GENERIC_FACT_KEYS or key in setters:
                    owner = setters.get(key, "every request")
                    raise ValueError(
                        f"protocol {spec.name!r}: the request fact {key!r} is read already "
                        f"(for {owner}); name a key of its own"
                    )
                setters[key] = spec.name
            read.append(fact)
    return read


def reader_of(fact: RequestFact) -> str:
    """The protocol that declares request fact ``fact`` (the first registered, for a fact
    two protocols share), to name it when its reader fails; ``"unknown"`` if none does."""
    for spec in _specs.values():
        if any(fact is own for own in spec.request_facts):
            return spec.name
    return "unknown"


def request_facts_read_by(protocol: str) -> tuple[RequestFact, ...] | None:
    """The readers a request answered under ``protocol`` needs: its spec's; None (every
    registered protocol's, ``RequestFacts``' default) for ``"auto"`` or a name not
    registered, whose stream may turn out to be of any protocol. A protocol looked up here
    first may be an installed plugin's: they are loaded (``load_plugins``)."""
    spec = _specs.get(protocol)
    if spec is None and protocol != AUTO:
        load_plugins()
        spec = _specs.get(protocol)
    return None if spec is None else spec.request_facts


def _merged(
    signals: Iterable[tuple[str, tuple[Signal[Any], ...]]],
) -> list[tuple[int, Any, str]]:
    """Every protocol's signals of one kind as (rank, test, protocol), tried by rank."""
    merged = [(signal.rank, signal.test, name) for name, own in signals for signal in own]
    merged.sort(key=lambda signal: signal[0])  # stable: a tie goes to the first registered
    return merged


_plugins_loaded = False


def load_plugins() -> None:
    """Register the protocols installed distributions name in the entry-point group
    ``streamguard.protocols``, once per process. Called where a protocol is first looked up
    (``make_checker``, route configuration, detection, the CLI), not at import: a plugin's
    module may import any part of streamguard, which is then fully imported."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            register(entry_point.load())
        except Exception as exc:
            warnings.warn(
                f"streamguard: the protocol plugin {entry_point.name!r} ({entry_point.value}) "
                f"was not registered: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )


def make_checker(
    protocol: str,
    request: Mapping[str, Any] | None = None,
    path: str | None = None,
    *,
    json_data: bool = False,
) -> Checker:
    """A checker for ``protocol``, one of ``CHECKERS``.

    ``"auto"`` is a ``ValueError``: detection needs the stream's first events, which the
    monitor holds (``StreamMonitor("auto", ...)``). ``json_data`` is a plain-SSE route's
    promise that its data is JSON (``{"protocol": "sse", "json": true}`` in the route's
    configuration): the plain checker then reports data that does not parse. The other
    protocols define their payloads themselves and ignore it.
    """
    checker_class = CHECKERS.get(protocol)
    if checker_class is None:
        load_plugins()
        checker_class = CHECKERS.get(protocol)
    if checker_class is None:
        if protocol == AUTO:
            raise ValueError(
                "protocol 'auto' is detected per stream by StreamMonitor, not a checker"
            ) from None
        known = ", ".join(sorted([AUTO, *CHECKERS]))
        raise ValueError(f"unknown protocol {protocol!r}; expected one of: {known}") from None
    spec = _specs.get(protocol)
    if (
        type(request) is RequestFacts
        and not request.body_read
        and not (spec is not None and spec.reads_request_head)
    ):
        request = None  # no body was read: the request is unknown to a body-reading check
    if json_data and spec is not None and spec.takes_json_option:
        return checker_class(request, path, json_data=True)  # type: ignore[call-arg]
    return checker_class(request, path)


def register_built_in(specs: Iterable[ProtocolSpec]) -> None:
    """Register the built-in protocols (``streamguard.protocols`` does, when imported)."""
    for spec in specs:
        _built_in.append(spec)
        register(spec)
