"""MoE parallel folding: the expert tensor-parallel degree a layout runs with.

Megatron-Core ("MoE parallel folding", ``parallel_state.initialize_model_parallel``) carves
the expert groups from all the ranks of a pipeline stage: ``expert_tensor_parallel ·
expert_parallel · expert_data_parallel = tensor · context · data``, with
``expert_tensor_parallel`` (``--expert-tensor-parallel-size``) defaulting to the
tensor-parallel degree (``ModelParallelConfig.__post_init__``). The rule itself (the product
divides the stage's ranks) is in ``planner.specs.feasibility``; this module says which degree
a layout that does not state one runs with.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.specs.model import ModelSpec

__all__ = ["expert_tensor_parallel_of", "knob"]

Int = int | NDArray[np.int64]


def knob(x: object, name: str) -> Any:
    """An optional knob of a layout (the expert tensor-parallel degree and the split fields of
    ``ParallelismSpec``, which ``CandidateColumns`` may lack), None when the layout lacks it."""
    return getattr(x, name, None)


def expert_tensor_parallel_of(m: ModelSpec, num_gpus: int, x: Any) -> Int:
    """The expert tensor-parallel degree of ``x``: its ``expert_tensor_parallel`` when set.
    Unset: Megatron-Core's default, ``tensor_parallel`` (``ModelParallelConfig``), when the
    expert groups fold into the stage with it; else the largest divisor of ``tensor_parallel``
    that folds (and divides the expert FFN), the value a run stating only ``tensor_parallel``
    and ``expert_parallel`` must have set (Qwen3-235B-A22B with tp 2, ep 64 on 64 GPUs: 1)."""
    given: Int | None = knob(x, "expert_tensor_parallel")
    if given is not None:
        return given
    t: Int = x.tensor_parallel
    if not m.is_moe:
        return t
    if isinstance(t, np.ndarray):  # the same choice for a batch: largest folding divisor wins
        ranks_a = t * x.context_parallel * x.data_parallel
        out: NDArray[np.int64] = t.copy()
        for d in range(1, int(t.max(initial=1)) + 1):
            fits = (t % d == 0) & (ranks_a % (d * x.expert_parallel) == 0)
            out = np.where(fits & (m.moe_ffn_hidden_size % d == 0), d, out)
        return out
    ranks = int(t) * int(x.context_parallel) * int(x.data_parallel)
    e = int(x.expert_parallel)
    for d in range(int(t), 0, -1):
        if int(t) % d == 0 and ranks % (d * e) == 0 and m.moe_ffn_hidden_size % d == 0:
            return d
    return t
