"""Small validation helpers shared by the spec value objects (raise ``SpecError``, never assert)."""

from __future__ import annotations

import math

from planner.errors import SpecError


def _type_name(value: object) -> str:
    return type(value).__name__


def require_int(path: str, value: object, *, minimum: int = 1) -> None:
    """Raise ``SpecError(path, ...)`` unless ``value`` is an ``int`` (not bool) ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, f"must be an integer, got {value!r} ({_type_name(value)})")
    if value < minimum:
        what = "positive" if minimum == 1 else f">= {minimum}"
        raise SpecError(path, f"must be {what}, got {value}")


def require_number(path: str, value: object, *, positive: bool = True) -> None:
    """Raise unless ``value`` is a finite real number (``> 0`` when ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(path, f"must be a number, got {value!r} ({_type_name(value)})")
    if not math.isfinite(value):
        raise SpecError(path, f"must be finite, got {value}")
    if positive and value <= 0:
        raise SpecError(path, f"must be positive, got {value}")


def require_bool(path: str, value: object) -> None:
    """Raise unless ``value`` is a ``bool``."""
    if not isinstance(value, bool):
        raise SpecError(path, f"must be true or false, got {value!r} ({_type_name(value)})")


def divisors(n: int, limit: int = 8) -> str:
    """The first ``limit`` divisors of ``n`` as text, for "use one of ..." hints."""
    found = [d for d in range(1, n + 1) if n % d == 0][:limit]
    return ", ".join(str(d) for d in found)
