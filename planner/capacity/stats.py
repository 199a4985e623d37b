"""Monte Carlo outcomes -> what a review reports: per-job quantiles, queue waits and deadline
risk with its cause, pool occupancy over time and per week, GPU-hours, cost and quota use per
team and ClusterQueue, the fleet's cost, goodput and lost GPU-hours.

Quantiles are empirical (``numpy.quantile``, ``inverted_cdf``: an observed value, so "never"
stays infinite instead of interpolating). A deadline is *missed* when the job has not
completed by it (unfinished, killed at its time limit and never started count as misses; so
does a job that cannot run at all). Occupancy integrates each run's GPUs over the time it holds
them exactly, bin by bin; a job waits (demand) from its eligibility to its first run and
between a stopped run and the next.

The *cause* of a missed deadline, per sample: the largest of the job's delays from capacity
(its first queue wait, or never starting), time limits (the wall time lost to time-limit kills
plus the requeue waits after them; a kill that ends the job counts here) and failures (the same
for interruptions); a job's cause is the most frequent one over the samples it misses in.
*Goodput* is the share of held GPU-hours that made saved progress: ``1 - lost / held``, lost
being the work since the last checkpoint and the restart overheads of stopped runs.

Cost: a reserved pool (the default) costs ``cost_per_gpu_hour`` for every GPU-hour of its
capacity whether used or not; an ``on_demand`` pool for the GPU-hours jobs use. Team costs
are chargeback: the GPU-hours the team used times the pool's price.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from typing_extensions import TypedDict

from planner.capacity.montecarlo import Outcomes
from planner.capacity.workload import BoolArray, FloatArray, IntArray, Workload

__all__ = [
    "CAUSES",
    "QUANTILES",
    "ExcludedJson",
    "JobForecast",
    "JobForecastJson",
    "Occupancy",
    "OccupancyJson",
    "PoolWeek",
    "PoolWeekJson",
    "QuantilesJson",
    "QueueUsage",
    "QueueUsageJson",
    "ScenarioJson",
    "ScenarioResult",
    "SeriesQuantilesJson",
    "Summary",
    "TeamUsage",
    "TeamUsageJson",
    "WaitJson",
    "interval_integrals",
    "quantiles",
    "summarize",
]

QUANTILES = (0.1, 0.5, 0.9)
"""The quantiles every forecast reports: p10, p50, p90."""

CAUSES = ("capacity", "failure", "time limit")
"""Why a deadline is missed (index = the row of ``Outcomes.delay_s``)."""

WEEK_S = 7 * 86400.0
DEFAULT_BIN_S = 6 * 3600.0


def quantiles(values: FloatArray, axis: int = 0) -> FloatArray:
    """p10/p50/p90 along ``axis`` (first axis of the result), empirical, inf kept."""
    return np.quantile(values, QUANTILES, axis=axis, method="inverted_cdf")


class QuantilesJson(TypedDict):
    """p10/p50/p90 of one quantity (None: never, for times)."""

    p10: float | None
    p50: float | None
    p90: float | None


class WaitJson(TypedDict):
    """p50/p90 of a job's total queue wait, seconds (None: never started)."""

    p50: float | None
    p90: float | None


class SeriesQuantilesJson(TypedDict):
    """p10/p50/p90 of a quantity per time bin."""

    p10: list[float]
    p50: list[float]
    p90: list[float]


def _quantiles_json(values: Sequence[float | None]) -> QuantilesJson:
    """A (p10, p50, p90) triple as its JSON mapping."""
    p10, p50, p90 = values
    return {"p10": p10, "p50": p50, "p90": p90}


def _time(value: float, start_s: float) -> float | None:
    return None if not math.isfinite(value) else start_s + value


def _floats(values: FloatArray) -> tuple[float, float, float]:
    """A p10/p50/p90 triple (the first axis of ``quantiles``) as floats."""
    p10, p50, p90 = (float(v) for v in values)
    return p10, p50, p90


def _times(values: FloatArray, start_s: float) -> tuple[float | None, float | None, float | None]:
    """A p10/p50/p90 triple of seconds after ``start_s`` as epoch seconds (None: never)."""
    p10, p50, p90 = (_time(float(v), start_s) for v in values)
    return p10, p50, p90


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


