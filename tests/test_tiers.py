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
    for name in ("__init__", "_spec", "_registry", "_base", "new_protocol"):
        (tmp_path / "protocols" / f"{name}.py").touch()
    (tmp_path / "protocols" / "new_protocol.cpython-311-x86_64-linux-gnu.so").touch()
    assert _build.protocol_modules(tmp_path) == (
        "streamguard.protocols._base",
        "streamguard.protocols.new_protocol",
    )
    shipped = _build.protocol_modules(Path(_build.__file__).parent)
    assert "streamguard.protocols.a2a" in shipped
    assert "streamguard.protocols._generated_openai_chat" in shipped
    assert "streamguard.protocols._registry" not in shipped


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
        "streamguard/protocols/_spec.py",  # interpreted, read by the compiled checkers
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


# -- make test's two processes: the modules shared out by measured duration ---------------


def test_the_modules_are_dealt_longest_first_to_the_share_with_the_least() -> None:
    durations = {"a": 10.0, "b": 6.0, "c": 5.0, "d": 4.0, "e": 1.0}
    # a -> 1 (10); b -> 2 (6); c -> 2 (11); d -> 1 (14); e -> 2 (12).
    assert tiers.shares(durations, 2, durations) == [["a", "d"], ["b", "c", "e"]]


@pytest.mark.parametrize("count", [2, 3])
def test_every_module_is_in_one_share_and_no_share_is_much_longer(count: int) -> None:
    """Whatever the figures: each module once, and no share longer than an equal part by
    more than the longest module (the bound of dealing longest first)."""
    durations = {f"m{i}": float((i * 7919) % 97 + 1) for i in range(60)}
    dealt = tiers.shares(durations, count, durations)
    assert sorted(name for share in dealt for name in share) == sorted(durations)
    total, longest = sum(durations.values()), max(durations.values())
    assert all(sum(durations[n] for n in share) <= total / count + longest for share in dealt)


def test_a_module_never_measured_counts_as_the_mean() -> None:
    """A new module weighs the mean of the measured ones dealt with it (here 20/3 s): it goes
    beside the 6 s one, where counting it as nothing would have put it beside the 10 s one."""
    durations = {"a": 10.0, "b": 6.0, "c": 4.0}
    assert tiers.shares(["a", "b", "c", "new"], 2, durations) == [["a", "c"], ["b", "new"]]
    # With nothing measured, every module counts the same.
    assert tiers.shares(["x", "y", "z", "w"], 2, {}) == [["w", "y"], ["x", "z"]]


def test_make_test_s_two_shares_are_every_test_module_once() -> None:
    """``python -m tests.tiers share 1 2`` and ``share 2 2`` (the Makefile's two pytest
    processes) run every test module of the suite, none twice, neither share empty."""
    modules = [str(p.relative_to(tiers.ROOT)) for p in sorted(TESTS.rglob("test_*.py"))]
    first, second = tiers.shares(modules, 2, tiers.measured_durations())
    assert first
    assert second
    assert sorted(first + second) == modules


def test_the_durations_are_read_from_a_run_s_junit_reports(tmp_path: Path) -> None:
    """Each module's test cases summed (a class's too); a module without a test in the
    run (all slow) is measured at zero seconds."""
    report = tmp_path / "run.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_sse" name="a" time="1.25"/>'
        '<testcase classname="tests.test_sse" name="b" time="0.5"/>'
        '<testcase classname="tests.test_monitor.TestSomething" name="c" time="2"/>'
        "</testsuite></testsuites>",
        encoding="utf-8",
    )
    durations = tiers._durations_of([report])
    assert durations["tests/test_sse.py"] == 1.8  # 1.75, to a tenth
    assert durations["tests/test_monitor.py"] == 2.0
    assert durations["tests/test_uvicorn.py"] == 0.0
    assert set(durations) == {str(p.relative_to(tiers.ROOT)) for p in TESTS.rglob("test_*.py")}
