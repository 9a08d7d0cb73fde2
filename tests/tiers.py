"""Which test modules exercise the compiled core, read from their source (the ``core`` mark).

The full matrix (``make check``) runs every test on the compiled build, and on the pure-Python
build only the tests that exercise the modules mypyc compiles (``COMPILED_MODULES`` in
``streamguard/_build.py``): a test of the middleware, the transports or the CLI runs the
same interpreted code on both builds, and learns nothing new the second time. Which tests
those are is worked out here, from each test module's source, never listed by hand, so a
new test module falls into the right tier without anyone editing a list.

A test module *exercises the core* when its own code, or a test helper it uses
(``tests/helpers.py``, ``tests/sse_fixtures.py``, ...), calls a function or class that a
compiled module defines (``check_stream``, ``StreamMonitor``, ``EventParser``, a checker,
``rules_for``...), or subclasses one. Names are followed to the module that defines them:
``from streamguard import check_stream`` is ``streamguard.monitor``'s, ``from
streamguard.protocols import AnthropicChecker`` is ``streamguard.protocols.anthropic``'s.
Reading a result is not exercising the core: comparing ``report.outcome`` with
``Outcome.COMPLETED``, or annotating with ``StreamReport``, calls nothing, so a module that
only drives the middleware and reads its reports stays an I/O test. A test module that
the rules cannot read (a syntax error) counts as core: when in doubt, test both builds.

Nothing here imports the package: the answer is the same on both builds, and computing
it loads no core module before ``STREAMGUARD_PURE_PYTHON`` is honoured.

``make test`` runs the fast tier as two pytest processes at once; which test modules each
runs is not the tier but a share of about equal duration (``shares``), by the seconds each
module took in a measured run (``durations.json``, written by ``python -m tests.tiers
durations``, never by hand).
"""

from __future__ import annotations

import ast
import contextlib
import json
import runpy
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = [
    "BUILD",
    "COMPILED",
    "DYNAMIC",
    "core_sources",
    "exercised_by",
    "exercised_core_modules",
    "exercises_core",
    "measured_durations",
    "shares",
]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "streamguard"
TESTS = Path(__file__).resolve().parent


def _compiled_modules() -> frozenset[str]:
    """``COMPILED_MODULES`` from streamguard/_build.py, loaded by its path (as setup.py
    loads it): importing the package would import the core before the build is chosen."""
    return frozenset(runpy.run_path(str(ROOT / PACKAGE / "_build.py"))["COMPILED_MODULES"])


#: The modules mypyc compiles.
COMPILED = _compiled_modules()
#: The module that says which build is loaded (``streamguard.compiled``).
BUILD_MODULE = "streamguard._build"
#: What a test module "exercises" besides compiled modules: which build is loaded, or
#: modules it imports by name at run time (``importlib.import_module``), unread here.
BUILD = "(which build is loaded)"
DYNAMIC = "(modules imported at run time)"


def _source(module: str) -> Path | None:
    """The file of a module of the package or of the tests, or None (a third-party one)."""
    if module != PACKAGE and not module.startswith((PACKAGE + ".", "tests.")):
        return None
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_package(module: str) -> bool:
    source = _source(module)
    return source is not None and source.name == "__init__.py"


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    """The module an ``import from`` names, relative imports resolved against ``importer``."""
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    base = parts if _is_package(importer) else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


@dataclass(frozen=True)
class _Target:
    """What a name refers to: a module, or a top-level name ``name`` of module ``module``."""

    module: str
    name: str | None = None