def _opt(value: float) -> float | None:
    return None if not math.isfinite(value) else value


class JobForecastJson(TypedDict):
    """``JobForecast.to_dict``: its fields, triples as ``QuantilesJson``."""

    name: str
    kind: str
    team: str
    pool: str | None
    num_gpus: int
    layout: str
    start_s: QuantilesJson
    completion_s: QuantilesJson
    wait_s: WaitJson
    deadline_s: float | None
    miss_probability: float | None
    miss_cause: str | None
    timeout_probability: float
    runtime_p90_s: float | None
    time_limit_s: float | None
    failures_mean: float
    limit_kills_mean: float
    lost_gpu_hours_mean: float
    checkpoint_interval_s: float | None
    note: str
    preemptions_mean: float
    preempted_gpu_hours_mean: float


@dataclass(frozen=True, slots=True)
class JobForecast:
    """One job's forecast (epoch seconds; None: not within the simulated future).

    ``start_s``/``completion_s`` are (p10, p50, p90); ``pool``/``num_gpus``/``layout`` the
    option of its last run in the most samples; ``miss_probability`` the share of samples
    where it had not completed by its deadline (None without one); ``timeout_probability``
    where a time-limit kill ended it unfinished. ``wait_s`` (p50, p90) seconds queued in all
    (None: never started); ``miss_cause`` the most frequent cause over the missed samples
    (``CAUSES``; None: never missed); ``runtime_p90_s`` the p90 of one uninterrupted run's
    wall time (its work time); ``time_limit_s`` its limit (None: none); ``failures_mean`` /
    ``limit_kills_mean`` runs stopped per sample; ``lost_gpu_hours_mean`` GPU-hours lost to
    them; ``checkpoint_interval_s`` and ``note`` (how its layout or checkpoint interval was
    chosen); ``preemptions_mean`` runs evicted by Kueue preemption per sample and
    ``preempted_gpu_hours_mean`` the GPU-hours of ``lost_gpu_hours_mean`` they cost (unsaved
    work and the restarts after them)."""

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
    layout: str = ""
    wait_s: tuple[float | None, float | None] = (None, None)
    miss_cause: str | None = None
    runtime_p90_s: float | None = None
    time_limit_s: float | None = None
    failures_mean: float = 0.0
    limit_kills_mean: float = 0.0
    lost_gpu_hours_mean: float = 0.0
    checkpoint_interval_s: float | None = None
    note: str = ""
    preemptions_mean: float = 0.0
    preempted_gpu_hours_mean: float = 0.0

    def to_dict(self) -> JobForecastJson:
        """JSON-ready."""
        return {
            "name": self.name,
            "kind": self.kind,
            "team": self.team,
            "pool": self.pool,
            "num_gpus": self.num_gpus,
            "layout": self.layout,
            "start_s": _quantiles_json(self.start_s),
            "completion_s": _quantiles_json(self.completion_s),
            "wait_s": {"p50": self.wait_s[0], "p90": self.wait_s[1]},
            "deadline_s": self.deadline_s,
            "miss_probability": self.miss_probability,
            "miss_cause": self.miss_cause,
            "timeout_probability": self.timeout_probability,
            "runtime_p90_s": self.runtime_p90_s,
            "time_limit_s": self.time_limit_s,
            "failures_mean": self.failures_mean,
            "limit_kills_mean": self.limit_kills_mean,
            "lost_gpu_hours_mean": self.lost_gpu_hours_mean,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "note": self.note,
            "preemptions_mean": self.preemptions_mean,
            "preempted_gpu_hours_mean": self.preempted_gpu_hours_mean,
        }


class Summary(TypedDict):
    """A scenario's headline numbers (JSON-ready): jobs in all and with a deadline, the
    expected number of missed deadlines (sum of the miss probabilities), deadlines missed at
    the p90 completion, jobs more likely than not to miss, jobs left out.

    The one description of this shape: the API's response models use it as it is
    (``typing_extensions.TypedDict``, which pydantic reads on every Python version)."""

    jobs: int
    jobs_with_deadline: int
    expected_deadline_misses: float
    deadlines_missed_at_p90: int
    jobs_likely_to_miss: int
    excluded_jobs: int


