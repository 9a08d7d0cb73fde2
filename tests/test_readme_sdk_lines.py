"""Each page shows the line that puts a streamguard transport into the openai SDK for both
generations of the SDK (on httpx, and on httpx2). That each type-checks with its own
generation, and fails with the other, is tests/test_docs_snippets.py's (``needs openai...``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/upstream.md")


def _sdk_blocks(page: str) -> dict[str, list[str]]:
    """The page's python blocks that hand the openai SDK an HTTP client, by client library."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.DOTALL)
    found: dict[str, list[str]] = {"httpx": [], "httpx2": []}
    for block in blocks:
        if "openai.OpenAI(http_client=" in block:
            library = "httpx2" if "http_client=httpx2." in block else "httpx"
            found[library].append(block)
    return found


@pytest.mark.parametrize("page", PAGES)
def test_page_shows_the_sdk_line_for_each_http_client(page: str) -> None:
    """Each page shows one block for httpx-based and one for httpx2-based openai SDKs."""
    blocks = _sdk_blocks(page)
    assert [len(blocks["httpx"]), len(blocks["httpx2"])] == [1, 1], page
    assert "openai 3.x" in blocks["httpx2"][0]
    assert "openai 1.x and 2.x" in blocks["httpx"][0]
