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
  even share: ``ρ = min(ρ, c)`` (Fedus et al. 2021 §2.2); drop-and-pad
  (``moe_pad_expert_input_to_capacity``) pads every expert's input to its capacity: ``ρ = c``
  (Megatron-Core ``MoEAlltoAllTokenDispatcher.preprocess``: each local expert gets
  ``capacity · tp · ep`` rows). Without expert parallelism one GPU holds every expert and the
  imbalance moves no work: ``ρ = 1``.
* **Experts**: ``E/e`` GEMM pairs of ``m = tok·k·e/E·ρ`` tokens each, widths over ``t``. With
  ``moe_grouped_gemm`` (Megatron ``--moe-grouped-gemm``: TE ``GroupedLinear`` / CUTLASS grouped
  GEMM) the local experts run as one launch whose tiles, each expert's ``M`` quantised to its
  own tiles, fill the SMs together; without it (Megatron's ``SequentialMLP``) one launch per
  expert, each quantised to whole waves (NVIDIA, "Matrix multiplication background": tile and
  wave quantisation). Transformer Engine's ``GroupedLinear`` (Megatron-Core's
  ``TEGroupedMLP``) is in between: one cuBLAS GEMM per expert on a pool of
  ``grouped_gemm_streams`` (4) CUDA streams, so the tiles of at most that many experts share
  the SMs at a time (``planner.perf.frameworks``). Small per-expert ``M`` (fine-grained MoE
  at large ``e``) is what lowers the throughput: tiles half empty in ``M`` and a thin
  reduction depth in the weight gradients.
* **Router**: the ``(tok, E, h)`` gate GEMM in 16 bits and the score/top-k/aux-loss kernels over
  the ``tok·E`` fp32 logits (``ROUTER_BYTES_PER_LOGIT`` forward and backward), the forward in
  the framework's kernel count (``router_forward_kernels``: Megatron-Core's fused router
  launches 31, 17 with DeepEP's preprocessing), the backward in 3; none under a
  round-robin gate (``moe_router_round_robin``: NeMo Automodel's ``FakeBalancedGate`` has no
  parameters and computes constant weights ``1/k`` and ``arange`` indices).
* **Permutation** (Megatron ``permute``/``unpermute``, TE ``moe_permute``): gathering each
  routed copy of a token into expert order reads the source rows and writes the copies
  (``2h`` bytes each, 16-bit), and the combine reads the copies and writes the weighted sums:
  ``4·h·(routed + sources)`` bytes per direction, ``sources`` the token rows read: the rank's own
  ``tok`` (all-to-all: it permutes before sending, and sorts the received chunks by local
  expert again, ``8·h·routed`` more when ``E/e > 1``), the distinct (token, rank) pairs it
  receives (DeepEP/flex: tokens arrive deduplicated per rank and are permuted there), or the
  gathered ``e·tok`` rows (all-gather dispatcher).
* **Expert biases** (``moe_expert_bias``, GPT-OSS): after grouped GEMMs that take no bias, the
  stacks add each local expert's bias in eager PyTorch, splitting the expert-ordered rows per
  expert and concatenating the sums again: the down projection's ``t + b·p`` (the bias weighted
  by the routing probability, since the combine sums the weighted outputs; Megatron-Core
  ``TEGroupedMLP._apply_bias`` @ ``core_v0.15.0``, Automodel ``GroupedExpertsDeepEP._apply_bias``
  @ ``2c236e081``) and, where the framework's grouped GEMM does not add it
  (``expert_up_bias_in_gemm`` false: Automodel), the up projection's ``t + b``.
  ``EXPERT_BIAS_BYTES`` per element of the ``routed`` rows, forward and backward, and two to
  four kernels per local expert.
* **Clamped activation** (``activation_func_clamp_value``, GPT-OSS) where the stack clamps
  outside its fused activation (``activation_clamp_eager``: Megatron-Core's ``chunk`` /
  ``clamp`` / ``torch.cat`` before the compiled quick-GeGLU): ``CLAMP_BYTES`` per element of
  the routed up-projection output, forward (again where selective recompute repeats
  ``moe_act``) and backward.
