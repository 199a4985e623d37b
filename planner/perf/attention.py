"""The attention block's operators: projections and the attention core, per layer and microbatch.

For ``tok = b·S/c`` local tokens (``t`` tensor parallel, ``h`` hidden, widths of all heads
together from ``ModelSpec``):

* GQA/MHA projections (Megatron-LM's ``SelfAttention``): QKV ``(tok, (q + 2kv)/t, h)`` and the
  output projection ``(tok, h, q/t)``; a stack with separate query, key and value linears
  (``separate_qkv_projections``, ``planner.perf.frameworks``: torchtitan before its fused
  ``wqkv``) runs ``(tok, q/t, h)`` and twice ``(tok, kv/t, h)`` instead of the fused QKV GEMM.
* Multi-latent attention (DeepSeek-AI 2024, DeepSeek-V2 §2.1; Megatron-Core
  ``MLASelfAttention``): the down projections to the query latent ``r_q``, the key/value latent
  ``r_kv`` and the shared rotary key ``d_rope`` run whole on every tensor-parallel rank
  (``parallel_mode="duplicated"``) on its sequence-parallel shard of the tokens, whose small
  outputs are then gathered; the up projections ``(tok, heads·(d_qk + d_rope)/t, r_q)`` and
  ``(tok, heads·(d_qk + d_v)/t, r_kv)`` and the output projection ``(tok, h, heads·d_v/t)`` are
  tensor-parallel. Without a query latent the query comes from ``(tok, q'/t, h)``.
* The attention core: flash attention (Dao 2023) executes the causal half of the
  ``2·b·(S/c)·S·(q' + o)/t`` forward FLOPs of full attention (``q'``: query width, ``o``: value
  and output width; ``4·…·q`` for GQA) and ``FLASH_BWD_FLOP_RATIO`` times that backward.
  Sliding-window layers (Megatron ``--window-size``; Beltagy et al. 2020) visit only the key
  tiles that overlap the window: FlashAttention-2 and cuDNN skip fully masked ``128 x 128``
  tiles (Dao 2023 §3.1), so a query tile meets ``ceil(w/128) + 1`` key tiles,
  ``WINDOW_TILE·(ceil(w/128) + 1)`` keys per query (at most the causal ``S/2``), at the kernel
  efficiency of that short key length; ``full_attention_fraction`` of the layers attend fully
  (``--window-attn-skip-freq``). Packed sequences (NeMo ``packed_sequence_specs``; THD layout
  with ``cu_seqlens``) attend within each sample: the half square of the sample length ``P``
  (``training.packed_sample_length``) per query instead of the sequence's. Without flash
  attention: two batched GEMMs per direction over the full square plus softmax/mask/dropout
  memory traffic.
* The exponential roof: flash attention computes one ``exp2`` per executed score on the
  special function units (``MUFU.EX2``), in the forward and again where the backward
  recomputes P, beside ``2·(d_qk + d_v)`` forward tensor FLOPs per score (Dao 2023, Alg. 1-2).
  Warp-specialised kernels run the softmax of one tile while the tensor cores multiply another
  (Shah et al. 2024, FlashAttention-3 §3.1 ping-pong; Zadouri et al. 2026, FlashAttention-4),
  so a kernel takes the longer of its two pipes' times, each at the fraction of its peak the
  kernel reaches on the tensor cores (its rate over the 16-bit peak): the kernel works
  ``max(F, scores·peak16/sfu_exp2_per_s)`` at the tensor rate. Blackwell doubled the tensor
  rate and not the SFUs (FlashAttention-4: 16 exponentials/clock/SM on H100 and B200), so at
  head dim 64 the forward waits for the exponentials (1.95x on GB200) and at 128 it is
  balanced (0.98); Blackwell Ultra doubles the SFU rate (10.7 against 5 TeraExponentials/s,
  ``planner/catalog/gpus.yaml``) and is tensor-bound again. GPUs without a catalog figure get
  no such roof (Hopper, 16 per clock per SM against 4096 dense 16-bit FLOP, is balanced at
  head dim 64 and tensor-bound above).
* Attention sinks (``softmax_type`` ``learnable`` / ``off_by_one``) under a stack whose sink
  attention is FlexAttention (``flex_attention_for_sinks``, ``planner.perf.frameworks``): the
  core at FlexAttention's share of the fused kernel's rate (``FLEX_ATTENTION_RELATIVE``), and
  the eager glue of NeMo Automodel's GPT-OSS attention around it (``SINK_RESCALE_BYTES``,
  ``FLEX_LAYOUT_COPY_BYTES``).
  Stacks that hand the sink to cuDNN's fused kernel pay nothing extra here.
* Context parallel under Megatron-Core + Transformer Engine (``cp_comm_type`` p2p, TE 2.4
  ``dot_product_attention/context_parallel.py``, ``AttnFuncWithCPAndKVP2P``): with the
  load-balanced split (rank ``r`` holds chunks ``r`` and ``2c - 1 - r``) the ``c`` ring steps
  do equal work, and only step 0 (local queries against local keys) runs the causal kernel;
  the ``c - 1`` others call ``fused_attn_fwd``/``_bwd`` with ``attn_mask_type="no_mask"``,
  half with all local queries against half a key chunk, half with the second query chunk
  against the whole received chunk. Unmasked kernels have no causal grid tail (blocks of equal
  work: ``CAUSAL_TAIL_FWD``), so the core runs at the causal rate times
  ``(1 + (c - 1)·unmasked/causal)/c`` of the tail factors. Only for the fused (TE) kernel;
  torchtitan's ring attention (PyTorch ``_templated_ring_attention`` over FlashAttention-2) is
  another implementation and kernel, kept at the causal rate.
"""

