"""Progress records (from job logs) to step-time observations for the ETA; pure, no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence

from planner.forecast.eta import StepObservation
from planner.specs.job import ProgressRecord


def observations_from_progress(
    records: Sequence[ProgressRecord], *, read_time_s: float
) -> list[StepObservation]:
    """Step-time observations from ``records`` of one job, in log order.

    A record with ``step_time_s`` gives one observation of ``num_iterations`` iterations, observed
    at its printed ``timestamp_s`` or else at ``read_time_s`` (epoch s, when the lines were read).
    A record without a step time (torchtitan, which prints tokens per second per device but no
    step time) gives one only when it and the previous record both carry printed timestamps and
    the iteration advanced: ``(t1 - t0) / (i1 - i0)`` over ``i1 - i0`` iterations. Differences of
    read times are never used: they measure the polling, not the job. An iteration that goes
    backwards (restart from a checkpoint) starts over.
    """
    out: list[StepObservation] = []
    prev: ProgressRecord | None = None
    for record in records:
        time_s = record.timestamp_s if record.timestamp_s is not None else read_time_s
        if record.step_time_s is not None:
            out.append(
                StepObservation(
                    iteration=record.iteration,
                    step_time_s=record.step_time_s,
                    num_iterations=max(1, record.num_iterations),
                    time_s=time_s,
                )
            )
        elif (
            prev is not None
            and prev.timestamp_s is not None
            and record.timestamp_s is not None
            and record.iteration > prev.iteration
        ):
            dt = record.timestamp_s - prev.timestamp_s
            steps = record.iteration - prev.iteration
            if dt > 0 and math.isfinite(dt):
                out.append(
                    StepObservation(
                        iteration=record.iteration,
                        step_time_s=dt / steps,
                        num_iterations=steps,
                        time_s=record.timestamp_s,
                    )
                )
        prev = record
    return out