* Shared experts (``shared_expert_ffn_hidden_size``) on every token, the activation function on
  routed and shared widths (eager stacks: ``elementwise_traffic_factor`` times the bytes), the
  recipe's quantisation of the expert GEMMs' inputs and output gradients
  (``planner.perf.precision``).
* **Quantisation kernels** (``quantize_kernels``): Transformer Engine's ``GroupedLinear``
  quantises each local expert's slice of an operand on its own (``tex.split_quantize``;
  ``multi_tensor_quantize_impl``, NVIDIA/TransformerEngine
  ``transformer_engine/pytorch/csrc/extensions/cast.cpp`` @ ``v2.7`` and ``v2.9``: "Currently
  only have fused kernel for FP8 delayed scaling", every other recipe "Quantize kernels
  individually"), each with the recipe's kernels (``QUANTIZE_KERNELS_PER_TENSOR``). Two
  operands per direction (forward: the FC1 and FC2 inputs; backward: the two output
  gradients), so a current-scaling layer with 16 local experts launches 96 quantisation
  kernels a direction where delayed scaling launches 2 on Hopper. The fused delayed-scaling
  kernel (``nvte_multi_cast_transpose``) runs only when every slice has both a row-wise copy and
  a transposed one (``with_fused_kernel`` is false when ``nvte_tensor_columnwise_data`` is
  null, same file); on Blackwell TE makes no transpose (``planner.perf.precision``), so there
  delayed scaling quantises each slice on its own too. Each kernel takes at least
  ``kernel_min_time_s``: with a few thousand tokens per expert (micro-batch 1) that floor,
  not the bytes, sets the casts' time. The shared experts' two operands are single tensors.

The routed experts' part (``OperatorTable``'s ``routed`` share, ``OperatorTimes.moe_routed_*``,
the prediction's ``moe_routed_compute_s``): the router, the permutation, the experts' GEMMs,
their operands' casts, expert biases and clamp, and of the one activation kernel over the
routed and shared widths the routed elements' share; the shared experts and the host wait
(``moe_host_exposed_s``) are not.
"""

from __future__ import annotations

import math

import numpy as np

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Real
from planner.perf.optable import LayerGroups, OperatorTable
from planner.perf.precision import any_layout_fp8_gemms, quantize_bytes
from planner.specs.model import MoETokenDispatcher
from planner.specs.parallelism import Fp8Recipe, Recompute

__all__ = [
    "CLAMP_BYTES",
    "EXPERT_BIAS_BYTES",
    "QUANTIZE_KERNELS_PER_TENSOR",
    "ROUTER_BYTES_PER_LOGIT",
    "activation_bytes",
    "distinct_share",
    "moe_host_exposed_s",
    "moe_imbalance",
    "moe_mlp_ops",
    "quantize_kernels",
    "router_forward_kernels",
]

ROUTER_BYTES_PER_LOGIT = 20.0
"""HBM bytes per fp32 router logit, each direction: the score function reads and writes them
(8), top-k reads them (4), the auxiliary load-balancing loss reads the scores and writes its
per-expert sums (8) (Megatron ``TopKRouter``: ``routing`` + ``apply_load_balancing_loss``)."""

QUANTIZE_KERNELS_PER_TENSOR = (0.0, 1.0, 3.0, 1.0, 1.0, 3.0)
"""Kernels Transformer Engine launches to quantise one tensor, by ``Fp8Recipe.code`` (0:
16-bit training, nothing): ``delayed`` one cast(-transpose) (``Float8Quantizer::quantize``),
``tensorwise`` three, the amax, the scale from it and the cast
(``Float8CurrentScalingQuantizer::quantize_impl``: ``nvte_compute_amax``,
``nvte_compute_scale_from_amax``, ``nvte_quantize_v2``), ``blockwise`` and ``mxfp8`` one
(``Float8BlockQuantizer::quantize``, ``MXFP8Quantizer::quantize``: ``nvte_quantize_v2``),
``nvfp4`` three, the amax, the row-wise cast and the column-wise Hadamard-transform cast
(``NVFP4Quantizer::quantize_impl``, v2.9). NVIDIA/TransformerEngine
``transformer_engine/pytorch/csrc/quantizer.cpp`` @ ``v2.7`` (NVFP4 @ ``v2.9``)."""

_QUANTIZE_KERNELS = np.array(QUANTIZE_KERNELS_PER_TENSOR)
_DELAYED = Fp8Recipe.DELAYED.code

EXPERT_BIAS_BYTES = {
    "down_forward": 12.0,
    "down_backward": 16.0,
    "down_backward_fixed_probs": 10.0,
    "up_forward": 8.0,
    "up_backward": 6.0,
}
"""HBM bytes per 16-bit element of the eager expert-bias adds (module docstring), each op
reading its operands and writing its result. Down projection, forward: ``b·p`` written (2),
``t + b·p`` reads two and writes one (6), ``torch.cat`` reads and writes (4); backward: the
bias gradient ``sum(g·p)`` (a product written and read again, ``g`` read: 6), the probability
gradient ``sum(g·b)`` (6; none under a round-robin gate, whose constant weights take no
gradient: Automodel ``FakeBalancedGate``), and the split's backward concatenating the
per-expert gradients (4). Up projection: ``t + b`` (4) and the ``cat`` (4) forward; the bias
gradient's reduction (2) and the concatenated gradients (4) backward."""