@dataclass
class _Module:
    """One parsed module: its imports, and its top-level definitions."""

    name: str
    tree: ast.Module
    #: local name -> what it was imported as.
    imports: dict[str, _Target] = field(default_factory=dict)
    #: top-level name -> its definition (def, class, or the assigned value).
    definitions: dict[str, ast.AST] = field(default_factory=dict)
    #: top-level names that are functions or classes (what can be "called into").
    callables: set[str] = field(default_factory=set)
    #: ``streamguard.__init__``'s lazy exports (``_SOURCES``): name -> defining module.
    lazy: dict[str, str] = field(default_factory=dict)


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """A module's statements, those inside top-level ``if`` and ``try`` blocks included."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If | ast.Try):
            pending.extend(node.body)
            pending.extend(node.orelse)
            if isinstance(node, ast.Try):
                pending.extend(node.finalbody)
                for handler in node.handlers:
                    pending.extend(handler.body)


#: The fields of a node that hold a type, never run: a name there is read, not called.
_TYPE_FIELDS = frozenset({"annotation", "returns", "type_comment"})


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree``, in no particular order, but those inside annotations."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        for name, value in ast.iter_fields(node):
            if name in _TYPE_FIELDS:
                continue
            if isinstance(value, ast.AST):
                pending.append(value)
            elif isinstance(value, list):
                pending.extend(item for item in value if isinstance(item, ast.AST))


@cache
def _parse(module: str) -> _Module | None:
    source = _source(module)
    if source is None:
        return None
    return _read(module, source.read_text(encoding="utf-8"))


def _read(module: str, text: str) -> _Module:
    parsed = _Module(module, ast.parse(text))
    # Imports anywhere in a test module (a test often imports inside its function); in the
    # package, only those that make its module-level names (re-exports, TYPE_CHECKING).
    for node in ast.walk(parsed.tree) if module.startswith("tests.") else _top_level(parsed.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    parsed.imports[alias.asname] = _Target(alias.name)
                else:  # ``import a.b`` binds ``a``
                    root = alias.name.split(".")[0]
                    parsed.imports[root] = _Target(root)
        elif isinstance(node, ast.ImportFrom):
            origin = _absolute(module, node)
            for alias in node.names:
                if alias.name == "*":
                    continue
                local = alias.asname or alias.name
                if _source(f"{origin}.{alias.name}") is not None:  # a submodule
                    parsed.imports[local] = _Target(f"{origin}.{alias.name}")
                else:
                    parsed.imports[local] = _Target(origin, alias.name)
    for node in parsed.tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            parsed.definitions[node.name] = node
            parsed.callables.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    parsed.definitions[target.id] = node.value
                    if target.id == "_SOURCES" and isinstance(node.value, ast.Dict):
                        with contextlib.suppress(ValueError):
                            parsed.lazy = ast.literal_eval(node.value)
    return parsed


@cache
def _resolve(target: _Target, depth: int = 0) -> _Target:
    """Follow re-exports to the module that defines ``target.name``."""
    if target.name is None or depth > 20:
        return target
    parsed = _parse(target.module)
    if parsed is None:
        return target
    if target.name in parsed.definitions:
        return target
    if target.name in parsed.imports:
        return _resolve(parsed.imports[target.name], depth + 1)
    if target.name in parsed.lazy:
        return _resolve(_Target(parsed.lazy[target.name], target.name), depth + 1)
    return target


def _core_callable(target: _Target) -> str | None:
    """The compiled module defining ``target``, if it is a function or class of one."""
    target = _resolve(target)
    if target.name is None or target.module not in COMPILED:
        return None
    parsed = _parse(target.module)
    return target.module if parsed is not None and target.name in parsed.callables else None


def _attribute_target(parsed: _Module, node: ast.expr) -> _Target | None:
    """What ``a.b.c`` names, when ``a`` is an imported module (``sse.EventParser``)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in parsed.imports:
        return None
    target = parsed.imports[node.id]
    if target.name is not None:
        return None
    module = target.module
    for part in reversed(parts):
        if _source(f"{module}.{part}") is not None:
            module = f"{module}.{part}"
        else:
            return _Target(module, part)
    return _Target(module)


def _imports_dynamically(parsed: _Module, func: ast.expr) -> bool:
    """Whether ``func`` is ``importlib.import_module``: which module it loads is not read."""
    if isinstance(func, ast.Name) and func.id in parsed.imports:
        return parsed.imports[func.id] == _Target("importlib", "import_module")
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "import_module"
        and isinstance(func.value, ast.Name)
        and parsed.imports.get(func.value.id) == _Target("importlib")
    )


def _reads_the_build(parsed: _Module, node: ast.AST) -> bool:
    """Whether ``node`` reads which build is loaded: ``streamguard._build`` or ``.compiled``."""
    if isinstance(node, ast.Name) and node.id in parsed.imports:
        target = _resolve(parsed.imports[node.id])
        return target.module == BUILD_MODULE
    if isinstance(node, ast.Attribute) and node.attr in ("compiled", "_build"):
        return _attribute_target(parsed, node) in (
            _Target(PACKAGE, "compiled"),
            _Target(BUILD_MODULE),
        )
    return False


