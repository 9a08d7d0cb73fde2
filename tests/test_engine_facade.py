"""``streamguard.protocols.engine``: the one public module every protocol imports the engine
from, the built-in ones and a protocol of one's own alike (issue 47)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from streamguard.protocols import BUILT_IN, ProtocolSpec, engine

ROOT = Path(__file__).resolve().parent.parent
#: The engine's private modules, and what of each is not for a checker (the registry's).
PRIVATE = {
    "streamguard.protocols._base": {"KNOWN_EVENT_NAMES"},
    "streamguard.protocols._lifecycle": set(),
    "streamguard.protocols._fields": set(),
    "streamguard.protocols._spec": set(),
}


def _streamguard_imports(path: Path) -> set[str]:
    """The streamguard modules a file imports names from (``from x import y``)."""
    tree = ast.parse(path.read_text())
    return {
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamguard")
    }


@pytest.mark.parametrize("module", sorted(PRIVATE))
def test_the_engine_offers_all_its_private_modules_export(module: str) -> None:
    """Whatever the engine's modules export for a checker, the facade offers, as itself."""
    exported = set(importlib.import_module(module).__all__) - PRIVATE[module]
    missing = sorted(exported - set(engine.__all__))
    assert missing == []
    source = importlib.import_module(module)
    assert all(getattr(engine, name) is getattr(source, name) for name in exported)


def test_the_engine_offers_the_numbered_entity_tracker_not_its_rule_less_twin() -> None:
    """A protocol of numbered things that open and close declares an ``EntityKind`` and
    follows it with ``Entities``, the built-ins' own; ``OpenByNumber`` (the bookkeeping
    without the rules, Cohere's until it took ``Entities`` too) is gone."""
    entities = importlib.import_module("streamguard.protocols._entities")
    assert engine.Entities is entities.Entities
    assert engine.EntityKind is entities.EntityKind
    assert "OpenByNumber" not in engine.__all__


def test_every_name_the_engine_lists_is_there() -> None:
    assert sorted(name for name in engine.__all__ if not hasattr(engine, name)) == []


@pytest.mark.parametrize("spec", BUILT_IN, ids=lambda spec: spec.name)
def test_no_built_in_protocol_imports_what_the_engine_offers_from_its_modules(
    spec: ProtocolSpec,
) -> None:
    """A built-in protocol imports the engine as a plugin does; what it still takes from a
    private module is the built-ins' shared machinery, not the engine's."""
    module = spec.checker.__module__
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")  # (the source, either build)
    tree = ast.parse(path.read_text())
    offered = [
        f"{alias.name} from {node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in PRIVATE
        for alias in node.names
        if alias.name in engine.__all__
    ]
    assert offered == []


def test_the_plugin_example_imports_the_engine_from_one_module() -> None:
    """``examples/job_progress_protocol.py`` writes its protocol against the facade alone
    (and mounts it with the middleware, from the package's front)."""
    imported = _streamguard_imports(ROOT / "examples" / "job_progress_protocol.py")
    assert imported == {"streamguard", "streamguard.protocols.engine"}
