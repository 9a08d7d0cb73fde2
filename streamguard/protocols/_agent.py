"""The agent protocols' id-keyed entity tracker (``IdSet``, ``OpenIds``) and id helpers
(``id_key``, ``shown``) live in ``_entities``, with the numbered one. This module re-exports
them for A2A and MCP, which import them from here until they move to ``_entities`` too."""

from __future__ import annotations

from streamguard.protocols._entities import IdSet, OpenIds, id_key, shown

__all__ = ["IdSet", "OpenIds", "id_key", "shown"]
