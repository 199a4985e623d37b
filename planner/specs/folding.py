"""MoE parallel folding: the expert tensor-parallel degree a layout runs with.

Megatron-Core ("MoE parallel folding", ``parallel_state.initialize_model_parallel``) carves
the expert groups from all the ranks of a pipeline stage: ``expert_tensor_parallel ·
expert_parallel · expert_data_parallel = tensor · context · data``, with
``expert_tensor_parallel`` (``--expert-tensor-parallel-size``) defaulting to the
tensor-parallel degree (``ModelParallelConfig.__post_init__``). The rule itself (the product
divides the stage's ranks) is in ``planner.specs.feasibility``; this module says which degree
a layout that does not state one runs with, under the framework that runs it.

NeMo Automodel never splits the routed experts over tensor parallelism: its MoE
tensor-parallel plan must leave every routed-expert and router module to the expert-parallel
mesh, which spans the ``data · context · tensor`` ranks of a pipeline stage
(``_resolve_moe_tp_plan`` -> ``_validate_moe_tp_plan`` raises for a plan that targets them,
nemo_automodel/components/moe/parallelizer.py and tp_plan_validation.py; ``ep_shard_size =
dp·cp·tp / ep``, components/distributed/mesh_utils.py, NVIDIA-NeMo/Automodel @
36044ad3d139363fb6c73c24af2e7c6b65ec52f6): its expert tensor-parallel degree is 1 whatever
the tensor-parallel degree.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from planner.specs.pipeline_split import DEFAULT_FRAMEWORK

__all__ = [
    "EXPERTS_WHOLE_UNDER_TENSOR_PARALLEL",
    "ExpertShape",
    "expert_tensor_parallel_of",
    "experts_split_by_tensor_parallel",
    "knob",
]

Int = int | NDArray[np.int64]


EXPERTS_WHOLE_UNDER_TENSOR_PARALLEL = frozenset({"automodel"})
"""Frameworks (``Framework`` values) whose routed experts stay whole on their expert-parallel
ranks under tensor parallelism: expert tensor parallelism 1 (module docstring)."""


def experts_split_by_tensor_parallel(framework: str) -> bool:
    """Whether ``framework`` may split the routed experts over expert tensor-parallel ranks
    (Megatron-Core's ``expert_tensor_parallel_size``, defaulting to the tensor-parallel
    degree); False for ``EXPERTS_WHOLE_UNDER_TENSOR_PARALLEL``."""
    return framework not in EXPERTS_WHOLE_UNDER_TENSOR_PARALLEL


class ExpertShape(Protocol):
    """What the expert tensor-parallel default reads of a model: a ``ModelSpec``, or the MoE
    shape a batch of candidates shares (``planner.perf.candidates``)."""

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model."""
        ...

    @property
    def moe_ffn_hidden_size(self) -> int:
        """One expert's FFN width."""
        ...


def knob(x: object, name: str) -> Any:
    """An optional knob of a layout (the expert tensor-parallel degree and the split fields of
    ``ParallelismSpec``, which ``CandidateColumns`` may lack), None when the layout lacks it."""
    return getattr(x, name, None)


def expert_tensor_parallel_of(
    m: ExpertShape, num_gpus: int, x: Any, framework: str = DEFAULT_FRAMEWORK
) -> Int:
    """The expert tensor-parallel degree of ``x`` under ``framework``: its
    ``expert_tensor_parallel`` when set. Unset: 1 where the framework keeps the experts whole
    (``experts_split_by_tensor_parallel``); else Megatron-Core's default, ``tensor_parallel``
    (``ModelParallelConfig``), when the expert groups fold into the stage with it; else the
    largest divisor of ``tensor_parallel`` that folds (and divides the expert FFN), the value a
    run stating only ``tensor_parallel`` and ``expert_parallel`` must have set
    (Qwen3-235B-A22B with tp 2, ep 64 on 64 GPUs: 1)."""
    given: Int | None = knob(x, "expert_tensor_parallel")
    if given is not None:
        return given
    t: Int = x.tensor_parallel
    if not m.is_moe:
        return t
    if not experts_split_by_tensor_parallel(framework):
        return t * 0 + 1  # 1, of the candidates' shape
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
