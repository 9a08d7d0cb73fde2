"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamguard.protocols import CHECKERS

from .toy_protocol import DoneChecker


@pytest.fixture
def done_protocol() -> Iterator[str]:
    """Registers the toy protocol (``data: END`` terminal) for the duration of a test."""
    CHECKERS[DoneChecker.name] = DoneChecker
    yield DoneChecker.name
    del CHECKERS[DoneChecker.name]
