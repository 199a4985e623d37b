"""A job's progress: its log, the metrics it exports, and its own report, as step samples.

Every progress record becomes one step sample per iteration; its step time comes from the one
rule of ``planner.forecast.observations`` (printed step times, or printed timestamps of two
successive records, never differences of read times). The last record read is remembered in the
job's ``progress_mark`` so a rate can span two reads. Per-rank timings are returned to the
caller for the straggler tracker.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from planner.errors import PlannerError
from planner.forecast.observations import ProgressMark, step_observations
from planner.service.loops.context import IngestDeps
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.specs.job import JobState, ProgressRecord, RankStepRecord, TailCursor

log = logging.getLogger(__name__)


def tail_log(
    deps: IngestDeps, uow: UnitOfWork, row: JobRow, path: str, *, now_s: float
) -> list[RankStepRecord]:
    """Read the job's new log lines: store progress samples, return per-rank timings."""
    cursor_doc = row.log_cursor or {}
    cursor = TailCursor(**cursor_doc) if cursor_doc.get("path") == path else TailCursor(path=path)
    try:
        records, new_cursor = deps.reader.read(cursor)
    except (OSError, PlannerError) as exc:  # the reader should not raise; be safe anyway
        log.warning("job %s: cannot read log %s: %s", row.job_id, path, exc)
        return []
    row.log_cursor = dataclasses.asdict(new_cursor)
    return store_records(uow, row, records, now_s=now_s)


def read_telemetry(
    deps: IngestDeps, uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float
) -> list[RankStepRecord]:
    """Progress and per-rank timings the job exported to the metrics system since the last
    read; a failing metrics system is logged and retried next cycle."""
    if deps.telemetry is None:
        return []
    since = row.telemetry_since_s or job.start_time_s or now_s - 3600.0
    try:
        records = deps.telemetry.read(job, since_s=since, now_s=now_s)
    except PlannerError as exc:
        log.warning("job %s: metrics not read: %s", row.job_id, exc)
        return []
    row.telemetry_since_s = now_s
    return store_records(uow, row, records, now_s=now_s)


def reported_progress(uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float) -> None:
    """The job's own progress report (e.g. a Kubeflow TrainJob's ``trainerStatus``) as a
    progress record, when the job has an iteration count and the report moved past what is
    known. It is timestamped with the report's update time (None: no step time from it)."""
    if job.progress_ratio is None or not row.train_iters:
        return
    iteration = round(min(1.0, max(0.0, job.progress_ratio)) * row.train_iters)
    if row.iteration is not None and iteration <= row.iteration:
        return
    record = ProgressRecord(
        iteration=iteration,
        train_iters=row.train_iters,
        timestamp_s=job.progress_updated_s,
        framework="scheduler",
    )
    store_records(uow, row, [record], now_s=now_s)


def _mark(row: JobRow) -> ProgressMark | None:
    doc = row.progress_mark
    if not doc or not isinstance(doc.get("iteration"), int):
        return None
    stamp = doc.get("timestamp_s")
    return ProgressMark(
        iteration=doc["iteration"],
        timestamp_s=float(stamp) if isinstance(stamp, int | float) else None,
    )


def store_records(
    uow: UnitOfWork,
    row: JobRow,
    records: Sequence[ProgressRecord | RankStepRecord],
    *,
    now_s: float,
) -> list[RankStepRecord]:
    """Store progress records as step samples (one per iteration; ``now_s`` is the read time);
    advance the job's iteration; return the per-rank timings among ``records``."""
    rank_records = [r for r in records if isinstance(r, RankStepRecord)]
    progress = [r for r in records if isinstance(r, ProgressRecord)]
    if not progress:
        return rank_records
    observations, mark = step_observations(progress, read_time_s=now_s, previous=_mark(row))
    row.progress_mark = None if mark is None else dataclasses.asdict(mark)
    known = uow.sample_iterations(row)
    for record, observation in zip(progress, observations, strict=True):
        if record.train_iters:
            row.train_iters = record.train_iters
        time_s = record.timestamp_s if record.timestamp_s is not None else now_s
        if row.iteration is None or record.iteration >= row.iteration:
            row.iteration = record.iteration
            row.last_progress_s = time_s
        if record.iteration in known:
            continue
        known.add(record.iteration)
        uow.add_sample(
            row,
            iteration=record.iteration,
            step_time_s=None if observation is None else observation.step_time_s,
            num_iterations=(
                max(1, record.num_iterations) if observation is None else observation.num_iterations
            ),
            time_s=time_s,
            loss=record.loss,
        )
    return rank_records
