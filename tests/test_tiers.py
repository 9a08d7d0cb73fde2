"""The test tiers: which modules the pure-Python run of ``make check`` repeats (tests/tiers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import tiers
from .tiers import BUILD, COMPILED, DYNAMIC, exercised_by, exercised_core_modules, exercises_core

TESTS = Path(__file__).resolve().parent


def _core(source: str) -> set[str]:
    return set(exercised_by("tests.test_probe", source))


def test_the_compiled_modules_are_read_from_the_build_module() -> None:
    """The tiers follow ``COMPILED_MODULES``: a module compiled tomorrow is core tomorrow."""
    from streamguard import _build

    assert set(_build.COMPILED_MODULES) == COMPILED


def test_every_protocol_module_is_compiled_but_the_interpreted_few(tmp_path: Path) -> None:
    """A new module in ``streamguard/protocols`` is compiled without an entry of its own."""
    from streamguard import _build

    (tmp_path / "protocols").mkdir()
    for name in ("__init__", "_spec", "_shapes", "_base", "new_protocol"):
        (tmp_path / "protocols" / f"{name}.py").touch()
    (tmp_path / "protocols" / "new_protocol.cpython-311-x86_64-linux-gnu.so").touch()
    assert _build.protocol_modules(tmp_path) == (
        "streamguard.protocols._base",
        "streamguard.protocols.new_protocol",
    )
    shipped = _build.protocol_modules(Path(_build.__file__).parent)
    assert "streamguard.protocols.a2a" in shipped
    assert "streamguard.protocols._shapes" not in shipped


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from streamguard import check_stream\ncheck_stream([b''])", {"streamguard.monitor"}),
        ("import streamguard\nstreamguard.check_stream([b''])", {"streamguard.monitor"}),
        ("from streamguard import sse\nsse.EventParser()", {"streamguard.sse"}),
        ("import streamguard.sse as s\ns.EventParser()", {"streamguard.sse"}),
        (
            "from streamguard.protocols import AnthropicChecker\nclass C(AnthropicChecker): ...",
            {"streamguard.protocols.anthropic"},
        ),
        (
            "def test():\n    from streamguard.monitor import StreamMonitor\n"
            "    StreamMonitor('sse')",
            {"streamguard.monitor"},
        ),
        (
            "from .sse_fixtures import protocol_fixtures\ndef test():\n    protocol_fixtures()",
            {"streamguard.monitor"},
        ),
        ("from tests.sse_fixtures import load\nload", {"streamguard.monitor"}),
        ("import streamguard\nassert streamguard.compiled", {BUILD}),
        ("from streamguard import _build\n_build.wants_sources()", {BUILD}),
        ("import importlib\nimportlib.import_module('streamguard.sse')", {DYNAMIC}),
    ],
    ids=[
        "package-export",
        "package-attribute",
        "module-attribute",
        "module-alias",
        "subclass-of-a-re-export",
        "import-inside-a-test",
        "helper-data-built-by-the-core",
        "helper-function",
        "reads-the-build",
        "the-build-module",
        "import-by-name",
    ],
)
def test_calling_into_the_core_makes_a_module_core(source: str, expected: set[str]) -> None:
    """A call, a subclass, a helper that calls, a build read or an import by name: core."""
    assert _core(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "from streamguard import StreamGuardMiddleware, Outcome, StreamReport\n"
        "def test(report: StreamReport) -> None:\n"
        "    StreamGuardMiddleware(app)\n"
        "    assert report.outcome is Outcome.COMPLETED",
        "from streamguard.request import MAX_REQUEST_CONTAINERS\nassert MAX_REQUEST_CONTAINERS",
        "from streamguard.cli import main\nmain(['check'])",
        "from .asgi_driver import ScriptedApp, run\nrun(ScriptedApp([]))",
        "from .helpers import break_monitors\nbreak_monitors",
        "import os\nos.environ",
    ],
    ids=["reads-reports", "a-constant", "the-cli", "asgi-driver", "wraps-monitors", "unrelated"],
)
def test_reading_results_or_driving_io_layers_is_not_core(source: str) -> None:
    """Comparing outcomes, reading a bound, driving the middleware or the CLI: one build."""
    assert _core(source) == set()


def test_a_module_that_cannot_be_read_is_core() -> None:
    """When in doubt, both builds: a syntax error counts as exercising every compiled module."""
    assert _core("def broken(:\n") == COMPILED


@pytest.mark.parametrize(
    ("module", "core"),
    [
        ("test_sse", True),
        ("test_monitor", True),
        ("test_fixtures", True),
        ("test_realworld", True),
        ("test_retyped_values", True),
        ("test_build", True),
        ("test_exports", True),
        ("test_imports", True),
        ("test_uvicorn", False),
        ("test_hypercorn", False),
        ("test_examples", False),
        ("test_readme", False),
    ],
)
def test_the_suite_is_tiered_as_its_layers_say(module: str, core: bool) -> None:
    """The parser, checkers and fixtures run on both builds; the real servers and the
    examples once."""
    assert exercises_core(TESTS / f"{module}.py") is core


def test_every_checker_module_is_exercised_directly_somewhere() -> None:
    """Each protocol module of the core is called by name by some test module, so the pure
    run reaches it through a test of its own, not only through ``check_stream``."""
    exercised: set[str] = set()
    for path in TESTS.glob("test_*.py"):
        exercised |= exercised_core_modules(path)
    checkers = {
        module
        for module in COMPILED
        if module.startswith("streamguard.protocols.") and module.split(".")[-1][0] != "_"
    }
    # Plain SSE and auto-detection are reached through check_stream(protocol=...) by name.
    assert checkers - exercised <= {"streamguard.protocols.sse"}
    assert {"streamguard.monitor", "streamguard.sse", "streamguard.rules"} <= exercised


def test_the_core_sources_are_the_compiled_modules_and_what_they_import() -> None:
    """An edit to the CLI or the middleware leaves the compiled core current; one to a
    module compiled code imports (interpreted or not) makes it stale."""
    sources = {str(path.relative_to(tiers.ROOT)) for path in tiers.core_sources()}
    assert {
        "setup.py",
        "streamguard/monitor.py",  # compiled
        "streamguard/protocols/_shapes.py",  # interpreted, read by the compiled checkers
        "streamguard/protocols/__init__.py",  # the registry the compiled detector reads
        "streamguard/rule_docs/_base.py",  # imported by the protocol specs
    } <= sources
    assert not sources & {
        "streamguard/cli.py",
        "streamguard/middleware.py",
        "streamguard/_session.py",
        "streamguard/metrics.py",
        "streamguard/testing/_collect.py",
    }
