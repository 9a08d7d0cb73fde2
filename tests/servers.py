"""Real servers for tests: uvicorn on a free loopback port, and waiting on what they do."""

from __future__ import annotations

import time
from collections.abc import Callable

from streamguard.testing import serve

__all__ = ["serve", "wait_until"]


def wait_until(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` (reports arrive from the server's thread) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(0.01)
