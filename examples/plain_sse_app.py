"""A Starlette app with healthy and deliberately broken plain-SSE streams.

The app lives in ``streamguard._demo_app`` so that ``streamguard demo`` runs from an
installed package; this module re-exports it for the examples and their tests.
"""

from __future__ import annotations

from streamguard._demo_app import ROUTES, build_app

__all__ = ["ROUTES", "build_app"]