class PoolWeekJson(TypedDict):
    """``PoolWeek.to_dict``."""

    pool: str
    week_start_s: float
    capacity_gpu_hours: float
    busy_gpu_hours: QuantilesJson
    utilisation: float
    idle_gpu_hours: float
    occupied_gpus: QuantilesJson
    demand_gpus: QuantilesJson


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

    def to_dict(self) -> PoolWeekJson:
        """JSON-ready."""
        return {
            "pool": self.pool,
            "week_start_s": self.week_start_s,
            "capacity_gpu_hours": self.capacity_gpu_hours,
            "busy_gpu_hours": _quantiles_json(self.busy_gpu_hours),
            "utilisation": self.utilisation,
            "idle_gpu_hours": self.idle_gpu_hours,
            "occupied_gpus": _quantiles_json(self.occupied_gpus),
            "demand_gpus": _quantiles_json(self.demand_gpus),
        }


class TeamUsageJson(TypedDict):
    """``TeamUsage.to_dict``: its fields, ``gpu_hours`` as p10/p90 keys, and ``quota_use``."""

    team: str
    gpu_hours_mean: float
    gpu_hours_p10: float
    gpu_hours_p90: float
    cost_mean: float | None
    lost_gpu_hours_mean: float
    quota_gpu_hours: float | None
    queued_gpu_hours_mean: float
    quota_use: float | None
    preemptions_mean: float
    preempted_gpu_hours_mean: float


@dataclass(frozen=True, slots=True)
class TeamUsage:
    """GPU-hours a team uses within the horizon (mean, p10, p90), its mean cost (chargeback;
    None when a pool it used has no cost), the GPU-hours it lost to stopped runs, and its
    quota use: the GPU-hours of its jobs in Kueue ClusterQueues (``queued_gpu_hours_mean``)
    over the nominal quota GPU-hours of those queues (None without Kueue queues);
    ``preemptions_mean`` runs of its jobs Kueue evicted per sample and
    ``preempted_gpu_hours_mean`` the GPU-hours of ``lost_gpu_hours_mean`` they cost."""

    team: str
    gpu_hours_mean: float
    gpu_hours: tuple[float, float]
    cost_mean: float | None
    lost_gpu_hours_mean: float = 0.0
    quota_gpu_hours: float | None = None
    queued_gpu_hours_mean: float = 0.0
    preemptions_mean: float = 0.0
    preempted_gpu_hours_mean: float = 0.0

    @property
    def quota_use(self) -> float | None:
        """Mean GPU-hours of its jobs in ClusterQueues over their quota GPU-hours (None
        without a quota)."""
        if not self.quota_gpu_hours:
            return None
        return self.queued_gpu_hours_mean / self.quota_gpu_hours

    def to_dict(self) -> TeamUsageJson:
        """JSON-ready."""
        return {
            "team": self.team,
            "gpu_hours_mean": self.gpu_hours_mean,
            "gpu_hours_p10": self.gpu_hours[0],
            "gpu_hours_p90": self.gpu_hours[1],
            "cost_mean": self.cost_mean,
            "lost_gpu_hours_mean": self.lost_gpu_hours_mean,
            "quota_gpu_hours": self.quota_gpu_hours,
            "queued_gpu_hours_mean": self.queued_gpu_hours_mean,
            "quota_use": self.quota_use,
            "preemptions_mean": self.preemptions_mean,
            "preempted_gpu_hours_mean": self.preempted_gpu_hours_mean,
        }


class QueueUsageJson(TypedDict):
    """``QueueUsage.to_dict``: its fields and ``use``."""

    queue: str
    cohort: str | None
    nominal_gpu_hours: float
    used_gpu_hours_mean: float
    use: float | None


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """One Kueue ClusterQueue over the horizon: its cohort, its nominal quota in GPU-hours (all
    pools, the whole horizon) and the GPU-hours its jobs used (mean over samples); ``use``
    above 1 means it borrowed from its cohort."""

    queue: str
    cohort: str | None
    nominal_gpu_hours: float
    used_gpu_hours_mean: float

    @property
    def use(self) -> float | None:
        """Used over nominal GPU-hours (None with no nominal quota)."""
        return self.used_gpu_hours_mean / self.nominal_gpu_hours if self.nominal_gpu_hours else None

    def to_dict(self) -> QueueUsageJson:
        """JSON-ready."""
        return {
            "queue": self.queue,
            "cohort": self.cohort,
            "nominal_gpu_hours": self.nominal_gpu_hours,
            "used_gpu_hours_mean": self.used_gpu_hours_mean,
            "use": self.use,
        }


