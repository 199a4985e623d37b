"""Small workloads written by hand (fixed or log-normal runtimes, no performance model)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.capacity.fleet import Preemption, SchedulerKind
from planner.capacity.montecarlo import Draws, Outcomes, simulate_workloads
from planner.capacity.runtime import InterruptionModel, RuntimeBand
from planner.capacity.snapshot import QueuedJob
from planner.capacity.workload import JobKind, Workload
from planner.specs.job import JobState, JobStatus

NO_INTERRUPTIONS = InterruptionModel(rate_per_gpu_hour=0.0)


@dataclass
class J:
    """A job: ``gpus`` on ``pool`` (or several pools), runtime ``run`` seconds (log-sd
    ``sigma``), time limit ``limit``, eligible at ``at``, ``priority``; ``started`` (<= 0)
    makes it a running job whose ``run`` is the remaining time."""

    name: str
    gpus: int
    run: float
    limit: float = math.inf
    at: float = 0.0
    priority: float = 0.0
    pool: int | Sequence[int] = 0
    started: float | None = None
    sigma: float = 0.0
    deadline: float = math.inf
    queue: int = -1
    runs: Sequence[float] = ()
    requeue: bool = False
    checkpoint: float = 3600.0


def workload(
    capacity: Sequence[int],
    jobs: Sequence[J],
    *,
    changes: Sequence[tuple[float, int, int]] = (),
    scheduler: SchedulerKind = SchedulerKind.SLURM,
    gpus: Sequence[str] | None = None,
    nominal: Sequence[Sequence[float]] = (),
    borrowing: Sequence[Sequence[float]] = (),
    cohorts: Sequence[int] = (),
    strict: Sequence[bool] = (),
    preemption: Sequence[Preemption] = (),
    interruptions: InterruptionModel = NO_INTERRUPTIONS,
    horizon_s: float = 100 * 86400.0,
) -> Workload:
    """A ``Workload`` of pools with ``capacity`` GPUs and ``jobs`` in scheduling order of
    priority (desc), eligibility, then list order."""
    opts: list[tuple[int, int, int, float, float, float]] = []
    for j, job in enumerate(jobs):
        pools = [job.pool] if isinstance(job.pool, int) else list(job.pool)
        runs = list(job.runs) or [job.run] * len(pools)
        opts += [
            (j, p, job.gpus, job.limit, math.log(r), job.sigma)
            for p, r in zip(pools, runs, strict=True)
        ]
    order = sorted(range(len(jobs)), key=lambda j: (-jobs[j].priority, jobs[j].at, j))
    rank = np.empty(len(jobs), np.int64)
    rank[order] = np.arange(len(jobs))
    o = np.array(opts, dtype=np.float64).reshape(-1, 6)
    n_pools = len(capacity)
    queues = len(nominal)
    return Workload(
        start_s=0.0,
        horizon_s=horizon_s,
        scheduler=scheduler,
        interruptions=interruptions,
        pool_names=tuple(f"pool{p}" for p in range(n_pools)),
        pool_gpu=tuple(gpus) if gpus else ("h100-sxm",) * n_pools,
        pool_capacity=np.array(capacity, np.int64),
        pool_cost_per_gpu_hour=np.ones(n_pools),
        pool_gpus_per_node=np.full(n_pools, 8, np.int64),
        change_time_s=np.array([c[0] for c in changes], np.float64),
        change_pool=np.array([c[1] for c in changes], np.int64),
        change_delta=np.array([c[2] for c in changes], np.int64),
        job_names=tuple(j.name for j in jobs),
        job_kind=tuple(JobKind.RUNNING if j.started is not None else JobKind.PLANNED for j in jobs),
        job_team=np.zeros(len(jobs), np.int64),
        teams=("team",),
        job_eligible_s=np.array([j.at for j in jobs], np.float64),
        job_deadline_s=np.array([j.deadline for j in jobs], np.float64),
        job_rank=rank,
        job_priority=np.array([j.priority for j in jobs], np.float64),
        job_queue=np.array([j.queue for j in jobs], np.int64),
        job_start_s=np.array(
            [math.nan if j.started is None else j.started for j in jobs], np.float64
        ),
        opt_job=o[:, 0].astype(np.int64),
        opt_pool=o[:, 1].astype(np.int64),
        opt_gpus=o[:, 2].astype(np.int64),
        opt_limit_s=o[:, 3].copy(),
        opt_log_work_mu=o[:, 4].copy(),
        opt_log_work_sigma=o[:, 5].copy(),
        opt_checkpoint_s=np.array([jobs[int(o[0])].checkpoint for o in opts], np.float64),
        job_requeue=np.array([j.requeue for j in jobs], np.bool_),
        queue_names=tuple(f"q{i}" for i in range(queues)),
        queue_cohort=np.array(list(cohorts) or [-1] * queues, np.int64),
        queue_nominal=np.array(nominal, np.float64).reshape(queues, n_pools),
        queue_borrowing_limit=(
            np.array(borrowing, np.float64).reshape(queues, n_pools)
            if borrowing
            else np.full((queues, n_pools), np.inf)
        ),
        queue_strict=np.array(list(strict) or [False] * queues, np.bool_),
        queue_preemption=tuple(preemption),
    )


def fixed_draws(w: Workload, failures: Sequence[Sequence[float]] = ()) -> Draws:
    """One sample where every option needs exactly its median work and job ``j`` is
    interrupted at the GPU-seconds ``failures[j]`` of its own clock (none by default)."""
    work = np.round(np.exp(w.opt_log_work_mu), 6)[None, :]
    per_job = [list(failures[j]) if j < len(failures) else [] for j in range(w.num_jobs)]
    counts = np.array([[len(f) for f in per_job]], np.int64).reshape(1, w.num_jobs)
    times = np.array([t for f in per_job for t in sorted(f)], np.float64)
    return Draws(work, counts, times)


def run_fixed(w: Workload, failures: Sequence[Sequence[float]] = ()) -> Outcomes:
    """One sample where every option runs exactly its median (``fixed_draws``)."""
    return simulate_workloads([w], [fixed_draws(w, failures)])[0]


def by_name(w: Workload, values: np.ndarray) -> dict[str, float]:
    """``{job name: value}`` of a ``(J,)`` row."""
    return {name: float(v) for name, v in zip(w.job_names, values, strict=True)}


def queued(
    job_id: str,
    partition: str,
    runtime: RuntimeBand,
    *,
    num_gpus: int = 8,
    deadline_s: float | None = None,
    time_limit_s: float | None = None,
    queue: str = "",
    status: JobStatus = JobStatus.PENDING,
    num_nodes: int = 0,
) -> QueuedJob:
    """A pending job of today's queue (Kueue when ``queue`` names its LocalQueue), or with
    ``status`` running one started at 0."""
    return QueuedJob(
        state=JobState(
            scheduler="kueue" if queue else "slurm",
            cluster="c",
            job_id=job_id,
            partition=partition,
            status=status,
            num_gpus=num_gpus,
            num_nodes=num_nodes,
            start_time_s=0.0 if status is JobStatus.RUNNING else None,
            time_limit_s=time_limit_s,
            queue_name=queue,
        ),
        runtime=runtime,
        deadline_s=deadline_s,
    )
