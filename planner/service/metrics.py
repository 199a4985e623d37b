"""Prometheus metrics of the planner, computed from the store at scrape time.

Job series carry the labels ``scheduler``, ``cluster`` and ``job_id`` and exist only for the
active jobs that need them (``planner.service.job_series``: every job that is not pending, and
at most ``metrics.max_pending_jobs`` pending jobs with a prediction), so finished jobs drop out
and cardinality stays bounded; ``planner_jobs`` and
``planner_jobs_gpus`` count every active job. A running job's ``planner_job_eta_seconds`` is
from now to its predicted completion. The completion band is one gauge per bound (p10, p50, p90
completion timestamps), not a ``quantile`` label: that label is reserved for summaries, and the
p50 gauge keeps the name and labels the alert rules and dashboards already use.

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
| ``planner_job_predicted_completion_p10_timestamp_seconds`` | gauge | p10 completion, epoch s |
| ``planner_job_predicted_completion_p90_timestamp_seconds`` | gauge | p90 completion, epoch s |
| ``planner_job_time_limit_timestamp_seconds`` | gauge | start + time limit of a running job |
| ``planner_job_model_error_ratio`` | gauge | model step time / observed step time - 1 |
| ``planner_job_phase_slowdown_ratio`` | gauge | pace since the latest sustained change / before |
| ``planner_job_phase_start_iteration`` | gauge | iteration where that change of pace began |
| ``planner_job_predicted_memory_bytes`` | gauge | predicted peak memory per GPU, bytes |
| ``planner_job_predicted_fits_in_memory`` | gauge | 1 when the prediction fits HBM, else 0 |
| ``planner_job_straggler_slowdown_ratio`` | gauge | what-if step slowdown (1 = no stragglers) |
| ``planner_job_straggler_hours_lost`` | gauge | remaining hours lost to stragglers |
| ``planner_job_straggler_rank_slowdown_ratio`` | gauge | per flagged rank (labels rank, node) |
| ``planner_job_gpu_utilization_ratio`` | gauge | mean DCGM GPU utilisation of the job's GPUs |
| ``planner_job_gpu_tensor_active_ratio`` | gauge | mean DCGM tensor-core activity |
| ``planner_job_gpu_sm_active_ratio`` | gauge | mean DCGM SM activity |
| ``planner_job_gpu_memory_used_bytes`` | gauge | most framebuffer memory used on one GPU |
| ``planner_cluster_gpus{state}`` | gauge | GPUs allocated / idle / unavailable per cluster |
| ``planner_build_info{version}`` | gauge | 1, labelled with the planner's version |
| ``planner_model_error_ratio`` | gauge | median model error per scheduler/cluster |
| ``planner_calibration_samples_total`` | counter | observations taken by the online calibration |
| ``planner_ingest_last_success_timestamp_seconds`` | gauge | last successful poll of each source |
| ``planner_ingest_consecutive_failures`` | gauge | failed polls since the last success |
| ``planner_source_up`` | gauge | 1 when the last poll of the source succeeded |
| ``planner_eta_band_coverage_ratio`` | gauge | finished jobs' p10-p90 ETA bands that held the end |
| ``planner_scheduler_writes_total`` | counter | audited writes to a scheduler (by outcome) |
| ``planner_job_predicted_start_timestamp_seconds`` | gauge | a pending job's p50 predicted start |
| ``planner_jobs{status}`` | gauge | active jobs per scheduler/cluster and status (all of them) |
| ``planner_jobs_gpus{status}`` | gauge | GPUs they hold (running) or request (pending) |
| ``planner_ingest_cycle_seconds`` | gauge | the last good ingest cycle of each source (s) |
| ``planner_ingest_poll_seconds`` | gauge | its poll of the scheduler (s) |
| ``planner_queue_forecast_seconds`` | gauge | the last queue forecast in the worker process (s) |
| ``planner_store_up`` | gauge | 1 when this scrape read the store, 0 while it cannot |

While the store (PostgreSQL, SQLite) cannot be read, a scrape still answers: the series above
keep the values of the last scrape that read it (:class:`LastGood`) and ``planner_store_up`` is 0,
so the planner's own health metrics do not vanish with its database.

The capacity review's metrics and the pending jobs' predicted starts:
``planner.service.capacity_metrics.CapacityCollector``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner import __version__
from planner.errors import StoreError
from planner.service import stored_json
from planner.service.job_fields import label
from planner.service.job_series import MAX_PENDING_JOBS, job_count_metrics, predicted_start
from planner.service.loops.incremental import eta_remaining_now
from planner.service.models import JobRow
from planner.service.processes import IngestFigures
from planner.service.store import Store

_JOB_LABELS = ["scheduler", "cluster", "job_id"]

log = logging.getLogger(__name__)


def _job_labels(row: JobRow) -> list[str]:
    """The values of ``_JOB_LABELS`` for ``row``, each bounded (``job_fields.label``)."""
    return [label(row.scheduler), label(row.cluster), label(row.job_id)]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _straggler_figures(stragglers: Mapping[str, object]) -> tuple[float | None, float | None]:
    """(slowdown, hours lost) from the live report, else from the job's trace analysis."""
    live = stored_json.fields(stragglers.get("report"))
    if live:
        return _num(live.get("slowdown")), _num(live.get("hours_lost"))
    trace = stored_json.fields(stragglers.get("trace"))
    report = stored_json.fields(trace.get("report"))
    impact = stored_json.fields(trace.get("impact"))
    return _num(report.get("slowdown")), _num(impact.get("hours_lost"))


