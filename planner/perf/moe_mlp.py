"""The MoE MLP's operators on one GPU, per layer and microbatch: router, token permutation, the
local experts as (grouped) GEMMs, shared experts, activation and casts.

For ``tok = b·S/c`` local tokens (all of them on every tensor-parallel rank: the expert block
works on the gathered sequence), ``k = moe_router_topk``, ``E`` experts over ``e`` expert-parallel
ranks (``E/e`` local experts), ``t`` tensor parallel:

* **Routing imbalance** (a documented assumption, ``ScenarioArrays.moe_imbalance``): the
  busiest expert rank receives ``ρ`` times its even share of the ``tok·k`` routed tokens; the
  step waits for it. ``ρ = 1`` under forced load balancing (Megatron
  ``--moe-router-force-load-balancing``, Automodel's fake balanced gate), the scenario's
  ``moe_imbalance_factor``, else the efficiency model's ``moe_imbalance_factor`` (dropless
  routing with an auxiliary load-balancing loss, Fedus et al. 2021; Lepikhin et al. 2021).
  A capacity factor ``c`` (``moe_expert_capacity_factor``) drops what exceeds ``c`` times the
  even share: ``ρ = min(ρ, c)`` (Fedus et al. 2021 §2.2). Without expert parallelism one GPU
  holds every expert and the imbalance moves no work: ``ρ = 1``.
* **Experts**: ``E/e`` GEMM pairs of ``m = tok·k·e/E·ρ`` tokens each, widths over ``t``. With
  ``moe_grouped_gemm`` (Megatron ``--moe-grouped-gemm``: TE ``GroupedLinear`` / CUTLASS grouped
  GEMM) the local experts run as one launch whose tiles, each expert's ``M`` quantised to its
  own tiles, fill the SMs together; without it (Megatron's ``SequentialMLP``) one launch per
  expert, each quantised to whole waves (NVIDIA, "Matrix multiplication background": tile and
  wave quantisation). Small per-expert ``M`` (fine-grained MoE at large ``e``) is what lowers
  the throughput: tiles half empty in ``M`` and a thin reduction depth in the weight
  gradients.
* **Router**: the ``(tok, E, h)`` gate GEMM in 16 bits and the score/top-k/aux-loss kernels over
  the ``tok·E`` fp32 logits (``ROUTER_BYTES_PER_LOGIT`` forward and backward).
* **Permutation** (Megatron ``permute``/``unpermute``, TE ``moe_permute``): gathering each
  routed copy of a token into expert order reads the source rows and writes the copies
  (``2h`` bytes each, 16-bit), and the combine reads the copies and writes the weighted sums:
  ``4·h·(routed + sources)`` bytes per direction, ``sources`` the token rows read: the rank's own
  ``tok`` (all-to-all: it permutes before sending, and sorts the received chunks by local
  expert again, ``8·h·routed`` more when ``E/e > 1``), the distinct (token, rank) pairs it
  receives (DeepEP/flex: tokens arrive deduplicated per rank and are permuted there), or the
  gathered ``e·tok`` rows (all-gather dispatcher).
* Shared experts (``shared_expert_ffn_hidden_size``) on every token, the activation function on
  routed and shared widths (eager stacks: ``elementwise_traffic_factor`` times the bytes), FP8
  casts of the expert GEMMs' inputs and output gradients.
"""

from __future__ import annotations

import numpy as np

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Real
from planner.perf.optable import LayerGroups, OperatorTable
from planner.specs.model import MoETokenDispatcher

__all__ = [
    "ROUTER_BYTES_PER_LOGIT",
    "activation_bytes",
    "distinct_share",
    "moe_imbalance",
    "moe_mlp_ops",
]

ROUTER_BYTES_PER_LOGIT = 20.0
"""HBM bytes per fp32 router logit, each direction: the score function reads and writes them
(8), top-k reads them (4), the auxiliary load-balancing loss reads the scores and writes its
per-expert sums (8) (Megatron ``TopKRouter``: ``routing`` + ``apply_load_balancing_loss``)."""

_ALLTOALL = MoETokenDispatcher.ALLTOALL.code
_ALLGATHER = MoETokenDispatcher.ALLGATHER.code
_FLEX = MoETokenDispatcher.FLEX.code


def moe_imbalance(a: ScenarioArrays, eff: EfficiencyModel) -> Real:
    """Tokens on the busiest expert rank over its even share, ``ρ`` (module docstring)."""
    rho = ops.where(ops.isnan(a.moe_imbalance), eff.moe_imbalance_factor, a.moe_imbalance)
    capped = ops.where(
        ops.isnan(a.moe_expert_capacity_factor),
        rho,
        ops.minimum(rho, ops.maximum(a.moe_expert_capacity_factor, 1.0)),
    )
    return ops.where(a.expert_parallel > 1.0, capped, 1.0)


