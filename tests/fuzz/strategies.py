"""Shared pieces of the parser fuzz tests: the contract check, input strategies, settings.

Every parser the planner runs on outside input must either return a value or raise a
``PlannerError`` (``SpecError``, ``SourceError``, ``CalibrationError``, ...) within a bounded
time; :func:`outcome` calls it and lets anything else (a ``KeyError``, a ``RecursionError``, an
``OverflowError``) fail the test with Hypothesis's minimal reproducer.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from planner.errors import PlannerError

FUZZ = settings(
    max_examples=int(os.environ.get("PLANNER_FUZZ_EXAMPLES", "150")),
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Per-test settings: examples sized so each test stays well under the unit tests' 10 CPU-s
budget (``PLANNER_FUZZ_EXAMPLES=5000`` hunts deeper: give it a larger budget with
``PLANNER_TEST_CPU_S``)."""

FEW = settings(FUZZ, max_examples=max(1, FUZZ.max_examples // 4))
"""Settings of tests whose examples are expensive (a prediction, a table read)."""


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or the ``PlannerError`` it raised; any other exception
    propagates (the contract is broken)."""
    try:
        return fn(*args, **kwargs)
    except PlannerError as exc:
        error = exc
    assert str(error)  # every error says something
    return error


#: Numbers that break naive parsers: huge and tiny, negative zero, non-finite, edge ints.
NASTY_NUMBERS = st.sampled_from(
    [0, -0.0, 1, -1, 2**31, 2**53 + 1, 2**63, 2**64, 10**23, 10**400, 1e308, 1e-308,
     float("inf"), float("-inf"), float("nan"), 0.5, 1e19, -(2**63) - 1]
)  # fmt: skip
#: Text that breaks naive parsers: literal numbers of many kinds, blanks, control characters.
NASTY_TEXT = st.sampled_from(
    ["", " ", "0", "-1", "1e999", "nan", "inf", "1.5e13", "9" * 5000, "0x10", "1,000", "\x00",
     "\u202e", "null", "true", "[]", "{}", "a" * 300, "%j", "\\", "'", '"', "\n", "\r"]
)  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    NASTY_NUMBERS,
    NASTY_TEXT,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
"""Any JSON-like value (floats may be non-finite, integers any size)."""


def plain_json(value: Any) -> Any:
    """``value`` with non-finite floats replaced, so that ``json.dumps`` writes valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_json(v) for v in value]
    return value


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` (parsed JSON) with up to four values somewhere inside replaced by any value,
    keys dropped or lists emptied: what a version skew or a corrupt answer would bring."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 4))):
        node, path = doc, []
        while isinstance(node, dict | list) and node and draw(st.integers(0, 4)) > 0:
            key = draw(
                st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
            )
            path.append((node, key))
            node = node[key]
        if not path:
            continue
        parent, key = path[-1]
        action = draw(st.sampled_from(["replace", "drop", "empty"]))
        if action == "drop" and isinstance(parent, dict):
            del parent[key]
        elif action == "empty" and isinstance(parent[key], list | dict):
            parent[key] = type(parent[key])()
        else:
            parent[key] = draw(json_values)
    return doc


@st.composite
def edited_text(draw: st.DrawFn, text: str) -> str:
    """``text`` with up to three spans replaced by other text (truncation, garbage, repeats)."""
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 40)))
        new = draw(st.one_of(st.text(max_size=20), NASTY_TEXT, st.just(text[start:end] * 3)))
        text = text[:start] + new + text[end:]
    return text
