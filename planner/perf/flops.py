"""FLOP counts of one training iteration (dense, GQA, SwiGLU, MoE), causal attention at full s².

Per token and layer, forward pass (Narayanan et al. SC'21, §5.1 / eq. 3, generalised): QKV
projection ``2·h·(q + 2·kv)``, attention scores and weighted values ``4·s·q`` (Megatron counts the
full ``s x s`` product even for causal masks), output projection ``2·q·h``, MLP ``2·n_mat·h·f``
(``n_mat`` = 3 for SwiGLU, 2 otherwise; ``top_k`` routed plus the shared experts and a
``2·h·E`` router for MoE layers); the LM head adds ``2·h·V`` per token. Backward costs twice the
forward, so model FLOPs = 3 x forward. For a GPT with ``q = kv = h``, ``f = 4h`` this is exactly
``72·B·s·l·h²·(1 + s/(6h) + V/(12·h·l))`` (Korthikanti et al. 2022, §6, model FLOPs).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.model import ModelSpec
from planner.specs.parallelism import Recompute


def attention_linear_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs per token of one layer's QKV and output projections."""
    h, q, kv = model.hidden_size, model.query_width, model.kv_width
    return 2.0 * h * (q + 2.0 * kv) + 2.0 * q * h


def attention_core_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs per token of ``softmax(QKᵀ)V`` at full ``s²`` (Megatron convention)."""
    return 4.0 * model.seq_length * model.query_width


def mlp_flops_per_token(model: ModelSpec, *, moe_layer: bool) -> float:
    """Forward FLOPs per token of one layer's MLP (dense, or routed + shared experts + router)."""
    n_mat = 3.0 if model.activation.is_gated else 2.0
    h = model.hidden_size
    if not moe_layer:
        return 2.0 * n_mat * h * model.ffn_hidden_size
    active = model.moe_router_topk + model.num_shared_experts
    return 2.0 * n_mat * h * model.moe_ffn_hidden_size * active + 2.0 * h * model.num_experts


def lm_head_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs per token of the output projection to the vocabulary, ``2·h·V``."""
    return 2.0 * model.hidden_size * model.vocab_size


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationFlops:
    """FLOPs of one iteration of ``num_tokens`` tokens, split by where they run.

    ``gemm`` are the transformer layers' linear layers (they run in the chosen precision),
    ``attention_core`` the ``QKᵀ``/``AV`` products and ``lm_head`` the output layer (both kept in
    16-bit under FP8 training). ``model_total`` counts forward + backward (3 x forward);
    ``hardware_total`` adds recomputation.
    """

    gemm: float
    attention_core: float
    lm_head: float
    recompute_gemm: float
    recompute_attention_core: float

    @property
    def model_total(self) -> float:
        """Model FLOPs (no recompute), as MFU counts them."""
        return self.gemm + self.attention_core + self.lm_head

    @property
    def hardware_total(self) -> float:
        """FLOPs actually executed, recompute included (as HFU counts them)."""
        return self.model_total + self.recompute_gemm + self.recompute_attention_core


def iteration_flops(
    model: ModelSpec, *, num_sequences: int, recompute: Recompute
) -> IterationFlops:
    """FLOPs of one iteration over ``num_sequences`` sequences of ``model.seq_length`` tokens.

    Recompute adds one extra forward of every layer (``full``) or of the attention core only
    (``selective``; Korthikanti et al. 2022, §4.2).
    """
    tokens = float(num_sequences) * model.seq_length
    dense_layers = model.num_layers - model.num_moe_layers
    linear_fwd = model.num_layers * attention_linear_flops_per_token(model)
    linear_fwd += dense_layers * mlp_flops_per_token(model, moe_layer=False)
    linear_fwd += model.num_moe_layers * mlp_flops_per_token(model, moe_layer=True)
    core_fwd = model.num_layers * attention_core_flops_per_token(model)
    recompute_gemm = linear_fwd if recompute is Recompute.FULL else 0.0
    recompute_core = core_fwd if recompute is not Recompute.NONE else 0.0
    return IterationFlops(
        gemm=3.0 * linear_fwd * tokens,
        attention_core=3.0 * core_fwd * tokens,
        lm_head=3.0 * lm_head_flops_per_token(model) * tokens,
        recompute_gemm=recompute_gemm * tokens,
        recompute_attention_core=recompute_core * tokens,
    )


def model_flops_per_iteration(model: ModelSpec, *, num_sequences: int) -> float:
    """Model FLOPs (forward + backward, no recompute) of one iteration of ``num_sequences``."""
    return iteration_flops(model, num_sequences=num_sequences, recompute=Recompute.NONE).model_total
