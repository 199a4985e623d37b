"""Monte Carlo outcomes -> what a review reports: per-job quantiles and deadline risk, pool
occupancy over time and per week, GPU-hours and cost per team.

Quantiles are empirical (``numpy.quantile``, ``inverted_cdf``: an observed value, so "never"
stays infinite instead of interpolating). A deadline is *missed* when the job has not
completed by it (killed at its time limit and never started count as misses). Occupancy
integrates each job's GPUs over the time it holds them (start to release) exactly, bin by bin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.capacity.montecarlo import Outcomes
from planner.capacity.workload import FloatArray, IntArray, Workload

__all__ = [
    "QUANTILES",
    "JobForecast",
    "Occupancy",
    "PoolWeek",
    "ScenarioResult",
    "TeamUsage",
    "interval_integrals",
    "quantiles",
    "summarize",
]

QUANTILES = (0.1, 0.5, 0.9)
"""The quantiles every forecast reports: p10, p50, p90."""

WEEK_S = 7 * 86400.0
DEFAULT_BIN_S = 6 * 3600.0


def quantiles(values: FloatArray, axis: int = 0) -> FloatArray:
    """p10/p50/p90 along ``axis`` (first axis of the result), empirical, inf kept."""
    return np.quantile(values, QUANTILES, axis=axis, method="inverted_cdf")


def _time(value: float, start_s: float) -> float | None:
    return None if not math.isfinite(value) else start_s + value


Intervals = tuple[FloatArray, FloatArray, FloatArray, IntArray]
"""(start, end, weight, group) arrays of the same shape."""


def interval_integrals(intervals: Intervals, num_groups: int, edges: FloatArray) -> FloatArray:
    """``out[g, b] = sum over intervals i of group g of weight_i * |[start_i, end_i] ∩ [edges_b,
    edges_b+1]|``, shape ``(num_groups, len(edges) - 1)``; intervals are clipped to the edges.

    One sort for all groups: the integral up to ``x`` of a group is ``x·W(x) - WA(x)`` where
    ``W``/``WA`` are cumulative sums of ``+w`` at starts and ``-w`` at ends (times ``a``)."""
    start, end, weight, group = intervals
    start, end, weight, group = intervals
    lo, hi = float(edges[0]), float(edges[-1])
    s = np.clip(start, lo, hi)
    e = np.clip(end, lo, hi)
    keep = e > s
    s, e, w, g = s[keep], e[keep], weight[keep], group[keep]
    span = hi - lo + 1.0
    at = np.concatenate([s, e]) - lo
    wt = np.concatenate([w, -w])
    key = np.concatenate([g, g]) * span + at
    order = np.argsort(key, kind="stable")
    key, at, wt = key[order], at[order], wt[order]
    cw = np.concatenate(([0.0], np.cumsum(wt)))
    cwa = np.concatenate(([0.0], np.cumsum(wt * at)))
    x = edges - lo
    q = (np.arange(num_groups)[:, None] * span + x[None, :]).ravel()
    idx = np.searchsorted(key, q, side="right")
    base = np.searchsorted(key, np.arange(num_groups) * span, side="left")
    base = np.repeat(base, x.size)
    xs = np.tile(x, num_groups)
    cumulative = xs * (cw[idx] - cw[base]) - (cwa[idx] - cwa[base])
    return np.diff(cumulative.reshape(num_groups, x.size), axis=1)


def capacity_integrals(w: Workload, edges: FloatArray) -> FloatArray:
    """GPU-seconds of capacity per pool and bin, ``(P, len(edges) - 1)``."""
    out = np.zeros((w.num_pools, edges.size - 1))
    for p in range(w.num_pools):
        times, counts = w.capacity_steps(p)
        starts = np.maximum(times, edges[0])
        ends = np.append(times[1:], np.inf)
        steps = (starts, ends, counts.astype(np.float64), np.zeros(counts.size, np.int64))
        out[p] = interval_integrals(steps, 1, edges)[0]
    return out


@dataclass(frozen=True, slots=True)
class JobForecast:
    """One job's forecast (epoch seconds; None: not within the simulated future).

    ``start_s``/``completion_s`` are (p10, p50, p90); ``pool``/``num_gpus`` the option it ran as
    most often; ``miss_probability`` the share of samples where it had not completed by its
    deadline (None without one); ``timeout_probability`` where its time limit killed it."""

    name: str
    kind: str
    team: str
    pool: str | None
    num_gpus: int
    start_s: tuple[float | None, float | None, float | None]
    completion_s: tuple[float | None, float | None, float | None]
    deadline_s: float | None
    miss_probability: float | None
    timeout_probability: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        keys = ("p10", "p50", "p90")
        return {
            "name": self.name,
            "kind": self.kind,
            "team": self.team,
            "pool": self.pool,
            "num_gpus": self.num_gpus,
            "start_s": dict(zip(keys, self.start_s, strict=True)),
            "completion_s": dict(zip(keys, self.completion_s, strict=True)),
            "deadline_s": self.deadline_s,
            "miss_probability": self.miss_probability,
            "timeout_probability": self.timeout_probability,
        }


@dataclass(frozen=True, slots=True)
class PoolWeek:
    """One pool in one week: capacity, occupied GPU-hours (p10/p50/p90), utilisation and idle
    GPU-hours at the median, mean occupied and demanded (occupied + waiting) GPUs."""

    pool: str
    week_start_s: float
    capacity_gpu_hours: float
    busy_gpu_hours: tuple[float, float, float]
    utilisation: float
    idle_gpu_hours: float
    occupied_gpus: tuple[float, float, float]
    demand_gpus: tuple[float, float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        keys = ("p10", "p50", "p90")
        return {
            "pool": self.pool,
            "week_start_s": self.week_start_s,
            "capacity_gpu_hours": self.capacity_gpu_hours,
            "busy_gpu_hours": dict(zip(keys, self.busy_gpu_hours, strict=True)),
            "utilisation": self.utilisation,
            "idle_gpu_hours": self.idle_gpu_hours,
            "occupied_gpus": dict(zip(keys, self.occupied_gpus, strict=True)),
            "demand_gpus": dict(zip(keys, self.demand_gpus, strict=True)),
        }


@dataclass(frozen=True, slots=True)
class TeamUsage:
    """GPU-hours a team uses within the horizon (mean, p10, p90) and its mean cost (None when
    a pool it used has no cost)."""

    team: str
    gpu_hours_mean: float
    gpu_hours: tuple[float, float]
    cost_mean: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "team": self.team,
            "gpu_hours_mean": self.gpu_hours_mean,
            "gpu_hours_p10": self.gpu_hours[0],
            "gpu_hours_p90": self.gpu_hours[1],
            "cost_mean": self.cost_mean,
        }


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Occupied GPUs of one pool over time: mean per bin (``edges_s`` epoch, ``(B+1,)``),
    p10/p50/p90 over samples ``(3, B)``, the capacity ``(B,)`` and the median demand."""

    pool: str
    edges_s: FloatArray
    capacity: FloatArray
    occupied: FloatArray
    demand_p50: FloatArray

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready lists."""
        return {
            "pool": self.pool,
            "edges_s": self.edges_s.tolist(),
            "capacity_gpus": self.capacity.tolist(),
            "occupied_gpus": {
                k: v.tolist() for k, v in zip(("p10", "p50", "p90"), self.occupied, strict=True)
            },
            "demand_gpus_p50": self.demand_p50.tolist(),
        }


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """Everything a review reports about one scenario (see the module docstring)."""

    name: str
    num_samples: int
    jobs: tuple[JobForecast, ...]
    pool_weeks: tuple[PoolWeek, ...]
    teams: tuple[TeamUsage, ...]
    occupancy: tuple[Occupancy, ...]
    excluded: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]

    @property
    def deadline_jobs(self) -> tuple[JobForecast, ...]:
        """Jobs with a deadline."""
        return tuple(j for j in self.jobs if j.deadline_s is not None)

    @property
    def expected_misses(self) -> float:
        """Sum of the miss probabilities (the expected number of missed deadlines), excluded
        jobs with a deadline counting 1 each."""
        return sum(j.miss_probability or 0.0 for j in self.jobs) + float(
            len(self.excluded_with_deadline)
        )

    @property
    def excluded_with_deadline(self) -> tuple[str, ...]:
        """Names of excluded jobs (they cannot run) - all count as misses."""
        return tuple(name for name, _ in self.excluded)

    @property
    def misses_at_p90(self) -> tuple[str, ...]:
        """Jobs whose p90 completion is after their deadline (or never)."""
        out = [
            j.name
            for j in self.deadline_jobs
            if j.completion_s[2] is None or j.completion_s[2] > (j.deadline_s or 0.0)
        ]
        return tuple(out)

    def summary(self) -> dict[str, Any]:
        """Headline numbers."""
        return {
            "jobs": len(self.jobs),
            "jobs_with_deadline": len(self.deadline_jobs),
            "expected_deadline_misses": self.expected_misses,
            "deadlines_missed_at_p90": len(self.misses_at_p90),
            "jobs_likely_to_miss": sum(1 for j in self.jobs if (j.miss_probability or 0.0) > 0.5),
            "excluded_jobs": len(self.excluded),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of the scenario (see ``docs/capacity-formats.md``, "Review output")."""
        return {
            "name": self.name,
            "num_samples": self.num_samples,
            "summary": self.summary(),
            "jobs": [j.to_dict() for j in self.jobs],
            "pool_weeks": [p.to_dict() for p in self.pool_weeks],
            "teams": [t.to_dict() for t in self.teams],
            "occupancy": [o.to_dict() for o in self.occupancy],
            "excluded": [{"name": n, "reason": r} for n, r in self.excluded],
            "warnings": list(self.warnings),
        }


