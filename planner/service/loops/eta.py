"""A job's ETA: the model's prediction as the prior, the stored step samples as observations,
the job's progress history and arguments, and what the cluster's finished jobs taught
(``planner.service.loops.outcomes``: band calibration, shutdown, restart overhead), through
``planner.forecast.eta``; every estimate is kept in the job's history (pruned).

A pending job that already made progress (requeued, or resuming another job's run) resumes from
its history: the remaining iterations from where it got to, at its own pace, plus its restart
overhead (the median of its own restarts, else the cluster's), from the scheduler's expected
start (or now)."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from enum import Enum

from planner.errors import PlannerError
from planner.forecast.arguments import TrainingSchedule
from planner.forecast.eta import (
    OBSERVATION_WINDOW,
    EtaEstimate,
    StepObservation,
    estimate_pending,
    estimate_running,
)
from planner.forecast.history import PhaseEvent, ProgressHistory
from planner.forecast.stored import integer, optional_integer
from planner.forecast.tracking import note_estimate
from planner.service.loops.histories import read_history, write_history
from planner.service.loops.incremental import advance_running_eta
from planner.service.loops.outcomes import ETA_CALIBRATION, EtaKnowledge, eta_knowledge
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.service.stored_json import fields, number, rows
from planner.specs.job import JobState, JobStatus

log = logging.getLogger(__name__)

#: Step samples used for one ETA (the newest ones; the replay uses the same window).
ETA_SAMPLE_WINDOW = OBSERVATION_WINDOW
#: ETA history rows kept per job (older rows are pruned).
ETA_HISTORY_ROWS = 1000
#: An estimate joins the history when progress moved by this much since the last one kept...
HISTORY_PROGRESS_STEP = 0.002
#: ... or this long after it (s).
HISTORY_MAX_GAP_S = 6 * 3600.0
#: A straggler flagged from this many iterations of a phase's start explains it (at least).
PHASE_STRAGGLER_ITERATIONS = 50


#: Field names of the dataclasses an estimate holds, by class (asked once per class, not once
#: per estimate: a first cycle of 10,000 jobs makes 7,000 estimates).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_LEAVES = (float, int, str, bool, type(None))


def _as_plain(value: object) -> object:
    """What ``dataclasses.asdict`` makes of ``value`` (a dataclass as a dict of its fields, a
    list, tuple or dict converted element by element, keeping its type), without copying the
    leaves that cannot change (numbers, strings, booleans, None), which ``asdict`` deep-copies
    one by one (a third of what storing an estimate cost)."""
    kind = type(value)
    if kind in _LEAVES or isinstance(value, Enum):  # an enum member's deep copy is itself
        return value
    names = _FIELD_NAMES.get(kind)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {name: _as_plain(getattr(value, name)) for name in names}
    if isinstance(value, list) and kind is list:
        return [_as_plain(v) for v in value]
    if isinstance(value, tuple) and kind is tuple:
        return tuple(_as_plain(v) for v in value)
    if isinstance(value, dict) and kind is dict:
        return {_as_plain(k): _as_plain(v) for k, v in value.items()}
    return dataclasses.asdict(_Boxed(value))["value"]  # anything else: as ``asdict`` makes it


@dataclasses.dataclass(frozen=True, slots=True)
class _Boxed:
    value: object


def eta_to_dict(eta: EtaEstimate) -> dict[str, object]:
    """JSON-safe dict of an estimate (``dataclasses.asdict``'s fields; non-finite floats,
    at the top level and in nested dicts, become None)."""

    def clean(value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    plain = _as_plain(eta)
    assert isinstance(plain, dict)
    return {k: clean(v) for k, v in plain.items()}


def prior(row: JobRow, default_log_sd: float) -> tuple[float | None, float]:
    """The model's step time (s) and its log-sd: the calibrated prediction with the
    calibration's sd when the job's cluster has one, else the analytic one with
    ``default_log_sd``."""
    if row.prediction is None:
        return None, default_log_sd
    sd = default_log_sd
    value = row.prediction.get("calibrated_iteration_time_s")
    calibration = fields(row.prediction.get("calibration"))
    if isinstance(value, int | float) and calibration.get("level") not in (None, "none"):
        sd = number(calibration.get("log_sd")) or sd
    else:
        value = row.prediction.get("iteration_time_s")
    return (float(value) if isinstance(value, int | float) and value > 0 else None), sd


def straggler_factor(row: JobRow) -> float:
    """The expected straggler slowdown of a queued job (``prediction["expected_straggler"]
    ["factor"]``, ``planner.stragglers.exposure``: 1 + P (S - 1)); 1.0 without one."""
    term = (row.prediction or {}).get("expected_straggler")
    value = term.get("factor") if isinstance(term, dict) else None
    if isinstance(value, int | float) and math.isfinite(value) and value >= 1.0:
        return float(value)
    return 1.0


_SCHEDULE_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainingSchedule))


def _ramp(value: object) -> tuple[int, int, int] | None:
    """A stored ``rampup_batch_size`` (``start, increment, samples``: a JSON list, or the
    tuple of a schedule not stored yet); raises ``TypeError`` for anything else."""
    if value is None:
        return None
    if isinstance(value, list | tuple) and len(value) == 3:
        start, increment, samples = value
        return integer(start), integer(increment), integer(samples)
    raise TypeError(f"not a batch-size ramp-up: {value!r}")


def schedule_of(row: JobRow) -> TrainingSchedule | None:
    """The evaluation and checkpoint intervals stored for the job (None: none stated)."""
    doc = row.schedule
    if not isinstance(doc, dict) or doc.keys() - _SCHEDULE_FIELDS:
        return None
    try:
        schedule = TrainingSchedule(
            eval_interval=optional_integer(doc.get("eval_interval")),
            eval_iters=optional_integer(doc.get("eval_iters")),
            save_interval=optional_integer(doc.get("save_interval")),
            train_iters=optional_integer(doc.get("train_iters")),
            global_batch_size=optional_integer(doc.get("global_batch_size")),
            rampup_batch_size=_ramp(doc.get("rampup_batch_size")),
            eval_global_batch_size=optional_integer(doc.get("eval_global_batch_size")),
        )
    except TypeError:  # a schedule stored by another version
        return None
    return None if schedule.empty else schedule


def _observations(uow: UnitOfWork, row: JobRow) -> list[StepObservation]:
    return [
        StepObservation(
            iteration=r.iteration,
            step_time_s=float(r.step_time_s or 0.0),
            num_iterations=r.num_iterations,
            time_s=r.time_s,
            logged_step_time_s=r.logged_step_time_s,
        )
        for r in uow.timed_samples(row, limit=ETA_SAMPLE_WINDOW)
    ]


def _resumed(
    row: JobRow,
    job: JobState,
    *,
    step_s: float | None,
    sd: float,
    observations: list[StepObservation],
    history: ProgressHistory,
    known: EtaKnowledge,
    now_s: float,
) -> EtaEstimate | None:
    """The ETA of a pending job that already made progress (module docstring)."""
    if not row.train_iters or row.iteration is None or (step_s is None and not observations):
        return None
    start = job.expected_start_time_s if job.expected_start_time_s is not None else now_s
    start = max(start, now_s)
    own = sorted(r.overhead_s for r in history.restarts)
    overhead = own[len(own) // 2] if own else (known.restart_overhead_s or 0.0)
    estimate = estimate_running(
        prior_step_time_s=step_s,
        prior_log_sd=sd,
        observations=observations,
        iteration=row.iteration,
        train_iters=row.train_iters,
        last_progress_time_s=start,
        now_s=start,
        history=history,
        schedule=schedule_of(row),
        shutdown_s=known.shutdown_s + overhead,
        shutdown_sd_s=known.shutdown_sd_s,
        band=known.band,
    )
    if job.expected_start_time_s is None:
        return dataclasses.replace(estimate, completion_time_s=None)
    return estimate


def _estimate(
    uow: UnitOfWork,
    row: JobRow,
    job: JobState,
    *,
    now_s: float,
    default_log_sd: float,
    history: ProgressHistory,
) -> EtaEstimate | None:
    """The job's ETA now; ``history``: its progress history (read, not changed)."""
    step_s, sd = prior(row, default_log_sd)
    known = eta_knowledge(uow, row.scheduler, row.cluster)
    if job.status == JobStatus.PENDING:
        if step_s is not None:
            step_s *= straggler_factor(row)
        observations = _observations(uow, row) if row.progress_history else []
        if row.progress_history and history.first_iteration is not None:
            return _resumed(
                row,
                job,
                step_s=step_s,
                sd=sd,
                observations=observations,
                history=history,
                known=known,
                now_s=now_s,
            )
        if step_s is None or not row.train_iters:
            return None
        return estimate_pending(
            prior_step_time_s=step_s,
            prior_log_sd=sd,
            train_iters=row.train_iters,
            expected_start_time_s=job.expected_start_time_s,
        )
    if not row.train_iters:
        return None
    observations = _observations(uow, row)
    if step_s is None and not observations and not history.recent:
        return None
    return estimate_running(
        prior_step_time_s=step_s,
        prior_log_sd=sd,
        observations=observations,
        iteration=row.iteration or 0,
        train_iters=row.train_iters,
        last_progress_time_s=row.last_progress_s or job.start_time_s or now_s,
        now_s=now_s,
        history=history if row.progress_history else None,
        schedule=schedule_of(row),
        shutdown_s=known.shutdown_s,
        shutdown_sd_s=known.shutdown_sd_s,
        band=known.band,
    )


