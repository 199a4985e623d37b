"""Fleet + plan + today's queue -> the simulator's ``Workload`` (arrays).

Planned jobs get their work time from the performance model (``planner.capacity.scaling``) on
every pool they may use; ``num_gpus: recommend`` picks the size there (``recommend_size``).
Today's jobs bring their own runtime band (the service's ETA). Jobs that fit no pool (too big,
out of memory on every GPU type, unknown partition) are left out with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.capacity.fleet import Fleet, Pool, SchedulerKind
from planner.capacity.plan import PlannedJob
from planner.capacity.runtime import Z90, RuntimeBand
from planner.capacity.scaling import ScalingPoint, recommend_size, work_s
from planner.capacity.snapshot import QueuedJob, QueueSnapshot
from planner.capacity.workload import JobKind, Workload
from planner.catalog import gpu_key_for_gres_type
from planner.errors import SpecError
from planner.search.budget import checkpoint
from planner.specs.scenario import Scenario

__all__ = ["PredictionCache", "build_workload"]


@dataclass
class PredictionCache:
    """Predicted work times by (scenario, GPU type, count), shared by the what-if scenarios of
    one review so each layout is predicted once."""

    points: dict[tuple[Scenario, str, int], ScalingPoint] = field(default_factory=dict)
    sizes: dict[tuple[Scenario, str, int, float | None, float], ScalingPoint] = field(
        default_factory=dict
    )

    def work(self, scenario: Scenario, gpu: str, num_gpus: int) -> ScalingPoint:
        """``scaling.work_s``, cached."""
        key = (scenario, gpu, num_gpus)
        if key not in self.points:
            self.points[key] = work_s(scenario, gpu, num_gpus)
        return self.points[key]

    def size(
        self, scenario: Scenario, gpu: str, max_gpus: int, budget_s: float | None, spread: float
    ) -> ScalingPoint:
        """``scaling.recommend_size``, cached."""
        key = (scenario, gpu, max_gpus, budget_s, spread)
        if key not in self.sizes:
            self.sizes[key] = recommend_size(scenario, gpu, max_gpus, budget_s, spread)
        return self.sizes[key]


@dataclass
class _Rows:
    names: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    teams: list[str] = field(default_factory=list)
    eligible: list[float] = field(default_factory=list)
    deadline: list[float] = field(default_factory=list)
    priority: list[float] = field(default_factory=list)
    queue: list[int] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    opts: list[tuple[int, int, int, float, float, float, float]] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add_job(
        self,
        *,
        name: str,
        kind: str,
        team: str,
        eligible: float,
        deadline: float,
        priority: float,
        queue: int,
        start: float,
        options: Sequence[tuple[int, int, float, float, float, float]],
    ) -> None:
        j = len(self.names)
        self.names.append(name)
        self.kinds.append(kind)
        self.teams.append(team)
        self.eligible.append(eligible)
        self.deadline.append(deadline)
        self.priority.append(priority)
        self.queue.append(queue)
        self.start.append(start)
        self.opts.extend((j, *o) for o in options)


def _pools_for_state(fleet: Fleet, job: QueuedJob) -> list[int]:
    names = fleet.pool_names
    if job.pool is not None:
        if job.pool not in names:
            return []
        return [names.index(job.pool)]
    partitions = [p.strip() for p in job.state.partition.split(",") if p.strip()]
    found = [
        i for i, pool in enumerate(fleet.pools) if any(p in pool.partitions for p in partitions)
    ]
    if found:
        return found[:1] if job.running else found
    key = gpu_key_for_gres_type(job.state.gpu_type or "")
    found = [i for i, pool in enumerate(fleet.pools) if pool.gpu == key]
    return found[:1] if job.running else found


def _queue_index(fleet: Fleet, name: str) -> int:
    for index, queue in enumerate(fleet.queues):
        if name == queue.name or name in queue.local_queues:
            return index
    return -1


def _limit(own: float | None, pool: Pool) -> float:
    limit = own if own is not None else pool.default_time_limit_s
    return math.inf if limit is None else limit


def _add_queued(
    rows: _Rows, fleet: Fleet, job: QueuedJob, start_s: float, taken_at_s: float
) -> None:
    state = job.state
    name = job.display_name
    pools = _pools_for_state(fleet, job)
    if not pools:
        rows.excluded.append(
            (
                name,
                f"no pool for partition {state.partition!r} / GPU type {state.gpu_type!r}; "
                "add the partition to a pool's partitions",
            )
        )
        return
    band = job.runtime
    if job.running and start_s > taken_at_s:  # the snapshot is older than the review start
        shift = start_s - taken_at_s
        band = RuntimeBand(
            p10_s=max(band.p10_s - shift, 1.0),
            p50_s=max(band.p50_s - shift, 1.0),
            p90_s=max(band.p90_s - shift, 1.0),
        )
    started = (
        (state.start_time_s - start_s)
        if (job.running and state.start_time_s is not None)
        else (0.0 if job.running else math.nan)
    )
    queue = (
        _queue_index(fleet, state.queue_name or state.partition)
        if fleet.scheduler is SchedulerKind.KUEUE
        else -1
    )
    if fleet.scheduler is SchedulerKind.KUEUE and queue < 0:
        rows.warnings.append(
            f"job {name}: queue {state.queue_name!r} is no ClusterQueue of the fleet; "
            "only GPUs limit it"
        )
    options = [
        (
            p,
            state.num_gpus,
            _limit(state.time_limit_s, fleet.pools[p]),
            band.mu,
            band.sigma,
            job.checkpoint_interval_s,
        )
        for p in pools
    ]
    rows.add_job(
        name=name,
        kind=JobKind.RUNNING if job.running else JobKind.PENDING,
        team=job.team or "default",
        eligible=0.0,
        deadline=math.inf if job.deadline_s is None else job.deadline_s - start_s,
        priority=job.priority,
        queue=queue,
        start=min(started, 0.0) if job.running else math.nan,
        options=options,
    )


def _add_planned(
    rows: _Rows, fleet: Fleet, job: PlannedJob, start_s: float, cache: PredictionCache
) -> None:
    eligible = max(0.0, (job.earliest_start_s or start_s) - start_s)
    deadline = math.inf if job.deadline_s is None else job.deadline_s - start_s
    pools = (
        [fleet.pool_names.index(job.pool)]
        if job.pool
        else [i for i, p in enumerate(fleet.pools) if job.gpu is None or p.gpu == job.gpu]
    )
    options = []
    reasons = []
    spread = math.exp(Z90 * job.runtime_log_sd)
    for p in pools:
        pool = fleet.pools[p]
        if job.num_gpus is None:
            window = min(deadline - eligible, _limit(job.time_limit_s, pool))
            budget = window if math.isfinite(window) else None
            point = cache.size(job.scenario, pool.gpu, pool.max_gpus, budget, spread)
        elif job.num_gpus > pool.max_gpus:
            reasons.append(
                f"{pool.name}: needs {job.num_gpus} GPUs, the pool has at most {pool.max_gpus}"
            )
            continue
        else:
            point = cache.work(job.scenario, pool.gpu, job.num_gpus)
        if point.work_s is None:
            reasons.append(f"{pool.name}: {point.reason}")
            continue
        options.append(
            (
                p,
                point.num_gpus,
                _limit(job.time_limit_s, pool),
                math.log(point.work_s),
                job.runtime_log_sd,
                job.checkpoint_interval_s,
            )
        )
    if not options:
        rows.excluded.append((job.name, "; ".join(reasons) or "no pool of the fleet can run it"))
        return
    queue = -1
    if fleet.scheduler is SchedulerKind.KUEUE:
        queue = _queue_index(fleet, job.queue)
        if queue < 0:
            raise SpecError(
                f"jobs[{job.name}].queue",
                f"{job.queue!r} is no ClusterQueue (or LocalQueue) of the fleet; use one of "
                + ", ".join(q.name for q in fleet.queues),
            )
    rows.add_job(
        name=job.name,
        kind=JobKind.PLANNED,
        team=job.team,
        eligible=eligible,
        deadline=deadline,
        priority=job.priority,
        queue=queue,
        start=math.nan,
        options=options,
    )


def build_workload(
    fleet: Fleet,
    planned: Sequence[PlannedJob] = (),
    snapshot: QueueSnapshot | None = None,
    *,
    start_s: float,
    cache: PredictionCache | None = None,
) -> Workload:
    """The ``Workload`` of a review starting at ``start_s`` (epoch seconds) over
    ``fleet.horizon_s``: today's running and pending jobs (``snapshot``), then the planned
    jobs. Raises ``SpecError`` for a Kueue plan job whose queue is unknown; jobs that cannot run
    anywhere are listed in ``Workload.excluded`` rather than raising."""
    cache = cache if cache is not None else PredictionCache()
    rows = _Rows()
    if snapshot is not None:
        for queued in snapshot.jobs:
            _add_queued(rows, fleet, queued, start_s, snapshot.taken_at_s)
    for job in planned:
        checkpoint()  # each planned job runs the performance model: stop between them
        _add_planned(rows, fleet, job, start_s, cache)
    opts = np.array(rows.opts, dtype=np.float64).reshape(-1, 7)
    teams = tuple(dict.fromkeys(rows.teams))
    kind_order = {JobKind.RUNNING: 0, JobKind.PENDING: 1, JobKind.PLANNED: 2}
    order = sorted(
        range(len(rows.names)),
        key=lambda j: (-rows.priority[j], rows.eligible[j], kind_order[rows.kinds[j]], j),
    )
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    changes = sorted(
        (c.at_s - start_s, p, c.delta_gpus)
        for p, pool in enumerate(fleet.pools)
        for c in pool.changes
        if c.at_s > start_s
    )
    num_pools = len(fleet.pools)
    nominal = np.zeros((len(fleet.queues), num_pools))
    borrow = np.full((len(fleet.queues), num_pools), np.inf)
    cohorts = list(dict.fromkeys(q.cohort for q in fleet.queues if q.cohort))
    for qi, queue in enumerate(fleet.queues):
        for pool_name, gpus in queue.nominal_gpus:
            nominal[qi, fleet.pool_names.index(pool_name)] = gpus
        for pool_name, gpus in queue.borrowing_limit_gpus:
            borrow[qi, fleet.pool_names.index(pool_name)] = gpus
    no_limit = sum(1 for o in rows.opts if not math.isfinite(o[4]))
    if no_limit and fleet.scheduler is SchedulerKind.SLURM:
        rows.warnings.append(
            f"{no_limit} job option(s) have no time limit: backfill cannot reserve around them "
            "(set time_limit or a pool default_time_limit)"
        )
    return Workload(
        start_s=start_s,
        horizon_s=fleet.horizon_s,
        scheduler=fleet.scheduler,
        interruptions=fleet.interruptions,
        pool_names=fleet.pool_names,
        pool_gpu=tuple(p.gpu for p in fleet.pools),
        pool_capacity=np.array([p.capacity_at(start_s) for p in fleet.pools], np.int64),
        pool_cost_per_gpu_hour=np.array(
            [np.nan if p.cost_per_gpu_hour is None else p.cost_per_gpu_hour for p in fleet.pools]
        ),
        pool_gpus_per_node=np.array([p.gpus_per_node for p in fleet.pools], np.int64),
        change_time_s=np.array([c[0] for c in changes], np.float64),
        change_pool=np.array([c[1] for c in changes], np.int64),
        change_delta=np.array([c[2] for c in changes], np.int64),
        job_names=tuple(rows.names),
        job_kind=tuple(rows.kinds),
        job_team=np.array([teams.index(t) for t in rows.teams], np.int64),
        teams=teams,
        job_eligible_s=np.array(rows.eligible, np.float64),
        job_deadline_s=np.array(rows.deadline, np.float64),
        job_rank=rank,
        job_priority=np.array(rows.priority, np.float64),
        job_queue=np.array(rows.queue, np.int64),
        job_start_s=np.array(rows.start, np.float64),
        opt_job=opts[:, 0].astype(np.int64),
        opt_pool=opts[:, 1].astype(np.int64),
        opt_gpus=opts[:, 2].astype(np.int64),
        opt_limit_s=opts[:, 3].copy(),
        opt_log_work_mu=opts[:, 4].copy(),
        opt_log_work_sigma=opts[:, 5].copy(),
        opt_checkpoint_s=opts[:, 6].copy(),
        queue_names=tuple(q.name for q in fleet.queues),
        queue_cohort=np.array(
            [cohorts.index(q.cohort) if q.cohort else -1 for q in fleet.queues], np.int64
        ),
        queue_nominal=nominal,
        queue_borrowing_limit=borrow,
        queue_strict=np.array([q.strict_fifo for q in fleet.queues], np.bool_),
        excluded=tuple(rows.excluded),
        warnings=tuple(rows.warnings),
    )
