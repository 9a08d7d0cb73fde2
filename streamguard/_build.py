"""Which modules make up the compiled core, and which build of them this process loaded.

The sans-I/O core (the parser, the checkers, the monitor and the values they produce) is
compiled with mypyc when the package is built where a C compiler is available: ``setup.py``
reads ``COMPILED_MODULES`` from here, and a compiled module is an extension module sitting
beside its ``.py`` source, which Python's import system prefers. Nothing else differs: the
source is the same, and a build without a compiler simply has no extension modules.

``STREAMGUARD_PURE_PYTHON=1`` in the environment makes this process import the ``.py``
sources even where extension modules are present (``prefer_sources``, installed by the
package ``__init__`` before any core module is imported): to compare the two builds, or to
rule the compiled one out when diagnosing. ``compiled`` says which one was loaded.

``setup.py`` and the test tiers load this file by its path, before anything is installed:
it imports nothing but the standard library. A built-in protocol needs no entry here: every
module of ``streamguard/protocols`` is compiled unless ``INTERPRETED_PROTOCOL_MODULES``
names it.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import (
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    ModuleSpec,
    SourceFileLoader,
)
from pathlib import Path
from types import ModuleType

__all__ = [
    "COMPILED_MODULES",
    "CORE_MODULES",
    "INTERPRETED_PROTOCOL_MODULES",
    "NATIVE_MODULES",
    "PURE_PYTHON_ENV",
    "compiled",  # noqa: F822 (module __getattr__)
    "prefer_sources",
    "protocol_modules",
    "wants_sources",
]

#: The modules mypyc compiles besides the protocols: the per-frame path and what it calls.
#: Kept interpreted: everything that talks to Starlette, structlog, prometheus-client, the
#: CLI or the network, which runs per stream, not per frame.
CORE_MODULES: tuple[str, ...] = (
    "streamguard._forward",
    "streamguard._wire",
    "streamguard.liveness",
    "streamguard.monitor",
    "streamguard.report",
    "streamguard.request",
    "streamguard.rules",
    "streamguard.sse",
)

#: The modules of ``streamguard/protocols`` kept interpreted: the package itself (a
#: compiled package cannot find an interpreted submodule; it only registers the built-in
#: protocols) and the registry (``_registry``: nothing of it runs per event), ``_spec``
#: (the declaration a protocol written outside the package also builds) and ``engine``
#: (names relayed from the modules that define them: the compiled protocols that import
#: from it reach those directly).
INTERPRETED_PROTOCOL_MODULES: frozenset[str] = frozenset(
    {"__init__", "_registry", "_spec", "engine"}
)


def protocol_modules(package_dir: Path) -> tuple[str, ...]:
    """The compiled modules of ``streamguard/protocols``, found in ``package_dir`` (the
    ``streamguard`` directory): each ``.py`` file not kept interpreted, sorted."""
    names = {path.stem for path in (package_dir / "protocols").glob("*.py")}
    return tuple(
        f"streamguard.protocols.{name}" for name in sorted(names - INTERPRETED_PROTOCOL_MODULES)
    )


#: The modules mypyc compiles.
COMPILED_MODULES: tuple[str, ...] = CORE_MODULES + protocol_modules(Path(__file__).parent)

#: The native kernel, written in C (``streamguard/_kernel.c``): built with the compiled core
#: and used only by it (``streamguard.sse.skim_frame``); the pure-Python core runs the
#: same definitions in Python. Issue 45 allowed it where mypyc could not reach the per-frame
#: budgets: docs/performance.md, "The native kernel", has the figures.
NATIVE_MODULES: tuple[str, ...] = ("streamguard._kernel",)

#: Set to ``1`` (or ``true``/``yes``) to import the pure-Python core even where the
#: compiled one is installed.
PURE_PYTHON_ENV = "STREAMGUARD_PURE_PYTHON"


def wants_sources() -> bool:
    """Whether the environment asks for the pure-Python core."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in ("1", "true", "yes")


class _SourceFinder(MetaPathFinder):
    """Finds the core modules' ``.py`` files, ignoring the extension modules beside them."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in COMPILED_MODULES:
            return None
        for entry in path if path is not None else sys.path:
            spec = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(fullname)
            if spec is not None and spec.loader is not None:  # not a bare directory
                return spec
        return None


def prefer_sources() -> None:
    """Import the core from its ``.py`` files from now on (idempotent).

    Must run before the first core module is imported: a module already loaded stays what
    it is, and the compiled and pure classes must never meet in one process.
    """
    if not any(isinstance(finder, _SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def __getattr__(name: str) -> bool:
    """``compiled``: whether this process runs the compiled core or the pure-Python one.

    Worked out on first use (PEP 562), by importing the parser: importing this module
    must not load the core, since ``prefer_sources`` has to run first.
    """
    if name != "compiled":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    spec = importlib.import_module("streamguard.sse").__spec__
    value = spec is not None and isinstance(spec.loader, ExtensionFileLoader)
    globals()[name] = value  # later lookups skip this function
    return value