def _held(w: Workload, out: Outcomes) -> Intervals:
    """Flattened (start, release, gpus, sample*P + pool) of every job that ran, per sample."""
    ran = out.option >= 0
    k = np.where(ran, out.option, 0)
    pool = w.opt_pool[k]
    samples = np.broadcast_to(np.arange(out.num_samples)[:, None], ran.shape)
    group = samples * w.num_pools + pool
    return out.start_s[ran], out.release_s[ran], w.opt_gpus[k][ran].astype(np.float64), group[ran]


def _waiting(w: Workload, out: Outcomes) -> Intervals:
    """(eligible, start, gpus, group) of every job that waited: in the pool it ran in, else its
    first option's pool."""
    first = np.zeros(w.num_jobs, np.int64)
    first[w.opt_job[::-1]] = np.arange(w.num_options)[::-1]
    k = np.where(out.option >= 0, out.option, first[None, :])
    queued = np.broadcast_to(~np.isfinite(w.job_start_s), k.shape)
    samples = np.broadcast_to(np.arange(out.num_samples)[:, None], k.shape)
    eligible = np.broadcast_to(w.job_eligible_s, k.shape)
    group = samples * w.num_pools + w.opt_pool[k]
    return (
        eligible[queued],
        out.start_s[queued],
        w.opt_gpus[k][queued].astype(np.float64),
        group[queued],
    )


