"""JSON values as Python types: what ``json.dumps`` writes and ``json.loads`` reads (RFC 8259).

``JsonValue`` is a string, number, boolean, null, array or object of JSON values; arrays and
objects are typed as read-only ``Sequence``/``Mapping`` so that a ``list[float | None]`` or a
``dict[str, str]`` is a JSON value as it stands (``list`` and ``dict`` are invariant in their
element types). Build a document as ``dict[str, JsonValue]`` where it is changed in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = (
    str | int | float | bool | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
"""Any JSON value."""

JsonObject: TypeAlias = Mapping[str, JsonValue]
"""A JSON object (read-only view)."""
