"""The version line, which both ``streamguard --version`` paths print: the short one
(``streamguard._launch``, which must not import the CLI) and the CLI's parser."""

from __future__ import annotations

__all__ = ["version_line"]


def version_line() -> str:
    """``streamguard 0.1.0 (compiled core)``: the version and the build that runs."""
    import streamguard

    build = "compiled" if streamguard.compiled else "pure-Python"
    return f"streamguard {streamguard.__version__} ({build} core)"
