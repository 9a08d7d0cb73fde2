"""``probe`` on a stalled stream: the outcome it ends with, and how a nightly check fails on it."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from streamguard.cli import main
from streamguard.testing import serve

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
NIGHTLY = "error_event,unclosed,client_disconnect,connection_lost"


async def stall(request: Request) -> Response:
    async def body() -> AsyncIterator[bytes]:
        yield b"data: partial\n\n"
        await asyncio.sleep(30)  # cancelled when the probe leaves

    return StreamingResponse(body(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(Starlette(routes=[Route("/stall", stall)]), log_level="critical") as base:
        yield base + "/stall"


def test_listing_client_disconnect_fails_a_probe_that_gave_up(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With client_disconnect listed, a stall past --timeout exits 1 and says why."""
    code = main(["probe", url, "--timeout", "0.3", "--fail-on-outcome", NIGHTLY])
    out = capsys.readouterr().out
    assert code == 1
    assert "  - stalled [warning] at event 1, byte 15: no bytes for " in out
    assert out.endswith(
        "\nthe stream ended client_disconnect, an outcome --fail-on-outcome lists "
        "(error_event or unclosed or client_disconnect or connection_lost)\n"
    )
    code = main(
        ["probe", "--format", "json", url, "--timeout", "0.3", "--fail-on-outcome", NIGHTLY]
    )
    result = json.loads(capsys.readouterr().out)
    assert (code, result["outcome"], result["failed"]) == (1, "client_disconnect", True)


def test_a_stall_fails_a_probe_at_the_defaults(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the default --fail-on-outcome a probe that gave up on a stall exits 1."""
    code = main(["probe", url, "--timeout", "0.3"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.endswith(
        "\nthe stream ended client_disconnect, an outcome --fail-on-outcome lists "
        "(error_event or unclosed or client_disconnect or connection_lost)\n"
    )
    assert main(["probe", url, "--timeout", "0.3", "--fail-on-outcome", "error_event"]) == 0


def test_the_help_says_what_client_disconnect_means_for_a_probe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """probe --help names the stall behind client_disconnect and the list that fails on it."""
    assert main(["probe", "--help"]) == 0
    # Without whitespace: argparse may wrap the long default list inside a word.
    text = "".join(capsys.readouterr().out.split())
    assert f"(default:{NIGHTLY});client_disconnectistheprobegivinguponastall" in text


def test_the_docs_say_a_probe_sees_client_disconnect() -> None:
    """docs/cli.md no longer says client_disconnect never reaches a client; it says the fix."""
    text = " ".join(DOCS.read_text().split())
    assert not re.search(r"`client_disconnect`[^.]*never reach a client", text)
    assert f"`probe`: `{NIGHTLY}`" in text