from __future__ import annotations

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Real
from planner.perf.optable import LayerGroups, OperatorTable
from planner.specs.parallelism import Recompute

__all__ = [
    "FLASH_BWD_FLOP_RATIO",
    "FLEX_ATTENTION_RELATIVE",
    "FLEX_LAYOUT_COPY_BYTES",
    "SINK_RESCALE_BYTES",
    "WINDOW_TILE",
    "attention_ops",
]

FLASH_BWD_FLOP_RATIO = 2.5
"""Flash-attention backward executes 5 matmuls (incl. recomputing the scores) vs 2 forward."""

_SELECTIVE = Recompute.SELECTIVE.code

QUERY_TILE = 128.0
"""Query rows per thread block of cuDNN fused attention / FlashAttention-2 at head dim 128."""

CAUSAL_TAIL_FWD = 0.66
"""Grid tail of causal fused attention, forward: the blocks of a causal kernel are query tiles
whose work grows with the tile index (tile ``i`` of ``T`` meets ``i + 1`` key tiles), so when
``n`` (batch x local heads) x ``T`` blocks are spread over the ``S`` SMs the last ones leave a
tail of about ``alpha`` times the longest block: time ``∝ 1 + 2·alpha·S / (n·(T + 1))``.
Unmasked blocks all do the same work; their tail is ``alpha`` times one block: ``∝ 1 +
alpha·S / (n·T)``. ``alpha`` fitted on the causal cuDNN rates measured on an H100 SXM at
batch 1, 4096 tokens, head dim 128 and 7, 8, 10, 12, 16, 32 heads (360 … 543 TFLOP/s
forward; ``benchmarks/results/h100_kernels.json``, ``benchmarks/h100_kernels.py``): 0.664,
every point within 1.2 % (an earlier run of the sweep: 0.66); Graham's list-scheduling
bound keeps it in [0, 1]."""

CAUSAL_TAIL_BWD = 0.62
"""The same for the backward (the same sweep: 0.624, within 1.2 %; the earlier run 0.53-0.61)."""

