"""Peak memory per GPU: model states per ZeRO stage plus activations (over a batch or one scenario).

Model states, bytes per parameter held by a GPU (Megatron-LM ``docs/.../dist_optimizer.md``;
Rajbhandari et al. 2020 §5): 16-bit weights 2; gradient buffer ``grad_bytes``
(``ScenarioArrays.grad_bytes_per_param``: 4 = fp32 main grads, Megatron's default when training
in BF16; 2 = NeMo's distributed Adam, which keeps BF16 gradient buckets); Adam fp32 master
weights + two moments 12. ZeRO-1 (distributed optimizer) shards the 12 over the data-parallel
group, ZeRO-2 also the gradients, ZeRO-3 also the weights. Dense parameters are sharded over
``d·c`` GPUs, expert parameters over ``d·c/e``.
Under FP8/MXFP8/NVFP4 training Transformer Engine keeps a 1-byte copy of every transformer
linear weight, cached across microbatches (the embedding and the LM head are not TE modules).
The peak is what the caching allocator reserves (``torch.cuda.max_memory_reserved``, which
torchtitan reports), so memory a stream keeps cached counts even while no tensor lives in it.

ZeRO-3 comes in two designs (``zero3_gather_per_tensor`` in ``planner.perf.frameworks``):

* PyTorch FSDP (torchtitan, plain FSDP, llm-foundry, Megatron-LM ``--use-torch-fsdp2``)
  shards whole wrapped units. The sharded parameter *is* the fp32 master the optimizer updates
  (FSDP2 ``MixedPrecisionPolicy``, FSDP1 ``MixedPrecision`` cast to 16 bits only for the
  all-gather), so no 16-bit shard exists: ``4 + grad_bytes + 8`` bytes per sharded parameter.
  The root unit (embedding, final norm, LM head on this stage) is never resharded after
  forward (FSDP2 ``FSDPState._lazy_init`` sets the root's ``post_forward_mesh_info = None``;
  FSDP1 ``_post_forward`` frees only non-root handles), so it stays gathered from its forward
  to the end of the backward, beside one transformer block (prefetched, or torchtitan's last
  block, which it does not reshard). FSDP2 all-gathers into a flat buffer allocated on its
  all-gather copy-in stream and copies it out into the unsharded parameters on the compute
  stream (``foreach_all_gather`` / ``foreach_all_gather_copy_out`` in
  ``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``); the caching allocator hands
  a cached block only to requests on the stream it was allocated on
  (``c10/cuda/CUDACachingAllocator.cpp`` ``get_free_block``; ``Tensor.record_stream`` docs),
  so that stream keeps the largest unit's flat buffer reserved: 16-bit bytes of
  ``root + block + max(root, block)``. Its sharded gradients are likewise views
  of a buffer allocated on the reduce-scatter stream ("the GPU sharded gradient is allocated
  in the RS stream", ``foreach_reduce``): they stay reserved through the next forward even
  though ``zero_grad(set_to_none=True)`` frees them, which is why the gradients count at the
  peak.
* DeepSpeed (``partition_parameters.py``) keeps each parameter's 16-bit partition
  (``ds_tensor``) beside the optimizer's fp32 partition and fetches parameters per submodule:
  ``2 + grad_bytes + 12`` bytes per sharded parameter plus two layers gathered in flight.

Activations per layer and microbatch (Korthikanti et al. 2022, Table 2, generalised to GQA,
SwiGLU, MoE, context parallel and FP8; ``tok = b·S/c`` local tokens):

* kept on every TP rank unless sequence parallel: layer-norm inputs ``4Th``, QKV and MLP inputs
  ``4Th`` (``2Th`` when FP8 stores them in one byte), dropout masks ``2Th`` (models with
  dropout, ``ModelSpec.has_dropout``: GPT-style GeLU models; Llama-style models train without);
* divided by ``t``: Q and attention output ``4T·q``, K and V ``4T·kv`` (per-head query/key
  norms, ``ModelSpec.per_head_qk_norm``, keep their inputs too: ``2T·(q + kv)``), MLP
  ``2·n_up·tok·f`` (fc1 output) plus ``2T·f`` (activation output, ``tok·f`` in FP8), and without
  flash attention the ``(4 + dropout)·heads·(S/c)·S·b`` bytes of scores, softmax and mask unless
  recomputed.

Activation offloading (Megatron-Core ``cpu_offloading`` with ``cpu_offloading_num_layers``
``N``, activations only; one pipeline stage, no recompute) hands every tensor the first ``N``
layers save to Transformer Engine's ``AsyncDoubleBufferGroupOffloadHandler``: the attention
and linear modules and Megatron's fused SwiGLU mark all they save (``mark_activation_offload``;
``megatron/core/fusions/fused_bias_swiglu.py``), each offloaded layer's copy to host memory
starts on a side stream and the forward frees it by the ``L/N``-spaced layer its window ends
at, the last one by the last layer; the backward reloads an offloaded layer when it reaches
the layer that window ended at, so the last offloaded layer comes back as the last layer's
backward starts (NVIDIA/TransformerEngine ``transformer_engine/pytorch/cpu_offload.py`` @
``v2.7``: ``layer_window_map``, ``synchronize_on_group_commit_forward``,
``on_group_commit_backward``). The stage then holds ``L − N`` layers' activations with the
loss, or ``L − N + 1`` in the last layer's backward. The copies overlap compute on their own
streams: "D2h and h2d copying are completely hidden behind computation if computation time of
a layer is longer than host-device communication time" (the handler's docstring);
``planner.perf.offload`` times what they do not hide.

FP8 parameters (``parallelism.fp8_param_gather``; Megatron-Bridge's current-scaling recipe
sets ``fp8_param_gather``, Transformer Engine ``fp8_model_init``): a transformer weight is a
quantised tensor, which TE uses as it is ("Handle case where weights are already quantized",
``module/base.py`` ``get_weight_workspace`` @ ``v2.7``), so neither a 16-bit weight nor a
cached copy exists: ``WEIGHT_COPY_BYTES`` per transformer weight, the embedding and the LM head
16-bit. Under ZeRO-3 no whole-model copy is held on Blackwell; on Hopper a ``Float8Tensor``
parameter keeps the transpose its backward GEMMs need, which Megatron-FSDP keeps across the
step with ``keep_fp8_transpose_cache`` ("will cause (number of parameter × 1 Byte) of memory
overhead ... will not give any benefit from the Blackwell architecture",
``megatron/core/distributed/fsdp/src/README.md`` @ ``core_v0.14.0``; the 25.09 H100 Llama3 8B
recipe sets it, ``keep_fp8_transpose_cache_when_using_custom_fsdp``), counted as the copy. The
gathered units are still counted at 16 bits (at most two layers too many).

Selective recompute drops the score term; full recompute keeps each layer's input (``2Th``,
``/t`` with SP) plus one layer's working set while that layer is re-run. torchtitan's "selective"
is op-level SAC (``planner.perf.frameworks``): its policy (``_apply_ac_to_transformer_block``,
``selective_ac_option = "op"``) marks ``MUST_SAVE`` the outputs of every odd-numbered
``aten.mm`` of a block (wq, wv, w1 and, for SwiGLU, w2; wk, wo, w3 are recomputed), of the
attention kernel and of TP reduce-scatters, and eager PyTorch stores every ``MUST_SAVE`` output
(``_CachingTorchDispatchMode`` in ``torch/utils/checkpoint.py``). Per token, 16-bit: the block
input ``h`` (``/t`` with SP), ``q + kv + q + f`` over ``t`` (wq, wv, attention output, w1),
w2's output ``h`` (a partial sum of full width under TP) and, with SP, the two reduce-scatter
outputs ``2h/t``. With one fused ``wqkv`` (``separate_qkv_projections`` false, current
torchtitan) its output keeps the key too (``q + 2kv``); with one fused gate/up GEMM
(``separate_gate_up_projections`` false) it keeps both halves (``2f``) and w2, now the even
matmul, is recomputed. The first pipeline stage holds ``p`` microbatches of its layers (1F1B) or
``2(p-1) + (v-1)p + 1`` chunks of ``1/v`` of them (interleaved; Megatron's warm-up count,
``get_pp_rank_microbatches``), never more than all microbatches; the busiest middle stage is
counted at rank 1 (``p - 1`` microbatches, ``2(p-2) + (v-1)p + 1`` chunks: the most a middle
rank holds), the last stage at one microbatch of its layers. Each stage holds its own layers
(``ScenarioArrays.first_stage_layers`` ...; ``L/p`` for an even split).

The stage computing the loss peaks in the loss's backward, before any layer is re-run (so the
loss and a full-recompute working set are never held together): ``planner.perf.loss_memory``.

The optimizer's dtypes (``parallelism.main_params_dtype``, ``exp_avg_dtype``,
``exp_avg_sq_dtype``, ``store_param_remainders``; absent: the framework profile's) set the
master's and the moments' bytes. A pure-bf16 stack (``main_params_dtype: bf16``, bf16 moments,
``grad_reduce_in_fp32: false``) holds ``2 + 2 + 0 + 4 = 8`` bytes per parameter at ZeRO-0;
under PyTorch FSDP its sharded bf16 parameter is counted as a 16-bit weight shard (2 bytes per
owned parameter), the role the fp32 shard plays as master otherwise.

The optimizer step runs after the last backward, the activations freed: a stack stepping with
PyTorch's ``foreach`` Adam (``parallelism.optimizer_implementation: foreach``; absent, the
profile's ``FrameworkProfile.adam_foreach``: NeMo Automodel at ``tensor_parallel`` 1;
torchtitan defaults to fused) allocates ``sqrt(exp_avg_sq)`` over every owned parameter at once, one
second moment's bytes (``adam_moment_bytes / 2``) per owned parameter (``_multi_tensor_adam``,
``torch/optim/adam.py``). ``fused`` (``_fused_adam``: ``torch._fused_adam_`` updates parameters and
moments in place) allocates none; ``for_loop`` (``_single_tensor_adam``) one parameter's
``denom`` at a time, freed before the next, which the model does not count (torch 2.13). The
caching allocator serves it from the blocks the activations
left cached, so a stage's peak is its model states plus the larger of its activations and
these temporaries (``MemoryArrays.optimizer_step``).
The reported peak is the largest of the first, the busiest middle and the last stage, plus
the efficiency model's runtime overhead and allocator slack.

A layout fits when its peak plus a headroom is within the GPU's memory
(``fits_in_memory``; the explorer prunes with the same test, so its best layouts no longer sit
at the last MiB): ``hardware.memory_headroom_gib``, by default
``DEFAULT_MEMORY_HEADROOM_BYTES`` = 1 GiB (``planner.perf.batch``). It stands for what the
peak above leaves out and what varies with the layout and from run to run, beyond the fixed
``memory_overhead_bytes`` (CUDA context, library workspaces, one set of NCCL buffers):

* NCCL buffers of further communicators: NCCL allocates, per channel and connected peer, a
  ``NCCL_BUFFSIZE`` = 4 MiB buffer for its Simple protocol plus the LL128 and LL buffers
  (NCCL environment-variable documentation), up to ``NCCL_MAX_NCHANNELS`` = 32 channels on
  NVLink: ~0.1-0.3 GiB per ring; Megatron-Core opens one communicator per process group
  (tensor, pipeline, data, data-with-context, context, expert, expert-tensor, expert-data,
  embedding) and connects the peers each uses, lazily (``NCCL_RUNTIME_CONNECT``);
* the caching allocator's rounding beyond the activation slack: blocks above 1 MiB are
  rounded to 2 MiB and carved from 20 MiB segments (``kRoundLarge``, ``kLargeBuffer`` in
  ``c10/cuda/CUDACachingAllocator.cpp``), each size class keeping its own partly used segment.

1 GiB keeps the published runs the accuracy benchmark holds, many tuned to the largest
micro-batch that fits, within 5 % of HBM; a scenario sets its own (``0`` tests the bare peak,
a larger value a safer plan).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import DefaultEfficiency, EfficiencyModel
from planner.perf.lora import adapter_params_per_gpu
from planner.perf.loss_memory import (
    ACTIVATION_BYTES,
    EAGER_LOSS_PEAK_BYTES_PER_LOGIT,
    FUSED_LOSS_BYTES_PER_LOGIT,
    LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT,
    loss_bytes_per_logit_arr,
    loss_peak_bytes_arr,
)
from planner.perf.moe_mlp import moe_imbalance
from planner.perf.ops import Count, Real
from planner.perf.optimizer import master_bytes_per_param
from planner.perf.parameters import LocalParameters, StageParameters, stage_params, total_params
from planner.perf.precision import any_layout_fp8_gemms, saved_input_bytes, weight_copy_bytes
from planner.specs.parallelism import Recompute
from planner.specs.scenario import Scenario

__all__ = [
    "ACTIVATION_BYTES",
    "EAGER_LOSS_PEAK_BYTES_PER_LOGIT",
    "FUSED_LOSS_BYTES_PER_LOGIT",
    "LOSS_PARALLEL_PEAK_BYTES_PER_LOGIT",
    "LayerActivations",
    "MemoryArrays",
    "MemoryBreakdown",
    "activation_bytes_per_layer",
    "layer_activations",
    "layers_in_flight",
    "local_params",
    "loss_bytes_per_logit_arr",
    "loss_peak_bytes_arr",
    "memory_arrays",
    "memory_per_gpu",
    "total_params",
]

WEIGHT_BYTES_PER_PARAM = 2.0
_NONE, _SELECTIVE, _FULL = Recompute.NONE.code, Recompute.SELECTIVE.code, Recompute.FULL.code


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Peak bytes on the most loaded GPU, by kind."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float
    optimizer_step_bytes: float = 0.0
    """The optimizer step's temporaries, held after the activations are freed (module
    docstring): the total counts the larger of the two."""

    @property
    def total_bytes(self) -> float:
        """The model states, the larger of the activations and the optimizer step's
        temporaries, and the overhead, bytes."""
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + max(self.activations_bytes, self.optimizer_step_bytes)
            + self.overhead_bytes
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryArrays:
    """``MemoryBreakdown`` for a batch, bytes: arrays of shape ``(n,)`` (floats for one
    scenario)."""

    weights: Real
    gradients: Real
    optimizer: Real
    activations: Real
    overhead: Real
    optimizer_step: Real = 0.0
    """The optimizer step's temporaries (``MemoryBreakdown.optimizer_step_bytes``)."""

    @property
    def total(self) -> Real:
        """Peak bytes per GPU: the model states, the larger of the activations and the
        optimizer step's temporaries, and the overhead."""
        working = ops.maximum(self.activations, self.optimizer_step)
        return self.weights + self.gradients + self.optimizer + working + self.overhead

    def row(self, i: int) -> MemoryBreakdown:
        """Scenario ``i`` as a ``MemoryBreakdown``."""
        return MemoryBreakdown(
            weights_bytes=ops.item(self.weights, i),
            gradients_bytes=ops.item(self.gradients, i),
            optimizer_bytes=ops.item(self.optimizer, i),
            activations_bytes=ops.item(self.activations, i),
            overhead_bytes=ops.item(self.overhead, i),
            optimizer_step_bytes=ops.item(self.optimizer_step, i),
        )


