"""The per-layer operator table: every kernel of a transformer layer, timed for one microbatch.

Operators per transformer layer and microbatch on one GPU, forward and backward, for
``tok = b·S/c`` local tokens (micro-batch ``b``, sequence ``S``, context parallel ``c``; ``t``
tensor parallel, ``h`` hidden, ``q``/``kv`` the widths of all query / key heads, ``f`` the MLP
width; Megatron-LM's layer, Shoeybi et al. 2019 and Narayanan et al. SC'21):

* GEMMs: QKV ``(tok, (q+2kv)/t, h)`` (GQA/MQA through ``kv``), output projection
  ``(tok, h, q/t)``, MLP up ``(tok, n_up·f/t, h)`` (``n_up`` 2 for a gated linear unit; two
  ``(tok, f/t, h)`` GEMMs where the stack has separate gate and up linears,
  ``separate_gate_up_projections``) and down ``(tok, h, f/t)``; each backward GEMM is a
  data-gradient ``(M, K, N)`` and a weight-gradient ``(K, N, M)`` GEMM.
* Attention core: flash attention (Dao 2023) executes the causal half of ``4·b·(S/c)·S·q/t``
  forward FLOPs and ``FLASH_BWD_FLOP_RATIO`` times that backward; without flash, two batched
  GEMMs per direction over the full square plus softmax/mask/dropout memory traffic.
* MoE layers: router GEMM ``(tok, E, h)``, ``E/e`` expert GEMMs of ``tok·topk·e/E·imbalance``
  tokens each, shared experts, router softmax/top-k and token permute/unpermute.
* Memory-bound: two norms, two residual adds, dropout (models with dropout), rotary embeddings
  (models with them), the per-head query and key norms (models with ``qk_layernorm``), the
  activation function, the low-precision recipe's quantise/transpose kernels on every GEMM's
  inputs and output gradients (``planner.perf.precision``); eager stacks move
  ``elementwise_traffic_factor`` times the bytes.
* First stage: embedding; last stage: LM head GEMM (16-bit) and cross-entropy (the framework's
  loss kernels move ``loss_bytes_per_logit`` of HBM traffic per logit,
  ``planner.perf.frameworks``; a compiled loss, ``training.compiled_loss``,
  ``COMPILED_LOSS_BYTES_PER_LOGIT``).
* Recompute: what the recompute mode re-runs in the backward (full: the forward; Megatron's
  selective: the attention core and ``recompute_modules``; torchtitan's op-level SAC: the
  even-numbered matmuls and the element-wise forward, ``_op_level_recompute_ops``).

Each op takes ``max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels ·
kernel_min_time_s)`` (``EfficiencyModel``); ops of a kind no scenario of the batch has are not
registered (they would cost 0).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from planner.perf import ops
from planner.perf.attention import FLASH_BWD_FLOP_RATIO, attention_ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.lora import lora_ops
from planner.perf.loss_memory import COMPILED_LOSS_BYTES_PER_LOGIT
from planner.perf.moe_mlp import activation_bytes, moe_host_exposed_s, moe_mlp_ops
from planner.perf.ops import Real
from planner.perf.optable import LayerGroups, OperatorTable
from planner.perf.precision import norm_output_quantize_bytes, quantize_bytes
from planner.specs.parallelism import Recompute

__all__ = [
    "FLASH_BWD_FLOP_RATIO",
    "GROUPS",
    "OPERATOR_COLUMNS",
    "UNFUSED_ROPE_BYTES",
    "LayerTimes",
    "OperatorTable",
    "OperatorTimes",
    "edge_ops",
    "layer_ops",
    "layer_times",
    "operator_times",
]

_SELECTIVE, _FULL = Recompute.SELECTIVE.code, Recompute.FULL.code

UNFUSED_ROPE_BYTES = (24.0, 26.0)
"""HBM bytes per 16-bit element of the rotated query and key heads, forward and backward, of
Megatron-Core's unfused rotary path (``_apply_rotary_pos_emb_bshd``, ``rope_utils.py`` @
``core_v0.15.0``), against 4 for a fused kernel: ``t·cos`` (4), the half rotation's negation
(2) and ``torch.cat`` (4), its product with ``sin`` (4), the sum (6) and the closing
``torch.cat`` with the empty unrotated part (4); backward, the two products' gradients (4 +
4), the negation's (2), the halves concatenated (4), the two paths' gradients summed (6) and
the slice's gradient written into a full tensor (6)."""

