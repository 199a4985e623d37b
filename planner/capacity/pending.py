"""Predicted start and completion of every pending job, from the running jobs' predicted
runtimes (what ``/v1/jobs`` shows beside the scheduler's own estimate).

Slurm's ``StartTime`` of a pending job assumes every running job runs to its time limit (and
is a year away when a running job has none); the planner's estimate lets the running jobs end
at their predicted runtimes and replays the scheduler (``planner.capacity.simulate``) on
today's queue alone. ``fleet_from_nodes`` builds the pools from the scheduler's nodes when no
fleet file is configured. Pools know their nodes' GPUs only (whole nodes of the catalog's
size, ``planner.capacity.nodes``), not which nodes today's jobs hold nor their CPUs and
memory: when the scheduler reports what each job asks of and holds on each node (Slurm), the
service places jobs on the real nodes instead (``planner.capacity.placement``), as a job that
needs whole nodes waits for a CPU-only job on one of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.capacity.build import build_workload, pools_for_state
from planner.capacity.fleet import DEFAULT_HORIZON_S, Fleet, Pool, SchedulerKind
from planner.capacity.montecarlo import (
    LocalExecutor,
    draw_durations,
    draw_normals,
    simulate_workloads,
)
from planner.capacity.runtime import InterruptionModel, share_draws
from planner.capacity.snapshot import QueuedJob, QueueSnapshot
from planner.capacity.stats import quantiles
from planner.catalog import gpu_key_for_gres_type
from planner.errors import SpecError
from planner.specs.job import NodeState

__all__ = [
    "Band",
    "PendingForecast",
    "PublishedForecast",
    "fleet_from_nodes",
    "forecast_pending",
    "simulate_submission",
]

_UNAVAILABLE = ("down", "drain", "fail", "maint", "unknown", "not_responding", "power")


#: p10, p50, p90 of a time, epoch seconds (None: not within the simulated future).
Band = tuple[float | None, float | None, float | None]


@dataclass(frozen=True, slots=True)
class PendingForecast:
    """A pending job's predicted start and completion, epoch seconds (p10, p50, p90; None:
    not within the simulated future), with the scheduler's own estimate beside them."""

    job_id: str
    start_s: Band
    completion_s: Band
    scheduler_start_s: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedForecast:
    """What the planner writes back onto one active job's scheduler objects (the Kubernetes
    Workload and job annotations and condition, ``adapters.kubernetes.publish``).

    ``job_id`` the planner's id; ``pending`` whether it waits; ``start_s`` a pending job's
    predicted start (admission) band from the queue forecast and ``made_at_s`` when that
    forecast was made; ``completion_s`` the predicted completion band (epoch seconds);
    ``progress_ratio`` 0..1 of its iterations (a running job); ``expected_runtime_s`` the p90
    of its whole run's wall time, seconds (None: not predicted).
    """

    job_id: str
    pending: bool
    start_s: Band | None = None
    made_at_s: float | None = None
    completion_s: Band | None = None
    progress_ratio: float | None = None
    expected_runtime_s: float | None = None


def fleet_from_nodes(
    nodes: Sequence[NodeState], scheduler: SchedulerKind = SchedulerKind.SLURM
) -> Fleet:
    """Pools from the scheduler's nodes: one per (first partition, GPU type) with the GPUs of
    the nodes that are not down, drained or failed. Nodes with no GPUs or an unknown GPU type
    are left out. Interruptions are off (the forecast covers hours, not months)."""
    counts: dict[tuple[str, str], int] = {}
    for node in nodes:
        key = gpu_key_for_gres_type(node.gpu_type or "")
        state = node.state.lower()
        if node.num_gpus <= 0 or key is None or any(word in state for word in _UNAVAILABLE):
            continue
        partition = node.partitions[0] if node.partitions else key
        counts[(partition, key)] = counts.get((partition, key), 0) + node.num_gpus
    pools = tuple(
        Pool(name=partition, gpu=gpu, num_gpus=count, partitions=(partition,))
        for (partition, gpu), count in counts.items()
    )
    return Fleet(
        name="live",
        scheduler=scheduler,
        pools=pools,
        interruptions=InterruptionModel(rate_per_gpu_hour=0.0),
        horizon_s=DEFAULT_HORIZON_S,
    )


