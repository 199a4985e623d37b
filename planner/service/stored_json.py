"""Reading the JSON documents the store keeps (calibration states, review results): each
value narrowed to what the reader needs, a value of another shape (a state from another
version) read as absent instead of raising."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

__all__ = ["fields", "number", "rows", "text"]


def fields(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def rows(value: object) -> list[Mapping[str, object]]:
    """The objects of ``value`` when it is a JSON list (what is not an object left out), else
    an empty list."""
    return [row for row in value if isinstance(row, Mapping)] if isinstance(value, list) else []


def text(value: object) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def number(value: object) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return None