# ---- activations --------------------------------------------------------------------------


def activation_bytes_arr(
    a: ScenarioArrays,
    *,
    moe_layer: bool,
    recompute: Count,
    op_level: bool = True,
    imbalance: Real = 1.0,
) -> Real:
    """Activation bytes one layer keeps for one microbatch (see the module docstring).

    ``recompute`` holds codes (``Recompute.code``: 0 none, 1 selective, 2 full); ``op_level``
    False reads "selective" as Megatron's even where the framework uses op-level SAC (the
    working set of a layer re-run under full recompute); ``imbalance``: the routed tokens of
    the busiest expert rank over its even share (``planner.perf.moe_mlp.moe_imbalance``).
    """
    tp, hidden, seq = a.tensor_parallel, a.hidden_size, a.seq_length
    tok = a.tokens_per_microbatch
    drop = ops.where(a.has_dropout, 1.0, 0.0)
    selective = recompute == _SELECTIVE
    # the layer norms' outputs (the QKV and MLP inputs) unless recomputed (``layernorm``)
    saved = saved_input_bytes(a)  # a GEMM input kept for the backward: 2, or the recipe's
    norm_outputs = ops.where(selective & a.recompute_layernorm, 0.0, 2.0 * saved)
    replicated = tok * hidden * (4.0 + 2.0 * drop + norm_outputs)
    # Q, K, V and the attention output (16-bit), each of its width (GQA: q, kv, kv, q)
    widths = a.attention_q_width + a.attention_k_width + a.attention_v_width
    widths = ops.where(selective & a.recompute_mla_up_proj & a.multi_latent_attention, 0.0, widths)
    # a per-head query/key norm keeps its input, the query and key before it (its output is
    # rotated and kept as Q and K above)
    widths = widths + ops.where(a.per_head_qk_norm, a.attention_q_width + a.attention_k_width, 0.0)
    attn = ACTIVATION_BYTES * tok * (widths + a.attention_out_width)
    # MLA: the latents the up projections read, whole on every tensor-parallel rank
    latents = ACTIVATION_BYTES * tok * (a.q_lora_rank + a.kv_lora_rank)
    local_seq = seq / a.context_parallel
    scores = (4.0 + drop) * a.num_attention_heads * local_seq * seq * a.micro_batch_size
    core_again = selective & a.recompute_core_attn
    kept_scores = ops.logical_not(a.flash_attention) & (recompute != _FULL)
    kept_scores = kept_scores & ops.logical_not(core_again)
    attn = attn + ops.where(kept_scores, scores, 0.0)
    n_up = ops.where(a.gated_linear_unit, 2.0, 1.0)
    act_out = saved
    if moe_layer:
        expert_ffn = a.moe_ffn_hidden_size
        routed = tok * a.moe_router_topk * imbalance
        act_kept = ops.where(selective & a.recompute_moe_act, 0.0, act_out)
        shared = tok * (2.0 * n_up + act_kept) * a.shared_expert_ffn_hidden_size
        mlp = routed * (2.0 * hidden + (2.0 * n_up + act_kept) * expert_ffn)
        mlp = mlp + ops.where(selective & a.recompute_shared_experts, 0.0, shared)
        mlp = ops.where(selective & a.recompute_moe, 0.0, mlp)  # only the block's input
    else:
        mlp = tok * (2.0 * n_up + act_out) * a.ffn_hidden_size
        mlp = ops.where(selective & a.recompute_mlp, 0.0, mlp)
    shard = a.sequence_parallel | (tp == 1)
    full = ops.where(shard, (replicated + attn + mlp) / tp, replicated + (attn + mlp) / tp)
    full = full + latents
    layer_input = 2.0 * tok * hidden / ops.where(a.sequence_parallel, tp, 1.0)
    out: Real = ops.where(recompute == _FULL, layer_input, full)
    if op_level and ops.any_(a.op_level_selective_recompute):
        # torchtitan op-level SAC, eager: the block input, the outputs of the odd-numbered
        # matmuls (wq, wv, w1; w2 too for SwiGLU: 7 matmuls; a fused wqkv keeps q, k and v
        # and a fused w13 both halves, its w2 being the even one), of the attention kernel and
        # of the TP reduce-scatters (module docstring)
        w3 = a.gated_linear_unit & a.separate_gate_up_projections
        if moe_layer:
            routed_up = tok * a.moe_router_topk * imbalance * a.moe_ffn_hidden_size
            up = routed_up + tok * a.shared_expert_ffn_hidden_size
        else:
            up = tok * a.ffn_hidden_size * ops.where(w3, 1.0, n_up)
        down = ops.where(w3, ACTIVATION_BYTES * tok * hidden, 0.0)  # partial sum
        reduce_scatter = ops.where(
            a.sequence_parallel & (tp > 1), 2.0 * ACTIVATION_BYTES * tok * hidden / tp, 0.0
        )
        # wq, wv (a fused wqkv: wk's too) and the attention output
        kept = a.attention_q_width + a.attention_v_width + a.attention_out_width
        kept = kept + ops.where(a.separate_qkv_projections, 0.0, a.attention_k_width)
        sharded = ACTIVATION_BYTES * (tok * kept + up) / tp
        op = layer_input + sharded + down + reduce_scatter
        op_sac = a.op_level_selective_recompute & (recompute == _SELECTIVE)
        out = ops.where(op_sac, ops.minimum(op, full), out)
    return out


