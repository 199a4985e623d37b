"""Replay a finished job's log as if the planner were watching it live; pure.

``planner eta replay LOG`` and ``benchmarks/eta_replay.py`` are built on :func:`replay`: each
logged point is read in log order at the time it was logged, through the same path as the
service (``planner.forecast.tracking.follow``: the rule of ``planner.forecast.observations``,
the history of ``planner.forecast.history``, the service's window of observations) and the same
estimator (``planner.forecast.eta.estimate_running``), using at each point only what was known
then. Nothing after a point is seen by its ETA. Given the job's prior, schedule and its
cluster's knowledge (band offsets, shutdown), a point's estimate is the one the service makes
when its read ends at that record (``tests/service/test_live_equals_replay.py``).

**The clock.** A record's time is the time the log printed on it. A record without one (a
Megatron-LM CI table, modded-nanogpt, a DeepSpeed-Chat step between two engine lines) is read
when it was logged: the previous record's time plus its own printed step time times its
iterations (for a log without any timestamp, wall time is the running sum of iteration times);
a record that prints neither (DeepSpeed-Chat's last step, whose latency line never came) is read
at the pace of the last step time printed. A time never goes back. A log whose records before
the first step time print no time gives no clock and is an error.

**The end.** The job's real end is the latest time the log shows: its last record's time, or a
later time it printed after it (MLPerf's ``run_stop`` after the final evaluation, a launcher's
last line). When the log runs past ``total_iterations`` (a replay of a shorter run), the end is
the first record that reached it. When it stops before, the end is unknown: points are replayed,
errors are not computed.

**The errors** (``ReplaySummary``) are judged against the job's own end, relative to its
duration (first logged point to end): ``(elapsed_s + eta_s.p50 - duration_s) / duration_s`` per
point; the median of their absolute values from 10 % and from 50 % progress on; the share of
points from 10 % on whose p10-p90 band held the real remaining time (coverage).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, NotRequired, TypedDict

import numpy as np

from planner.errors import SpecError
from planner.forecast.arguments import TrainingSchedule
from planner.forecast.bands import BandOffsets, BandPoint
from planner.forecast.eta import EtaEstimate, estimate_running
from planner.forecast.history import ProgressHistory
from planner.forecast.observations import ProgressMark
from planner.forecast.tracking import ObservationWindow, follow, note_estimate
from planner.forecast.values import Quantiles
from planner.specs.job import ProgressRecord

MARKS: Final = (0.1, 0.3, 0.5, 0.9)
"""Progress at which the summary reports the p50 error of the first point at or past it."""


class BandJson(TypedDict):
    """A band of the remaining time, seconds."""

    p10: float
    p50: float
    p90: float


class ReplayPointJson(TypedDict):
    """One point's JSON line of ``planner eta replay`` (:class:`ReplayPoint`'s fields)."""

    elapsed_s: float
    iteration: int
    progress: float
    eta_s: BandJson


class ErrorRatiosJson(TypedDict):
    """Median absolute error of the p50 end over the points from 10 % and from 50 % of the
    run (None: no point there)."""

    from_10pct: float | None
    from_50pct: float | None


class ReplaySummaryJson(TypedDict):
    """The summary line's figures (module docstring): without a real end, ``error`` says why
    and the error figures are absent. ``p50_error_ratio_at``: the p50 end's signed error at
    each mark (``"10pct"``, ...; None: no point there)."""

    total_iterations: int
    last_iteration: int
    points: int
    duration_s: float | None
    error: NotRequired[str]
    median_abs_p50_error_ratio: NotRequired[ErrorRatiosJson]
    p10_p90_coverage_ratio: NotRequired[float | None]
    p50_error_ratio_at: NotRequired[dict[str, float | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPoint:
    """The ETA at one logged point: ``elapsed_s`` since the first point, its ``iteration`` and
    ``progress`` (0..1), ``eta_s`` the predicted remaining seconds (published band) and
    ``model_eta_s`` the model's band before calibration; ``time_s`` the point's time (epoch s)
    and ``estimate`` the whole estimate made there."""

    elapsed_s: float
    iteration: int
    progress: float
    eta_s: Quantiles
    model_eta_s: Quantiles
    time_s: float = 0.0
    estimate: EtaEstimate | None = None

    def to_json(self) -> ReplayPointJson:
        """The JSON line of ``planner eta replay``."""
        return {
            "elapsed_s": round(self.elapsed_s, 6),
            "iteration": self.iteration,
            "progress": round(self.progress, 6),
            "eta_s": {
                "p10": round(self.eta_s.p10, 6),
                "p50": round(self.eta_s.p50, 6),
                "p90": round(self.eta_s.p90, 6),
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """A replayed log: its points and the real end (``duration_s`` from the first point; None
    when the log stops before ``total_iterations``); ``history`` what the progress showed at
    the end (pauses, restarts, phases)."""

    points: tuple[ReplayPoint, ...]
    total_iterations: int
    duration_s: float | None
    last_iteration: int
    history: ProgressHistory | None = None

    def band_points(self) -> list[BandPoint]:
        """The points as a finished job's ETAs, for a band calibration (none without an end)."""
        if self.duration_s is None:
            return []
        return [
            BandPoint(
                progress=p.progress,
                raw=p.model_eta_s,
                actual_s=self.duration_s - p.elapsed_s,
                published=p.eta_s,
            )
            for p in self.points
        ]