def update_eta(
    uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float, default_log_sd: float
) -> None:
    """Estimate the job's ETA now; store it on the job and in its history (None: no ETA).
    The job's progress history is read once for both (the estimate only reads it), as the
    cycle's store of its progress wrote it (``planner.service.loops.histories``)."""
    history = read_history(row)
    try:
        eta = _estimate(uow, row, job, now_s=now_s, default_log_sd=default_log_sd, history=history)
    except PlannerError as exc:
        log.warning("job %s: no ETA: %s", row.job_id, exc)
        eta = None
    if eta is None:
        row.eta = None
        return
    phase = None
    if job.status == JobStatus.RUNNING and row.progress_history:
        phase = _note_phase(row, eta, now_s, history)
    payload = eta_to_dict(eta)
    payload["phase"] = phase
    payload["made_at_s"] = now_s
    if job.status == JobStatus.PENDING:
        payload["straggler_factor"] = straggler_factor(row)
    _store(uow, row, payload, now_s)


def final_eta(
    uow: UnitOfWork,
    row: JobRow,
    job: JobState,
    *,
    now_s: float,
    default_log_sd: float,
    seen_running: bool = True,
) -> None:
    """The ETA of a job that ended, once its log gave progress at its end (its last read
    gives what the log held back: ``ProgressReader.read``'s ``final``): estimated once more
    from all its progress, so that its ``observed_step_time_s`` is the one its whole log
    measures (what the service's learning records of the run), and marked ``finished``. It is
    not kept in the job's ETA history: an estimate made at its end predicts nothing, and the
    job's outcome scores the ones made while it ran (``outcomes.finish_job``). When none can
    be made the job keeps the ETA it had, marked ``finished``.

    ``seen_running`` (stored as the ETA's ``seen_running``): False for a job the service first
    saw already ended (the scheduler's accounting window when the service starts). Its step
    time is learnt from (``planner.service.learning.record_finished_run``: the learnt fit,
    scoped by key and release and cross-validated before predictions use it) but not fed to
    the online calibration (``loops.calibration.recalibrate``), which follows the jobs the
    service watched run, each weighted by when it ran and split by its live rank timings."""
    try:
        eta = _estimate(
            uow, row, job, now_s=now_s, default_log_sd=default_log_sd, history=read_history(row)
        )
    except PlannerError as exc:
        log.warning("job %s: no final ETA: %s", row.job_id, exc)
        eta = None
    previous = row.eta or {}
    if eta is None:
        if row.eta is not None:
            row.eta = {**previous, "finished": True}
        return
    row.eta = {
        **eta_to_dict(eta),
        "phase": previous.get("phase"),
        "made_at_s": now_s,
        "history_made_at_s": previous.get("history_made_at_s"),
        "history_progress": previous.get("history_progress"),
        "finished": True,
        "seen_running": seen_running,
    }


