"""Fit a few named constants of the default efficiency model on the calibration subset.

Loss: the mean over calibration sources of each source's mean ``|ln(predicted / measured)|``
iteration time (each source weighs the same, so llm-foundry's 72 calibration rows do not drown
the 3 of Korthikanti et al.). Minimised with bounded Nelder-Mead (the model has ``max``es, so
the loss is not smooth). Only calibration rows enter the loss; held-out errors are reported
separately by the harness.

The model's constants are read and applied through ``planner.perf``'s constants interface
(``default_constants()``, ``DefaultEfficiency.from_constants``, ``write_constants``) when it is
there; otherwise through the fields of the ``DefaultEfficiency`` dataclass (``LEGACY_PARAMETERS``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy.optimize import minimize

from benchmarks.accuracy.convert import SPLIT_SOURCES, Case
from benchmarks.accuracy.evaluate import evaluate, scenarios_of
from benchmarks.accuracy.report import is_moe_case
from benchmarks.accuracy.stats import mean_abs_log_error
from planner.catalog import get_gpu
from planner.perf import DefaultEfficiency, EfficiencyModel

PARAMETERS = (
    "gemm_peak_fraction_ampere",
    "gemm_peak_fraction_hopper",
    "low_precision_gemm_relative_efficiency",
    "unfused_elementwise_traffic_factor",
    "flash_attention1_relative_efficiency",
)
"""Fitted by default with the constants interface: GEMM efficiency per GPU generation (A100,
H100), FP8 relative to 16-bit, the element-wise HBM traffic of eager (unfused) PyTorch
stacks relative to fused kernels, and FlashAttention v1's speed relative to FlashAttention-2
(llm-foundry; Dao 2023 measures FlashAttention-2 1.7-3.0x faster, i.e. 0.33-0.59; the fit is
not bounded to that range and lands at ~0.63, a 1.6x speed-up: bounded at 0.59 it moves the
eager element-wise factor instead and 15 instead of 6 held-out llm-foundry rows fall beyond
±15 %, see benchmarks/RESULTS.md).
The hidden share of tensor-parallel communication is not fitted: with or without Transformer
Engine's userbuffers it runs to its bound (1.0), i.e. the fit would use it to absorb other
errors."""

LEGACY_PARAMETERS = ("max_fraction", "half_width", "fp8_factor", "tp_overlap")
"""The same knobs in the first model's ``DefaultEfficiency`` fields."""


def case_architecture(case: Case) -> str:
    """The catalog architecture (``ampere``, ``hopper``, ``blackwell``, ``cdna3``) of the case's
    GPU."""
    return get_gpu(str(case.document["hardware"]["gpu"])).architecture


FIT_SUBSETS: Mapping[str, tuple[str, Callable[[Case], bool]]] = {
    "all": ("every calibration row", lambda c: True),
    "blackwell-dense": (
        "the calibration rows of dense models on Blackwell GPUs",
        lambda c: case_architecture(c) == "blackwell" and not is_moe_case(c),
    ),
    "blackwell": (
        "the calibration rows on Blackwell GPUs",
        lambda c: case_architecture(c) == "blackwell",
    ),
    "dense-ampere-hopper": (
        "the calibration rows of dense models on A100 and Hopper GPUs",
        lambda c: case_architecture(c) in ("ampere", "hopper") and not is_moe_case(c),
    ),
}
"""Named subsets of the calibration rows a fit may be restricted to: name -> (description for
the provenance, predicate on a case). A constant that only acts on one GPU generation (the
Blackwell GEMM rates) is fitted on that generation's rows; its dense rows alone when the MoE
rows carry costs the model does not price (they would pull the constant to absorb them)."""


def has_constants_interface() -> bool:
    """True when ``DefaultEfficiency.from_constants`` and ``planner.perf.constants`` exist."""
    try:
        from planner.perf import constants  # noqa: F401, PLC0415
    except ImportError:
        return False
    return hasattr(DefaultEfficiency, "from_constants")


def model_constants() -> dict[str, float]:
    """The default efficiency model's constants by name (current values)."""
    if has_constants_interface():
        from planner.perf.constants import default_constants  # noqa: PLC0415

        return default_constants()
    default = DefaultEfficiency()
    return {f.name: float(getattr(default, f.name)) for f in dataclasses.fields(default)}


def default_parameters() -> tuple[str, ...]:
    """The names fitted when none are given (those of ``PARAMETERS`` or ``LEGACY_PARAMETERS``
    the model has)."""
    known = model_constants()
    preferred = PARAMETERS if has_constants_interface() else LEGACY_PARAMETERS
    return tuple(name for name in preferred if name in known)


def efficiency_with(values: Mapping[str, float]) -> EfficiencyModel:
    """A default efficiency model with ``values`` replacing its constants of the same name."""
    merged = {**model_constants(), **values}
    if has_constants_interface():
        return DefaultEfficiency.from_constants(merged)
    return DefaultEfficiency(**merged)  # type: ignore[arg-type]