def replay_clock(records: Sequence[ProgressRecord]) -> list[float]:
    """The time each record was logged (see the module docstring). Raises ``SpecError``
    (field ``log``) when a record has neither a printed time nor a step time to advance by."""
    times: list[float] = []
    clock = 0.0
    pace: float | None = None
    anchored = False
    for k, record in enumerate(records):
        if record.step_time_s is not None and record.step_time_s > 0:
            pace = record.step_time_s
        if record.timestamp_s is not None:
            if not anchored:  # the records before the first printed time lead up to it
                step = (pace or 0.0) * max(1, record.num_iterations)
                shift = record.timestamp_s - (clock + step if k > 0 else 0.0)
                times = [t + shift for t in times]
                clock, anchored = record.timestamp_s, True
            else:
                clock = max(clock, record.timestamp_s)
        elif pace is not None and k > 0:
            clock += pace * max(1, record.num_iterations)
        elif k > 0:
            raise SpecError(
                "log",
                f"the record of iteration {record.iteration} prints neither a time nor a step "
                "time, and none came before it: the log gives no clock to replay it by",
            )
        times.append(clock)
    return times


def replay(
    records: Sequence[ProgressRecord],
    *,
    total_iterations: int,
    end_time_s: float | None = None,
    prior_step_time_s: float | None = None,
    prior_log_sd: float = 0.3,
    schedule: TrainingSchedule | None = None,
    band: BandOffsets | None = None,
    shutdown_s: float = 0.0,
    shutdown_sd_s: float = 0.0,
    on_record: Callable[[int, int], None] | None = None,
) -> Replay:
    """Replay ``records`` (one job's log, in order) against ``total_iterations``; ``end_time_s``
    the latest time the log printed (None: its last record's); ``prior_step_time_s`` a model
    prediction (s) of log-sd ``prior_log_sd``, ``schedule`` the job's arguments, ``band`` band
    offsets and ``shutdown_s`` / ``shutdown_sd_s`` the shutdown (what the service learnt from
    the cluster's finished jobs); ``on_record`` is called with (records replayed, records to
    replay) after each record (progress of a long replay). Raises ``SpecError`` for an empty
    log or an invalid total."""
    if total_iterations < 1:
        raise SpecError("total_iterations", f"must be >= 1, got {total_iterations}")
    if not records:
        raise SpecError("log", "no training progress to replay")
    clock = replay_clock(records)
    reached = next((k for k, r in enumerate(records) if r.iteration >= total_iterations), None)
    end: float | None = None
    if reached is not None:
        ran_past = reached < len(records) - 1
        records, clock = records[: reached + 1], clock[: reached + 1]
        end = clock[-1]
        if end_time_s is not None and not ran_past:
            end = max(end, end_time_s)
    history = ProgressHistory()
    window = ObservationWindow()
    mark: ProgressMark | None = None
    t0 = clock[0]
    points: list[ReplayPoint] = []
    for k, (record, time_s) in enumerate(zip(records, clock, strict=True)):
        if on_record is not None and k > 0:
            on_record(k, len(records))
        stamped = dataclasses.replace(record, timestamp_s=time_s)
        followed, mark = follow(
            [stamped], read_time_s=time_s, mark=mark, history=history, schedule=schedule
        )
        if followed[0].observation is not None:
            window.add(followed[0].observation)
        if prior_step_time_s is None and not len(window):
            continue
        estimate = estimate_running(
            prior_step_time_s=prior_step_time_s,
            prior_log_sd=prior_log_sd,
            observations=window.observations(),
            iteration=min(record.iteration, total_iterations),
            train_iters=total_iterations,
            last_progress_time_s=time_s,
            now_s=time_s,
            history=history,
            schedule=schedule,
            shutdown_s=shutdown_s,
            shutdown_sd_s=shutdown_sd_s,
            band=band,
        )
        note_estimate(history, estimate, time_s=time_s)
        raw = estimate.model_remaining_s or estimate.remaining_s
        points.append(
            ReplayPoint(
                elapsed_s=time_s - t0,
                iteration=record.iteration,
                progress=min(1.0, record.iteration / total_iterations),
                eta_s=estimate.remaining_s,
                model_eta_s=raw,
                time_s=time_s,
                estimate=estimate,
            )
        )
    if on_record is not None:
        on_record(len(records), len(records))
    return Replay(
        points=tuple(points),
        total_iterations=total_iterations,
        duration_s=None if end is None else end - t0,
        last_iteration=records[-1].iteration,
        history=history,
    )