def distinct_share(a: ScenarioArrays, groups: Real) -> Real:
    """Probability that a token's ``k`` experts (drawn without replacement from ``E``, spread
    evenly over ``groups`` groups of ranks) include one of a given group: ``1 - C(E - E/g, k) /
    C(E, k)``. With ``g = e`` the expected distinct destination ranks of a token are ``e`` times
    this (DeepEP sends one copy per rank and one per node)."""
    experts = ops.maximum(a.num_experts, 1.0)
    outside = experts - experts / ops.maximum(groups, 1.0)
    topk = a.moe_router_topk
    most = int(np.max(topk)) if isinstance(topk, np.ndarray) and topk.size else int(topk)
    none = a.full(1.0)
    for i in range(most):  # the k draws, one at a time
        factor = ops.maximum(outside - i, 0.0) / ops.maximum(experts - i, 1.0)
        none = ops.where(i < topk, none * factor, none)
    return 1.0 - none


def activation_bytes(a: ScenarioArrays, *, backward: bool) -> Real:
    """HBM bytes per MLP activation element, forward or backward (a gated linear unit reads
    and writes more: SwiGLU's two inputs)."""
    if backward:
        return ops.where(a.gated_linear_unit, 10.0, 6.0)
    return ops.where(a.gated_linear_unit, 6.0, 4.0)


def moe_mlp_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    """Register one MoE MLP's forward and backward operators (module docstring)."""
    forward, backward = groups.forward, groups.backward
    tp, hidden, expert_ffn = a.tensor_parallel, a.hidden_size, a.moe_ffn_hidden_size
    tokens, topk, ep = a.tokens_per_microbatch, a.moe_router_topk, a.expert_parallel
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    rho = moe_imbalance(a, eff)
    local_experts = a.num_experts / ep
    per_expert = tokens * topk * ep / ops.maximum(a.num_experts, 1.0) * rho
    routed = tokens * topk * rho
    shared_ffn = a.shared_expert_ffn_hidden_size
    launch = ops.where(a.moe_grouped_gemm, local_experts, 1.0)
    for group, bwd in ((forward, False), (backward, True)):
        table.gemm(group, tokens, a.num_experts, hidden, lp=False, backward=bwd)
        for n, k in ((n_up * expert_ffn / tp, hidden), (hidden, expert_ffn / tp)):
            table.gemm(
                group, per_expert, n, k, count=local_experts, lp=lp, backward=bwd, per_launch=launch
            )
        table.gemm(group, tokens, n_up * shared_ffn / tp, hidden, lp=lp, backward=bwd)
        table.gemm(group, tokens, hidden, shared_ffn / tp, lp=lp, backward=bwd)
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    act_f, act_b = activation_bytes(a, backward=False), activation_bytes(a, backward=True)
    width = routed * expert_ffn + tokens * shared_ffn
    table.mem(forward, ew * act_f * width / tp, 2.0)
    table.mem(backward, ew * act_b * width / tp, 2.0)
    router = ROUTER_BYTES_PER_LOGIT * tokens * a.num_experts
    table.mem(forward, router, 3.0)
    table.mem(backward, router, 3.0)
    permutation = _permutation_bytes(a, routed)
    table.mem(forward, permutation, 2.0)
    table.mem(backward, permutation, 2.0)
    lp_f = ops.where(lp, 1.0, 0.0)
    cast_f = routed * (hidden + expert_ffn / tp) + tokens * (hidden + shared_ffn / tp)
    cast_b = routed * (hidden + n_up * expert_ffn / tp) + tokens * (hidden + n_up * shared_ffn / tp)
    table.mem(forward, lp_f * 3.0 * cast_f, 4.0)
    table.mem(backward, lp_f * 3.0 * cast_b, 4.0)


def _permutation_bytes(a: ScenarioArrays, routed: Real) -> Real:
    """Bytes one direction's permute + unpermute moves (module docstring)."""
    tokens, hidden, ep = a.tokens_per_microbatch, a.hidden_size, a.expert_parallel
    code = a.moe_token_dispatcher
    received = tokens * ep * distinct_share(a, ep)  # distinct (token, rank) pairs arriving
    sources = ops.where(code == _FLEX, received, ops.where(code == _ALLGATHER, tokens * ep, tokens))
    resort = ops.where((code == _ALLTOALL) & (a.num_experts > ep), 8.0 * hidden * routed, 0.0)
    return 4.0 * hidden * (routed + sources) + resort
