"""Build streamguard's sans-I/O core with mypyc where a C compiler is available.

Everything else about the package is declared in ``pyproject.toml``; this file only adds
the extension modules. The build falls back to pure Python, with a warning, when
``STREAMGUARD_PURE_PYTHON=1`` is set, when mypyc is missing or cannot translate the core
(it type-checks first: a dependency missing from the build environment stops it), or when
compiling fails (no C compiler, no Python headers): the ``.py`` sources are always
installed, so the package works either way. ``streamguard._build`` lists the compiled
modules.
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
#: When mypyc read the sources: every extension is stamped with this time, so a source
#: saved while the build ran still reads as newer than its extension module.
BUILD_STARTED = time.time()


def _compiled_modules() -> list[str]:
    """``COMPILED_MODULES`` from streamguard/_build.py, loaded by its path: the package
    itself cannot be imported before its dependencies are installed."""
    return list(runpy.run_path(str(ROOT / "streamguard" / "_build.py"))["COMPILED_MODULES"])


def _source_path(module: str) -> str:
    path = Path(*module.split("."))
    package_init = path / "__init__.py"
    return str(package_init if (ROOT / package_init).exists() else path.with_suffix(".py"))


def _warn(message: str) -> None:
    # pip shows this only with -v (it hides a successful build's output): the installed
    # package says it too, in `streamguard --version` and `streamguard info`.
    print(
        f"streamguard: {message}; installing the pure-Python build "
        "(`streamguard info` says which build runs, and why)",
        file=sys.stderr,
    )


class _OptionalBuildExt(build_ext):
    """``build_ext`` that leaves a working pure-Python install when compiling fails."""

    def run(self) -> None:
        try:
            super().run()
            # An unchanged module's extension is copied with its old time: stamp them all
            # as of this build, so "built after its source changed" can be read off mtimes.
            for ext in self.extensions:
                os.utime(self.get_ext_fullpath(ext.name), (BUILD_STARTED, BUILD_STARTED))
        except Exception as error:  # any failure to compile means "no compiler here"
            _warn(f"compiling the core failed ({type(error).__name__}: {error})")
            # All or nothing: a compiled module without the shared library beside it
            # would fail to import.
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            self.extensions = []


def _opt_level() -> str:
    """The C optimisation level: 3, unless ``STREAMGUARD_MYPYC_OPT_LEVEL`` says 0 to 3.

    Only the tests of the build lower it: a build test proves that the core compiles in a
    given environment, and at level 0 the C compiler takes a fraction of the time.
    """
    level = os.environ.get("STREAMGUARD_MYPYC_OPT_LEVEL", "3").strip()
    return level if level in ("0", "1", "2", "3") else "3"


def _native_modules() -> list[Any]:
    """``NATIVE_MODULES`` from streamguard/_build.py, each built from its C source."""
    from setuptools import Extension

    names = runpy.run_path(str(ROOT / "streamguard" / "_build.py"))["NATIVE_MODULES"]
    opt = f"-O{_opt_level()}"
    return [
        Extension(name, [str(Path(*name.split(".")).with_suffix(".c"))], extra_compile_args=[opt])
        for name in names
    ]


def _extensions() -> list[Any]:
    if os.environ.get("STREAMGUARD_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not installed")
        return []
    paths = [_source_path(module) for module in _compiled_modules()]
    try:
        # One group: the modules share one C library (streamguard/_core__mypyc), so calls
        # between them are native calls. mypyc type-checks first and exits on an error
        # (SystemExit), e.g. when a dependency it must read is missing from the build
        # environment: that, too, is "cannot compile here".
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):
                compiled = mypycify(paths, opt_level=_opt_level(), group_name="streamguard._core")
        finally:
            _relay(said.getvalue())  # outside the redirect: its errors must be seen
        # The native kernel (streamguard/_kernel.c): built with the compiled core, and
        # only with it (all or nothing, as above), so a compiled build always has it.
        return [*compiled, *_native_modules()]
    except (Exception, SystemExit) as error:
        _warn(f"mypyc could not compile the core ({type(error).__name__}: {error})")
        return []


#: What mypyc says about code it compiles as written, with nothing for a reader of the
#: build to act on: a generator expression is built as a list first, the same values in
#: the same order (the core only unpacks such expressions, or hands them to a function
#: that reads them all, so nothing changes but when they are computed). Every other line
#: mypyc prints, errors and any other warning, is passed on.
_MYPYC_NOTES = ("warning: Treating generator comprehension as list",)


def _relay(output: str) -> None:
    """Print what mypyc printed, but for the notes in ``_MYPYC_NOTES``."""
    for line in output.splitlines():
        if not line.endswith(_MYPYC_NOTES):
            print(line)


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