OPERATOR_COLUMNS = (
    "tensor_parallel",
    "context_parallel",
    "expert_parallel",
    "expert_tensor_parallel",
    "micro_batch_size",
    "sequence_parallel",
    "recompute",
)
"""The layout columns ``operator_times`` reads: of the columns a design-space sweep varies per
candidate (``planner.perf.candidates.candidate_arrays``), only these; every other input is the
base scenario's. Candidates that agree on them (e.g. differ only in ZeRO stage, pipeline
split, virtual pipeline or data-parallel degree) have the same ``OperatorTimes``, which a sweep
computes once (``planner.search.shared``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorTimes:
    """Seconds of the operators of one microbatch on one GPU, by group (numbers, or arrays of
    shape ``(n,)``): one dense and one MoE layer's forward, backward, the attention core's
    forward (what Megatron's default selective recompute repeats) and the forward of the other
    modules selective recompute repeats (``recompute_modules``), the embedding (first pipeline
    stage)
    and the LM head with its loss (last stage), forward + backward; and the part of one MoE
    layer's forward, backward and selective module recompute that the routed experts take
    (``moe_routed_*``: their GEMMs with the casts of their operands, activation, expert
    biases and clamp, the router and the token permutation and un-permutation,
    ``planner.perf.moe_mlp``), already in ``moe_forward_s``, ``moe_backward_s`` and
    ``moe_module_recompute_s``."""

    dense_forward_s: Real
    dense_backward_s: Real
    dense_recompute_s: Real
    moe_forward_s: Real
    moe_backward_s: Real
    moe_recompute_s: Real
    dense_module_recompute_s: Real
    moe_module_recompute_s: Real
    dense_recompute_skipped_s: Real
    embedding_s: Real
    lm_head_s: Real
    moe_routed_forward_s: Real
    moe_routed_backward_s: Real
    moe_routed_module_recompute_s: Real


GROUPS = tuple(f.name for f in fields(OperatorTimes))
"""The ``OperatorTimes`` fields, in order."""


_DENSE = LayerGroups(
    forward="dense_forward_s",
    backward="dense_backward_s",
    recompute="dense_recompute_s",
    module_recompute="dense_module_recompute_s",
)
_MOE = LayerGroups(
    forward="moe_forward_s",
    backward="moe_backward_s",
    recompute="moe_recompute_s",
    module_recompute="moe_module_recompute_s",
)
_ROUTED = {
    _MOE.forward: "moe_routed_forward_s",
    _MOE.backward: "moe_routed_backward_s",
    _MOE.module_recompute: "moe_routed_module_recompute_s",
}
"""The ``OperatorTimes`` field of the routed experts' part of each MoE group."""


def layer_ops(table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, *, moe: bool) -> None:
    """Register one layer's forward, backward and selective-recompute operators under
    ``{kind}_forward_s``, ``{kind}_backward_s`` and ``{kind}_recompute_s``, ``kind`` ``moe``
    for MoE layers, ``dense`` for dense ones (module docstring)."""
    groups = _MOE if moe else _DENSE
    attention_ops(table, a, eff, groups)
    _layer_elementwise_ops(table, a, eff, groups)
    if moe:
        moe_mlp_ops(table, a, eff, groups)
    else:
        _dense_mlp_ops(table, a, eff, groups)
    if ops.any_(a.op_level_selective_recompute & (a.recompute == _SELECTIVE)):
        _op_level_recompute_ops(table, a, eff, groups, moe=moe)
    if ops.any_(a.lora_rank > 0):  # LoRA adapters on the frozen base (planner.perf.lora)
        lora_ops(table, a, groups.forward, groups.backward, moe=moe)


def _layer_elementwise_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    """Norms and residual adds, dropout, rotary embeddings and the FP8 casts of the attention
    GEMMs (eager stacks: ``elementwise_traffic_factor`` times the fused traffic, the norms too
    unless the stack's ``fused_norms``)."""
    forward, backward = groups.forward, groups.backward
    tp, hidden = a.tensor_parallel, a.hidden_size
    tokens = a.tokens_per_microbatch
    norm_tokens = ops.where(a.sequence_parallel, tokens / tp, tokens)  # sharded by SP
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    # norms are kernels of their own on stacks that take them from Transformer Engine
    norm_ew = eff.elementwise_traffic_factor(a.fused_elementwise | a.fused_norms)
    table.mem(forward, norm_ew * 8.0 * norm_tokens * hidden, 2.0)  # two norms
    norms_again = ops.where((a.recompute == _SELECTIVE) & a.recompute_layernorm, 1.0, 0.0)
    table.mem(groups.module_recompute, norms_again * norm_ew * 8.0 * norm_tokens * hidden, 2.0)
    table.mem(backward, norm_ew * 12.0 * norm_tokens * hidden, 2.0)
    table.mem(forward, ew * 12.0 * norm_tokens * hidden, 2.0)  # two residual adds
    table.mem(backward, ew * 12.0 * norm_tokens * hidden, 2.0)
    if ops.any_(a.has_dropout):
        drop = ops.where(a.has_dropout, 1.0, 0.0)
        table.mem(forward, ew * 10.0 * drop * norm_tokens * hidden, 2.0)
        table.mem(backward, ew * 10.0 * drop * norm_tokens * hidden, 2.0)
    mla = a.multi_latent_attention
    if ops.any_(a.has_rotary_embeddings):
        rope = ops.where(a.has_rotary_embeddings, 1.0, 0.0)
        rotated = _rotated_width(a)
        # YaRN under a stack that leaves it unfused: Megatron-Core's eager rotary path
        eager = ops.where(a.yarn_rotary & a.yarn_rope_unfused, 1.0, 0.0)
        fwd_b = (1.0 - eager) * ew * 4.0 + eager * UNFUSED_ROPE_BYTES[0]
        bwd_b = (1.0 - eager) * ew * 4.0 + eager * UNFUSED_ROPE_BYTES[1]
        table.mem(forward, fwd_b * rope * tokens * rotated, 1.0 + 5.0 * eager)
        table.mem(backward, bwd_b * rope * tokens * rotated, 1.0 + 6.0 * eager)
    if ops.any_(a.per_head_qk_norm):
        # Qwen3's QK-norm: a norm over each of the rank's query and key heads on every token
        # (not sequence-parallel) with a norm's traffic: read x, write y; backward read dy and
        # x, write dx, each norm's weight gradient reduced in a second kernel. Megatron-Core
        # runs them as two TE RMSNorm modules, unfused (SelfAttention, attention.py @
        # core_v0.15.0: its fused QKV-rotary path requires q_layernorm and k_layernorm absent);
        # its key, a strided view of the fused QKV output, is made contiguous first (2 + 2
        # bytes per key element, left out: num_query_groups / num_attention_heads of the
        # query's width, 1/16 to 1/2 across the Qwen3 presets)
        qk_norm = ops.where(a.per_head_qk_norm, 1.0, 0.0) * tokens / tp
        qk_width = a.attention_q_width + a.attention_k_width
        table.mem(forward, qk_norm * norm_ew * 4.0 * qk_width, 2.0)
        table.mem(backward, qk_norm * norm_ew * 6.0 * qk_width, 4.0)
    latents = a.q_lora_rank + a.kv_lora_rank
    if ops.any_(mla):  # MLA's layer norms on the query and key/value latents
        table.mem(forward, norm_ew * 8.0 * tokens * latents, 2.0)
        table.mem(backward, norm_ew * 12.0 * tokens * latents, 2.0)
    lp = a.device.low_precision
    if ops.any_(lp):  # quantising the inputs (forward) and output gradients (backward)
        quant = quantize_bytes(a)  # per element, by recipe (planner.perf.precision)
        # a norm in front of its GEMM may quantise its own output: the QKV input, or under MLA
        # the latents (the input norm stands alone before MLA's down-projections)
        norm_quant = norm_output_quantize_bytes(a)
        inputs_bytes = (
            ops.where(mla, quant, norm_quant) * hidden
            + quant * a.attention_out_width / tp
            + ops.where(mla, norm_quant, quant) * latents
        )
        outputs = (
            (a.attention_in_width + a.attention_q_width * ops.where(a.q_lora_rank > 0, 1.0, 0.0))
            / tp
            + a.kv_up_width / tp
            + a.attention_down_width
            + hidden
        )
        table.mem(forward, tokens * inputs_bytes, 2.0)
        table.mem(backward, quant * tokens * outputs, 2.0)


def _rotated_width(a: ScenarioArrays) -> Real:
    """Elements per token one tensor-parallel rank's rotary embedding rotates, shape ``(n,)``:
    its query and key heads' widths, or under MLA only the ``d_rope`` dimensions of every query
    head and of the shared key."""
    pos = a.qk_pos_emb_head_dim
    return ops.where(
        a.multi_latent_attention,
        a.num_attention_heads * pos / a.tensor_parallel + pos,
        (a.attention_q_width + a.attention_k_width) / a.tensor_parallel,
    )


def _op_level_recompute_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups, *, moe: bool
) -> None:
    """What torchtitan's op-level selective activation checkpointing re-runs in the backward
    (``op_level_selective_recompute``, ``planner.perf.frameworks``), under
    ``groups.module_recompute``.

    Its policy (``_apply_ac_to_transformer_block`` with ``selective_ac_option = "op"``,
    pytorch/torchtitan ``torchtitan/parallelisms/parallelize_llama.py`` @ ``9dec370a``,
    ``torchtitan/models/llama3/parallelize_llama.py`` @ ``820504e2`` and @ ``e7c0cae9``) marks
    ``MUST_SAVE`` the outputs of the odd-numbered ``aten.mm`` calls of a block, of the attention
    kernel (``_scaled_dot_product_flash_attention``), of the tensor-parallel reduce-scatters and
    of ``max``, and every other op ``PREFER_RECOMPUTE``; eager checkpointing re-runs those in the
    backward and torch.compile's partitioner treats ``PREFER_RECOMPUTE`` as must-recompute
    (``must_recompute`` in ``torch/_functorch/partitioners.py``), re-running those the backward
    reads (under sequence parallelism not ``wo``, whose output only feeds the saved
    reduce-scatter; counted here as eager checkpointing re-runs it). So the attention kernel is
    not re-run, but the even-numbered matmuls are: of Llama's ``wq, wk, wv, wo, w1, w3, w2``
    (torchtitan's ``Attention`` and ``FeedForward``, ``w2(silu(w1(x)) * w3(x))``) ``wk``,
    ``wo`` and ``w3``; with one fused ``wqkv`` (``separate_qkv_projections`` false: current
    torchtitan, whose ``SelectiveAC`` policy still counts ``aten.mm`` / ``aten.linear`` calls
    per block and recomputes the even ones, ``torchtitan/distributed/activation_checkpoint.py``
    @ ``b5bcd76c6``) ``wo`` and ``w3``: the attention has an even number of matmuls either
    way, so the MLP's parity does not change. The MLP re-runs ``w3`` where gate and up are
    separate linears, else its second matmul, the down projection (a fused ``w13``'s ``w2``,
    an ungated MLP's ``fc2``). With them the element-wise forward around them: both norms, the
    first residual add, the rotary embedding, the activation function and, under FP8, the
    casts of the re-run matmuls' inputs. MoE layers re-run the attention's part (their
    experts' grouped matmuls are not ``aten.mm``). A per-head QK-norm (Qwen3) would be re-run
    too and is left out: no published torchtitan run has one."""
    op_sac = a.op_level_selective_recompute & (a.recompute == _SELECTIVE)
    scale = ops.where(op_sac, 1.0, 0.0)
    group = groups.module_recompute
    tp, hidden, ffn = a.tensor_parallel, a.hidden_size, a.ffn_hidden_size
    tokens = a.tokens_per_microbatch
    norm_tokens = ops.where(a.sequence_parallel, tokens / tp, tokens)
    lp = a.device.low_precision
    # w3 (gate and up separate) or the down projection (fused w13's w2, ungated fc2)
    w3 = a.gated_linear_unit & a.separate_gate_up_projections
    shapes: list[tuple[Real, Real, Real]] = []
    if ops.any_(a.separate_qkv_projections):  # wk
        wk = ops.where(a.separate_qkv_projections, scale, 0.0)
        shapes.append((a.attention_k_width / tp, hidden, wk))
    shapes.append((hidden, a.attention_out_width / tp, scale))  # wo
    if not moe:
        shapes.append((ops.where(w3, ffn / tp, hidden), ops.where(w3, hidden, ffn / tp), scale))
    for n, k, count in shapes:
        table.gemm(group, tokens, n, k, count=count, lp=lp)  # forward only: no weight gradient
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    norm_ew = eff.elementwise_traffic_factor(a.fused_elementwise | a.fused_norms)
    table.mem(group, scale * norm_ew * 8.0 * norm_tokens * hidden, 2.0)  # both norms
    table.mem(group, scale * ew * 6.0 * norm_tokens * hidden, 1.0)  # the first residual add
    if ops.any_(a.has_rotary_embeddings):
        rope = ops.where(a.has_rotary_embeddings, scale, 0.0)
        table.mem(group, rope * ew * 4.0 * tokens * _rotated_width(a), 1.0)
    mlp_in = hidden
    if not moe:
        act = activation_bytes(a, backward=False)
        table.mem(group, scale * ew * act * tokens * ffn / tp, 1.0)
        mlp_in = ops.where(w3, hidden, ffn / tp)
    if ops.any_(lp):  # the re-run matmuls' inputs quantised again
        quant = quantize_bytes(a)
        wk_in = ops.where(a.separate_qkv_projections, hidden, 0.0)
        inputs = wk_in + a.attention_out_width / tp + (0.0 if moe else mlp_in)
        kernels = ops.where(a.separate_qkv_projections, 3.0, 2.0)
        table.mem(group, scale * quant * tokens * inputs, kernels)


