"""What a cluster's finished jobs teach the ETA, and what a finished job keeps.

When a job ends (``finish_job``) it keeps its description, last prediction, ETA history, and
gets its ``outcome``: the real end and duration, the p50 error of its ETAs at 10, 30, 50 and 90 %
progress (relative to its duration), the share of its published bands that held the real end,
and its shutdown (the time from its last iteration to its end, the pause expected after the last
iteration left out). A job that ran all its iterations and whose end the scheduler gave then
teaches its cluster (the ``eta`` row of the calibrations table, per ``scheduler/cluster``):

* the **band calibration** (``planner.forecast.bands``): the scores of its ETAs' model bands;
* the **shutdown**: the median of the last ``MAX_SAMPLES`` (100) jobs' shutdowns, with a robust
  sd (MAD x 1.4826, at least half the median while fewer than 5 jobs taught it);
* the **restart overhead** of the restarts its history saw (median of the last 100): a requeued
  job waiting in the queue gets it on top of its remaining time.

``eta_knowledge`` reads it back for the ETAs of the cluster's running and pending jobs; with
nothing learnt yet: the model's band, no shutdown, no restart overhead.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from planner.errors import SpecError
from planner.forecast.bands import BandCalibration, BandOffsets, BandPoint
from planner.forecast.pauses import PausePeriod, final_pause_s
from planner.forecast.values import Quantiles
from planner.service.loops.histories import read_history
from planner.service.models import JobRow
from planner.service.store import UnitOfWork
from planner.service.stored_json import fields, number
from planner.specs.job import JobState, JobStatus

log = logging.getLogger(__name__)

ETA_CALIBRATION: Final = "eta"
"""Name of the row of the calibrations table that holds what finished jobs taught the ETA."""
MAX_SAMPLES: Final = 100
ETA_HISTORY_READ: Final = 2000
MARKS: Final = (0.1, 0.3, 0.5, 0.9)


@dataclass(frozen=True, slots=True, kw_only=True)
class EtaKnowledge:
    """What a cluster's finished jobs taught the ETA (module docstring)."""

    band: BandOffsets | None = None
    shutdown_s: float = 0.0
    shutdown_sd_s: float = 0.0
    restart_overhead_s: float | None = None
    coverage_ratio: float | None = None
    num_jobs: int = 0


def cluster_key(scheduler: str, cluster: str) -> str:
    """Key of a cluster in the ``eta`` calibration state."""
    return f"{scheduler}/{cluster}"


def _spread(values: list[float]) -> tuple[float, float]:
    """(median, robust sd) of ``values`` (see the module docstring)."""
    median = statistics.median(values)
    mad = 1.4826 * statistics.median([abs(v - median) for v in values])
    if len(values) < 5:
        mad = max(mad, 0.5 * median)
    return median, mad


def eta_knowledge(uow: UnitOfWork, scheduler: str, cluster: str) -> EtaKnowledge:
    """What the cluster's finished jobs taught the ETA (nothing when none did)."""
    row = uow.calibration(ETA_CALIBRATION)
    clusters = fields((row.state if row is not None else {}).get("clusters"))
    entry = clusters.get(cluster_key(scheduler, cluster))
    return knowledge_of(entry)


def knowledge_of(entry: Any) -> EtaKnowledge:
    """The knowledge one cluster's entry of the ``eta`` calibration state holds."""
    if not isinstance(entry, dict):
        return EtaKnowledge()
    tails = [float(v) for v in entry.get("shutdown_s") or [] if isinstance(v, int | float)]
    overheads = [
        float(v) for v in entry.get("restart_overhead_s") or [] if isinstance(v, int | float)
    ]
    shutdown, shutdown_sd = _spread(tails) if tails else (0.0, 0.0)
    offsets = BandOffsets.from_json(entry.get("offsets"))
    return EtaKnowledge(
        band=offsets if offsets.by_bucket else None,
        shutdown_s=max(0.0, shutdown),
        shutdown_sd_s=shutdown_sd,
        restart_overhead_s=statistics.median(overheads) if overheads else None,
        coverage_ratio=entry.get("coverage_ratio"),
        num_jobs=int(entry.get("num_jobs") or 0),
    )


def _quantiles(doc: Any) -> Quantiles | None:
    if not isinstance(doc, dict):
        return None
    try:
        return Quantiles(p10=float(doc["p10"]), p50=float(doc["p50"]), p90=float(doc["p90"]))
    except (KeyError, TypeError, ValueError, SpecError):
        return None


def _periods(doc: Any) -> list[PausePeriod]:
    out = []
    for p in (doc or {}).get("periods") or [] if isinstance(doc, dict) else []:
        try:
            out.append(PausePeriod(**p))
        except TypeError:
            continue
    return out


