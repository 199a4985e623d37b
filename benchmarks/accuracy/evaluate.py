"""Predict every case with the planner and collect predicted vs measured values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import planner.perf
from benchmarks.accuracy.convert import Case
from planner.perf import EfficiencyModel, predict
from planner.scenario import parse_scenario
from planner.specs.scenario import Scenario


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One case with the model's ``iteration_time_s``, ``memory_per_gpu_bytes`` and
    ``fits_in_memory`` (every published run ran, so False is a wrong prediction)."""

    case: Case
    predicted_iteration_time_s: float
    predicted_memory_bytes: float
    predicted_fits_in_memory: bool

    @property
    def time_error(self) -> float:
        """Signed relative error of the iteration time, ``(pred - meas) / meas``."""
        measured = self.case.measured_iteration_time_s
        return (self.predicted_iteration_time_s - measured) / measured

    @property
    def memory_error(self) -> float | None:
        """Signed relative error of the peak memory, None without a published peak."""
        measured = self.case.measured_peak_memory_bytes
        if measured is None:
            return None
        return (self.predicted_memory_bytes - measured) / measured


def scenarios_of(cases: Sequence[Case]) -> list[Scenario]:
    """Parse each case's document (raises ``SpecError`` for an invalid one)."""
    return [parse_scenario(case.document) for case in cases]


def evaluate(
    cases: Sequence[Case],
    efficiency: EfficiencyModel | None = None,
    scenarios: Sequence[Scenario] | None = None,
) -> list[Outcome]:
    """Predict ``cases`` (pass ``scenarios`` = ``scenarios_of(cases)`` to skip re-parsing)."""
    parsed = scenarios if scenarios is not None else scenarios_of(cases)
    batch = getattr(planner.perf, "predict_batch", None)  # one vectorized pass when available
    if batch is not None:
        predictions = batch(list(parsed), efficiency)
    else:
        predictions = [predict(scenario, efficiency) for scenario in parsed]
    outcomes = []
    for case, prediction in zip(cases, predictions, strict=True):
        outcomes.append(
            Outcome(
                case=case,
                predicted_iteration_time_s=prediction.iteration_time_s,
                predicted_memory_bytes=prediction.memory_per_gpu_bytes,
                predicted_fits_in_memory=prediction.fits_in_memory,
            )
        )
    return outcomes