class OccupancyJson(TypedDict):
    """``Occupancy.to_dict``: its arrays as lists."""

    pool: str
    edges_s: list[float]
    capacity_gpus: list[float]
    occupied_gpus: SeriesQuantilesJson
    demand_gpus_p50: list[float]


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Occupied GPUs of one pool over time: mean per bin (``edges_s`` epoch, ``(B+1,)``),
    p10/p50/p90 over samples ``(3, B)``, the capacity ``(B,)`` and the median demand."""

    pool: str
    edges_s: FloatArray
    capacity: FloatArray
    occupied: FloatArray
    demand_p50: FloatArray

    def to_dict(self) -> OccupancyJson:
        """JSON-ready lists."""
        p10, p50, p90 = (row.tolist() for row in self.occupied)
        return {
            "pool": self.pool,
            "edges_s": self.edges_s.tolist(),
            "capacity_gpus": self.capacity.tolist(),
            "occupied_gpus": {"p10": p10, "p50": p50, "p90": p90},
            "demand_gpus_p50": self.demand_p50.tolist(),
        }


class ExcludedJson(TypedDict):
    """A job that cannot run at all: why, and its deadline (epoch seconds; None: none)."""

    name: str
    reason: str
    deadline_s: float | None


class ScenarioJson(TypedDict):
    """``ScenarioResult.to_dict`` (``docs/capacity-formats.md``, "Review output")."""

    name: str
    num_samples: int
    summary: Summary
    jobs: list[JobForecastJson]
    pool_weeks: list[PoolWeekJson]
    teams: list[TeamUsageJson]
    queues: list[QueueUsageJson]
    occupancy: list[OccupancyJson]
    excluded: list[ExcludedJson]
    fleet_cost_mean: float | None
    held_gpu_hours_mean: float
    lost_gpu_hours_mean: float
    goodput: float | None
    warnings: list[str]


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """Everything a review reports about one scenario (see the module docstring).

    ``excluded`` (name, reason) are jobs that cannot run at all (``excluded_deadlines``: their
    deadlines, epoch seconds or None); ``queues`` the ClusterQueues' quota use;
    ``fleet_cost_mean`` what the fleet costs over the horizon (reserved capacity plus on-demand
    use; None when a pool has no price); ``held_gpu_hours_mean`` / ``lost_gpu_hours_mean``
    GPU-hours jobs held and lost to stopped runs within the horizon."""

    name: str
    num_samples: int
    jobs: tuple[JobForecast, ...]
    pool_weeks: tuple[PoolWeek, ...]
    teams: tuple[TeamUsage, ...]
    occupancy: tuple[Occupancy, ...]
    excluded: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    excluded_deadlines: tuple[float | None, ...] = ()
    queues: tuple[QueueUsage, ...] = ()
    fleet_cost_mean: float | None = None
    held_gpu_hours_mean: float = 0.0
    lost_gpu_hours_mean: float = 0.0

    @property
    def goodput(self) -> float | None:
        """Share of held GPU-hours that made saved progress (None when nothing ran)."""
        if self.held_gpu_hours_mean <= 0:
            return None
        return 1.0 - self.lost_gpu_hours_mean / self.held_gpu_hours_mean

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
        """Names of excluded jobs that have a deadline: they cannot run, so they miss it."""
        deadlines = self.excluded_deadlines or (0.0,) * len(self.excluded)
        return tuple(
            name
            for (name, _), deadline in zip(self.excluded, deadlines, strict=True)
            if deadline is not None
        )

    @property
    def misses_at_p90(self) -> tuple[str, ...]:
        """Jobs whose p90 completion is after their deadline (or never), then the excluded
        jobs with a deadline."""
        out = [
            j.name
            for j in self.deadline_jobs
            if j.completion_s[2] is None or j.completion_s[2] > (j.deadline_s or 0.0)
        ]
        return tuple(out) + self.excluded_with_deadline

    def summary(self) -> Summary:
        """Headline numbers."""
        return Summary(
            jobs=len(self.jobs) + len(self.excluded),
            jobs_with_deadline=len(self.deadline_jobs) + len(self.excluded_with_deadline),
            expected_deadline_misses=self.expected_misses,
            deadlines_missed_at_p90=len(self.misses_at_p90),
            jobs_likely_to_miss=sum(1 for j in self.jobs if (j.miss_probability or 0.0) > 0.5)
            + len(self.excluded_with_deadline),
            excluded_jobs=len(self.excluded),
        )

    def to_dict(self) -> ScenarioJson:
        """The JSON form of the scenario (see ``docs/capacity-formats.md``, "Review output")."""
        deadlines = self.excluded_deadlines or (None,) * len(self.excluded)
        return {
            "name": self.name,
            "num_samples": self.num_samples,
            "summary": self.summary(),
            "jobs": [j.to_dict() for j in self.jobs],
            "pool_weeks": [p.to_dict() for p in self.pool_weeks],
            "teams": [t.to_dict() for t in self.teams],
            "queues": [q.to_dict() for q in self.queues],
            "occupancy": [o.to_dict() for o in self.occupancy],
            "excluded": [
                {"name": n, "reason": r, "deadline_s": d}
                for (n, r), d in zip(self.excluded, deadlines, strict=True)
            ],
            "fleet_cost_mean": self.fleet_cost_mean,
            "held_gpu_hours_mean": self.held_gpu_hours_mean,
            "lost_gpu_hours_mean": self.lost_gpu_hours_mean,
            "goodput": self.goodput,
            "warnings": list(self.warnings),
        }


def _held(w: Workload, out: Outcomes) -> Intervals:
    """Flattened (start, end, gpus, sample*P + pool) of every run of every sample."""
    k = out.run_option
    group = out.run_sample * w.num_pools + w.opt_pool[k]
    return out.run_start_s, out.run_end_s, w.opt_gpus[k].astype(np.float64), group


def _waiting(w: Workload, out: Outcomes) -> Intervals:
    """(from, to, gpus, group) of every wait: eligibility to the first run (in the pool it
    ran in, else its first option's pool), a stopped run to the next, and a stopped run
    never restarted to the end."""
    first = np.zeros(w.num_jobs, np.int64)
    first[w.opt_job[::-1]] = np.arange(w.num_options)[::-1]
    runs = out.run_sample.size
    order = np.lexsort((out.run_start_s, out.run_job, out.run_sample))
    rs, rj, ro = out.run_sample[order], out.run_job[order], out.run_option[order]
    a, b = out.run_start_s[order], out.run_end_s[order]
    first_run = np.ones(runs, np.bool_)
    if runs:
        first_run[1:] = (rs[1:] != rs[:-1]) | (rj[1:] != rj[:-1])
    last_run = np.append(first_run[1:], True) if runs else first_run
    k0 = np.full((out.num_samples, w.num_jobs), -1, np.int64)
    k0[rs[first_run], rj[first_run]] = ro[first_run]
    k = np.where(k0 >= 0, k0, first[None, :])
    queued = np.broadcast_to(~np.isfinite(w.job_start_s), k.shape)
    samples = np.broadcast_to(np.arange(out.num_samples)[:, None], k.shape)
    eligible = np.broadcast_to(w.job_eligible_s, k.shape)
    gap = ~first_run
    stranded = last_run & ~out.finished[rs, rj] & ~out.timed_out[rs, rj]
    return (
        np.concatenate([eligible[queued], b[:-1][gap[1:]] if runs else b, b[stranded]]),
        np.concatenate([out.start_s[queued], a[gap], np.full(int(stranded.sum()), np.inf)]),
        np.concatenate(
            [w.opt_gpus[k][queued], w.opt_gpus[ro[gap]], w.opt_gpus[ro[stranded]]]
        ).astype(np.float64),
        np.concatenate(
            [
                (samples * w.num_pools + w.opt_pool[k])[queued],
                rs[gap] * w.num_pools + w.opt_pool[ro[gap]],
                rs[stranded] * w.num_pools + w.opt_pool[ro[stranded]],
            ]
        ),
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


def _causes(w: Workload, out: Outcomes, missed: BoolArray) -> list[str | None]:
    """The most frequent cause (``CAUSES``) over each job's missed samples (None: none)."""
    cause = np.argmax(out.delay_s, axis=1)  # (S, J)
    cause = np.where(out.timed_out, 2, cause)
    cause = np.where(np.isfinite(out.start_s), cause, 0)
    result: list[str | None] = []
    for j in range(w.num_jobs):
        hits = cause[missed[:, j], j]
        result.append(CAUSES[int(np.bincount(hits, minlength=3).argmax())] if hits.size else None)
    return result


def _jobs(w: Workload, out: Outcomes) -> list[JobForecast]:
    start_q = quantiles(out.start_s)
    done = out.completion_s
    done_q = quantiles(done)
    late = done > w.job_deadline_s[None, :]
    missed = late.mean(axis=0)
    timed_out = out.timed_out.mean(axis=0)
    wait_q = np.quantile(out.wait_s, (0.5, 0.9), axis=0, method="inverted_cdf")
    work = np.where(np.isnan(out.work_s), np.inf, out.work_s)
    runtime_p90 = np.quantile(work, 0.9, axis=0, method="inverted_cdf")
    causes = _causes(w, out, late)
    failures = out.failures.mean(axis=0)
    kills = out.limit_kills.mean(axis=0)
    lost = out.lost_gpu_s.mean(axis=0) / 3600.0
    preemptions = out.preemptions.mean(axis=0)
    preempted = out.preempted_gpu_s.mean(axis=0) / 3600.0
    notes = w.job_notes or ("",) * w.num_jobs
    layouts = w.opt_layout or ("",) * w.num_options
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
                start_s=_times(start_q[:, j], w.start_s),
                completion_s=_times(done_q[:, j], w.start_s),
                deadline_s=_time(deadline, w.start_s),
                miss_probability=float(missed[j]) if math.isfinite(deadline) else None,
                timeout_probability=float(timed_out[j]),
                layout=layouts[k],
                wait_s=(_opt(float(wait_q[0, j])), _opt(float(wait_q[1, j]))),
                miss_cause=causes[j] if math.isfinite(deadline) else None,
                runtime_p90_s=_opt(float(runtime_p90[j])),
                time_limit_s=_opt(float(w.opt_limit_s[k])),
                failures_mean=float(failures[j]),
                limit_kills_mean=float(kills[j]),
                lost_gpu_hours_mean=float(lost[j]),
                checkpoint_interval_s=float(w.opt_checkpoint_s[k]),
                note=notes[j],
                preemptions_mean=float(preemptions[j]),
                preempted_gpu_hours_mean=float(preempted[j]),
            )
        )
    return jobs