CLAMP_BYTES = (8.0, 10.0)
"""HBM bytes per 16-bit element of the gated activation's input clamped in eager PyTorch,
forward and backward: each half clamped (read and write: 4 over the whole) and ``torch.cat``
back together (4); backward, each half's clamp gradient (the gradient and the saved input
read, the gradient written: 6) and the halves' gradients concatenated (4)."""

_SELECTIVE = Recompute.SELECTIVE.code
_ALLTOALL = MoETokenDispatcher.ALLTOALL.code
_ALLGATHER = MoETokenDispatcher.ALLGATHER.code
_FLEX = MoETokenDispatcher.FLEX.code


def moe_imbalance(a: ScenarioArrays, eff: EfficiencyModel) -> Real:
    """Tokens on the busiest expert rank over its even share, ``ρ`` (module docstring)."""
    rho = ops.where(ops.isnan(a.moe_imbalance), eff.moe_imbalance_factor, a.moe_imbalance)
    capacity = ops.maximum(a.moe_expert_capacity_factor, 1.0)
    padded = ops.where(a.moe_pad_expert_input_to_capacity, capacity, ops.minimum(rho, capacity))
    capped = ops.where(ops.isnan(a.moe_expert_capacity_factor), rho, padded)
    return ops.where(a.expert_parallel > 1.0, capped, 1.0)


def moe_host_exposed_s(a: ScenarioArrays, forward_s: Real) -> Real:
    """Seconds one MoE layer's forward waits for the host, per microbatch: ``max(0, H - G)``
    for the host's issue time ``H = moe_host_forward_s + moe_host_expert_forward_s · E/e``
    (``E/e`` local experts; ``planner.perf.frameworks``) and the forward's GPU time ``G``
    (``forward_s``). The stack reads the per-expert token counts on the host once per MoE
    layer forward, so the host cannot issue the next layer's forward before this one's GPU
    work reaches that read; the backward reads none and overlaps its issue with the GPU.
    0 for stacks without the host read (both constants 0) and under drop-and-pad
    (``moe_pad_expert_input_to_capacity``): Megatron-Core's ``MoEAlltoAllTokenDispatcher``
    then builds the per-expert counts on the host from the capacity (``torch.full``) and
    leaves its sync point at ``no_sync`` (``preprocess``, NVIDIA/Megatron-LM
    ``megatron/core/transformer/moe/token_dispatcher.py`` @ ``0014f13713bf``), so the host
    runs ahead of the GPU as in a dense layer. 0 as well under a full-iteration CUDA graph
    (``training.cuda_graphs: full_iteration``, ``full_iteration_cuda_graph``): the loop
    replays one graph of the whole forward and backward, so the host issues nothing inside it
    (a dropless layer is capturable only without a device-to-host read, which stream capture
    forbids: Megatron-Core's experts then take the token counts as a device tensor,
    ``TEGroupedMLP`` with ``moe_use_grouped_tensor``, NVIDIA/Megatron-LM
    ``megatron/core/transformer/moe/experts.py`` @ ``d98e8a64dd``). Per-layer graphs
    (``per_layer``) keep the floor: the dispatcher still waits for the counts once per layer
    (Megatron-Core 0.15 only moves the copy before the all-to-all when ``moe_preprocess`` is
    graphed, ``token_dispatcher.py`` @ ``0d8e0714cd29``), and what they save of the rest of the
    issue time is not measured."""
    local_experts = a.num_experts / ops.maximum(a.expert_parallel, 1.0)
    host = a.moe_host_forward_s + a.moe_host_expert_forward_s * local_experts
    issued = ops.logical_not(a.moe_pad_expert_input_to_capacity | a.full_iteration_cuda_graph)
    reads = (a.num_experts > 0) & issued
    return ops.where(reads, ops.maximum(host - forward_s, 0.0), 0.0)


