"""The ``streamguard`` command's entry point: ``--version`` answered without loading the
engine, everything else handed to ``streamguard.cli``.

``streamguard.cli`` imports the engine, every protocol and the conformance battery (about
half a second, more on a loaded machine); a deployment script asking which version and
build it runs should not pay that. Only ``--version`` alone takes the short way; any other
argument list, ``--help`` included, goes through the full parser.
"""

from __future__ import annotations

import sys

__all__ = ["main", "version_line"]


def version_line() -> str:
    """``streamguard 0.1.0 (compiled core)``: the version and the build that runs."""
    import streamguard

    build = "compiled" if streamguard.compiled else "pure-Python"
    return f"streamguard {streamguard.__version__} ({build} core)"


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return 0
    from streamguard.cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
