"""Human-readable summaries of a ``Calibration`` (what ``planner calibrate show`` prints)."""

from __future__ import annotations

import math
from typing import TypedDict

from planner.calibration.model import Calibration, HeldOutErrorJson

__all__ = [
    "CalibrationSummaryJson",
    "OperatorSummaryJson",
    "calibration_summary",
    "summary_lines",
]


class OperatorSummaryJson(TypedDict):
    """One operator of ``CalibrationSummaryJson``: its name, selected model, samples, dtypes,
    the sampled range of each feature (``log2_`` features as the plain ``[low, high]`` values),
    held-out error and each candidate's cross-validated RMSE of log time (None: NaN)."""

    operator: str
    model: str
    num_samples: int
    dtypes: list[str]
    domain: dict[str, list[float]]
    held_out: HeldOutErrorJson
    cv_rmse_log: dict[str, float | None]


class CalibrationSummaryJson(TypedDict):
    """``calibration_summary``: the device metadata, the measured peaks, one summary per
    operator, the collective curves (``CollectiveModel.to_dict``) and the skipped operators
    with their reasons."""

    device: dict[str, object]
    measured: dict[str, float]
    operators: list[OperatorSummaryJson]
    collectives: list[dict[str, object]]
    skipped: dict[str, str]


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{100.0 * value:.1f}%"


def calibration_summary(calibration: Calibration) -> CalibrationSummaryJson:
    """Plain-JSON summary: device, measured peaks, per-operator model/domain/held-out error,
    collective curves, skipped operators."""
    ops: list[OperatorSummaryJson] = []
    for name, op in calibration.operators.items():
        ops.append(
            {
                "operator": name,
                "model": op.regressor.selected_,
                "num_samples": len(op.rows),
                "dtypes": list(op.dtypes),
                "domain": {
                    f: [2.0**lo, 2.0**hi] if f.startswith("log2_") else [lo, hi]
                    for f, lo, hi in zip(
                        op.feature_names, op.domain_low, op.domain_high, strict=True
                    )
                },
                "held_out": op.held_out.to_dict(),
                "cv_rmse_log": {
                    k: (None if math.isnan(v) else v) for k, v in op.regressor.cv_rmse_.items()
                },
            }
        )
    return {
        "device": dict(calibration.device),
        "measured": dict(calibration.measured),
        "operators": ops,
        "collectives": [c.to_dict() for c in calibration.collectives],
        "skipped": dict(calibration.skipped),
    }


def summary_lines(calibration: Calibration) -> list[str]:
    """The text table of ``planner calibrate show``."""
    dev = calibration.device
    m = calibration.measured
    lines = [
        f"device: {dev.get('device', '?')} {dev.get('device_name', '')} on "
        f"{dev.get('hostname', '?')}, torch {dev.get('torch_version', '?')}"
        + (f", CUDA {dev['cuda_version']}" if dev.get("cuda_version") else "")
        + f", {dev.get('num_threads', '?')} thread(s), sampled {dev.get('sampled_from', '?')}",
    ]
    if m:
        lines.append(
            "measured: GEMM peak "
            f"{m.get('peak_flop_per_s', math.nan) / 1e9:.1f} GFLOP/s, streaming bandwidth "
            f"{m.get('memory_bandwidth_bytes_per_s', math.nan) / 1e9:.2f} GB/s, fastest op "
            f"{m.get('kernel_min_time_s', math.nan) * 1e6:.1f} us"
        )
    lines.append(
        f"{'operator':20s} {'model':10s} {'n':>4s} {'held-out MAPE':>13s} {'median':>7s} "
        f"{'max':>7s}  domain"
    )
    for name, op in calibration.operators.items():
        h = op.held_out
        dims = ", ".join(
            f"{f[5:]} {2.0**lo:.3g}-{2.0**hi:.3g}"
            for f, lo, hi in zip(op.feature_names, op.domain_low, op.domain_high, strict=True)
            if f.startswith("log2_") and f not in ("log2_flop", "log2_bytes", "log2_intensity")
        )
        lines.append(
            f"{name:20s} {op.regressor.selected_:10s} {len(op.rows):4d} {_pct(h.mape):>13s} "
            f"{_pct(h.median_ape):>7s} {_pct(h.max_ape):>7s}  {dims}"
        )
    if calibration.collectives:
        lines.append(
            f"{'collective':16s} {'ranks':>5s} {'tier':9s} {'alpha':>10s} {'busbw':>12s} "
            f"{'held-out MAPE':>13s}  sizes"
        )
        for c in calibration.collectives:
            lines.append(
                f"{c.collective!s:16s} {c.num_ranks:5d} {c.tier!s:9s} "
                f"{c.alpha_s * 1e6:8.1f}us {c.bus_bandwidth_bytes_per_s / 1e9:8.2f} GB/s "
                f"{_pct(c.held_out_mape):>13s}  {c.min_size_bytes:.0f}-{c.max_size_bytes:.0f} B"
            )
    for name, reason in calibration.skipped.items():
        lines.append(f"skipped {name}: {reason} (queries fall back to the analytic model)")
    return lines