WINDOW_TILE = 128.0
"""Key tile of FlashAttention-2 / cuDNN fused attention at head dim 64-128 (Dao 2023 §3.1):
fully masked tiles are skipped, partly masked ones computed whole."""


FLEX_ATTENTION_RELATIVE = (0.85, 0.76)
"""PyTorch FlexAttention's throughput relative to the native fused kernel (FlashAttention-3
class: cuDNN fused attention), forward and backward: "On H100 GPUs, FlexAttention's forward
performance averages 85% of FlashAttention3 ..., while backward performance averages 76% of
FlashAttention3" (abstract of the GTC 2025 session "FlexAttention: The Flexibility of PyTorch
With the Performance of FlashAttention", D. Guessous, as the PyTorch blog "PyTorch at GTC 2025"
quotes it, pytorch/pytorch.github.io). Hopper figures, applied on every GPU."""

SINK_RESCALE_BYTES = (12.0, 34.0)
"""HBM bytes per element of the attention output, forward and backward, of NeMo Automodel's
sink outside FlexAttention: ``out * sigmoid(lse - sink)`` multiplies the 16-bit output by an
fp32 per-row scale (the product is fp32) and ``.to(q.dtype)`` casts it back (forward: read 2,
write 4, read 4, write 2); backward, the cast's gradient to fp32 (6), the output's gradient
``g·scale`` and its cast to 16 bits (14) and the scale's ``sum(g·out)`` (14)
(``FlexAttention.forward``, NVIDIA-NeMo/Automodel
``nemo_automodel/components/attention/flex_attention.py`` @ ``2c236e081``). The scale itself,
one value per row and head, is left out."""

FLEX_LAYOUT_COPY_BYTES = 4.0
"""HBM bytes per element of Q, K, V and the attention output, each direction, of the layout
copies around FlexAttention in NeMo Automodel's ``GptOssAttention.forward``:
``transpose(1, 2).contiguous()`` of each to the ``(B, H, S, D)`` layout and of the output back
(a 16-bit read and write each; their gradients the same way) (NVIDIA-NeMo/Automodel
``nemo_automodel/components/models/gpt_oss/layers.py`` @ ``2c236e081``)."""


def attention_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    """Register the attention projections and core of one layer (module docstring)."""
    _projection_ops(table, a, groups)
    _core_ops(table, a, eff, groups)


def _projection_ops(table: OperatorTable, a: ScenarioArrays, groups: LayerGroups) -> None:
    tp, hidden = a.tensor_parallel, a.hidden_size
    tokens = a.tokens_per_microbatch
    lp = a.device.low_precision
    mla = ops.any_(a.multi_latent_attention)
    shard = ops.where(a.sequence_parallel, tokens / tp, tokens)
    # a stack with separate query, key and value linears runs three GEMMs of the hidden
    # state (not under MLA, whose query comes from its own projection)
    split = a.separate_qkv_projections & ops.logical_not(a.multi_latent_attention)
    fused = ops.where(split, 0.0, 1.0)
    apart = 1.0 - fused
    widths = (a.attention_q_width, a.attention_k_width, a.attention_v_width)
    for group, bwd in ((groups.forward, False), (groups.backward, True)):
        frozen = a.trains_base
        table.gemm(
            group,
            tokens,
            a.attention_in_width / tp,
            hidden,
            count=fused,
            lp=lp,
            backward=bwd,
            wgrad=frozen,
        )
        if ops.any_(split):
            for width in widths:
                table.gemm(
                    group,
                    tokens,
                    width / tp,
                    hidden,
                    count=apart,
                    lp=lp,
                    backward=bwd,
                    wgrad=frozen,
                )
        table.gemm(
            group, tokens, hidden, a.attention_out_width / tp, lp=lp, backward=bwd, wgrad=frozen
        )
        if mla:
            table.gemm(
                group, shard, a.attention_down_width, hidden, lp=lp, backward=bwd, wgrad=frozen
            )
            _mla_up_ops(table, a, group, backward=bwd, scale=1.0)
    again = (a.recompute == _SELECTIVE) & a.recompute_mla_up_proj & a.multi_latent_attention
    if ops.any_(again):  # selective recompute of the up projections (``mla_up_proj``)
        scale = ops.where(again, 1.0, 0.0)
        _mla_up_ops(table, a, groups.module_recompute, backward=False, scale=scale)


