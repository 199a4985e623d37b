"""Calibration files as the CLI and the service read and write them (pure: the caller reads the
text).

Two kinds share ``planner predict --calibration``, told apart by the document's ``format``:

* ``planner-calibration/1``: operator models sampled on a machine (``planner calibrate fit``;
  ``planner.calibration.model``), used instead of the analytic efficiency model;
* ``planner-observed-runs/11``: corrections learnt from measured runs (``planner calibrate
  observe``; ``planner.calibration.observed``), added to the model's prediction.

``observe_files`` is what ``planner calibrate observe`` runs: read the runs, learn, and score the
result by cross-validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from planner.calibration.efficiency import CalibratedEfficiency
from planner.calibration.model import FORMAT as OPERATOR_FORMAT
from planner.calibration.model import Calibration
from planner.calibration.observed import (
    FORMAT as OBSERVED_FORMAT,
)
from planner.calibration.observed import (
    KeySummaryJson,
    ObservedCalibration,
    cross_validated_errors,
    is_observed_calibration,
    observe_runs,
)
from planner.calibration.observed_runs import (
    ObservedRun,
    RunSample,
    read_observed_runs,
)
from planner.errors import CalibrationError

__all__ = [
    "ObserveReport",
    "ObserveSummaryJson",
    "ResidualSummaryJson",
    "load_calibration_file",
    "observe_files",
    "parse_json",
]


def parse_json(text: str, source: str) -> Any:
    """The JSON document of ``text``; raises ``CalibrationError`` naming ``source`` when it is
    not JSON (or absurdly nested)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{source}: not JSON ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80]
        raise CalibrationError(f"{source}: not a calibration ({reason})") from None


def load_calibration_file(
    text: str, *, source: str, device_key: str = "h100-sxm"
) -> tuple[CalibratedEfficiency | None, ObservedCalibration | None]:
    """The calibration of a file's ``text``: ``(efficiency, None)`` for operator models (used
    for scenarios on ``device_key``), ``(None, observed)`` for observed-runs corrections.
    Raises ``CalibrationError`` naming ``source`` when the text is neither, or malformed."""
    doc = parse_json(text, source)
    fmt = doc.get("format") if isinstance(doc, Mapping) else None
    try:
        if is_observed_calibration(doc):
            return None, ObservedCalibration.from_json(doc)
        if fmt == OPERATOR_FORMAT:
            return CalibratedEfficiency(Calibration.from_dict(doc), device_key=device_key), None
    except CalibrationError as exc:
        raise CalibrationError(f"{source}: {exc}") from None
    raise CalibrationError(
        f"{source}: format {fmt!r} is neither {OPERATOR_FORMAT} (operator models from "
        f"`planner calibrate fit`) nor {OBSERVED_FORMAT} (corrections learnt from observed "
        "runs by `planner calibrate observe`)"
    )


class ResidualSummaryJson(TypedDict):
    """The residual model in ``ObserveSummaryJson``: the ``selected`` candidate, its ridge
    ``alpha`` and the cross-validated mean squared log error of each candidate."""

    selected: str
    alpha: float
    cv_mse: dict[str, float]


class LocalSummaryJson(TypedDict):
    """One model family's local residual within keys in ``ObserveSummaryJson``
    (``local_residual``): the ``selected`` candidate (``none`` or ``kernel``), its
    ``bandwidth`` (standardised feature units) and ``pseudo_runs``, and the cross-validated
    mean squared log error of each candidate."""

    family: str
    selected: str
    bandwidth: float
    pseudo_runs: float
    cv_mse: dict[str, float]


class ObserveSummaryJson(TypedDict):
    """``ObserveReport.summary``: runs learnt from and left out, the held-out errors
    (``cross_validated_errors``), the per-family noise log-sd, the residual model, the local
    residual within keys per model family and one row per key
    (``ObservedCalibration.summary``)."""

    num_runs: int
    num_invalid: int
    num_far_off: int
    held_out: dict[str, float | int]
    noise_log_sd: dict[str, float]
    residual_model: ResidualSummaryJson
    local_residual: list[LocalSummaryJson]
    keys: list[KeySummaryJson]


