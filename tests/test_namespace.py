"""``dir(streamguard)`` shows the public API, not the helpers the package imports."""

from __future__ import annotations

import streamguard
import streamguard.cli  # a public submodule, loaded: it is listed


def test_dir_shows_no_import_helpers() -> None:
    """The typing and import machinery of ``streamguard/__init__.py`` stays out of ``dir``."""
    helpers = {"Any", "TYPE_CHECKING", "annotations", "importlib", "ModuleType", "_build"}
    assert not helpers & set(dir(streamguard))


def test_dir_shows_the_public_api_and_loaded_submodules() -> None:
    """Every name of ``__all__``, the version and a loaded public submodule are listed."""
    listed = set(dir(streamguard))
    assert set(streamguard.__all__) | {"__version__", "cli"} <= listed
    assert not [name for name in listed if name.startswith("_") and name != "__version__"]
