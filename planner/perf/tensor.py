"""Tensor-parallel communication: the activations' collectives around each layer's GEMMs.

Per layer and direction, the attention and the MLP block each need one collective pair over
the ``t`` ranks of the tensor-parallel group (an MoE layer's MLP block over its ``t_e`` expert
tensor-parallel ranks: Megatron-Core's token dispatcher gathers and scatters the tokens over
that group, none when ``t_e = 1``; MoE parallel folding) (Shoeybi et al. 2019, Megatron-LM §3): with
sequence parallelism an all-gather before and a reduce-scatter after the block, otherwise one
all-reduce (Korthikanti et al. 2022 §4.2.2: the same bytes on a ring), each of ``tok·h`` 16-bit
activations (``tok = b·S/c`` local tokens). Forward and backward make 4 pairs per layer; full
recompute re-runs the forward's 2 (x 1.5). A stack that all-gathers FP8 under tensorwise FP8
linears (``fp8_tp_all_gather``: torchtitan before 2026-04 with torchao's float8
tensor-parallel styles, ``planner.perf.frameworks``) moves one byte per element in the
layers' all-gathers, forward and backward; their reduce-scatters, the embedding's and the LM
head's collectives stay 16-bit. The vocabulary-parallel embedding adds one pair
(the all-reduce of its output; with sequence parallelism its reduce-scatter and the
backward's all-gather); the LM head one pair under sequence parallelism (gathering its input,
scattering the input's gradient) plus three small all-reduces of ``tok`` fp32 values for the
vocabulary-parallel cross-entropy (max, sum, target logit; Megatron
``vocab_parallel_cross_entropy``). A fraction hides behind the GEMMs:
``tp_comm_overlap_fraction`` where the framework splits the collectives into chunks overlapped
with the GEMMs that consume and produce them (Transformer Engine userbuffers, Megatron
``--tp-comm-overlap``; Hopper and later, ``planner.perf.frameworks``; sequence-parallel layers
only: Megatron-LM asserts ``sequence_parallel`` with ``tp_comm_overlap`` in ``validate_args``,
NeMo 2 and Megatron-Bridge switch the overlap off with a warning without it,
``nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py`` @ ``8cfedd72``,
``src/megatron/bridge/training/comm_overlap.py`` @ ``067f987d``), ``tp_overlap_fraction``
otherwise. torch's micro-pipelined TP (torchtitan's async TP, ``tp_comm_overlap``) splits an
all-gather with the matmuls that consume it and a reduce-scatter with the one matmul that
produces its input, nothing else (``fuse_all_gather_matmul`` / ``fuse_matmul_reduce_scatter``,
pytorch/pytorch ``torch/_inductor/fx_passes/micro_pipeline_tp.py`` @ ``00122fb1c8e5`` and in
PyTorch 2.13); with separate query, key and value linears (``separate_qkv_projections``:
``wq``, ``wk``, ``wv``) the backward's input gradient of the attention is a sum of matmuls, as
is a gated dense MLP's with separate gate and up linears (``separate_gate_up_projections``:
``w1``, ``w3``), so each such reduce-scatter keeps ``tp_overlap_fraction``. torchtitan's
op-level SAC (``op_level_selective_recompute``) re-runs the attention's and a dense MLP's
all-gathers in the backward: their outputs are not saved, the reduce-scatters' are. An MoE
layer's MLP pair is the token dispatcher's all-gather / reduce-scatter
around the experts (Megatron-Core ``gather_from_sequence_parallel_region`` in the dispatchers),
which userbuffers do not split: it keeps ``tp_overlap_fraction`` (the MoE layers' share of the
layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import ARCHITECTURES, CommKind, EfficiencyModel
from planner.perf.memory import ACTIVATION_BYTES
from planner.perf.ops import Real
from planner.specs.parallelism import Fp8Recipe, Recompute

__all__ = ["TensorParallelTimes", "tensor_parallel_times"]

_FULL = Recompute.FULL.code
_SELECTIVE = Recompute.SELECTIVE.code

_HOPPER = ARCHITECTURES.index("hopper")
_CDNA3 = ARCHITECTURES.index("cdna3")
_TENSORWISE = Fp8Recipe.TENSORWISE.code
_FP8_BYTES = 1.0
"""Bytes per element of an FP8 (E4M3 / E5M2) activation or gradient."""
_LOSS_ALL_REDUCE_BYTES_PER_TOKEN = 4.0
"""Each vocabulary-parallel cross-entropy all-reduce carries one fp32 value per token."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorParallelTimes:
    """Exposed tensor-parallel communication per microbatch, seconds (numbers, or arrays of
    shape ``(n,)``): ``layer_s`` of one transformer layer (forward, backward and what full
    recompute repeats), ``embedding_s`` of the embedding, ``lm_head_s`` of the LM head and the
    loss."""

    layer_s: Real
    embedding_s: Real
    lm_head_s: Real


