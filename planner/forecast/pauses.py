"""The pauses still ahead of a running job: evaluations and checkpoints projected over its
remaining iterations; pure.

A pause recurs at a regular iteration interval ``I`` when the job evaluates or checkpoints every
``I`` iterations (Megatron-LM: after each iteration that is a multiple of ``--eval-interval``,
``--save-interval``; MLPerf: every fixed number of samples). The intervals come from the job's
arguments (``planner.forecast.arguments``) or, without them, from its history
(``planner.forecast.history``): the largest ``I`` among the gaps between successive pauses (and
the first pause's iteration, as runs count from 0) such that at least ``MATCH_FRACTION`` (0.75)
of the pauses seen happened after a multiple of ``I``.

Each interval's *slots* are its multiples; the time per slot is the mean over the slots seen so
far (from the first point to the current iteration) of the pause time seen in them, 0 for a slot
with none (a pause too short to tell from the noise, or one made every other slot, is then
counted at its average). Before any slot is seen, an evaluation interval from the arguments gets
a prior (:func:`evaluation_prior_s`); once a slot shows a pause the pauses seen replace it, and
slots seen without one shrink it as ``PRIOR_SLOTS`` (0.5) slot against them. A checkpoint
interval without a seen slot adds nothing (its cost depends on the storage). Pauses that fit no
interval are projected at their average rate per iteration.

**The evaluation prior.** Megatron-LM's ``evaluate()`` (``megatron/training/training.py``,
NVIDIA/Megatron-LM at d98e8a64ddf34856e74b24714e3bedb2f5a39553) runs ``eval_iters`` iterations
under ``torch.no_grad()``, each ``forward_backward_func(..., forward_only=True)`` over the
microbatches of ``--eval-global-batch-size`` samples (``validate_args`` in
``megatron/training/arguments.py`` defaults it to ``--global-batch-size``). One evaluation
iteration is therefore the forward part of a training step's work on
``eval_global_batch_size / global_batch_size`` of its batch: ``EVAL_STEP_RATIO`` (1/3, the
forward's share of a step's forward and backward FLOPs, the backward costing twice the forward:
Narayanan et al. SC'21, §5.1 eq. 3) of the steady step time, log-sd ``EVAL_PRIOR_LOG_SD``
(0.7). The ratio is a FLOP share, not a measured time share, and real evaluations stray from it
both ways, which the log-sd covers (ratios of one evaluation iteration to the steady step time
around it, from the recorded logs of ``tests/data``): the dev job's CPU DDP runs (five logs)
0.19-0.39, medians 0.19-0.26 per run (its step also waits for the gradient all-reduce and the
optimizer step, which an evaluation does not run; against the forward and backward compute time
its ranks print, medians 0.30-0.40), Megatron-DeepSpeed's GPT-3 125M on 8 GPUs 0.73-0.89 (the
evaluations after iterations 100-500).

The slots ahead are the multiples in ``[iteration, train_iters]``: the pause after the current
iteration is not seen yet, and the one after the last iteration happens before the job ends.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from planner.forecast.arguments import TrainingSchedule
from planner.forecast.history import Pause

MATCH_FRACTION: Final = 0.75
EVAL_STEP_RATIO: Final = 1.0 / 3.0
EVAL_PRIOR_LOG_SD: Final = 0.7
PRIOR_SLOTS: Final = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class PausePeriod:
    """One recurring pause: every ``interval`` iterations, ``per_slot_s`` seconds on average
    (``slots_seen`` slots seen), ``slots_ahead`` still to come; ``source``: ``arguments`` or
    ``history``; ``kind``: ``evaluation``, ``checkpoint`` or ``pause``."""

    interval: int
    per_slot_s: float
    slots_seen: int
    slots_ahead: int
    source: str
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseForecast:
    """Seconds of pauses still ahead: ``mean_s`` and its variance ``var_s2``; ``periods`` the
    recurring ones, ``irregular_s`` the expected time of pauses that fit no interval."""

    mean_s: float = 0.0
    var_s2: float = 0.0
    periods: tuple[PausePeriod, ...] = field(default=())
    irregular_s: float = 0.0


def _slots(interval: int, low: int, high: int) -> int:
    """Multiples of ``interval`` (>= 1) in ``[low, high]``."""
    if high < low:
        return 0
    return max(0, high // interval - (max(low, 1) - 1) // interval)


def _matches(pause: Pause, interval: int) -> bool:
    """The pause's interval holds a multiple of ``interval`` after which it was made."""
    first = -(-max(pause.after_iteration, 1) // interval) * interval
    return first < max(pause.iteration, pause.after_iteration + 1)


def infer_interval(pauses: Sequence[Pause]) -> int | None:
    """The recurring interval of ``pauses`` (see the module docstring), None when none fits."""
    starts = sorted({p.after_iteration for p in pauses if p.after_iteration > 0})
    if not starts:
        return None
    candidates = {starts[0], *(b - a for a, b in itertools.pairwise(starts))}
    span = max(p.iteration - p.after_iteration for p in pauses)
    for interval in sorted(candidates, reverse=True):
        if interval < max(1, span):
            break
        matched = sum(_matches(p, interval) for p in pauses)
        if matched >= MATCH_FRACTION * len(pauses):
            return interval
    return None


def _period(
    *,
    interval: int,
    kind: str,
    source: str,
    pauses: Sequence[Pause],
    first_iteration: int,
    iteration: int,
    train_iters: int,
    prior_s: float | None,
) -> tuple[PausePeriod, float, list[Pause]]:
    """The period, the variance of its projected time, and the pauses it explains."""
    mine = [p for p in pauses if _matches(p, interval)]
    seen = _slots(interval, first_iteration, iteration - 1)
    ahead = _slots(interval, iteration, train_iters)
    values = [p.duration_s for p in mine]
    if seen > 0 and values:
        total = sum(values)
        mean = total / seen
        squares = sum(v * v for v in values)
        var_slot = max(0.0, squares / seen - mean**2)
        if seen < 3:  # few slots: their spread says little, keep a wide one
            var_slot = max(var_slot, (0.5 * mean) ** 2)
        var = ahead * var_slot + (ahead**2) * var_slot / seen
    elif prior_s is not None:
        # no pause seen yet, or slots seen without one (too short to tell from the noise)
        mean = prior_s * PRIOR_SLOTS / (PRIOR_SLOTS + seen)
        var = (ahead * mean) ** 2 * (math.exp(EVAL_PRIOR_LOG_SD**2) - 1.0)
    else:
        mean, var = 0.0, 0.0
    period = PausePeriod(
        interval=interval,
        per_slot_s=mean,
        slots_seen=seen,
        slots_ahead=ahead,
        source=source,
        kind=kind,
    )
    return period, var, mine


def evaluation_prior_s(schedule: TrainingSchedule, step_time_s: float) -> float | None:
    """Expected seconds of one evaluation before any is seen (module docstring, "The evaluation
    prior"): ``eval_iters`` forward-only iterations of ``eval_global_batch_size`` samples at
    ``EVAL_STEP_RATIO`` of the steady step time ``step_time_s`` (s) per training global batch.
    None when the arguments state no ``eval_iters``."""
    if not schedule.eval_iters:
        return None
    batches = 1.0
    if schedule.eval_global_batch_size and schedule.global_batch_size:
        batches = schedule.eval_global_batch_size / schedule.global_batch_size
    return schedule.eval_iters * batches * step_time_s * EVAL_STEP_RATIO


def project_pauses(
    pauses: Sequence[Pause],
    *,
    schedule: TrainingSchedule | None,
    first_iteration: int,
    iteration: int,
    train_iters: int,
    steady_iterations: int,
    step_time_s: float,
) -> PauseForecast:
    """Pause time still ahead of a job at ``iteration`` of ``train_iters`` (see the module
    docstring). ``pauses``: those seen (``ProgressHistory.pauses``) since ``first_iteration``;
    ``steady_iterations``: iterations seen outside warm-up; ``step_time_s``: the steady step
    time (s), for the evaluation prior."""
    if iteration >= train_iters:
        return PauseForecast()
    periods: list[PausePeriod] = []
    var = 0.0
    explained: set[int] = set()
    wanted: list[tuple[int, str, str, float | None]] = []
    if schedule is not None and schedule.eval_interval:
        prior = evaluation_prior_s(schedule, step_time_s)
        wanted.append((schedule.eval_interval, "evaluation", "arguments", prior))
    if (
        schedule is not None
        and schedule.save_interval
        and schedule.save_interval != (schedule.eval_interval or 0)
    ):
        wanted.append((schedule.save_interval, "checkpoint", "arguments", None))
    if not wanted:
        inferred = infer_interval(pauses)
        if inferred is not None:
            wanted.append((inferred, "pause", "history", None))
    for interval, kind, source, prior in wanted:
        left = [p for p in pauses if id(p) not in explained]
        period, period_var, mine = _period(
            interval=interval,
            kind=kind,
            source=source,
            pauses=left,
            first_iteration=first_iteration,
            iteration=iteration,
            train_iters=train_iters,
            prior_s=prior,
        )
        explained.update(id(p) for p in mine)
        periods.append(period)
        var += period_var
    rest = [p for p in pauses if id(p) not in explained]
    irregular = 0.0
    if rest and steady_iterations > 0:
        rate = sum(p.duration_s for p in rest) / steady_iterations
        irregular = rate * (train_iters - iteration)
        var += irregular**2 / len(rest)
    mean = sum(p.per_slot_s * p.slots_ahead for p in periods) + irregular
    return PauseForecast(mean_s=mean, var_s2=var, periods=tuple(periods), irregular_s=irregular)


def final_pause_s(periods: Sequence[PausePeriod], train_iters: int) -> float:
    """Expected pause after the last iteration: the per-slot time of each recurring pause whose
    interval divides ``train_iters`` (it is in every ETA's pauses ahead, so a shutdown learnt
    from a finished job leaves it out)."""
    return sum(p.per_slot_s for p in periods if p.interval > 0 and train_iters % p.interval == 0)