def _none_drawn(total: Real, marked: Real, draws: Real) -> Real:
    """Probability that ``draws`` draws without replacement from ``total`` items miss all
    ``marked`` ones: ``C(total - marked, draws) / C(total, draws)`` (``draws`` rounded up)."""
    most = int(np.max(draws)) if isinstance(draws, np.ndarray) and draws.size else int(draws)
    none: Real = 1.0
    for i in range(int(np.ceil(most))):
        factor = ops.maximum(total - marked - i, 0.0) / ops.maximum(total - i, 1.0)
        none = ops.where(i < draws, none * factor, none)
    return none


def distinct_share(a: ScenarioArrays, sets: Real) -> Real:
    """Probability that one token's ``k`` experts include one of a given set of ranks, the
    experts spread evenly over ``sets`` such sets (ranks, or nodes).

    Unrestricted routing draws the ``k`` experts from ``E``: ``1 - C(E - E/s, k) / C(E, k)``.
    Group-limited routing (Megatron ``--moe-router-num-groups`` ``G``, ``--moe-router-group-
    topk`` ``g``: DeepSeek-V3's node-limited routing, DeepSeek-AI 2024 §2.1.2) first draws ``g``
    of the ``G`` expert groups: a set holding ``G/s >= 1`` whole groups is hit with
    ``1 - C(G - G/s, g) / C(G, g)``; a set inside one group (``G < s``) needs its group drawn
    (``g/G``) and one of the group's ``k/g`` experts in it. The expected distinct destinations
    of a token are ``s`` times this (DeepEP sends one copy per rank and one per node).

    A round-robin gate (``moe_router_round_robin``) sends token ``t`` to the ``k`` consecutive
    experts from ``k·t (mod E)`` (NeMo Automodel ``FakeBalancedGate``:
    ``arange(n_tokens·k).view(-1, k) % n_experts``, NVIDIA-NeMo/Automodel
    ``nemo_automodel/components/moe/layers.py`` @ ``89e3a9fdd604``); a set is ``B = E/s``
    consecutive experts (rank ``r`` holds experts ``r·E/e ... (r+1)·E/e - 1``,
    ``GroupedExpertsDeepEP.init_token_dispatcher``; a node holds consecutive ranks). The run
    starts at the multiples of ``d = gcd(k, B)`` inside a set equally often, so it covers
    ``1 + (k - d)/B`` sets on average (at most ``s``), each set equally likely over the
    tokens: the share is that over ``s``. DeepSeek-V3 on EP 64 (``k`` 8, 4 experts a rank):
    2 ranks in 1 node per token, where a learned router's 8 experts reach ~7.5 ranks and ~4.6
    of the 7 other nodes.
    """
    experts = ops.maximum(a.num_experts, 1.0)
    sets = ops.maximum(sets, 1.0)
    limited = a.moe_router_num_groups > 0
    groups = ops.where(limited, a.moe_router_num_groups, experts)
    chosen = ops.where(limited, a.moe_router_group_topk, a.moe_router_topk)
    per_group = a.moe_router_topk / ops.maximum(chosen, 1.0)
    whole = 1.0 - _none_drawn(groups, groups / sets, chosen)
    inside = (chosen / groups) * (1.0 - _none_drawn(experts / groups, experts / sets, per_group))
    drawn = ops.where(groups >= sets, whole, inside)
    if not ops.any_(a.moe_router_round_robin):
        return drawn
    return ops.where(a.moe_router_round_robin, _round_robin_sets(a, experts, sets) / sets, drawn)


