"""Inside the package, a function or class is imported from the module that defines it."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "streamguard"


def _imports() -> list[tuple[str, str, str]]:
    """(importing file, module, name) for every ``from streamguard... import name``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamguard"):
                rel = str(path.relative_to(PACKAGE.parent))
                found.extend((rel, node.module or "", alias.name) for alias in node.names)
    return found


#: Modules that relay on purpose: the one public module a protocol is written against.
FACADES = frozenset({"streamguard.protocols.engine"})


def test_names_are_imported_from_the_module_that_defines_them() -> None:
    """A relay through another module hides where the code lives (facades excepted)."""
    relayed = []
    for where, module_name, name in _imports():
        module = importlib.import_module(module_name)
        if hasattr(module, "__path__") or module_name in FACADES:
            continue  # a package's __init__, or a facade, relays on purpose
        value = getattr(module, name, None)
        if (inspect.isfunction(value) or inspect.isclass(value)) and (
            value.__module__ != module_name
        ):
            relayed.append(f"{where}: {name} from {module_name}, defined in {value.__module__}")
    assert relayed == []


def test_the_assertion_module_exports_only_its_own() -> None:
    """streamguard.testing._assert no longer re-exports format_finding."""
    from streamguard.testing import _assert

    assert "format_finding" not in _assert.__all__
