"""One ingest cycle: poll every source, store jobs, tail their logs, describe, predict, ETA.

The cycle runs in an APScheduler thread (``planner.service.app``). Each source is polled on its
own: a source that fails (timeout, daemon down, garbage output) is recorded as failing and the
jobs it reported before are left as they were, so the API keeps serving the last good state and
says how old it is; the next successful poll brings everything up to date.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from planner.calibration import OnlineCalibration, key_from_scenario
from planner.errors import PlannerError, SourceError, StoreError
from planner.forecast.eta import (
    EtaEstimate,
    StepObservation,
    estimate_pending,
    estimate_running,
)
from planner.ports import JobTelemetry, ProgressReader, SchedulerSource, TraceSource
from planner.service.describe import describe_job, description_key, trace_paths_from_comment
from planner.service.models import (
    CalibrationRow,
    JobRow,
    PredictionRow,
    SourceRow,
    StepSampleRow,
)
from planner.service.store import Store
from planner.specs.job import (
    ClusterSnapshot,
    JobState,
    JobStatus,
    ProgressRecord,
    RankStepRecord,
    TailCursor,
)
from planner.stragglers import analyse, assess_impact
from planner.stragglers.live import LiveStragglers

log = logging.getLogger(__name__)

#: Step samples used for one ETA (the newest ones; the estimator weights recent ones more).
ETA_SAMPLE_WINDOW = 500
#: Name of the online calibration's row in the ``calibrations`` table.
ONLINE_CALIBRATION = "online"
#: ETA history rows kept per job (older rows are pruned).
ETA_HISTORY_ROWS = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    """The knobs of :class:`Ingestor` (taken from ``planner.service.settings.Settings``)."""

    model_prior_log_sd: float = 0.3
    max_scenario_file_bytes: int = 1024 * 1024
    ended_job_retention_s: float = 7 * 24 * 3600.0
    trace_analysis_interval_s: float = 300.0


@dataclass(slots=True)
class CycleReport:
    """What one cycle did: per source ``ok`` or the error line."""

    started_s: float
    results: dict[str, str] = field(default_factory=dict)

    @property
    def all_ok(self) -> bool:
        """True when every source answered (or there was none)."""
        return all(v == "ok" for v in self.results.values())


def source_name(source: SchedulerSource) -> str:
    """Key of a source in the ``sources`` table (one per scheduler instance)."""
    return getattr(source, "name", source.scheduler)


def eta_to_dict(eta: EtaEstimate) -> dict[str, Any]:
    """JSON-safe dict of an estimate (non-finite floats become None)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return {k: clean(v) for k, v in dataclasses.asdict(eta).items()}