def _note_phase(
    row: JobRow, eta: EtaEstimate, now_s: float, history: ProgressHistory
) -> dict[str, object] | None:
    """Note the phase the estimate reports in the job's history (``history``: the stored one,
    read), as the replay does (``planner.forecast.tracking.note_estimate``); a new phase is
    logged, and marked as explained by a straggler when the live tracker flags a rank from
    about where it began. Returns the job's latest phase event as the ETA shows it (None: none
    yet)."""
    before = [dataclasses.asdict(p) for p in history.phases]
    event = note_estimate(history, eta, time_s=row.last_progress_s or now_s)
    if event is not None:
        event.explained_by = _straggler_near(row, event)
        log.info(
            "job %s: %s (seen at iteration %d)%s",
            row.job_id,
            event.description,
            event.seen_iteration,
            f", explained by {event.explained_by}" if event.explained_by else "",
        )
    if [dataclasses.asdict(p) for p in history.phases] != before:
        write_history(row, history)
    return phase_view(history.phases[-1]) if history.phases else None


def phase_view(event: PhaseEvent) -> dict[str, object]:
    """A phase event as the API and ``/metrics`` show it."""
    return {**dataclasses.asdict(event), "description": event.description}


def _straggler_near(row: JobRow, event: PhaseEvent) -> str | None:
    """``straggler rank R`` when the live straggler report flags a rank (or a node) slowed
    from within ``PHASE_STRAGGLER_ITERATIONS`` of where the phase began: the job's pace
    changed because one rank did, not the whole job."""
    report = fields((row.stragglers or {}).get("report"))
    reach = max(PHASE_STRAGGLER_ITERATIONS, 0.1 * event.start_iteration)
    for flag in [*rows(report.get("stragglers")), *rows(report.get("slow_nodes"))]:
        since = flag.get("since_iteration")
        if isinstance(since, int | float) and abs(since - event.start_iteration) <= reach:
            if "rank" in flag:
                return f"straggler rank {flag['rank']}"
            return f"slow node {flag.get('node')}"
    return None


