"""The per-layer operator table: every kernel of a transformer layer, timed for one microbatch.

Operators per transformer layer and microbatch on one GPU, forward and backward, for
``tok = b·S/c`` local tokens (micro-batch ``b``, sequence ``S``, context parallel ``c``; ``t``
tensor parallel, ``h`` hidden, ``q``/``kv`` the widths of all query / key heads, ``f`` the MLP
width; Megatron-LM's layer, Shoeybi et al. 2019 and Narayanan et al. SC'21):

* GEMMs: QKV ``(tok, (q+2kv)/t, h)`` (GQA/MQA through ``kv``), output projection
  ``(tok, h, q/t)``, MLP up ``(tok, n_up·f/t, h)`` (``n_up`` 2 for a gated linear unit) and down
  ``(tok, h, f/t)``; each backward GEMM is a data-gradient ``(M, K, N)`` and a weight-gradient
  ``(K, N, M)`` GEMM.
* Attention core: flash attention (Dao 2023) executes the causal half of ``4·b·(S/c)·S·q/t``
  forward FLOPs and ``FLASH_BWD_FLOP_RATIO`` times that backward; without flash, two batched
  GEMMs per direction over the full square plus softmax/mask/dropout memory traffic.
* MoE layers: router GEMM ``(tok, E, h)``, ``E/e`` expert GEMMs of ``tok·topk·e/E·imbalance``
  tokens each, shared experts, router softmax/top-k and token permute/unpermute.
* Memory-bound: two norms, two residual adds, dropout (models with dropout), rotary embeddings
  (models with them), the activation function, FP8 casts (Transformer Engine casts inputs and
  weights of every FP8 GEMM); eager stacks move ``elementwise_traffic_factor`` times the bytes.
* First stage: embedding; last stage: LM head GEMM (16-bit) and cross-entropy (the framework's
  loss kernels move ``loss_bytes_per_logit`` of HBM traffic per logit,
  ``planner.perf.frameworks``).

Each op takes ``max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels ·
kernel_min_time_s)`` (``EfficiencyModel``); ops of a kind no scenario of the batch has are not
registered (they would cost 0).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Flag, FloatArray, Real
from planner.specs.parallelism import Recompute

__all__ = [
    "FLASH_BWD_FLOP_RATIO",
    "LayerTimes",
    "OperatorTable",
    "OperatorTimes",
    "edge_ops",
    "layer_ops",
    "layer_times",
    "operator_times",
]

_SELECTIVE, _FULL = Recompute.SELECTIVE.code, Recompute.FULL.code

FLASH_BWD_FLOP_RATIO = 2.5
"""Flash-attention backward executes 5 matmuls (incl. recomputing the scores) vs 2 forward."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorTimes:
    """Seconds of the operators of one microbatch on one GPU, by group (numbers, or arrays of
    shape ``(n,)``): one dense and one MoE layer's forward, backward and the forward that
    selective recompute repeats (the attention core), the embedding (first pipeline stage)
    and the LM head with its loss (last stage), forward + backward."""

    dense_forward_s: Real
    dense_backward_s: Real
    dense_recompute_s: Real
    moe_forward_s: Real
    moe_backward_s: Real
    moe_recompute_s: Real
    embedding_s: Real
    lm_head_s: Real


_GROUPS = tuple(f.name for f in fields(OperatorTimes))


