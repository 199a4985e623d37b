"""Progress records (from job logs, metrics or the scheduler) to step-time observations for the
ETA; pure, no I/O.

This is the one rule for "what a step time is" (one rule, one place: ``docs/architecture.md``):
the service's ingest loop (``planner.service.loops.progress``), the tests and the benchmarks
(``benchmarks/eta_band_coverage.py``, ``benchmarks/recalibration.py``) all call it.

The rule:

* A record that prints its step time (Megatron-LM's ``elapsed time per iteration``, the JSON
  ``step`` events) gives one observation of ``num_iterations`` iterations, observed at its
  printed ``timestamp_s`` or, when it has none, at ``read_time_s`` (when the lines were read).
* A record without a step time (torchtitan prints tokens per second but no step time; a
  Kubeflow TrainJob reports only a progress ratio) gives one only when it and the previous record
  both carry printed timestamps and the iteration advanced: ``(t1 - t0) / (i1 - i0)`` over
  ``i1 - i0`` iterations. Differences of read times are never used: they measure the polling, not
  the job (a log read every 15 s would turn a 2 s step into anything from 0 to 15 s).
* The previous record may come from an earlier read (``previous``, a :class:`ProgressMark`), so a
  rate spans two polls of the same job.
* An iteration that goes backwards (restart from a checkpoint) starts over: it pairs with nothing
  and becomes the new previous record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from planner.forecast.eta import StepObservation
from planner.specs.job import ProgressRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressMark:
    """The last progress record of a job that the rule has seen: its ``iteration`` and its
    printed ``timestamp_s`` (epoch s; None when the record printed no time)."""

    iteration: int
    timestamp_s: float | None = None

    @classmethod
    def of(cls, record: ProgressRecord) -> ProgressMark:
        """The mark a record leaves for the next one."""
        return cls(iteration=record.iteration, timestamp_s=record.timestamp_s)


def step_observations(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    previous: ProgressMark | None = None,
) -> tuple[list[StepObservation | None], ProgressMark | None]:
    """One entry per record of ``records`` (one job, in log order): its step-time observation,
    or None when the record gives none (see the module docstring); and the mark the last record
    leaves (``previous`` when ``records`` is empty).

    ``read_time_s``: epoch seconds when the records were read; ``previous``: the mark of the
    last record of an earlier read of the same job, None at the start.
    """
    out: list[StepObservation | None] = []
    prev = previous
    for record in records:
        out.append(_observe(record, prev, read_time_s))
        prev = ProgressMark.of(record)
    return out, prev


def _observe(
    record: ProgressRecord, prev: ProgressMark | None, read_time_s: float
) -> StepObservation | None:
    if record.step_time_s is not None:
        return StepObservation(
            iteration=record.iteration,
            step_time_s=record.step_time_s,
            num_iterations=max(1, record.num_iterations),
            time_s=record.timestamp_s if record.timestamp_s is not None else read_time_s,
        )
    if (
        prev is None
        or prev.timestamp_s is None
        or record.timestamp_s is None
        or record.iteration <= prev.iteration
    ):
        return None
    dt = record.timestamp_s - prev.timestamp_s
    if not (dt > 0 and math.isfinite(dt)):
        return None
    steps = record.iteration - prev.iteration
    return StepObservation(
        iteration=record.iteration,
        step_time_s=dt / steps,
        num_iterations=steps,
        time_s=record.timestamp_s,
    )


def observations_from_progress(
    records: Sequence[ProgressRecord],
    *,
    read_time_s: float,
    previous: ProgressMark | None = None,
) -> list[StepObservation]:
    """The step-time observations of ``records`` (one job, in log order), records that give
    none left out; the rule and the arguments as :func:`step_observations`."""
    observations, _ = step_observations(records, read_time_s=read_time_s, previous=previous)
    return [o for o in observations if o is not None]
