"""Runtime distributions of jobs and the interruption (failure and restart) model.

A job's runtime is a two-piece log-normal through the prediction's p10, p50 and p90 (the band
the ETA and ``predict`` give): median ``p50``, log-space sd ``ln(p50 / p10) / z_0.9`` below the
median and ``ln(p90 / p50) / z_0.9`` above, ``z_0.9 = 1.2816`` the standard normal's 0.9
quantile (``draw_runtimes``). A symmetric band is the ordinary log-normal with
``sigma = ln(p90 / p10) / (2 z_0.9)``; an asymmetric one keeps its three quantiles, where one
log-normal fitted to p10 and p90 alone would not: a running job's remaining time, whose p10 nears
zero as it passes its own p10, would get a p90 half as late again as its band's. Every simulation
draws runtimes this one way (the review's pooled and node models, the pending-queue forecast).

Interruptions follow Llama 3 (Dubey et al. 2024, arXiv 2407.21783, sec. 3.3.4, Table 5): 419
unexpected interruptions in a 54-day snapshot of pretraining on 16,384 H100 GPUs. Taking the
interruptions as independent across GPUs and time (a Poisson process whose rate is
proportional to the GPUs a job holds), the rate per GPU-hour is the count over the GPU-hours
of the snapshot: ``419 / (54 days · 24 h · 16,384 GPUs) = 1.97e-5`` per GPU-hour, i.e. one
interruption every 3.1 hours for a 16,384-GPU job and every 6.4 days for a 320-GPU one. The
paper's 90 % effective training time over the snapshot is the goodput this rate gives with
frequent checkpoints and fast restarts.

Each interruption (and each time-limit kill) costs the work since the last checkpoint (the
useful time of the run modulo ``checkpoint_interval_s``) plus a restart overhead before the
next run trains again (re-scheduling, process start, checkpoint load;
``DEFAULT_RESTART_OVERHEAD_S``, our assumption: the paper gives no figure), and the stopped
job waits in the queue again (``planner.capacity.simulate``).

Checkpoint interval: the job's own (``checkpoint_interval_minutes`` in the plan; a snapshot
job's ``checkpoint_interval_s``), else ``DEFAULT_CHECKPOINT_INTERVAL_S``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL_S",
    "DEFAULT_RESTART_OVERHEAD_S",
    "LLAMA3_INTERRUPTIONS_PER_GPU_HOUR",
    "Z90",
    "InterruptionModel",
    "RuntimeBand",
    "band_arrays",
    "draw_runtimes",
    "share_draws",
]

Z90 = NormalDist().inv_cdf(0.9)
"""The standard normal's 0.9 quantile (1.2816): p10/p90 are ``exp(mu -/+ Z90 sigma)``."""

LLAMA3_INTERRUPTIONS_PER_GPU_HOUR = 419 / (54 * 24 * 16384)
"""1.973e-5 unexpected interruptions per GPU-hour (Llama 3, arXiv 2407.21783, sec. 3.3.4)."""

DEFAULT_CHECKPOINT_INTERVAL_S = 3600.0
"""Checkpoint interval assumed for a job that names none: one hour (our assumption; at Llama 3's
interruption rate a 1,024-GPU job then loses about 1.3 % of its time to lost work and restarts:
``1024 · 1.97e-5 · (0.5 h + 1/6 h) = 1.3 %``)."""

DEFAULT_RESTART_OVERHEAD_S = 600.0
"""Wall time from an interruption to training again (assumption: 10 minutes)."""

