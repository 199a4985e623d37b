"""Which jobs get per-job series on ``/metrics``, and the per-cluster job counts
(a bounded ``/metrics`` at 10,000 jobs).

Per-job series (``planner_job_*``, ``planner.service.metrics``) are exported for

- every active job that is not pending (running, suspended, completing): bounded by the
  cluster's GPUs, since each holds at least one;
- pending jobs **with a prediction** (a scenario or Megatron-LM arguments described them), at
  most ``max_pending`` of them (setting ``metrics.max_pending_jobs``, default 500): those the
  queue forecast starts soonest (p50), then in the listing's order. They are what the queue
  dashboard lists and the ``PlannerQueuedJobPredictedOOM`` alert watches.

Other pending jobs have no series of their own: every active job is counted in
``planner_jobs{scheduler, cluster, status}`` and its GPUs in ``planner_jobs_gpus{scheduler,
cluster, status}`` (what the dashboards count and sum).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from planner.service.job_fields import label
from planner.service.models import JobRow, predicted_start, soonest_first

__all__ = ["MAX_PENDING_JOBS", "exported_jobs", "job_count_metrics", "predicted_start"]

#: Default of ``metrics.max_pending_jobs``.
MAX_PENDING_JOBS = 500


def exported_jobs(rows: Sequence[JobRow], max_pending: int) -> list[JobRow]:
    """The rows of ``rows`` (active jobs, pending ones with a prediction) that get per-job
    series: every one that is not pending, and the ``max_pending`` pending ones the queue
    forecast starts soonest (``soonest_first``); in the order of ``rows``."""
    pending = [r for r in rows if r.status == "pending"]
    if len(pending) <= max_pending:
        return list(rows)
    kept = {id(r) for r in soonest_first(pending)[:max_pending]}
    return [r for r in rows if r.status != "pending" or id(r) in kept]


def job_count_metrics(counts: Iterable[tuple[str, str, str, int, int]]) -> list[Metric]:
    """``planner_jobs`` and ``planner_jobs_gpus`` from ``(scheduler, cluster, status, jobs,
    GPUs)`` of the active jobs (``Store.job_counts``)."""
    labels = ["scheduler", "cluster", "status"]
    jobs = GaugeMetricFamily(
        "planner_jobs",
        "Active jobs known to the planner, by status (every job, also those without "
        "per-job series).",
        labels=labels,
    )
    gpus = GaugeMetricFamily(
        "planner_jobs_gpus",
        "GPUs held (running) or requested (pending) by the active jobs, by status.",
        labels=labels,
    )
    for scheduler, cluster, status, num_jobs, num_gpus in counts:
        values = [label(scheduler), label(cluster), label(status)]
        jobs.add_metric(values, float(num_jobs))
        gpus.add_metric(values, float(num_gpus))
    return [jobs, gpus]