class OperatorTable:
    """Accumulates operator times per group (an ``OperatorTimes`` field name): GEMMs and
    memory-bound kernels are timed in one vectorized call each (shape ``(num_ops, n)``,
    ``(num_ops,)`` for one scenario). Shapes may be numbers or ``(n,)`` arrays; they are
    broadcast once, when timed."""

    def __init__(self, a: ScenarioArrays, eff: EfficiencyModel) -> None:
        self.a, self.eff = a, eff
        self.gemm_groups: list[str] = []
        self.gemm_m: list[Any] = []
        self.gemm_n: list[Any] = []
        self.gemm_k: list[Any] = []
        self.gemm_count: list[Any] = []
        self.gemm_low_precision: list[Any] = []
        self.gemm_batch: list[Any] = []
        self.mem_groups: list[str] = []
        self.mem_bytes: list[Any] = []
        self.mem_kernels: list[Any] = []
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
        wgrad); ``lp``: in the low (FP8-class) GEMM precision; ``batched``: the ``count``
        products run as one strided-batched launch."""
        shapes = ((m, n, k),) if not backward else ((m, k, n), (k, n, m))  # dgrad, wgrad
        for rows, cols, inner in shapes:
            self.gemm_groups.append(group)
            self.gemm_m.append(rows)
            self.gemm_n.append(cols)
            self.gemm_k.append(inner)
            self.gemm_count.append(count)
            self.gemm_low_precision.append(lp)
            self.gemm_batch.append(count if batched else 1.0)

    def mem(self, group: str, num_bytes: Real, kernels: float) -> None:
        """Register a memory-bound op moving ``num_bytes`` of HBM traffic in ``kernels``
        launches (each at least ``kernel_min_time_s``)."""
        self.mem_groups.append(group)
        self.mem_bytes.append(num_bytes)
        self.mem_kernels.append(kernels)

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
        total = self.a.full(0.0)
        for i, each in enumerate(self.gemm_groups):
            if each == group:
                m, n, k = self.gemm_m[i], self.gemm_n[i], self.gemm_k[i]
                total = total + 2.0 * m * n * k * self.gemm_count[i]
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
            m = self._table(self.gemm_m, np.float64)
            n = self._table(self.gemm_n, np.float64)
            k = self._table(self.gemm_k, np.float64)
            cnt = self._table(self.gemm_count, np.float64)
            low = self._table(self.gemm_low_precision, np.bool_)
            batch = self._table(self.gemm_batch, np.float64)
            rate = eff.gemm_flop_per_s(m, n, k, a.device, low_precision=low, batch=batch)
            flops = 2.0 * m * n * k * cnt
            bytes_ = (np.where(low, 1.0, 2.0) * (m * k + k * n) + 2.0 * m * n) * cnt
            bw = eff.memory_bytes_per_s(bytes_, a.device)
            launches = cnt / np.maximum(batch, 1.0)
            t = np.maximum(np.maximum(flops / rate, bytes_ / bw), launches * kmin)
            t = np.where((cnt > 0) & (m * n * k > 0), t, 0.0)
            self._sum_groups(self.gemm_groups, t, out)
        if self.mem_groups:
            b = self._table(self.mem_bytes, np.float64)
            kern = self._table(self.mem_kernels, np.float64)
            bw = eff.memory_bytes_per_s(np.maximum(b, 1.0), a.device)
            t = np.where(b > 0, np.maximum(b / bw, kern * kmin), 0.0)
            self._sum_groups(self.mem_groups, t, out)
        for g, sec in self.extra.items():
            out[g] = out[g] + sec if g in out else sec
        zero = a.full(0.0)
        return {g: v + zero for g, v in out.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Groups:
    """The ``OperatorTimes`` fields one layer kind's operators are registered under."""

    forward: str
    backward: str
    recompute: str


_DENSE = _Groups(
    forward="dense_forward_s", backward="dense_backward_s", recompute="dense_recompute_s"
)
_MOE = _Groups(forward="moe_forward_s", backward="moe_backward_s", recompute="moe_recompute_s")


def layer_ops(table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, *, moe: bool) -> None:
    """Register one layer's forward, backward and selective-recompute operators under
    ``{kind}_forward_s``, ``{kind}_backward_s`` and ``{kind}_recompute_s``, ``kind`` ``moe``
    for MoE layers, ``dense`` for dense ones (module docstring)."""
    groups = _MOE if moe else _DENSE
    _attention_ops(table, a, eff, groups)
    _layer_elementwise_ops(table, a, eff, groups)
    if moe:
        _moe_mlp_ops(table, a, eff, groups)
    else:
        _dense_mlp_ops(table, a, eff, groups)