def _store(uow: UnitOfWork, row: JobRow, payload: dict[str, object], now_s: float) -> None:
    """Make ``payload`` the job's ETA; keep it in the history when worth it."""
    previous = row.eta or {}
    row.eta = payload
    if not _worth_keeping(previous, payload, now_s):
        payload["history_made_at_s"] = previous.get("history_made_at_s")
        payload["history_progress"] = previous.get("history_progress")
        return
    payload["history_made_at_s"] = now_s
    payload["history_progress"] = payload.get("progress_ratio")
    uow.add_prediction(row, kind="eta", made_at_s=now_s, payload=payload)
    uow.prune_predictions(row, kind="eta", keep=ETA_HISTORY_ROWS)


def knowledge_version(uow: UnitOfWork) -> float | None:
    """When what finished jobs teach the ETA last changed (``updated_s`` of the ``eta``
    calibration row; None: nothing learnt yet)."""
    row = uow.calibration(ETA_CALIBRATION)
    return None if row is None else row.updated_s


def refresh_eta(uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float) -> bool:
    """The ETA of a job whose snapshot, progress, prediction and ETA knowledge did not change
    since its ETA was made (``planner.service.loops.incremental``): a pending job's stays, a
    running job's is advanced to now (written when overdue, or when the history is due one).
    False when it must be estimated afresh (a requeued job resuming its run: its ETA starts
    from now; an ETA without completion quantiles)."""
    eta = row.eta
    if eta is None:
        return True
    if job.status == JobStatus.PENDING:
        return not row.progress_history
    advanced = advance_running_eta(eta, now_s, always=True)
    if advanced is None:
        return False
    moved = advanced.get("completion_time_s") != eta.get("completion_time_s")
    if moved or _worth_keeping(eta, advanced, now_s):
        _store(uow, row, advanced, now_s)
    return True


def _worth_keeping(
    previous: Mapping[str, object], payload: Mapping[str, object], now_s: float
) -> bool:
    """Whether an estimate joins the job's history: when progress moved by
    ``HISTORY_PROGRESS_STEP`` since the last one kept, or ``HISTORY_MAX_GAP_S`` passed, or the
    method changed (so a long job's history spans its whole run, not its last hours)."""
    last_s, last_progress = previous.get("history_made_at_s"), previous.get("history_progress")
    progress = payload.get("progress_ratio")
    if not isinstance(last_s, int | float) or previous.get("method") != payload.get("method"):
        return True
    if now_s - last_s >= HISTORY_MAX_GAP_S:
        return True
    if not isinstance(progress, int | float) or not isinstance(last_progress, int | float):
        return True
    return abs(progress - last_progress) >= HISTORY_PROGRESS_STEP
