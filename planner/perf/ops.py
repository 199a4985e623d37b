"""Element-wise functions for the engine's two forms: Python numbers or numpy arrays.

The engine (``planner.perf.engine`` and the modules it calls) is written once over values that
are either numpy arrays of shape ``(n,)`` (a batch, ``ScenarioArrays.from_scenarios``) or plain
Python ``float``/``bool``/``int`` (one scenario, ``ScenarioArrays.from_scenario``). Arithmetic
and comparison operators already work on both; the functions here stand in for the numpy
functions the engine needs, dispatching to ``math``/builtins when every argument is a Python
number and to the numpy ufunc otherwise. On one scenario this is plain float arithmetic, ~10x
faster than numpy calls on one-element arrays. Both forms give the same IEEE-754 results:
``+ - * /``, comparisons, floor/ceil/min/max and ``exp2`` of integers are exact in both, and
``log2`` is the C library's in both, except on CPUs where numpy dispatches to its own AVX-512
variant (the two may then differ in the last bit).

Boolean operators: use ``&`` and ``|`` (both forms) and ``logical_not`` (never ``~``, which is
``-2`` on the Python ``True``); for a single truth value use ``any_``/``all_``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BoolArray",
    "Count",
    "Flag",
    "FloatArray",
    "IntArray",
    "Real",
    "all_",
    "any_",
    "array",
    "ceil",
    "exp2",
    "floor",
    "isnan",
    "item",
    "log2",
    "logical_not",
    "maximum",
    "minimum",
    "take",
    "tolist",
    "unbox",
    "where",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]

Real = float | FloatArray
"""A real quantity of the engine: a Python float (one scenario) or a float64 array."""
Flag = bool | BoolArray
"""A truth value per scenario: a Python bool or a bool array."""
Count = int | IntArray
"""An integer code or index per scenario: a Python int or an int64 array."""

_ARRAY = np.ndarray
"""``numpy.ndarray``, bound once: the dispatch below runs ~250 times per scenario, and the
attribute lookup ``np.ndarray`` would cost about a third of each call."""


def where(cond: Flag, x: Real, y: Real) -> Real:
    """``x`` where ``cond`` else ``y`` (``numpy.where``; a conditional on Python numbers)."""
    if isinstance(cond, _ARRAY) or isinstance(x, _ARRAY) or isinstance(y, _ARRAY):
        out: FloatArray = np.where(cond, x, y)
        return out
    return x if cond else y


def maximum(x: Real, y: Real) -> Real:
    """Element-wise maximum (``numpy.maximum``; both forms assume no NaN)."""
    if isinstance(x, _ARRAY) or isinstance(y, _ARRAY):
        out: FloatArray = np.maximum(x, y)
        return out
    return x if x >= y else y


def minimum(x: Real, y: Real) -> Real:
    """Element-wise minimum (``numpy.minimum``; both forms assume no NaN)."""
    if isinstance(x, _ARRAY) or isinstance(y, _ARRAY):
        out: FloatArray = np.minimum(x, y)
        return out
    return x if x <= y else y


def _unary(ufunc: np.ufunc, number: Callable[[float], float], doc: str) -> Callable[[Real], Real]:
    """``ufunc`` on arrays, ``number`` on a Python number."""

    def function(x: Real) -> Real:
        if isinstance(x, _ARRAY):
            out: FloatArray = ufunc(x)
            return out
        return number(x)

    function.__doc__ = doc
    return function


floor = _unary(np.floor, lambda x: float(math.floor(x)), "Largest integer <= x, as a float.")
ceil = _unary(np.ceil, lambda x: float(math.ceil(x)), "Smallest integer >= x, as a float.")
log2 = _unary(np.log2, math.log2, "Base-2 logarithm, x > 0.")
exp2 = _unary(np.exp2, lambda x: math.pow(2.0, x), "2 ** x (exact for integer x in both forms).")


def isnan(x: Real) -> Flag:
    """True where ``x`` is NaN (``numpy.isnan``)."""
    if isinstance(x, _ARRAY):
        out: BoolArray = np.isnan(x)
        return out
    return math.isnan(x)


def logical_not(x: Flag) -> Flag:
    """Element-wise negation of a truth value (``~`` on bool arrays, ``not`` on a bool)."""
    if isinstance(x, _ARRAY):
        out: BoolArray = ~x
        return out
    return not x


def any_(x: Flag) -> bool:
    """True when any scenario's ``x`` is true."""
    if isinstance(x, _ARRAY):
        return bool(x.any())
    return bool(x)


def all_(x: Flag) -> bool:
    """True when every scenario's ``x`` is true."""
    if isinstance(x, _ARRAY):
        return bool(x.all())
    return bool(x)


def take(table: FloatArray, index: Count) -> Real:
    """``table[index]``: a float for an int index, an array for an index array."""
    if isinstance(index, _ARRAY):
        out: FloatArray = table[index]
        return out
    return float(table[index])


def unbox(x: Real) -> Real:
    """A numpy scalar or 0-d array as the Python float it holds; anything else unchanged
    (an efficiency model that answers in numpy keeps the one-scenario form in Python floats)."""
    if isinstance(x, np.generic) or (isinstance(x, _ARRAY) and x.ndim == 0):
        return float(x)
    return x


def array(x: Real) -> FloatArray:
    """``x`` as a float64 array (a Python number becomes a 0-d array)."""
    return np.asarray(x, dtype=np.float64)


def tolist(x: Real | Flag) -> list[Any]:
    """The per-scenario values as a list of Python numbers (one element for a number)."""
    if isinstance(x, _ARRAY):
        out: list[Any] = x.reshape(-1).tolist()
        return out
    return [x.item() if isinstance(x, np.generic) else x]


def item(x: Real, i: int) -> float:
    """Scenario ``i``'s value as a float (the number itself in the one-scenario form)."""
    if isinstance(x, _ARRAY):
        return float(x.reshape(-1)[i])
    return float(x)
