"""Check the event streams an upstream sends, as an ``httpx`` client reads them.

``StreamGuardTransport`` (for ``httpx.Client``) and ``AsyncStreamGuardTransport`` (for
``httpx.AsyncClient``) wrap a transport (by default the standard ``httpx.HTTPTransport()``
/ ``httpx.AsyncHTTPTransport()``) and watch every ``text/event-stream`` response that
passes through with the middleware's checks, as the caller reads it, without buffering
or changing a byte::

    import httpx, openai
    from streamguard.httpx import StreamGuardTransport

    client = openai.OpenAI(http_client=httpx.Client(transport=StreamGuardTransport()))

The options are the middleware's (``StreamGuardConfig``: ``routes`` by URL path or host +
path, ``protocol``, ``timers``, ...; ``metrics``, ``on_report``, ``sinks``). This module
needs httpx (``pip install 'streamguard[httpx]'``); importing ``streamguard`` does not
import it.
For httpx2 (the anthropic SDK's client), use ``streamguard.httpx2``.
"""

from __future__ import annotations

import httpx

from streamguard import _transport

__all__ = ["AsyncStreamGuardTransport", "StreamGuardTransport"]


class _Body(_transport.TappedBody, httpx.SyncByteStream):
    pass


class _AsyncBody(_transport.AsyncTappedBody, httpx.AsyncByteStream):
    pass


_LIBRARY = _transport.ClientLibrary(
    read_timeout=httpx.ReadTimeout,
    request_not_read=httpx.RequestNotRead,
    sync_body=_Body,
    async_body=_AsyncBody,
    sync_transport=httpx.HTTPTransport,
    async_transport=httpx.AsyncHTTPTransport,
)


class StreamGuardTransport(_transport.GuardedTransport, httpx.BaseTransport):
    """An ``httpx.BaseTransport`` that checks the event streams ``transport`` returns.

    ``StreamGuardTransport(transport=None, config=None, **options)``: ``transport``
    defaults to ``httpx.HTTPTransport()``. Configure with ``config=StreamGuardConfig(...)``
    or the same fields as keywords, as the middleware; the runtime collaborators are the
    middleware's too: ``metrics`` (a ``CollectorRegistry`` to count in as
    ``streamguard_upstream_*``, default the process-wide one, or ``False``), ``on_report``
    (each stream's ``StreamReport``, in the thread that read or closed the response),
    ``sinks`` and ``clock``. ``skipped``, ``in_flight`` and ``internal_errors`` count as the
    middleware's do. Closing the transport reports the streams still open.
    """

    _library = _LIBRARY


class AsyncStreamGuardTransport(_transport.AsyncGuardedTransport, httpx.AsyncBaseTransport):
    """``StreamGuardTransport`` for ``httpx.AsyncClient`` (default ``AsyncHTTPTransport()``)."""

    _library = _LIBRARY
