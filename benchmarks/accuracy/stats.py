"""Error statistics of predictions against measurements (percentages of the measured value)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorStats:
    """Errors of ``num_rows`` predictions, as fractions of the measured value.

    ``mean_ape``/``max_ape``: mean and max of ``|pred - meas| / meas``; ``bias``: mean of the
    signed ``(pred - meas) / meas`` (positive = the model predicts too long / too much).
    All three are NaN when ``num_rows`` is 0.
    """

    num_rows: int
    mean_ape: float
    max_ape: float
    bias: float


def relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    """Signed ``(pred - meas) / meas`` per row; raises ValueError on length mismatch or a
    measured value that is not positive."""
    if len(predicted) != len(measured):
        raise ValueError(f"{len(predicted)} predictions for {len(measured)} measurements")
    errors = []
    for p, m in zip(predicted, measured, strict=True):
        if not m > 0:
            raise ValueError(f"measured values must be positive, got {m}")
        errors.append((p - m) / m)
    return errors


def error_stats(predicted: Sequence[float], measured: Sequence[float]) -> ErrorStats:
    """Mean/max absolute percentage error and bias of ``predicted`` vs ``measured``."""
    errors = relative_errors(predicted, measured)
    if not errors:
        return ErrorStats(num_rows=0, mean_ape=math.nan, max_ape=math.nan, bias=math.nan)
    absolute = [abs(e) for e in errors]
    return ErrorStats(
        num_rows=len(errors),
        mean_ape=sum(absolute) / len(absolute),
        max_ape=max(absolute),
        bias=sum(errors) / len(errors),
    )


def mean_abs_log_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """Mean of ``|ln(pred / meas)|``: the symmetric loss the constants are fitted with."""
    if len(predicted) != len(measured) or not predicted:
        raise ValueError("need equally many predictions and measurements, at least one")
    return sum(abs(math.log(p / m)) for p, m in zip(predicted, measured, strict=True)) / len(
        predicted
    )
