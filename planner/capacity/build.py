"""Fleet + plan + today's queue -> the simulator's ``Workload`` (arrays).

Planned jobs get their work time from the performance model (``planner.capacity.scaling``) on
every pool they may use; ``num_gpus: recommend`` picks the size there (``recommend_size``).
Today's jobs bring their own runtime band (the service's ETA). Jobs that fit no pool (too big,
out of memory on every GPU type, a layout that does not tile the GPU count, unknown partition)
are left out with the reason, which every report shows. A job whose plan says ``layout: best``
is not left out for a layout that does not tile: the layout search's fastest layout at that GPU
count is used, else the job's own layout at the nearest GPU count that tiles, and the job's
note says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.capacity.fleet import Fleet, Placement, Pool, SchedulerKind
from planner.capacity.plan import PlannedJob
from planner.capacity.runtime import DEFAULT_CHECKPOINT_INTERVAL_S, Z90, RuntimeBand
from planner.capacity.scaling import (
    ScalingPoint,
    best_layout,
    candidate_counts,
    recommend_size,
    work_s,
)
from planner.capacity.snapshot import QueuedJob, QueueSnapshot
from planner.capacity.workload import JobKind, Workload
from planner.catalog import gpu_key_for_gres_type
from planner.errors import InfeasibleError, SpecError
from planner.search.budget import checkpoint
from planner.specs.scenario import Scenario

__all__ = ["PredictionCache", "build_workload", "pools_for_state"]


@dataclass
class PredictionCache:
    """Predicted work times by (scenario, GPU type, count), shared by the what-if scenarios of
    one review so each layout is predicted once."""

    points: dict[tuple[Scenario, str, int], ScalingPoint] = field(default_factory=dict)
    sizes: dict[tuple[Scenario, str, int, float | None, float], ScalingPoint] = field(
        default_factory=dict
    )
    layouts: dict[tuple[Scenario, str, int], Scenario | None] = field(default_factory=dict)

    def work(self, scenario: Scenario, gpu: str, num_gpus: int) -> ScalingPoint:
        """``scaling.work_s``, cached."""
        key = (scenario, gpu, num_gpus)
        if key not in self.points:
            self.points[key] = work_s(scenario, gpu, num_gpus)
        return self.points[key]

    def best(self, scenario: Scenario, gpu: str, num_gpus: int) -> Scenario | None:
        """``scaling.best_layout``, cached; None when no layout fits."""
        key = (scenario, gpu, num_gpus)
        if key not in self.layouts:
            try:
                self.layouts[key] = best_layout(scenario, gpu, num_gpus)
            except (InfeasibleError, SpecError):
                self.layouts[key] = None
        return self.layouts[key]

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
    # (job, pool, GPUs, limit, log median, sd above, checkpoint, sd below)
    opts: list[tuple[int, int, int, float, float, float, float, float]] = field(
        default_factory=list
    )
    layouts: list[str] = field(default_factory=list)
    num_nodes: list[int] = field(default_factory=list)
    requeue: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    excluded: list[tuple[str, str]] = field(default_factory=list)
    excluded_deadline: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def exclude(self, name: str, reason: str, deadline: float) -> None:
        self.excluded.append((name, reason))
        self.excluded_deadline.append(deadline)

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
        options: Sequence[tuple[int, int, float, float, float, float, float]],
        layouts: Sequence[str],
        requeue: bool,
        note: str,
        num_nodes: int = 0,
    ) -> None:
        j = len(self.names)
        self.layouts.extend(layouts)
        self.num_nodes.extend([num_nodes] * len(options))
        self.requeue.append(requeue)
        self.notes.append(note)
        self.names.append(name)
        self.kinds.append(kind)
        self.teams.append(team)
        self.eligible.append(eligible)
        self.deadline.append(deadline)
        self.priority.append(priority)
        self.queue.append(queue)
        self.start.append(start)
        self.opts.extend((j, *o) for o in options)


def pools_for_state(fleet: Fleet, job: QueuedJob) -> list[int]:
    """Indices of the fleet's pools that take today's job ``job``: its ``pool``; else the pools
    whose partitions include one of its partitions (comma-separated, as Slurm lists them);
    else the pools of its GPU type. A running job gets the first only (it holds one pool's
    GPUs); empty when none takes it."""
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


def _on_kueue(fleet: Fleet, pools: Sequence[int]) -> bool:
    """Whether any of the pools is started by Kueue (the job then needs a ClusterQueue)."""
    return any(fleet.scheduler_of(fleet.pools[p]) is SchedulerKind.KUEUE for p in pools)


def _limit(own: float | None, pool: Pool) -> float:
    limit = own if own is not None else pool.default_time_limit_s
    return math.inf if limit is None else limit


def _add_queued(
    rows: _Rows, fleet: Fleet, job: QueuedJob, start_s: float, taken_at_s: float
) -> None:
    state = job.state
    name = job.display_name
    pools = pools_for_state(fleet, job)
    deadline = math.inf if job.deadline_s is None else job.deadline_s - start_s
    if not pools and state.num_gpus == 0:
        return  # a job without GPUs off the fleet's partitions takes no part in the review
    if not pools:
        rows.exclude(
            name,
            f"no pool for partition {state.partition!r} / GPU type {state.gpu_type!r}; "
            "add the partition to a pool's partitions",
            deadline,
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
    kueue = _on_kueue(fleet, pools)
    queue = _queue_index(fleet, state.queue_name or state.partition) if kueue else -1
    if kueue and queue < 0:
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
            band.sigma_above,
            job.checkpoint_interval_s,
            band.sigma_below,
        )
        for p in pools
    ]
    rows.add_job(
        name=name,
        kind=JobKind.RUNNING if job.running else JobKind.PENDING,
        team=job.team or "default",
        eligible=0.0,
        deadline=deadline,
        priority=job.priority,
        queue=queue,
        start=min(started, 0.0) if job.running else math.nan,
        options=options,
        layouts=[f"{state.num_gpus} GPUs (as submitted)"] * len(options),
        # a scheduler's job ends at its time limit (Slurm's TIMEOUT, a Job's
        # activeDeadlineSeconds): neither requeues it; a failure does (JobRequeue=1)
        requeue=False,
        note="",
        num_nodes=state.num_nodes,
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
    if not job.queue:  # no ClusterQueue: the pools Kueue starts take it only if no other does
        others = [p for p in pools if not _on_kueue(fleet, [p])]
        pools = others or pools
    options = []
    layouts: list[str] = []
    notes: list[str] = []
    reasons = []
    spread = math.exp(Z90 * job.runtime_log_sd)
    for p in pools:
        pool = fleet.pools[p]
        scenario = job.scenario
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
            if point.work_s is None and job.layout_best:
                scenario, point, note = _nearest_valid(job, pool, point, cache)
                notes.append(note)
        if point.work_s is None:
            reasons.append(f"{pool.name}: {point.reason}")
            continue
        checkpoint_s = job.checkpoint_interval_s
        steps = _steps(scenario)
        if job.checkpoint_interval_iters is not None and steps:
            checkpoint_s = job.checkpoint_interval_iters * point.work_s / steps
            notes.append(
                f"{pool.name}: checkpoints every {job.checkpoint_interval_iters} iterations "
                f"(--save-interval), {checkpoint_s / 60:.0f} min at the predicted step time"
            )
        options.append(
            (
                p,
                point.num_gpus,
                _limit(job.time_limit_s, pool),
                math.log(point.work_s),
                job.runtime_log_sd,
                checkpoint_s,
                job.runtime_log_sd,
            )
        )
        layouts.append(layout_words(scenario, point.num_gpus))
    if not options:
        reason = "; ".join(reasons) or "no pool of the fleet can run it"
        if not job.layout_best and any("not a multiple" in r or "divid" in r for r in reasons):
            reason += " (or let the plan pick a layout: layout: best)"
        rows.exclude(job.name, reason, deadline)
        return
    queue = -1
    if _on_kueue(fleet, [o[0] for o in options]):
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
        layouts=layouts,
        requeue=job.requeue,
        note="; ".join(n for n in notes if n),
    )


def _steps(scenario: Scenario) -> float | None:
    """Optimizer steps of the training run: ``train_iters``, else the tokens over the tokens
    of one global batch (as ``planner.perf`` counts them)."""
    training = scenario.training
    if training.total_tokens is not None:
        per_step = scenario.parallelism.global_batch_size * scenario.model.seq_length
        return training.total_tokens / per_step if per_step else None
    return float(training.train_iters) if training.train_iters else None


def layout_words(scenario: Scenario, num_gpus: int) -> str:
    """The layout of ``scenario`` on ``num_gpus`` GPUs in words: ``tp 8 · pp 4 · dp 16``
    (context and expert parallel when above 1; data parallel absorbs the GPU count)."""
    par = scenario.parallelism
    parts = [f"tp {par.tensor_parallel}", f"pp {par.pipeline_parallel}"]
    if par.context_parallel > 1:
        parts.append(f"cp {par.context_parallel}")
    if par.expert_parallel > 1:
        parts.append(f"ep {par.expert_parallel}")
    parts.append(f"dp {num_gpus // max(par.model_parallel_size, 1)}")
    return " · ".join(parts)


def _nearest_valid(
    job: PlannedJob, pool: Pool, failed: ScalingPoint, cache: PredictionCache
) -> tuple[Scenario, ScalingPoint, str]:
    """For a ``layout: best`` job whose layout does not run on ``job.num_gpus`` GPUs of the
    pool: the layout search's fastest layout at that count, else the job's layout at the
    nearest count that tiles (fewer GPUs first on a tie). Returns (scenario, point, note);
    the point keeps ``failed``'s reason when neither works."""
    assert job.num_gpus is not None
    best = cache.best(job.scenario, pool.gpu, job.num_gpus)
    if best is not None:
        point = cache.work(best, pool.gpu, job.num_gpus)
        if point.work_s is not None:
            words = layout_words(best, job.num_gpus)
            return (
                best,
                point,
                (
                    f"{pool.name}: layout: best chose {words} on {job.num_gpus} GPUs "
                    f"(its own layout: {failed.reason})"
                ),
            )
    wanted = job.num_gpus
    counts = sorted(
        candidate_counts(job.scenario, pool.max_gpus), key=lambda n: (abs(n - wanted), n)
    )
    for count in counts[:8]:
        point = cache.work(job.scenario, pool.gpu, count)
        if point.work_s is not None:
            words = layout_words(job.scenario, count)
            return (
                job.scenario,
                point,
                (
                    f"{pool.name}: layout: best ran {words} on {count} GPUs, the nearest count "
                    f"to {job.num_gpus} its layout tiles ({failed.reason})"
                ),
            )
    return job.scenario, failed, ""


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
    defaults = [j.name for j in planned if not j.checkpoint_interval_given]
    if defaults:
        rows.warnings.append(
            f"{len(defaults)} planned job(s) give no checkpoint interval "
            "(checkpoint_interval_minutes, or --save-interval in megatron_args): "
            f"{DEFAULT_CHECKPOINT_INTERVAL_S / 60:.0f} min assumed "
            "(planner.capacity.runtime.DEFAULT_CHECKPOINT_INTERVAL_S)"
        )
    opts = np.array(rows.opts, dtype=np.float64).reshape(-1, 8)
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
    kueue_pools = [fleet.scheduler_of(p) is SchedulerKind.KUEUE for p in fleet.pools]
    no_limit = sum(1 for o in rows.opts if not math.isfinite(o[3]) and not kueue_pools[int(o[1])])
    if no_limit:
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
        opt_log_work_sigma_below=opts[:, 7].copy(),
        pool_nodes=np.array(
            [fleet.placement is Placement.NODES and not kueue for kueue in kueue_pools], np.bool_
        ),
        opt_num_nodes=np.array(rows.num_nodes, np.int64),
        queue_names=tuple(q.name for q in fleet.queues),
        queue_cohort=np.array(
            [cohorts.index(q.cohort) if q.cohort else -1 for q in fleet.queues], np.int64
        ),
        queue_nominal=nominal,
        queue_borrowing_limit=borrow,
        queue_strict=np.array([q.strict_fifo for q in fleet.queues], np.bool_),
        queue_preemption=tuple(q.preemption for q in fleet.queues),
        excluded=tuple(rows.excluded),
        excluded_deadline_s=tuple(rows.excluded_deadline),
        warnings=tuple(rows.warnings),
        job_requeue=np.array(rows.requeue, np.bool_),
        pool_on_demand=np.array([p.on_demand for p in fleet.pools], np.bool_),
        pool_interruption_rate=np.array(
            [
                fleet.interruptions.rate_per_gpu_hour
                if p.interruptions_per_gpu_hour is None
                else p.interruptions_per_gpu_hour
                for p in fleet.pools
            ],
            np.float64,
        ),
        cohort_names=tuple(str(c) for c in cohorts),
        pool_kueue=np.array(kueue_pools, np.bool_),
        pool_cluster=tuple(p.cluster for p in fleet.pools),
        opt_layout=tuple(rows.layouts),
        job_notes=tuple(rows.notes),
    )