def _chunks_in_flight(a: ScenarioArrays, rank: float) -> Real:
    """Microbatch-chunks pipeline rank ``rank`` holds at its peak under (interleaved) 1F1B:
    ``p - rank`` microbatches, or Megatron's interleaved warm-up ``2(p - rank - 1) + (v-1)p``
    plus the one in flight, never more than all ``m·v``."""
    p, v = a.pipeline_parallel, a.virtual_pipeline
    chunks = ops.where(v == 1, p - rank, 2.0 * (p - rank - 1) + (v - 1) * p + 1)
    out: Real = ops.minimum(chunks, a.num_microbatches * v)
    return out


def layers_in_flight_arr(a: ScenarioArrays) -> Real:
    """Layer-activations the first pipeline stage holds at its peak under (interleaved) 1F1B."""
    chunk_layers = a.first_stage_layers / a.virtual_pipeline
    out: Real = _chunks_in_flight(a, 0.0) * chunk_layers
    return out


@dataclass(frozen=True, slots=True)
class _ModelStates:
    """Bytes of weights, gradients and optimizer states a GPU of one stage holds."""

    weights: Real
    gradients: Real
    optimizer: Real
    step_temporaries: Real

    def at_peak(self, activations: Real) -> Real:
        """The stage's peak with ``activations`` bytes of activations (slack included): the
        model states plus the larger of those and the optimizer step's temporaries."""
        working = ops.maximum(activations, self.step_temporaries)
        return self.weights + self.gradients + self.optimizer + working