def _dense_mlp_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    """The dense MLP: up and down projections, activation function, FP8 casts; its forward
    again under ``groups.module_recompute`` where selective recompute repeats ``mlp``."""
    _dense_mlp_pass(table, a, eff, groups.forward, backward=False, scale=1.0)
    _dense_mlp_pass(table, a, eff, groups.backward, backward=True, scale=1.0)
    if ops.any_(a.recompute_early_stop & (a.recompute == _FULL)):
        # the down projection's forward GEMM once more, under the group full recompute
        # subtracts where the checkpoint stops early (_again_s)
        tp, tokens = a.tensor_parallel, a.tokens_per_microbatch
        table.gemm(
            "dense_recompute_skipped_s",
            tokens,
            a.hidden_size,
            a.ffn_hidden_size / tp,
            lp=a.device.low_precision,
        )
    again = (a.recompute == _SELECTIVE) & a.recompute_mlp
    if ops.any_(again):
        scale = ops.where(again, 1.0, 0.0)
        _dense_mlp_pass(table, a, eff, groups.module_recompute, backward=False, scale=scale)


def _dense_mlp_pass(
    table: OperatorTable,
    a: ScenarioArrays,
    eff: EfficiencyModel,
    group: str,
    *,
    backward: bool,
    scale: Real,
) -> None:
    """One direction of the dense MLP under ``group``, times ``scale``."""
    tp, hidden, ffn = a.tensor_parallel, a.hidden_size, a.ffn_hidden_size
    tokens = a.tokens_per_microbatch
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    # a stack with separate gate and up linears runs two GEMMs of ``f/t`` columns, not one
    up_calls = ops.where(a.separate_gate_up_projections, n_up, 1.0)
    for n, k, calls in ((n_up * ffn / tp / up_calls, hidden, up_calls), (hidden, ffn / tp, 1.0)):
        table.gemm(
            group,
            tokens,
            n,
            k,
            count=scale * calls,
            lp=lp,
            backward=backward,
            wgrad=a.trains_base,
        )
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    act = activation_bytes(a, backward=backward)
    table.mem(group, scale * ew * act * tokens * ffn / tp, 1.0)
    if ops.any_(lp):
        quant = quantize_bytes(a)
        if backward:  # output gradients of the down and up projections
            operand_bytes = quant * (hidden + n_up * ffn / tp)
        else:  # FC1's input comes from the pre-MLP norm, FC2's from the activation
            operand_bytes = norm_output_quantize_bytes(a) * hidden + quant * ffn / tp
        table.mem(group, scale * tokens * operand_bytes, 2.0)