def _edges(horizon_s: float, step_s: float) -> FloatArray:
    edges = np.arange(0.0, horizon_s, step_s)
    return np.append(edges, horizon_s)


def _per_pool(w: Workload, out: Outcomes, edges: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(occupied, demand) GPU-seconds, ``(S, P, B)``."""
    n = out.num_samples * w.num_pools
    busy = interval_integrals(_held(w, out), n, edges)
    wait = interval_integrals(_waiting(w, out), n, edges)
    shape = (out.num_samples, w.num_pools, edges.size - 1)
    return busy.reshape(shape), (busy + wait).reshape(shape)


def _jobs(w: Workload, out: Outcomes) -> list[JobForecast]:
    start_q = quantiles(out.start_s)
    done = out.completion_s
    done_q = quantiles(done)
    missed = (done > w.job_deadline_s[None, :]).mean(axis=0)
    timed_out = out.timed_out.mean(axis=0)
    jobs = []
    for j, name in enumerate(w.job_names):
        opts = out.option[:, j]
        ran = opts[opts >= 0]
        k = int(np.bincount(ran).argmax()) if ran.size else int(np.flatnonzero(w.opt_job == j)[0])
        deadline = float(w.job_deadline_s[j])
        jobs.append(
            JobForecast(
                name=name,
                kind=w.job_kind[j],
                team=w.teams[int(w.job_team[j])],
                pool=w.pool_names[int(w.opt_pool[k])] if ran.size else None,
                num_gpus=int(w.opt_gpus[k]),
                start_s=tuple(_time(float(v), w.start_s) for v in start_q[:, j]),  # type: ignore[arg-type]
                completion_s=tuple(_time(float(v), w.start_s) for v in done_q[:, j]),  # type: ignore[arg-type]
                deadline_s=_time(deadline, w.start_s),
                miss_probability=float(missed[j]) if math.isfinite(deadline) else None,
                timeout_probability=float(timed_out[j]),
            )
        )
    return jobs


def _teams(w: Workload, out: Outcomes) -> list[TeamUsage]:
    ran = out.option >= 0
    k = np.where(ran, out.option, 0)
    held = np.clip(out.release_s, 0, w.horizon_s) - np.clip(out.start_s, 0, w.horizon_s)
    hours = np.where(ran, np.maximum(held, 0.0) * w.opt_gpus[k] / 3600.0, 0.0)
    cost = hours * w.pool_cost_per_gpu_hour[w.opt_pool[k]]
    teams = []
    for t, team in enumerate(w.teams):
        cols = w.job_team == t
        per_sample = hours[:, cols].sum(axis=1)
        team_cost = np.where(hours[:, cols] > 0, cost[:, cols], 0.0).sum(axis=1)
        teams.append(
            TeamUsage(
                team=team,
                gpu_hours_mean=float(per_sample.mean()),
                gpu_hours=(
                    float(np.quantile(per_sample, 0.1)),
                    float(np.quantile(per_sample, 0.9)),
                ),
                cost_mean=None if np.isnan(team_cost).any() else float(team_cost.mean()),
            )
        )
    return teams


def summarize(
    w: Workload, out: Outcomes, name: str, bin_s: float = DEFAULT_BIN_S
) -> ScenarioResult:
    """The review of one scenario from its simulated futures (``out``: ``S`` samples)."""
    bins = _edges(w.horizon_s, bin_s)
    busy, demand = _per_pool(w, out, bins)
    widths = np.diff(bins)
    cap_bins = capacity_integrals(w, bins) / widths
    occupancy = tuple(
        Occupancy(
            pool=pool,
            edges_s=bins + w.start_s,
            capacity=cap_bins[p],
            occupied=quantiles(busy[:, p, :] / widths),
            demand_p50=np.quantile(demand[:, p, :] / widths, 0.5, axis=0, method="inverted_cdf"),
        )
        for p, pool in enumerate(w.pool_names)
    )
    weeks = _edges(w.horizon_s, WEEK_S)
    wbusy, wdemand = _per_pool(w, out, weeks)
    wcap = capacity_integrals(w, weeks)
    wwidth = np.diff(weeks)
    pool_weeks = []
    for p, pool in enumerate(w.pool_names):
        for b in range(weeks.size - 1):
            busy_q = quantiles(wbusy[:, p, b]) / 3600.0
            cap_h = float(wcap[p, b]) / 3600.0
            pool_weeks.append(
                PoolWeek(
                    pool=pool,
                    week_start_s=float(weeks[b] + w.start_s),
                    capacity_gpu_hours=cap_h,
                    busy_gpu_hours=tuple(float(v) for v in busy_q),  # type: ignore[arg-type]
                    utilisation=float(busy_q[1] / cap_h) if cap_h > 0 else 0.0,
                    idle_gpu_hours=max(cap_h - float(busy_q[1]), 0.0),
                    occupied_gpus=tuple(float(v) for v in quantiles(wbusy[:, p, b]) / wwidth[b]),  # type: ignore[arg-type]
                    demand_gpus=tuple(float(v) for v in quantiles(wdemand[:, p, b]) / wwidth[b]),  # type: ignore[arg-type]
                )
            )
    return ScenarioResult(
        name=name,
        num_samples=out.num_samples,
        jobs=tuple(_jobs(w, out)),
        pool_weeks=tuple(pool_weeks),
        teams=tuple(_teams(w, out)),
        occupancy=occupancy,
        excluded=w.excluded,
        warnings=w.warnings,
    )


def merge_names(results: Sequence[ScenarioResult]) -> tuple[str, ...]:
    """Job names across scenarios, first-seen order."""
    return tuple(dict.fromkeys(j.name for r in results for j in r.jobs))
