"""Helpers for testing streaming apps with streamguard.

``serve`` needs uvicorn (``pip install 'streamguard[testing]'``); importing this package
does not.
"""

from __future__ import annotations

from streamguard.testing._server import serve

__all__ = ["serve"]
