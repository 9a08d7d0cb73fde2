"""The lines that put a streamguard transport into the openai SDK type-check with their SDK."""

from __future__ import annotations

import re
from importlib.metadata import requires
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


def _library_of_installed_openai() -> str:
    """httpx2 for openai 3.x, httpx before: what the installed SDK declares it needs."""
    names = {re.split(r"[^\w-]", line, maxsplit=1)[0] for line in requires("openai") or []}
    return "httpx2" if "httpx2" in names else "httpx"


@pytest.mark.parametrize("page", PAGES)
def test_page_shows_the_sdk_line_for_each_http_client(page: str) -> None:
    """Each page shows one block for httpx-based and one for httpx2-based openai SDKs."""
    blocks = _sdk_blocks(page)
    assert [len(blocks["httpx"]), len(blocks["httpx2"])] == [1, 1], page
    assert "openai 3.x" in blocks["httpx2"][0]
    assert "openai 1.x and 2.x" in blocks["httpx"][0]


@pytest.mark.slow  # mypy --strict over the openai SDK's types: about 40 s
def test_sdk_lines_type_check_with_the_installed_openai(tmp_path: Path) -> None:
    """The installed openai's block passes ``mypy --strict``; with openai 3.x the httpx one
    fails on ``http_client``, which is why both are shown."""
    from mypy import api

    library = _library_of_installed_openai()
    files = {}
    for page in PAGES:
        for name, blocks in _sdk_blocks(page).items():
            path = tmp_path / f"{page.replace('/', '_').replace('.', '_')}_{name}.py"
            path.write_text(blocks[0])
            files[path] = name
    # mypy_path puts this checkout first, ahead of any installed streamguard.
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nmypy_path = {ROOT}\n")
    stdout, stderr, _ = api.run(
        [
            "--strict",
            f"--config-file={tmp_path / 'mypy.ini'}",
            f"--cache-dir={tmp_path / 'cache'}",
            *map(str, files),
        ]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    for path, name in files.items():
        mine = [line for line in errors if line.startswith(str(path))]
        if name == library:
            assert not mine, stdout + stderr
        elif library == "httpx2":
            assert any('"http_client"' in line for line in mine), stdout + stderr
