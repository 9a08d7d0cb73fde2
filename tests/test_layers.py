"""The package's layers: no import cycle, and the low layers load nothing above them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from streamguard.protocols import BUILT_IN, ProtocolSpec
from streamguard.protocols._base import Checker

PACKAGE = Path(__file__).resolve().parent.parent / "streamguard"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import a module can run, those deferred into functions included (a lazy import
    up the layers is a cycle put off, not avoided); not those under ``if TYPE_CHECKING``."""
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for child in ast.walk(statement)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped
    ]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from package import
    name`` is an edge to the submodule when ``name`` is one, else to the package."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, set())
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name in modules)
                continue
            base = node.module or ""
            if node.level:  # relative imports: not used by the package, but read right
                anchor = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    edges.add(submodule)
                elif base in modules:
                    edges.add(base)
        edges.discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    """No module imports, at import time, a module that imports it back."""
    assert _cycle(import_graph()) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a graph with a loop is reported with the loop."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(
    "module",
    ["streamguard.report", "streamguard.rules", "streamguard.sse", "streamguard.request"],
)
def test_a_low_layer_imported_alone_loads_no_protocol(module: str) -> None:
    """The catalog, the parser and the request facts know no protocol module."""
    script = (
        f"import sys, {module}\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('streamguard.protocols')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []


@pytest.mark.parametrize("spec", BUILT_IN, ids=lambda spec: spec.name)
def test_the_engine_owns_each_event_and_the_end(spec: ProtocolSpec) -> None:
    """No built-in checker overrides ``on_event`` or ``on_end``: it has hooks instead."""
    for cls in spec.checker.__mro__[: spec.checker.__mro__.index(Checker)]:
        assert "on_event" not in vars(cls)
        assert "on_end" not in vars(cls)


def _protocol_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each protocol module -> the other protocol modules it imports (the engine's shared
    modules, whose names start with ``_``, its public face ``engine`` and the registry are
    not protocols)."""
    protocols = {
        name
        for name in graph
        if name.startswith("streamguard.protocols.")
        and not name.rpartition(".")[2].startswith("_")
        and name != "streamguard.protocols.engine"
    }
    return {name: graph[name] & protocols for name in protocols}


def test_a_protocol_imports_no_other_protocol() -> None:
    """What two protocols share lives in an engine module, so each can be read, compiled,
    left out or replaced alone (MCP and A2A share JSON-RPC through ``_jsonrpc``)."""
    assert {name: found for name, found in _protocol_imports(import_graph()).items() if found} == {}


def test_a_protocol_importing_another_is_found() -> None:
    """The check above can fail: an edge from one protocol to another is reported."""
    graph = {
        "streamguard.protocols.a2a": {"streamguard.protocols.mcp", "streamguard.protocols._base"},
        "streamguard.protocols.mcp": {"streamguard.protocols._jsonrpc"},
        "streamguard.protocols._jsonrpc": set(),
    }
    assert _protocol_imports(graph)["streamguard.protocols.a2a"] == {"streamguard.protocols.mcp"}


def _skeleton_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each protocol module -> the shape cache's module, if it imports it itself."""
    return {name: graph[name] & {SKELETON} for name in _protocol_imports(graph)}


#: The shape cache: a frame's bytes fitted to a learned skeleton (the engine's stage).
SKELETON = "streamguard.protocols._skeleton"


def test_no_checker_touches_bytes_or_the_skeleton() -> None:
    """A checker sees events (``Event``, parsed) and their payloads; fitting a frame's bytes
    to a skeleton is the engine's, which hands a repeat the value holes' JSON texts and the
    reader of a string one (``json_string_text``) through the engine module."""
    assert {name: found for name, found in _skeleton_imports(import_graph()).items() if found} == {}


def test_a_checker_importing_the_skeleton_is_found() -> None:
    graph = {"streamguard.protocols.chat": {SKELETON}, SKELETON: set()}
    assert _skeleton_imports(graph)["streamguard.protocols.chat"] == {SKELETON}