def edge_ops(table: OperatorTable, a: ScenarioArrays) -> None:
    """Embedding (``embedding_s``, first stage) and LM head + loss (``lm_head_s``, last
    stage), forward + backward."""
    tp, hidden = a.tensor_parallel, a.hidden_size
    tokens = a.tokens_per_microbatch
    norm_tokens = ops.where(a.sequence_parallel, tokens / tp, tokens)
    table.mem("embedding_s", 4.0 * norm_tokens * hidden, 1.0)
    table.mem("embedding_s", 12.0 * tokens * hidden, 2.0)
    table.gemm("lm_head_s", tokens, a.vocab_size / tp, hidden, lp=False)
    head = a.vocab_size / tp
    table.gemm("lm_head_s", tokens, head, hidden, lp=False, backward=True, wgrad=a.trains_base)
    table.mem("lm_head_s", 20.0 * norm_tokens * hidden, 2.0)  # final norm fwd + bwd
    # the framework's loss kernels, or the compiled loss's (planner.perf.loss_memory)
    per_logit = ops.where(
        a.compiled_loss & ops.logical_not(a.fused_cross_entropy),
        COMPILED_LOSS_BYTES_PER_LOGIT,
        a.loss_bytes_per_logit,
    )
    loss_bytes = per_logit * tokens * a.vocab_size / tp
    table.mem("lm_head_s", loss_bytes, 5.0)
    mtp = a.mtp_num_layers
    if ops.any_(mtp > 0):
        # each MTP module (DeepSeek-V3 §2.2; Megatron-Core MultiTokenPredictionLayer): the
        # shared embedding of the shifted tokens, two input norms, the 2h -> h projection
        # (column-parallel), its layer (operator_times) and a final norm, the shared LM head
        # and its loss
        table.mem("lm_head_s", mtp * 16.0 * tokens * hidden, 2.0)  # embedding fwd + bwd
        table.mem("lm_head_s", mtp * 30.0 * norm_tokens * hidden, 3.0)  # 3 norms fwd + bwd
        for bwd in (False, True):
            for n, k in ((hidden / tp, 2.0 * hidden), (a.vocab_size / tp, hidden)):
                table.gemm(
                    "lm_head_s",
                    tokens,
                    n,
                    k,
                    count=mtp,
                    lp=False,
                    backward=bwd,
                    wgrad=a.trains_base,
                )
        table.mem("lm_head_s", mtp * loss_bytes, 5.0)


