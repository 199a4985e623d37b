"""Expert-parallel communication: the token exchange around each MoE layer's experts.

Each MoE layer dispatches every token's hidden state to the ranks holding its ``k`` experts and
combines the results back (Lepikhin et al. 2021, GShard): a dispatch and a combine forward, the
same two backward, over the ``e`` ranks of the expert-parallel group (``t_e`` apart in
Megatron-Core's expert rank order: the expert tensor-parallel degree, ``t`` unless folded), on
``tok`` local tokens (``b·S/c``, ``/t`` with sequence parallelism) of ``2h`` bytes; full
recompute, or selective recompute of the ``moe`` module, repeats the forward pair (6 instead of
4). The busiest rank receives ``ρ`` times its share
(``planner.perf.moe_mlp.moe_imbalance``). By dispatcher (``ModelSpec.moe_token_dispatcher_type``):

* ``alltoall`` (Megatron ``MoEAlltoAllTokenDispatcher``): NCCL all-to-all of every (token,
  expert) pair, ``tok·k·2h·ρ`` bytes per rank, the peers inside the NVLink domain over NVLink,
  the others over the NIC (``collectives.all_to_all_time_s``).
* ``allgather`` (``MoEAllGatherTokenDispatcher``): all-gather of the group's ``e·tok`` tokens,
  reduce-scatter of the outputs (no ``k`` factor, but every rank receives every token).
* ``flex`` (DeepEP, DeepSeek-AI 2025, ``MoEFlexTokenDispatcher``): one copy of a token per
  destination rank inside a node over NVLink and one per destination node over RDMA, forwarded
  over NVLink there; a token's ``k`` experts drawn from ``E`` hit a given rank (node) with
  probability ``1 - C(E - E/g, k)/C(E, k)`` (``moe_mlp.distinct_share``), so the NVLink bytes are
  ``tok·2h·ρ·(e-1)·P_rank`` and the RDMA bytes ``tok·2h·ρ·(nodes-1)·P_node``, moved concurrently
  (DeepEP's normal kernels reach ~153-158 GB/s of H800's ~160 GB/s NVLink and 43-47 GB/s of a
  50 GB/s RDMA NIC: the same NCCL bus-bandwidth fractions the link uses).

Hidden behind compute: ``ep_overlap_fraction`` by default (Megatron runs dispatch/combine on the
compute stream: 0); with ``overlap_moe_expert_parallel_comm`` (Megatron-Core's 1F1B all-to-all
overlap: the exchange of one microbatch runs under the attention/expert compute of another in
the merged forward-backward steady state) what exceeds that compute, at least
``(1 - moe_ep_comm_overlap_fraction)`` of it (the communication kernels take SMs from the
compute they overlap). Only the merged steps hide it: the warm-up forwards and the cool-down
backwards run alone and pay their exchange in full (megatron-core 0.14
``pipeline_parallel/combined_1f1b.py``: without pipelining "the forward step for the first
microbatch is executed alone, no a2a overlapping", and the last backward likewise;
``schedules.py``, ``get_pp_rank_microbatches``: the interleaved schedule's rank 0 runs
``2(p-1) + (v-1)·p`` warm-up chunk forwards (``microbatch_group_size_per_vp_stage`` defaults to
``p``) and "one extra micro-batch forward step before the 1f1b stages" with the overlap, of
its ``m·v`` chunk passes; Megatron-Core refuses the overlap with ``p > 1`` and no
interleaving, ``transformer_config.py``), so a share ``min(w / (m·v), 1)`` of the exchange,
``w`` the warm-up steps of the first rank (the one with the most), is not hidden. Only the
MoE layers' share of the layers pays it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import CommKind, EfficiencyModel
from planner.perf.memory import ACTIVATION_BYTES
from planner.perf.moe_mlp import distinct_share, moe_imbalance
from planner.perf.operators import LayerTimes
from planner.perf.ops import Real
from planner.specs.model import MoETokenDispatcher
from planner.specs.parallelism import Recompute

__all__ = ["ExpertParallelTimes", "expert_parallel_times", "token_exchange_s", "unmerged_share"]

_SELECTIVE, _FULL = Recompute.SELECTIVE.code, Recompute.FULL.code
_ALLGATHER = MoETokenDispatcher.ALLGATHER.code
_FLEX = MoETokenDispatcher.FLEX.code


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpertParallelTimes:
    """Exposed expert-parallel communication of one transformer layer per microbatch,
    averaged over dense and MoE layers, seconds (``layer_s``), and of one MoE layer alone
    (``moe_layer_s``, what each MoE multi-token-prediction layer adds); numbers, or arrays of
    shape ``(n,)``; 0 for dense models."""

    layer_s: Real
    moe_layer_s: Real


def token_exchange_s(a: ScenarioArrays, eff: EfficiencyModel, link: coll.Link) -> Real:
    """Seconds of one dispatch (or combine) of one MoE layer and microbatch (module
    docstring), before any overlap."""
    tokens = a.tokens_per_microbatch
    local = ops.where(a.sequence_parallel, tokens / a.tensor_parallel, tokens)
    token_bytes = local * a.hidden_size * ACTIVATION_BYTES
    rho = moe_imbalance(a, eff)
    e, stride = a.expert_parallel, a.expert_tensor_parallel  # MoE parallel folding
    all_to_all = coll.all_to_all_time_s(token_bytes * a.moe_router_topk * rho, e, stride, link)
    code = a.moe_token_dispatcher
    out = all_to_all
    if ops.any_(code == _ALLGATHER):
        gather = coll.all_gather_time_s(token_bytes * e, e, stride, link)
        out = ops.where(code == _ALLGATHER, gather, out)
    if ops.any_(code == _FLEX):
        ring = link.ring(e, stride)
        n_in = ring.members_inside
        nodes = ops.maximum(e / n_in, 1.0)
        nvlink = token_bytes * rho * (e - 1.0) * distinct_share(a, e)
        rdma = token_bytes * rho * (nodes - 1.0) * distinct_share(a, nodes)
        up_bw = link.scale_up_bus_bandwidth_bytes_per_s
        out_bw = ops.minimum(link.scale_out_bus_bandwidth_bytes_per_s, up_bw)
        flex = link.base_latency_s + ring.hop_latency_s + ops.maximum(nvlink / up_bw, rdma / out_bw)
        out = ops.where(code == _FLEX, ops.where(e > 1.0, flex, 0.0), out)
    return out


def unmerged_share(a: ScenarioArrays) -> Real:
    """Share of the chunk forwards (and backwards) that Megatron-Core's combined 1F1B runs
    alone, without a backward (forward) to overlap their exchange with (module docstring):
    the first pipeline rank's warm-up steps over its ``m·v`` chunk passes; one of ``m``
    without pipelining (``p`` of ``m`` for the non-interleaved ``p > 1`` Megatron-Core
    refuses)."""
    p, v, m = a.pipeline_parallel, ops.maximum(a.virtual_pipeline, 1.0), a.num_microbatches
    interleaved = 2.0 * (p - 1.0) + (v - 1.0) * p + 1.0
    warmup = ops.where(v > 1.0, interleaved, p)  # (p - 1) + 1 without interleaving
    return ops.minimum(warmup / ops.maximum(m * v, 1.0), 1.0)


def expert_parallel_times(
    a: ScenarioArrays, eff: EfficiencyModel, link: coll.Link, layer: LayerTimes | None = None
) -> ExpertParallelTimes:
    """Expert-parallel communication of every scenario of ``a`` (module docstring); ``layer``
    is the compute one layer's exchange can hide under with Megatron's 1F1B overlap (None:
    no compute to hide under)."""
    if not ops.any_(a.num_moe_layers > 0):  # skipped when no scenario of the batch has MoE
        zero = a.full(0.0)
        return ExpertParallelTimes(layer_s=zero, moe_layer_s=zero)
    selective_again = (a.recompute == _SELECTIVE) & a.recompute_moe
    full_again = ops.where(a.recompute == _FULL, 2.0 * a.recomputed_layer_fraction, 0.0)
    count = 4.0 + ops.where(selective_again, 2.0, full_again)
    exchange = count * token_exchange_s(a, eff, link)
    exposed = exchange * (1.0 - eff.comm_overlap(CommKind.EXPERT))
    if ops.any_(a.overlap_moe_expert_parallel_comm):
        hidden = eff.comm_overlap(CommKind.EXPERT_1F1B)
        window = layer.total_s if layer is not None else 0.0
        merged = ops.maximum(exchange * (1.0 - hidden), exchange - window)
        alone = unmerged_share(a)
        overlapped = alone * exchange + (1.0 - alone) * merged
        exposed = ops.where(a.overlap_moe_expert_parallel_comm, overlapped, exposed)
    moe_share = a.num_moe_layers / a.num_layers
    return ExpertParallelTimes(layer_s=moe_share * exposed, moe_layer_s=exposed)
