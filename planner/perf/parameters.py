"""Parameter counts: the whole model, and what the GPUs of the first and last pipeline stage hold.

Per layer (Megatron-LM's GPT/Llama layer, biases left out: ``O(h)`` per layer): attention
``h·(q + 2·kv) + q·h`` plus two norms ``2h`` (multi-latent attention: its down, up and output
projections and latent norms, ``ModelSpec.attention_params``; the down projections are
replicated on every tensor-parallel rank); a dense MLP ``n_mat·h·f`` (``n_mat`` 3 for a gated
linear unit, 2 otherwise); an MoE layer a router ``h·E``, the shared experts
(``n_mat·h·f_shared``, ``ModelSpec.shared_expert_ffn_hidden_size``) and ``E`` routed experts of
``n_mat·h·f_moe`` each. Each pipeline rank holds the layers the split gives it
(``ScenarioArrays.first_stage_layers`` / ``middle_stage_layers`` / ``last_stage_layers``:
``L/p`` each for an even split) with the MoE layers spread evenly (their share of ``L``); the
first stage adds the input embedding ``V·h``, the last the LM head (its own copy unless tied
and ``p == 1``), the final norm and the multi-token-prediction modules (a transformer layer, a
``2h -> h`` projection and three norms each, ``ModelSpec.mtp_params``). Tensor parallelism
shards everything over ``t`` (the embedding and LM head vocabulary-parallel), except the routed
experts, which the ``e`` expert-parallel ranks split among themselves and each expert's FFN
over the ``t_e`` expert-tensor-parallel ranks (``t_e = t`` unless folded; Shoeybi et al. 2019;
Megatron-Core MoE, "MoE parallel folding").
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
    ``expert_data_parallel_size`` group), and the transformer ``layers`` of its stage;
    numbers, or arrays of shape ``(n,)``."""

    dense: Real
    expert: Real
    layers: Real


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParameters:
    """Parameters per GPU of the first and of the last pipeline stage (the same stage when
    ``pipeline_parallel == 1``) and of the busiest middle stage (0 without one), and the part
    of them outside the transformer layers (``*_root``: embedding, final norm, LM head);
    ``*_layers`` the transformer layers of each; numbers, or arrays of shape ``(n,)``."""

    first_dense: Real
    first_expert: Real
    last_dense: Real
    last_expert: Real
    first_root: Real
    last_root: Real
    middle_dense: Real
    middle_expert: Real
    first_layers: Real
    last_layers: Real
    middle_layers: Real

    def busiest(self) -> LocalParameters:
        """The parameters of the stage holding the most (the first one on a tie, a middle
        one only when it holds strictly more than both ends)."""
        first = self.first_dense + self.first_expert
        last = self.last_dense + self.last_expert
        use_first = first >= last
        use_middle = self.middle_dense + self.middle_expert > ops.maximum(first, last)

        def pick(on_first: Real, on_last: Real, on_middle: Real) -> Real:
            return ops.where(use_middle, on_middle, ops.where(use_first, on_first, on_last))

        return LocalParameters(
            dense=pick(self.first_dense, self.last_dense, self.middle_dense),
            expert=pick(self.first_expert, self.last_expert, self.middle_expert),
            layers=pick(self.first_layers, self.last_layers, self.middle_layers),
        )


def stage_params(a: ScenarioArrays) -> StageParameters:
    """Parameters per GPU of the first, last and busiest middle pipeline stage of every
    scenario of ``a`` (module docstring)."""
    tp, hidden = a.tensor_parallel, a.hidden_size
    moe_frac = a.num_moe_layers / a.num_layers
    n_mat = ops.where(a.gated_linear_unit, 3.0, 2.0)
    # per GPU (after the division by tp below): split weights / tp, replicated ones whole
    attention = a.attention_params + (tp - 1.0) * a.attention_replicated_params
    dense_mlp = n_mat * hidden * a.ffn_hidden_size
    moe_dense = hidden * a.num_experts + n_mat * hidden * a.shared_expert_ffn_hidden_size
    moe_expert = n_mat * hidden * a.moe_ffn_hidden_size * a.num_experts
    per_layer_dense = attention + (1 - moe_frac) * dense_mlp + moe_frac * moe_dense
    expert_shards = a.expert_tensor_parallel * a.expert_parallel

    def body_dense(layers: Real) -> Real:
        return layers * per_layer_dense

    def body_expert(layers: Real) -> Real:
        return layers * moe_frac * moe_expert / expert_shards

    mtp = a.mtp_num_layers
    if ops.any_(mtp > 0):  # the MTP modules, on the last stage
        mtp_moe = a.num_mtp_moe_layers
        mtp_dense = a.mtp_params + mtp * attention + (mtp - mtp_moe) * dense_mlp
        mtp_dense = mtp_dense + mtp_moe * moe_dense
        mtp_expert = mtp_moe * moe_expert / expert_shards
    else:
        mtp_dense = mtp_expert = a.full(0.0)
    first_l, last_l, middle_l = a.first_stage_layers, a.last_stage_layers, a.middle_stage_layers
    embedding = a.vocab_size * hidden
    single = a.pipeline_parallel == 1
    head = ops.where(single & ops.logical_not(a.untie_embeddings), 0.0, embedding) + hidden
    last_mtp_dense = ops.where(single, 0.0, mtp_dense)
    last_mtp_expert = ops.where(single, 0.0, mtp_expert)
    first_mtp_dense = mtp_dense - last_mtp_dense
    first_mtp_expert = mtp_expert - last_mtp_expert
    first_body = body_dense(first_l) + first_mtp_dense
    last_body = body_dense(last_l) + last_mtp_dense
    return StageParameters(
        first_dense=(first_body + embedding + ops.where(single, head, 0.0)) / tp,
        first_expert=body_expert(first_l) + first_mtp_expert,
        last_dense=(last_body + head + ops.where(single, embedding, 0.0)) / tp,
        last_expert=body_expert(last_l) + last_mtp_expert,
        first_root=(embedding + ops.where(single, head, 0.0)) / tp,
        last_root=(head + ops.where(single, embedding, 0.0)) / tp,
        middle_dense=body_dense(middle_l) / tp,
        middle_expert=body_expert(middle_l),
        first_layers=first_l,
        last_layers=last_l,
        middle_layers=middle_l,
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
