"""What a training step pays besides its microbatches: fixed per-iteration costs, and the
small collectives every microbatch adds (Megatron-LM's ``train_step``).

Megatron-LM ``megatron/training/training.py`` (``train_step``, core_r0.8-r0.12) and
Megatron-Core run, around ``forward_backward_func`` over the ``m`` microbatches:

Once per iteration (fixed, whatever ``m``):

1. ``model_chunk.zero_grad_buffer()``: Megatron-Core's DDP keeps every gradient in one
   contiguous buffer (``param_and_grad_buffer.py``) and zeroes it before each iteration, an HBM
   write of ``grad_bytes_per_param`` per local parameter (``grad_buffer_memset``; PyTorch's
   ``zero_grad(set_to_none=True)``, the default of FSDP/torchtitan/DeepSpeed, frees instead).
2. ``finalize_model_grads`` (``megatron/core/distributed/finalize_model_grads.py``) after the
   last microbatch's backward: the data-parallel gradient synchronisation
   (``planner.perf.data``), then ``_allreduce_layernorm_grads`` (with sequence parallelism the
   layer norms' weight gradients, one coalesced buffer of ``2h`` per local layer, all-reduced
   over the tensor-parallel group) and ``_allreduce_word_embedding_grads``: with the input and
   output embeddings tied and the model split into pipeline stages, the first and last stage
   each hold a copy of the ``V·h/t`` embedding and all-reduce its gradient between them
   (DeepSpeed's pipeline engine does the same, ``_exec_reduce_tied_grads``). Synchronous: on
   the critical path after the backward.
3. ``optimizer.step()`` (``megatron/core/optimizer/optimizer.py``): under fp16 loss scaling
   ``_unscale_main_grads_and_check_for_nan`` all-reduces the found-inf flag (MAX) over the
   model-parallel group; ``clip_grad_norm`` (``clip_grads.py``, ``get_grad_norm_fp32``)
   all-reduces the squared gradient norm over the model-parallel group, and under the
   distributed optimizer over every rank (each holds a disjoint shard of the gradients); the
   Adam step itself and the parameter all-gather are ``planner.perf.optimizer`` and
   ``planner.perf.data``. Every stack that clips gradients (all the LLM recipes here: Megatron
   ``--clip-grad 1.0``, torchtitan ``max_norm``, llm-foundry's ``clipping_threshold``,
   DeepSpeed ``gradient_clipping``) pays the norm's all-reduce; fp16 stacks the found-inf one.
4. Logging reads the loss, the norm and the skipped-iteration flag on the host; the timers'
   barriers and the reduction of logged values run once per ``--log-interval``: not counted.

Once per microbatch (``m`` times):

5. ``loss_func`` of Megatron-LM's ``pretrain_gpt.py`` all-reduces the reporting loss over the
   data-parallel group (``torch.distributed.all_reduce(reporting_loss,
   group=mpu.get_data_parallel_group())``) on the last pipeline stage, on its compute stream
   (``loss_all_reduce_per_microbatch``; NeMo runs the same Megatron-Core step; PyTorch stacks
   reduce the loss once per logged step).

The collectives are a few bytes: their cost is NCCL's latency (``planner.perf.collectives``:
the tree's ``log2`` of the domains across thousands of ranks, the ring's hops inside one),
tens to hundreds of microseconds each; the memset and the embedding all-reduce scale with the
parameters. Together well under 1 % of a large model's step, a few percent of a small
model's short step at large scale. ``optimizer_s`` (1 and 3) joins the optimizer term,
``sync_s`` (2 and 5) the exposed data-parallel term of ``breakdown_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import EfficiencyModel
from planner.perf.ops import Real
from planner.perf.parameters import LocalParameters

__all__ = ["SCALAR_BYTES", "IterationCosts", "iteration_costs"]

SCALAR_BYTES = 4.0
"""An fp32 scalar: the squared norm, the found-inf flag, the reporting loss (with its token
count, 8 bytes; the latency is the same)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationCosts:
    """Seconds per iteration (numbers, or arrays of shape ``(n,)``): ``optimizer_s`` (grad
    buffer zeroing, found-inf and grad-norm all-reduces) and ``sync_s`` (layer-norm and tied
    embedding gradient all-reduces, per-microbatch loss all-reduce)."""

    optimizer_s: Real
    sync_s: Real


def iteration_costs(
    a: ScenarioArrays, eff: EfficiencyModel, link: coll.Link, params: LocalParameters
) -> IterationCosts:
    """The fixed and per-microbatch costs of every scenario of ``a`` (module docstring);
    ``params`` are the parameters per GPU of the stage holding the most."""
    zero = a.full(0.0)
    tp, pp = a.tensor_parallel, a.pipeline_parallel
    local = params.dense + params.expert
    grad_bytes = local * a.grad_bytes_per_param
    memset = ops.where(
        a.grad_buffer_memset, grad_bytes / eff.memory_bytes_per_s(grad_bytes, a.device), 0.0
    )
    model_parallel = tp * pp
    stats_group = ops.where(a.zero_stage >= 1, a.num_gpus, model_parallel)
    norm = coll.all_reduce_time_s(a.full(SCALAR_BYTES), stats_group, a.full(1.0), link)
    found_inf = ops.where(
        a.loss_scaling,
        coll.all_reduce_time_s(a.full(SCALAR_BYTES), model_parallel, a.full(1.0), link),
        0.0,
    )
    layernorm = ops.where(
        a.sequence_parallel & (tp > 1.0),
        coll.all_reduce_time_s(
            2.0 * a.hidden_size * params.layers * a.grad_bytes_per_param, tp, a.full(1.0), link
        ),
        0.0,
    )
    tied = ops.logical_not(a.untie_embeddings) & (pp > 1.0)
    embedding = zero
    if ops.any_(tied):
        size = a.vocab_size * a.hidden_size / tp * a.grad_bytes_per_param
        # the first and last stage are tp·cp·dp·(pp-1) ranks apart: different domains at scale
        apart = tp * a.context_parallel * a.data_parallel * (pp - 1.0)
        embedding = ops.where(tied, coll.all_reduce_time_s(size, a.full(2.0), apart, link), 0.0)
    loss = ops.where(
        a.loss_all_reduce_per_microbatch,
        a.num_microbatches
        * coll.all_reduce_time_s(a.full(2.0 * SCALAR_BYTES), a.dense_data_parallel_size, tp, link),
        0.0,
    )
    return IterationCosts(
        optimizer_s=memset + norm + found_inf, sync_s=layernorm + embedding + loss
    )
