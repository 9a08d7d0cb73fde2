"""The two builds of the core: which one loads, the switch between them, and the fallback."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, SourceFileLoader
from pathlib import Path

import pytest

import streamguard
from streamguard import _build

ROOT = Path(__file__).resolve().parent.parent

#: Prints, for a fresh interpreter, ``streamguard.compiled`` then each core module's loader.
_PROBE = (
    "import importlib, streamguard\n"
    "from streamguard._build import COMPILED_MODULES\n"
    "print(streamguard.compiled)\n"
    "for name in COMPILED_MODULES:\n"
    "    print(name, type(importlib.import_module(name).__spec__.loader).__name__)\n"
)


def _probe(**environ: str) -> tuple[str, dict[str, str]]:
    env = {key: value for key, value in os.environ.items() if key != _build.PURE_PYTHON_ENV}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**env, **environ},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, *rest = result.stdout.splitlines()
    return first, dict(line.split() for line in rest)


def _copy_of_the_checkout(tmp_path: Path) -> Path:
    """The sources of this checkout under ``tmp_path``, without any build or cache."""
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "node_modules", "site", ".*_cache", "*.so", "*.pyd"
        ),
    )
    return source


def _has_compiled_build() -> bool:
    return any((ROOT / "streamguard").rglob("*.so")) or any((ROOT / "streamguard").rglob("*.pyd"))


def test_every_core_module_comes_from_the_build_streamguard_compiled_names() -> None:
    """The whole core is compiled or none of it is: the two builds never mix in a process."""
    wanted = ExtensionFileLoader if streamguard.compiled else SourceFileLoader
    for name in _build.COMPILED_MODULES:
        spec = importlib.import_module(name).__spec__
        assert spec is not None
        assert isinstance(spec.loader, wanted), name


def test_the_pure_python_switch_loads_every_core_module_from_its_source() -> None:
    """STREAMGUARD_PURE_PYTHON=1 gives the sources even where extension modules sit beside them."""
    compiled, loaders = _probe(STREAMGUARD_PURE_PYTHON="1")
    assert compiled == "False"
    assert loaders == dict.fromkeys(_build.COMPILED_MODULES, "SourceFileLoader")


def test_without_the_switch_the_compiled_build_is_preferred_where_present() -> None:
    """A normal import takes the extension modules when they were built, all of them."""
    compiled, loaders = _probe()
    expected = "ExtensionFileLoader" if _has_compiled_build() else "SourceFileLoader"
    assert compiled == str(_has_compiled_build())
    assert loaders == dict.fromkeys(_build.COMPILED_MODULES, expected)


@pytest.mark.parametrize("value", ["0", "", "no"])
def test_the_switch_is_off_unless_it_says_yes(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only 1, true or yes turn the switch on; 0 or an empty value leave the default build."""
    monkeypatch.setenv(_build.PURE_PYTHON_ENV, value)
    assert not _build.wants_sources()
    monkeypatch.setenv(_build.PURE_PYTHON_ENV, " True ")
    assert _build.wants_sources()


def test_the_compiled_modules_are_real_and_leave_out_what_mypyc_cannot_build() -> None:
    """Each listed module has a source; the registry and the package stay interpreted (a
    compiled package cannot find an interpreted submodule)."""
    for name in _build.COMPILED_MODULES:
        assert ROOT.joinpath(*name.split(".")).with_suffix(".py").is_file(), name
    assert "streamguard.protocols._registry" not in _build.COMPILED_MODULES
    assert "streamguard.protocols" not in _build.COMPILED_MODULES


def test_the_only_extension_modules_are_the_listed_core() -> None:
    """No stray extension module sits in the package: the switch covers every one there is."""
    suffixes = tuple(EXTENSION_SUFFIXES)
    found = {
        ".".join((*path.relative_to(ROOT).parts[:-1], path.name.split(".", 1)[0]))
        for path in (ROOT / "streamguard").rglob("*")
        if path.name.endswith(suffixes)
    }
    if found:
        expected = {*_build.COMPILED_MODULES, *_build.NATIVE_MODULES, "streamguard._core__mypyc"}
        assert found == expected


