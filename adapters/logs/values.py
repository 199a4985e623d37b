"""Checked values for the log parsers of ``adapters.logs``: numbers, counts, step times, times.

Internal to ``adapters.logs``: every format module reads its fields through these so that one
rule decides what is absurd. A helper raises ``InvalidLineError`` when a value makes the whole
line meaningless (a negative iteration, a NaN step time); optional fields are cleared instead.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, tzinfo
from typing import Any, Final

MAX_ITERATION: Final = 10**12
"""Iteration counts and totals at or above this are absurd."""
MAX_STEP_TIME_S: Final = 1.0e6
"""Step times above this (11.6 days per iteration) are absurd."""
MAX_JSON_NESTING_CHARS: Final = 200
"""JSON with more "{" and "[" than this is not a log line's object (spares deep recursion)."""
MIN_TIMESTAMP_S: Final = 1.0e9  # 2001-09-09
MAX_TIMESTAMP_S: Final = 1.0e10  # 2286-11-20

ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
DATETIME: Final = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[ T](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:[.,](?P<frac>\d{1,9}))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
NUMBER: Final = r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
"""A printed number as a regular expression: thousands separators, exponent, nan and inf."""

# A log line's own time: "[2023-04-18 08:48:36,035]" (DeepSpeed, Python logging) or
# "2025-01-01 12:00:00" at the start of the line, after an optional "[" and launcher label.
_LEADING_DATETIME: Final = re.compile(r"^(?:\S{0,40}?[: ])?\[?(?=\d{4}-\d{2}-\d{2}[ T]\d)")
# Megatron-LM's ``print_datetime`` (``training.py``): ``[after training is done] datetime: ...``
_EVENT_DATETIME: Final = re.compile(r"^\[[^\]]{1,80}\] datetime: (?=\d{4}-\d{2}-\d{2} \d)")


class InvalidLineError(Exception):
    """A line in a known format whose values are absurd: the whole line is dropped."""


def json_object(body: str) -> dict[str, Any] | None:
    """The JSON object ``body`` holds, or None when it is not one (or is nested too deeply)."""
    if body.count("{") + body.count("[") > MAX_JSON_NESTING_CHARS:
        return None
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def number(text: str) -> float:
    """A printed number (thousands separators allowed); ValueError when it is none."""
    return float(text.replace(",", ""))


def iteration(value: float) -> int:
    """A checked iteration count: a whole number in [0, 10^12); else ``InvalidLineError``."""
    if not math.isfinite(value) or value < 0 or value >= MAX_ITERATION or value != int(value):
        raise InvalidLineError
    return int(value)


def total(value: float | None, at_iteration: int) -> int | None:
    """A checked iteration total (None stays None): whole, positive, at least ``at_iteration``."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0 or value >= MAX_ITERATION or value != int(value):
        raise InvalidLineError
    if value < at_iteration:
        raise InvalidLineError
    return int(value)


def step_time(value_s: float | None) -> float | None:
    """A checked step time, s: None for unknown or exactly zero; ``InvalidLineError`` if absurd."""
    if value_s is None:
        return None
    if not math.isfinite(value_s) or value_s < 0 or value_s > MAX_STEP_TIME_S:
        raise InvalidLineError
    return value_s if value_s > 0 else None


def finite(value: float | None) -> float | None:
    """``value`` when finite, else None (an optional field such as a loss)."""
    return value if value is not None and math.isfinite(value) else None


def positive(value: float | None) -> float | None:
    """``value`` when finite and positive, else None (an optional rate)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def epoch_s(value: float | None) -> float | None:
    """Epoch seconds when within 2001-2286, else None."""
    if value is None or not math.isfinite(value):
        return None
    return value if MIN_TIMESTAMP_S <= value <= MAX_TIMESTAMP_S else None


def timestamp(text: str, tz: tzinfo | None) -> float | None:
    """Epoch seconds of the first ``YYYY-MM-DD HH:MM:SS[,fff][zone]`` in ``text``, or None.

    A time printed without a zone is read in ``tz`` (None: the host's local zone).
    """
    m = DATETIME.search(text)
    if m is None:
        return None
    frac = m["frac"] or ""
    try:
        dt = datetime(
            int(m["y"]),
            int(m["mo"]),
            int(m["d"]),
            int(m["h"]),
            int(m["mi"]),
            int(m["s"]),
            int((frac + "000000")[:6]),
        )
        zone = m["tz"]
        if zone:
            offset = datetime.strptime(zone.replace("Z", "+0000").replace(":", ""), "%z")
            dt = dt.replace(tzinfo=offset.tzinfo)
        elif tz is not None:
            dt = dt.replace(tzinfo=tz)
        return epoch_s(dt.timestamp())
    except (ValueError, OverflowError, OSError):
        return None


def leading_timestamp(text: str, tz: tzinfo | None) -> float | None:
    """Epoch seconds of the time a line starts with (``[YYYY-MM-DD HH:MM:SS,fff]`` or bare), or
    None when the line does not start with one (a launcher label such as ``0: `` may come first).
    Megatron-LM's event lines (``[after training is done] datetime: YYYY-MM-DD HH:MM:SS``, its
    ``print_datetime``) count as starting with their time: the last one is the job's end, after
    its final evaluation and checkpoint.
    """
    m = _LEADING_DATETIME.match(text) or _EVENT_DATETIME.match(text)
    if m is None:
        return None
    return timestamp(text[m.end() : m.end() + 40], tz)
