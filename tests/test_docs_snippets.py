"""Every Python snippet of README.md and docs/*.md passes ``mypy --strict``, so none can drift.

Each ```` ```python ```` block is extracted and written out as a module of its own, and one
mypy run (the project's settings, from pyproject.toml) checks them all; a failure names
the page, the line and mypy's error. The blocks that import the openai or anthropic SDK
get a run of their own in the slow tier (``SDKS``: their types cost mypy about 25 s).

A comment on the line before a block says how it is read, when it is not a module by
itself (docs/contributing.md):

- ``<!-- snippet: continues -->``: the block goes on from the page's previous block, and is
  checked as one module with it (and with what that one continued);
- ``<!-- snippet: from examples/job_progress_protocol.py -->``: the block is a piece of that
  file, copied as it stands there; the test checks that it is, and mypy checks the file;
- ``<!-- snippet: needs openai<3 -->``: the block is for some versions of a dependency
  only; where they are installed it must pass, elsewhere it must fail (else the comment,
  and the page's note on versions, are stale), and the test reports it as xfail.

The README's quickstart with a misspelt option goes into the same run: it must fail, since
the middleware's options are explicit keywords (which is why a snippet's mistakes show).
"""

from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"(?P<indent> *)```python\s*")
_MARK = re.compile(r"\s*<!--\s*snippet:\s*(?P<how>.*?)\s*-->\s*")
_CONTINUES = "continues"
_FROM = "from "
_NEEDS = "needs "
# ``path:line: error: message  [code]``, as mypy prints it (notes too: they explain errors).
_DIAGNOSTIC = re.compile(r"(?P<path>[^:\n]+):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*)")


@dataclass(frozen=True)
class Snippet:
    """One ```` ```python ```` block of a page."""

    page: Path
    #: The page's line of the block's first line of code (1-based).
    line: int
    code: str
    #: What the ``<!-- snippet: ... -->`` comment before the block says, if there is one.
    how: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def lines(self) -> range:
        return range(self.line, self.line + len(self.code.splitlines()))


def snippets(page: Path) -> list[Snippet]:
    """The page's Python blocks, in order; a block indented in a list item is dedented."""
    lines = page.read_text().splitlines()
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.fullmatch(lines[index])
        index += 1
        if fence is None:
            continue
        indent = len(fence["indent"])
        start = index
        while lines[index].strip() != "```":
            index += 1
        code = "".join(line[indent:] + "\n" for line in lines[start:index])
        before = start - 2  # the nearest line above the fence that is not blank
        while before >= 0 and not lines[before].strip():
            before -= 1
        mark = _MARK.fullmatch(lines[before]) if before >= 0 else None
        found.append(Snippet(page, start + 1, code, mark["how"] if mark else None))
    return found


def all_snippets() -> list[Snippet]:
    return [snippet for page in PAGES for snippet in snippets(page)]


def the_file(snippet: Snippet) -> Path:
    """The file a ``from`` snippet is a piece of."""
    assert snippet.how is not None
    return ROOT / snippet.how.removeprefix(_FROM)


@dataclass(frozen=True)
class _Part:
    """Some lines of a module mypy checks, and where they come from."""

    code: str
    source: Path
    line: int


