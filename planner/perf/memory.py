"""Peak memory per GPU: model states per ZeRO stage plus activations (Korthikanti et al. 2022).

Model states (Megatron-LM mixed precision, ``docs/source/api-guide/dist_optimizer.md``): 16-bit
weights 2 B/param, fp32 gradient buffer 4 B/param, Adam fp32 master weights + two moments
12 B/param. ZeRO stage 1 (distributed optimizer) shards the 12 B over the data-parallel group
``d``, stage 2 also the gradients, stage 3 also the weights (Rajbhandari et al. 2020, §5).
Dense parameters are sharded over ``d = dp·cp``; expert parameters over ``dp·cp/ep``.

Activations per layer and microbatch (Korthikanti et al. 2022, Table 2, generalised to GQA,
SwiGLU and MoE; bytes with 16-bit activations): with sequence parallel everything is divided
by ``t``; without it the layer-norm, dropout and block inputs (``10·sbh``) are not. Selective
recompute and flash attention drop the ``5·a·s²·b`` score term; full recompute keeps only each
layer's input (``2·sbh``) plus one layer's working set. The first pipeline stage holds
``L·(1 + (p-1)/(p·v))`` layers' activations in flight under (interleaved) 1F1B (Korthikanti
§4.2.3; Narayanan et al. 2021 §2.2), capped by the number of microbatches.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs.model import ModelSpec
from planner.specs.parallelism import Recompute
from planner.specs.scenario import Scenario

WEIGHT_BYTES_PER_PARAM = 2.0
GRAD_BYTES_PER_PARAM = 4.0
OPTIMIZER_BYTES_PER_PARAM = 12.0
RUNTIME_OVERHEAD_BYTES = 2.0e9
"""CUDA context, cuBLAS/NCCL workspaces and allocator slack; a placeholder that calibration
replaces (PyTorch reports 0.5-1 GB of context alone on Hopper)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Peak bytes on the most loaded GPU, by kind."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float

    @property
    def total_bytes(self) -> float:
        """Sum of all parts, bytes."""
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.overhead_bytes
        )


def attention_params(model: ModelSpec) -> float:
    """Parameters of one attention block incl. its input layer norm (biases ignored)."""
    h = model.hidden_size
    return h * (model.query_width + 2 * model.kv_width) + model.query_width * h + 2 * h


def mlp_params(model: ModelSpec, *, moe_layer: bool) -> tuple[float, float]:
    """``(dense, expert)`` parameters of one MLP block incl. its layer norm and router."""
    n_mat = 3 if model.activation.is_gated else 2
    h = model.hidden_size
    if not moe_layer:
        return float(n_mat * h * model.ffn_hidden_size + 2 * h), 0.0
    shared = n_mat * h * model.moe_ffn_hidden_size * model.num_shared_experts
    routed = n_mat * h * model.moe_ffn_hidden_size * model.num_experts
    return float(shared + h * model.num_experts + 2 * h), float(routed)


def total_params(model: ModelSpec) -> float:
    """All parameters of the model (embeddings counted once when tied)."""
    dense_layers = model.num_layers - model.num_moe_layers
    total = model.num_layers * attention_params(model)
    total += dense_layers * sum(mlp_params(model, moe_layer=False))
    total += model.num_moe_layers * sum(mlp_params(model, moe_layer=True))
    embeddings = model.vocab_size * model.hidden_size
    return total + embeddings * (2 if model.untie_embeddings else 1) + model.hidden_size


def _stage_params(scenario: Scenario, *, first: bool) -> tuple[float, float]:
    """``(dense, expert)`` parameters held by one GPU of the first or last pipeline stage."""
    m, par = scenario.model, scenario.parallelism
    tp, pp, ep = par.tensor_parallel, par.pipeline_parallel, par.expert_parallel
    layers = m.num_layers // pp
    dense_mlp_layers = m.num_layers - m.num_moe_layers
    if first:
        n_dense_mlp = min(dense_mlp_layers, layers)
    else:
        n_dense_mlp = max(0, dense_mlp_layers - (m.num_layers - layers))
    n_moe = layers - n_dense_mlp
    dense = layers * attention_params(m) + n_dense_mlp * mlp_params(m, moe_layer=False)[0]
    moe_dense, moe_expert = mlp_params(m, moe_layer=True) if m.is_moe else (0.0, 0.0)
    dense += n_moe * moe_dense
    expert = n_moe * moe_expert / ep
    embeddings = m.vocab_size * m.hidden_size
    if pp == 1:
        dense += embeddings * (2 if m.untie_embeddings else 1)
    else:
        dense += embeddings  # input embedding on the first stage, LM head (or its copy) on the last
    return dense / tp, expert / tp


