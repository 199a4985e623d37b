"""A batch-size ramp-up as work: how much of a full-batch iteration each iteration is; pure.

With Megatron-LM's ``--rampup-batch-size START INCREMENT SAMPLES`` the global batch starts at
``START`` and grows by ``INCREMENT`` every ``SAMPLES / ((GLOBAL - START) / INCREMENT)`` consumed
samples until it reaches the global batch (``megatron/core/num_microbatches_calculator.py``,
``RampupBatchsizeNumMicroBatchesCalculator``). An iteration's step time grows with its batch, so
the ETA measures the pace per *full-batch iteration* (the step time divided by the iteration's
batch over the global batch) and projects it over the work left (:func:`work`) instead of the
iterations left: the ramp moves the estimate without being a change of pace.
"""

from __future__ import annotations

import functools

import numpy as np

from planner.forecast.arguments import TrainingSchedule


@functools.lru_cache(maxsize=64)
def _cumulative(start: int, increment: int, samples: int, global_batch: int) -> np.ndarray:
    """Work done (full-batch iterations) after each iteration of the ramp; index 0 is 0."""
    increments = max(1, (global_batch - start) // increment)
    per_increment = samples / increments
    consumed, done, out = 0, 0.0, [0.0]
    while True:
        batch = min(global_batch, start + int(consumed / per_increment) * increment)
        if batch >= global_batch:
            break
        consumed += batch
        done += batch / global_batch
        out.append(done)
    return np.array(out)


def work(schedule: TrainingSchedule | None, begin: int, end: int) -> float:
    """Full-batch iterations in iterations ``begin + 1 .. end`` (``end - begin`` without a
    ramp-up)."""
    ramp = None if schedule is None else schedule.ramp()
    if ramp is None:
        return float(end - begin)
    cumulative = _cumulative(*ramp)
    last = len(cumulative) - 1

    def done(i: int) -> float:
        i = max(0, i)
        return float(cumulative[i]) if i <= last else float(cumulative[last]) + (i - last)

    return done(end) - done(begin)
