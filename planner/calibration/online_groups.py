"""One learnt ratio per group of jobs: the store and estimator behind each online correction.

``RatioGroups`` keeps the latest ``JobObservation`` of every ``(key, job_id)`` and the robust
estimate of every group at the three levels (``CalibrationKey.prefix``), recomputed lazily for
the groups an observation touched (``planner.calibration.online_stats``). ``OnlineCalibration``
holds one per ``Component``: the whole step, and the compute and network parts of the step
(``planner.calibration.online_split``). Its ``correction`` walks the levels as
``planner.calibration.online`` documents (key, GPU, cluster, none).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

import numpy as np

from planner.calibration.online_stats import group_estimates
from planner.calibration.online_types import (
    GROUP_LEVELS,
    CalibrationKey,
    CalibrationLevel,
    Correction,
    GroupEstimate,
    JobObservation,
)
from planner.errors import SpecError
from planner.forecast.eta import DEFAULT_LOG_SD

__all__ = ["JOB_LEVEL_LOG_SD", "GroupEstimateJson", "Hyper", "JobObservationJson", "RatioGroups"]


class JobObservationJson(TypedDict):
    """One job of ``RatioGroups.jobs_json``: its key's fields, ``job_id``, the predicted and
    observed step times (s), the iterations behind the observation and when it came (epoch
    s)."""

    scheduler: str
    cluster: str
    gpu: str
    framework: str
    job_id: str
    predicted_step_time_s: float
    observed_step_time_s: float
    num_iterations: int
    time_s: float


class GroupEstimateJson(TypedDict):
    """One group of ``RatioGroups.estimates_json``: its level (a ``CalibrationLevel`` value)
    and key prefix, and the ``GroupEstimate`` fields."""

    level: str
    group: list[str]
    log_ratio: float
    spread_log_sd: float
    log_se: float
    num_jobs: int
    latest_time_s: float


JOB_LEVEL_LOG_SD: Final = 0.05
"""Floor of a job's own correction: how far its later mean may differ (the ETA's level_log_sd)."""

_Group = tuple[CalibrationLevel, tuple[str, ...]]
_Ident = tuple[CalibrationKey, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hyper:
    """The hyper-parameters of ``OnlineCalibration`` (its ``__init__`` documents each)."""

    half_life_s: float
    iterations_half_weight: float
    prior_spread_log_sd: float
    prior_spread_dof: float
    huber_k: float
    min_jobs: int
    min_iterations: int
    gpu_level_log_sd: float
    cluster_level_log_sd: float
    model_log_sd: float


class RatioGroups:
    """Latest observation per job and a robust log ratio per group (module docstring).

    ``jobs`` maps ``(key, job_id)`` to the job's latest observation, in the order of the latest
    updates; ``estimates`` (refreshed on access) maps ``(level, prefix)`` to the group's
    ``GroupEstimate``; groups whose jobs all ran fewer than ``min_iterations`` have none.
    """

    def __init__(self, hyper: Hyper) -> None:
        self.hyper = hyper
        self.jobs: dict[_Ident, JobObservation] = {}
        self._estimates: dict[_Group, GroupEstimate] = {}
        self._members: dict[_Group, set[_Ident]] = {}
        self._dirty: set[_Group] = set()

    @property
    def estimates(self) -> dict[_Group, GroupEstimate]:
        """Every group's estimate, keyed by ``(level, CalibrationKey.prefix(level))``."""
        self._refresh()
        return self._estimates

    def add(self, observation: JobObservation) -> None:
        """Keep ``observation`` as its job's latest; its three groups are recomputed when next
        asked for."""
        ident = (observation.key, observation.job_id)
        self.jobs.pop(ident, None)  # re-insert: dict order stays the order of latest updates
        self.jobs[ident] = observation
        for level in GROUP_LEVELS:
            group = (level, observation.key.prefix(level))
            self._members.setdefault(group, set()).add(ident)
            self._dirty.add(group)

    def rebuild(self, observations: Iterable[JobObservation]) -> int:
        """Replace the state by ``observations`` (per job the latest ``time_s`` wins, ties: the
        later in the sequence), every group at once; returns how many were given."""
        latest: dict[_Ident, JobObservation] = {}
        count = 0
        for o in observations:
            count += 1
            ident = (o.key, o.job_id)
            prev = latest.get(ident)
            if prev is None or o.time_s >= prev.time_s:
                latest[ident] = o
        jobs = sorted(latest.values(), key=lambda o: (o.time_s, o.job_id))
        self.jobs = {(o.key, o.job_id): o for o in jobs}
        self._estimates = {}
        self._members = {}
        self._dirty = set()
        eligible = [o for o in jobs if o.num_iterations >= self.hyper.min_iterations]
        for level in GROUP_LEVELS:
            for prefix, estimate in self._estimate(eligible, level).items():
                self._estimates[(level, prefix)] = estimate
        for ident, o in self.jobs.items():
            for level in GROUP_LEVELS:
                self._members.setdefault((level, o.key.prefix(level)), set()).add(ident)
        return count

    def restore_estimates(self, estimates: Mapping[_Group, GroupEstimate]) -> None:
        """Take stored estimates instead of the recomputed ones when they cover the same groups
        (a round trip through JSON then gives back exactly what was stored)."""
        if set(estimates) == set(self.estimates):
            self._estimates = dict(estimates)

    def correction(self, key: CalibrationKey, job_id: str | None = None) -> Correction:
        """The correction for a job on ``key``: its own ratio when ``job_id`` has run at least
        ``min_iterations`` there, else the most specific group with ``min_jobs`` jobs (the
        spread inflated for the wider levels), else none (factor 1, ``model_log_sd``)."""
        h = self.hyper
        if job_id is not None:
            own = self.jobs.get((key, job_id))
            if own is not None and own.num_iterations >= h.min_iterations:
                return Correction(
                    factor=math.exp(own.log_ratio),
                    log_sd=math.hypot(
                        JOB_LEVEL_LOG_SD, DEFAULT_LOG_SD / math.sqrt(own.num_iterations)
                    ),
                    num_jobs=1,
                    level=CalibrationLevel.JOB,
                )
        inflation = {
            CalibrationLevel.KEY: 0.0,
            CalibrationLevel.GPU: h.gpu_level_log_sd,
            CalibrationLevel.CLUSTER: math.hypot(h.gpu_level_log_sd, h.cluster_level_log_sd),
        }
        for level in GROUP_LEVELS:
            est = self.estimates.get((level, key.prefix(level)))
            if est is not None and est.num_jobs >= h.min_jobs:
                return Correction(
                    factor=math.exp(est.log_ratio),
                    log_sd=math.hypot(est.predictive_log_sd, inflation[level]),
                    num_jobs=est.num_jobs,
                    level=level,
                )
        return Correction(
            factor=1.0, log_sd=h.model_log_sd, num_jobs=0, level=CalibrationLevel.NONE
        )

    # -- persistence ----------------------------------------------------------------------------

    def jobs_json(self) -> list[JobObservationJson]:
        """The jobs in update order, JSON-ready."""
        return [
            {
                "scheduler": o.key.scheduler,
                "cluster": o.key.cluster,
                "gpu": o.key.gpu,
                "framework": o.key.framework,
                "job_id": o.job_id,
                "predicted_step_time_s": o.predicted_step_time_s,
                "observed_step_time_s": o.observed_step_time_s,
                "num_iterations": o.num_iterations,
                "time_s": o.time_s,
            }
            for o in self.jobs.values()
        ]

    def estimates_json(self) -> list[GroupEstimateJson]:
        """The group estimates, JSON-ready, sorted by group."""
        return [
            {
                "level": level.value,
                "group": list(prefix),
                "log_ratio": e.log_ratio,
                "spread_log_sd": e.spread_log_sd,
                "log_se": e.log_se,
                "num_jobs": e.num_jobs,
                "latest_time_s": e.latest_time_s,
            }
            for (level, prefix), e in sorted(self.estimates.items(), key=lambda kv: kv[0])
        ]

    def load_json(self, jobs: Sequence[Any], estimates: Sequence[Any]) -> None:
        """Restore ``jobs_json`` / ``estimates_json`` output. Raises ``SpecError`` when
        malformed."""
        try:
            observations = [
                JobObservation(
                    key=CalibrationKey(
                        scheduler=j["scheduler"],
                        cluster=j["cluster"],
                        gpu=j["gpu"],
                        framework=j["framework"],
                    ),
                    job_id=j["job_id"],
                    predicted_step_time_s=j["predicted_step_time_s"],
                    observed_step_time_s=j["observed_step_time_s"],
                    num_iterations=j["num_iterations"],
                    time_s=j["time_s"],
                )
                for j in jobs
            ]
            stored = {
                (CalibrationLevel(e["level"]), tuple(str(g) for g in e["group"])): GroupEstimate(
                    log_ratio=float(e["log_ratio"]),
                    spread_log_sd=float(e["spread_log_sd"]),
                    log_se=float(e["log_se"]),
                    num_jobs=int(e["num_jobs"]),
                    latest_time_s=float(e["latest_time_s"]),
                )
                for e in estimates
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError("jobs", f"malformed calibration state: {exc!r}") from exc
        self.rebuild(observations)
        self.jobs = {(o.key, o.job_id): o for o in observations}
        self.restore_estimates(stored)

    # -- statistics -----------------------------------------------------------------------------

    def _refresh(self) -> None:
        """Recompute the groups touched since the last refresh (each from its own jobs)."""
        for group in sorted(self._dirty):
            level, prefix = group
            jobs = [self.jobs[m] for m in self._members.get(group, ())]
            jobs = [o for o in jobs if o.num_iterations >= self.hyper.min_iterations]
            jobs.sort(key=lambda o: (o.time_s, o.job_id))
            self._estimates.pop(group, None)
            if jobs:
                self._estimates[group] = self._estimate(jobs, level)[prefix]
        self._dirty.clear()

    def _estimate(
        self, jobs: Sequence[JobObservation], level: CalibrationLevel
    ) -> dict[tuple[str, ...], GroupEstimate]:
        """Estimates of every group at ``level`` among ``jobs`` (one vectorized pass)."""
        if not jobs:
            return {}
        h = self.hyper
        index: dict[tuple[str, ...], int] = {}
        group = np.fromiter(
            (index.setdefault(o.key.prefix(level), len(index)) for o in jobs),
            dtype=np.int64,
            count=len(jobs),
        )
        y = np.log(
            np.fromiter((o.observed_step_time_s for o in jobs), np.float64, len(jobs))
            / np.fromiter((o.predicted_step_time_s for o in jobs), np.float64, len(jobs))
        )
        n = np.fromiter((o.num_iterations for o in jobs), np.float64, len(jobs))
        t = np.fromiter((o.time_s for o in jobs), np.float64, len(jobs))
        mu, tau, se, count, latest = group_estimates(
            group,
            y,
            n,
            t,
            num_groups=len(index),
            half_life_s=h.half_life_s,
            iterations_half_weight=h.iterations_half_weight,
            prior_spread_log_sd=h.prior_spread_log_sd,
            prior_spread_dof=h.prior_spread_dof,
            huber_k=h.huber_k,
        )
        return {
            prefix: GroupEstimate(
                log_ratio=float(mu[g]),
                spread_log_sd=float(tau[g]),
                log_se=float(se[g]),
                num_jobs=int(count[g]),
                latest_time_s=float(latest[g]),
            )
            for prefix, g in index.items()
        }