def _step_temporary_bytes(a: ScenarioArrays) -> Real:
    """Bytes per owned parameter the optimizer step allocates beyond the model states: one
    second moment (``exp_avg_sq_bytes``: ``adam_moment_bytes / 2`` unless the scenario states
    ``exp_avg_sq_dtype``) under PyTorch's ``foreach`` Adam (``adam_foreach``: the scenario's
    ``optimizer_implementation``, else ``FrameworkProfile.adam_foreach``, at
    ``tensor_parallel`` 1 only where ``adam_foreach_tp1_only``), 0 otherwise (module
    docstring)."""
    foreach = a.adam_foreach & ops.logical_not(a.adam_foreach_tp1_only & (a.tensor_parallel > 1))
    return ops.where(foreach, a.exp_avg_sq_bytes, 0.0)


def _optimizer_bytes(a: ScenarioArrays) -> Real:
    """Adam's bytes per owned parameter: the master (``master_weight_bytes``: 2 where NeMo's
    distributed Adam or Megatron's precision-aware optimizer keeps only the remainder below
    the bf16 parameter, or an fp16 master; 0 where the optimizer updates the bf16 parameter
    itself; under ZeRO-3 ``zero3_master_weight_bytes``: ``master_bytes_per_param``) and the two
    moments (``adam_moment_bytes``: 8 in fp32, 4 in bf16, 2 in FP8): 12 with a whole master
    and fp32 moments, the ``FrameworkProfile`` defaults (``planner.perf.frameworks``); the
    scenario's ``parallelism.main_params_dtype`` ... where stated (``planner.perf.readers``)."""
    return master_bytes_per_param(a) + a.adam_moment_bytes


