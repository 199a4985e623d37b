"""The one rule for numbers in scenario, explore and recommend documents.

Every numeric field accepts a number, or text holding a decimal or scientific literal
(``"8"``, ``"1.0e12"``, ``"2.5E-3"``): YAML 1.1 resolvers (PyYAML's ``safe_load``, ``yq``)
read ``1.0e12`` as the string ``"1.0e12"``, while YAML 1.2, JSON and this package's YAML
loader read it as a number. With this rule a document means the same whichever of them
produced it: ``planner predict`` (YAML), ``POST /v1/predict`` (JSON) and the explore and
recommend documents agree. Text that is not such a literal (``"abc"``, ``"inf"``, ``"nan"``)
is left as it is, for the field's own check to reject with its message.

Numbers are bounded: an integer beyond ``±MAX_INTEGER`` (2^53, the largest a float holds
exactly, far above any count, size or token budget) is returned as a float (``inf`` when too
large even for that), which integer fields reject as not an integer and number fields take as
the float it is, so a huge value gives the field's error instead of an overflow deep in the
search; text longer than ``MAX_LITERAL_CHARS`` is never converted (Python refuses integer text
of more than 4,300 digits).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "LITERAL_PATTERN",
    "MAX_INTEGER",
    "MAX_LITERAL_CHARS",
    "integer_or_value",
    "number_or_value",
]

MAX_INTEGER = 2**53
"""Largest magnitude of an integer taken as an integer (9,007,199,254,740,992)."""
MAX_LITERAL_CHARS = 400
"""Longest text converted to a number, characters."""

LITERAL_PATTERN = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
"""A decimal or scientific literal (``8``, ``1.0e12``, ``-.5``), as text must hold it to be
taken as a number."""

_LITERAL = re.compile(LITERAL_PATTERN)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def number_or_value(value: object) -> object:
    """The value of a numeric field: text holding a decimal or scientific literal becomes
    that number (an ``int`` when it is an integer literal, else a ``float``; surrounding
    blanks are ignored); an integer beyond ``±MAX_INTEGER`` becomes a float; anything else,
    other numbers included, is returned unchanged. A literal too large for a float becomes
    ``inf``, which the field's check rejects as not finite."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _bounded(value)
    if not isinstance(value, str) or len(value) > MAX_LITERAL_CHARS:
        return value
    text = value.strip()
    if _INTEGER.fullmatch(text):
        return _bounded(int(text))
    if _LITERAL.fullmatch(text):
        return float(text)
    return value


def _bounded(value: int) -> int | float:
    """``value``, or as a float when beyond ``±MAX_INTEGER`` (``±inf`` past the float range)."""
    if -MAX_INTEGER <= value <= MAX_INTEGER:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def integer_or_value(value: object) -> object:
    """The value of an integer field: ``number_or_value``, and a float that is a whole number
    within ``±MAX_INTEGER`` (``1e3`` in YAML or JSON) as that ``int``; anything else
    unchanged."""
    number = number_or_value(value)
    if isinstance(number, float) and number.is_integer() and abs(number) <= MAX_INTEGER:
        return int(number)
    return number
