"""Split a job's observed step into compute and exposed communication, and put it back together.

The model's step is the sum of the ``breakdown_s`` terms of ``planner predict``. Two parts are
recalibrated apart (issue 13, item 8):

* **compute**: ``compute`` (operators of the slowest stage), ``pp_bubble`` (idle time made of
  other stages' compute) and ``optimizer`` (a memory-bound kernel pass);
* **network**: ``tp_comm_exposed``, ``cp_comm_exposed``, ``ep_comm_exposed``,
  ``pp_comm_exposed`` and ``dp_comm_exposed``.

What a job shows. Every rank prints (or exports to Prometheus) ``rank_step`` timings
(``planner.specs.job.RankStepRecord``): ``compute_time_s``, its forward and backward time per
iteration without waiting for the gradient synchronisation, and ``step_time_s``, its wall time.
The slowest rank's compute sets when the synchronisation can start, so over recent complete
intervals the job's **window share** is ``r = sum(max compute) / sum(step)`` and the observed
step ``s`` (the ETA's robust mean) splits into the window ``w = r·s`` and the gap
``g = (1 - r)·s``. The window is what the forward and backward take, waits for stragglers
averaged out: in Megatron-LM the tensor-, context- and expert-parallel collectives and the
pipeline's point-to-point transfers run inside it (``forward_backward_func``), the
data-parallel gradient reduction and the optimizer step after it (``finalize_model_grads``,
``optimizer.step`` in ``megatron/training/training.py``: ``train_step``). So, with ``f_c`` and
``f_n`` the compute and network factors of the job:

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "COMPUTE_TERMS",
    "NETWORK_TERMS",
    "ModelSplit",
    "ObservedSplit",
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


def window_share(intervals: Iterable[tuple[float, float]]) -> float | None:
    """``sum(compute) / sum(step)`` over ``(max_compute_s, step_time_s)`` pairs of complete
    logging intervals (the slowest rank's compute and the step, seconds); None without a usable
    pair. Each compute counts at most its step: a rank cannot compute longer than its step."""
    compute = step = 0.0
    for pair in intervals:
        c, s = float(pair[0]), float(pair[1])
        if math.isfinite(c) and math.isfinite(s) and c > 0 and s > 0:
            compute += min(c, s)
            step += s
    if step <= 0:
        return None
    return compute / step


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
