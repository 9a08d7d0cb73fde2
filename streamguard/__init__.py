"""streamguard: watch LLM-style Server-Sent-Event streams as they leave your app.

Checks framing and each protocol's terminal rules frame by frame, without buffering and
without changing a byte, and reports what it finds. The public names:

* ``StreamGuardMiddleware``: the pure ASGI middleware (``streamguard.middleware``);
* ``check_stream``: check captured body bytes offline; ``StreamMonitor``: check one stream
  as its bytes arrive, told how it ``StreamEnd``-ed (``streamguard.monitor``);
* ``StreamReport``, ``Finding``, ``Outcome``, ``Severity``: what a check produces
  (``streamguard.report``);
* ``RULES``: every ``Rule`` by name, the catalog behind metrics, logs and docs
  (``streamguard.rules``);
* ``EventParser``, ``Event``: the incremental WHATWG event-stream parser
  (``streamguard.sse``);
* ``compiled``: whether this process runs the core compiled with mypyc or as pure Python
  (``STREAMGUARD_PURE_PYTHON=1`` asks for the latter; ``streamguard._build``).

Each is imported on first use, from the module that defines it: the sans-I/O core
(``streamguard.sse``, ``streamguard.monitor``) loads without Starlette, structlog or
prometheus-client.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from streamguard import _build

if _build.wants_sources():  # before any core module loads: the two builds never mix
    _build.prefer_sources()

if TYPE_CHECKING:
    from streamguard.middleware import StreamGuardMiddleware
    from streamguard.monitor import StreamEnd, StreamMonitor, check_stream
    from streamguard.report import Finding, Outcome, Severity, StreamReport
    from streamguard.rules import RULES, Rule
    from streamguard.sse import Event, EventParser

    compiled: bool

__all__ = [
    "RULES",
    "Event",
    "EventParser",
    "Finding",
    "Outcome",
    "Rule",
    "Severity",
    "StreamEnd",
    "StreamGuardMiddleware",
    "StreamMonitor",
    "StreamReport",
    "check_stream",
    "compiled",
]

__version__ = "0.1.0"

#: Where each public name is defined.
_SOURCES = {
    "RULES": "streamguard.rules",
    "Event": "streamguard.sse",
    "EventParser": "streamguard.sse",
    "Finding": "streamguard.report",
    "Outcome": "streamguard.report",
    "Rule": "streamguard.rules",
    "Severity": "streamguard.report",
    "StreamEnd": "streamguard.monitor",
    "StreamGuardMiddleware": "streamguard.middleware",
    "StreamMonitor": "streamguard.monitor",
    "StreamReport": "streamguard.report",
    "check_stream": "streamguard.monitor",
    "compiled": "streamguard._build",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'streamguard' has no attribute {name!r}")
    value = getattr(importlib.import_module(source), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The public names and the public submodules loaded so far; not what this module
    imports for its own use (``Any``, ``TYPE_CHECKING``, ``importlib``, ...)."""
    submodules = [
        name
        for name, value in globals().items()
        if isinstance(value, ModuleType)
        and value.__name__ == f"{__name__}.{name}"
        and not name.startswith("_")
    ]
    return sorted({*__all__, "__version__", *submodules})
