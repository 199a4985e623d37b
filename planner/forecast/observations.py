"""Progress records (from job logs, metrics or the scheduler) to wall-clock step times for the
ETA; pure, no I/O.

This is the one rule for "what a step time is" (one rule, one place: ``docs/architecture.md``):
the service's ingest loop (``planner.service.loops.progress``), the replay of finished logs
(``planner.forecast.replay``, ``planner eta replay``), the tests and the benchmarks
(``benchmarks/eta_replay.py``, ``benchmarks/eta_band_coverage.py``,
``benchmarks/recalibration.py``) all call it.

The rule: **a step time is wall-clock progress**, iterations against time, never the compute
time a log prints. Frameworks time their iterations with the evaluation, checkpointing and
data stalls left out (Megatron-LM stops its ``interval-time`` timer around them), so an ETA that
adds up printed step times runs early by exactly those pauses (the dev-stack runs measured 10-17 %
of the job's duration at 10-30 % progress).

* **The time of a record** is the time the log printed on it (``timestamp_s``); when it printed
  none, the time the planner read it (``read_time_s``). The two clocks are never mixed: a rate
  pairs two printed times or two read times (the job's host and the planner's may disagree).
* **A point** is the record a time stands for: for printed times, the *first* record that
  printed that time (logs print whole seconds: the lines of one second all print it, the first
  is nearest to it); for read times, the *last* record of the read (every record of one read gets
  the same read time, and the last one was printed nearest to it). Other records give no point.
* **A step observation** is the mean wall time per iteration between two successive points of
  the same clock: ``(t1 - t0) / (i1 - i0)`` over ``i1 - i0`` iterations, observed at ``t1``.
  It also carries the compute time the log printed for those iterations
  (``logged_step_time_s``, when every record in between printed one): wall minus logged is a
  pause (``planner.forecast.history``).
* **The previous point** may come from an earlier read (``previous``, a :class:`ProgressMark`),
  so a rate spans two polls of the same job.
* **Before the clock measured anything** (the records of a job's first read when its log
  prints no time, the first record of a run, the records after a restart until the next point),
  a record's printed step time stands in as its observation: there is no wall clock to measure
  yet, and the compute time is the best estimate until the next point. It is flagged as such
  (its ``logged_step_time_s`` is its step time: no pause in it).
* **A restart** is an iteration that goes back (a restart from a checkpoint, a requeued job, a
  job continuing the run of another one): it pairs with nothing, is reported as a
  :class:`Restart` (iterations and wall time between the last point and the restart) and starts
  a new run of points.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.forecast.values import StepObservation
from planner.specs.job import ProgressRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressMark:
    """The last point the rule has seen for a job, and the compute time logged since it.

    ``iteration`` and ``time_s`` (epoch s) of the point; ``printed`` whether ``time_s`` is a
    time the log printed (else a read time); ``logged_s`` the compute time printed for the
    ``logged_iterations`` iterations read after the point (None once a record without a printed
    step time was read); ``timestamp_s`` the printed time of the point (None for a read time;
    kept for the readers of stored marks); ``walled`` whether this run of points has measured a
    wall-clock step time yet.
    """

    iteration: int
    time_s: float | None = None
    printed: bool = False
    logged_s: float | None = 0.0
    logged_iterations: int = 0
    timestamp_s: float | None = None
    walled: bool = False

    @classmethod
    def of(cls, record: ProgressRecord, *, read_time_s: float) -> ProgressMark:
        """The mark a record leaves when it is a point (nothing logged after it yet)."""
        printed = record.timestamp_s is not None
        time_s = record.timestamp_s if printed else read_time_s
        return cls(
            iteration=record.iteration,
            time_s=time_s,
            printed=printed,
            timestamp_s=record.timestamp_s,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Restart:
    """An iteration that went back: from ``from_iteration`` (the last point, at
    ``from_time_s``) to ``to_iteration`` at ``time_s`` (epoch s)."""

    from_iteration: int
    to_iteration: int
    from_time_s: float | None
    time_s: float


def step_observations(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    previous: ProgressMark | None = None,
) -> tuple[list[StepObservation | None], ProgressMark | None]:
    """One entry per record of ``records`` (one job, in log order): the wall-clock step
    observation that ends at it, or None when it ends none (see the module docstring); and the
    mark the last record leaves (``previous`` when ``records`` is empty).

    ``read_time_s``: epoch seconds when the records were read; ``previous``: the mark of an
    earlier read of the same job, None at the start.
    """
    observations, _, mark = read_progress(records, read_time_s=read_time_s, previous=previous)
    return observations, mark


def read_progress(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    previous: ProgressMark | None = None,
) -> tuple[list[StepObservation | None], list[Restart | None], ProgressMark | None]:
    """:func:`step_observations`, and one entry per record: the restart it is (None: it is
    none)."""
    last_unprinted = max((k for k, r in enumerate(records) if r.timestamp_s is None), default=-1)
    out: list[StepObservation | None] = []
    restarts: list[Restart | None] = []
    mark = previous
    for k, record in enumerate(records):
        printed = record.timestamp_s is not None
        time_s = record.timestamp_s if record.timestamp_s is not None else read_time_s
        restarts.append(None)
        if mark is None or record.iteration < mark.iteration:
            if mark is not None:
                restarts[-1] = Restart(
                    from_iteration=mark.iteration,
                    to_iteration=record.iteration,
                    from_time_s=mark.time_s,
                    time_s=time_s,
                )
            out.append(_stand_in(record, time_s))
            mark = ProgressMark.of(record, read_time_s=read_time_s)
            continue
        logged = _add_logged(mark, record)
        is_point = printed or k == last_unprinted
        same_clock = mark.printed == printed and mark.time_s is not None
        advanced = (
            same_clock
            and record.iteration > mark.iteration
            and mark.time_s is not None
            and time_s > mark.time_s
            and math.isfinite(time_s)
        )
        if not is_point or not advanced:
            out.append(None if mark.walled else _stand_in(record, time_s))
            if not same_clock and record.iteration != mark.iteration:
                mark = ProgressMark.of(record, read_time_s=read_time_s)  # a new clock starts
            elif is_point and not printed and record.iteration > mark.iteration:
                mark = dataclasses.replace(  # the last line of the read stands for its time
                    ProgressMark.of(record, read_time_s=read_time_s), walled=mark.walled
                )
            else:
                mark = logged
            continue
        assert mark.time_s is not None
        steps = record.iteration - mark.iteration
        logged_per_step = (
            logged.logged_s / logged.logged_iterations
            if logged.logged_s is not None and logged.logged_iterations == steps
            else None
        )
        out.append(
            StepObservation(
                iteration=record.iteration,
                step_time_s=(time_s - mark.time_s) / steps,
                num_iterations=steps,
                time_s=time_s,
                logged_step_time_s=logged_per_step,
            )
        )
        mark = dataclasses.replace(ProgressMark.of(record, read_time_s=read_time_s), walled=True)
    return out, restarts, mark


def _stand_in(record: ProgressRecord, time_s: float) -> StepObservation | None:
    """The printed step time of a record read before its clock measured anything (module
    docstring), None when it printed none."""
    if record.step_time_s is None or not (
        math.isfinite(record.step_time_s) and record.step_time_s > 0
    ):
        return None
    return StepObservation(
        iteration=record.iteration,
        step_time_s=record.step_time_s,
        num_iterations=max(1, record.num_iterations),
        time_s=time_s,
        logged_step_time_s=record.step_time_s,
    )


def _add_logged(mark: ProgressMark, record: ProgressRecord) -> ProgressMark:
    """The mark with the record's printed compute time added to what was logged since it."""
    if record.iteration <= mark.iteration:
        return mark
    if mark.logged_s is None or record.step_time_s is None or not record.step_time_s > 0:
        logged: float | None = None
    else:
        logged = mark.logged_s + record.step_time_s * max(1, record.num_iterations)
    return ProgressMark(
        iteration=mark.iteration,
        time_s=mark.time_s,
        printed=mark.printed,
        logged_s=logged,
        logged_iterations=mark.logged_iterations + max(1, record.num_iterations),
        timestamp_s=mark.timestamp_s,
        walled=mark.walled,
    )


def observations_from_progress(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    previous: ProgressMark | None = None,
) -> list[StepObservation]:
    """The step observations of ``records`` (one job, in log order), records that end none
    left out; the rule and the arguments as :func:`step_observations`."""
    observations, _ = step_observations(records, read_time_s=read_time_s, previous=previous)
    return [o for o in observations if o is not None]