def _model_states(
    a: ScenarioArrays,
    *,
    dense: Real,
    expert: Real,
    root: Real,
    layers: Real,
    d_dense: Real,
    d_expert: Real,
) -> _ModelStates:
    """Model states of a stage holding ``dense`` and ``expert`` parameters per GPU, ``root`` of
    them outside its ``layers`` transformer layers; ``d_dense``/``d_expert`` are the
    data-parallel sizes (``ScenarioArrays.dense_data_parallel_size``,
    ``expert_data_parallel_size``)."""
    z = a.zero_stage
    unit_wise = ops.logical_not(a.zero3_gather_per_tensor)  # PyTorch FSDP; else DeepSpeed
    layers = ops.maximum(layers, 1.0)
    block = (dense - root + expert) / layers
    sharded_away = (dense + expert) - (dense / d_dense + expert / d_expert)
    gathered = ops.where(
        unit_wise,
        root + block + ops.maximum(root, block),  # + FSDP2's all-gather stream buffer
        2.0 * (dense + expert) / layers,  # DeepSpeed: two layers in flight
    )
    gathered = ops.where(z >= 3, ops.minimum(gathered, sharded_away), 0.0)
    # PyTorch FSDP's sharded parameter is the optimizer's: the master's bytes, or the 16-bit
    # shard itself where the optimizer updates the 16-bit weights (no master); Megatron-FSDP
    # counts its model-weight shard below
    in_place = a.optimizer_updates_weights & ops.logical_not(a.zero3_model_weight_shard)
    own16 = ops.logical_not(unit_wise) | in_place
    shard16 = ops.where(own16, dense / d_dense + expert / d_expert, 0.0)
    weights = WEIGHT_BYTES_PER_PARAM * (ops.where(z >= 3, shard16, dense + expert) + gathered)
    linear = dense - root + expert  # the transformer layers' weights (TE modules)
    copy = weight_copy_bytes(a) * linear
    quantised = a.device.low_precision & a.fp8_param_gather
    # Megatron-FSDP: the model-weight shard beside the fp32 main-weight shard, its layers'
    # weights as FP8 parameters when quantised (``zero3_model_weight_shard``)
    owned_root = root / d_dense
    owned_linear = dense / d_dense + expert / d_expert - owned_root
    model_shard = WEIGHT_BYTES_PER_PARAM * owned_root + owned_linear * ops.where(
        quantised, weight_copy_bytes(a), WEIGHT_BYTES_PER_PARAM
    )
    weights = weights + ops.where((z >= 3) & a.zero3_model_weight_shard, model_shard, 0.0)
    # FP8 parameters (module docstring): the quantised weight is the parameter; under ZeRO-3
    # only Hopper's kept transposes stay whole
    kept = ops.where(z >= 3, ops.where(any_layout_fp8_gemms(a), 0.0, copy), copy)
    copy = ops.where(quantised, kept, ops.where(a.fp8_weight_cache, copy, 0.0))
    weights = weights + ops.where(a.device.low_precision, copy, 0.0)
    held = WEIGHT_BYTES_PER_PARAM * root + copy  # no 16-bit transformer weight
    weights = ops.where(quantised & (z < 3), held, weights)
    gradients = a.grad_bytes_per_param * (
        ops.where(z >= 2, dense / d_dense, dense) + ops.where(z >= 2, expert / d_expert, expert)
    )
    owned = ops.where(z >= 1, dense / d_dense, dense) + ops.where(z >= 1, expert / d_expert, expert)
    if not ops.all_(a.trains_base):
        # LoRA: the frozen base holds 16-bit weights only (sharded 16-bit under ZeRO-3, as PEFT
        # under FSDP keeps them); the adapters carry the full mixed-precision states
        frozen = ops.logical_not(a.trains_base)
        adapters = adapter_params_per_gpu(a)
        base = ops.where(z >= 3, dense / d_dense + expert / d_expert + gathered, dense + expert)
        frozen_weights = WEIGHT_BYTES_PER_PARAM * (base + adapters)
        frozen_weights = (
            frozen_weights
            + weights
            - WEIGHT_BYTES_PER_PARAM * (ops.where(z >= 3, shard16, dense + expert) + gathered)
        )  # keeps the low-precision weight copy
        weights = ops.where(frozen, frozen_weights, weights)
        shards = ops.where(z >= 1, d_dense, 1.0)
        grad_shards = ops.where(z >= 2, d_dense, 1.0)
        gradients = ops.where(frozen, a.grad_bytes_per_param * adapters / grad_shards, gradients)
        owned = ops.where(frozen, adapters / shards, owned)
    return _ModelStates(
        weights=weights,
        gradients=gradients,
        optimizer=_optimizer_bytes(a) * owned,
        step_temporaries=_step_temporary_bytes(a) * owned,
    )