def _attention_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: _Groups
) -> None:
    """QKV and output projections, and the attention core (flash or two batched GEMMs)."""
    forward, backward, recompute = groups.forward, groups.backward, groups.recompute
    tp, hidden, q_width = a.tensor_parallel, a.hidden_size, a.query_width
    tokens = a.tokens_per_microbatch
    lp = a.device.low_precision
    for group, bwd in ((forward, False), (backward, True)):
        qkv_width = (q_width + 2.0 * a.kv_width) / tp
        table.gemm(group, tokens, qkv_width, hidden, lp=lp, backward=bwd)
        table.gemm(group, tokens, hidden, q_width / tp, lp=lp, backward=bwd)
    seq, local_seq = a.seq_length, a.seq_length / a.context_parallel
    head_dim = q_width / a.num_attention_heads
    heads_local = a.num_attention_heads / tp
    non_flash = ops.logical_not(a.flash_attention)
    if ops.any_(non_flash):  # scores and weighted values as batched GEMMs over b·heads
        drop = ops.where(a.has_dropout, 1.0, 0.0)
        products = ops.where(non_flash, a.micro_batch_size * heads_local, 0.0)
        for group in (forward, recompute):
            table.gemm(group, local_seq, seq, head_dim, count=products, lp=False, batched=True)
            table.gemm(group, local_seq, head_dim, seq, count=products, lp=False, batched=True)
            # softmax, mask and dropout over the scores of the local queries
            traffic = (9.0 + 2.0 * drop) * heads_local * local_seq * seq * a.micro_batch_size
            table.mem(group, ops.where(non_flash, traffic, 0.0), 3.0)
        for m, n, k in ((local_seq, seq, head_dim), (local_seq, head_dim, seq)):
            table.gemm(backward, m, n, k, count=products, lp=False, backward=True, batched=True)
        traffic = (11.0 + 2.0 * drop) * heads_local * local_seq * seq * a.micro_batch_size
        table.mem(backward, ops.where(non_flash, traffic, 0.0), 3.0)
    flash_fwd_flops = ops.where(
        a.flash_attention, 2.0 * a.micro_batch_size * local_seq * seq * q_width / tp, 0.0
    )
    fwd_rate, bwd_rate = (
        eff.attention_flop_per_s(
            seq,
            a.device,
            backward=bwd,
            fused=a.fused_attention,
            head_dim=head_dim,
            flash_v1=a.flash_attention_v1,
        )
        for bwd in (False, True)
    )
    kmin = eff.kernel_min_time_s
    attn_f = ops.where(a.flash_attention, ops.maximum(flash_fwd_flops / fwd_rate, kmin), 0.0)
    attn_b = ops.where(
        a.flash_attention,
        ops.maximum(FLASH_BWD_FLOP_RATIO * flash_fwd_flops / bwd_rate, 2 * kmin),
        0.0,
    )
    table.add(forward, attn_f)
    table.add(recompute, attn_f)
    table.add(backward, attn_b)


def _layer_elementwise_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: _Groups
) -> None:
    """Norms and residual adds, dropout, rotary embeddings and the FP8 casts of the attention
    GEMMs (eager stacks: ``elementwise_traffic_factor`` times the fused traffic)."""
    forward, backward = groups.forward, groups.backward
    tp, hidden = a.tensor_parallel, a.hidden_size
    tokens = a.tokens_per_microbatch
    norm_tokens = ops.where(a.sequence_parallel, tokens / tp, tokens)  # sharded by SP
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    table.mem(forward, ew * 8.0 * norm_tokens * hidden, 2.0)  # two norms
    table.mem(backward, ew * 12.0 * norm_tokens * hidden, 2.0)
    table.mem(forward, ew * 12.0 * norm_tokens * hidden, 2.0)  # two residual adds
    table.mem(backward, ew * 12.0 * norm_tokens * hidden, 2.0)
    if ops.any_(a.has_dropout):
        drop = ops.where(a.has_dropout, 1.0, 0.0)
        table.mem(forward, ew * 10.0 * drop * norm_tokens * hidden, 2.0)
        table.mem(backward, ew * 10.0 * drop * norm_tokens * hidden, 2.0)
    if ops.any_(a.has_rotary_embeddings):
        rope = ops.where(a.has_rotary_embeddings, 1.0, 0.0)
        table.mem(forward, ew * 4.0 * rope * tokens * (a.query_width + a.kv_width) / tp, 1.0)
        table.mem(backward, ew * 4.0 * rope * tokens * (a.query_width + a.kv_width) / tp, 1.0)
    lp = a.device.low_precision
    if ops.any_(lp):
        lp_f = ops.where(lp, 1.0, 0.0)
        qkv_width = (a.query_width + 2.0 * a.kv_width) / tp
        table.mem(forward, lp_f * 3.0 * tokens * (hidden + a.query_width / tp), 2.0)
        table.mem(backward, lp_f * 3.0 * tokens * (qkv_width + hidden), 2.0)