def _uses(parsed: _Module, tree: ast.AST) -> tuple[set[str], set[_Target]]:
    """In ``tree``: the compiled modules whose callables it calls or subclasses, and the
    test-helper names (local or imported from another test module) it refers to."""
    called: set[str] = set()
    helpers: set[_Target] = set()
    for node in _walk(tree):
        invoked: list[ast.expr] = []
        if isinstance(node, ast.Call):
            invoked.append(node.func)
        elif isinstance(node, ast.ClassDef):
            invoked.extend(node.bases)
        for func in invoked:
            if _imports_dynamically(parsed, func):
                called.add(DYNAMIC)
            target: _Target | None = None
            if isinstance(func, ast.Name) and func.id in parsed.imports:
                target = parsed.imports[func.id]
            elif isinstance(func, ast.Attribute):
                target = _attribute_target(parsed, func)
            if target is not None and (module := _core_callable(target)) is not None:
                called.add(module)
        if _reads_the_build(parsed, node):
            called.add(BUILD)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in parsed.definitions:
                helpers.add(_Target(parsed.name, node.id))
            elif node.id in parsed.imports:
                imported = _resolve(parsed.imports[node.id])
                if imported.name is not None and imported.module.startswith("tests."):
                    helpers.add(imported)
    return called, helpers


@cache
def _helper_core(target: _Target) -> frozenset[str]:
    """The compiled modules a test helper's definition calls into, through other helpers too."""
    seen: set[_Target] = set()
    pending = [target]
    called: set[str] = set()
    while pending:
        current = pending.pop()
        if current in seen or current.name is None:
            continue
        seen.add(current)
        parsed = _parse(current.module)
        if parsed is None or current.name not in parsed.definitions:
            continue
        direct, helpers = _uses(parsed, parsed.definitions[current.name])
        called |= direct
        pending.extend(helpers - seen)
    return frozenset(called)


