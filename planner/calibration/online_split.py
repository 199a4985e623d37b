"""Split a job's observed step into compute and exposed communication, and put it back together.

The model's step is the sum of the ``breakdown_s`` terms of ``planner predict``. Two parts are
recalibrated apart:

* **compute**: ``compute`` (operators of the slowest stage), ``pp_bubble`` (idle time made of
  other stages' compute) and ``optimizer`` (a memory-bound kernel pass);
* **network**: ``tp_comm_exposed``, ``cp_comm_exposed``, ``ep_comm_exposed``,
  ``pp_comm_exposed`` and ``dp_comm_exposed``.

What a job shows. Every rank prints (or exports to Prometheus) ``rank_step`` timings
(``planner.specs.job.RankStepRecord``): ``compute_time_s``, its forward and backward time per
iteration without waiting for the gradient synchronisation, and ``step_time_s``, its wall time.
The slowest rank's compute sets when the synchronisation can start: in every iteration, the
slowest of ``W`` ranks whose compute jitters by ``sigma`` arrives ``E[max of W normals]·sigma``
after the typical one (the expected maximum of normal samples; Blom 1958), which interval means
hide, so the window adds that wait to the slowest rank's mean (``window_share``; on a busy
2-core machine it is a third of the gap, on GPUs a percent or two of the compute). Over recent
complete intervals the job's **window share** is ``r = sum(window) / sum(step)`` and the
observed step ``s`` (the ETA's robust mean) splits into the window ``w = r·s`` and the gap
``g = (1 - r)·s``. The window is what the forward and backward take: in Megatron-LM the
tensor-, context- and expert-parallel collectives and the pipeline's point-to-point transfers
run inside it (``forward_backward_func``), the data-parallel gradient reduction and the
optimizer step after it (``finalize_model_grads``, ``optimizer.step`` in
``megatron/training/training.py``: ``train_step``). So, with ``f_c`` and ``f_n`` the
compute and network factors of the job:

    w = f_c·(compute + pp_bubble) + f_n·(tp + cp + ep + pp_comm)
    g = f_c·optimizer             + f_n·dp

two linear equations in two unknowns, solved exactly (Cramer's rule). They determine both
factors when the gradient reduction carries the gap: the determinant
``det = C_in·N_out - N_in·C_out`` must be positive and at least half of ``C_in·N_out`` (the
network terms inside the window, weighted by the optimizer's share of the gap, may not rival
the reduction). A job without network terms (one GPU, or everything hidden) gives its
compute factor alone, ``s / (C_in + C_out)``; a job whose network cannot be told apart (only
in-window communication, or a solution <= 0: nothing exposed to measure) gives what it can:
the compute factor when the in-window communication is under a tenth of the window, else
nothing (its whole-step ratio still counts).

Applying. A new job's step is ``f_c·(C_in + C_out) + f_n·(N_in + N_out)`` with each factor from
its own group estimate; so a job on another layout or GPU count, whose communication share
differs, inherits both (``combine``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Final

from planner.specs.job import RankStepRecord

__all__ = [
    "COMPUTE_TERMS",
    "NETWORK_TERMS",
    "IntervalTiming",
    "ModelSplit",
    "ObservedSplit",
    "expected_max_normal",
    "intervals_from_records",
    "iteration_jitter_s",
    "split_observed_step",
    "window_share",
]

COMPUTE_TERMS: Final = ("compute", "pp_bubble", "optimizer")
"""``breakdown_s`` terms the compute factor multiplies."""
NETWORK_TERMS: Final = (
    "tp_comm_exposed",
    "cp_comm_exposed",
    "ep_comm_exposed",
    "pp_comm_exposed",
    "dp_comm_exposed",
)
"""``breakdown_s`` terms the network factor multiplies."""
_WINDOW_COMPUTE: Final = ("compute", "pp_bubble")
_WINDOW_NETWORK: Final = (
    "tp_comm_exposed",
    "cp_comm_exposed",
    "ep_comm_exposed",
    "pp_comm_exposed",
)
MIN_CONDITION: Final = 0.5
"""Least ``det / (C_in·N_out)`` for the network factor to be told apart (module docstring)."""
MAX_WINDOW_NETWORK_SHARE: Final = 0.1
"""Largest in-window network share of the model's window for a compute-only observation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSplit:
    """The model's step in four parts, seconds: compute and network terms inside the forward /
    backward window (``compute_in``, ``network_in``) and after it (``compute_out``: the
    optimizer; ``network_out``: the data-parallel reduction)."""

    compute_in: float
    compute_out: float
    network_in: float
    network_out: float

    @property
    def compute_s(self) -> float:
        """All compute terms, seconds."""
        return self.compute_in + self.compute_out

    @property
    def network_s(self) -> float:
        """All network terms, seconds."""
        return self.network_in + self.network_out

    @classmethod
    def from_breakdown(cls, breakdown: Mapping[str, Any]) -> ModelSplit | None:
        """The split of a ``breakdown_s`` object (``planner predict``); None when a term is
        missing, not a finite number >= 0, or the compute is 0."""
        values: dict[str, float] = {}
        for term in COMPUTE_TERMS + NETWORK_TERMS:
            value = breakdown.get(term)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if not (math.isfinite(value) and value >= 0):
                return None
            values[term] = float(value)
        split = cls(
            compute_in=sum(values[t] for t in _WINDOW_COMPUTE),
            compute_out=values["optimizer"],
            network_in=sum(values[t] for t in _WINDOW_NETWORK),
            network_out=values["dp_comm_exposed"],
        )
        return split if split.compute_in > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedSplit:
    """A job's factors, where its timings determine them: ``compute_factor`` (observed over
    model compute terms) and ``network_factor`` (same for the network terms); None when not
    determined (module docstring)."""

    compute_factor: float | None
    network_factor: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class IntervalTiming:
    """One logging interval that every rank reported: the ``iterations`` it averages over, the
    step (the slowest rank's wall time per iteration, s) and each rank's compute time per
    iteration (s), as ``rank_step`` lines give them."""

    iterations: int
    step_s: float
    compute_s: tuple[float, ...]


