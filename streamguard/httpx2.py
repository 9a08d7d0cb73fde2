"""Check the event streams an upstream sends, as an ``httpx2`` client reads them.

The same transports as ``streamguard.httpx`` (one implementation, in
``streamguard._transport``), bound to httpx2, the HTTP client of the anthropic SDK (2.x)
and of recent openai SDKs::

    import anthropic, httpx2
    from streamguard.httpx2 import StreamGuardTransport

    client = anthropic.Anthropic(http_client=httpx2.Client(transport=StreamGuardTransport()))

This module needs httpx2 (``pip install 'streamguard[httpx2]'``); importing
``streamguard`` does not import it.
"""

from __future__ import annotations

import httpx2

from streamguard import _transport

__all__ = ["AsyncStreamGuardTransport", "StreamGuardTransport"]


class _Body(_transport.TappedBody, httpx2.SyncByteStream):
    pass


class _AsyncBody(_transport.AsyncTappedBody, httpx2.AsyncByteStream):
    pass


_LIBRARY = _transport.ClientLibrary(
    read_timeout=httpx2.ReadTimeout,
    request_not_read=httpx2.RequestNotRead,
    sync_body=_Body,
    async_body=_AsyncBody,
    sync_transport=httpx2.HTTPTransport,
    async_transport=httpx2.AsyncHTTPTransport,
)


class StreamGuardTransport(_transport.GuardedTransport, httpx2.BaseTransport):
    """An ``httpx2.BaseTransport`` that checks the event streams ``transport`` returns.

    ``StreamGuardTransport(transport=None, config=None, *, on_report=None, **options)``:
    ``transport`` defaults to ``httpx2.HTTPTransport()``; the rest as
    ``streamguard.httpx.StreamGuardTransport``.
    """

    _library = _LIBRARY


class AsyncStreamGuardTransport(_transport.AsyncGuardedTransport, httpx2.AsyncBaseTransport):
    """``StreamGuardTransport`` for ``httpx2.AsyncClient`` (default ``AsyncHTTPTransport()``)."""

    _library = _LIBRARY
