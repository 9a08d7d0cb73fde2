"""What the docs say of compressed streams and of ``skipped`` is what the middleware does."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from starlette.types import Message

import streamguard.middleware
from streamguard import StreamGuardMiddleware, StreamReport

from .asgi_driver import Recorder, ScriptedApp, body, http_scope, run, sse_start

ROOT = Path(__file__).resolve().parent.parent


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_words_say_a_compressed_stream_is_watched_not_inspected() -> None:
    """docs/index.md and the middleware's docstring: watched, reported, not inspected."""
    for where, text in [
        ("docs/index.md", (ROOT / "docs" / "index.md").read_text()),
        ("middleware docstring", streamguard.middleware.__doc__ or ""),
    ]:
        words = _words(text)
        assert "not compressed" not in words, where
        assert re.search(r"compressed stream \(.*?\) is watched", words), where
        assert "not inspected" in words, where
        assert "compressed_stream" in words, where


def _skipped_reasons() -> dict[str, list[StreamReport]]:
    """Each reason ``skipped`` counts, with the reports of the response that counted it."""
    sse = sse_start()
    starts: dict[str, tuple[Message, str, str]] = {
        "head": (sse, "HEAD", "/stream"),
        "status": (sse_start(status=500), "GET", "/stream"),
        "content_type": (
            {"type": "http.response.start", "status": 200, "headers": []},
            "GET",
            "/stream",
        ),
        "excluded": (sse, "GET", "/health"),
        "unlisted": (sse, "GET", "/other"),
        "content_encoding": (sse_start((b"content-encoding", b"gzip")), "GET", "/stream"),
    }
    found: dict[str, list[StreamReport]] = {}
    for reason, (start, method, path) in starts.items():
        reports: list[StreamReport] = []
        middleware = StreamGuardMiddleware(
            ScriptedApp([start, body(b"data: a\n\n", more=False)]),
            routes={"/stream": "sse", "/health": "sse"},
            watch_unlisted=False,
            exclude_paths=["/health"],
            metrics=False,
            on_report=reports.append,
        )
        run(middleware, http_scope(method=method, path=path), Recorder())
        assert middleware.skipped == {reason: 1}, reason
        found[reason] = reports
    return found


def test_every_skipped_reason_is_documented_as_what_it_counts() -> None:
    """The docstring names each reason; the one stream it calls watched has a report."""
    doc = _words(inspect.getdoc(StreamGuardMiddleware) or "")
    reasons = _skipped_reasons()
    for reason in reasons:
        assert f"``{reason}``" in doc, reason
    watched = [reason for reason, reports in reasons.items() if reports]
    assert watched == ["content_encoding"]
    [report] = reasons["content_encoding"]
    assert (report.inspected, report.rules()) == (False, ["compressed_stream"])
    assert "compressed streams, watched but not inspected (``content_encoding``)" in doc
