"""Every list of protocols in the docs is the registry's built-in one: ``AUTO`` and ``BUILT_IN``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamguard.protocols import AUTO, BUILT_IN
from streamguard.protocols.auto import protocol_for_path

#: The docs list the protocols streamguard ships, not plugins this machine may have.
BUILT_IN_NAMES = [spec.name for spec in BUILT_IN]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: The pages a new user reads for what streamguard knows (configuration.md is generated).
PAGES = ("README.md", "docs/index.md", "docs/configuration.md", "docs/metrics.md")


def _text(page: str) -> str:
    return (ROOT / page).read_text()


@pytest.mark.parametrize("page", PAGES)
def test_page_names_every_protocol(page: str) -> None:
    """Each page names every registered protocol and ``auto``, as code."""
    text = _text(page)
    missing = [name for name in (AUTO, *BUILT_IN_NAMES) if f"`{name}`" not in text]
    assert not missing, f"{page} does not name {missing}"


def test_readme_intro_lists_exactly_the_registry() -> None:
    """The README's protocol bullets are the registered protocols, no more, no fewer."""
    intro = _text("README.md").split("## ", 1)[0]
    listed = re.findall(r"^- `(\w+)`:", intro, flags=re.MULTILINE)
    assert sorted(listed) == sorted(BUILT_IN_NAMES)


def test_index_table_lists_exactly_the_registry() -> None:
    """docs/index.md's protocol table has one row per registered protocol, and ``auto``."""
    table = _text("docs/index.md").split("| protocol | what it is |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(listed) == sorted([AUTO, *BUILT_IN_NAMES])


def test_metrics_protocol_label_lists_exactly_the_registry() -> None:
    """The `protocol` label's values on docs/metrics.md are the registry's."""
    text = " ".join(_text("docs/metrics.md").split())
    values = re.search(r"- `protocol`: [^:]*: (.*?)\. A route", text)
    assert values is not None
    assert sorted(re.findall(r"`(\w+)`", values.group(1))) == sorted([AUTO, *BUILT_IN_NAMES])


def test_metrics_path_examples_are_what_detection_does() -> None:
    """Each `path` → `protocol` example on docs/metrics.md is what the path detection says."""
    text = " ".join(_text("docs/metrics.md").split())
    examples = re.findall(r"`(/[^`]*)` → `(\w+)`", text)
    assert examples
    for path, protocol in examples:
        assert protocol_for_path(path) == protocol, path


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_every_protocol_page_is_linked_from_the_front_pages(page: str) -> None:
    """A protocol with a page of its own (docs/<name>.md) is linked from the front pages."""
    text = _text(page)
    prefix = "docs/" if page == "README.md" else ""
    for name in BUILT_IN_NAMES:
        if (DOCS / f"{name}.md").is_file():
            assert f"]({prefix}{name}.md)" in text, f"{page} does not link docs/{name}.md"
