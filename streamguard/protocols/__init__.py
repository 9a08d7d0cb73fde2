"""The protocol registry: every protocol's ``ProtocolSpec``, and what is derived from them.

A protocol is one module that exports one ``ProtocolSpec`` (``streamguard.protocols._spec``):
its name, checker, detection signals, event names, the request facts its checker reads
and, for a protocol written outside the package, its rules and their docs. The registry
holds the specs by name; everything else reads them from here: ``CHECKERS`` (the checker
of each name), the detection order of ``protocol="auto"`` (``streamguard.protocols.auto``),
the event names messages show and the parser keeps interned, which protocols raise each
rule (``streamguard.rules``), and which request facts are read (below).

The built-in protocols are registered when this package is imported; the protocols that
installed distributions name in the entry-point group ``streamguard.protocols`` (each a
``ProtocolSpec``) when a protocol is first looked up (``load_plugins``); and whatever a
program registers itself (``register``). A plugin that fails to load is skipped with a
warning that names it: a broken plugin never breaks streamguard, and a route configured
with its protocol is then an unknown protocol.

``"auto"`` is not a checker: the monitor holds an auto-detected stream's first events and
builds the checker its protocol names (``streamguard.monitor``).

Every request is read for the union of the registered protocols' ``request_facts``, which
the registry hands to ``streamguard.request`` on every change (``share_request_facts``); a
seam that knows a route's protocol may read only that protocol's
(``request_facts_read_by``). Request facts that hold only the request's head (the HTTP
method, ``Last-Event-ID``; see ``streamguard.request.add_http_facts``) reach only the
checkers whose spec reads the head (``reads_request_head``): to the others, a request
whose body was not read is an unknown request, as it always was.
"""

from __future__ import annotations

from streamguard.protocols import (
    a2a,
    ag_ui,
    ai_sdk_ui,
    anthropic,
    cohere,
    gemini,
    langgraph,
    mcp,
    openai_chat,
    openai_responses,
)
from streamguard.protocols import sse as plain_sse
from streamguard.protocols._base import Checker, terminated_lifecycle
from streamguard.protocols._lifecycle import ERROR, OTHER, TERMINAL
from streamguard.protocols._registry import (
    AUTO,
    CHECKERS,
    ENTRY_POINT_GROUP,
    MAX_RULE_NAME_CHARS,
    PLUGIN_RULES,
    SPECS,
    event_signals,
    header_signals,
    load_plugins,
    make_checker,
    path_signals,
    reader_of,
    register,
    register_built_in,
    request_facts_read_by,
    unregister,
)
from streamguard.protocols._spec import NOT_JSON, ProtocolSpec, Signal
from streamguard.protocols.anthropic import AnthropicChecker
from streamguard.protocols.gemini import GeminiChecker
from streamguard.protocols.sse import PlainSSEChecker

__all__ = [
    "AUTO",
    "BUILT_IN",
    "CHECKERS",
    "ENTRY_POINT_GROUP",
    "ERROR",
    "MAX_RULE_NAME_CHARS",
    "NOT_JSON",
    "OTHER",
    "PLUGIN_RULES",
    "SPECS",
    "TERMINAL",
    "AnthropicChecker",
    "Checker",
    "GeminiChecker",
    "PlainSSEChecker",
    "ProtocolSpec",
    "Signal",
    "event_signals",
    "header_signals",
    "load_plugins",
    "make_checker",
    "path_signals",
    "reader_of",
    "register",
    "request_facts_read_by",
    "terminated_lifecycle",
    "unregister",
]

#: The built-in protocols, in the order listings show them.
BUILT_IN: tuple[ProtocolSpec, ...] = (
    plain_sse.SPEC,
    openai_chat.SPEC,
    openai_responses.SPEC,
    anthropic.SPEC,
    gemini.SPEC,
    ai_sdk_ui.SPEC,
    ag_ui.SPEC,
    mcp.SPEC,
    a2a.SPEC,
    langgraph.SPEC,
    cohere.SPEC,
)

register_built_in(BUILT_IN)