def intervals_from_records(records: Iterable[RankStepRecord]) -> list[IntervalTiming]:
    """The logging intervals every rank of the job reported, in iteration order, from its
    ``rank_step`` records (a rank's latest record of an interval wins; ranks without a step
    time leave the step to the others; an interval no rank gave a step time is left out)."""
    by_iteration: dict[int, dict[int, RankStepRecord]] = {}
    for r in records:
        by_iteration.setdefault(r.iteration, {})[r.rank] = r
    out = []
    for iteration in sorted(by_iteration):
        reports = by_iteration[iteration]
        first = next(iter(reports.values()))
        steps = [r.step_time_s for r in reports.values() if r.step_time_s is not None]
        if len(reports) < first.world_size or not steps:
            continue
        out.append(
            IntervalTiming(
                iterations=first.num_iterations,
                step_s=max(steps),
                compute_s=tuple(reports[k].compute_time_s for k in sorted(reports)),
            )
        )
    return out


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """Expected maximum of ``n`` independent standard normal variables,
    ``integral x · n·phi(x)·Phi(x)^(n-1) dx`` by the trapezoid rule on [-8, 10] (to 1e-6;
    0.5642 for 2, 1.0294 for 4, 3.2414 for 1,000; Blom 1958 tabulates them); 0 for one."""
    if n <= 1:
        return 0.0
    dist = NormalDist()
    step = 0.01
    total = 0.0
    for k in range(1801):
        x = -8.0 + k * step
        weight = 0.5 if k in (0, 1800) else 1.0
        total += weight * x * n * dist.pdf(x) * dist.cdf(x) ** (n - 1)
    return total * step


def iteration_jitter_s(intervals: Sequence[IntervalTiming]) -> float:
    """Per-iteration standard deviation of a rank's compute time, seconds, from the spread of
    the ranks' interval means (0 without two ranks and two intervals). Each rank's mean offset
    and each interval's common level are removed first (two-way residuals), so persistent
    stragglers and load drifting for everyone do not count; a mean over ``n`` iterations has
    variance ``sigma^2 / n``."""
    usable = [i for i in intervals if len(i.compute_s) == len(intervals[0].compute_s)]
    ranks = len(usable[0].compute_s) if usable else 0
    if ranks < 2 or len(usable) < 2:
        return 0.0
    table = [list(i.compute_s) for i in usable]
    row_means = [sum(row) / ranks for row in table]
    centred = [[c - m for c in row] for row, m in zip(table, row_means, strict=True)]
    offsets = [sum(col) / len(centred) for col in zip(*centred, strict=True)]
    total = 0.0
    for row, interval in zip(centred, usable, strict=True):
        total += interval.iterations * sum((r - o) ** 2 for r, o in zip(row, offsets, strict=True))
    return math.sqrt(total / ((len(usable) - 1) * (ranks - 1)))


def window_share(intervals: Sequence[IntervalTiming]) -> float | None:
    """The share of the step spent before the synchronisation can start, over complete
    logging intervals: per interval the slowest rank's mean compute plus the wait for
    whichever rank is slowest in each iteration, ``E[max of W normals] · sigma ·
    (1 - 1/sqrt(n))`` (``iteration_jitter_s``; interval means hide it, and it is compute, not
    communication), summed and divided by the summed steps; each interval's window counts at
    most its step. None without a usable interval."""
    good = [
        i
        for i in intervals
        if i.compute_s
        and math.isfinite(i.step_s)
        and i.step_s > 0
        and all(math.isfinite(c) and c > 0 for c in i.compute_s)
    ]
    if not good:
        return None
    sigma = iteration_jitter_s(good)
    window = step = 0.0
    for i in good:
        wait = expected_max_normal(len(i.compute_s)) * sigma
        wait *= max(0.0, 1.0 - 1.0 / math.sqrt(max(i.iterations, 1)))
        window += min(max(i.compute_s) + wait, i.step_s)
        step += i.step_s
    return window / step


def split_observed_step(model: ModelSplit, step_s: float, share: float) -> ObservedSplit:
    """The compute and network factors of a job whose observed step ``step_s`` (s) spends
    ``share`` of its time in the forward/backward window (module docstring). Raises nothing;
    undetermined factors are None."""
    none = ObservedSplit(compute_factor=None, network_factor=None)
    if not (math.isfinite(step_s) and step_s > 0 and 0 < share <= 1):
        return none
    window, gap = share * step_s, (1.0 - share) * step_s
    c_in, c_out = model.compute_in, model.compute_out
    n_in, n_out = model.network_in, model.network_out
    if n_in + n_out <= 0:  # nothing to communicate: the whole step is compute
        return ObservedSplit(compute_factor=step_s / model.compute_s, network_factor=None)
    det = c_in * n_out - n_in * c_out
    if n_out > 0 and det >= MIN_CONDITION * c_in * n_out:
        f_c = (window * n_out - n_in * gap) / det
        f_n = (c_in * gap - c_out * window) / det
        if f_c > 0 and f_n > 0:
            return ObservedSplit(compute_factor=f_c, network_factor=f_n)
    if n_in <= MAX_WINDOW_NETWORK_SHARE * c_in:
        return ObservedSplit(compute_factor=window / c_in, network_factor=None)
    return none
