"""Plain-text tables for the command line and the demo."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["table"]


def table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, the first row a header underlined with dashes."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)
