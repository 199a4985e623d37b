"""The values the forecast modules share: quantile bands and step observations (re-exported by
``planner.forecast.eta``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from planner.errors import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantiles:
    """10th, 50th and 90th percentile of a quantity (its unit is in the owner's field name)."""

    p10: float
    p50: float
    p90: float

    def __post_init__(self) -> None:
        values = (self.p10, self.p50, self.p90)
        if not all(math.isfinite(v) for v in values):
            raise SpecError("quantiles", f"must be finite, got {values}")
        if not self.p10 <= self.p50 <= self.p90:
            raise SpecError("quantiles", f"must be ordered p10 <= p50 <= p90, got {values}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepObservation:
    """One observed step time: the mean wall time ``step_time_s`` (s) of the ``num_iterations``
    iterations that ended at ``iteration``, observed at ``time_s`` (epoch s);
    ``logged_step_time_s`` the mean compute time the log printed for them, when it printed one
    (the wall time minus it is a pause: ``planner.forecast.history``)."""

    iteration: int
    step_time_s: float
    num_iterations: int = 1
    time_s: float
    logged_step_time_s: float | None = None

    def __post_init__(self) -> None:
        if self.iteration < 0:
            raise SpecError("iteration", f"must be >= 0, got {self.iteration}")
        if not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise SpecError("step_time_s", f"must be finite and > 0, got {self.step_time_s}")
        if self.num_iterations < 1:
            raise SpecError("num_iterations", f"must be >= 1, got {self.num_iterations}")
        if not math.isfinite(self.time_s):
            raise SpecError("time_s", f"must be finite, got {self.time_s}")
        logged = self.logged_step_time_s
        if logged is not None and not (math.isfinite(logged) and logged > 0):
            raise SpecError("logged_step_time_s", f"must be finite and > 0 (or None), got {logged}")


class EtaMethod(StrEnum):
    """How an estimate was reached."""

    PRIOR = "prior"
    """Model prediction only (no usable observations)."""
    BLEND = "blend"
    """Model prediction updated with observed step times."""
    OBSERVED = "observed"
    """Observed step times only (no model prediction was given)."""
    PRIOR_CONFLICT = "prior_conflict"
    """Observed step times only: the model prediction was far off and was dropped."""
    DONE = "done"
    """The job has run all its iterations."""
