"""What a design-space search ranks by (``Objective``), in minimisation form.

* ``time``: iteration time, s;
* ``time-to-train``: ``training.total_tokens / tokens_per_s`` (or ``train_iters · iteration``), s;
* ``cost``: GPU time to train, ``num_gpus · time_to_train_s`` (GPU-seconds; reported in
  GPU-hours), or GPU-seconds per token when the scenario gives no token budget;
* ``tokens-per-gpu``: tokens/s per GPU (maximised, so negated).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError

__all__ = ["OBJECTIVES", "OBJECTIVE_FIELD", "Objective", "as_objective", "objective_values"]

FloatArray = NDArray[np.float64]


class Objective(StrEnum):
    """What the top-k ranks by (see the module docstring)."""

    TIME = "time"
    TIME_TO_TRAIN = "time-to-train"
    COST = "cost"
    TOKENS_PER_GPU = "tokens-per-gpu"


OBJECTIVES = tuple(o.value for o in Objective)

OBJECTIVE_FIELD = {
    Objective.TIME: "iteration_time_s",
    Objective.TIME_TO_TRAIN: "time_to_train_s",
    Objective.COST: "gpu_seconds",
    Objective.TOKENS_PER_GPU: "tokens_per_s_per_gpu",
}
"""The quantity each objective ranks by, as named in the Pareto criteria."""


def as_objective(value: Objective | str) -> Objective:
    """``value`` as an ``Objective``; ``SpecError("objective", ...)`` naming the allowed ones."""
    try:
        return Objective(value)
    except ValueError:
        raise SpecError(
            "objective", f"unknown objective {value!r}; use one of {', '.join(OBJECTIVES)}"
        ) from None


def objective_values(
    objective: Objective,
    *,
    iteration_time_s: FloatArray,
    tokens_per_iteration: FloatArray,
    num_gpus: FloatArray,
    total_tokens: float | None,
    train_iters: float | None,
) -> FloatArray:
    """The objective of each candidate in minimisation form (``tokens-per-gpu`` negated).

    Arrays of shape ``(n,)``: seconds, tokens, GPUs. Time to train follows ``predict_batch``:
    ``total_tokens / tokens_per_s`` when a token budget is given, else
    ``train_iters · iteration_time_s``; NaN when neither is.
    """
    tokens_per_s = tokens_per_iteration / iteration_time_s
    if objective is Objective.TIME:
        return iteration_time_s
    if objective is Objective.TOKENS_PER_GPU:
        out: FloatArray = -(tokens_per_s / num_gpus)
        return out
    if total_tokens is not None:
        ttt = total_tokens / tokens_per_s
    elif train_iters is not None:
        ttt = train_iters * iteration_time_s
    else:
        ttt = np.full_like(iteration_time_s, np.nan)
    if objective is Objective.TIME_TO_TRAIN:
        return ttt
    if total_tokens is None and train_iters is None:
        per_token: FloatArray = num_gpus / tokens_per_s  # GPU-seconds per token
        return per_token
    cost: FloatArray = num_gpus * ttt
    return cost