def summarize(run: Replay, points: Sequence[ReplayPoint] | None = None) -> ReplaySummaryJson:
    """The summary line's figures (module docstring; non-finite ones None); ``points``
    replaces the run's own (e.g. with a band calibrated afterwards)."""
    pts = list(run.points if points is None else points)
    out: ReplaySummaryJson = {
        "total_iterations": run.total_iterations,
        "last_iteration": run.last_iteration,
        "points": len(pts),
        "duration_s": _finite(run.duration_s),
    }
    duration = run.duration_s
    if duration is None or duration <= 0:
        out["error"] = (
            f"the log stops at iteration {run.last_iteration}, before the total "
            f"{run.total_iterations}: its real end is unknown, so no error is computed "
            "(give --total-iterations the iterations it ran)"
        )
        return out
    errors = np.array([(p.elapsed_s + p.eta_s.p50 - duration) / duration for p in pts])
    progress = np.array([p.progress for p in pts])
    inside = np.array([p.eta_s.p10 <= duration - p.elapsed_s <= p.eta_s.p90 for p in pts])

    def median_from(start: float) -> float | None:
        chosen = progress >= start
        return float(np.median(np.abs(errors[chosen]))) if chosen.any() else None

    late = progress >= 0.1
    out["median_abs_p50_error_ratio"] = {
        "from_10pct": median_from(0.1),
        "from_50pct": median_from(0.5),
    }
    out["p10_p90_coverage_ratio"] = _finite(float(np.mean(inside[late]))) if late.any() else None
    at: dict[str, float | None] = {}
    for mark in MARKS:
        index = np.flatnonzero(progress >= mark)
        at[f"{round(100 * mark)}pct"] = float(errors[index[0]]) if index.size else None
    out["p50_error_ratio_at"] = at
    return out


def _finite(value: float | None) -> float | None:
    """``value``, or None for a non-finite one (JSON has no NaN)."""
    return None if value is None or not math.isfinite(value) else value
