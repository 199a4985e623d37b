"""The values of online recalibration: keys, levels, components, observations, corrections.

``planner.calibration.online`` learns from these; its module docstring gives the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, TypedDict

from planner.catalog import gpu_catalog
from planner.errors import SpecError
from planner.specs.scenario import Framework

__all__ = [
    "GROUP_LEVELS",
    "CalibrationKey",
    "CalibrationLevel",
    "Component",
    "Correction",
    "CorrectionJson",
    "ErrorStats",
    "GroupEstimate",
    "JobObservation",
    "key_from_scenario",
]


class Component(StrEnum):
    """What a correction multiplies: the whole step, or one part of the model's breakdown."""

    STEP = "step"
    """The whole predicted step time (the single factor per key)."""
    COMPUTE = "compute"
    """The operator terms: ``compute``, ``pp_bubble`` and ``optimizer`` of ``breakdown_s``."""
    NETWORK = "network"
    """The exposed communication terms: ``tp/cp/ep/pp/dp_comm_exposed`` of ``breakdown_s``."""


class CalibrationLevel(StrEnum):
    """Where a correction comes from, from the most to the least specific."""

    JOB = "job"
    """The job's own observed ratio (a restart of a job that has run)."""
    KEY = "key"
    """Jobs on the same scheduler, cluster, GPU type and framework."""
    GPU = "gpu"
    """Jobs on the same scheduler, cluster and GPU type, any framework."""
    CLUSTER = "cluster"
    """Jobs on the same scheduler and cluster, any GPU type and framework."""
    NONE = "none"
    """No job to learn from: the model as it is."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationKey:
    """What a correction is kept per: ``scheduler`` and ``cluster`` (as the service names them),
    ``gpu`` (the catalog key, e.g. ``h100-sxm``) and ``framework`` (e.g. ``megatron``)."""

    scheduler: str
    cluster: str
    gpu: str
    framework: str

    def __post_init__(self) -> None:
        for name in ("scheduler", "cluster", "gpu", "framework"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(name, f"must be a string, got {getattr(self, name)!r}")

    def prefix(self, level: CalibrationLevel) -> tuple[str, ...]:
        """The group this key belongs to at ``level`` (``key``, ``gpu`` or ``cluster``)."""
        if level is CalibrationLevel.KEY:
            return (self.scheduler, self.cluster, self.gpu, self.framework)
        if level is CalibrationLevel.GPU:
            return (self.scheduler, self.cluster, self.gpu)
        if level is CalibrationLevel.CLUSTER:
            return (self.scheduler, self.cluster)
        raise SpecError("level", f"no group at level {level.value!r}; use key, gpu or cluster")


GROUP_LEVELS: Final = (CalibrationLevel.KEY, CalibrationLevel.GPU, CalibrationLevel.CLUSTER)
"""The group levels, from the most to the least specific."""


def key_from_scenario(
    scheduler: str, cluster: str, scenario: Mapping[str, Any]
) -> CalibrationKey | None:
    """The key of a job described by a scenario document (``hardware.gpu``,
    ``training.framework``, which defaults to ``megatron`` as in the scenario format), with both
    names normalised as the scenario parser reads them (``H100-SXM`` is ``h100-sxm``,
    ``Megatron`` is ``megatron``, ``llm-foundry`` is ``llm_foundry``), so the jobs of one GPU and
    framework learn together however their documents spell them. None when the document names
    no GPU of the catalog or no known framework (the job cannot be calibrated)."""
    hardware = scenario.get("hardware")
    training = scenario.get("training")
    gpu = hardware.get("gpu") if isinstance(hardware, Mapping) else None
    framework = training.get("framework", "megatron") if isinstance(training, Mapping) else None
    if framework is None:
        framework = "megatron"
    if not isinstance(gpu, str) or not isinstance(framework, str):
        return None
    gpu_key = gpu.strip().lower()
    framework_name = framework.strip().lower().replace("-", "_")
    if gpu_key not in gpu_catalog() or framework_name not in _FRAMEWORKS:
        return None
    return CalibrationKey(
        scheduler=scheduler, cluster=cluster, gpu=gpu_key, framework=framework_name
    )


_FRAMEWORKS: Final = frozenset(f.value for f in Framework)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobObservation:
    """What one job showed: the uncorrected model's step time ``predicted_step_time_s`` (s), its
    robust observed mean step time ``observed_step_time_s`` (s) over ``num_iterations``
    iterations, as of ``time_s`` (epoch s)."""

    key: CalibrationKey
    job_id: str
    predicted_step_time_s: float
    observed_step_time_s: float
    num_iterations: int
    time_s: float

    def __post_init__(self) -> None:
        for name in ("predicted_step_time_s", "observed_step_time_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SpecError(name, f"must be a finite number > 0 (seconds), got {value!r}")
        if not isinstance(self.num_iterations, int) or self.num_iterations < 1:
            raise SpecError("num_iterations", f"must be an integer >= 1, got {self.num_iterations}")
        if not (isinstance(self.time_s, int | float) and math.isfinite(self.time_s)):
            raise SpecError("time_s", f"must be finite epoch seconds, got {self.time_s!r}")

    @property
    def log_ratio(self) -> float:
        """``log(observed / predicted)``."""
        return math.log(self.observed_step_time_s / self.predicted_step_time_s)


class CorrectionJson(TypedDict):
    """``Correction.to_dict``: the factor, its log-sd, the level (a ``CalibrationLevel``
    value) and the jobs behind it."""

    factor: float
    log_sd: float
    level: str
    num_jobs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    """Multiply the model's step time by ``factor``; ``log_sd`` is the log-sd of the truth around
    the corrected value; ``num_jobs`` the jobs behind it; ``level`` where it comes from."""

    factor: float
    log_sd: float
    num_jobs: int
    level: CalibrationLevel

    def to_dict(self) -> CorrectionJson:
        """JSON-ready ``{factor, log_sd, level, num_jobs}``."""
        return {
            "factor": self.factor,
            "log_sd": self.log_sd,
            "level": self.level.value,
            "num_jobs": self.num_jobs,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEstimate:
    """A group's robust mean log ratio ``log_ratio`` with its between-job spread
    ``spread_log_sd`` (tau), standard error ``log_se``, ``num_jobs`` and the newest job's
    ``latest_time_s``."""

    log_ratio: float
    spread_log_sd: float
    log_se: float
    num_jobs: int
    latest_time_s: float

    @property
    def predictive_log_sd(self) -> float:
        """Log-sd of a new job's ratio: ``sqrt(tau^2 + se^2)``."""
        return math.hypot(self.spread_log_sd, self.log_se)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorStats:
    """The uncorrected model's error on the jobs of a group: median over jobs of
    ``|predicted / observed - 1|`` (``median_abs_error_ratio``, None without jobs)."""

    median_abs_error_ratio: float | None
    num_jobs: int
