"""FLOP counts of one training iteration (dense, GQA, MLA, SwiGLU, MoE, MTP), causal attention
at full s².

Per token and layer, forward pass (Narayanan et al. SC'21, §5.1 / eq. 3, generalised): the
attention projections ``2 x`` their weights (QKV ``h·(q + 2·kv)`` and output ``q·h``; with
multi-latent attention the down projections ``h·(r_q + r_kv + d_rope)``, the up projections
``r_q·q'`` and ``r_kv·heads·(d_qk + d_v)`` and the output ``heads·d_v·h``, DeepSeek-AI 2024,
DeepSeek-V2 §2.1, as Megatron-LM's ``num_floating_point_operations`` counts them), attention
scores and weighted values ``2·s·(q' + o)`` (``q'``/``o`` the query and output widths; ``4·s·q``
for a GQA model: Megatron counts the full ``s x s`` product even for causal masks; sliding-
window layers attend over ``min(w, s)`` keys instead of ``s``), MLP ``2·n_mat·h·f`` (``n_mat`` =
3 for SwiGLU, 2 otherwise; ``top_k`` routed experts plus the shared experts' width and a
``2·h·E`` router for MoE layers); the LM head adds ``2·h·V`` per token. Each multi-token
prediction module (DeepSeek-AI 2024, DeepSeek-V3 §2.2; Megatron-Core
``MultiTokenPredictionBlock``) adds one transformer layer (MoE when the last decoder layer is),
its ``2h -> h`` projection ``4·h²`` and another LM head ``2·h·V``, as Megatron-LM counts them.
Backward costs twice the forward, so model FLOPs = 3 x forward. For a GPT with ``q = kv = h``,
``f = 4h`` this is exactly ``72·B·s·l·h²·(1 + s/(6h) + V/(12·h·l))`` (Korthikanti et al. 2022,
§6, model FLOPs).

The one implementation for both callers: every function takes a ``ModelShape``, which a
``ModelSpec`` (one model, Python numbers) and ``ScenarioArrays`` (the engine's input: Python
numbers in the one-scenario form, arrays of shape ``(n,)`` for a batch) both are, and computes
with ``planner.perf.ops`` so that either form gives the same IEEE-754 results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from planner.perf import ops
from planner.perf.ops import Count, Flag, Real
from planner.specs.parallelism import Recompute

__all__ = [
    "IterationFlops",
    "ModelShape",
    "attention_core_flops_per_token",
    "attention_keys",
    "attention_linear_flops_per_token",
    "iteration_flops",
    "lm_head_flops_per_token",
    "mlp_flops_per_token",
    "model_flops_per_iteration",
]

_SELECTIVE, _FULL = Recompute.SELECTIVE.code, Recompute.FULL.code


class ModelShape(Protocol):
    """The model dimensions a FLOP count reads (Megatron-LM names, as ``ModelSpec`` has them):
    numbers for one model, or arrays of shape ``(n,)`` (``ScenarioArrays``)."""

    @property
    def num_layers(self) -> Real: ...
    @property
    def hidden_size(self) -> Real: ...
    @property
    def attention_gemm_params(self) -> Real: ...
    @property
    def attention_q_width(self) -> Real: ...
    @property
    def attention_out_width(self) -> Real: ...
    @property
    def full_attention_fraction(self) -> Real: ...
    @property
    def window_size(self) -> Real: ...
    @property
    def ffn_hidden_size(self) -> Real: ...
    @property
    def vocab_size(self) -> Real: ...
    @property
    def seq_length(self) -> Real: ...
    @property
    def gated_linear_unit(self) -> Flag: ...
    @property
    def num_experts(self) -> Real: ...
    @property
    def moe_router_topk(self) -> Real: ...
    @property
    def moe_ffn_hidden_size(self) -> Real: ...
    @property
    def shared_expert_ffn_hidden_size(self) -> Real: ...
    @property
    def num_moe_layers(self) -> Real: ...
    @property
    def mtp_num_layers(self) -> Real: ...
    @property
    def num_mtp_moe_layers(self) -> Real: ...


def attention_linear_flops_per_token(model: ModelShape) -> Real:
    """Forward FLOPs per token of one layer's attention projections (QKV and output, or MLA's
    down, up and output projections): twice their weights."""
    return 2.0 * model.attention_gemm_params


def attention_keys(model: ModelShape, span: Real | None = None) -> Real:
    """Keys per query the attention core counts, averaged over the layers: ``s`` for full
    attention (Megatron's full-square convention), ``min(w, s)`` for sliding-window layers;
    ``span``: the packed samples' mean length when shorter than the sequence."""
    seq = model.seq_length if span is None else span
    full = model.full_attention_fraction
    window = ops.minimum(ops.where(model.window_size > 0, model.window_size, seq), seq)
    return full * seq + (1.0 - full) * window


def attention_core_flops_per_token(model: ModelShape, span: Real | None = None) -> Real:
    """Forward FLOPs per token of ``softmax(QKᵀ)V`` at full ``s²`` (Megatron convention):
    ``2·keys·(q' + o)``, ``4·s·q`` for GQA (``span``: ``attention_keys``)."""
    width = model.attention_q_width + model.attention_out_width
    return 2.0 * attention_keys(model, span) * width


def mlp_flops_per_token(model: ModelShape, *, moe_layer: bool) -> Real:
    """Forward FLOPs per token of one layer's MLP (dense, or routed + shared experts + router;
    0 for the MoE form of a dense model)."""
    n_mat = ops.where(model.gated_linear_unit, 3.0, 2.0)
    h = model.hidden_size
    if not moe_layer:
        return 2.0 * n_mat * h * model.ffn_hidden_size
    routed = model.moe_router_topk * model.moe_ffn_hidden_size
    active = routed + model.shared_expert_ffn_hidden_size
    return 2.0 * n_mat * h * active + 2.0 * h * model.num_experts


def lm_head_flops_per_token(model: ModelShape) -> Real:
    """Forward FLOPs per token of the output projection to the vocabulary, ``2·h·V``."""
    return 2.0 * model.hidden_size * model.vocab_size


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationFlops:
    """FLOPs of one iteration of ``num_tokens`` tokens (numbers, or arrays of shape ``(n,)``).

    Forward FLOPs per token of all layers' linear layers (``linear_per_token``; they run in the
    chosen precision), of their attention cores ``QKᵀ``/``AV`` (``attention_core_per_token``)
    and of the LM head (``lm_head_per_token``; both kept in 16-bit under FP8 training), and of
    what recompute repeats (``recompute_per_token``). ``model_total`` (as MFU counts) is forward
    + backward, 3 x forward, ``hardware_total`` (as HFU counts) adds the recomputed forward;
    ``gemm``, ``attention_core``, ``lm_head``, ``recompute_gemm`` and
    ``recompute_attention_core`` split them (their sums equal the totals up to rounding).
    ``weight_passes`` is 3 (forward, data and weight gradient) when the base weights train, 2
    when they are frozen (LoRA: no weight gradients; NeMo counts LoRA model FLOPs the same
    way); ``adapter_per_token`` the LoRA adapters' forward FLOPs, trained (3 passes);
    ``recomputed_fraction`` the share of the layers full recompute re-runs (block recompute of
    the first ``recompute_num_layers`` of each model chunk; 1: every layer);
    ``selective_core_share`` 1 where selective recompute re-runs the attention cores, 0 where
    it does not (Megatron's ``recompute_modules`` without ``core_attn``; torchtitan's op-level
    policy, which re-runs some of the linear layers instead: those are not counted here).
    """

    num_tokens: Real
    linear_per_token: Real
    attention_core_per_token: Real
    lm_head_per_token: Real
    recompute_code: Count
    weight_passes: Real = 3.0
    adapter_per_token: Real = 0.0
    recomputed_fraction: Real = 1.0
    selective_core_share: Real = 1.0

    @property
    def model_total(self) -> Real:
        """Model FLOPs (no recompute), as MFU counts them."""
        weights = self.weight_passes * (self.linear_per_token + self.lm_head_per_token)
        trained = 3.0 * (self.attention_core_per_token + self.adapter_per_token)
        return self.num_tokens * (weights + trained)

    @property
    def recompute_per_token(self) -> Real:
        """Forward FLOPs per token that recompute repeats: every layer (full) or the attention
        cores (selective)."""
        code, core = self.recompute_code, self.attention_core_per_token
        selective = ops.where(code == _SELECTIVE, self.selective_core_share * core, 0.0)
        full = self.recomputed_fraction * (self.linear_per_token + core)
        return ops.where(code == _FULL, full, selective)

    @property
    def hardware_total(self) -> Real:
        """FLOPs actually executed, recompute included (as HFU counts them)."""
        return self.model_total + self.num_tokens * self.recompute_per_token

    @property
    def gemm(self) -> Real:
        """FLOPs of the transformer layers' linear layers, forward + backward."""
        return self.weight_passes * self.linear_per_token * self.num_tokens

    @property
    def attention_core(self) -> Real:
        """FLOPs of the attention cores, forward + backward."""
        return 3.0 * self.attention_core_per_token * self.num_tokens

    @property
    def lm_head(self) -> Real:
        """FLOPs of the LM head, forward + backward."""
        return self.weight_passes * self.lm_head_per_token * self.num_tokens

    @property
    def adapters(self) -> Real:
        """FLOPs of the LoRA adapters, forward + backward."""
        return 3.0 * self.adapter_per_token * self.num_tokens

    @property
    def recompute_gemm(self) -> Real:
        """FLOPs of the linear layers full recompute repeats."""
        full = self.recomputed_fraction * self.linear_per_token
        return ops.where(self.recompute_code == _FULL, full, 0.0) * self.num_tokens

    @property
    def recompute_attention_core(self) -> Real:
        """FLOPs of the attention cores recompute (selective or full) repeats."""
        core = self.attention_core_per_token
        full = ops.where(
            self.recompute_code == _FULL,
            self.recomputed_fraction * core,
            self.selective_core_share * core,
        )
        repeated = ops.where(self.recompute_code >= _SELECTIVE, full, 0.0)
        return repeated * self.num_tokens


def iteration_flops(
    model: ModelShape,
    *,
    num_sequences: Real,
    recompute: Recompute | Count,
    trains_base: Flag = True,
    adapter_per_token: Real = 0.0,
    span: Real | None = None,
    recomputed_fraction: Real = 1.0,
    selective_core_share: Real = 1.0,
) -> IterationFlops:
    """FLOPs of one iteration over ``num_sequences`` sequences of ``model.seq_length`` tokens.

    ``recompute`` is a ``Recompute`` or its code (``Recompute.code``, an array of codes for a
    batch). Recompute adds one extra forward of every layer (``full``) or of the attention core
    only (``selective``; Korthikanti et al. 2022, §4.2). ``trains_base`` False: frozen weights
    (LoRA), no weight-gradient GEMMs; ``adapter_per_token``: the adapters' forward FLOPs
    (``planner.perf.lora``); ``span``: the packed samples' mean length (``attention_keys``);
    ``recomputed_fraction``: the share of the layers full recompute re-runs;
    ``selective_core_share``: 1 where selective recompute re-runs the attention cores, else 0
    (``IterationFlops``).
    """
    mtp = model.mtp_num_layers
    layers = model.num_layers + mtp  # each MTP module runs one more transformer layer
    moe_layers = model.num_moe_layers + model.num_mtp_moe_layers
    h = model.hidden_size
    linear = (
        layers * attention_linear_flops_per_token(model)
        + (layers - moe_layers) * mlp_flops_per_token(model, moe_layer=False)
        + moe_layers * mlp_flops_per_token(model, moe_layer=True)
        + mtp * 4.0 * h * h  # the MTP modules' 2h -> h projections
    )
    return IterationFlops(
        num_tokens=num_sequences * model.seq_length,
        linear_per_token=linear,
        attention_core_per_token=layers * attention_core_flops_per_token(model, span),
        lm_head_per_token=(1.0 + mtp) * lm_head_flops_per_token(model),
        recompute_code=recompute.code if isinstance(recompute, Recompute) else recompute,
        weight_passes=ops.where(trains_base, 3.0, 2.0),
        adapter_per_token=adapter_per_token,
        recomputed_fraction=recomputed_fraction,
        selective_core_share=selective_core_share,
    )


def model_flops_per_iteration(model: ModelShape, *, num_sequences: Real) -> Real:
    """Model FLOPs (forward + backward, no recompute) of one iteration of ``num_sequences``."""
    return iteration_flops(model, num_sequences=num_sequences, recompute=Recompute.NONE).model_total
