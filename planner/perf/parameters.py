"""Parameter counts: the whole model, and what the GPUs of the first and last pipeline stage hold.

Per layer (Megatron-LM's GPT/Llama layer, biases left out: ``O(h)`` per layer): attention
``h·(q + 2·kv) + q·h`` plus two norms ``2h`` (multi-latent attention: its down, up and output
projections and latent norms, ``ModelSpec.attention_params``; the down projections are
replicated on every tensor-parallel rank); a dense MLP ``n_mat·h·f`` (``n_mat`` 3 for a gated
linear unit, 2 otherwise); an MoE layer a router ``h·E``, the shared experts
(``n_mat·h·f_shared``, ``ModelSpec.shared_expert_ffn_hidden_size``) and ``E`` routed experts of
``n_mat·h·f_moe`` each. The last stage also holds the multi-token-prediction modules: a
transformer layer, a ``2h -> h`` projection and three norms each (``ModelSpec.mtp_params``).
Each pipeline stage holds ``L/p`` layers with the MoE layers spread evenly (their share of
``L``); the first stage adds the input embedding ``V·h``, the last the LM head (its own copy
unless tied and ``p == 1``) and the final norm. Tensor parallelism shards everything over
``t`` (the embedding and LM head vocabulary-parallel), expert parallelism the routed experts
over ``e`` more (Shoeybi et al. 2019; Megatron-Core MoE).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.ops import Real
from planner.specs.model import ModelSpec

__all__ = [
    "LocalParameters",
    "StageParameters",
    "stage_params",
    "total_params",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalParameters:
    """Parameters one GPU holds: ``dense`` (sharded by data parallelism over the
    ``dense_data_parallel_size`` group) and ``expert`` (routed experts, sharded over the
    ``expert_data_parallel_size`` group); numbers, or arrays of shape ``(n,)``."""

    dense: Real
    expert: Real


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParameters:
    """Parameters per GPU of the first and of the last pipeline stage (the same stage when
    ``pipeline_parallel == 1``), and the part of them outside the transformer layers
    (``*_root``: embedding, final norm, LM head); numbers, or arrays of shape ``(n,)``."""

    first_dense: Real
    first_expert: Real
    last_dense: Real
    last_expert: Real
    first_root: Real
    last_root: Real

    def busiest(self) -> LocalParameters:
        """The parameters of the stage holding the most (the first one on a tie)."""
        use_first = self.first_dense + self.first_expert >= self.last_dense + self.last_expert
        return LocalParameters(
            dense=ops.where(use_first, self.first_dense, self.last_dense),
            expert=ops.where(use_first, self.first_expert, self.last_expert),
        )


def stage_params(a: ScenarioArrays) -> StageParameters:
    """Parameters per GPU of the first and last pipeline stage of every scenario of ``a``
    (module docstring)."""
    tp, hidden = a.tensor_parallel, a.hidden_size
    layers = a.num_layers / a.pipeline_parallel
    moe_frac = a.num_moe_layers / a.num_layers
    n_mat = ops.where(a.gated_linear_unit, 3.0, 2.0)
    # per GPU (after the division by tp below): split weights / tp, replicated ones whole
    attention = a.attention_params + (tp - 1.0) * a.attention_replicated_params
    dense_mlp = n_mat * hidden * a.ffn_hidden_size
    moe_dense = hidden * a.num_experts + n_mat * hidden * a.shared_expert_ffn_hidden_size
    moe_expert = n_mat * hidden * a.moe_ffn_hidden_size * a.num_experts
    per_layer_dense = attention + (1 - moe_frac) * dense_mlp + moe_frac * moe_dense
    body_dense = layers * per_layer_dense
    body_expert = layers * moe_frac * moe_expert
    mtp = a.mtp_num_layers
    if ops.any_(mtp > 0):  # the MTP modules, on the last stage
        mtp_moe = a.num_mtp_moe_layers
        mtp_dense = a.mtp_params + mtp * attention + (mtp - mtp_moe) * dense_mlp
        mtp_dense = mtp_dense + mtp_moe * moe_dense
        mtp_expert = mtp_moe * moe_expert
    else:
        mtp_dense = mtp_expert = a.full(0.0)
    embedding = a.vocab_size * hidden
    single = a.pipeline_parallel == 1
    head = ops.where(single & ops.logical_not(a.untie_embeddings), 0.0, embedding) + hidden
    expert = body_expert / (tp * a.expert_parallel)
    last_mtp_dense = ops.where(single, 0.0, mtp_dense)
    last_mtp_expert = ops.where(single, 0.0, mtp_expert)
    first_mtp_dense = mtp_dense - last_mtp_dense
    first_mtp_expert = mtp_expert - last_mtp_expert
    return StageParameters(
        first_dense=(body_dense + first_mtp_dense + embedding + ops.where(single, head, 0.0)) / tp,
        first_expert=expert + first_mtp_expert / (tp * a.expert_parallel),
        last_dense=(body_dense + last_mtp_dense + head + ops.where(single, embedding, 0.0)) / tp,
        last_expert=expert + last_mtp_expert / (tp * a.expert_parallel),
        first_root=(embedding + ops.where(single, head, 0.0)) / tp,
        last_root=(head + ops.where(single, embedding, 0.0)) / tp,
    )


def total_params(model: ModelSpec) -> float:
    """All parameters of the model (embeddings counted once when tied), no biases."""
    n_mat = 3 if model.gated_linear_unit else 2
    h = model.hidden_size
    attn = model.attention_params
    dense_mlp = n_mat * h * model.ffn_hidden_size
    moe = h * model.num_experts + n_mat * h * (
        model.shared_expert_ffn_hidden_size + model.moe_ffn_hidden_size * model.num_experts
    )
    layers = model.num_layers + model.mtp_num_layers
    moe_layers = model.num_moe_layers + model.num_mtp_moe_layers
    total = layers * attn + (layers - moe_layers) * dense_mlp + moe_layers * moe
    embeddings = model.vocab_size * h
    return float(total + model.mtp_params + embeddings * (2 if model.untie_embeddings else 1) + h)