def _run_hours(w: Workload, out: Outcomes) -> FloatArray:
    """GPU-hours of every run within the horizon, ``(N,)``."""
    held = np.clip(out.run_end_s, 0, w.horizon_s) - np.clip(out.run_start_s, 0, w.horizon_s)
    return np.maximum(held, 0.0) * w.opt_gpus[out.run_option] / 3600.0


def _per_sample_job(w: Workload, out: Outcomes, values: FloatArray) -> FloatArray:
    """Run values summed per (sample, job), ``(S, J)``."""
    flat = out.run_sample * w.num_jobs + out.run_job
    sums = np.bincount(flat, weights=values, minlength=out.num_samples * w.num_jobs)
    return sums.astype(np.float64).reshape(out.num_samples, w.num_jobs)


def _quota_hours(w: Workload) -> FloatArray:
    """Nominal quota GPU-hours per ClusterQueue over the horizon, ``(Q,)``."""
    if not w.queue_names:
        return np.zeros(0)
    return np.asarray(w.queue_nominal.sum(axis=1) * w.horizon_s / 3600.0, np.float64)


def _teams(w: Workload, out: Outcomes) -> list[TeamUsage]:
    run_hours = _run_hours(w, out)
    hours = _per_sample_job(w, out, run_hours)
    price = w.pool_cost_per_gpu_hour[w.opt_pool[out.run_option]]
    priced = np.where(run_hours > 0, run_hours * price, 0.0)
    cost = _per_sample_job(w, out, priced)
    unpriced = _per_sample_job(w, out, np.where(run_hours > 0, np.isnan(price), False) * 1.0)
    lost = out.lost_gpu_s / 3600.0
    preempted = out.preempted_gpu_s / 3600.0
    quota = _quota_hours(w)
    teams = []
    for t, team in enumerate(w.teams):
        cols = w.job_team == t
        per_sample = hours[:, cols].sum(axis=1)
        queues = sorted({int(q) for q in w.job_queue[cols] if q >= 0})
        teams.append(
            TeamUsage(
                team=team,
                gpu_hours_mean=float(per_sample.mean()),
                gpu_hours=(
                    float(np.quantile(per_sample, 0.1)),
                    float(np.quantile(per_sample, 0.9)),
                ),
                cost_mean=None
                if unpriced[:, cols].any()
                else float(np.nan_to_num(cost[:, cols]).sum(axis=1).mean()),
                lost_gpu_hours_mean=float(lost[:, cols].sum(axis=1).mean()),
                quota_gpu_hours=float(quota[queues].sum()) if queues else None,
                queued_gpu_hours_mean=float(hours[:, cols & (w.job_queue >= 0)].sum(axis=1).mean()),
                preemptions_mean=float(out.preemptions[:, cols].sum(axis=1).mean()),
                preempted_gpu_hours_mean=float(preempted[:, cols].sum(axis=1).mean()),
            )
        )
    return teams


