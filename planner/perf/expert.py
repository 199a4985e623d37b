"""Expert-parallel communication: the token all-to-alls around each MoE layer's experts.

Each MoE layer dispatches every token's hidden state to the ranks holding its ``topk`` experts
and combines the results back: two all-to-alls forward and two backward over the ``e`` ranks
of the expert-parallel group (Lepikhin et al. 2021, GShard; Megatron-Core
``MoEAlltoAllTokenDispatcher``), each of ``tok·topk·h`` 16-bit values (``tok = b·S/c`` local
tokens, ``/t`` with sequence parallelism); full recompute repeats the forward pair (6 instead
of 4). Expert ranks sit ``t_e`` apart in Megatron-Core's expert rank order (the expert
tensor-parallel degree, ``t`` unless folded). ``ep_overlap_fraction`` of
it hides behind compute. Only the MoE layers' share of the layers pays it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import CommKind, EfficiencyModel
from planner.perf.memory import ACTIVATION_BYTES
from planner.perf.ops import Real
from planner.specs.parallelism import Recompute

__all__ = ["ExpertParallelTimes", "expert_parallel_times"]

_FULL = Recompute.FULL.code


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpertParallelTimes:
    """Exposed expert-parallel communication of one transformer layer per microbatch,
    averaged over dense and MoE layers, seconds (``layer_s``; a number, or an array of shape
    ``(n,)``; 0 for dense models)."""

    layer_s: Real


def expert_parallel_times(
    a: ScenarioArrays, eff: EfficiencyModel, link: coll.Link
) -> ExpertParallelTimes:
    """Expert-parallel communication of every scenario of ``a`` (module docstring)."""
    if not ops.any_(a.num_moe_layers > 0):  # skipped when no scenario of the batch has MoE
        return ExpertParallelTimes(layer_s=a.full(0.0))
    moe_share = a.num_moe_layers / a.num_layers
    tokens = a.tokens_per_microbatch
    local = ops.where(a.sequence_parallel, tokens / a.tensor_parallel, tokens)
    size = local * a.moe_router_topk * a.hidden_size * ACTIVATION_BYTES
    # expert-parallel ranks sit expert_tensor_parallel apart (MoE parallel folding)
    all_to_all = coll.all_to_all_time_s(size, a.expert_parallel, a.expert_tensor_parallel, link)
    keep = 1.0 - eff.comm_overlap(CommKind.EXPERT)
    count = ops.where(a.recompute == _FULL, 6.0, 4.0)
    return ExpertParallelTimes(layer_s=moe_share * all_to_all * count * keep)
