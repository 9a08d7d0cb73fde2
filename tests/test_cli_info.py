"""``streamguard --version`` and ``streamguard info`` say which build of the core runs."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import metadata

import pytest

import streamguard
from streamguard import cli
from streamguard.cli import EXIT_OK, main
from streamguard.protocols import AUTO, CHECKERS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_version_line_names_the_build_that_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The version line ends with the build this process loaded, as ``compiled`` says."""
    build = "compiled" if streamguard.compiled else "pure-Python"
    assert _run(capsys, "--version") == (
        EXIT_OK,
        f"streamguard {streamguard.__version__} ({build} core)\n",
    )


def test_the_command_answers_version_without_loading_the_engine() -> None:
    """``streamguard --version`` (the installed command's entry point) loads neither the
    engine nor the CLI's parser: a deployment script asking for the build pays an import
    of the package, not of every protocol. Any other argument goes to the full CLI."""
    script = (
        "import sys\n"
        "from streamguard._launch import main\n"
        "sys.argv = ['streamguard', '--version']\n"
        "main()\n"
        "print(sorted(name for name in ('streamguard.cli', 'streamguard.monitor', "
        "'streamguard.protocols') if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    version, loaded = done.stdout.splitlines()
    assert version.startswith(f"streamguard {streamguard.__version__} (")
    assert loaded == "[]"


@pytest.mark.parametrize(
    ("compiled", "env", "installed", "expected"),
    [
        (True, "", True, ("compiled", "the core compiled with mypyc is installed and loaded")),
        (
            False,
            "1",
            True,
            ("pure", "STREAMGUARD_PURE_PYTHON=1 asks for the pure-Python core "
             "(a compiled core is installed too)"),
        ),
        (
            False,
            "1",
            False,
            ("pure", "STREAMGUARD_PURE_PYTHON=1 asks for the pure-Python core "
             "(no compiled core is installed)"),
        ),
        (
            False,
            "",
            False,
            ("pure", "no compiled core is installed: it was built without a C compiler or mypyc "
             "(reinstall with `pip install -v` to see why)"),
        ),
    ],
)  # fmt: skip
def test_info_says_which_core_runs_and_why(
    compiled: bool,
    env: str,
    installed: bool,
    expected: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each way a process comes to run a build gives its own reason."""
    monkeypatch.setattr(streamguard, "compiled", compiled)
    monkeypatch.setenv("STREAMGUARD_PURE_PYTHON", env)
    monkeypatch.setattr(cli, "_compiled_core_installed", lambda: installed)
    code, out = _run(capsys, "info", "--format", "json")
    info = json.loads(out)
    assert (code, (info["core"], info["core_why"])) == (EXIT_OK, expected)
    _, table = _run(capsys, "info")
    assert f"{expected[0]}: " in table


def test_info_says_whether_the_native_kernel_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The compiled core comes with its C kernel; the pure-Python core runs none."""
    expected = "native" if streamguard.compiled else "python"
    assert json.loads(_run(capsys, "info", "--format", "json")[1])["kernel"] == expected
    assert f"kernel {expected}: " in " ".join(_run(capsys, "info")[1].split())


def test_info_lists_the_extras_and_the_registry_protocols(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every extra of the distribution with whether it is installed, and every protocol."""
    info = json.loads(_run(capsys, "info", "--format", "json")[1])
    assert info["version"] == streamguard.__version__
    assert list(info["extras"]) == metadata("streamguard").get_all("Provides-Extra")
    assert info["extras"]["testing"] is True  # the suite runs with it
    assert info["protocols"] == [AUTO, *CHECKERS]
    table = _run(capsys, "info")[1]
    assert ", ".join([AUTO, *CHECKERS]) in table


def test_cli_reference_sample_of_info_shows_the_registry_protocols() -> None:
    """The sample output on docs/cli.md lists the protocols the registry has, in its order."""
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    sample = page.split("$ streamguard info\n", 1)[1].split("```", 1)[0]
    rows = sample.split("\nprotocols", 1)[1]
    assert " ".join(rows.split()) == ", ".join([AUTO, *CHECKERS])
