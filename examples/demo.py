"""The main job, end to end: a real app under uvicorn with streamguard mounted.

Healthy and broken streams are driven through it by an httpx client over loopback, and
each stream's report is printed as a table, then every finding. The demo itself lives in
``streamguard._demo``, so that ``streamguard demo`` runs it from an installed package.

Run it with ``make demo``, ``streamguard demo`` or ``python examples/demo.py`` in the venv.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamguard._demo import drive, main

__all__ = ["drive", "main"]

if __name__ == "__main__":
    sys.exit(main())
