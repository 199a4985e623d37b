"""Online recalibration: the cluster's observed step times teach the model's correction.

``online_calibration`` loads the state once per process; ``recalibrate`` feeds every job of a
cluster that has both a model prediction and an observed step time, and stores the state with
the model's error per cluster (for ``planner_model_error_ratio``). A job whose ranks report
their compute time (``rank_step`` lines or Prometheus step metrics, kept by its live straggler
tracker) also teaches the compute and network factors apart: the share of its step spent in
the forward/backward window over the tracker's recent complete intervals
(``planner.calibration.online_split``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping

from planner.calibration import OnlineCalibration, key_from_scenario
from planner.calibration.online_split import IntervalTiming, window_share
from planner.errors import PlannerError
from planner.service.learning import (
    REAPPLY_MAX_JOBS,
    calibrate_prediction,
    calibration_name,
    model_fields,
)
from planner.service.loops.context import IngestDeps
from planner.service.models import CalibrationRow, JobRow
from planner.service.store import UnitOfWork
from planner.service.stored_json import fields
from planner.stragglers.live import LiveStragglers

log = logging.getLogger(__name__)

#: Name of the online calibration's row in the ``calibrations`` table.
ONLINE_CALIBRATION = "online"


def _stored_online(row: CalibrationRow) -> OnlineCalibration:
    """The online calibration ``row`` keeps; raises ``KeyError`` or ``TypeError`` when it
    keeps none, or ``PlannerError`` when it is unusable."""
    state = row.state["online"]
    if not isinstance(state, Mapping):
        raise TypeError(f"the stored online calibration is not an object: {type(state).__name__}")
    return OnlineCalibration.from_json(state)


def online_calibration(deps: IngestDeps, uow: UnitOfWork) -> OnlineCalibration:
    """The online calibration, loaded from the store on first use (afresh when unusable)."""
    if deps.online.value is None:
        row = uow.calibration(ONLINE_CALIBRATION)
        try:
            deps.online.value = _stored_online(row) if row else OnlineCalibration()
        except (PlannerError, KeyError, TypeError) as exc:
            log.error("stored online calibration unusable, starting afresh: %s", exc)
            deps.online.value = OnlineCalibration()
    return deps.online.value


def recalibrate(
    deps: IngestDeps, uow: UnitOfWork, *, scheduler: str, cluster: str, now_s: float
) -> None:
    """Feed the cluster's jobs' observed step times to the online calibration (the jobs the
    service watched run: not those it first saw ended, ``eta.final_eta``); store it when it
    learnt something (or was never stored)."""
    online = online_calibration(deps, uow)
    before = online.num_samples_
    for job in uow.jobs_of(scheduler, cluster):
        predicted = (job.prediction or {}).get("iteration_time_s")
        observed = (job.eta or {}).get("observed_step_time_s")
        if (job.eta or {}).get("seen_running") is False:
            continue  # a job first seen ended: learnt from, not tracked (``final_eta``)
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
                time_s=job.last_progress_s or now_s,
            )
            share = job_window_share(job)
            breakdown = (job.prediction or {}).get("breakdown_s")
            if share is not None and isinstance(breakdown, dict):
                online.observe_split(
                    ckey,
                    job.job_id,
                    breakdown=breakdown,
                    observed_step_s=float(observed),
                    window_share=share,
                    num_iterations=job.iteration,
                    time_s=job.last_progress_s or now_s,
                )
        except PlannerError as exc:
            log.warning("job %s: not used for calibration: %s", job.job_id, exc)
    reapply_learnt(deps, uow, scheduler=scheduler, cluster=cluster)
    if online.num_samples_ == before and uow.calibration(ONLINE_CALIBRATION) is not None:
        return
    uow.put_calibration(ONLINE_CALIBRATION, _state(online), now_s)


def reapply_learnt(deps: IngestDeps, uow: UnitOfWork, *, scheduler: str, cluster: str) -> None:
    """After a new fit of the cluster's learnt calibration, the predictions of its active
    jobs are corrected again (the online calibration's or the new fit's, whichever
    ``calibrate_prediction`` chooses), at most ``REAPPLY_MAX_JOBS`` per cycle: queued jobs
    described before it landed get it too."""
    if not deps.learning.config.apply:
        return
    name = calibration_name(scheduler, cluster)
    learnt = deps.learning.cache.get(uow.calibration(name))
    if learnt is None:
        return
    fitted, done = deps.learning.cache.reapplied.get(name, (None, set()))
    if fitted != learnt.fitted_s:
        fitted, done = learnt.fitted_s, set()
        deps.learning.cache.reapplied[name] = (fitted, done)
    todo = [job for job in uow.jobs_of(scheduler, cluster) if job.active and job.job_id not in done]
    online = online_calibration(deps, uow)
    for job in todo[:REAPPLY_MAX_JOBS]:
        done.add(job.job_id)
        scenario, prediction = job.scenario, job.prediction
        if not scenario or not prediction:
            continue
        model = model_fields(prediction)
        ckey = key_from_scenario(scheduler, cluster, scenario)
        try:
            corrected = online.apply(model, ckey) if ckey is not None else model
        except PlannerError:
            corrected = model
        new = calibrate_prediction(
            deps.learning,
            uow,
            scheduler=scheduler,
            cluster=cluster,
            document=scenario,
            online=corrected,
        )
        if new != prediction:
            job.prediction = new


def job_window_share(job: JobRow) -> float | None:
    """The share of the job's step spent before its gradient synchronisation can start
    (``online_split.window_share``), over the last complete intervals of its live straggler
    tracker (``LiveStragglers.window``, the span of its what-if; it keeps more as evidence for
    its flags); None without per-rank timings, or when the ranks printed no step time (the
    tracker then takes the slowest compute as the step)."""
    state = fields((job.stragglers or {}).get("state"))
    if not state:
        return None
    try:
        tracker = LiveStragglers.from_json(state)
    except PlannerError:
        return None
    history = tracker.window
    if not any(h.step_time_s > h.max_compute_s for h in history):
        return None
    # an interval averages the iterations since the one before it (the first: unknown, left out)
    intervals = [
        IntervalTiming(
            iterations=h.iteration - before.iteration, step_s=h.step_time_s, compute_s=h.compute_s
        )
        for before, h in itertools.pairwise(history)
        if h.iteration > before.iteration
    ]
    return window_share(intervals)


def _state(online: OnlineCalibration) -> dict[str, object]:
    errors = {}
    for sched, clus in {(k.scheduler, k.cluster) for k, _ in online.jobs_}:
        stats = online.error_stats(sched, clus)
        errors[f"{sched}/{clus}"] = {
            "scheduler": sched,
            "cluster": clus,
            "median_abs_error_ratio": stats.median_abs_error_ratio,
            "num_jobs": stats.num_jobs,
        }
    return {"online": online.to_json(), "errors": errors, "num_samples": online.num_samples_}
