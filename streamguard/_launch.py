"""The ``streamguard`` command's entry point: ``--version`` answered without loading the
engine, everything else handed to ``streamguard.cli``.

``streamguard.cli`` imports the engine, every protocol and the conformance battery (about
half a second, more on a loaded machine); a deployment script asking which version and
build it runs should not pay that. Only ``--version`` alone takes the short way; any other
argument list, ``--help`` included, goes through the full parser.
"""

from __future__ import annotations

import sys

from streamguard._version import version_line

__all__ = ["main"]


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return 0
    from streamguard.cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