def _listed(value: object) -> list[object]:
    """The items of a stored JSON list (None or another value: none)."""
    return list(value) if isinstance(value, list) else []


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def finish_job(uow: UnitOfWork, row: JobRow, job: JobState, *, now_s: float) -> None:
    """The job just ended: store its outcome, and teach its cluster when it ran all its
    iterations and the scheduler gave its end (module docstring)."""
    end_s = job.end_time_s
    start_s = job.start_time_s or _num((row.state or {}).get("start_time_s"))
    etas = [p.payload for p in uow.job_predictions(row, kind="eta", limit=ETA_HISTORY_READ)]
    # the estimates made while it ran: (made at, s; progress ratio; the estimate)
    running: list[tuple[float, float, dict[str, object]]] = []
    for e in etas:
        made_at, progress_ratio = _num(e.get("made_at_s")), e.get("progress_ratio")
        if (
            e.get("method") != "done"
            and isinstance(progress_ratio, int | float)
            and made_at is not None
        ):
            running.append((made_at, float(progress_ratio), e))
    ran_all = bool(
        row.train_iters and row.iteration is not None and row.iteration >= row.train_iters
    )
    outcome: dict[str, object] = {
        "status": row.status,
        "end_s": end_s,
        "start_s": start_s,
        "ran_all_iterations": ran_all,
        "num_etas": len(running),
    }
    if end_s is None or start_s is None or end_s <= start_s:
        outcome["error"] = "the scheduler gave no start and end time: no error is computed"
        row.outcome = outcome
        return
    duration = end_s - start_s
    points: list[BandPoint] = []
    errors: list[tuple[float, float]] = []
    for made, progress, e in running:
        published = _quantiles(e.get("remaining_s"))
        completion = _quantiles(e.get("completion_time_s"))
        raw = _quantiles(e.get("model_remaining_s")) or published
        if published is None or completion is None or raw is None:
            continue
        errors.append((progress, (completion.p50 - end_s) / duration))
        points.append(
            BandPoint(progress=progress, raw=raw, actual_s=end_s - made, published=published)
        )
    outcome["duration_s"] = duration
    outcome["p50_error_ratio_at"] = {
        f"{round(100 * m)}pct": next((err for p, err in errors if p >= m), None) for m in MARKS
    }
    late = [abs(err) for p, err in errors if p >= 0.1]
    outcome["median_abs_p50_error_ratio"] = statistics.median(late) if late else None
    held = [
        p.published is not None and p.published.p10 <= p.actual_s <= p.published.p90 for p in points
    ]
    outcome["p10_p90_coverage_ratio"] = sum(held) / len(held) if held else None
    last_progress = row.last_progress_s
    if ran_all and last_progress is not None and row.train_iters:
        final = final_pause_s(
            _periods(running[-1][2].get("pauses")) if running else [], row.train_iters
        )
        outcome["shutdown_s"] = max(0.0, end_s - last_progress - final)
    row.outcome = outcome
    if ran_all and row.status == JobStatus.COMPLETED.value:
        _teach(uow, row, points, outcome, end_s=float(end_s), now_s=now_s)


def _teach(
    uow: UnitOfWork,
    row: JobRow,
    points: list[BandPoint],
    outcome: Mapping[str, object],
    *,
    end_s: float,
    now_s: float,
) -> None:
    """Add the job's ``outcome`` (it ended at ``end_s``, epoch s) to its cluster's entry of the
    ``eta`` calibration state: its ETA band points, its shutdown time and restart overheads."""
    stored = uow.calibration(ETA_CALIBRATION)
    state: dict[str, object] = dict(stored.state) if stored is not None else {}
    clusters = dict(fields(state.get("clusters")))
    key = cluster_key(row.scheduler, row.cluster)
    entry = dict(fields(clusters.get(key)))
    bands = BandCalibration.from_json(entry.get("bands"))
    if points:
        bands.add_job(row.job_id, end_s, points)
    entry["bands"] = bands.to_json()
    entry["offsets"] = bands.table().to_json()
    entry["coverage_ratio"] = bands.coverage()
    entry["num_jobs"] = len(bands.jobs)
    shutdown = outcome.get("shutdown_s")
    if isinstance(shutdown, float):
        entry["shutdown_s"] = [*_listed(entry.get("shutdown_s")), shutdown][-MAX_SAMPLES:]
    history = read_history(row)  # as the cycle's store of its last progress wrote it
    since = number(outcome.get("start_s")) or 0.0  # a continued run's older restarts were taught
    overheads = [
        r.overhead_s for r in history.restarts if math.isfinite(r.overhead_s) and r.time_s >= since
    ]
    if overheads:
        entry["restart_overhead_s"] = [*_listed(entry.get("restart_overhead_s")), *overheads][
            -MAX_SAMPLES:
        ]
    clusters[key] = entry
    state["clusters"] = clusters
    uow.put_calibration(ETA_CALIBRATION, state, now_s)
    log.info(
        "job %s/%s/%s ended: ETA p50 error %s of its duration at 30 %% progress; its cluster "
        "has %d finished jobs for the ETA band",
        row.scheduler,
        row.cluster,
        row.job_id,
        fields(outcome.get("p50_error_ratio_at")).get("30pct"),
        entry["num_jobs"],
    )