def _round_robin_sets(a: ScenarioArrays, experts: Real, sets: Real) -> Real:
    """Mean sets of ``B = E/s`` consecutive experts that ``k`` consecutive experts starting at
    ``k·t (mod E)`` cover: ``min(1 + (k - gcd(k, B))/B, s)`` (``distinct_share``)."""
    topk = ops.maximum(a.moe_router_topk, 1.0)
    width = experts / sets
    step: Real
    if isinstance(topk, np.ndarray) or isinstance(width, np.ndarray):
        whole_k = np.rint(topk).astype(np.int64)
        step = np.gcd(whole_k, np.maximum(np.rint(width), 1.0).astype(np.int64)).astype(float)
    else:
        step = float(math.gcd(round(topk), max(round(width), 1)))
    return ops.minimum(1.0 + (topk - step) / width, sets)


def activation_bytes(a: ScenarioArrays, *, backward: bool) -> Real:
    """HBM bytes per MLP activation element, forward or backward (a gated linear unit reads
    and writes more: SwiGLU's two inputs)."""
    if backward:
        return ops.where(a.gated_linear_unit, 10.0, 6.0)
    return ops.where(a.gated_linear_unit, 6.0, 4.0)


def moe_mlp_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    """Register one MoE MLP's forward and backward operators (module docstring), and under
    ``groups.module_recompute`` the forward parts selective recompute repeats (Megatron
    ``--recompute-modules``: ``moe`` the whole block, else ``shared_experts`` and/or
    ``moe_act``)."""
    _moe_pass(table, a, eff, groups.forward, backward=False, routed_scale=1.0, shared_scale=1.0)
    _moe_pass(table, a, eff, groups.backward, backward=True, routed_scale=1.0, shared_scale=1.0)
    selective = a.recompute == _SELECTIVE
    whole = selective & a.recompute_moe
    if ops.any_(whole | (selective & (a.recompute_shared_experts | a.recompute_moe_act))):
        every = ops.where(whole, 1.0, 0.0)
        shared = ops.where(selective & a.recompute_shared_experts, 1.0, every)
        _moe_pass(
            table,
            a,
            eff,
            groups.module_recompute,
            backward=False,
            routed_scale=every,
            shared_scale=shared,
        )
        act_only = ops.where(selective & a.recompute_moe_act & ops.logical_not(whole), 1.0, 0.0)
        ew = eff.elementwise_traffic_factor(a.fused_elementwise)
        width = moe_imbalance(a, eff) * a.expert_tokens_per_microbatch * a.moe_router_topk
        act = ew * activation_bytes(a, backward=False) * width * a.moe_ffn_hidden_size
        table.mem(
            groups.module_recompute, act_only * act / a.expert_tensor_parallel, 2.0, routed=1.0
        )
        if ops.any_(a.activation_func_clamp_value > 0.0):
            _clamp_ops(table, a, groups.module_recompute, width * act_only, backward=False)