def tensor_parallel_times(
    a: ScenarioArrays, eff: EfficiencyModel, link: coll.Link
) -> TensorParallelTimes:
    """Tensor-parallel communication of every scenario of ``a`` (module docstring)."""
    tp = a.tensor_parallel
    tokens = a.tokens_per_microbatch
    size = tokens * a.hidden_size * ACTIVATION_BYTES
    all_gather = coll.all_gather_time_s(size, tp, 1.0, link)
    reduce_scatter = all_gather  # a ring reduce-scatter of the same buffer costs the same
    all_reduce = coll.all_reduce_time_s(size, tp, 1.0, link)
    loss = coll.all_reduce_time_s(tokens * _LOSS_ALL_REDUCE_BYTES_PER_TOKEN, tp, 1.0, link)
    pair = ops.where(a.sequence_parallel, all_gather + reduce_scatter, all_reduce)
    # the transformer layers' pairs: FP8 all-gathers where the stack casts before gathering
    fp8_gather = a.fp8_tp_all_gather & (a.fp8_recipe == _TENSORWISE) & a.sequence_parallel
    layer_pair = pair
    layer_gather = all_gather
    if ops.any_(fp8_gather):
        fp8_all_gather = coll.all_gather_time_s(size * _FP8_BYTES / ACTIVATION_BYTES, tp, 1.0, link)
        layer_pair = ops.where(fp8_gather, fp8_all_gather + reduce_scatter, pair)
        layer_gather = ops.where(fp8_gather, fp8_all_gather, all_gather)
    # MoE layers: the MLP block's pair runs over the expert tensor-parallel ranks (MoE
    # parallel folding; the same pair when they are the tensor-parallel ones, none when 1)
    expert_pair = pair
    if ops.any_(a.num_moe_layers > 0):
        etp = a.expert_tensor_parallel
        expert_pair = ops.where(
            a.sequence_parallel,
            2.0 * coll.all_gather_time_s(size, etp, 1.0, link),
            coll.all_reduce_time_s(size, etp, 1.0, link),
        )
    head = ops.where(a.sequence_parallel, all_gather + reduce_scatter, 0.0) + 3.0 * loss
    arch = a.device.architecture
    hopper_plus = (arch >= _HOPPER) & (arch < _CDNA3)
    plain = 1.0 - eff.comm_overlap(CommKind.TENSOR)
    # the chunked overlap exists only on sequence-parallel layers: Megatron-LM refuses it
    # without them, NeMo and Megatron-Bridge switch it off with a warning
    # (``planner.specs.feasibility.tp_comm_overlap_sequence_rule``), torch's micro-pipelined TP
    # fuses the sequence-parallel all-gathers and reduce-scatters
    chunked = a.tp_comm_overlap & hopper_plus & a.sequence_parallel
    keep = ops.where(chunked, 1.0 - eff.comm_overlap(CommKind.TENSOR_USERBUFFERS), plain)
    moe_share = a.num_moe_layers / a.num_layers
    mlp = (1.0 - moe_share) * layer_pair * keep + moe_share * expert_pair * plain
    layer = 2.0 * layer_pair * keep + 2.0 * mlp  # attention and MLP pairs, forward and backward
    # micro-pipelined TP splits a reduce-scatter only after a single matmul (module docstring):
    # with separate projections of the block input the backward's input-gradient
    # reduce-scatter stays whole: the attention's (q, k, v), a gated dense MLP's (gate, up)
    whole_attention = chunked & a.separate_qkv_projections
    whole_mlp = chunked & a.separate_gate_up_projections & a.gated_linear_unit
    if ops.any_(whole_attention | whole_mlp):
        unsplit = ops.where(whole_attention, 1.0, 0.0) + ops.where(whole_mlp, 1.0 - moe_share, 0.0)
        layer = layer + unsplit * reduce_scatter * (plain - keep)
    full = a.recompute == _FULL
    # op-level SAC re-runs the attention's and a dense MLP's all-gathers before the matmuls it
    # recomputes (their outputs are not saved; the reduce-scatters' are)
    op_sac = a.op_level_selective_recompute & (a.recompute == _SELECTIVE) & a.sequence_parallel
    regather = ops.where(op_sac, layer_gather * keep * (2.0 - moe_share), 0.0)
    return TensorParallelTimes(
        layer_s=layer * ops.where(full, 1.0 + 0.5 * a.recomputed_layer_fraction, 1.0) + regather,
        embedding_s=pair * keep,
        lm_head_s=head * keep,
    )