def _state(row: JobRow, key: str) -> float | None:
    return _num((row.state or {}).get(key))


def _eta(row: JobRow, key: str, quantile: str | None = "p50") -> float | None:
    value = (row.eta or {}).get(key)
    if quantile is None:
        return _num(value)
    return _num((value or {}).get(quantile)) if isinstance(value, dict) else None


def _predicted(row: JobRow, key: str) -> float | None:
    return None if row.prediction is None else _num(row.prediction.get(key))


def _deadline(row: JobRow) -> float | None:
    """When the scheduler will end the job: its start plus its time limit (running jobs)."""
    start, limit = _state(row, "start_time_s"), _state(row, "time_limit_s")
    return None if start is None or limit is None or row.status != "running" else start + limit


def _fits(row: JobRow) -> float | None:
    fits = None if row.prediction is None else row.prediction.get("fits_in_memory")
    return None if not isinstance(fits, bool) else float(fits)


def _phase(row: JobRow, key: str) -> float | None:
    """A field of the job's latest sustained change of pace (``eta["phase"]``:
    ``planner.forecast.history.PhaseEvent``), None when it has none."""
    phase = (row.eta or {}).get("phase")
    return _num(phase.get(key)) if isinstance(phase, dict) else None


def _gpu(row: JobRow, key: str) -> float | None:
    return _num((row.gpus or {}).get(key))


def _model_error(row: JobRow) -> float | None:
    """Model prediction over the observed step time, minus 1, once the job has observations."""
    predicted = _predicted(row, "iteration_time_s")
    observed = _eta(row, "observed_step_time_s", None)
    if predicted is None or observed is None or observed <= 0:
        return None
    return predicted / observed - 1.0


