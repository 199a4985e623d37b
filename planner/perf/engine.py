"""The vectorized engine: a batch of scenarios -> iteration time, breakdown, FLOPs and memory.

One pass over a structure of arrays (``ScenarioArrays``): numpy arrays for a batch, Python
numbers for one scenario (``predict``), through the same code (``planner.perf.ops``).
Model (details in each helper's docstring):

1. **Operators** per transformer layer and microbatch on one GPU, forward and backward
   (``tok = b·S/c`` local tokens): QKV ``(tok, (q+2kv)/t, h)`` (GQA/MQA through ``kv``), output
   projection ``(tok, h, q/t)``, MLP up ``(tok, n_up·f/t, h)`` (``n_up`` 2 for SwiGLU) and down
   ``(tok, h, f/t)`` GEMMs; each backward GEMM is a data-gradient ``(M, K, N)`` and a
   weight-gradient ``(K, N, M)`` GEMM. Attention core: flash attention executes the causal half
   of ``4·b·(S/c)·S·q/t`` forward FLOPs and 2.5x that backward; without flash, two batched GEMMs
   per direction over the full square plus softmax/mask/dropout memory traffic. MoE: router
   GEMM ``(tok, E, h)``, ``E/e`` expert GEMMs of ``tok·topk·e/E·imbalance`` tokens each, shared
   experts, token permute/unpermute. Memory-bound: two norms, two residual adds, dropout (GeLU
   models), rotary (SwiGLU models), activation function, FP8 casts. First stage: embedding;
   last stage: LM head GEMM (16-bit) and cross-entropy (the framework's loss kernels move
   ``loss_bytes_per_logit`` of HBM traffic per logit, ``planner.perf.frameworks``). Each op takes
   ``max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels · kernel_min_time_s)``.
2. **Communication** (``planner.perf.collectives``): TP 2 all-gathers + 2 reduce-scatters of
   ``tok·h`` 16-bit activations per layer and direction with sequence parallelism, else 2
   all-reduces (Korthikanti et al. 2022 §4.2.2), partly hidden (``tp_overlap_fraction``, or
   ``tp_comm_overlap_fraction`` with TE userbuffers on Hopper+, ``planner.perf.frameworks``); CP
   ring attention sends K,V (forward) and K,V,dK,dV (backward) ``c-1`` times per layer, each
   step hidden behind that step's attention (Liu et al. 2023); EP dispatch+combine all-to-all
   forward and backward; PP send/recv of ``tok·h/t`` per microbatch boundary; DP gradient
   reduce-scatter (all-reduce at ZeRO-0) and parameter all-gather once per iteration, hidden
   behind the last microbatch's backward / first forward up to ``dp_overlap_fraction`` (fully
   exposed when the scenario sets ``overlap_grad_reduce`` / ``overlap_param_gather`` false);
   ZeRO-3/FSDP gathers parameters forward and backward and reduce-scatters gradients every
   microbatch, hidden behind that microbatch's compute.
3. **Schedule**: 1F1B / interleaved 1F1B. The slowest stage (first: embedding; last: LM head and
   loss) sets the steady state, ``m · t_slowest``; the bubble is ``(p-1)/v`` times the mean
   stage's per-microbatch time (Narayanan et al. SC'21 §2.2); selective recompute re-runs the
   attention core forward, full recompute the whole layer forward (with its TP collectives).
4. **Optimizer**: Adam over the locally owned parameters (sharded at ZeRO >= 1), 34 bytes of HBM
   traffic per parameter (read fp32 master, m, v, grad; grad-norm pass; write master, m, v and
   the 16-bit copy), plus the FP8 weight cast when training in FP8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import ARCHITECTURES, CommKind, EfficiencyModel
from planner.perf.flops import iteration_flops
from planner.perf.memory import MemoryArrays, memory_arrays, stage_params
from planner.perf.ops import Flag, FloatArray, Real

__all__ = ["BREAKDOWN_KEYS", "BatchResult", "evaluate"]

BREAKDOWN_KEYS = (
    "compute",
    "tp_comm_exposed",
    "cp_comm_exposed",
    "ep_comm_exposed",
    "pp_comm_exposed",
    "pp_bubble",
    "dp_comm_exposed",
    "optimizer",
)
"""Terms of ``breakdown_s``, in order; they add up to ``iteration_time_s``."""

_HOPPER = ARCHITECTURES.index("hopper")
_CDNA3 = ARCHITECTURES.index("cdna3")

ACT_BYTES = 2.0
"""Activations and their gradients travel in 16-bit, also under FP8 training."""
PARAM_GATHER_BYTES = 2.0
ADAM_HBM_BYTES_PER_PARAM = 34.0
FP8_CAST_BYTES_PER_PARAM = 3.0
FLASH_BWD_FLOP_RATIO = 2.5
"""Flash-attention backward executes 5 matmuls (incl. recomputing the scores) vs 2 forward."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """Engine output for a batch: arrays of shape ``(n,)`` (seconds, FLOPs, bytes), Python
    floats for the one-scenario form."""

    iteration_time_s: Real
    breakdown_s: dict[str, Real]
    model_flops: Real
    hardware_flops: Real
    memory: MemoryArrays


class _Ops:
    """Accumulates operator times per group: GEMMs and memory-bound kernels are timed in
    one vectorized call each (shape ``(num_ops, n)``, ``(num_ops,)`` for one scenario). Shapes
    may be numbers or ``(n,)`` arrays; they are broadcast once, when timed."""

    def __init__(self, a: ScenarioArrays, eff: EfficiencyModel) -> None:
        self.a, self.eff = a, eff
        self.gemm_groups: list[str] = []
        self.gemm_cols: tuple[list[Any], ...] = ([], [], [], [], [], [])
        self.mem_groups: list[str] = []
        self.mem_cols: tuple[list[Any], list[Any]] = ([], [])
        self.extra: dict[str, Real] = {}

    def gemm(
        self,
        group: str,
        m: Real,
        n: Real,
        k: Real,
        *,
        count: Real = 1.0,
        lp: Flag,
        backward: bool = False,
        batched: bool = False,
    ) -> None:
        """Register ``count`` GEMMs ``(m x k) @ (k x n)`` (with ``backward``: their dgrad and
        wgrad); ``batched``: the ``count`` products run as one strided-batched launch."""
        shapes = ((m, n, k),) if not backward else ((m, k, n), (k, n, m))  # dgrad, wgrad
        cm, cn, ck, cc, cl, cb = self.gemm_cols
        for mm, nn, kk in shapes:
            self.gemm_groups.append(group)
            cm.append(mm)
            cn.append(nn)
            ck.append(kk)
            cc.append(count)
            cl.append(lp)
            cb.append(count if batched else 1.0)

    def mem(self, group: str, num_bytes: Real, kernels: float) -> None:
        """Register a memory-bound op moving ``num_bytes`` of HBM traffic in ``kernels``
        launches (each at least ``kernel_min_time_s``)."""
        self.mem_groups.append(group)
        self.mem_cols[0].append(num_bytes)
        self.mem_cols[1].append(kernels)

    def add(self, group: str, seconds: Real) -> None:
        """Add ``seconds`` already timed elsewhere (flash attention) to ``group``."""
        self.extra[group] = self.extra.get(group, 0.0) + seconds

    def _table(self, column: list[Any], dtype: type[np.generic]) -> NDArray[Any]:
        """One row per op: ``(num_ops, n)``, or ``(num_ops,)`` when every entry is a number."""
        if self.a.scalar:
            return np.array(column, dtype=dtype)
        out = np.empty((len(column), self.a.num_scenarios), dtype=dtype)
        for i, value in enumerate(column):
            out[i] = value
        return out

    def gemm_flops(self, group: str) -> Real:
        """FLOPs of the GEMMs registered under ``group``, shape ``(n,)``."""
        rows = [i for i, g in enumerate(self.gemm_groups) if g == group]
        cm, cn, ck, cc, _, _ = self.gemm_cols
        total = self.a.full(0.0)
        for i in rows:
            total = total + 2.0 * cm[i] * cn[i] * ck[i] * cc[i]
        return total

    @staticmethod
    def _sum_groups(groups: list[str], t: FloatArray, out: dict[str, Real]) -> None:
        index: dict[str, list[int]] = {}
        for i, g in enumerate(groups):
            index.setdefault(g, []).append(i)
        rows_t: Any = t.tolist() if t.ndim == 1 else t  # one scenario: Python floats
        for g, rows in index.items():
            # sequential rather than pairwise: ops that are zero for a scenario (and skipped
            # when no scenario of the batch has them) never change its rounding
            part = rows_t[rows[0]]
            for i in rows[1:]:
                part = part + rows_t[i]
            out[g] = out[g] + part if g in out else part

    def totals(self) -> dict[str, Real]:
        """Seconds per group; each op ``max(compute, memory, kernels · kernel_min)``."""
        eff, a = self.eff, self.a
        kmin = eff.kernel_min_time_s
        out: dict[str, Real] = {}
        if self.gemm_groups:
            cm, cn, ck, cc, cl, cb = self.gemm_cols
            m = self._table(cm, np.float64)
            n = self._table(cn, np.float64)
            k = self._table(ck, np.float64)
            cnt = self._table(cc, np.float64)
            low = self._table(cl, np.bool_)
            batch = self._table(cb, np.float64)
            rate = eff.gemm_flop_per_s(m, n, k, a.device, low_precision=low, batch=batch)
            flops = 2.0 * m * n * k * cnt
            bytes_ = (np.where(low, 1.0, 2.0) * (m * k + k * n) + 2.0 * m * n) * cnt
            bw = eff.memory_bytes_per_s(bytes_, a.device)
            launches = cnt / np.maximum(batch, 1.0)
            t = np.maximum(np.maximum(flops / rate, bytes_ / bw), launches * kmin)
            t = np.where((cnt > 0) & (m * n * k > 0), t, 0.0)
            self._sum_groups(self.gemm_groups, t, out)
        if self.mem_groups:
            b = self._table(self.mem_cols[0], np.float64)
            kern = self._table(self.mem_cols[1], np.float64)
            bw = eff.memory_bytes_per_s(np.maximum(b, 1.0), a.device)
            t = np.where(b > 0, np.maximum(b / bw, kern * kmin), 0.0)
            self._sum_groups(self.mem_groups, t, out)
        for g, sec in self.extra.items():
            out[g] = out[g] + sec if g in out else sec
        zero = a.full(0.0)
        return {g: v + zero for g, v in out.items()}


def _layer_ops(table: _Ops, a: ScenarioArrays, eff: EfficiencyModel, *, moe: bool) -> None:
    """Register one layer's forward (``{p}f``), backward (``{p}b``) and selective-recompute
    (``{p}r``) operators, ``p`` = ``m`` for MoE layers, ``d`` for dense ones."""
    p = "m" if moe else "d"
    t = a.tensor_parallel
    tok = a.micro_batch_size * a.seq_length / a.context_parallel
    tokens_n = ops.where(a.sequence_parallel, tok / t, tok)
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    drop = ops.where(a.has_dropout, 1.0, 0.0)
    dh = a.query_width / a.num_attention_heads
    heads_local = a.num_attention_heads / t
    # attention GEMMs
    for direction, bwd in (("f", False), ("b", True)):
        table.gemm(
            p + direction,
            tok,
            (a.query_width + 2.0 * a.kv_width) / t,
            a.hidden_size,
            lp=lp,
            backward=bwd,
        )
        table.gemm(p + direction, tok, a.hidden_size, a.query_width / t, lp=lp, backward=bwd)
    # attention core (ops of kinds no scenario of the batch has are skipped: they cost 0)
    nonflash = ops.logical_not(a.flash_attention)
    sq = a.seq_length / a.context_parallel
    if ops.any_(nonflash):
        bmm_count = ops.where(nonflash, a.micro_batch_size * heads_local, 0.0)
        for group in (p + "f", p + "r"):
            table.gemm(group, sq, a.seq_length, dh, count=bmm_count, lp=False, batched=True)
            table.gemm(group, sq, dh, a.seq_length, count=bmm_count, lp=False, batched=True)
            table.mem(
                group,
                ops.where(
                    nonflash,
                    (9.0 + 2.0 * drop) * heads_local * sq * a.seq_length * a.micro_batch_size,
                    0.0,
                ),
                3.0,
            )
        table.gemm(
            p + "b", sq, a.seq_length, dh, count=bmm_count, lp=False, backward=True, batched=True
        )
        table.gemm(
            p + "b", sq, dh, a.seq_length, count=bmm_count, lp=False, backward=True, batched=True
        )
        table.mem(
            p + "b",
            ops.where(
                nonflash,
                (11.0 + 2.0 * drop) * heads_local * sq * a.seq_length * a.micro_batch_size,
                0.0,
            ),
            3.0,
        )
    flash_fwd_flops = ops.where(
        a.flash_attention, 2.0 * a.micro_batch_size * sq * a.seq_length * a.query_width / t, 0.0
    )
    fwd_rate = eff.attention_flop_per_s(
        a.seq_length,
        a.device,
        backward=False,
        fused=a.fused_attention,
        head_dim=dh,
        flash_v1=a.flash_attention_v1,
    )
    bwd_rate = eff.attention_flop_per_s(
        a.seq_length,
        a.device,
        backward=True,
        fused=a.fused_attention,
        head_dim=dh,
        flash_v1=a.flash_attention_v1,
    )
    kmin = eff.kernel_min_time_s
    attn_f = ops.where(a.flash_attention, ops.maximum(flash_fwd_flops / fwd_rate, kmin), 0.0)
    attn_b = ops.where(
        a.flash_attention,
        ops.maximum(FLASH_BWD_FLOP_RATIO * flash_fwd_flops / bwd_rate, 2 * kmin),
        0.0,
    )
    table.add(p + "f", attn_f)
    table.add(p + "r", attn_f)
    table.add(p + "b", attn_b)
    # norms, residuals, dropout, rotary (eager stacks: ``ew`` times the fused traffic)
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    rope = ops.where(a.has_rotary_embeddings, 1.0, 0.0)
    table.mem(p + "f", ew * 8.0 * tokens_n * a.hidden_size, 2.0)
    table.mem(p + "b", ew * 12.0 * tokens_n * a.hidden_size, 2.0)
    table.mem(p + "f", ew * 12.0 * tokens_n * a.hidden_size, 2.0)
    table.mem(p + "b", ew * 12.0 * tokens_n * a.hidden_size, 2.0)
    if ops.any_(a.has_dropout):
        table.mem(p + "f", ew * 10.0 * drop * tokens_n * a.hidden_size, 2.0)
        table.mem(p + "b", ew * 10.0 * drop * tokens_n * a.hidden_size, 2.0)
    if ops.any_(a.has_rotary_embeddings):
        table.mem(p + "f", ew * 4.0 * rope * tok * (a.query_width + a.kv_width) / t, 1.0)
        table.mem(p + "b", ew * 4.0 * rope * tok * (a.query_width + a.kv_width) / t, 1.0)
    lp_f = ops.where(lp, 1.0, 0.0)
    any_lp = ops.any_(lp)
    if any_lp:
        table.mem(p + "f", lp_f * 3.0 * tok * (a.hidden_size + a.query_width / t), 2.0)
        table.mem(
            p + "b",
            lp_f * 3.0 * tok * ((a.query_width + 2.0 * a.kv_width) / t + a.hidden_size),
            2.0,
        )
    act_f = ops.where(a.gated_linear_unit, 6.0, 4.0)
    act_b = ops.where(a.gated_linear_unit, 10.0, 6.0)
    if not moe:
        for direction, bwd in (("f", False), ("b", True)):
            table.gemm(
                p + direction, tok, n_up * a.ffn_hidden_size / t, a.hidden_size, lp=lp, backward=bwd
            )
            table.gemm(
                p + direction, tok, a.hidden_size, a.ffn_hidden_size / t, lp=lp, backward=bwd
            )
        table.mem(p + "f", ew * act_f * tok * a.ffn_hidden_size / t, 1.0)
        table.mem(p + "b", ew * act_b * tok * a.ffn_hidden_size / t, 1.0)
        if any_lp:
            table.mem(p + "f", lp_f * 3.0 * tok * (a.hidden_size + a.ffn_hidden_size / t), 2.0)
            table.mem(
                p + "b", lp_f * 3.0 * tok * (a.hidden_size + n_up * a.ffn_hidden_size / t), 2.0
            )
        return
    imb = eff.moe_imbalance_factor
    local_experts = a.num_experts / a.expert_parallel
    tokens_per_expert = (
        tok * a.moe_router_topk * a.expert_parallel / ops.maximum(a.num_experts, 1.0) * imb
    )
    routed = tok * a.moe_router_topk * imb
    shared_w = a.moe_ffn_hidden_size * a.num_shared_experts
    for direction, bwd in (("f", False), ("b", True)):
        table.gemm(p + direction, tok, a.num_experts, a.hidden_size, lp=False, backward=bwd)
        table.gemm(
            p + direction,
            tokens_per_expert,
            n_up * a.moe_ffn_hidden_size / t,
            a.hidden_size,
            count=local_experts,
            lp=lp,
            backward=bwd,
        )
        table.gemm(
            p + direction,
            tokens_per_expert,
            a.hidden_size,
            a.moe_ffn_hidden_size / t,
            count=local_experts,
            lp=lp,
            backward=bwd,
        )
        table.gemm(p + direction, tok, n_up * shared_w / t, a.hidden_size, lp=lp, backward=bwd)
        table.gemm(p + direction, tok, a.hidden_size, shared_w / t, lp=lp, backward=bwd)
    width = routed * a.moe_ffn_hidden_size + tok * shared_w
    table.mem(p + "f", ew * act_f * width / t, 2.0)
    table.mem(p + "b", ew * act_b * width / t, 2.0)
    table.mem(
        p + "f", 8.0 * tok * a.moe_router_topk * a.hidden_size + 8.0 * tok * a.num_experts, 3.0
    )  # router softmax/top-k, permute
    table.mem(
        p + "b", 8.0 * tok * a.moe_router_topk * a.hidden_size + 8.0 * tok * a.num_experts, 3.0
    )
    table.mem(
        p + "f",
        lp_f
        * 3.0
        * (
            routed * (a.hidden_size + a.moe_ffn_hidden_size / t)
            + tok * (a.hidden_size + shared_w / t)
        ),
        4.0,
    )
    table.mem(
        p + "b",
        lp_f
        * 3.0
        * (
            routed * (a.hidden_size + n_up * a.moe_ffn_hidden_size / t)
            + tok * (a.hidden_size + n_up * shared_w / t)
        ),
        4.0,
    )


def _edge_ops(table: _Ops, a: ScenarioArrays) -> None:
    """Embedding (``e``, first stage) and LM head + loss (``h``, last stage), fwd + bwd."""
    tok = a.micro_batch_size * a.seq_length / a.context_parallel
    tokens_n = ops.where(a.sequence_parallel, tok / a.tensor_parallel, tok)
    table.mem("e", 4.0 * tokens_n * a.hidden_size, 1.0)
    table.mem("e", 12.0 * tok * a.hidden_size, 2.0)
    table.gemm("h", tok, a.vocab_size / a.tensor_parallel, a.hidden_size, lp=False)
    table.gemm("h", tok, a.vocab_size / a.tensor_parallel, a.hidden_size, lp=False, backward=True)
    table.mem("h", 20.0 * tokens_n * a.hidden_size, 2.0)  # final norm fwd + bwd
    table.mem(
        "h", a.loss_bytes_per_logit * tok * a.vocab_size / a.tensor_parallel, 5.0
    )  # cross-entropy (framework's kernels)


def _tp_times(a: ScenarioArrays, link: coll.Link) -> tuple[Real, Real, Real]:
    """``(per layer fwd+bwd, embedding, LM head)`` tensor-parallel communication seconds."""
    tok = a.micro_batch_size * a.seq_length / a.context_parallel
    size = tok * a.hidden_size * ACT_BYTES
    ag = coll.all_gather_time_s(size, a.tensor_parallel, 1.0, link)
    rs = ag  # a ring reduce-scatter of the same buffer costs the same
    ar = coll.all_reduce_time_s(size, a.tensor_parallel, 1.0, link)
    small = coll.all_reduce_time_s(tok * 4.0, a.tensor_parallel, 1.0, link)
    pair = ops.where(a.sequence_parallel, ag + rs, ar)
    layer = 4.0 * pair  # 2 forward + 2 backward
    head = ops.where(a.sequence_parallel, ag + rs, 0.0) + 3.0 * small
    return layer, pair, head


def evaluate(a: ScenarioArrays, eff: EfficiencyModel) -> BatchResult:
    """Iteration time, breakdown, FLOPs and memory of every scenario in ``a``: arrays of shape
    ``(n,)`` for arrays in, Python floats for the one-scenario form."""
    table = _Ops(a, eff)
    _layer_ops(table, a, eff, moe=False)
    has_moe = ops.any_(a.num_moe_layers > 0)
    if has_moe:
        _layer_ops(table, a, eff, moe=True)
    _edge_ops(table, a)
    tot = table.totals()
    zero = a.full(0.0)

    def g(name: str) -> Real:
        return tot.get(name, zero)

    mf = a.num_moe_layers / a.num_layers
    rc = a.recompute
    full = rc == 2
    sel_or_full = rc >= 1
    rec_d = ops.where(full, g("df"), ops.where(sel_or_full, g("dr"), 0.0))
    rec_m = ops.where(full, g("mf"), ops.where(sel_or_full, g("mr"), 0.0))
    layer_compute = (1 - mf) * (g("df") + g("db") + rec_d) + mf * (g("mf") + g("mb") + rec_m)
    layers = a.num_layers / a.pipeline_parallel

    link = coll.Link(
        up_bw=a.scale_up_bandwidth_bytes_per_s * eff.bus_bandwidth_fraction(scale_up=True),
        out_bw=a.inter_node_bandwidth_bytes_per_s * eff.bus_bandwidth_fraction(scale_up=False),
        up_lat=a.scale_up_latency_s,
        out_lat=a.scale_out_latency_s,
        domain=a.nvlink_domain_size,
        base=eff.collective_latency_s,
    )
    # tensor parallel
    tp_layer, tp_emb, tp_head = _tp_times(a, link)
    hopper_plus = (a.device.architecture >= _HOPPER) & (a.device.architecture < _CDNA3)
    tp_keep = ops.where(
        a.tp_comm_overlap & hopper_plus,
        1.0 - eff.comm_overlap(CommKind.TENSOR_USERBUFFERS),
        1.0 - eff.comm_overlap(CommKind.TENSOR),
    )
    tp_layer = tp_layer * ops.where(full, 1.5, 1.0) * tp_keep
    tp_emb, tp_head = tp_emb * tp_keep, tp_head * tp_keep
    # context parallel: ring exchange of K,V per step, hidden behind that step's attention
    tok = a.micro_batch_size * a.seq_length / a.context_parallel
    cp_layer = zero
    if ops.any_(a.context_parallel > 1):
        kv_bytes = 2.0 * tok * a.kv_width / a.tensor_parallel * ACT_BYTES
        cp_inside = (
            coll.placement(a.context_parallel, a.tensor_parallel, a.nvlink_domain_size)
            >= a.context_parallel
        )
        step_f = coll.p2p_time_s(kv_bytes, inside=cp_inside, link=link)
        step_b = coll.p2p_time_s(2.0 * kv_bytes, inside=cp_inside, link=link)
        attn_f = (
            ops.where(a.flash_attention, (1 - mf) * g("dr") + mf * g("mr"), 0.0)
            / a.context_parallel
        )
        cp_layer_f = (a.context_parallel - 1.0) * ops.maximum(step_f - attn_f, 0.0)
        cp_layer_b = (a.context_parallel - 1.0) * ops.maximum(
            step_b - FLASH_BWD_FLOP_RATIO * attn_f, 0.0
        )
        cp_layer = ops.where(
            a.context_parallel > 1, cp_layer_f * ops.where(rc >= 1, 2.0, 1.0) + cp_layer_b, 0.0
        )
    # expert parallel
    ep_layer = zero
    if has_moe:
        ep_size = (
            ops.where(a.sequence_parallel, tok / a.tensor_parallel, tok)
            * a.moe_router_topk
            * a.hidden_size
            * ACT_BYTES
        )
        ep_a2a = coll.all_to_all_time_s(ep_size, a.expert_parallel, a.tensor_parallel, link)
        ep_keep = 1.0 - eff.comm_overlap(CommKind.EXPERT)
        ep_layer = mf * ep_a2a * ops.where(full, 6.0, 4.0) * ep_keep

    per_mb_mid = layers * (layer_compute)
    tp_mid, cp_mid, ep_mid = layers * tp_layer, layers * cp_layer, layers * ep_layer
    single = a.pipeline_parallel == 1
    comp_first = per_mb_mid + g("e") + ops.where(single, g("h"), 0.0)
    comp_last = per_mb_mid + g("h") + ops.where(single, g("e"), 0.0)
    tp_first = tp_mid + tp_emb + ops.where(single, tp_head, 0.0)
    tp_last = tp_mid + tp_head + ops.where(single, tp_emb, 0.0)
    first_total = comp_first + tp_first + cp_mid + ep_mid
    last_total = comp_last + tp_last + cp_mid + ep_mid
    first_slow = first_total >= last_total
    slow_total = ops.maximum(first_total, last_total)
    m = a.num_microbatches
    compute_s = m * ops.where(first_slow, comp_first, comp_last)
    tp_s = m * ops.where(first_slow, tp_first, tp_last)
    cp_s = m * cp_mid
    ep_s = m * ep_mid
    bubble_s = pp_s = zero
    if not ops.all_(single):  # pipeline bubble and p2p (skipped when no scenario pipelines)
        mean_total = (per_mb_mid + tp_mid + cp_mid + ep_mid) + (
            g("e") + g("h") + tp_emb + tp_head
        ) / a.pipeline_parallel
        bubble_s = ops.where(
            single, 0.0, (a.pipeline_parallel - 1.0) / a.virtual_pipeline * mean_total
        )
        p2p_inside = (
            a.tensor_parallel * a.context_parallel * a.data_parallel * a.pipeline_parallel
            <= a.nvlink_domain_size
        )
        p2p = coll.p2p_time_s(
            tok * a.hidden_size * ACT_BYTES / a.tensor_parallel, inside=p2p_inside, link=link
        )
        # interleaved schedule with overlapped p2p: only what exceeds one chunk's forward shows
        chunk_fwd = layers / a.virtual_pipeline * ((1 - mf) * g("df") + mf * g("mf"))
        steady = ops.where(
            a.pp_comm_overlap & (a.virtual_pipeline > 1),
            ops.maximum(p2p - chunk_fwd, 0.0) + link.base,
            p2p,
        )
        pp_s = ops.where(
            single,
            0.0,
            2.0 * a.virtual_pipeline * m * steady + 2.0 * (a.pipeline_parallel - 1.0) * p2p,
        )
    # data parallel
    fd, fe, ld, le = stage_params(a)
    use_first = fd + fe >= ld + le
    dense = ops.where(use_first, fd, ld)
    expert = ops.where(use_first, fe, le)
    dp_dense_n = a.data_parallel * a.context_parallel
    dp_exp_n = ops.maximum(dp_dense_n / a.expert_parallel, 1.0)

    # parameter all-gathers per iteration (ZeRO 1-2: one, before the first forward) or per
    # microbatch (ZeRO-3/FSDP: forward and backward, plus the recomputed forward's under full
    # recompute for stacks that release parameters after every forward: DeepSpeed)
    regather = a.zero3_regather_on_recompute & full
    gathers = ops.where(
        a.zero_stage >= 3, ops.where(regather, 3.0, 2.0), ops.where(a.zero_stage >= 1, 1.0, 0.0)
    )

    def dp_comm(params: Real, group: Real, stride: Real) -> tuple[Real, Real]:
        """``(gradient all-reduce / reduce-scatter, parameter all-gathers)`` seconds."""
        grads = params * a.grad_bytes_per_param
        ar = coll.all_reduce_time_s(grads, group, stride, link)
        rs = coll.all_gather_time_s(grads, group, stride, link)  # reduce-scatter: same cost
        ag = coll.all_gather_time_s(params * PARAM_GATHER_BYTES, group, stride, link)
        return ops.where(a.zero_stage == 0, ar, rs), gathers * ag

    gd, wd = dp_comm(dense, dp_dense_n, a.tensor_parallel)
    grad_c, gather_c = gd, wd
    if has_moe:  # expert parameters exist: their own (smaller) data-parallel group
        ge, we = dp_comm(expert, dp_exp_n, a.tensor_parallel * a.expert_parallel)
        grad_c, gather_c = gd + ops.where(expert > 0, ge, 0.0), wd + ops.where(expert > 0, we, 0.0)
    keep = 1.0 - eff.comm_overlap(CommKind.DATA)
    bwd_window = layers * ((1 - mf) * (g("db") + rec_d) + mf * (g("mb") + rec_m))
    fwd_window = layers * ((1 - mf) * g("df") + mf * g("mf"))
    exposed_grad = ops.where(
        a.overlap_grad_reduce, ops.maximum(grad_c * keep, grad_c - bwd_window), grad_c
    )
    exposed_gather = ops.where(
        a.overlap_param_gather, ops.maximum(gather_c * keep, gather_c - fwd_window), gather_c
    )
    # ZeRO-3/FSDP, every microbatch: the gathers and one reduce-scatter per collective unit,
    # each paying the ring latency: a flat buffer per layer, or every parameter tensor of the
    # layer (DeepSpeed; 12 with biases (GPT), 9 without (Llama)); DeepSpeed's prefetch reaches
    # only ``z3_prefetch`` parameters ahead, hiding at most that share of the next tensor's
    # gather (planner.perf.frameworks)
    per_mb = grad_c + gather_c
    keep_z3 = a.full(keep)
    if ops.any_(a.zero_stage >= 3):
        tensors = ops.where(a.zero3_gather_per_tensor, ops.where(a.has_biases, 12.0, 9.0), 1.0)
        latency_one = coll.all_gather_time_s(zero, dp_dense_n, a.tensor_parallel, link)
        per_mb = per_mb + (gathers + 1.0) * ops.maximum(layers * tensors - 1.0, 0.0) * latency_one
        unit_params = dense / ops.maximum(layers * tensors, 1.0)
        reach = ops.minimum(a.zero3_prefetch_params / ops.maximum(unit_params, 1.0), 1.0 - keep)
        keep_z3 = ops.where(a.zero3_prefetch_params > 0, 1.0 - reach, keep)
    z3 = m * ops.maximum(per_mb * keep_z3, per_mb - slow_total)
    dp_s = ops.where(a.zero_stage >= 3, z3, exposed_grad + exposed_gather)
    # optimizer
    shard_dense = ops.where(a.zero_stage >= 1, dp_dense_n, 1.0)
    shard_exp = ops.where(a.zero_stage >= 1, dp_exp_n, 1.0)
    owned = dense / shard_dense + expert / shard_exp
    opt_bytes = ADAM_HBM_BYTES_PER_PARAM * owned + ops.where(
        a.device.low_precision, FP8_CAST_BYTES_PER_PARAM * (dense + expert), 0.0
    )
    opt_s = ops.maximum(
        opt_bytes / eff.memory_bytes_per_s(opt_bytes, a.device), 4.0 * eff.kernel_min_time_s
    )
    breakdown = {
        "compute": compute_s,
        "tp_comm_exposed": tp_s,
        "cp_comm_exposed": cp_s,
        "ep_comm_exposed": ep_s,
        "pp_comm_exposed": pp_s,
        "pp_bubble": bubble_s,
        "dp_comm_exposed": dp_s,
        "optimizer": opt_s,
    }
    iteration = zero
    for key in BREAKDOWN_KEYS:
        iteration = iteration + breakdown[key]
    flops = iteration_flops(a, num_sequences=a.global_batch_size, recompute=a.recompute)
    return BatchResult(
        iteration_time_s=iteration,
        breakdown_s=breakdown,
        model_flops=flops.model_total,
        hardware_flops=flops.hardware_total,
        memory=memory_arrays(a, eff, params=(fd, fe, ld, le)),
    )
