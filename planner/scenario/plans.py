"""Explore and recommend documents: the edge between their JSON/YAML documents and the typed
design-space search (``planner.search``) and allocation advice (``planner.recommend``).

The CLI and the HTTP API call these functions; nothing else in the core sees a document.
"""

from __future__ import annotations

from planner.recommend import recommend_document
from planner.search import explore_document, explore_documents

__all__ = ["explore_document", "explore_documents", "recommend_document"]