def _model_state_bytes(
    scenario: Scenario, dense: float, expert: float
) -> tuple[float, float, float]:
    par = scenario.parallelism
    d_dense = par.data_parallel * par.context_parallel
    d_expert = max(1, d_dense // par.expert_parallel)
    zero = par.zero_stage

    def shard(params: float, d: int, sharded: bool) -> float:
        return params / d if sharded else params

    weights = WEIGHT_BYTES_PER_PARAM * (
        shard(dense, d_dense, zero >= 3) + shard(expert, d_expert, zero >= 3)
    )
    grads = GRAD_BYTES_PER_PARAM * (
        shard(dense, d_dense, zero >= 2) + shard(expert, d_expert, zero >= 2)
    )
    optim = OPTIMIZER_BYTES_PER_PARAM * (
        shard(dense, d_dense, zero >= 1) + shard(expert, d_expert, zero >= 1)
    )
    return weights, grads, optim


def activation_bytes_per_layer(
    scenario: Scenario, *, moe_layer: bool, recompute: Recompute
) -> float:
    """Activation bytes one layer keeps for one microbatch (Korthikanti et al. 2022, Table 2).

    Generalised from ``sbh·(34 + 5as/h)``: attention ``3sbh + 4sb·q + 4sb·kv`` (+ ``5as²b`` scores
    unless flash attention or selective recompute), MLP ``3sbh + n_act·sbf`` with ``n_act`` = 4
    (GeLU: fc1 output + activation output) or 6 (SwiGLU: gate/up output + product), times
    ``top_k`` for routed experts, layer norms ``4sbh``. Full recompute keeps ``2sbh``.
    """
    m, par = scenario.model, scenario.parallelism
    t = par.tensor_parallel
    s = m.seq_length / par.context_parallel
    b = par.micro_batch_size
    h = m.hidden_size
    sbh = s * b * h
    if recompute is Recompute.FULL:
        return 2.0 * sbh / (t if par.sequence_parallel else 1)
    n_act = 6.0 if m.activation.is_gated else 4.0
    if moe_layer:
        active = m.moe_router_topk + m.num_shared_experts
        mlp_sharded = active * (2.0 * sbh + n_act * s * b * m.moe_ffn_hidden_size)
    else:
        mlp_sharded = n_act * s * b * m.ffn_hidden_size
    attn_sharded = 4.0 * s * b * m.query_width + 4.0 * s * b * m.kv_width
    if not par.flash_attention and recompute is Recompute.NONE:
        attn_sharded += 5.0 * m.num_attention_heads * s * s * b / par.context_parallel
    # 10·sbh = layer-norm inputs (4), QKV and MLP block inputs (2 + 2), dropout masks (1 + 1).
    replicated = 10.0 * sbh
    if par.sequence_parallel or t == 1:
        return (replicated + attn_sharded + mlp_sharded) / t
    return replicated + (attn_sharded + mlp_sharded) / t


def layers_in_flight(scenario: Scenario) -> float:
    """Layer-activations the first pipeline stage holds at its peak under (interleaved) 1F1B.

    ``L/p`` layers per microbatch times ``p`` microbatches in flight (non-interleaved), or
    ``2(p-1) + (v-1)·p + 1`` model chunks of ``L/(p·v)`` layers (interleaved; Megatron's
    warm-up count), never more than all microbatches' chunks.
    """
    par, m = scenario.parallelism, scenario.model
    p, v, mb = par.pipeline_parallel, par.virtual_pipeline, par.num_microbatches
    chunk_layers = m.num_layers / (p * v)
    chunks = p if v == 1 else 2 * (p - 1) + (v - 1) * p + 1
    return min(chunks, mb * v) * chunk_layers


def memory_per_gpu(scenario: Scenario) -> MemoryBreakdown:
    """Peak memory of the most loaded GPU (first or last pipeline stage), bytes."""
    m, par = scenario.model, scenario.parallelism
    recompute = par.recompute
    per_layer = activation_bytes_per_layer(scenario, moe_layer=m.is_moe, recompute=recompute)
    if m.is_moe and m.num_dense_layers:
        dense_layer = activation_bytes_per_layer(scenario, moe_layer=False, recompute=recompute)
        per_layer = max(per_layer, dense_layer)
    in_flight = layers_in_flight(scenario)
    first_act = in_flight * per_layer
    if recompute is Recompute.FULL:  # one layer re-materialised during its backward
        first_act += activation_bytes_per_layer(
            scenario, moe_layer=m.is_moe, recompute=Recompute.SELECTIVE
        )
    s = m.seq_length / par.context_parallel
    logits = 4.0 * s * par.micro_batch_size * m.vocab_size / par.tensor_parallel
    last_layers = m.num_layers / par.pipeline_parallel
    last_act = per_layer * min(last_layers, in_flight) + logits

    candidates = []
    for first in (True, False):
        dense, expert = _stage_params(scenario, first=first)
        weights, grads, optim = _model_state_bytes(scenario, dense, expert)
        act = first_act if first else last_act
        if par.pipeline_parallel == 1:
            act = first_act + logits
        candidates.append(
            MemoryBreakdown(
                weights_bytes=weights,
                gradients_bytes=grads,
                optimizer_bytes=optim,
                activations_bytes=act,
                overhead_bytes=RUNTIME_OVERHEAD_BYTES,
            )
        )
    return max(candidates, key=lambda mb: mb.total_bytes)


def local_params(scenario: Scenario) -> tuple[float, float]:
    """``(dense, expert)`` parameters per GPU on the most loaded pipeline stage."""
    first = _stage_params(scenario, first=True)
    last = _stage_params(scenario, first=False)
    return max(first, last, key=lambda pair: pair[0] + pair[1])