def _moe_pass(
    table: OperatorTable,
    a: ScenarioArrays,
    eff: EfficiencyModel,
    group: str,
    *,
    backward: bool,
    routed_scale: Real,
    shared_scale: Real,
) -> None:
    """One direction of the MoE MLP under ``group``: the router, routed experts, permutation
    and casts times ``routed_scale``, the shared experts times ``shared_scale`` (1 normally;
    0 or 1 per scenario for what selective recompute repeats)."""
    tp, hidden, expert_ffn = a.tensor_parallel, a.hidden_size, a.moe_ffn_hidden_size
    tokens, topk, ep = a.tokens_per_microbatch, a.moe_router_topk, a.expert_parallel
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    rho = moe_imbalance(a, eff)
    local_experts = a.num_experts / ep
    # MoE parallel folding: each expert's tokens come from its expert-parallel peers' share
    # (``expert_tokens_per_microbatch``), its FFN split over the expert tensor-parallel ranks
    etp, expert_tokens = a.expert_tensor_parallel, a.expert_tokens_per_microbatch
    per_expert = expert_tokens * topk * ep / ops.maximum(a.num_experts, 1.0) * rho
    routed = expert_tokens * topk * rho
    shared_ffn = a.shared_expert_ffn_hidden_size
    # experts whose tiles share the SMs in one wave: all local experts for one grouped kernel,
    # the framework's stream pool for per-expert GEMMs on concurrent streams (docstring)
    streams = a.grouped_gemm_streams
    together = ops.where(streams > 0.0, ops.minimum(local_experts, streams), local_experts)
    launch = ops.where(a.moe_grouped_gemm, together, 1.0)
    wgrad, bwd = a.trains_base, backward
    # a round-robin gate has no router: no gate GEMM, score, top-k or auxiliary loss
    # (Automodel ``FakeBalancedGate.forward``: constant weights 1/k, ``arange`` indices)
    gate = ops.where(a.moe_router_round_robin, 0.0, routed_scale)
    table.gemm(
        group,
        tokens,
        a.num_experts,
        hidden,
        count=gate,
        lp=False,
        backward=bwd,
        wgrad=wgrad,
        routed=1.0,
    )
    for n, k in ((n_up * expert_ffn / etp, hidden), (hidden, expert_ffn / etp)):
        count = local_experts * routed_scale
        table.gemm(
            group,
            per_expert,
            n,
            k,
            count=count,
            lp=lp,
            backward=bwd,
            wgrad=wgrad,
            per_launch=launch,
            # TE's GroupedLinear: one grouped GEMM call for all local experts
            calls=ops.where(a.moe_grouped_gemm, routed_scale, count),
            routed=1.0,
        )
    for n, k in ((n_up * shared_ffn / tp, hidden), (hidden, shared_ffn / tp)):
        table.gemm(group, tokens, n, k, count=shared_scale, lp=lp, backward=bwd, wgrad=wgrad)
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    act = activation_bytes(a, backward=backward)
    routed_width = routed * expert_ffn / etp * routed_scale
    width = routed_width + tokens * shared_ffn / tp * shared_scale
    # one kernel over the routed and shared widths: the routed experts' share by elements
    table.mem(group, ew * act * width, 2.0, routed=routed_width / ops.maximum(width, 1.0))
    router = ROUTER_BYTES_PER_LOGIT * tokens * a.num_experts
    forward_kernels = 3.0 if backward else router_forward_kernels(a)
    table.mem(group, router * gate, forward_kernels, routed=1.0)
    table.mem(group, _permutation_bytes(a, routed) * routed_scale, 2.0, routed=1.0)
    if ops.any_(a.moe_expert_bias):
        _expert_bias_ops(table, a, group, routed * routed_scale, backward=backward)
    if ops.any_(a.activation_func_clamp_value > 0.0):
        _clamp_ops(table, a, group, routed * routed_scale, backward=backward)
    up = n_up if backward else 1.0
    # two quantised operands a direction, each expert's slice on its own (module docstring)
    routed_cast = routed * (hidden + up * expert_ffn / etp) * routed_scale
    cast_kernels = 2.0 * quantize_kernels(a, local_experts)
    table.mem(group, quantize_bytes(a) * routed_cast, cast_kernels, routed=1.0)
    has_shared = ops.where(shared_ffn > 0.0, shared_scale, 0.0)  # no shared expert: no cast
    shared_cast = tokens * (hidden + up * shared_ffn / tp) * has_shared
    table.mem(group, quantize_bytes(a) * shared_cast, 2.0 * quantize_kernels(a, 1.0))


def router_forward_kernels(a: ScenarioArrays) -> Real:
    """Kernels of one router forward (the gate GEMM apart), per scenario: the framework's
    count under the flex dispatcher, which counts the dispatch's preprocessing with it, else its
    router's own (``planner.perf.frameworks``: ``moe_router_forward_kernels``,
    ``moe_flex_router_forward_kernels``)."""
    flex = a.moe_token_dispatcher == _FLEX
    return ops.where(flex, a.moe_flex_router_forward_kernels, a.moe_router_forward_kernels)


