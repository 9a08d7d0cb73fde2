"""Plain-text tables for the command line and the demo."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ["table"]

#: The narrowest the wrapped last column gets, however narrow the terminal.
MIN_LAST_COLUMN = 20


def table(rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Left-aligned columns, the first row a header underlined with dashes.

    With a ``width`` (a terminal's), the last column is wrapped at spaces onto continuation
    lines so that lines fit; it keeps at least ``MIN_LAST_COLUMN`` characters, and a word
    longer than that stays whole. Without one, every row is one line.
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if width is not None:
        widths[-1] = min(widths[-1], max(width - lead, MIN_LAST_COLUMN))
    lines = []
    for row in rows:
        *cells, last = row
        pieces = [last] if width is None else _wrap(last, widths[-1])
        padded = [cell.ljust(w) for cell, w in zip(cells, widths, strict=False)]
        lines.append("  ".join([*padded, pieces[0]]))
        lines.extend(" " * lead + piece for piece in pieces[1:])
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