def operator_times(a: ScenarioArrays, eff: EfficiencyModel) -> OperatorTimes:
    """Every operator group of ``a`` timed (MoE layers only when some scenario has them)."""
    table = OperatorTable(a, eff)
    layer_ops(table, a, eff, moe=False)
    if ops.any_(a.num_moe_layers > 0):
        layer_ops(table, a, eff, moe=True)
    edge_ops(table, a)
    totals = table.totals()
    totals.update({_ROUTED[g]: sec for g, sec in table.routed_s.items() if g in _ROUTED})
    zero = a.full(0.0)
    times = OperatorTimes(**{name: totals.get(name, zero) for name in GROUPS})
    if ops.any_(a.num_moe_layers > 0):  # the host read of each MoE layer's forward
        waited = moe_host_exposed_s(a, times.moe_forward_s)
        times = replace(times, moe_forward_s=times.moe_forward_s + waited)
    if ops.any_(a.mtp_num_layers > 0):  # the MTP modules' transformer layers: last stage
        mtp, mtp_moe = a.mtp_num_layers, a.num_mtp_moe_layers
        dense, moe = _layer_total_s(times, a, moe=False), _layer_total_s(times, a, moe=True)
        extra = (mtp - mtp_moe) * dense + mtp_moe * moe
        times = replace(times, lm_head_s=times.lm_head_s + extra)
    return times