@dataclass(frozen=True, slots=True)
class _StageActivations:
    """Activation bytes at the peak of the first, the last and the busiest middle pipeline
    stage."""

    first: Real
    last: Real
    middle: Real


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerActivations:
    """Activation bytes of one microbatch that do not depend on the pipeline: one layer's kept
    activations (``per_layer``, the larger of a dense and an MoE layer's, MoE layers at the
    busiest expert rank), one layer's working set while it is re-run under full recompute
    (``working``, 0 otherwise) and the loss's peak or that working set, whichever is larger
    (``at_loss``); numbers, or arrays of shape ``(n,)``. Of the layout, they read only
    ``planner.perf.operators.OPERATOR_COLUMNS`` (a sweep shares them like the operator table,
    ``planner.search.shared``) and ``recomputed_layer_fraction``, which is 1 in every sweep (the
    explorer takes no ``recompute_num_layers``)."""

    per_layer: Real
    working: Real
    at_loss: Real


def layer_activations(a: ScenarioArrays, eff: EfficiencyModel) -> LayerActivations:
    """``LayerActivations`` of every scenario of ``a`` (``activation_bytes_arr``,
    ``loss_peak_bytes_arr``)."""
    rc = a.recompute
    moe_frac = a.num_moe_layers / a.num_layers
    full = rc == _FULL
    any_full = ops.any_(full)
    # block recompute (``recompute_num_layers``): a share ``f`` of a chunk's layers keep only
    # their input, the others all their activations; per layer on average
    f = a.recomputed_layer_fraction
    block = any_full and ops.any_(f < 1.0)

    def kept(moe_layer: bool, imbalance: Real = 1.0) -> Real:
        act = activation_bytes_arr(a, moe_layer=moe_layer, recompute=rc, imbalance=imbalance)
        if not block:
            return act
        whole = activation_bytes_arr(a, moe_layer=moe_layer, recompute=_NONE, imbalance=imbalance)
        out: Real = ops.where(full, f * act + (1.0 - f) * whole, act)
        return out

    dense_act = kept(False)
    per_layer = dense_act
    working = a.full(0.0)
    if any_full:  # one layer's working set while it is re-run (full recompute only)
        working = activation_bytes_arr(a, moe_layer=False, recompute=_SELECTIVE, op_level=False)
    if ops.any_(moe_frac > 0):
        rho = moe_imbalance(a, eff)
        moe_act = kept(True, rho)
        per_layer = ops.where(
            moe_frac > 0,
            ops.where(moe_frac < 1, ops.maximum(dense_act, moe_act), moe_act),
            dense_act,
        )
        if any_full:
            moe_working = activation_bytes_arr(
                a, moe_layer=True, recompute=_SELECTIVE, op_level=False, imbalance=rho
            )
            working = ops.maximum(working, ops.where(moe_frac > 0, moe_working, 0.0))
    working = ops.where(full, working, 0.0)
    # the loss peaks before any layer is re-run: the stage holds one or the other on top
    at_loss = ops.maximum(loss_peak_bytes_arr(a), working)
    return LayerActivations(per_layer=per_layer, working=working, at_loss=at_loss)