class Ingestor:
    """Runs ingest cycles against ``sources`` and writes results into ``store``.

    ``reader`` tails job logs; ``clock`` returns epoch seconds. ``run_cycle`` is safe to call
    from any thread; concurrent calls are serialised.
    """

    def __init__(
        self,
        store: Store,
        sources: Sequence[SchedulerSource],
        reader: ProgressReader,
        *,
        settings: IngestSettings | None = None,
        clock: Callable[[], float],
        traces: TraceSource | None = None,
        telemetry: JobTelemetry | None = None,
    ) -> None:
        self.store = store
        self.sources = list(sources)
        self.reader = reader
        self.traces = traces
        self.telemetry = telemetry
        self.online: OnlineCalibration | None = None
        self.settings = settings or IngestSettings()
        self.clock = clock
        self._lock = threading.Lock()
        self.cycles_ok = 0

    # ------------------------------------------------------------------ cycle

    def run_cycle(self) -> CycleReport:
        """Poll each source once; never raises for a source or store failure (logs it)."""
        with self._lock:
            report = CycleReport(started_s=self.clock())
            for source in self.sources:
                name = source_name(source)
                try:
                    self._ingest_source(source)
                except SourceError as exc:
                    report.results[name] = str(exc)
                    log.warning(
                        "source %s failed, serving last good state: %s",
                        name,
                        " | ".join(line for line in str(exc).splitlines() if line.strip()),
                    )
                    self._record_failure(source, str(exc))
                except StoreError as exc:
                    report.results[name] = str(exc)
                    log.error("store failed while ingesting %s: %s", name, exc)
                else:
                    report.results[name] = "ok"
            if report.all_ok:
                self.cycles_ok += 1
            return report

    def _record_failure(self, source: SchedulerSource, error: str) -> None:
        try:
            with self.store.session() as s:
                row = self._source_row(s, source)
                row.last_attempt_s = self.clock()
                row.last_error = error
                row.consecutive_failures = (row.consecutive_failures or 0) + 1
        except StoreError as exc:
            log.error("cannot record the failure of %s: %s", source_name(source), exc)

    @staticmethod
    def _source_row(s: Session, source: SchedulerSource) -> SourceRow:
        name = source_name(source)
        row = s.get(SourceRow, name)
        if row is None:
            row = SourceRow(
                name=name, scheduler=source.scheduler, cluster="", consecutive_failures=0
            )
            s.add(row)
        return row

    def _online(self, s: Session) -> OnlineCalibration:
        """The online calibration, loaded from the store on first use."""
        if self.online is None:
            row = s.get(CalibrationRow, ONLINE_CALIBRATION)
            try:
                self.online = (
                    OnlineCalibration.from_json(row.state["online"]) if row else OnlineCalibration()
                )
            except (PlannerError, KeyError, TypeError) as exc:
                log.error("stored online calibration unusable, starting afresh: %s", exc)
                self.online = OnlineCalibration()
        return self.online

    def _recalibrate(self, s: Session, scheduler: str, cluster: str, now: float) -> None:
        """Feed the cluster's jobs' observed step times to the online calibration; store it with
        the model's error per cluster (for ``planner_model_error_ratio``)."""
        online = self._online(s)
        before = online.num_samples_
        jobs = s.scalars(
            select(JobRow).where(JobRow.scheduler == scheduler, JobRow.cluster == cluster)
        )
        for job in jobs:
            predicted = (job.prediction or {}).get("iteration_time_s")
            observed = (job.eta or {}).get("observed_step_time_s")
            ckey = key_from_scenario(scheduler, cluster, job.scenario) if job.scenario else None
            if ckey is None or not job.iteration or not isinstance(predicted, int | float):
                continue
            if not isinstance(observed, int | float) or observed <= 0 or predicted <= 0:
                continue
            try:
                online.observe(
                    ckey,
                    job.job_id,
                    predicted_step_s=float(predicted),
                    observed_step_s=float(observed),
                    num_iterations=job.iteration,
                    time_s=job.last_progress_s or now,
                )
            except PlannerError as exc:
                log.warning("job %s: not used for calibration: %s", job.job_id, exc)
        stored = s.get(CalibrationRow, ONLINE_CALIBRATION)
        if online.num_samples_ == before and stored is not None:
            return
        errors = {}
        for sched, clus in {(k.scheduler, k.cluster) for k, _ in online.jobs_}:
            stats = online.error_stats(sched, clus)
            errors[f"{sched}/{clus}"] = {
                "scheduler": sched,
                "cluster": clus,
                "median_abs_error_ratio": stats.median_abs_error_ratio,
                "num_jobs": stats.num_jobs,
            }
        state = {
            "online": online.to_json(),
            "errors": errors,
            "num_samples": online.num_samples_,
        }
        if stored is None:
            s.add(CalibrationRow(name=ONLINE_CALIBRATION, state=state, updated_s=now))
        else:
            stored.state = state
            stored.updated_s = now

    def _ingest_source(self, source: SchedulerSource) -> None:
        snapshot = source.snapshot()
        now = self.clock()
        with self.store.session() as s:
            row = self._source_row(s, source)
            row.cluster = snapshot.cluster
            row.last_attempt_s = now
            row.last_success_s = now
            row.last_error = None
            row.consecutive_failures = 0
            row.nodes = [dataclasses.asdict(n) for n in snapshot.nodes]
            row.warnings = list(snapshot.warnings)
            for warning in snapshot.warnings:
                log.info("source %s: %s", source_name(source), warning)
            self._merge_jobs(s, source, snapshot, now)
            s.flush()
            self._recalibrate(s, snapshot.scheduler, snapshot.cluster, now)

    # ------------------------------------------------------------------ jobs

    def _merge_jobs(
        self, s: Session, source: SchedulerSource, snapshot: ClusterSnapshot, now: float
    ) -> None:
        existing = {
            r.job_id: r
            for r in s.scalars(
                select(JobRow).where(
                    JobRow.scheduler == snapshot.scheduler, JobRow.cluster == snapshot.cluster
                )
            )
        }
        seen: set[str] = set()
        for job in snapshot.jobs:
            seen.add(job.job_id)
            row = existing.get(job.job_id)
            if row is None:
                # An ended job we never saw running: keep it only within the retention.
                if (
                    not job.status.is_active
                    and job.end_time_s is not None
                    and now - job.end_time_s > self.settings.ended_job_retention_s
                ):
                    continue
                row = JobRow(
                    scheduler=job.scheduler,
                    cluster=job.cluster,
                    job_id=job.job_id,
                    first_seen_s=now,
                    described_by="none",
                    description_detail="",
                    description_key="",
                )
                s.add(row)
                log.info(
                    "new job %s/%s/%s (%s, %d GPUs, %s)",
                    job.scheduler,
                    job.cluster,
                    job.job_id,
                    job.name,
                    job.num_gpus,
                    job.status,
                )
            elif not row.active and job.status.is_active and row.ended_s is not None:
                # A requeued job comes back under its old id.
                row.ended_s = None
            self._update_job(s, source, row, job, now)

        for job_id, row in existing.items():
            if row.active and job_id not in seen:
                # Gone from the scheduler's active list and not in its accounting window.
                row.active = False
                row.status = JobStatus.UNKNOWN.value
                row.ended_s = now
                log.info(
                    "job %s/%s/%s no longer reported: ended", row.scheduler, row.cluster, job_id
                )

        cutoff = now - self.settings.ended_job_retention_s
        s.execute(
            delete(JobRow).where(
                JobRow.active.is_(False), JobRow.ended_s.is_not(None), JobRow.ended_s < cutoff
            )
        )

    def _update_job(
        self, s: Session, source: SchedulerSource, row: JobRow, job: JobState, now: float
    ) -> None:
        was_active = row.active if row.id is not None else True
        row.name = job.name
        row.user = job.user
        row.status = job.status.value
        row.active = job.status.is_active
        row.state = _job_state_dict(job)
        row.last_seen_s = now
        if not row.active and row.ended_s is None:
            row.ended_s = job.end_time_s or now

        key = description_key(job)
        if key != row.description_key:
            self._describe(s, source, row, job, key=key, now=now)

        rank_records: list[RankStepRecord] = []
        if (row.active or was_active) and job.status != JobStatus.PENDING:
            if job.stdout_path:
                rank_records += self._tail_log(s, row, job.stdout_path, now)
            rank_records += self._read_telemetry(s, row, job, now)
            self._reported_progress(s, row, job, now)

        if row.active:
            self._update_eta(s, row, job, now)
        elif was_active and row.eta is not None:
            # Final state: nothing remains.
            row.eta = {**row.eta, "finished": True}
        if rank_records or (row.active and (row.stragglers or {}).get("state")):
            self._update_stragglers(row, rank_records)
        self._analyse_trace(row, job, now)

    def _describe(
        self,
        s: Session,
        source: SchedulerSource,
        row: JobRow,
        job: JobState,
        *,
        key: str,
        now: float,
    ) -> None:
        def read_text(path: str) -> str:
            return source.read_text_file(path, self.settings.max_scenario_file_bytes)

        description = describe_job(job, read_text)
        row.description_key = key
        row.described_by = description.described_by
        row.description_detail = description.error or description.detail
        row.scenario = description.document
        row.prediction = description.prediction
        ckey = (
            key_from_scenario(job.scheduler, job.cluster, description.document)
            if description.document is not None and description.prediction is not None
            else None
        )
        if ckey is not None and description.prediction is not None:
            # New jobs start from what this cluster's finished and running jobs taught us.
            try:
                row.prediction = self._online(s).apply(description.prediction, ckey)
            except PlannerError as exc:
                log.warning("job %s: prediction not calibrated: %s", job.job_id, exc)
        if description.train_iters is not None:
            row.train_iters = description.train_iters
        if description.error:
            log.warning("job %s: cannot use its description: %s", job.job_id, description.error)
        if description.prediction is not None:
            s.flush()
            s.add(
                PredictionRow(
                    job_pk=row.id, made_at_s=now, kind="model", payload=description.prediction
                )
            )

    def _tail_log(self, s: Session, row: JobRow, path: str, now: float) -> list[RankStepRecord]:
        """Read the job's new log lines: store progress samples, return per-rank timings."""
        cursor_doc = row.log_cursor or {}
        cursor = (
            TailCursor(**cursor_doc) if cursor_doc.get("path") == path else TailCursor(path=path)
        )
        try:
            records, new_cursor = self.reader.read(cursor)
        except (OSError, PlannerError) as exc:  # the reader should not raise; be safe anyway
            log.warning("job %s: cannot read log %s: %s", row.job_id, path, exc)
            return []
        row.log_cursor = dataclasses.asdict(new_cursor)
        return self._store_records(s, row, records, now)

    def _read_telemetry(
        self, s: Session, row: JobRow, job: JobState, now: float
    ) -> list[RankStepRecord]:
        """Progress and per-rank timings the job exports to the metrics system since the last
        read; a failing metrics system is logged and retried next cycle."""
        if self.telemetry is None:
            return []
        since = row.telemetry_since_s or job.start_time_s or now - 3600.0
        try:
            records = self.telemetry.read(job, since_s=since, now_s=now)
        except PlannerError as exc:
            log.warning("job %s: metrics not read: %s", row.job_id, exc)
            return []
        row.telemetry_since_s = now
        return self._store_records(s, row, records, now)

    def _store_records(
        self,
        s: Session,
        row: JobRow,
        records: Sequence[ProgressRecord | RankStepRecord],
        now: float,
    ) -> list[RankStepRecord]:
        """Store progress records as step samples (one per iteration); return rank timings."""
        rank_records = [r for r in records if isinstance(r, RankStepRecord)]
        progress = [r for r in records if isinstance(r, ProgressRecord)]
        if not progress:
            return rank_records
        s.flush()
        known = set(
            s.scalars(select(StepSampleRow.iteration).where(StepSampleRow.job_pk == row.id))
        )
        for record in progress:
            if record.train_iters:
                row.train_iters = record.train_iters
            time_s = record.timestamp_s if record.timestamp_s is not None else now
            step_s, span = record.step_time_s, max(1, record.num_iterations)
            if (
                step_s is None
                and row.iteration is not None
                and row.last_progress_s is not None
                and record.iteration > row.iteration
                and time_s > row.last_progress_s
            ):
                # A report without a step time (torchtitan lines, a TrainJob's progress): the
                # mean step time since the previous report.
                span = record.iteration - row.iteration
                step_s = (time_s - row.last_progress_s) / span
            if row.iteration is None or record.iteration >= row.iteration:
                row.iteration = record.iteration
                row.last_progress_s = time_s
            if record.iteration in known:
                continue
            known.add(record.iteration)
            s.add(
                StepSampleRow(
                    job_pk=row.id,
                    iteration=record.iteration,
                    step_time_s=step_s,
                    num_iterations=span,
                    time_s=time_s,
                    loss=record.loss,
                )
            )
        return rank_records

    def _reported_progress(self, s: Session, row: JobRow, job: JobState, now: float) -> None:
        """The job's own progress report (e.g. a Kubeflow TrainJob's ``trainerStatus``) as a
        progress record, when the job has an iteration count and no other progress source."""
        if job.progress_ratio is None or not row.train_iters:
            return
        iteration = round(min(1.0, max(0.0, job.progress_ratio)) * row.train_iters)
        if row.iteration is not None and iteration <= row.iteration:
            return
        record = ProgressRecord(
            iteration=iteration,
            train_iters=row.train_iters,
            timestamp_s=job.progress_updated_s or now,
            framework="scheduler",
        )
        self._store_records(s, row, [record], now)

    def _update_stragglers(self, row: JobRow, records: list[RankStepRecord]) -> None:
        """Feed per-rank timings to the job's live straggler tracker; refresh its report."""
        stored = (row.stragglers or {}).get("state")
        try:
            tracker = LiveStragglers.from_json(stored) if stored else None
            if records and (tracker is None or tracker.world_size != records[-1].world_size):
                tracker = LiveStragglers.new(records[-1].world_size)  # new or resized job
            if tracker is None:
                return
            tracker.add(records)
        except PlannerError as exc:
            log.warning("job %s: per-rank timings not usable: %s", row.job_id, exc)
            return
        report = tracker.report(remaining_s=_remaining_s(row))
        row.stragglers = {
            **(row.stragglers or {}),
            "state": tracker.to_json(),
            "report": None if report is None else report.to_dict(),
        }

    def _analyse_trace(self, row: JobRow, job: JobState, now: float) -> None:
        """What-if analysis of the trace the job names (``planner:trace=``), when it changed
        and at most once per ``trace_analysis_interval_s``."""
        paths = trace_paths_from_comment(job)
        if paths is None or self.traces is None:
            return
        stored = (row.stragglers or {}).get("trace") or {}
        fingerprint = self.traces.fingerprint(*paths)
        if fingerprint is None or fingerprint == stored.get("fingerprint"):
            return
        last = stored.get("analysed_at_s")
        if last is not None and now - last < self.settings.trace_analysis_interval_s:
            return
        doc: dict[str, Any] = {
            "fingerprint": fingerprint,
            "analysed_at_s": now,
            "trace_path": paths[0],
            "meta_path": paths[1],
        }
        try:
            report = analyse(self.traces.read(*paths))
        except PlannerError as exc:
            log.warning("job %s: trace %s not analysed: %s", row.job_id, paths[0], exc)
            doc["error"] = str(exc)
        else:
            doc["report"] = report.to_dict()
            remaining = _remaining_s(row)
            if remaining is not None:
                doc["impact"] = dataclasses.asdict(assess_impact(report, remaining))
        row.stragglers = {**(row.stragglers or {}), "trace": doc}

    def _update_eta(self, s: Session, row: JobRow, job: JobState, now: float) -> None:
        prior = None
        sd = self.settings.model_prior_log_sd
        if row.prediction is not None:
            value = row.prediction.get("calibrated_iteration_time_s")
            calibration = row.prediction.get("calibration") or {}
            if isinstance(value, int | float) and calibration.get("level") not in (None, "none"):
                sd = float(calibration.get("log_sd") or sd)
            else:
                value = row.prediction.get("iteration_time_s")
            prior = float(value) if isinstance(value, int | float) and value > 0 else None
        eta: EtaEstimate | None = None
        try:
            if job.status == JobStatus.PENDING:
                if prior is not None and row.train_iters:
                    eta = estimate_pending(
                        prior_step_time_s=prior,
                        prior_log_sd=sd,
                        train_iters=row.train_iters,
                        expected_start_time_s=job.expected_start_time_s,
                    )
            elif row.train_iters:
                s.flush()
                samples = list(
                    s.scalars(
                        select(StepSampleRow)
                        .where(
                            StepSampleRow.job_pk == row.id,
                            StepSampleRow.step_time_s.is_not(None),
                        )
                        .order_by(StepSampleRow.iteration.desc())
                        .limit(ETA_SAMPLE_WINDOW)
                    )
                )
                observations = [
                    StepObservation(
                        iteration=r.iteration,
                        step_time_s=float(r.step_time_s or 0.0),
                        num_iterations=r.num_iterations,
                        time_s=r.time_s,
                    )
                    for r in reversed(samples)
                ]
                if prior is not None or observations:
                    last_progress = row.last_progress_s or job.start_time_s or now
                    eta = estimate_running(
                        prior_step_time_s=prior,
                        prior_log_sd=sd,
                        observations=observations,
                        iteration=row.iteration or 0,
                        train_iters=row.train_iters,
                        last_progress_time_s=last_progress,
                        now_s=now,
                    )
        except PlannerError as exc:
            log.warning("job %s: no ETA: %s", row.job_id, exc)
            eta = None
        if eta is None:
            row.eta = None
            return
        payload = eta_to_dict(eta)
        payload["made_at_s"] = now
        row.eta = payload
        s.flush()
        s.add(PredictionRow(job_pk=row.id, made_at_s=now, kind="eta", payload=payload))
        self._prune_history(s, row.id)

    @staticmethod
    def _prune_history(s: Session, job_pk: int) -> None:
        cutoff = s.scalar(
            select(PredictionRow.id)
            .where(PredictionRow.job_pk == job_pk, PredictionRow.kind == "eta")
            .order_by(PredictionRow.id.desc())
            .offset(ETA_HISTORY_ROWS)
            .limit(1)
        )
        if cutoff is not None:
            s.execute(
                delete(PredictionRow).where(
                    PredictionRow.job_pk == job_pk,
                    PredictionRow.kind == "eta",
                    PredictionRow.id <= cutoff,
                )
            )


def _remaining_s(row: JobRow) -> float | None:
    """The job's p50 remaining time from its ETA, None when inactive or unknown."""
    if not row.active:
        return None
    value = ((row.eta or {}).get("remaining_s") or {}).get("p50")
    return float(value) if isinstance(value, int | float) else None


def _job_state_dict(job: JobState) -> dict[str, Any]:
    state = dataclasses.asdict(job)
    state["status"] = job.status.value
    state["node_list"] = list(job.node_list)
    state.pop("batch_script", None)  # can be large; the description keeps what matters
    return state
