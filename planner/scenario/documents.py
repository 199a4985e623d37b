"""Reading scenario files (YAML, JSON, JSONL) into raw documents, and predicting a batch."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, Protocol, TypedDict, cast, final

from planner.errors import SpecError
from planner.perf.efficiency import EfficiencyModel
from planner.perf.step import Prediction, predict_batch
from planner.scenario.loading import load_json, load_json_lines, load_yaml
from planner.scenario.parse import parse_scenario
from planner.specs.scenario import Scenario

__all__ = [
    "DocumentError",
    "MemoryBreakdownJson",
    "PredictedJson",
    "PredictionCalibration",
    "PredictionJson",
    "format_for_path",
    "predict_documents",
    "predict_results",
    "prediction_json",
    "read_documents",
]


class PredictionCalibration(Protocol):
    """What corrects a prediction from observed runs
    (``planner.calibration.observed.ObservedCalibration``)."""

    def apply(
        self, prediction: PredictionJson, scenario: Scenario, *, cluster: str = ""
    ) -> Mapping[str, object]:
        """The ``planner predict`` object with the calibrated fields added."""
        ...


def _expand(doc: object) -> list[object]:
    """A document that is a list is a batch of scenarios."""
    return list(doc) if isinstance(doc, list) else [doc]


DocumentFormat = Literal["yaml", "json", "jsonl"]


def format_for_path(path: str) -> DocumentFormat:
    """The document format a file name implies: ``.jsonl``, ``.json``, else YAML."""
    lower = path.lower()
    if lower.endswith(".jsonl"):
        return "jsonl"
    if lower.endswith(".json"):
        return "json"
    return "yaml"


def read_documents(text: str, fmt: Literal["yaml", "json", "jsonl"], source: str) -> list[object]:
    """Raw scenario documents of one file, in order.

    YAML may hold several ``---`` documents; a YAML or JSON document that is a list is a batch.
    In JSONL every non-blank line is one document, and a line that is not valid JSON becomes a
    ``SpecError`` *instance* in the list (``predict_documents`` reports it on that line while the
    other lines still run). A YAML/JSON syntax error raises ``SpecError(source, ...)`` with the
    line and column, and so do the limits of ``planner.scenario.loading`` (size, nesting,
    alias expansion: a bomb is refused before it is expanded).
    """
    if fmt == "yaml":
        return [item for doc in load_yaml(text, source) if doc is not None for item in _expand(doc)]
    if fmt == "json":
        return _expand(load_json(text, source))
    if fmt == "jsonl":
        return load_json_lines(text, source)
    raise SpecError("format", f"unknown format {fmt!r}; use yaml, json or jsonl")


def _name_of(doc: object) -> str | None:
    if isinstance(doc, dict):
        name = doc.get("name")
        if isinstance(name, str | int | float) and not isinstance(name, bool):
            return str(name)
    return None


def _plain(value: object) -> object:
    """Make a value JSON-safe: plain float/int/bool/None, non-finite floats become None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _finite(value)
    return value


def _finite(value: float) -> float | None:
    """A plain float, or None for a non-finite one (JSON has no NaN or infinity)."""
    return float(value) if math.isfinite(value) else None


class MemoryBreakdownJson(TypedDict):
    """The ``memory_breakdown_bytes`` object of a prediction: bytes per GPU of each part."""

    weights: float | None
    gradients: float | None
    optimizer: float | None
    activations: float | None
    overhead: float | None
    optimizer_step: float | None


class PredictionJson(TypedDict):
    """The ``planner predict --json`` object of one scenario (``Prediction``'s fields, SI
    units; a non-finite number is None). ``breakdown_s``: the exposed time of each term of
    the iteration (``planner.perf.engine.BREAKDOWN_KEYS``, without the ``_s``), seconds;
    ``moe_routed_compute_s``: the seconds of its ``compute`` and ``pp_bubble`` that the MoE
    layers' routed experts take (``Prediction.moe_routed_compute_s``; 0 for dense models)."""

    name: str | None
    iteration_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    model_flops_per_iteration: float | None
    model_tflops_per_gpu: float | None
    mfu: float | None
    hfu: float | None
    memory_per_gpu_bytes: float | None
    fits_in_memory: bool
    breakdown_s: dict[str, float | None]
    moe_routed_compute_s: float | None
    memory_breakdown_bytes: MemoryBreakdownJson
    time_to_train_s: float | None


@final
class DocumentError(TypedDict):
    """The answer to a document that is invalid or has no valid plan: its ``name`` (None
    when it has none) and ``error`` (``"<field>: <what is wrong and how to fix it>"`` or
    ``"infeasible: ..."``)."""

    name: str | None
    error: str


def prediction_json(prediction: Prediction, name: str | None) -> PredictedJson:
    """The ``planner predict --json`` object of one prediction: ``Prediction``'s contract
    fields with plain floats and bools, non-finite numbers as None (a :class:`PredictedJson`
    without the calibrated fields, which a calibration adds)."""
    mem = prediction.memory
    ttt = prediction.time_to_train_s
    return {
        "name": name,
        "iteration_time_s": _finite(prediction.iteration_time_s),
        "tokens_per_s": _finite(prediction.tokens_per_s),
        "tokens_per_s_per_gpu": _finite(prediction.tokens_per_s_per_gpu),
        "model_flops_per_iteration": _finite(prediction.model_flops_per_iteration),
        "model_tflops_per_gpu": _finite(prediction.model_tflops_per_gpu),
        "mfu": _finite(prediction.mfu),
        "hfu": _finite(prediction.hfu),
        "memory_per_gpu_bytes": _finite(prediction.memory_per_gpu_bytes),
        "fits_in_memory": bool(prediction.fits_in_memory),
        "breakdown_s": {k: _finite(v) for k, v in prediction.breakdown.as_dict().items()},
        "moe_routed_compute_s": _finite(prediction.moe_routed_compute_s),
        "memory_breakdown_bytes": {
            "weights": _finite(mem.weights_bytes),
            "gradients": _finite(mem.gradients_bytes),
            "optimizer": _finite(mem.optimizer_bytes),
            "activations": _finite(mem.activations_bytes),
            "overhead": _finite(mem.overhead_bytes),
            "optimizer_step": _finite(mem.optimizer_step_bytes),
        },
        "time_to_train_s": None if ttt is None else _finite(ttt),
    }