def test_unknown_attributes_of_the_build_module_are_attribute_errors() -> None:
    """``compiled`` is computed on first use; any other missing name is an AttributeError."""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _build.nope  # noqa: B018


def _compile_only(source: Path, *modules: str) -> None:
    """Make the checkout at ``source`` compile only ``modules`` (its ``_build.py`` rewritten)."""
    build = source / "streamguard" / "_build.py"
    text, replaced = re.subn(
        r"^COMPILED_MODULES: tuple\[str, \.\.\.\] = .*$",
        f"COMPILED_MODULES: tuple[str, ...] = {modules!r}",
        build.read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    assert replaced == 1, "streamguard/_build.py's COMPILED_MODULES is no longer where it was"
    build.write_text(text, encoding="utf-8")


@pytest.mark.slow  # mypyc type-checks from scratch in the copy: about 20 s of CPU
@pytest.mark.skipif(_build.wants_sources(), reason="a build test: the suite's compiled run has it")
def test_setup_falls_back_to_pure_python_without_a_c_compiler(tmp_path: Path) -> None:
    """With no working C compiler the build warns and leaves no extension module behind.

    setup.py's fallback does not depend on which modules are compiled, so the copy compiles
    two small ones (one shared library, two extension modules: the all-or-nothing case)
    rather than the whole core: mypyc translates them, the C compiler is missing, and the
    build must still succeed, warn, and leave no extension module behind.
    """
    source = _copy_of_the_checkout(tmp_path)  # mypyc writes its C files where it runs
    _compile_only(source, "streamguard._wire", "streamguard.report")
    env = {key: value for key, value in os.environ.items() if key != _build.PURE_PYTHON_ENV}
    result = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib")],
        env={**env, "CC": "/nonexistent/cc", "LDSHARED": "/nonexistent/cc -shared"},
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "compiling the core failed" in result.stderr
    assert "installing the pure-Python build" in result.stderr
    assert "`streamguard info` says which build runs" in result.stderr  # seen with pip -v
    assert not list(tmp_path.rglob("*.so"))


@pytest.mark.slow  # mypyc type-checks from scratch in the copy
@pytest.mark.skipif(_build.wants_sources(), reason="a build test: the suite's compiled run has it")
def test_setup_shows_what_mypyc_refused(tmp_path: Path) -> None:
    """A type error mypyc stops on is printed with the fallback warning, not swallowed."""
    source = _copy_of_the_checkout(tmp_path)
    _compile_only(source, "streamguard._wire", "streamguard.report")
    wire = source / "streamguard" / "_wire.py"
    wire.write_text(wire.read_text(encoding="utf-8") + '\nBROKEN: int = "not an int"\n')
    env = {key: value for key, value in os.environ.items() if key != _build.PURE_PYTHON_ENV}
    result = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib")],
        env=env,
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    said = result.stdout + result.stderr
    assert 'error: Incompatible types in assignment (expression has type "str"' in said
    assert "mypyc could not compile the core (SystemExit: 1)" in said
    assert not list(tmp_path.rglob("*.so"))


@pytest.mark.slow
@pytest.mark.skipif(_build.wants_sources(), reason="a build test: the suite's compiled run has it")
@pytest.mark.skipif(
    shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]) is None,
    reason="no C compiler here: the fallback test covers this machine",
)
def test_an_isolated_build_compiles_the_core(tmp_path: Path) -> None:
    """``pip wheel`` in build isolation (only the build requirements) yields the compiled core.

    The whole core is compiled, at C optimisation level 0: whether it compiles does not
    depend on the level, and level 3 spends minutes of the C compiler on proving nothing
    more (the suite's compiled run imports every module built at level 3).
    """
    source = _copy_of_the_checkout(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != _build.PURE_PYTHON_ENV}
    env["STREAMGUARD_MYPYC_OPT_LEVEL"] = "0"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        env=env,
        cwd=source,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [wheel] = tmp_path.glob("streamguard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert any(name.startswith("streamguard/_core__mypyc.") for name in names), names
    assert any(name.startswith("streamguard/sse.") and name.endswith(".so") for name in names)
    # The native kernel comes with the compiled core (setup.py, NATIVE_MODULES).
    assert any(name.startswith("streamguard/_kernel.") and name.endswith(".so") for name in names)