def _activation_bytes(a: ScenarioArrays, *, backward: bool) -> Real:
    """HBM bytes per MLP activation element, forward or backward (a gated linear unit reads
    and writes more: SwiGLU's two inputs)."""
    if backward:
        return ops.where(a.gated_linear_unit, 10.0, 6.0)
    return ops.where(a.gated_linear_unit, 6.0, 4.0)


def _dense_mlp_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: _Groups
) -> None:
    """The dense MLP: up and down projections, activation function, FP8 casts."""
    forward, backward = groups.forward, groups.backward
    tp, hidden, ffn = a.tensor_parallel, a.hidden_size, a.ffn_hidden_size
    tokens = a.tokens_per_microbatch
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    for group, bwd in ((forward, False), (backward, True)):
        table.gemm(group, tokens, n_up * ffn / tp, hidden, lp=lp, backward=bwd)
        table.gemm(group, tokens, hidden, ffn / tp, lp=lp, backward=bwd)
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    act_f, act_b = _activation_bytes(a, backward=False), _activation_bytes(a, backward=True)
    table.mem(forward, ew * act_f * tokens * ffn / tp, 1.0)
    table.mem(backward, ew * act_b * tokens * ffn / tp, 1.0)
    if ops.any_(lp):
        lp_f = ops.where(lp, 1.0, 0.0)
        table.mem(forward, lp_f * 3.0 * tokens * (hidden + ffn / tp), 2.0)
        table.mem(backward, lp_f * 3.0 * tokens * (hidden + n_up * ffn / tp), 2.0)


def _moe_mlp_ops(
    table: OperatorTable, a: ScenarioArrays, eff: EfficiencyModel, groups: _Groups
) -> None:
    """The MoE MLP: router, the local experts (busiest rank: ``moe_imbalance_factor``), shared
    experts, activation function, router softmax/top-k and permute, FP8 casts."""
    forward, backward = groups.forward, groups.backward
    tp, hidden, expert_ffn = a.tensor_parallel, a.hidden_size, a.moe_ffn_hidden_size
    tokens, topk = a.tokens_per_microbatch, a.moe_router_topk
    lp = a.device.low_precision
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    imbalance = eff.moe_imbalance_factor
    local_experts = a.num_experts / a.expert_parallel
    # MoE parallel folding: each expert's tokens come from its expert-parallel peers' share
    # (``expert_tokens_per_microbatch``), its FFN split over the expert tensor-parallel ranks
    etp = a.expert_tensor_parallel
    per_expert = (
        a.expert_tokens_per_microbatch
        * topk
        * a.expert_parallel
        / ops.maximum(a.num_experts, 1.0)
        * imbalance
    )
    routed = tokens * topk * imbalance
    shared_ffn = expert_ffn * a.num_shared_experts
    for group, bwd in ((forward, False), (backward, True)):
        table.gemm(group, tokens, a.num_experts, hidden, lp=False, backward=bwd)
        for n, k in ((n_up * expert_ffn / etp, hidden), (hidden, expert_ffn / etp)):
            table.gemm(group, per_expert, n, k, count=local_experts, lp=lp, backward=bwd)
        table.gemm(group, tokens, n_up * shared_ffn / tp, hidden, lp=lp, backward=bwd)
        table.gemm(group, tokens, hidden, shared_ffn / tp, lp=lp, backward=bwd)
    ew = eff.elementwise_traffic_factor(a.fused_elementwise)
    act_f, act_b = _activation_bytes(a, backward=False), _activation_bytes(a, backward=True)
    width = routed * expert_ffn + tokens * shared_ffn
    table.mem(forward, ew * act_f * width / tp, 2.0)
    table.mem(backward, ew * act_b * width / tp, 2.0)
    router = 8.0 * tokens * topk * hidden + 8.0 * tokens * a.num_experts  # softmax/top-k, permute
    table.mem(forward, router, 3.0)
    table.mem(backward, router, 3.0)
    lp_f = ops.where(lp, 1.0, 0.0)
    cast_f = routed * (hidden + expert_ffn / tp) + tokens * (hidden + shared_ffn / tp)
    cast_b = routed * (hidden + n_up * expert_ffn / tp) + tokens * (hidden + n_up * shared_ffn / tp)
    table.mem(forward, lp_f * 3.0 * cast_f, 4.0)
    table.mem(backward, lp_f * 3.0 * cast_b, 4.0)


