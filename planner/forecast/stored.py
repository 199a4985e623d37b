"""Reading the JSON the forecast keeps in the store (progress histories, band calibrations):
each value narrowed to the type its record holds. Every reader raises ``TypeError`` (or
``ValueError`` for text that is not a number) for a value of another type, so a caller that
reads a whole record can catch those two and start afresh (a state from another version)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

__all__ = ["integer", "items", "number", "object_of", "optional_integer", "optional_real", "real"]


def object_of(value: object) -> Mapping[str, object]:
    """A JSON object (None reads as an empty one)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"not an object: {type(value).__name__}")


def items(value: object) -> Sequence[object]:
    """A JSON list."""
    if isinstance(value, list | tuple):
        return value
    raise TypeError(f"not a list: {type(value).__name__}")


def number(value: object) -> float:
    """A number, or its text, as a float."""
    if isinstance(value, numbers.Real | str):
        return float(value)
    raise TypeError(f"not a number: {type(value).__name__}")


def integer(value: object) -> int:
    """A whole number (not a bool), as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"not a whole number: {type(value).__name__}")


def real(value: object) -> float:
    """A number (not a bool), as it is (a whole number stays one)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise TypeError(f"not a number: {type(value).__name__}")


def optional_integer(value: object) -> int | None:
    """:func:`integer`, or None."""
    return None if value is None else integer(value)


def optional_real(value: object) -> float | None:
    """:func:`real`, or None."""
    return None if value is None else real(value)