@final
class PredictedJson(PredictionJson):
    """The ``planner predict --json`` object of a valid scenario: :class:`PredictionJson`,
    with a calibration learnt from observed runs its ``calibrated_*`` fields (the model's field
    corrected, same unit) and its ``calibration`` object
    (``planner.calibration.observed``), and with a calibrated efficiency model its
    ``efficiency_model`` provenance."""

    calibrated_iteration_time_s: NotRequired[float]
    calibrated_tokens_per_s: NotRequired[float]
    calibrated_tokens_per_s_per_gpu: NotRequired[float]
    calibrated_mfu: NotRequired[float]
    calibrated_time_to_train_s: NotRequired[float]
    calibrated_memory_per_gpu_bytes: NotRequired[float]
    calibration: NotRequired[Mapping[str, object]]
    efficiency_model: NotRequired[object]


def _calibrated(prediction: PredictedJson, applied: Mapping[str, object]) -> PredictedJson:
    """``prediction`` with the calibrated fields ``PredictionCalibration.apply`` added, in the
    order it added them. Raises ``TypeError`` naming a field it added that this type does not
    hold or that has another type (the two must change together)."""
    out: PredictedJson = {**prediction}
    for key, value in applied.items():
        if key in prediction:
            continue
        if key == "calibration" and isinstance(value, Mapping):
            out["calibration"] = value
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise TypeError(f"calibration.apply added {key!r} of type {type(value).__name__}")
        if key not in _CALIBRATED_NUMBERS:
            raise TypeError(f"calibration.apply added {key!r}, which PredictedJson lacks")
        cast("dict[str, object]", out)[key] = float(value)  # a key checked just above
    return out


_CALIBRATED_NUMBERS = frozenset(
    key for key in PredictedJson.__annotations__ if key.startswith("calibrated_")
)
"""The numeric ``calibrated_*`` fields of :class:`PredictedJson`."""


def predict_results(
    docs: Sequence[object],
    *,
    efficiency: EfficiencyModel | None = None,
    calibration: PredictionCalibration | None = None,
    cluster: str = "",
) -> list[PredictedJson | DocumentError]:
    """One JSON-ready object per document, in order: the prediction, or ``{"name", "error"}``.

    All documents are parsed first; the valid scenarios are then predicted in ONE vectorized
    ``predict_batch`` call. ``error`` reads ``"<field>: <what is wrong and how to fix it>"``;
    ``name`` is echoed when the document had one, else None. Never raises for bad documents.
    ``efficiency`` replaces the analytic efficiency model (e.g. a ``CalibratedEfficiency``);
    when it can ``describe()`` itself, each prediction carries that as ``efficiency_model``.
    ``calibration`` (learnt from observed runs on ``cluster``) adds its calibrated fields to
    each prediction, the model's own fields unchanged.
    """
    describe = getattr(efficiency, "describe", None)
    provenance = describe() if callable(describe) else None
    results: list[PredictedJson | DocumentError | None] = []
    valid: list[tuple[int, Scenario]] = []
    for doc in docs:
        name = _name_of(doc)
        try:
            valid.append((len(results), parse_scenario(doc)))
            results.append(None)
        except SpecError as exc:
            results.append({"name": name, "error": str(exc)})
        except (ValueError, TypeError, ArithmeticError) as exc:  # defensive: report, never crash
            results.append({"name": name, "error": f"internal: {type(exc).__name__}: {exc}"})
    if valid:
        try:
            predictions = predict_batch([s for _, s in valid], efficiency)
            for (i, scenario), prediction in zip(valid, predictions, strict=True):
                typed = prediction_json(prediction, scenario.name)
                result: PredictedJson = (
                    {**typed}
                    if calibration is None
                    else _calibrated(typed, calibration.apply(typed, scenario, cluster=cluster))
                )
                if provenance is not None:
                    result["efficiency_model"] = _plain(provenance)
                results[i] = result
        except (ValueError, TypeError, ArithmeticError) as exc:  # defensive: report, never crash
            for i, scenario in valid:
                results[i] = {
                    "name": scenario.name,
                    "error": f"internal: {type(exc).__name__}: {exc}",
                }
    return [r if r is not None else {"name": None, "error": "internal: missing"} for r in results]


def predict_documents(
    docs: Sequence[object],
    *,
    efficiency: EfficiencyModel | None = None,
    calibration: PredictionCalibration | None = None,
    cluster: str = "",
) -> list[dict[str, object]]:
    """:func:`predict_results` as plain dicts, for the benchmarks and tests that index a
    prediction by any key."""
    return [
        dict(result)
        for result in predict_results(
            docs, efficiency=efficiency, calibration=calibration, cluster=cluster
        )
    ]
