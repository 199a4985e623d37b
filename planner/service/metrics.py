"""Prometheus metrics of the planner, computed from the store at scrape time.

Job series carry the labels ``scheduler``, ``cluster`` and ``job_id`` and exist only for active
(pending or running) jobs, so finished jobs drop out and cardinality stays bounded by the queue.

| metric | type | meaning |
| --- | --- | --- |
| ``planner_job_info`` | gauge | 1 per active job; labels add name, user, status, described_by |
| ``planner_job_gpus`` | gauge | GPUs allocated (running) or requested (pending) |
| ``planner_job_progress_ratio`` | gauge | completed / total iterations, 0..1 |
| ``planner_job_iteration`` | gauge | iterations completed |
| ``planner_job_step_time_seconds`` | gauge | current estimate (p50) of one iteration's wall time |
| ``planner_job_predicted_step_time_seconds`` | gauge | the performance model's prediction |
| ``planner_job_eta_seconds{quantile}`` | gauge | seconds to completion (pending: runtime) |
| ``planner_job_predicted_completion_timestamp_seconds`` | gauge | p50 completion time, epoch s |
| ``planner_job_straggler_slowdown_ratio`` | gauge | what-if step slowdown (1 = no stragglers) |
| ``planner_job_straggler_hours_lost`` | gauge | remaining hours lost to stragglers |
| ``planner_ingest_last_success_timestamp_seconds`` | gauge | last successful poll of each source |
| ``planner_ingest_consecutive_failures`` | gauge | failed polls since the last success |
| ``planner_source_up`` | gauge | 1 when the last poll of the source succeeded |
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.service.store import Store

_JOB_LABELS = ["scheduler", "cluster", "job_id"]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _straggler_figures(stragglers: dict[str, Any]) -> tuple[float | None, float | None]:
    """(slowdown, hours lost) from the live report, else from the job's trace analysis."""
    live = stragglers.get("report")
    if live:
        return _num(live.get("slowdown")), _num(live.get("hours_lost"))
    trace = stragglers.get("trace") or {}
    report = trace.get("report") or {}
    impact = trace.get("impact") or {}
    return _num(report.get("slowdown")), _num(impact.get("hours_lost"))


class PlannerCollector(Collector):
    """A ``prometheus_client`` collector over the store (register it on any registry)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "planner_job_info",
            "Active job known to the planner (value 1).",
            labels=[*_JOB_LABELS, "name", "user", "status", "described_by"],
        )
        gpus = GaugeMetricFamily(
            "planner_job_gpus",
            "GPUs allocated (running) or requested (pending).",
            labels=_JOB_LABELS,
        )
        progress = GaugeMetricFamily(
            "planner_job_progress_ratio",
            "Completed over total training iterations (ratio 0..1).",
            labels=_JOB_LABELS,
        )
        iteration = GaugeMetricFamily(
            "planner_job_iteration", "Training iterations completed.", labels=_JOB_LABELS
        )
        step = GaugeMetricFamily(
            "planner_job_step_time_seconds",
            "Current estimate (p50) of one iteration's wall time, seconds.",
            labels=_JOB_LABELS,
        )
        model_step = GaugeMetricFamily(
            "planner_job_predicted_step_time_seconds",
            "Iteration time predicted by the performance model, seconds.",
            labels=_JOB_LABELS,
        )
        eta = GaugeMetricFamily(
            "planner_job_eta_seconds",
            "Seconds until the job completes (for a pending job: its predicted runtime), "
            "by quantile.",
            labels=[*_JOB_LABELS, "quantile"],
        )
        completion = GaugeMetricFamily(
            "planner_job_predicted_completion_timestamp_seconds",
            "Predicted (p50) completion time of the job, Unix epoch seconds.",
            labels=_JOB_LABELS,
        )
        straggler_slowdown = GaugeMetricFamily(
            "planner_job_straggler_slowdown_ratio",
            "Step time over the straggler-free (what-if) step time (ratio, 1 = no stragglers).",
            labels=_JOB_LABELS,
        )
        straggler_lost = GaugeMetricFamily(
            "planner_job_straggler_hours_lost",
            "Hours of the remaining run lost to stragglers at the current pace.",
            labels=_JOB_LABELS,
        )
        for row in self.store.list_jobs(active_only=True):
            labels = [row.scheduler, row.cluster, row.job_id]
            info.add_metric([*labels, row.name, row.user, row.status, row.described_by], 1.0)
            num_gpus = _num((row.state or {}).get("num_gpus"))
            if num_gpus is not None:
                gpus.add_metric(labels, num_gpus)
            if row.iteration is not None:
                iteration.add_metric(labels, float(row.iteration))
            if row.prediction is not None:
                predicted = _num(row.prediction.get("iteration_time_s"))
                if predicted is not None:
                    model_step.add_metric(labels, predicted)
            e = row.eta or {}
            ratio = _num(e.get("progress_ratio"))
            if ratio is not None:
                progress.add_metric(labels, ratio)
            step_q = e.get("step_time_s") or {}
            if _num(step_q.get("p50")) is not None:
                step.add_metric(labels, float(step_q["p50"]))
            remaining = e.get("remaining_s") or {}
            for q, key in (("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90")):
                value = _num(remaining.get(key))
                if value is not None:
                    eta.add_metric([*labels, q], value)
            done_at = e.get("completion_time_s") or {}
            if _num(done_at.get("p50")) is not None:
                completion.add_metric(labels, float(done_at["p50"]))
            slowdown, lost = _straggler_figures(row.stragglers or {})
            if slowdown is not None:
                straggler_slowdown.add_metric(labels, slowdown)
            if lost is not None:
                straggler_lost.add_metric(labels, lost)
        yield from (info, gpus, progress, iteration, step, model_step, eta, completion)
        yield from (straggler_slowdown, straggler_lost)
        yield from self._source_metrics()

    def _source_metrics(self) -> Iterable[Metric]:
        labels = ["scheduler", "cluster"]
        last = GaugeMetricFamily(
            "planner_ingest_last_success_timestamp_seconds",
            "Time of the last successful poll of the source, Unix epoch seconds.",
            labels=labels,
        )
        failures = GaugeMetricFamily(
            "planner_ingest_consecutive_failures",
            "Failed polls of the source since its last success.",
            labels=labels,
        )
        up = GaugeMetricFamily(
            "planner_source_up", "1 when the last poll of the source succeeded.", labels=labels
        )
        for row in self.store.sources():
            lv = [row.scheduler, row.cluster]
            if row.last_success_s is not None:
                last.add_metric(lv, row.last_success_s)
            failures.add_metric(lv, float(row.consecutive_failures or 0))
            up.add_metric(lv, 1.0 if not row.consecutive_failures else 0.0)
        return (last, failures, up)