class _Modules:
    """The modules to check: one for each snippet, with what it continues before it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        #: Each written module's name -> its parts, to map mypy's lines back to pages.
        self.parts: dict[str, list[_Part]] = {}
        #: The repository's files that ``from`` snippets are pieces of.
        self.files: set[Path] = set()

    def write(self, name: str, parts: list[_Part]) -> None:
        (self.directory / f"{name}.py").write_text("".join(part.code for part in parts))
        self.parts[name] = parts

    def add_pages(self, sdk: bool) -> None:
        """Write the snippets that use the big SDKs (``sdk``), or all the others."""
        chain: list[_Part] = []
        previous: Snippet | None = None
        for number, snippet in enumerate(all_snippets()):
            continued, previous = previous, snippet
            part = _Part(snippet.code, snippet.page, snippet.line)
            if snippet.how is None or snippet.how.startswith(_NEEDS):
                chain = [part]
            elif snippet.how == _CONTINUES:
                same_page = continued is not None and continued.page == snippet.page
                assert same_page, f"{snippet.where}: continues no block of its page"
                chain = [*chain, part]
            elif snippet.how.startswith(_FROM):
                # Checked as part of the file; what continues it starts from the whole file.
                if not sdk:
                    self.files.add(the_file(snippet))
                chain = [_Part(the_file(snippet).read_text(), the_file(snippet), 1)]
                continue
            else:
                raise AssertionError(f"{snippet.where}: unknown snippet comment {snippet.how!r}")
            if uses_sdk(chain) != sdk:
                continue
            slug = re.sub(r"\W", "_", snippet.page.stem).lower()
            self.write(f"snippet_{number:03}_{slug}_{snippet.line}", chain)

    def source_of(self, path: str, line: int) -> tuple[Path, int] | None:
        """The page (or repository file) and line a line of mypy's output is about."""
        name = Path(path).stem
        if name not in self.parts:
            resolved = (Path.cwd() / path).resolve()
            return (resolved, line) if resolved in self.files else None
        for part in self.parts[name]:
            length = len(part.code.splitlines())
            if line <= length:
                return part.source, part.line + line - 1
            line -= length
        return None


@dataclass(frozen=True)
class Checked:
    """What the one mypy run said, by page (or file) and line."""

    #: ``(page, line) -> ["error: ...", "note: ..."]``.
    said: dict[tuple[Path, int], list[str]]
    #: What could not be put on a page's line (a crash, a line of another module).
    unplaced: list[str]
    #: Errors in the misspelt copy of the quickstart.
    misspelt: list[str]


MISSPELT = "misspelt_quickstart"

#: Snippets that import these SDKs are checked in the slow tier (``make check``): mypy reads
#: their types for about 25 s when its cache does not hold them, where every other snippet
#: together takes 5 s after ``mypy --strict streamguard``.
SDKS = ("openai", "anthropic")
_SDK_IMPORT = re.compile(rf"^(?:import|from)\s+(?:{'|'.join(SDKS)})\b", re.MULTILINE)


def uses_sdk(chain: list[_Part]) -> bool:
    return any(_SDK_IMPORT.search(part.code) for part in chain)


def readme_quickstart() -> Snippet:
    """The README's first FastAPI example, which tests/test_readme.py also runs."""
    return next(s for s in snippets(ROOT / "README.md") if "app.add_middleware" in s.code)


@contextmanager
def _state_restored() -> Iterator[None]:
    """Run mypy in this process and leave no trace of it: it sets ``MYPYPATH`` here, and
    raises the recursion limit and the garbage collector's thresholds for itself, which
    would change what later tests of the session measure (the JSON parser's depth is the
    recursion limit)."""
    environ = os.environ.copy()
    limit = sys.getrecursionlimit()
    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.setrecursionlimit(limit)
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()