def _layer_total_s(times: OperatorTimes, a: ScenarioArrays, *, moe: bool) -> Real:
    """Forward + backward + what recompute repeats of one dense or MoE layer."""
    forward = times.moe_forward_s if moe else times.dense_forward_s
    backward = times.moe_backward_s if moe else times.dense_backward_s
    return forward + backward + _again_s(times, a, moe=moe)


def _again_s(times: OperatorTimes, a: ScenarioArrays, *, moe: bool) -> Real:
    """What recompute repeats of one dense or MoE layer: its whole forward (full), or the
    attention core (Megatron's default ``core_attn``) and the other modules selective
    recompute names (``recompute_modules``)."""
    forward = times.moe_forward_s if moe else times.dense_forward_s
    core = times.moe_recompute_s if moe else times.dense_recompute_s
    modules = times.moe_module_recompute_s if moe else times.dense_module_recompute_s
    # torchtitan's op-level SAC keeps the attention kernel's outputs (_op_level_recompute_ops)
    core_again = a.recompute_core_attn & ops.logical_not(a.op_level_selective_recompute)
    selective = ops.where(core_again, core, 0.0) + modules
    if not moe:  # non-reentrant checkpoint's early stop skips the last GEMM (frameworks)
        skipped = ops.where(a.recompute_early_stop, times.dense_recompute_skipped_s, 0.0)
        forward = forward - skipped
    # block recompute (``recompute_num_layers``): the chunk's first layers only, on average
    return ops.where(
        a.recompute == _FULL,
        a.recomputed_layer_fraction * forward,
        ops.where(a.recompute == _SELECTIVE, selective, 0.0),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """Seconds of one transformer layer for one microbatch, dense and MoE layers weighted by
    their share of the layers (numbers, or arrays of shape ``(n,)``).

    ``total_s`` is forward + backward + what recompute repeats (selective: the attention core
    forward; full: the whole forward, Korthikanti et al. 2022 §4-5); ``forward_s`` the forward;
    ``backward_s`` the backward with its recompute (the window that hides the gradient
    reduction); ``attention_forward_s`` the forward of the attention core alone;
    ``moe_routed_s`` the part of ``total_s`` the routed experts take (``OperatorTimes``'s
    ``moe_routed_*``, with what recompute repeats of them) and ``moe_layer_routed_s`` that of
    one MoE layer alone (what each MoE multi-token-prediction layer adds).
    """

    total_s: Real
    forward_s: Real
    backward_s: Real
    attention_forward_s: Real
    moe_routed_s: Real
    moe_layer_routed_s: Real


def layer_times(times: OperatorTimes, a: ScenarioArrays) -> LayerTimes:
    """``LayerTimes`` of the operator groups ``times`` under ``a.recompute``."""
    moe = a.num_moe_layers / a.num_layers
    dense = 1 - moe
    again_dense = _again_s(times, a, moe=False)
    again_moe = _again_s(times, a, moe=True)
    routed = _routed_layer_s(times, a)
    return LayerTimes(
        total_s=dense * (times.dense_forward_s + times.dense_backward_s + again_dense)
        + moe * (times.moe_forward_s + times.moe_backward_s + again_moe),
        forward_s=dense * times.dense_forward_s + moe * times.moe_forward_s,
        backward_s=dense * (times.dense_backward_s + again_dense)
        + moe * (times.moe_backward_s + again_moe),
        attention_forward_s=dense * times.dense_recompute_s + moe * times.moe_recompute_s,
        moe_routed_s=moe * routed,
        moe_layer_routed_s=routed,
    )


def _routed_layer_s(times: OperatorTimes, a: ScenarioArrays) -> Real:
    """The routed experts' seconds of one MoE layer: forward + backward + what recompute
    repeats of them (full: the recomputed share of the forward, as ``_again_s``; selective:
    their part of the ``moe`` / ``moe_act`` modules)."""
    forward = times.moe_routed_forward_s
    again = ops.where(
        a.recompute == _FULL,
        a.recomputed_layer_fraction * forward,
        ops.where(a.recompute == _SELECTIVE, times.moe_routed_module_recompute_s, 0.0),
    )
    return forward + times.moe_routed_backward_s + again
