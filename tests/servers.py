"""A real uvicorn server on a free loopback port, started and stopped by the test."""

from streamguard.testing import serve

__all__ = ["serve"]