_JOB_GAUGES: list[tuple[str, str, Callable[[JobRow], float | None]]] = [
    (
        "planner_job_gpus",
        "GPUs allocated (running) or requested (pending).",
        lambda r: _state(r, "num_gpus"),
    ),
    (
        "planner_job_progress_ratio",
        "Completed over total training iterations (ratio 0..1).",
        lambda r: _eta(r, "progress_ratio", None),
    ),
    (
        "planner_job_iteration",
        "Training iterations completed.",
        lambda r: None if r.iteration is None else float(r.iteration),
    ),
    (
        "planner_job_step_time_seconds",
        "Current estimate (p50) of one iteration's wall time, seconds.",
        lambda r: _eta(r, "step_time_s"),
    ),
    (
        "planner_job_predicted_step_time_seconds",
        "Iteration time predicted by the performance model, seconds.",
        lambda r: _predicted(r, "iteration_time_s"),
    ),
    (
        "planner_job_model_error_ratio",
        "Performance-model step time over the observed step time, minus 1 (signed ratio).",
        _model_error,
    ),
    (
        "planner_job_phase_slowdown_ratio",
        "Pace of the job since its latest sustained change of pace over its pace before it "
        "(ratio; 1.3: 30 % slower, below 1: faster).",
        lambda r: _phase(r, "ratio"),
    ),
    (
        "planner_job_phase_start_iteration",
        "Iteration at which the job's latest sustained change of pace began.",
        lambda r: _phase(r, "start_iteration"),
    ),
    (
        "planner_job_predicted_completion_timestamp_seconds",
        "Predicted (p50) completion time of the job, Unix epoch seconds.",
        lambda r: _eta(r, "completion_time_s"),
    ),
    (
        "planner_job_predicted_completion_p10_timestamp_seconds",
        "Early bound (p10) of the job's predicted completion time, Unix epoch seconds.",
        lambda r: _eta(r, "completion_time_s", "p10"),
    ),
    (
        "planner_job_predicted_completion_p90_timestamp_seconds",
        "Late bound (p90) of the job's predicted completion time, Unix epoch seconds.",
        lambda r: _eta(r, "completion_time_s", "p90"),
    ),
    (
        "planner_job_time_limit_timestamp_seconds",
        "When the scheduler ends the running job (start plus time limit), Unix epoch seconds.",
        _deadline,
    ),
    (
        "planner_job_predicted_memory_bytes",
        "Predicted peak memory on the most loaded GPU of the job, bytes.",
        lambda r: _predicted(r, "memory_per_gpu_bytes"),
    ),
    (
        "planner_job_predicted_fits_in_memory",
        "1 when the predicted peak memory fits the GPU's HBM, 0 when it does not.",
        _fits,
    ),
    (
        "planner_job_straggler_slowdown_ratio",
        "Step time over the straggler-free (what-if) step time (ratio, 1 = no stragglers).",
        lambda r: _straggler_figures(r.stragglers or {})[0],
    ),
    (
        "planner_job_straggler_hours_lost",
        "Hours of the remaining run lost to stragglers at the current pace.",
        lambda r: _straggler_figures(r.stragglers or {})[1],
    ),
    (
        "planner_job_gpu_utilization_ratio",
        "Mean GPU utilisation of the job's GPUs over the DCGM window (DCGM_FI_DEV_GPU_UTIL, "
        "ratio 0..1).",
        lambda r: _gpu(r, "gpu_util_ratio"),
    ),
    (
        "planner_job_gpu_tensor_active_ratio",
        "Mean tensor-core activity of the job's GPUs (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, "
        "ratio 0..1).",
        lambda r: _gpu(r, "tensor_active_ratio"),
    ),
    (
        "planner_job_gpu_sm_active_ratio",
        "Mean SM activity of the job's GPUs (DCGM_FI_PROF_SM_ACTIVE, ratio 0..1).",
        lambda r: _gpu(r, "sm_active_ratio"),
    ),
    (
        "planner_job_gpu_memory_used_bytes",
        "Most GPU memory used on any one of the job's GPUs (DCGM_FI_DEV_FB_USED), bytes.",
        lambda r: _gpu(r, "memory_used_bytes"),
    ),
]


_UNAVAILABLE_NODE_STATES = ("down", "drain", "fail", "not_responding", "unknown", "future")


def _gpu_states(nodes: Iterable[Mapping[str, object]]) -> dict[str, float]:
    """GPUs allocated / idle / unavailable over the stored ``NodeState`` dicts of a source."""
    totals = {"allocated": 0.0, "idle": 0.0, "unavailable": 0.0}
    for node in nodes:
        num = _num(node.get("num_gpus")) or 0.0
        used = min(num, _num(node.get("num_gpus_allocated")) or 0.0)
        state = str(node.get("state", "")).lower()
        if any(word in state for word in _UNAVAILABLE_NODE_STATES):
            totals["unavailable"] += num
        else:
            totals["allocated"] += used
            totals["idle"] += num - used
    return totals


class LastGood:
    """The metric families a collector last read from the store, served again while the store
    fails (``StoreError``): a scrape during an outage keeps the series at their last values
    instead of failing. ``what`` names them in the log (one line when the store goes down and
    one when it is back)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.families: list[Metric] = []
        self.up = True

    def read(self, produce: Callable[[], Iterable[Metric]]) -> list[Metric]:
        """``produce()``'s families (kept), or the kept ones when the store fails."""
        try:
            families = list(produce())
        except StoreError as exc:
            if self.up:
                log.warning(
                    "metrics: the store cannot be read, %s keep their last values: %s",
                    self.what,
                    exc,
                )
            self.up = False
            return self.families
        if not self.up:
            log.info("metrics: the store is read again (%s)", self.what)
        self.up = True
        self.families = families
        return families


