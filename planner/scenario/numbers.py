"""The one rule for numbers in scenario, explore and recommend documents.

Every numeric field accepts a number, or text holding a decimal or scientific literal
(``"8"``, ``"1.0e12"``, ``"2.5E-3"``): YAML 1.1 resolvers (PyYAML's ``safe_load``, ``yq``)
read ``1.0e12`` as the string ``"1.0e12"``, while YAML 1.2, JSON and this package's YAML
loader read it as a number. With this rule a document means the same whichever of them
produced it: ``planner predict`` (YAML), ``POST /v1/predict`` (JSON) and the explore and
recommend documents agree. Text that is not such a literal (``"abc"``, ``"inf"``, ``"nan"``)
is left as it is, for the field's own check to reject with its message.
"""

from __future__ import annotations

import re

__all__ = ["integer_or_value", "number_or_value"]

_LITERAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def number_or_value(value: object) -> object:
    """The value of a numeric field: text holding a decimal or scientific literal becomes
    that number (an ``int`` when it is an integer literal, else a ``float``; surrounding
    blanks are ignored); anything else, numbers included, is returned unchanged. A literal
    too large for a float becomes ``inf``, which the field's check rejects as not finite."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if _INTEGER.fullmatch(text):
        return int(text)
    if _LITERAL.fullmatch(text):
        return float(text)
    return value


def integer_or_value(value: object) -> object:
    """The value of an integer field: ``number_or_value``, and a float that is a whole number
    (``1e3`` in YAML or JSON) as that ``int``; anything else unchanged."""
    number = number_or_value(value)
    if isinstance(number, float) and number.is_integer():
        return int(number)
    return number
