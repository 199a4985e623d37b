"""A job's progress: its log, the metrics it exports, and its own report, as step samples.

Every read of progress records goes through the path the replay takes
(``planner.forecast.tracking.follow``: the step-time rule of ``planner.forecast.observations``,
wall-clock progress, never the printed compute time; the history of
``planner.forecast.history``). Each record becomes one step sample per iteration; an iteration
observed again (redone after a restart from a checkpoint) gets the newer observation, as the
replay's window keeps it. The last point read is remembered in the job's ``progress_mark`` (with
whether its run of points has measured a wall-clock step time yet, so that a read which splits
the records of one printed second continues as one whole read would) so a rate can span two
reads; what the progress showed (pauses, restarts, the recent pace) in its
``progress_history``. Per-rank timings are returned to the caller for the straggler tracker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence

from planner.errors import PlannerError
from planner.forecast.history import ProgressHistory
from planner.forecast.observations import ProgressMark, Restart
from planner.forecast.stored import integer, optional_integer
from planner.forecast.tracking import follow
from planner.service.loops.context import IngestDeps
from planner.service.loops.eta import schedule_of
from planner.service.loops.histories import read_history, write_history
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.specs.job import JobState, ProgressRecord, RankStepRecord, TailCursor

log = logging.getLogger(__name__)

_CURSOR_FIELDS = frozenset(f.name for f in dataclasses.fields(TailCursor))


def stored_cursor(doc: Mapping[str, object]) -> TailCursor:
    """The log cursor ``doc`` stores (``dataclasses.asdict(TailCursor)``, without its
    ``error``; one stored before cursors carried a ``parser_state`` has none). Raises
    ``TypeError`` for a key a cursor has not, a missing ``path`` or a value of another type (a
    cursor stored by another version)."""
    unknown = doc.keys() - _CURSOR_FIELDS
    path = doc.get("path")
    parser_state = doc.get("parser_state")
    if unknown or not isinstance(path, str) or not isinstance(parser_state, str | None):
        raise TypeError(f"not a log cursor: keys {sorted(doc)}")
    return TailCursor(
        path=path,
        inode=integer(doc.get("inode", 0)),
        offset_bytes=integer(doc.get("offset_bytes", 0)),
        size_bytes=integer(doc.get("size_bytes", 0)),
        last_iteration=optional_integer(doc.get("last_iteration")),
        parser_state=parser_state,
    )


def resumed_cursor(doc: Mapping[str, object], path: str) -> TailCursor:
    """The cursor to read ``path`` on from, given the job's stored one ``doc`` (without its
    ``error``): that cursor when it is of ``path`` and this version's shape; one of another
    shape (a later version's keys, a damaged row) keeps the fields this version knows that
    hold values of their type, so that the log is read on from its offset rather than from its
    start again (which the job's progress would take for a restart); its ``parser_state`` only
    when it is text (``LogContext.resumed`` refuses text it did not write)."""
    if doc.get("path") != path:
        return TailCursor(path=path)
    try:
        return stored_cursor(doc)
    except TypeError:
        pass
    log.warning("log cursor of %s stored by another version: its known fields are kept", path)
    known: dict[str, object] = {"path": path}
    for name in _CURSOR_FIELDS & doc.keys() - {"path"}:
        with contextlib.suppress(TypeError):  # a value of another type: left out
            stored_cursor({"path": path, name: doc[name]})
            known[name] = doc[name]
    return stored_cursor(known)


def tail_log(
    deps: IngestDeps,
    uow: UnitOfWork,
    row: JobRow,
    job: JobState,
    path: str,
    *,
    now_s: float,
    final: bool = False,
) -> list[RankStepRecord]:
    """Read the job's new log lines (as ``job``'s user may see them: the job-file rules): store
    progress samples, return per-rank timings. ``final``: the job ended, its log is complete
    (``ProgressReader.read``: its unterminated last line and the records held for lines that
    will not come are given too). A log that is refused or cannot be read gives nothing; why
    is kept in the cursor's ``error`` (logged when it changes)."""
    cursor_doc = row.log_cursor or {}
    kept = {k: v for k, v in cursor_doc.items() if k != "error"}
    cursor = resumed_cursor(kept, path)
    try:
        records, new_cursor = deps.reader.read(cursor, job=job, final=final)
    except (OSError, PlannerError) as exc:
        reason = str(exc)[:500]
        if cursor_doc.get("error") != reason:
            log.warning("job %s: its log is not read: %s", row.job_id, reason)
            row.log_cursor = {**dataclasses.asdict(cursor), "error": reason}
        return []
    doc = dataclasses.asdict(new_cursor)
    if doc != cursor_doc:
        row.log_cursor = doc
    return store_records(uow, row, records, now_s=now_s, start_time_s=_started(row))


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
    return store_records(uow, row, records, now_s=now_s, start_time_s=job.start_time_s)


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
    store_records(uow, row, [record], now_s=now_s, start_time_s=job.start_time_s)


def _started(row: JobRow) -> float | None:
    value = (row.state or {}).get("start_time_s")
    return float(value) if isinstance(value, int | float) else None


def _mark(row: JobRow) -> ProgressMark | None:
    """The stored mark (a mark stored by earlier versions had only ``iteration`` and its printed
    ``timestamp_s``: a point of the printed clock, or of no clock). ``walled`` is kept: without
    it a read that starts inside a printed second took the printed compute times of that
    second's lines as wall-clock observations, where one whole read (the replay) takes none."""
    doc = row.progress_mark or {}
    iteration = doc.get("iteration")
    if not isinstance(iteration, int):
        return None

    def num(key: str) -> float | None:
        value = doc.get(key)
        return float(value) if isinstance(value, int | float) else None

    stamp = num("timestamp_s")
    time_s = num("time_s") if "time_s" in doc else stamp
    logged = num("logged_s") if "logged_s" in doc else 0.0
    count = doc.get("logged_iterations")
    return ProgressMark(
        iteration=iteration,
        time_s=time_s,
        printed=bool(doc.get("printed", stamp is not None)),
        logged_s=logged,
        logged_iterations=int(count) if isinstance(count, int | float) else 0,
        timestamp_s=stamp,
        walled=bool(doc.get("walled", False)),
    )


def store_records(
    uow: UnitOfWork,
    row: JobRow,
    records: Sequence[ProgressRecord | RankStepRecord],
    *,
    now_s: float,
    start_time_s: float | None = None,
) -> list[RankStepRecord]:
    """Store progress records as step samples (one per iteration; ``now_s`` is the read time),
    update the job's progress history; advance the job's iteration (back to where it restarted
    after a restart); return the per-rank timings among ``records``. ``start_time_s``: the job's
    start (a requeued job's restart overhead is measured from it)."""
    rank_records = [r for r in records if isinstance(r, RankStepRecord)]
    progress = [r for r in records if isinstance(r, ProgressRecord)]
    if not progress:
        return rank_records
    history = read_history(row)
    if row.progress_history is None:
        first = progress[0]
        first_time = first.timestamp_s if first.timestamp_s is not None else now_s
        history = _continued(uow, row, first, first_time, start_time_s) or history
    followed, mark = follow(
        progress,
        read_time_s=now_s,
        mark=_mark(row),
        history=history,
        start_time_s=start_time_s,
        schedule=schedule_of(row),
    )
    row.progress_mark = None if mark is None else dataclasses.asdict(mark)
    known = uow.sample_iterations(row, since=min(r.iteration for r in progress))
    # the row's progress columns as the records advance them, set on the row once at the end
    # (a stored row's attribute is tracked on every set: 50,000 records in a first cycle)
    train_iters, iteration, last_progress_s = row.train_iters, row.iteration, row.last_progress_s
    for step in followed:
        record, observation, restart, time_s = (
            step.record,
            step.observation,
            step.restart,
            step.time_s,
        )
        if record.train_iters:
            train_iters = record.train_iters
        if restart is not None:
            log.info(
                "job %s: restarted from iteration %d back to %d",
                row.job_id,
                restart.from_iteration,
                restart.to_iteration,
            )
        if iteration is None or record.iteration >= iteration or restart is not None:
            iteration = record.iteration
            last_progress_s = time_s
        if record.iteration in known:
            if observation is not None:  # redone after a restart: the newer observation
                uow.replace_sample(
                    row,
                    iteration=record.iteration,
                    step_time_s=observation.step_time_s,
                    num_iterations=observation.num_iterations,
                    time_s=time_s,
                    loss=record.loss,
                    logged_step_time_s=observation.logged_step_time_s,
                )
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
            logged_step_time_s=None if observation is None else observation.logged_step_time_s,
        )
    row.train_iters, row.iteration, row.last_progress_s = train_iters, iteration, last_progress_s
    write_history(row, history)  # handed to the ETA's read of this cycle
    return rank_records


