"""A job's ETA: the model's prediction as the prior, the stored step samples as observations
(``planner.forecast.eta``); every estimate is kept in the job's history (pruned)."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from planner.errors import PlannerError
from planner.forecast.eta import EtaEstimate, StepObservation, estimate_pending, estimate_running
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.specs.job import JobState, JobStatus

log = logging.getLogger(__name__)

#: Step samples used for one ETA (the newest ones; the estimator weights recent ones more).
ETA_SAMPLE_WINDOW = 500
#: ETA history rows kept per job (older rows are pruned).
ETA_HISTORY_ROWS = 2000


def eta_to_dict(eta: EtaEstimate) -> dict[str, Any]:
    """JSON-safe dict of an estimate (non-finite floats become None)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        return value

    return {k: clean(v) for k, v in dataclasses.asdict(eta).items()}


def prior(row: JobRow, default_log_sd: float) -> tuple[float | None, float]:
    """The model's step time (s) and its log-sd: the calibrated prediction with the
    calibration's sd when the job's cluster has one, else the analytic one with
    ``default_log_sd``."""
    if row.prediction is None:
        return None, default_log_sd
    sd = default_log_sd
    value = row.prediction.get("calibrated_iteration_time_s")
    calibration = row.prediction.get("calibration") or {}
    if isinstance(value, int | float) and calibration.get("level") not in (None, "none"):
        sd = float(calibration.get("log_sd") or sd)
    else:
        value = row.prediction.get("iteration_time_s")
    return (float(value) if isinstance(value, int | float) and value > 0 else None), sd


def _estimate(
    uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float, default_log_sd: float
) -> EtaEstimate | None:
    step_s, sd = prior(row, default_log_sd)
    if job.status == JobStatus.PENDING:
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
    observations = [
        StepObservation(
            iteration=r.iteration,
            step_time_s=float(r.step_time_s or 0.0),
            num_iterations=r.num_iterations,
            time_s=r.time_s,
        )
        for r in uow.timed_samples(row, limit=ETA_SAMPLE_WINDOW)
    ]
    if step_s is None and not observations:
        return None
    return estimate_running(
        prior_step_time_s=step_s,
        prior_log_sd=sd,
        observations=observations,
        iteration=row.iteration or 0,
        train_iters=row.train_iters,
        last_progress_time_s=row.last_progress_s or job.start_time_s or now_s,
        now_s=now_s,
    )


def update_eta(
    uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float, default_log_sd: float
) -> None:
    """Estimate the job's ETA now; store it on the job and in its history (None: no ETA)."""
    try:
        eta = _estimate(uow, row, job, now_s=now_s, default_log_sd=default_log_sd)
    except PlannerError as exc:
        log.warning("job %s: no ETA: %s", row.job_id, exc)
        eta = None
    if eta is None:
        row.eta = None
        return
    payload = eta_to_dict(eta)
    payload["made_at_s"] = now_s
    row.eta = payload
    uow.add_prediction(row, kind="eta", made_at_s=now_s, payload=payload)
    uow.prune_predictions(row, kind="eta", keep=ETA_HISTORY_ROWS)