def _stage_activations(a: ScenarioArrays, layer: LayerActivations) -> _StageActivations:
    """Activations of the first stage (layers in flight) and the last (its layers and the
    multi-token-prediction layers, plus the loss), each with one layer's working set while it
    is re-run under full recompute; ``layer``: the per-layer terms."""
    per_layer, working, at_loss = layer.per_layer, layer.working, layer.at_loss
    in_flight = layers_in_flight_arr(a)
    single = a.pipeline_parallel == 1
    first_chunks = _chunks_in_flight(a, 0.0)
    last_layers = ops.minimum(
        a.last_stage_layers, first_chunks * (a.last_stage_layers / a.virtual_pipeline)
    )
    middle_layers = _chunks_in_flight(a, 1.0) * (a.middle_stage_layers / a.virtual_pipeline)
    mtp = a.mtp_num_layers * per_layer  # one microbatch through the MTP layers (last stage)
    # activation offloading (one stage only): the offloaded layers leave the GPU during the
    # forward; the backward reloads one ahead of the layer it runs (module docstring)
    offloaded = ops.where(single, a.activation_offload_layers, 0.0)
    at_loss = ops.where(offloaded > 0, ops.maximum(at_loss, per_layer), at_loss)
    return _StageActivations(
        first=(in_flight - offloaded) * per_layer + ops.where(single, at_loss + mtp, working),
        last=(last_layers - offloaded) * per_layer + at_loss + mtp,
        middle=ops.where(a.middle_stage_layers > 0, middle_layers * per_layer + working, 0.0),
    )