def _check(directory: Path, sdk: bool) -> Checked:
    """One mypy run over the snippets that use the big SDKs (``sdk``), or over the others,
    the files they are pieces of and the misspelt quickstart."""
    from mypy import api

    modules = _Modules(directory)
    modules.add_pages(sdk)
    if not sdk:
        quickstart = readme_quickstart()
        misspelt = quickstart.code.replace("routes=", "rutes=", 1)
        assert misspelt != quickstart.code
        (directory / f"{MISSPELT}.py").write_text(misspelt)
    files = [*sorted(directory.glob("*.py")), *sorted(modules.files)]
    # MYPYPATH puts this checkout first, ahead of any installed streamguard (and lets the
    # example modules be imported as ``examples.…``). The cache is the project's: a second
    # run reads the dependencies' types from it.
    with _state_restored():
        os.environ["MYPYPATH"] = str(ROOT)
        stdout, stderr, status = api.run(
            [
                f"--config-file={ROOT / 'pyproject.toml'}",
                f"--cache-dir={ROOT / '.mypy_cache'}",
                "--no-error-summary",
                "--hide-error-context",
                *map(str, files),
            ]
        )
    assert status in (0, 1), stdout + stderr  # 2: mypy did not run
    said: dict[tuple[Path, int], list[str]] = {}
    unplaced: list[str] = [stderr] if stderr.strip() else []
    wrong: list[str] = []
    for line in stdout.splitlines():
        diagnostic = _DIAGNOSTIC.fullmatch(line)
        if diagnostic and Path(diagnostic["path"]).stem == MISSPELT:
            wrong.append(line)
            continue
        source = diagnostic and modules.source_of(diagnostic["path"], int(diagnostic["line"]))
        if not diagnostic or not source:
            unplaced.append(line)
            continue
        said.setdefault(source, []).append(f"{diagnostic['kind']}: {diagnostic['message']}")
    return Checked(said, unplaced, wrong)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    return _check(tmp_path_factory.mktemp("snippets"), sdk=False)


@pytest.fixture(scope="module")
def checked_sdk(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    return _check(tmp_path_factory.mktemp("sdk_snippets"), sdk=True)


def _tiered(snippet: Snippet) -> Any:
    """The snippet as a test parameter: a slow one when it uses the big SDKs."""
    sdk = uses_sdk([_Part(snippet.code, snippet.page, snippet.line)])
    return pytest.param(snippet, id=snippet.where, marks=[pytest.mark.slow] if sdk else [])


def _said(checked: Checked, page: Path, lines: range) -> list[str]:
    return [
        f"{page.relative_to(ROOT)}:{line}: {message}"
        for line in lines
        for message in dict.fromkeys(checked.said.get((page, line), []))
    ]


@pytest.mark.parametrize("snippet", [_tiered(snippet) for snippet in all_snippets()])
def test_snippet_type_checks(snippet: Snippet, request: pytest.FixtureRequest) -> None:
    sdk = uses_sdk([_Part(snippet.code, snippet.page, snippet.line)])
    checked: Checked = request.getfixturevalue("checked_sdk" if sdk else "checked")
    if snippet.how and snippet.how.startswith(_FROM):
        code = snippet.code.strip("\n")
        assert code in the_file(snippet).read_text(), (
            f"{snippet.where}: not a piece of {snippet.how.removeprefix(_FROM)} as it stands"
        )
    errors = _said(checked, snippet.page, snippet.lines)
    if snippet.how and snippet.how.startswith(_NEEDS):
        requirement = Requirement(snippet.how.removeprefix(_NEEDS))
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            installed = "(none)"
        if not requirement.specifier.contains(installed, prereleases=True):
            assert errors, f"{snippet.where}: passes with {requirement.name} {installed} too"
            pytest.xfail(f"for {requirement}, and {requirement.name} {installed} is installed")
    assert not errors, "\n".join(errors)


def test_the_files_snippets_are_pieces_of_type_check(checked: Checked) -> None:
    files = {the_file(s) for s in all_snippets() if s.how and s.how.startswith(_FROM)}
    errors = [
        message
        for file in sorted(files)
        for message in _said(checked, file, range(1, len(file.read_text().splitlines()) + 1))
    ]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("run", ["checked", pytest.param("checked_sdk", marks=pytest.mark.slow)])
def test_mypy_said_nothing_else(run: str, request: pytest.FixtureRequest) -> None:
    checked: Checked = request.getfixturevalue(run)
    assert not checked.unplaced, "\n".join(checked.unplaced)


def test_a_misspelt_option_fails_the_check(checked: Checked) -> None:
    """The quickstart with ``rutes=``: the middleware's options are explicit keywords, so a
    snippet's misspelt option cannot pass unseen."""
    assert any('"rutes"' in line for line in checked.misspelt), checked.misspelt