def bounds_for(name: str, value: float) -> tuple[float, float]:
    """Search interval of a constant: ratios (``fraction``/``efficiency``/``overlap``/``factor``
    at most 1) in ``[0.02, 1]`` (overlaps from 0), anything else within 8x of its value."""
    ratio = any(w in name for w in ("fraction", "efficiency", "overlap", "factor")) and value <= 1
    if ratio:
        return (0.0 if "overlap" in name else 0.02, 1.0)
    return (value / 8.0, value * 8.0)


MIN_CALIBRATION_ROWS = 3
"""A source enters the fit's loss once it has this many calibration rows the planner accepts:
each source weighs the same, so a single row (the MoE source while most of its rows await
layouts the planner does not yet accept) would otherwise steer the shared constants alone."""


def calibration_loss(
    cases: Sequence[Case],
    predicted: Sequence[float],
    sources: Sequence[str] = SPLIT_SOURCES,
    *,
    min_rows: int = 1,
) -> float:
    """Mean over ``sources`` with at least ``min_rows`` calibration rows (``fit`` uses
    ``MIN_CALIBRATION_ROWS``) of their mean ``|ln(pred/meas)|``."""
    per_source = []
    for source in sources:
        rows = [
            (p, c.measured_iteration_time_s)
            for c, p in zip(cases, predicted, strict=True)
            if c.source == source and c.calibration
        ]
        if rows and len(rows) >= min_rows:
            per_source.append(mean_abs_log_error([p for p, _ in rows], [m for _, m in rows]))
    if not per_source:
        raise ValueError("no calibration rows")
    return sum(per_source) / len(per_source)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitResult:
    """Fitted ``values`` (name -> value), the ``initial`` ones, and the calibration loss
    (mean |ln error|, averaged over sources) before and after; ``num_rows`` calibration rows."""

    values: dict[str, float]
    initial: dict[str, float]
    loss_before: float
    loss_after: float
    num_rows: int
    num_evaluations: int


def fit(
    cases: Sequence[Case],
    parameters: Sequence[str] | None = None,
    *,
    max_evaluations: int = 600,
    subset: str = "all",
) -> FitResult:
    """Fit ``parameters`` (default ``default_parameters()``) on the calibration ``cases`` of
    ``subset`` (a name of ``FIT_SUBSETS``)."""
    names = tuple(parameters) if parameters is not None else default_parameters()
    known = model_constants()
    missing = [n for n in names if n not in known]
    if missing:
        raise ValueError(f"unknown constants {missing}; the model has {sorted(known)}")
    if subset not in FIT_SUBSETS:
        raise ValueError(f"unknown fit subset {subset!r}; known: {sorted(FIT_SUBSETS)}")
    keep = FIT_SUBSETS[subset][1]
    calibration = [c for c in cases if c.calibration and keep(c)]
    scenarios = scenarios_of(calibration)
    initial = {n: known[n] for n in names}

    def loss(x: Any) -> float:
        values = dict(zip(names, (float(v) for v in x), strict=True))
        try:
            outcomes = evaluate(calibration, efficiency_with(values), scenarios)
        except (ValueError, ZeroDivisionError):  # a constant out of the model's domain
            return math.inf
        predicted = [o.predicted_iteration_time_s for o in outcomes]
        return calibration_loss(calibration, predicted, min_rows=MIN_CALIBRATION_ROWS)

    x0 = [initial[n] for n in names]
    bounds = [bounds_for(n, initial[n]) for n in names]
    before = loss(x0)
    result = minimize(
        loss,
        x0,
        method="Nelder-Mead",
        bounds=bounds,
        options={"maxfev": max_evaluations, "xatol": 1e-4, "fatol": 1e-6},
    )
    fitted = dict(zip(names, (float(v) for v in result.x), strict=True))
    after = float(result.fun)
    if after > before:  # never hand back something worse than the start
        fitted, after = dict(initial), before
    return FitResult(
        values=fitted,
        initial=initial,
        loss_before=before,
        loss_after=after,
        num_rows=len(calibration),
        num_evaluations=int(result.nfev),
    )


def write_fitted(
    values: Mapping[str, float], provenance: str, *, file_provenance: bool = True
) -> str:
    """Write ``values`` into the packaged constants file via ``write_constants``
    (``file_provenance``: whether ``provenance`` also becomes the file's top-level one); returns
    the path. Raises RuntimeError when the model has no constants interface yet."""
    if not has_constants_interface():
        raise RuntimeError(
            "planner.perf has no constants file interface (write_constants) yet; "
            "set the printed values in planner/perf/efficiency.py by hand"
        )
    import planner.perf  # noqa: PLC0415
    from planner.perf import constants  # noqa: PLC0415

    path = Path(planner.perf.__file__).resolve().parent / constants.CONSTANTS_FILE
    constants.write_constants(path, values, provenance, file_provenance=file_provenance)
    return str(path)