def memory_arrays(
    a: ScenarioArrays,
    eff: EfficiencyModel,
    *,
    params: StageParameters | None = None,
    layer: LayerActivations | None = None,
) -> MemoryArrays:
    """Peak memory of the most loaded GPU (first, busiest middle or last pipeline stage) for a
    batch, bytes.

    ``params`` is ``stage_params(a)`` and ``layer`` is ``layer_activations(a, eff)`` when the
    caller has them already."""
    stages = params if params is not None else stage_params(a)
    act = _stage_activations(a, layer if layer is not None else layer_activations(a, eff))
    sizes = {"d_dense": a.dense_data_parallel_size, "d_expert": a.expert_data_parallel_size}
    first = _model_states(
        a,
        dense=stages.first_dense,
        expert=stages.first_expert,
        root=stages.first_root,
        layers=stages.first_layers,
        **sizes,
    )
    last = _model_states(
        a,
        dense=stages.last_dense,
        expert=stages.last_expert,
        root=stages.last_root,
        layers=stages.last_layers,
        **sizes,
    )
    slack = 1.0 + eff.memory_fragmentation_fraction
    first_total = first.at_peak(act.first * slack)
    last_total = last.at_peak(act.last * slack)
    use_first = first_total >= last_total
    weights = ops.where(use_first, first.weights, last.weights)
    gradients = ops.where(use_first, first.gradients, last.gradients)
    optimizer = ops.where(use_first, first.optimizer, last.optimizer)
    step = ops.where(use_first, first.step_temporaries, last.step_temporaries)
    activations = ops.where(use_first, act.first, act.last)
    if ops.any_(a.middle_stage_layers > 0):  # a middle rank may hold the most (uneven splits)
        middle = _model_states(
            a,
            dense=stages.middle_dense,
            expert=stages.middle_expert,
            root=0.0,
            layers=stages.middle_layers,
            **sizes,
        )
        middle_total = middle.at_peak(act.middle * slack)
        use_middle = middle_total > ops.maximum(first_total, last_total)
        weights = ops.where(use_middle, middle.weights, weights)
        gradients = ops.where(use_middle, middle.gradients, gradients)
        optimizer = ops.where(use_middle, middle.optimizer, optimizer)
        step = ops.where(use_middle, middle.step_temporaries, step)
        activations = ops.where(use_middle, act.middle, activations)
    return MemoryArrays(
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        activations=activations * slack,
        overhead=a.full(eff.memory_overhead_bytes),
        optimizer_step=step,
    )


# ---- one-scenario wrappers ------------------------------------------------------------------


def activation_bytes_per_layer(
    scenario: Scenario, *, moe_layer: bool, recompute: Recompute
) -> float:
    """Activation bytes one layer keeps for one microbatch (Korthikanti et al. 2022, Table 2)."""
    a = ScenarioArrays.from_scenario(scenario)
    code = recompute.code
    return float(activation_bytes_arr(a, moe_layer=moe_layer, recompute=code))


def layers_in_flight(scenario: Scenario) -> float:
    """Layer-activations the first pipeline stage holds at its peak under (interleaved) 1F1B."""
    return float(layers_in_flight_arr(ScenarioArrays.from_scenario(scenario)))


def memory_per_gpu(
    scenario: Scenario, efficiency: EfficiencyModel | None = None
) -> MemoryBreakdown:
    """Peak memory of the most loaded GPU of one scenario, bytes."""
    eff = efficiency if efficiency is not None else DefaultEfficiency()
    return memory_arrays(ScenarioArrays.from_scenario(scenario), eff).row(0)


def local_params(scenario: Scenario) -> LocalParameters:
    """Dense and expert parameters per GPU on the pipeline stage holding the most."""
    return stage_params(ScenarioArrays.from_scenario(scenario)).busiest()
