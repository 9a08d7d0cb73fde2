"""``streamguard._wire``: how a value from the wire may be kept and shown."""

from __future__ import annotations

from streamguard._wire import kept_key


def test_a_short_value_is_kept_as_it_is() -> None:
    """Up to the bound, the key is the value itself."""
    assert kept_key("call_1", 6) == "call_1"


def test_a_long_value_is_kept_as_a_fixed_size_digest() -> None:
    """Past the bound, a 16-byte digest: equal values still compare equal, others differ."""
    long = "x" * 100_000
    key = kept_key(long, 64)
    assert isinstance(key, bytes)
    assert len(key) == 16
    assert key == kept_key("x" * 100_000, 64)
    assert key != kept_key("x" * 99_999 + "y", 64)


def test_a_lone_surrogate_is_kept_without_failing() -> None:
    """JSON can carry lone surrogates; the digest encodes them rather than raising."""
    assert len(kept_key("\ud800" * 200, 64)) == 16