@cache
def exercised_core_modules(path: Path) -> frozenset[str]:
    """The compiled modules the test module at ``path`` calls into, itself or via helpers,
    plus ``BUILD`` and ``DYNAMIC`` when it reads the build or imports by name at run time.

    A module that cannot be read is taken to exercise every compiled module.
    """
    try:
        module = ".".join(path.resolve().relative_to(ROOT).with_suffix("").parts)
        return exercised_by(module, path.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return COMPILED


def exercised_by(module: str, text: str) -> frozenset[str]:
    """``exercised_core_modules`` of the test module named ``module`` whose source is ``text``."""
    try:
        parsed = _read(module, text)
    except SyntaxError:
        return COMPILED
    called, helpers = _uses(parsed, parsed.tree)
    for helper in helpers:
        if helper.module != module:  # the module's own definitions were walked above
            called |= _helper_core(helper)
    return frozenset(called)


def exercises_core(path: Path) -> bool:
    """Whether the test module at ``path`` exercises the compiled core (see the module doc)."""
    return bool(exercised_core_modules(path))


def _package_imports(module: str) -> set[str]:
    """The package's modules ``module`` imports anywhere in its source (in functions too:
    a deferred import still runs; not under ``if TYPE_CHECKING``), and the packages that
    hold them (importing a module runs its packages' ``__init__`` first)."""
    source = _source(module)
    if source is None:
        return set()
    tree = ast.parse(source.read_text(encoding="utf-8"))
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for child in ast.walk(statement)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if name.startswith(PACKAGE) and _source(name) is not None:
                found.add(name)
    for name in list(found):
        while "." in name:
            name = name.rpartition(".")[0]
            found.add(name)
    return found


def core_sources() -> list[Path]:
    """The sources the compiled core is built from or reads: the compiled modules and every
    module of the package they import, transitively, the native kernel's C sources, with
    ``setup.py``. A change to any of
    them makes the compiled core stale (the Makefile rebuilds it, the suite refuses it); a
    change elsewhere (the CLI, the middleware, the sinks) does not, since compiled code
    calls those only through Python, as it calls any interpreted module."""
    seen: set[str] = set()
    pending = [*COMPILED, PACKAGE]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending.extend(_package_imports(module) - seen)
    paths = {source for module in seen if (source := _source(module)) is not None}
    native = runpy.run_path(str(ROOT / PACKAGE / "_build.py"))["NATIVE_MODULES"]
    paths.update(ROOT.joinpath(*name.split(".")).with_suffix(".c") for name in native)
    return sorted([*paths, ROOT / "setup.py"])


#: Each test module's seconds in a run of ``make test`` (its tests' setup, call and
#: teardown), by which ``make test`` shares the modules out between its pytest processes.
#: Measured, never written by hand: ``python -m tests.tiers durations REPORT.xml...`` writes
#: it from the JUnit reports (``--junitxml``) of a run of every test not marked slow.
DURATIONS = TESTS / "durations.json"


def measured_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The seconds of each measured test module, by its path from the root (``tests/x.py``);
    empty when nothing was measured."""
    try:
        durations = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(name): float(seconds) for name, seconds in durations.items()}


def shares(modules: Iterable[str], count: int, durations: Mapping[str, float]) -> list[list[str]]:
    """``modules`` dealt into ``count`` shares of about equal measured duration, each share
    sorted: the longest module first, each to the share with the fewest seconds so far (the
    first such share on a tie), so no share exceeds an equal part by more than its longest
    module. A module never measured (new since ``durations.json`` was written) counts as the
    mean of those measured; with nothing measured, every module counts the same."""
    modules = sorted(set(modules))
    known = [durations[name] for name in modules if name in durations]
    default = sum(known) / len(known) if known else 1.0
    cost = {name: durations.get(name, default) for name in modules}
    totals = [0.0] * count
    dealt: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(modules, key=lambda name: (-cost[name], name)):
        least = totals.index(min(totals))
        totals[least] += cost[name]
        dealt[least].append(name)
    return [sorted(share) for share in dealt]


def _test_modules() -> list[str]:
    return [str(path.relative_to(ROOT)) for path in sorted(TESTS.rglob("test_*.py"))]


def _durations_of(reports: Iterable[Path]) -> dict[str, float]:
    """Each test module's seconds in the JUnit reports of a run: its test cases' times
    (setup, call and teardown each), summed; a module is named by its file's path. A test
    module the reports do not name had no test in the run (all slow): zero seconds."""
    durations = dict.fromkeys(_test_modules(), 0.0)
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            module = case.get("classname", "").split(".")
            # classname is the module's dotted path, then a class's name if the test has one.
            while module and _source(".".join(module)) is None:
                module.pop()
            source = _source(".".join(module)) if module else None
            if source is None:
                continue
            name = str(source.relative_to(ROOT))
            durations[name] = durations.get(name, 0.0) + float(case.get("time", 0.0))
    return {name: round(seconds, 1) for name, seconds in sorted(durations.items())}


USAGE = """usage: python -m tests.tiers core|rest|sources
       python -m tests.tiers share K N
       python -m tests.tiers durations REPORT.xml..."""


def main(argv: list[str]) -> int:
    """``python -m tests.tiers core|rest``: the test modules of one tier, one path a line;
    ``python -m tests.tiers sources``: the sources of the compiled core (``core_sources``);
    ``python -m tests.tiers share K N``: the test modules of share K of N (``shares``, by
    ``durations.json``), which ``make test`` runs as one pytest process of N;
    ``python -m tests.tiers durations REPORT.xml...``: writes ``durations.json`` from the
    JUnit reports of a run of every test not marked slow."""
    command, arguments = (argv[0], argv[1:]) if argv else ("", [])
    if command in ("core", "rest", "sources") and not arguments:
        if command == "sources":
            for path in core_sources():
                print(path.relative_to(ROOT))
            return 0
        wanted = command == "core"
        for name in _test_modules():
            if exercises_core(ROOT / name) is wanted:
                print(name)
        return 0
    if command == "share" and len(arguments) == 2 and all(a.isdigit() for a in arguments):
        share, count = int(arguments[0]), int(arguments[1])
        if 1 <= share <= count:
            print("\n".join(shares(_test_modules(), count, measured_durations())[share - 1]))
            return 0
    if command == "durations" and arguments:
        durations = _durations_of(Path(report) for report in arguments)
        DURATIONS.write_text(json.dumps(durations, indent=1) + "\n", encoding="utf-8")
        total = sum(durations.values())
        print(f"{DURATIONS.relative_to(ROOT)}: {len(durations)} modules, {total:.0f} s")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
