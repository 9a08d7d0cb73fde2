"""Headless Chromium for the timeline page's tests: the DOM after the page's script ran.

CI sets ``STREAMGUARD_REQUIRE_CHROMIUM=1``: there a missing Chromium fails the test
instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["Node", "chromium", "dump_dom", "parse_dom", "run_chromium"]


def chromium() -> str:
    """The Chromium binary; skips the test when there is none (fails under
    ``STREAMGUARD_REQUIRE_CHROMIUM``)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("STREAMGUARD_REQUIRE_CHROMIUM"):
            pytest.fail("Chromium is required here (STREAMGUARD_REQUIRE_CHROMIUM) but not found")
        pytest.skip("Chromium is not installed (set STREAMGUARD_REQUIRE_CHROMIUM to fail)")
    return found


def run_chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a throwaway profile and nothing reaching the network."""
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def dump_dom(page: str, directory: Path, *, fragment: str = "", script: str = "") -> str:
    """The DOM Chromium holds once ``page`` loaded (opened at ``#fragment``), its script
    run. ``script`` is appended as an inline script at the end of the body: what a person
    does (a click), run after the page's own script."""
    if script:
        head, _, tail = page.rpartition("</body>")
        page = f"{head}<script>{script}</script></body>{tail}"
    path = directory / "page.html"
    path.write_text(page, encoding="utf-8")
    url = path.as_uri() + (f"#{fragment}" if fragment else "")
    return run_chromium(directory / "profile", "--dump-dom", url).stdout


class Node:
    """An element of a dumped DOM: its tag, attributes, children and text."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.parts: list[str] = []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    @property
    def text(self) -> str:
        """The text of the element and its descendants, as ``textContent`` reads."""
        return "".join(self.parts)

    def iter(self) -> list[Node]:
        found = [self]
        for child in self.children:
            found.extend(child.iter())
        return found

    def find_all(self, tag: str | None = None, css: str | None = None) -> list[Node]:
        return [
            n
            for n in self.iter()[1:]
            if (tag is None or n.tag == tag) and (css is None or css in n.classes)
        ]

    def by_id(self, element_id: str) -> Node | None:
        return next((n for n in self.iter() if n.attrs.get("id") == element_id), None)


_VOID = {"meta", "br", "img", "input", "link", "hr", "source", "area", "base", "col", "wbr"}


def parse_dom(markup: str) -> Node:
    """A tree of the dumped DOM (Chromium's serialisation is well formed; SVG's empty
    elements are written with their end tags)."""
    from html.parser import HTMLParser

    root = Node("#document", {}, None)

    class _Builder(HTMLParser):
        current = root

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            node = Node(tag, {k: v or "" for k, v in attrs}, self.current)
            self.current.children.append(node)
            if tag not in _VOID:
                self.current = node

        def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.current))

        def handle_endtag(self, tag: str) -> None:
            node: Node | None = self.current
            while node is not None and node.tag != tag:
                node = node.parent
            if node is not None and node.parent is not None:
                self.current = node.parent

        def handle_data(self, data: str) -> None:
            node: Node | None = self.current
            while node is not None:
                node.parts.append(data)
                node = node.parent

    builder = _Builder(convert_charrefs=True)
    builder.feed(markup)
    builder.close()
    return root
