"""Reading scenario files (YAML, JSON, JSONL) into raw documents, and predicting a batch."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from planner.errors import SpecError
from planner.perf.efficiency import EfficiencyModel
from planner.perf.step import Prediction, predict_batch
from planner.scenario.loading import load_json, load_json_lines, load_yaml
from planner.scenario.parse import parse_scenario
from planner.specs.scenario import Scenario

__all__ = [
    "PredictionCalibration",
    "format_for_path",
    "predict_documents",
    "prediction_json",
    "read_documents",
]


class PredictionCalibration(Protocol):
    """What corrects a prediction from observed runs
    (``planner.calibration.observed.ObservedCalibration``)."""

    def apply(
        self, prediction: Mapping[str, Any], scenario: Scenario, *, cluster: str = ""
    ) -> dict[str, Any]:
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


def _plain(value: Any) -> Any:
    """Make a value JSON-safe: plain float/int/bool/None, non-finite floats become None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    return value


def prediction_json(prediction: Prediction, name: str | None) -> dict[str, Any]:
    """The ``planner predict --json`` object of one prediction: ``Prediction.to_dict(name)``
    with plain floats, ints and bools, non-finite numbers as None."""
    out: dict[str, Any] = _plain(prediction.to_dict(name))
    return out


def predict_documents(
    docs: Sequence[object],
    *,
    efficiency: EfficiencyModel | None = None,
    calibration: PredictionCalibration | None = None,
    cluster: str = "",
) -> list[dict[str, Any]]:
    """One JSON-ready dict per document, in order: the prediction, or ``{"name", "error"}``.

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
    results: list[dict[str, Any] | None] = []
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
                result = prediction_json(prediction, scenario.name)
                if calibration is not None:
                    result = calibration.apply(result, scenario, cluster=cluster)
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
