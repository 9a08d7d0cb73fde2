"""What every guard around code streamguard does not trust asks of an exception.

A guard (around a checker, a sink, a plugin's detection signal or request reader) contains
every exception but the task's cancellation (``is_cancellation``), and names what it
contained by its type and place alone (``error_name``): an exception's message may quote
the wire. Here, below every module that guards, so that the detector (``protocols.auto``)
and the request reader (``request``) ask the same as the monitor and the seams.
"""

from __future__ import annotations

import asyncio

__all__ = ["UndeclaredRule", "error_name", "is_cancellation"]


class UndeclaredRule(ValueError):
    """A protocol's checker made a finding of a rule its protocol does not declare (a
    plugin's bug: ``RAISES`` is missing the rule, or the name came from the wire). The
    finding is refused, and the stream's checking stops as on any other failure."""


def is_cancellation(exc: BaseException) -> bool:
    """asyncio's or trio's cancellation (trio's by its class name: trio is not imported),
    which must propagate; anything else a sink raises (even ``KeyboardInterrupt`` from a
    callback) is contained."""
    return isinstance(exc, asyncio.CancelledError) or type(exc).__name__ == "Cancelled"


def error_name(exc: BaseException) -> str:
    """An exception as its type and where it was raised; its message may quote the wire."""
    traceback = exc.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    if traceback is None:
        return type(exc).__name__
    code = traceback.tb_frame.f_code
    where = f"{code.co_filename.rsplit('/', 1)[-1]}:{traceback.tb_lineno}"
    return f"{type(exc).__name__} in {code.co_name} ({where})"