def _queues(w: Workload, out: Outcomes) -> list[QueueUsage]:
    if not w.queue_names:
        return []
    hours = _per_sample_job(w, out, _run_hours(w, out)).mean(axis=0)
    quota = _quota_hours(w)
    cohorts = w.queue_cohort
    return [
        QueueUsage(
            queue=name,
            cohort=_cohort_name(w, int(cohorts[q])),
            nominal_gpu_hours=float(quota[q]),
            used_gpu_hours_mean=float(hours[w.job_queue == q].sum()),
        )
        for q, name in enumerate(w.queue_names)
    ]


def _cohort_name(w: Workload, cohort: int) -> str | None:
    if cohort < 0:
        return None
    return w.cohort_names[cohort] if cohort < len(w.cohort_names) else f"cohort {cohort}"


def _fleet_cost(w: Workload, out: Outcomes, edges: FloatArray) -> float | None:
    """Reserved pools' capacity GPU-hours plus on-demand pools' used GPU-hours, priced."""
    price = w.pool_cost_per_gpu_hour
    if np.isnan(price).any():
        return None
    on_demand = w.pool_on_demand if w.pool_on_demand.size else np.zeros(w.num_pools, np.bool_)
    capacity_h = capacity_integrals(w, edges).sum(axis=1) / 3600.0
    hours = _run_hours(w, out)
    used_h = np.bincount(w.opt_pool[out.run_option], weights=hours, minlength=w.num_pools) / max(
        out.num_samples, 1
    )
    return float(np.where(on_demand, used_h, capacity_h) @ price)


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
                    busy_gpu_hours=_floats(busy_q),
                    utilisation=float(busy_q[1] / cap_h) if cap_h > 0 else 0.0,
                    idle_gpu_hours=max(cap_h - float(busy_q[1]), 0.0),
                    occupied_gpus=_floats(quantiles(wbusy[:, p, b]) / wwidth[b]),
                    demand_gpus=_floats(quantiles(wdemand[:, p, b]) / wwidth[b]),
                )
            )
    held = float(_run_hours(w, out).sum()) / max(out.num_samples, 1)
    return ScenarioResult(
        name=name,
        num_samples=out.num_samples,
        jobs=tuple(_jobs(w, out)),
        pool_weeks=tuple(pool_weeks),
        teams=tuple(_teams(w, out)),
        occupancy=occupancy,
        excluded=w.excluded,
        warnings=w.warnings,
        excluded_deadlines=tuple(
            _time(d, w.start_s) for d in (w.excluded_deadline_s or (math.inf,) * len(w.excluded))
        ),
        queues=tuple(_queues(w, out)),
        fleet_cost_mean=_fleet_cost(w, out, weeks),
        held_gpu_hours_mean=held,
        lost_gpu_hours_mean=float(out.lost_gpu_s.sum(axis=1).mean()) / 3600.0
        if out.num_samples
        else 0.0,
    )


def merge_names(results: Sequence[ScenarioResult]) -> tuple[str, ...]:
    """Job names across scenarios, first-seen order."""
    return tuple(dict.fromkeys(j.name for r in results for j in r.jobs))
