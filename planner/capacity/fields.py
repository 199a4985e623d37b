"""Typed field readers over ``Located`` documents: numbers, names, dates, Slurm time limits.

Every reader raises a located ``DocumentError`` that says what is wrong and how to fix it.
Dates and times are UTC: a date (``2025-07-01``) is its midnight, a date-time without a zone
is read as UTC, and a number is POSIX epoch seconds.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from planner.capacity.documents import Located

__all__ = [
    "optional",
    "read_bool",
    "read_int",
    "read_name",
    "read_number",
    "read_time_limit_s",
    "read_timestamp_s",
    "require",
    "slurm_time_limit_s",
]


def require(node: Located, key: str, hint: str) -> Located:
    """The child ``key`` of mapping ``node``; a located ``is required; <hint>`` error if absent."""
    child = node.mapping().get(key)
    if child is None:
        raise node.error(f"is required; {hint}", key)
    return child


def optional(node: Located, key: str) -> Located | None:
    """The child ``key`` of mapping ``node``, None when absent or null."""
    return node.mapping().get(key)


def read_int(node: Located, *, minimum: int = 1, what: str = "") -> int:
    """An integer ``>= minimum`` (integral floats such as ``1e3`` accepted)."""
    value = node.value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise node.error(f"must be an integer{what}, got {value!r}")
    if value < minimum:
        raise node.error(f"must be >= {minimum}{what}, got {value}")
    return value


def read_number(node: Located, *, positive: bool = True, what: str = "") -> float:
    """A finite real number (``> 0`` when ``positive``)."""
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise node.error(f"must be a finite number{what}, got {value!r}")
    if positive and value <= 0:
        raise node.error(f"must be positive{what}, got {value}")
    return float(value)


def read_bool(node: Located) -> bool:
    """``true`` or ``false``."""
    if not isinstance(node.value, bool):
        raise node.error(f"must be true or false, got {node.value!r}")
    return node.value


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,127}$")


def read_name(node: Located, what: str = "a name") -> str:
    """A non-empty name of letters, digits and ``._:/+-`` (at most 128 characters)."""
    value = node.value
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _NAME.match(value):
        raise node.error(
            f"must be {what} (letters, digits and . _ : / + -, at most 128 characters), "
            f"got {node.value!r}"
        )
    return value


_RELATIVE = re.compile(r"^\+\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[hdw])$")
_UNIT_S = {"h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def read_timestamp_s(node: Located, start_s: float | None = None) -> float:
    """POSIX seconds from a date (``2025-07-01``, UTC midnight), an ISO 8601 date-time
    (``2025-07-01T12:00:00Z``; no zone = UTC), a number of epoch seconds, or a time relative
    to the review's start ``start_s`` (``+19d``, ``+36h``, ``+2w``: days, hours, weeks after
    it), which a rolling plan uses. A relative time without a ``start_s`` is an error."""
    value = node.value
    if isinstance(value, bool):
        raise node.error(f"must be a date such as 2025-07-01, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise node.error(f"must be a date or non-negative epoch seconds, got {value!r}")
        return float(value)
    if isinstance(value, dt.datetime):
        stamp = value
    elif isinstance(value, dt.date):
        stamp = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and (relative := _RELATIVE.match(value.strip())):
        if start_s is None:
            raise node.error(
                f"{value!r} is relative to the review's start, which is not known here; "
                "give the fleet a start (or run the review with --start)"
            )
        return start_s + float(relative["n"]) * _UNIT_S[relative["unit"]]
    elif isinstance(value, str):
        try:
            stamp = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise node.error(
                f"is not a date: {value!r}; write 2025-07-01, 2025-07-01T08:00:00Z, or +19d "
                "(days after the review's start; h: hours, w: weeks)"
            ) from None
    else:
        raise node.error(f"must be a date such as 2025-07-01, got {value!r}")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


_SLURM_TIME = re.compile(
    r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
    r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$"
)


def slurm_time_limit_s(text: str) -> float | None:
    """Seconds of a Slurm ``--time`` value, None for ``UNLIMITED``/``INFINITE``.

    Slurm's formats (sbatch(1)): ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
    ``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``. Raises
    ``ValueError`` for anything else.
    """
    word = text.strip().upper()
    if word in ("UNLIMITED", "INFINITE"):
        return None
    match = _SLURM_TIME.match(word)
    if match is None:
        raise ValueError(text)
    g = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    if "days" in g:
        return g["days"] * 86400.0 + g["dh"] * 3600.0 + g.get("dm", 0) * 60.0 + g.get("ds", 0)
    if "c" in g:
        return g["a"] * 3600.0 + g["b"] * 60.0 + g["c"]
    return g["a"] * 60.0 + g.get("b", 0)


def read_time_limit_s(node: Located) -> float | None:
    """A time limit as users give it to Slurm: ``"14-00:00:00"``, ``"48:00:00"``, a number of
    minutes (Slurm's ``--time=N``), or ``UNLIMITED``. None means no limit."""
    value = node.value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return read_number(node, what=" (minutes, as Slurm's --time=N)") * 60.0
    if isinstance(value, str):
        try:
            limit = slurm_time_limit_s(value)
        except ValueError:
            raise node.error(
                f"is not a Slurm time limit: {value!r}; write days-hours:minutes:seconds "
                "(e.g. 14-00:00:00), hours:minutes:seconds, minutes, or UNLIMITED"
            ) from None
        if limit is not None and limit <= 0:
            raise node.error(f"must be longer than zero, got {value!r}")
        return limit
    raise node.error(f"must be a Slurm time limit such as 14-00:00:00, got {value!r}")