class PlannerCollector(Collector):
    """A ``prometheus_client`` collector over the store (register it on any registry);
    ``clock``: epoch seconds (a running job's ETA seconds are from now); ``max_pending_jobs``:
    the most pending jobs with series of their own (``planner.service.job_series``). While the
    store fails it serves the families of its last good read (:class:`LastGood`) and
    ``planner_store_up`` 0."""

    def __init__(
        self,
        store: Store,
        clock: Callable[[], float] = time.time,
        max_pending_jobs: int = MAX_PENDING_JOBS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.max_pending_jobs = max_pending_jobs
        self._last = LastGood("the job, source and calibration metrics")

    def collect(self) -> Iterator[Metric]:
        yield from self._last.read(self._from_store)
        up = GaugeMetricFamily(
            "planner_store_up",
            "1 when this scrape read the planner's store, 0 when it could not (the store's "
            "series then keep the values of the last scrape that read it).",
        )
        up.add_metric([], 1.0 if self._last.up else 0.0)
        yield up

    def _from_store(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "planner_job_info",
            "Active job known to the planner (value 1).",
            labels=[*_JOB_LABELS, "name", "user", "status", "described_by"],
        )
        eta = GaugeMetricFamily(
            "planner_job_eta_seconds",
            "Seconds until the job completes (for a pending job: its predicted runtime), "
            "by quantile.",
            labels=[*_JOB_LABELS, "quantile"],
        )
        families = [
            (GaugeMetricFamily(name, text, labels=_JOB_LABELS), extract)
            for name, text, extract in _JOB_GAUGES
        ]
        start = GaugeMetricFamily(
            "planner_job_predicted_start_timestamp_seconds",
            "Predicted (p50) start of the pending job from the running jobs' predicted "
            "runtimes (queue forecast), Unix epoch seconds.",
            labels=_JOB_LABELS,
        )
        # only the jobs that need series (planner.service.job_series), counted all
        rows = self.store.jobs_for_metrics(max_pending=self.max_pending_jobs)
        now = self.clock()
        for row in rows:
            labels = _job_labels(row)
            info.add_metric(
                [*labels, *map(label, (row.name, row.user, row.status, row.described_by))], 1.0
            )
            remaining: Mapping[str, object] = stored_json.fields((row.eta or {}).get("remaining_s"))
            if row.status != "pending":  # from its completion: the ETA is as of when it moved
                remaining = eta_remaining_now(row.eta, now) or remaining
            for q, key in (("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90")):
                value = _num(remaining.get(key))
                if value is not None:
                    eta.add_metric([*labels, q], value)
            for family, extract in families:
                value = extract(row)
                if value is not None:
                    family.add_metric(labels, value)
            begins = predicted_start(row) if row.status == "pending" else None
            if begins is not None:
                start.add_metric(labels, begins)
        yield info
        yield eta
        yield from (family for family, _ in families)
        yield start
        yield from job_count_metrics(self.store.job_counts())
        yield self._straggler_ranks(rows)
        yield from self._source_metrics()
        yield from self._calibration_metrics()
        yield self._eta_band_coverage()
        build = GaugeMetricFamily(
            "planner_build_info", "The planner's version (value 1).", labels=["version"]
        )
        build.add_metric([__version__], 1.0)
        yield build

    def _calibration_metrics(self) -> Iterable[Metric]:
        """The uncorrected model's error per cluster and the online calibration's sample count."""
        error = GaugeMetricFamily(
            "planner_model_error_ratio",
            "Median over a cluster's jobs of |model step time / observed step time - 1| (ratio).",
            labels=["scheduler", "cluster"],
        )
        samples = CounterMetricFamily(
            "planner_calibration_samples",
            "Job step-time observations taken by the online calibration.",
        )
        row = self.store.calibration("online")
        state = row.state if row is not None else {}
        for entry in stored_json.rows(list(stored_json.fields(state.get("errors")).values())):
            value = _num(entry.get("median_abs_error_ratio"))
            if value is not None:
                error.add_metric([label(entry["scheduler"]), label(entry["cluster"])], value)
        samples.add_metric([], stored_json.number(state.get("num_samples")) or 0.0)
        return (error, samples)

    # ETA
    def _eta_band_coverage(self) -> Metric:
        """Per cluster, how often the published ETA bands of its finished jobs held the real
        end (``planner.service.loops.outcomes``)."""
        family = GaugeMetricFamily(
            "planner_eta_band_coverage_ratio",
            "Share of the published p10-p90 ETA bands of the cluster's finished jobs that held "
            "the real end, each job weighing the same (ratio 0..1; nominal 0.8).",
            labels=["scheduler", "cluster"],
        )
        row = self.store.calibration("eta")
        clusters = stored_json.fields((row.state if row else {}).get("clusters"))
        for key, entry in sorted(clusters.items(), key=lambda item: item[0]):
            value = _num(stored_json.fields(entry).get("coverage_ratio"))
            if value is not None:
                scheduler, _, cluster = key.partition("/")
                family.add_metric([label(scheduler), label(cluster)], value)
        return family

    def _straggler_ranks(self, rows: Iterable[JobRow]) -> Metric:
        """One series per rank the live straggler tracker flags (bounded by the flags)."""
        family = GaugeMetricFamily(
            "planner_job_straggler_rank_slowdown_ratio",
            "Slowdown of a flagged straggler rank against its peers or its own history (ratio).",
            labels=[*_JOB_LABELS, "rank", "node"],
        )
        for row in rows:
            report = stored_json.fields((row.stragglers or {}).get("report"))
            for flag in stored_json.rows(report.get("stragglers")):
                slowdown = _num(flag.get("slowdown"))
                if slowdown is None:
                    continue
                rank = [label(flag.get("rank")), label(flag.get("node") or "")]
                family.add_metric([*_job_labels(row), *rank], slowdown)
        return family

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
        gpus = GaugeMetricFamily(
            "planner_cluster_gpus",
            "GPUs of the cluster's nodes by state: allocated, idle, or unavailable (node down, "
            "drained or not responding), from the last successful poll.",
            labels=[*labels, "state"],
        )
        for row in self.store.sources():
            lv = [label(row.scheduler), label(row.cluster)]
            if row.last_success_s is not None:
                last.add_metric(lv, row.last_success_s)
            failures.add_metric(lv, float(row.consecutive_failures or 0))
            up.add_metric(lv, 1.0 if not row.consecutive_failures else 0.0)
            if row.nodes is not None:
                for state, value in _gpu_states(row.nodes).items():
                    gpus.add_metric([*lv, state], value)
        return (last, failures, up, gpus)


class KubernetesCollector(Collector):
    """Counters of the Kubernetes informers (one series per watched resource).

    ``stats()`` returns ``{resource: InformerStats}`` (``adapters.kubernetes``): lists, watch
    events, bookmarks, 410 re-lists, errors and 429 answers since start, and whether the cache
    is synced.
    """

    def __init__(self, stats: Callable[[], Mapping[str, Any]]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        counters = {
            "lists": ("planner_kubernetes_lists_total", "Full lists of the resource."),
            "events": ("planner_kubernetes_watch_events_total", "Watch events applied."),
            "relists_gone": (
                "planner_kubernetes_relists_gone_total",
                "Re-lists after a watch answered 410 Gone.",
            ),
            "errors": ("planner_kubernetes_errors_total", "API errors while listing/watching."),
            "throttled": (
                "planner_kubernetes_throttled_total",
                "Answers 429 Too Many Requests from the API server.",
            ),
        }
        families = {
            key: CounterMetricFamily(name, text, labels=["resource"])
            for key, (name, text) in counters.items()
        }
        synced = GaugeMetricFamily(
            "planner_kubernetes_cache_synced",
            "1 when the resource's cache has been listed at least once.",
            labels=["resource"],
        )
        for resource, st in self.stats().items():
            for key, family in families.items():
                family.add_metric([resource], float(getattr(st, key, 0)))
            synced.add_metric([resource], 1.0 if getattr(st, "synced", False) else 0.0)
        yield from families.values()
        yield synced


# ---------------------------------------------------------------------------- load


class IngestCollector(Collector):
    """How long the ingest loop takes (``figures()``: this process's loop,
    ``planner.service.processes.loop_figures``, or what the ingest process last reported,
    ``IngestView``; only the replica that ingests has values): per source (scheduler, cluster)
    its last good cycle and its poll, and the last queue forecast made in the worker process
    (``planner.service.loops.forecast_worker``)."""

    def __init__(self, figures: Callable[[], IngestFigures]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        labels = ["scheduler", "cluster"]
        cycle = GaugeMetricFamily(
            "planner_ingest_cycle_seconds",
            "Wall time of the source's last good ingest cycle (its poll and storing what it "
            "reported), seconds.",
            labels=labels,
        )
        poll = GaugeMetricFamily(
            "planner_ingest_poll_seconds",
            "Wall time of the source's last good poll (the scheduler's commands and parsing "
            "their output), seconds.",
            labels=labels,
        )
        forecast = GaugeMetricFamily(
            "planner_queue_forecast_seconds",
            "Wall time of the source's last queue forecast made in the worker process, seconds.",
            labels=labels,
        )
        figures = self.figures()
        for timing in figures.timings:
            cycle.add_metric([label(timing.scheduler), label(timing.cluster)], timing.cycle_s)
            poll.add_metric([label(timing.scheduler), label(timing.cluster)], timing.poll_s)
        for key, took in figures.forecast_s:
            scheduler, _, cluster = key.partition("/")
            forecast.add_metric([label(scheduler), label(cluster)], took)
        yield from (cycle, poll, forecast)