def _mla_up_ops(
    table: OperatorTable, a: ScenarioArrays, group: str, *, backward: bool, scale: Real
) -> None:
    """MLA's tensor-parallel up projections from the query and key/value latents."""
    tp, tokens, lp = a.tensor_parallel, a.tokens_per_microbatch, a.device.low_precision
    q_up, kv_up = a.attention_q_width / tp, a.kv_up_width / tp
    for n, k in ((q_up, a.q_lora_rank), (kv_up, a.kv_lora_rank)):
        table.gemm(group, tokens, n, k, count=scale, lp=lp, backward=backward, wgrad=a.trains_base)


def _core_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: LayerGroups
) -> None:
    forward, backward, recompute = groups.forward, groups.backward, groups.recompute
    tp = a.tensor_parallel
    seq, local_seq = a.seq_length, a.seq_length / a.context_parallel
    heads = a.num_attention_heads
    head_dim = a.attention_q_width / heads
    heads_local = heads / tp
    non_flash = ops.logical_not(a.flash_attention)
    if ops.any_(non_flash):  # scores and weighted values as batched GEMMs over b·heads
        v_dim = a.attention_out_width / heads
        drop = ops.where(a.has_dropout, 1.0, 0.0)
        products = ops.where(non_flash, a.micro_batch_size * heads_local, 0.0)
        shapes = ((local_seq, seq, head_dim), (local_seq, v_dim, seq))
        for group in (forward, recompute):
            for m, n, k in shapes:
                table.gemm(group, m, n, k, count=products, lp=False, batched=True)
            # softmax, mask and dropout over the scores of the local queries
            traffic = (9.0 + 2.0 * drop) * heads_local * local_seq * seq * a.micro_batch_size
            table.mem(group, ops.where(non_flash, traffic, 0.0), 3.0)
        for m, n, k in shapes:
            table.gemm(backward, m, n, k, count=products, lp=False, backward=True, batched=True)
        traffic = (11.0 + 2.0 * drop) * heads_local * local_seq * seq * a.micro_batch_size
        table.mem(backward, ops.where(non_flash, traffic, 0.0), 3.0)
    width = a.attention_q_width + a.attention_out_width
    per_key = a.micro_batch_size * local_seq * width / tp  # forward FLOPs per key, / 2
    # an attention sink under FlexAttention: its kernel's rate, and eager glue around it
    flex = a.has_attention_sink & a.flex_attention_for_sinks
    if ops.any_(flex):
        tokens = a.micro_batch_size * local_seq
        out = ops.where(flex, tokens * a.attention_out_width / tp, 0.0)
        qkv = a.attention_q_width + a.attention_k_width + a.attention_v_width
        copies = ops.where(flex, FLEX_LAYOUT_COPY_BYTES * tokens * qkv / tp, 0.0)
        copies = copies + FLEX_LAYOUT_COPY_BYTES * out
        table.mem(forward, SINK_RESCALE_BYTES[0] * out + copies, 6.0)
        table.mem(backward, SINK_RESCALE_BYTES[1] * out + copies, 8.0)
    # causal within each packed sample: the half square of its length (the sequence unpacked)
    span = ops.minimum(a.packed_sample_length, seq)
    attn_f, attn_b = _flash_s(a, eff, per_key * span, span, head_dim)
    if ops.any_(a.context_parallel > 1.0):  # TE's ring: off-diagonal steps run unmasked
        heads_problems = a.micro_batch_size * heads_local
        attn_f = attn_f * _ring_step_time(a, local_seq, span, heads_problems, CAUSAL_TAIL_FWD)
        attn_b = attn_b * _ring_step_time(a, local_seq, span, heads_problems, CAUSAL_TAIL_BWD)
    if ops.any_(a.full_attention_fraction < 1.0):
        keys = WINDOW_TILE * (ops.ceil(a.window_size / WINDOW_TILE) + 1.0)
        keys = ops.minimum(keys, span / 2.0)
        win_f, win_b = _flash_s(a, eff, 2.0 * per_key * keys, keys, head_dim)
        full = a.full_attention_fraction
        attn_f = full * attn_f + (1.0 - full) * win_f
        attn_b = full * attn_b + (1.0 - full) * win_b
    if ops.any_(flex):
        attn_f = attn_f / ops.where(flex, FLEX_ATTENTION_RELATIVE[0], 1.0)
        attn_b = attn_b / ops.where(flex, FLEX_ATTENTION_RELATIVE[1], 1.0)
    table.add(forward, attn_f)
    table.add(recompute, attn_f)
    table.add(backward, attn_b)


