"""What a default log line may say about a value taken from the wire.

Finding messages reach logs, metrics tooling and the CLI by default, so they must not carry
what a client, an app or an upstream sent: a value from the stream or the headers appears
either as one of a closed set of tokens the protocol defines, or as its size and a short
hash. The hash lets a reader tell two values apart (two ids that differ, one name sent
twice) without learning either. Content is shown only in the opt-in ``excerpt``.

One reader may see the values: ``streamguard check`` on files the user passed on the
command line, their own data. It runs its checks inside ``showing_values()``, where
``describe`` shows a value itself (shortened, the size and hash after a cut one, so two
values still tell apart). Nothing else sets it: the middleware, the transports and
``probe`` never do.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from hashlib import blake2b

__all__ = ["describe", "kept_key", "number", "showing_values", "token"]

#: Whether ``describe`` shows values (``showing_values``): False unless a reader of the
#: user's own files asked.
_SHOWING_VALUES: ContextVar[bool] = ContextVar("streamguard_showing_values", default=False)
#: How much of a value ``describe`` shows when showing values.
_SHOWN_CHARS = 60

#: Integers this large are shown by size: a 100,000-digit number must not become a log line
#: (and ``str()`` of one past 4,300 digits raises).
_MAX_SHOWN_INT = 10**18


def describe(value: str | bytes | bytearray) -> str:
    """``<12 chars #1a2b3c4d>``: the size of ``value`` and a short hash, never the value
    (unless ``showing_values``: then the value, quoted and shortened)."""
    if isinstance(value, str):
        unit, raw = "chars", value.encode("utf-8", "surrogatepass")
    else:
        unit, raw = "bytes", bytes(value)
    hidden = f"<{len(value)} {unit} #{blake2b(raw, digest_size=4).hexdigest()}>"
    if _SHOWING_VALUES.get():
        if len(value) <= _SHOWN_CHARS:
            return repr(value)
        return f"{value[:_SHOWN_CHARS]!r}… {hidden}"
    return hidden


@contextmanager
def showing_values() -> Iterator[None]:
    """Within it, ``describe`` shows values: for a reader of the user's own files only."""
    token = _SHOWING_VALUES.set(True)
    try:
        yield
    finally:
        _SHOWING_VALUES.reset(token)


def token(value: object, known: Collection[str]) -> str:
    """``value`` quoted when it is one of the ``known`` tokens, else ``describe``d.

    Anything that is not a string (a number where a name belongs, ``None``) is named by
    its type only.
    """
    if isinstance(value, str):
        return repr(value) if value in known else describe(value)
    if isinstance(value, bytes | bytearray):
        return describe(value)
    return f"<{type(value).__name__}>"


def number(value: object) -> str:
    """An integer from the wire (an index, a sequence number) as digits when it is of a
    sane size; anything else as ``token`` would show it."""
    if type(value) is int and -_MAX_SHOWN_INT < value < _MAX_SHOWN_INT:
        return str(value)
    if type(value) is int:
        return f"<int of {value.bit_length()} bits>"
    return token(value, ())


def kept_key(value: str, max_chars: int) -> str | bytes:
    """A wire value (an id) as a checker keeps it to compare later: itself when at most
    ``max_chars`` long, else a 16-byte digest, so it costs bounded memory and still
    compares."""
    if len(value) <= max_chars:
        return value
    return blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()