def forecast_pending(
    fleet: Fleet,
    snapshot: QueueSnapshot,
    *,
    rng: np.random.Generator,
    samples: int = 100,
    backfill_interval_s: float = 0.0,
) -> dict[str, PendingForecast]:
    """Predicted start and completion (p10/p50/p90) of every pending job of ``snapshot``,
    keyed by job id, from ``snapshot.taken_at_s``: the running jobs end at draws from their
    runtime bands (jobs of one ``draw_group`` at one quantile of theirs), the pending ones
    start as the fleet's scheduler would start them. ``backfill_interval_s``: Slurm's
    ``bf_interval`` (jobs behind a pool's head start only in a backfill cycle, at a phase drawn
    per sample; 0: at every event). Pending jobs that fit no pool are left out."""
    w = build_workload(fleet, (), snapshot, start_s=snapshot.taken_at_s)
    if backfill_interval_s > 0:
        w = dataclasses.replace(w, backfill_interval_s=backfill_interval_s)
    if w.num_jobs == 0:
        return {}
    by_name = {job.display_name: job for job in snapshot.jobs}
    normals = draw_normals(w.job_names, samples, rng)
    groups = [by_name[name].draw_group for name in w.job_names]
    if any(groups):
        normals = share_draws(normals, groups)
    durations = draw_durations(w, normals, rng)
    out = simulate_workloads([w], [durations], LocalExecutor())[0]
    start_q, done_q = quantiles(out.start_s), quantiles(out.completion_s)
    result: dict[str, PendingForecast] = {}
    for j, name in enumerate(w.job_names):
        job = by_name[name]
        if job.running:
            continue

        def epoch(values: np.ndarray) -> Band:
            p10, p50, p90 = (None if not np.isfinite(v) else float(v) + w.start_s for v in values)
            return p10, p50, p90

        result[job.state.job_id] = PendingForecast(
            job_id=job.state.job_id,
            start_s=epoch(start_q[:, j]),
            completion_s=epoch(done_q[:, j]),
            scheduler_start_s=job.state.expected_start_time_s,
        )
    return result


def simulate_submission(
    fleet: Fleet,
    snapshot: QueueSnapshot,
    job: QueuedJob,
    *,
    rng: np.random.Generator,
    samples: int = 100,
) -> PendingForecast:
    """When ``job`` would start and finish (p10/p50/p90, epoch seconds) if it were submitted at
    ``snapshot.taken_at_s``: it joins the end of today's queue (after every pending job of
    ``snapshot``) and the queue is replayed as :func:`forecast_pending` does. ``job`` must be
    pending and its id unused in ``snapshot``. Raises ``SpecError`` naming ``job.<field>`` when
    no pool of ``fleet`` takes it (GPU type, partition or more GPUs than the pool has)."""
    if job.running:
        raise SpecError("job.status", "a simulated submission is pending, not running")
    if any(q.state.job_id == job.state.job_id for q in snapshot.jobs):
        raise SpecError("job.job_id", f"{job.state.job_id!r} is already in the queue")
    pools = [fleet.pools[i] for i in pools_for_state(fleet, job)]  # the simulator's own rule
    if not pools:
        raise SpecError(
            "job.gpu_type" if job.state.gpu_type else "job.partition",
            f"no pool of the fleet takes GPU type {job.state.gpu_type or 'any'!r} in partition "
            f"{job.state.partition or 'any'!r}; pools: "
            + ", ".join(f"{p.name} ({p.num_gpus} x {p.gpu})" for p in fleet.pools),
        )
    largest = max(p.num_gpus for p in pools)
    if job.state.num_gpus > largest:
        raise SpecError(
            "job.num_gpus",
            f"{job.state.num_gpus} GPUs never fit: the largest pool that takes the job has "
            f"{largest}; ask for at most {largest}",
        )
    queued = QueueSnapshot(taken_at_s=snapshot.taken_at_s, jobs=(*snapshot.jobs, job))
    found = forecast_pending(fleet, queued, rng=rng, samples=samples).get(job.state.job_id)
    if found is None:  # the pool rules above and build_workload disagree: say so plainly
        raise SpecError("job", "the simulated job fits no pool of the fleet")
    return found
