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


DIVISOR_SEARCH_LIMIT = 1 << 20
"""Trial divisions ``divisors`` does at most (about 0.1 s): the hints of huge counts stay fast."""


def divisor_list(n: int, limit: int = 8) -> list[int]:
    """The ``limit`` smallest divisors of ``n >= 1``, ascending, in ``O(sqrt n)`` steps.

    Trial division stops at ``isqrt(n)`` (every divisor above pairs with one below) and after
    ``DIVISOR_SEARCH_LIMIT`` steps: for a larger ``n`` whose small divisors are fewer than
    ``limit``, the list ends with ``n`` itself (divisors between the bound and ``n`` are not
    searched for). Empty when ``n < 1``.
    """
    if n < 1 or limit < 1:
        return []
    root = math.isqrt(n)
    bound = min(root, DIVISOR_SEARCH_LIMIT)
    small: list[int] = []
    for d in range(1, bound + 1):
        if n % d == 0:
            small.append(d)
            if len(small) == limit:
                return small
    if bound < root:  # not searched up to sqrt(n): only n is known to follow
        return [*small, n]
    large = [n // d for d in reversed(small) if n // d != d]
    return (small + large)[:limit]


def divisors(n: int, limit: int = 8) -> str:
    """The first ``limit`` divisors of ``n`` as text, for "use one of ..." hints
    (``divisor_list``: ``O(sqrt n)`` and bounded)."""
    return ", ".join(str(d) for d in divisor_list(n, limit))
