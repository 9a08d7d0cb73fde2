"""The package's public names: exported, documented, and loaded only when used."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import streamguard

from .helpers import source_docstring

ROOT = Path(__file__).resolve().parent.parent
#: What the sans-I/O core must never load: the server, logging and metrics libraries.
HEAVY = ("starlette", "structlog", "prometheus_client")


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def test_all_is_sorted_and_is_every_lazy_name() -> None:
    """``__all__`` is sorted and names exactly what the package resolves lazily."""
    assert streamguard.__all__ == sorted(streamguard.__all__, key=_isort_key)
    assert set(streamguard.__all__) == set(streamguard._SOURCES)
    assert set(streamguard.__all__) <= set(dir(streamguard))


@pytest.mark.parametrize("name", streamguard.__all__)
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    """Each name imports from the package as its defining module's object, and is documented."""
    namespace: dict[str, object] = {}
    exec(f"from streamguard import {name}", namespace)
    value = namespace[name]
    assert value is getattr(importlib.import_module(streamguard._SOURCES[name]), name)
    assert f"``{name}``" in (streamguard.__doc__ or ""), f"{name} is not in the package docstring"
    if inspect.isclass(value) or inspect.isroutine(value):
        doc = source_docstring(value)
        assert doc.strip(), f"{name} has no docstring"
        assert not doc.startswith(f"{name}("), f"{name} has only dataclass's generated docstring"


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name the package does not export raises AttributeError, as a module should."""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        streamguard.nope  # noqa: B018


@pytest.mark.parametrize("module", ["streamguard", "streamguard.sse", "streamguard.monitor"])
def test_the_core_loads_no_server_logging_or_metrics_library(module: str) -> None:
    """Importing the package or its sans-I/O core loads neither Starlette, structlog nor
    prometheus-client (a fresh interpreter, so nothing else has imported them)."""
    code = (
        f"import sys, {module}\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
