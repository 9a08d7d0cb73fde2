"""Helpers for testing streaming apps with streamguard.

* ``collect`` / ``acollect``: read an httpx streaming response (sync / async) to its end
  through the checking engine and return a ``CollectedStream``: the events with their
  arrival times, the text, the finish reasons and the ``StreamReport``;
* ``assert_stream_ok``: assert a response, captured bytes or a report is well formed,
  with a readable list of what is not;
* ``differences_from_response`` / ``assert_matches_response``: the collected stream,
  assembled as the official client assembles it, against the non-streamed response for the
  same request (text, tool calls, finish reason, usage), each ``Difference`` listed;
* ``serve``: a real uvicorn server on a free loopback port;
* the pytest plugin (``streamguard.testing.pytest_plugin``, enabled by installing the
  package): the ``streamguard_server`` fixture and the ``streamguard_allow`` marker.

``serve`` needs uvicorn and ``collect`` httpx (``pip install 'streamguard[testing]'``);
importing this package needs neither.
"""

from __future__ import annotations

from streamguard.testing._assert import assert_stream_ok
from streamguard.testing._collect import (
    CollectedStream,
    ReceivedEvent,
    acollect,
    collect,
    collect_bytes,
)
from streamguard.testing._compare import (
    Difference,
    assert_matches_response,
    differences_from_response,
)
from streamguard.testing._server import serve

__all__ = [
    "CollectedStream",
    "Difference",
    "ReceivedEvent",
    "acollect",
    "assert_matches_response",
    "assert_stream_ok",
    "collect",
    "collect_bytes",
    "differences_from_response",
    "serve",
]