def _ring_step_time(a: ScenarioArrays, local_seq: Real, span: Real, n: Real, alpha: float) -> Real:
    """Attention time under Transformer Engine's context-parallel ring relative to one causal
    kernel over the local queries (module docstring: ``CAUSAL_TAIL_FWD``); 1 without CP, for
    other stacks (``fused_attention`` False: torch ring attention over FlashAttention-2) and for
    packed sequences (``span`` shorter than the sequence)."""
    cp, sms = a.context_parallel, a.device.num_sms
    tiles = local_seq / QUERY_TILE
    causal = 1.0 + 2.0 * alpha * sms / (n * (tiles + 1.0))
    # half the off-diagonal steps run all local queries against half a key chunk, half run
    # the second query chunk (half the tiles) against the whole received chunk
    unmasked = 1.0 + 0.5 * alpha * sms / n * (1.0 / tiles + 2.0 / tiles)
    rel = (1.0 + (cp - 1.0) * unmasked / causal) / cp
    ring = (cp > 1.0) & a.fused_attention & (span >= a.seq_length)
    return ops.where(ring, rel, 1.0)


def _flash_s(
    a: ScenarioArrays, eff: EfficiencyModel, forward_flops: Real, keys: Real, head_dim: Real
) -> tuple[Real, Real]:
    """Seconds of the flash-attention forward and backward executing ``forward_flops`` forward
    over ``keys`` keys per query (0 without flash attention), the longer of the tensor-core
    time and the exponential time (module docstring: ``sfu_exp2_per_s``)."""
    flops = ops.where(a.flash_attention, forward_flops, 0.0)
    fwd_rate, bwd_rate = (
        eff.attention_flop_per_s(
            keys,
            a.device,
            backward=bwd,
            fused=a.fused_attention,
            head_dim=head_dim,
            flash_v1=a.flash_attention_v1,
        )
        for bwd in (False, True)
    )
    # the exponential roof: one exp2 per executed score each way (the backward recomputes P)
    score_flops = 2.0 * (a.attention_q_width + a.attention_out_width) / a.num_attention_heads
    exp_work = flops / score_flops * a.device.peak16_flop_per_s / a.device.sfu_exp2_per_s
    fwd_work = ops.maximum(flops, exp_work)
    bwd_work = ops.maximum(FLASH_BWD_FLOP_RATIO * flops, exp_work)
    kmin = eff.kernel_min_time_s
    forward = ops.where(a.flash_attention, ops.maximum(fwd_work / fwd_rate, kmin), 0.0)
    backward = ops.where(a.flash_attention, ops.maximum(bwd_work / bwd_rate, 2 * kmin), 0.0)
    return forward, backward
