"""Predicted start and completion of every pending job, from the running jobs' predicted
runtimes (what ``/v1/jobs`` shows beside the scheduler's own estimate).

Slurm's ``StartTime`` of a pending job assumes every running job runs to its time limit (and
is a year away when a running job has none); the planner's estimate lets the running jobs end
at their predicted runtimes and replays the scheduler (``planner.capacity.simulate``) on
today's queue alone. ``fleet_from_nodes`` builds the pools from the scheduler's nodes when no
fleet file is configured. Pools count GPUs only: when the scheduler reports what each job asks
of and holds on each node (Slurm), the service places jobs on the nodes instead
(``planner.capacity.placement``), as a job that needs whole nodes waits for a CPU-only job on
one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.capacity.build import build_workload
from planner.capacity.fleet import DEFAULT_HORIZON_S, Fleet, Pool, SchedulerKind
from planner.capacity.montecarlo import (
    LocalExecutor,
    draw_durations,
    draw_normals,
    simulate_workloads,
)
from planner.capacity.runtime import InterruptionModel
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.stats import quantiles
from planner.catalog import gpu_key_for_gres_type
from planner.specs.job import NodeState

__all__ = ["PendingForecast", "fleet_from_nodes", "forecast_pending"]

_UNAVAILABLE = ("down", "drain", "fail", "maint", "unknown", "not_responding", "power")


@dataclass(frozen=True, slots=True)
class PendingForecast:
    """A pending job's predicted start and completion, epoch seconds (p10, p50, p90; None:
    not within the simulated future), with the scheduler's own estimate beside them."""

    job_id: str
    start_s: tuple[float | None, float | None, float | None]
    completion_s: tuple[float | None, float | None, float | None]
    scheduler_start_s: float | None


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
) -> dict[str, PendingForecast]:
    """Predicted start and completion (p10/p50/p90) of every pending job of ``snapshot``,
    keyed by job id, from ``snapshot.taken_at_s``: the running jobs end at draws from their
    runtime bands, the pending ones start as the fleet's scheduler would start them. Pending
    jobs that fit no pool are left out."""
    w = build_workload(fleet, (), snapshot, start_s=snapshot.taken_at_s)
    if w.num_jobs == 0:
        return {}
    durations = draw_durations(w, draw_normals(w.job_names, samples, rng), rng)
    out = simulate_workloads([w], [durations], LocalExecutor())[0]
    start_q, done_q = quantiles(out.start_s), quantiles(out.completion_s)
    by_name = {job.display_name: job for job in snapshot.jobs}
    result: dict[str, PendingForecast] = {}
    for j, name in enumerate(w.job_names):
        job = by_name[name]
        if job.running:
            continue

        def epoch(values: np.ndarray) -> tuple[float | None, float | None, float | None]:
            return tuple(None if not np.isfinite(v) else float(v) + w.start_s for v in values)  # type: ignore[return-value]

        result[job.state.job_id] = PendingForecast(
            job_id=job.state.job_id,
            start_s=epoch(start_q[:, j]),
            completion_s=epoch(done_q[:, j]),
            scheduler_start_s=job.state.expected_start_time_s,
        )
    return result
