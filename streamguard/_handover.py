"""Handing a body message to the server with no coroutine around it: ``hand_over``,
``SENT`` and ``Handing``, for ``streamguard._forward`` (which says why).

Kept interpreted: these are the definitions the pure build runs; the compiled build runs
the native kernel's (``streamguard/_kernel.c``), which ``tests/test_kernel.py`` holds to
them. (mypyc cannot build an iterator's ``__next__`` that ends an iteration.)
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, NoReturn, Protocol

from streamguard.sse import native_kernel

__all__ = ["HANDING", "SENT", "Handing", "Landing", "Sent", "awaiting", "failed", "hand_over"]

Send = Callable[[Any], Awaitable[None]]


class Landing(Protocol):
    """Told how a hand-over that did not end at once ended (``streamguard._forward.Forward``)."""

    def landed(self, lost: bool) -> None:
        """The server took the message (``lost`` False), or its ``send`` raised ``OSError``
        (True: ASGI 2.4, the client has gone). Not called for any other exception."""


def _raise(thrown: Any, *rest: Any) -> NoReturn:
    """Raise what ``throw(thrown, *rest)`` throws into a coroutine that has ended."""
    if isinstance(thrown, BaseException):
        raise thrown
    value = rest[0] if rest else None
    if isinstance(value, thrown):
        raise value
    raise thrown() if value is None else thrown(value)


class Sent:
    """The awaitable of a body message the server already took: awaiting it gives None at
    once. It has no state, so any number of tasks may await its one instance, ``SENT``; it
    is a coroutine by the abstract interface (``send``, ``throw``, ``close``), so that an app
    may pass it to ``asyncio.create_task`` as it could the server's coroutine."""

    def __await__(self) -> Sent:
        return self

    def __iter__(self) -> Sent:
        return self

    def __next__(self) -> None:
        raise StopIteration

    def send(self, value: object) -> None:
        raise StopIteration

    def throw(self, thrown: Any, *rest: Any) -> None:
        _raise(thrown, *rest)

    def close(self) -> None:
        return None


class Handing:
    """A hand-over whose coroutine stopped to wait at ``yielded``. Awaiting it hands the
    task ``yielded``, then passes on what the task sends or throws until the coroutine
    ends, and tells ``landing`` how (``Landing.landed``). What the coroutine returns is
    dropped, as ``SENT`` drops it (ASGI's ``send`` returns None)."""

    __slots__ = ("_coroutine", "_landing", "_pending", "_yielded")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], yielded: Any, landing: Landing) -> None:
        self._coroutine: Coroutine[Any, Any, Any] | None = coroutine
        self._yielded = yielded
        self._pending = True  # ``yielded`` is still to go to the task
        self._landing: Landing | None = landing

    def __await__(self) -> Handing:
        return self

    def __iter__(self) -> Handing:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        if self._pending:
            self._pending = False
            yielded, self._yielded = self._yielded, None
            return yielded
        coroutine = self._coroutine
        if coroutine is None:
            raise RuntimeError("cannot reuse already awaited hand-over")
        return self._step(coroutine.send, value)

    def throw(self, thrown: Any, *rest: Any) -> Any:
        self._pending = False
        self._yielded = None
        coroutine = self._coroutine
        if coroutine is None:
            self._landing = None
            _raise(thrown, *rest)
        return self._step(coroutine.throw, thrown, *rest)

    def _step(self, step: Callable[..., Any], *args: Any) -> Any:
        """One step of the coroutine (``send`` or ``throw``); its end is told the landing."""
        try:
            return step(*args)
        except StopIteration:
            self._ended()
            raise StopIteration from None
        except OSError:
            self._raised(lost=True)
            raise
        except BaseException:
            self._raised(lost=False)
            raise

    def close(self) -> None:
        self._pending = False
        self._yielded = self._landing = None
        coroutine, self._coroutine = self._coroutine, None
        if coroutine is not None:
            coroutine.close()

    def _ended(self) -> None:
        landing, self._landing, self._coroutine = self._landing, None, None
        if landing is not None:
            landing.landed(False)

    def _raised(self, lost: bool) -> None:
        landing, self._landing, self._coroutine = self._landing, None, None
        if landing is not None and lost:
            landing.landed(True)


def _hand_over(send: Send, message: Any, landing: Landing) -> Awaitable[Any]:
    """``send(message)``, run as far as it goes without waiting: ``SENT`` when the coroutine
    it returned ran to its end (what it returned is dropped: ASGI's ``send`` returns None),
    a ``Handing`` when it stopped to wait, the awaitable itself (not started) when it is not
    a coroutine. An exception it raised is raised; an ``OSError`` is told to ``landing``
    first (``Landing.landed``). (The native kernel's ``hand_over`` is this in C.)"""
    try:
        awaitable = send(message)
        if type(awaitable) is not types.CoroutineType:
            return awaitable
        coroutine: Coroutine[Any, Any, Any] = awaitable
        try:
            yielded = coroutine.send(None)
        except StopIteration:
            return SENT
    except OSError:
        landing.landed(True)
        raise
    return Handing(coroutine, yielded, landing)


async def awaiting(awaitable: Awaitable[Any], landing: Landing) -> None:
    """Await what a server's ``send`` gave that is not a coroutine (``hand_over`` left it
    unstarted), and tell ``landing`` how it ended."""
    try:
        await awaitable
    except OSError:
        landing.landed(True)
        raise
    landing.landed(False)


async def failed(error: BaseException) -> None:
    """Raise ``error``, which the server's ``send`` raised while ``hand_over`` ran it, for
    the task that awaits what ``send`` returned (where it would have been raised)."""
    raise error


#: ``_hand_over``, natively where the kernel was built.
hand_over: Final[Callable[[Send, Any, Landing], Awaitable[Any]]] = (
    native_kernel("hand_over") or _hand_over
)
#: The one awaitable of a message already taken (``Sent``, natively where the kernel was
#: built).
SENT: Final[Awaitable[None]] = native_kernel("SENT") or Sent()
#: The type of ``hand_over``'s answer when the coroutine stopped to wait.
HANDING: Final[type] = native_kernel("Handing") or Handing