def _continued(
    uow: UnitOfWork,
    row: JobRow,
    first: ProgressRecord,
    time_s: float,
    start_time_s: float | None,
) -> ProgressHistory | None:
    """The history of the run a new job continues, when its first record resumes past 0 and an
    ended job of the same name, user and total got at least as far (the latest such job): the
    new job keeps that history, with the gap as a restart (its overhead measured from the new
    job's start). A first record at most twice that job's own first iteration is a fresh start
    (a log prints its first line at ``--log-interval``, a resumed run past its checkpoint). None
    when it continues nothing."""
    if first.iteration <= 0:
        return None
    before = [
        j
        for j in uow.ended_jobs_named(row.scheduler, row.cluster, row.name, row.user)
        if j is not row
        and not j.active
        and j.name == row.name
        and j.user == row.user
        and j.progress_history
        and j.iteration is not None
        and j.iteration >= first.iteration
        and (not row.train_iters or not j.train_iters or j.train_iters == row.train_iters)
        and (j.ended_s is None or start_time_s is None or j.ended_s <= start_time_s + 60.0)
    ]
    if not before:
        return None
    previous = max(before, key=lambda j: j.ended_s or 0.0)
    assert previous.iteration is not None
    history = ProgressHistory.from_json(previous.progress_history)
    if history.first_iteration is not None and first.iteration <= 2 * history.first_iteration:
        # a new run of the same job: its first line is where a fresh start logs first (the
        # previous run's first), not past a checkpoint (CI of 2026-11-26: a rerun of the
        # tiny GPT job took its predecessor's pauses and pace as its own)
        return None
    history.continues = previous.job_id
    history.restart(
        Restart(
            from_iteration=previous.iteration,
            to_iteration=first.iteration,
            from_time_s=previous.last_progress_s,
            time_s=time_s,
        ),
        start_time_s=start_time_s,
    )
    if row.train_iters is None:
        row.train_iters = previous.train_iters
    log.info(
        "job %s continues the run of job %s (from iteration %d)",
        row.job_id,
        previous.job_id,
        first.iteration,
    )
    return history