@dataclass(frozen=True, slots=True, kw_only=True)
class ObserveReport:
    """What ``observe_files`` learnt: the ``calibration``, the ``samples`` given to it, one
    line per run that could not be used (``errors``) and per run the fit left out, far off
    its key (``far_off``, ``far_off_lines``), and the 5-fold cross-validated error
    (``held_out``, ``cross_validated_errors``)."""

    calibration: ObservedCalibration
    samples: list[RunSample]
    errors: list[str]
    held_out: dict[str, float | int]
    far_off: list[str] = field(default_factory=list)

    def summary(self) -> ObserveSummaryJson:
        """JSON-ready: runs, runs left out, held-out errors, noise, residual model, keys."""
        residual = self.calibration.residual
        return {
            "num_runs": len(self.samples) - len(self.far_off),
            "num_invalid": len(self.errors),
            "num_far_off": len(self.far_off),
            "held_out": dict(self.held_out),
            "noise_log_sd": dict(self.calibration.noise_log_sd),
            "residual_model": {
                "selected": residual.selected_,
                "alpha": residual.alpha_,
                "cv_mse": dict(residual.cv_mse_),
            },
            "local_residual": [
                {
                    "family": family,
                    "selected": c.selected,
                    "bandwidth": c.bandwidth,
                    "pseudo_runs": c.pseudo_runs,
                    "cv_mse": dict(c.cv_mse),
                }
                for family, c in sorted(self.calibration.local.choices_.items())
            ],
            "keys": self.calibration.summary(),
        }

    def lines(self) -> list[str]:
        """Human-readable summary lines."""
        held = self.held_out
        prior = float(held["prior_mean_abs_error_ratio"])
        after = float(held["calibrated_mean_abs_error_ratio"])
        residual = self.calibration.residual
        noise = ", ".join(f"{k} {v:.3f}" for k, v in self.calibration.noise_log_sd.items())
        lines = [
            f"learnt from {len(self.samples) - len(self.far_off)} runs"
            + (f" ({len(self.errors)} left out)" if self.errors else "")
            + (f" ({len(self.far_off)} far off their key left out)" if self.far_off else ""),
            f"held-out error (5-fold cross-validation): model {_pct(prior)} %, "
            f"calibrated {_pct(after)} % (mean |predicted / measured - 1|)",
            f"run spread around its key (log-sd): {noise or '-'}; residual model: "
            f"{residual.selected_}"
            + (f" (ridge alpha {residual.alpha_:g})" if residual.selected_ == "ridge" else ""),
            "within keys (runs most like the prediction weigh most): "
            + (
                "; ".join(
                    f"{family} "
                    + (
                        f"kernel (bandwidth {c.bandwidth:g}, {c.pseudo_runs:g} pseudo-runs)"
                        if c.selected == "kernel"
                        else "none"
                    )
                    for family, c in sorted(self.calibration.local.choices_.items())
                )
                or "-"
            ),
        ]
        for row in self.calibration.summary():
            network = row["network_factor"]
            memory = row["memory_factor"]
            lines.append(
                f"  {row['cluster'] or '-'} {row['gpu']} {row['recipe']} {row['framework']}"
                + (f" {row['release']}" if row["release"] else "")
                + f" {row['family']}: {row['num_runs']} runs, "
                f"compute x{row['compute_factor']:.3f}, "
                + (
                    f"network x{network:.3f}"
                    if network is not None
                    else "network not separated from compute"
                )
                + ("" if memory is None else f", memory x{memory:.3f}")
                + f"; model error {_pct(row['model_median_abs_error_ratio'])} % (median)"
            )
        return lines


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}"


def observe_files(paths: Sequence[str], read_text: Callable[[str], str]) -> ObserveReport:
    """Read the runs of ``paths`` (JSON lines, through ``read_text``), learn the calibration
    (``observe_runs``) and its 5-fold held-out error. Raises ``CalibrationError`` when no run
    can be used, ``SpecError`` when a file cannot be read."""
    runs: list[ObservedRun] = []
    errors: list[str] = []
    for path in paths:
        found, bad = read_observed_runs(read_text(path), path)
        runs.extend(found)
        errors.extend(bad)
    fit = observe_runs(runs)
    errors.extend(fit.errors)
    if not fit.samples:
        detail = f": {errors[0]}" if errors else ""
        raise CalibrationError(f"no usable observed run in {', '.join(paths)}{detail}")
    return ObserveReport(
        calibration=fit.calibration,
        samples=fit.samples,
        errors=errors,
        held_out=cross_validated_errors(fit.samples),
        far_off=fit.far_off,
    )