_MAX_LOSS_FRACTION = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeBand:
    """A runtime in seconds given by its p10, p50 and p90 (a two-piece log-normal through
    them: module docstring).

    Raises ``SpecError`` unless ``0 < p10_s <= p50_s <= p90_s`` (all finite). ``p10_s == p90_s``
    is a fixed runtime.
    """

    p10_s: float
    p50_s: float
    p90_s: float

    def __post_init__(self) -> None:
        for name in ("p10_s", "p50_s", "p90_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(name, f"must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise SpecError(name, f"must be a positive number of seconds, got {value!r}")
        if not self.p10_s <= self.p50_s <= self.p90_s:
            raise SpecError(
                "p50_s",
                f"the band must be ordered p10 <= p50 <= p90, got {self.p10_s:g} / "
                f"{self.p50_s:g} / {self.p90_s:g} s",
            )

    @classmethod
    def from_median(cls, p50_s: float, log_sd: float) -> RuntimeBand:
        """The band of a log-normal with median ``p50_s`` and log-space sd ``log_sd``."""
        if not (math.isfinite(log_sd) and log_sd >= 0):
            raise SpecError("runtime_log_sd", f"must be >= 0, got {log_sd}")
        spread = math.exp(Z90 * log_sd)
        return cls(p10_s=p50_s / spread, p50_s=p50_s, p90_s=p50_s * spread)

    @property
    def mu(self) -> float:
        """Mean of the log runtime, ``ln p50``."""
        return math.log(self.p50_s)

    @property
    def sigma(self) -> float:
        """The mean of the two halves' log-space sds, ``ln(p90/p10) / (2 Z90)`` (the sd of a
        symmetric band)."""
        return math.log(self.p90_s / self.p10_s) / (2.0 * Z90)

    @property
    def sigma_below(self) -> float:
        """Log-space sd below the median, ``ln(p50/p10) / Z90``."""
        return math.log(self.p50_s / self.p10_s) / Z90

    @property
    def sigma_above(self) -> float:
        """Log-space sd above the median, ``ln(p90/p50) / Z90``."""
        return math.log(self.p90_s / self.p50_s) / Z90

    def quantile_s(self, q: float) -> float:
        """The ``q`` quantile of the runtime, seconds (0 < q < 1; the two-piece log-normal,
        so the 0.1, 0.5 and 0.9 quantiles are the band's)."""
        z = NormalDist().inv_cdf(q)
        return self.p50_s * math.exp((self.sigma_below if z < 0 else self.sigma_above) * z)

    def scaled(self, factor: float) -> RuntimeBand:
        """The same spread with every quantile multiplied by ``factor`` (> 0)."""
        return RuntimeBand(
            p10_s=self.p10_s * factor, p50_s=self.p50_s * factor, p90_s=self.p90_s * factor
        )

    def to_dict(self) -> dict[str, float]:
        """``{"p10_s", "p50_s", "p90_s"}``."""
        return {"p10_s": self.p10_s, "p50_s": self.p50_s, "p90_s": self.p90_s}


def band_arrays(
    bands: Sequence[RuntimeBand],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """``(p50_s, sigma_below, sigma_above)`` of ``bands``, each ``(len(bands),)``: the
    arguments of ``draw_runtimes``."""
    return (
        np.array([b.p50_s for b in bands], np.float64),
        np.array([b.sigma_below for b in bands], np.float64),
        np.array([b.sigma_above for b in bands], np.float64),
    )


def draw_runtimes(
    p50_s: NDArray[np.float64],
    sigma_below: NDArray[np.float64],
    sigma_above: NDArray[np.float64],
    normals: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Runtimes, seconds, from standard normal draws ``normals`` ``(S, K)``: the two-piece
    log-normal of median ``p50_s`` and log-space sds ``sigma_below`` / ``sigma_above``
    (each ``(K,)``, one per column; module docstring), ``p50 · exp(sd · z)`` with the sd of
    the side of the median ``z`` falls on. Bands give them as ``RuntimeBand.p50_s``,
    ``sigma_below``, ``sigma_above``."""
    sd = np.where(normals < 0.0, sigma_below, sigma_above)
    out: NDArray[np.float64] = p50_s * np.exp(sd * normals)
    return out


def share_draws(normals: NDArray[np.float64], groups: Sequence[str]) -> NDArray[np.float64]:
    """``normals`` ``(S, K)`` with the columns of jobs of one draw group made one: every column
    whose ``groups`` entry (``(K,)``) is not empty takes the draws of the first column of its
    group; an empty group keeps its own draws. A copy; raises ``ValueError`` when ``groups``
    is not one entry per column.

    Jobs of one group run the same program on the same hardware: the planner's runtime band of
    each is its uncertainty about that program's speed there, which is the same unknown for
    all of them, so each lands at the same quantile of its own band (two copies of one
    training run started together end together, and a job that fits only once both are done
    is not overtaken by a backfilled one in a gap between their ends that the scheduler
    never saw)."""
    if len(groups) != normals.shape[1]:
        raise ValueError(f"{len(groups)} draw groups for {normals.shape[1]} columns of draws")
    out = normals.copy()
    first: dict[str, int] = {}
    for k, group in enumerate(groups):
        if group:
            out[:, k] = out[:, first.setdefault(group, k)]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptionModel:
    """Unexpected interruptions per GPU-hour and the wall time each restart costs.

    ``rate_per_gpu_hour`` defaults to Llama 3's 1.97e-5; 0 turns interruptions off.
    """

    rate_per_gpu_hour: float = LLAMA3_INTERRUPTIONS_PER_GPU_HOUR
    restart_overhead_s: float = DEFAULT_RESTART_OVERHEAD_S

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_per_gpu_hour) and self.rate_per_gpu_hour >= 0):
            raise SpecError(
                "interruptions_per_gpu_hour", f"must be >= 0, got {self.rate_per_gpu_hour}"
            )
        if not (math.isfinite(self.restart_overhead_s) and self.restart_overhead_s >= 0):
            raise SpecError(
                "restart_overhead_minutes", f"must be >= 0, got {self.restart_overhead_s}"
            )
