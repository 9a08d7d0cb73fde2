"""A real uvicorn server on a free loopback port, for tests, demos and probes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.types import ASGIApp

__all__ = ["serve"]


@contextmanager
def serve(app: ASGIApp, *, startup_timeout: float = 10.0, **config: Any) -> Iterator[str]:
    """Serve ``app`` under uvicorn in a background thread; yield its base URL.

    The port is chosen by the OS on 127.0.0.1, so parallel runs never collide. The server
    is stopped (open connections closed, the thread joined) when the block exits.
    ``config`` goes to ``uvicorn.Config``.
    """
    import uvicorn  # an extra: imported only when a server is wanted

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    options: dict[str, Any] = {"log_level": "warning", "lifespan": "off"}
    options.update(config)
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="streamguard-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + startup_timeout
    try:
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start within {startup_timeout} s")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
