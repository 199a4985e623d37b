"""Plain values as launches write them: a scalar typed on a command line or in an environment
variable, and the numbers and switches readers take from config files (already parsed, or still
text).

Every reader reads integers and switches through these functions, so ``"8"``, ``8``, ``8.0`` and
``"8.0"`` are one value everywhere and a bool is never taken for a number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = [
    "PURE_BF16_STATES",
    "as_bool",
    "as_int",
    "child_dict",
    "mapping_of",
    "parse_scalar",
    "positive_int",
    "torch_adam_implementation",
]

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
PURE_BF16_STATES: Mapping[str, object] = {
    "parallelism.main_params_dtype": "bf16",
    "parallelism.exp_avg_dtype": "bf16",
    "parallelism.exp_avg_sq_dtype": "bf16",
    "parallelism.grad_reduce_in_fp32": False,
}
"""The scenario's optimizer fields of a model trained in pure bf16 under ``torch.optim.Adam`` /
``AdamW``: the optimizer updates the bf16 weights (no master), its moments are created like
the parameters (``zeros_like``, bf16) and the gradients are bf16
(``planner.specs.parallelism.ParallelismSpec``)."""
_TRUE = frozenset({"true", "yes", "t", "y", "1"})
_FALSE = frozenset({"false", "no", "f", "n", "0"})


def parse_scalar(text: str) -> object:
    """A command-line override value as the frameworks read it: ``true``/``false`` (any case)
    -> bool, ``null``/``None`` -> None, integers and decimals -> numbers, ``[a,b]`` -> list of
    scalars, quotes stripped; anything else stays text."""
    value = text.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    lowered = value.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"null", "none", "~"}:
        return None
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    if value.startswith("[") and value.endswith("]"):
        inner = value[1:-1].strip()
        return [parse_scalar(item) for item in inner.split(",")] if inner else []
    return value


def as_int(value: object) -> int | None:
    """``value`` as an int when it is integral: an int, an integral float, or text holding one
    (``"8"``, ``" 8.0 "``, ``"1e3"``); None otherwise (bools, fractions, words, quoted text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        parsed = parse_scalar(value)
        return as_int(parsed) if isinstance(parsed, int | float) else None
    return None


def positive_int(value: object) -> int | None:
    """:func:`as_int` of ``value`` when it is at least 1, else None."""
    number = as_int(value)
    return number if number is not None and number > 0 else None


def as_bool(value: object) -> bool | None:
    """``True``/``False``, a number (non-zero is true) or the words argument parsers accept
    (``true``/``false``, ``yes``/``no``, ``t``/``f``, ``y``/``n``, ``1``/``0``, any case);
    None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return None


def torch_adam_implementation(
    fused: tuple[object, str] | None, foreach: tuple[object, str] | None
) -> tuple[str, str] | None:
    """``(parallelism.optimizer_implementation, source)`` from the ``fused`` and ``foreach``
    keyword arguments a config passes to ``torch.optim.Adam`` / ``AdamW``, each ``(value,
    source)`` or None where unset: ``fused`` true is fused (configs that set it beside
    ``foreach: false`` run fused; torch refuses both true), else ``foreach`` true / false
    foreach / for_loop (``torch/optim/adam.py``); None when neither decides."""
    if fused is not None and as_bool(fused[0]) is True:
        return "fused", fused[1]
    if foreach is not None and as_bool(foreach[0]) is not None:
        return ("foreach" if as_bool(foreach[0]) else "for_loop"), foreach[1]
    return None


def mapping_of(value: object) -> Mapping[str, object]:
    """``value`` when it is a mapping (a config section, a data-file entry), else ``{}``."""
    return value if isinstance(value, Mapping) else {}


def child_dict(root: dict[str, object], keys: Sequence[str]) -> dict[str, object]:
    """The mapping at ``keys`` under ``root`` (``["a", "b"]``: ``root["a"]["b"]``), created on
    the way where missing; a non-mapping value on the way is replaced (a config merge putting
    ``a.b.c`` under a scalar ``a.b``)."""
    node = root
    for key in keys:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    return node