def edge_ops(table: OperatorTable, a: ScenarioArrays) -> None:
    """Embedding (``embedding_s``, first stage) and LM head + loss (``lm_head_s``, last
    stage), forward + backward."""
    tp, hidden = a.tensor_parallel, a.hidden_size
    tokens = a.tokens_per_microbatch
    norm_tokens = ops.where(a.sequence_parallel, tokens / tp, tokens)
    table.mem("embedding_s", 4.0 * norm_tokens * hidden, 1.0)
    table.mem("embedding_s", 12.0 * tokens * hidden, 2.0)
    table.gemm("lm_head_s", tokens, a.vocab_size / tp, hidden, lp=False)
    table.gemm("lm_head_s", tokens, a.vocab_size / tp, hidden, lp=False, backward=True)
    table.mem("lm_head_s", 20.0 * norm_tokens * hidden, 2.0)  # final norm fwd + bwd
    loss_bytes = a.loss_bytes_per_logit * tokens * a.vocab_size / tp  # the framework's kernels
    table.mem("lm_head_s", loss_bytes, 5.0)


def operator_times(a: ScenarioArrays, eff: EfficiencyModel) -> OperatorTimes:
    """Every operator group of ``a`` timed (MoE layers only when some scenario has them)."""
    table = OperatorTable(a, eff)
    layer_ops(table, a, eff, moe=False)
    if ops.any_(a.num_moe_layers > 0):
        layer_ops(table, a, eff, moe=True)
    edge_ops(table, a)
    totals = table.totals()
    zero = a.full(0.0)
    return OperatorTimes(**{name: totals.get(name, zero) for name in _GROUPS})


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerTimes:
    """Seconds of one transformer layer for one microbatch, dense and MoE layers weighted by
    their share of the layers (numbers, or arrays of shape ``(n,)``).

    ``total_s`` is forward + backward + what recompute repeats (selective: the attention core
    forward; full: the whole forward, Korthikanti et al. 2022 §4-5); ``forward_s`` the forward;
    ``backward_s`` the backward with its recompute (the window that hides the gradient
    reduction); ``attention_forward_s`` the forward of the attention core alone.
    """

    total_s: Real
    forward_s: Real
    backward_s: Real
    attention_forward_s: Real


def layer_times(times: OperatorTimes, a: ScenarioArrays) -> LayerTimes:
    """``LayerTimes`` of the operator groups ``times`` under ``a.recompute``."""
    moe = a.num_moe_layers / a.num_layers
    dense = 1 - moe
    full = a.recompute == _FULL
    some = a.recompute >= _SELECTIVE
    again_dense = ops.where(
        full, times.dense_forward_s, ops.where(some, times.dense_recompute_s, 0.0)
    )
    again_moe = ops.where(full, times.moe_forward_s, ops.where(some, times.moe_recompute_s, 0.0))
    return LayerTimes(
        total_s=dense * (times.dense_forward_s + times.dense_backward_s + again_dense)
        + moe * (times.moe_forward_s + times.moe_backward_s + again_moe),
        forward_s=dense * times.dense_forward_s + moe * times.moe_forward_s,
        backward_s=dense * (times.dense_backward_s + again_dense)
        + moe * (times.moe_backward_s + again_moe),
        attention_forward_s=dense * times.dense_recompute_s + moe * times.moe_recompute_s,
    )
