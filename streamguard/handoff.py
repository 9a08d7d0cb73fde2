"""``ReportQueue``: hand stream reports to slow code without stalling the event loop.

``on_report`` runs synchronously, on the event loop, in the task that sent the stream's
last message: a callback that blocks for two seconds (a database write, an HTTP call)
stalls every request of that worker for two seconds. Wrap such a callback::

    reports = ReportQueue(store_report, maxsize=1000)
    app.add_middleware(StreamGuardMiddleware, on_report=reports)

Each report is put on a bounded queue without waiting and the callback runs on one worker
thread. When the queue is full the report is dropped and counted (``dropped``), never
waited for: a slow sink loses reports, not latency. A callback that raises is counted
(``failed``) and logged, and the worker goes on.

The worker is a daemon thread, and a server that ends on a signal (uvicorn re-raises
SIGTERM once it has stopped) runs no exit handler: what is still queued then is lost. So
the middleware drains its sinks when the lifespan shuts down (``drain``): the queue is
delivered, waiting at most ``shutdown_timeout`` seconds for a slow callback, and what
could not be delivered in that time is counted (``undelivered``) and logged. An app
served without a lifespan is drained at interpreter exit only.
"""

from __future__ import annotations

import atexit
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable

from streamguard.logs import get_logger, log_callback_failure
from streamguard.report import StreamReport

__all__ = ["ReportQueue"]

_STOP = object()


class ReportQueue:
    """A non-blocking ``on_report``: a bounded queue drained by one worker thread."""

    def __init__(
        self,
        callback: Callable[[StreamReport], object],
        *,
        maxsize: int = 1000,
        name: str = "streamguard-reports",
        shutdown_timeout: float = 2.0,
    ) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize!r}")
        if not shutdown_timeout >= 0:  # (NaN too)
            raise ValueError(f"shutdown_timeout must be 0 or more, got {shutdown_timeout!r}")
        self.callback = callback
        self.name = name
        #: How long a shutdown waits for the queued reports to be delivered, in seconds.
        self.shutdown_timeout = shutdown_timeout
        #: Reports dropped because the queue was full.
        self.dropped = 0
        #: Reports whose callback raised.
        self.failed = 0
        #: Reports still queued when a shutdown stopped waiting for them (``drain``).
        self.undelivered = 0
        self._queue: queue.Queue[object] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        # At exit the reports still queued are delivered (daemon threads are not waited for).
        atexit.register(_close_at_exit, weakref.ref(self))

    def __call__(self, report: StreamReport) -> None:
        """Queue ``report`` for the callback; never blocks, never raises."""
        if self._closed:
            self.dropped += 1
            return
        if self._thread is None:
            self._start()
        try:
            self._queue.put_nowait(report)
        except queue.Full:
            self.dropped += 1

    def drain(self, timeout: float | None = None) -> int:
        """Wait until every queued report is delivered, at most ``timeout`` seconds
        (``shutdown_timeout`` when ``None``); return, count and log how many were not.

        The queue stays open: a report queued later is delivered as usual.
        """
        if timeout is None:
            timeout = self.shutdown_timeout
        waiting = self._queue
        deadline = time.monotonic() + timeout
        with waiting.all_tasks_done:
            while waiting.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                waiting.all_tasks_done.wait(left)
            pending: int = waiting.unfinished_tasks
        if pending:
            self.undelivered += pending
            get_logger().warning(
                "streamguard_reports_undelivered",
                undelivered=pending,
                timeout_s=timeout,
                queue=self.name,
            )
        return pending

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued, then stop the worker (waiting at most ``timeout`` s)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)  # waits for room: the worker drains
        except queue.Full:
            return
        thread.join(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                self._queue.task_done()
                return
            assert isinstance(item, StreamReport)
            try:
                self.callback(item)
            except BaseException as exc:  # even SystemExit must not end the worker
                self.failed += 1
                # A logging pipeline that fails too must not end the worker either.
                with contextlib.suppress(Exception):
                    log_callback_failure(self.name, self.callback, exc, item.route, item.protocol)
            finally:
                self._queue.task_done()


def _close_at_exit(ref: weakref.ref[ReportQueue]) -> None:
    report_queue = ref()
    if report_queue is not None:
        report_queue.close(timeout=report_queue.shutdown_timeout)