def quantize_kernels(a: ScenarioArrays, tensors: Real) -> Real:
    """Kernels that quantise one operand split into ``tensors`` slices (the local experts of a
    ``GroupedLinear``; 1 for a plain ``Linear``), per scenario: ``tensors`` times the recipe's
    ``QUANTIZE_KERNELS_PER_TENSOR``, except delayed scaling over grouped-GEMM experts on a
    GPU with TN-only FP8 GEMMs, whose slices Transformer Engine casts in one fused
    multi-tensor kernel (``nvte_multi_cast_transpose``, module docstring: TE takes that path
    only when every slice gets both a row-wise and a transposed copy, which it makes only for
    TN-only FP8 GEMMs, ``planner.perf.precision.any_layout_fp8_gemms``); 0 in 16-bit
    training."""
    per_tensor = ops.take(_QUANTIZE_KERNELS, a.fp8_recipe)
    tn_only = ops.logical_not(any_layout_fp8_gemms(a))
    fused = (a.fp8_recipe == _DELAYED) & a.moe_grouped_gemm & tn_only
    return ops.where(fused, per_tensor, per_tensor * tensors)


def _expert_bias_ops(
    table: OperatorTable, a: ScenarioArrays, group: str, routed: Real, *, backward: bool
) -> None:
    """The eager per-expert bias adds after the grouped expert GEMMs of ``routed`` rows
    (``EXPERT_BIAS_BYTES``); nothing without expert biases or grouped GEMMs (each of
    Megatron's per-expert ``SequentialMLP`` GEMMs adds its own bias)."""
    on = ops.where(a.moe_expert_bias & a.moe_grouped_gemm, 1.0, 0.0)
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    local = a.num_experts / a.expert_parallel
    down = routed * a.hidden_size * on
    up = routed * n_up * a.moe_ffn_hidden_size / a.expert_tensor_parallel * on
    up = ops.where(a.expert_up_bias_in_gemm, 0.0, up)
    b = EXPERT_BIAS_BYTES
    if backward:
        fixed = a.moe_router_round_robin
        per = ops.where(fixed, b["down_backward_fixed_probs"], b["down_backward"])
        table.mem(group, per * down, ops.where(fixed, 2.0, 4.0) * local + 1.0, routed=1.0)
        table.mem(group, b["up_backward"] * up, local + 1.0, routed=1.0)
    else:
        table.mem(group, b["down_forward"] * down, 2.0 * local + 1.0, routed=1.0)
        table.mem(group, b["up_forward"] * up, local + 1.0, routed=1.0)


def _clamp_ops(
    table: OperatorTable, a: ScenarioArrays, group: str, routed: Real, *, backward: bool
) -> None:
    """The eager clamp of the gated activation's input over ``routed`` rows (``CLAMP_BYTES``);
    nothing without a clamp, a gate, or where the stack clamps inside its fused kernel."""
    on = (a.activation_func_clamp_value > 0.0) & a.activation_clamp_eager & a.gated_linear_unit
    width = 2.0 * a.moe_ffn_hidden_size / a.expert_tensor_parallel
    elements = ops.where(on, routed * width, 0.0)
    table.mem(group, CLAMP_BYTES[1 if backward else 0] * elements, 3.0, routed=1.0)


def _permutation_bytes(a: ScenarioArrays, routed: Real) -> Real:
    """Bytes one direction's permute + unpermute moves (module docstring)."""
    tokens, hidden, ep = a.expert_tokens_per_microbatch, a.hidden_size, a.expert_parallel
    code = a.moe_token_dispatcher
    received = tokens * ep * distinct_share(a, ep)  # distinct (token, rank) pairs arriving
    sources = ops.where(code == _FLEX, received, ops.where(code == _ALLGATHER, tokens * ep, tokens))
    resort = ops.where((code == _ALLTOALL) & (a.num_experts > ep), 8.0 * hidden * routed, 0.0)
    return 4.0 * hidden * (routed + sources) + resort
