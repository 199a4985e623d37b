"""Data-parallel communication: gradient reduction, parameter gathers and ZeRO-3/FSDP.

Dense parameters are replicated over the ``d·c`` GPUs of the data-parallel group (with context
parallelism, as Megatron-Core groups them), expert parameters over the expert data-parallel
group (``t·c·d / (t_e·e)`` under MoE parallel folding, ``d·c/e`` when ``t_e = t``); each group
reduces its gradients once per iteration, ``grad_bytes_per_param`` per parameter: a ring
all-reduce at ZeRO-0, a reduce-scatter when the optimizer is sharded (ZeRO >= 1, Megatron's
distributed optimizer; Rajbhandari et al. 2020), which then all-gathers the updated 16-bit
parameters (FP8 under ``fp8_param_gather``: ``param_gather_bytes``) before the next forward
(``collectives``; ranks ``t`` apart, experts ``t_e·e``: Megatron-Core's expert rank order,
expert tensor parallel fastest, then expert parallel).
The parameters and windows are the busiest pipeline stage's (``StageParameters.busiest``).

ZeRO 0-2: the reduction runs in buckets, each its own collective paying its latency
(``dp_bucket_min_params``, ``dp_bucket_params_per_rank``: Megatron-Core's DDP default bucket of
``max(4e7, 1e6·d)`` parameters, "larger DP sizes need larger buckets to ensure collectives do
not become latency-bound", ``distributed_data_parallel_config.py``; DeepSpeed's
``reduce_bucket_size`` 5e8; PyTorch DDP's 25 MB ``bucket_cap_mb``; without
``overlap_grad_reduce`` Megatron-Core sets the bucket size to infinity: one collective,
``distributed_data_parallel.py``), under the last microbatch's backward, and the gather
under the first microbatch's forward (Megatron ``--overlap-grad-reduce`` /
``--overlap-param-gather``): at most ``dp_overlap_fraction`` of each hides, never more than that
window; fully exposed when the scenario sets ``overlap_grad_reduce`` / ``overlap_param_gather``
false. ZeRO 0 and 1 accumulate the ``m`` microbatches' gradients in a full local buffer and
reduce once (Megatron's ``no_sync`` until the last microbatch); ZeRO-2 holds only its shard
of the gradients (``planner.perf.memory``), so it must reduce-scatter every microbatch's
gradients as that microbatch's backward produces them: ``m`` reductions per iteration, each
hiding under its own microbatch's backward (DeepSpeed ZeRO stage 2 reduces at every
micro-step, ``runtime/zero/stage_1_and_2.py``; PyTorch FSDP ``SHARD_GRAD_OP`` reduce-scatters
after every backward, and accumulating without it, ``no_sync``, keeps unsharded gradients,
the ZeRO-1 memory; Megatron-Core 0.16.1 ``megatron_fsdp.py``: "with gradient-sharding
strategies [``optim_grads``, ``optim_grads_params``], gradient reduction occurs on every
backward propagation").

Under the interleaved schedule, a stack that synchronises per model chunk
(``chunk_grad_sync``: NeMo 24.07's distributed Adam through Megatron-Core 0.8's
``grad_sync_func`` / ``param_sync_func``, ``planner.perf.frameworks``) reduces each of the
``v`` chunks' gradients, ``D/v`` of them, once the chunk's last backward is done. Megatron-Core
runs the backward of chunk ``v-1`` first, in groups of ``p`` microbatches per chunk
(``get_model_chunk_id``), so on the first stage chunk ``c``'s last backward ends ``c·p`` chunk
backwards (``t_b/v`` each, ``t_b`` the stage's backward of one microbatch) before the step's;
the reductions queue on the network in that order, and what outlasts the step is
``max(D/v, D − (v−1)·p·t_b/v)`` (the last chunk's reduction alone, or the backlog when one
chunk's reduction outlasts ``p`` chunk backwards). Gathers run the same way ahead of each
chunk's first forward (chunk ``c+1`` launched at chunk ``c``'s, ``p`` chunk forwards apart):
``max(G/v, G − (v−1)·p·t_f/v)``. Never less than the ``1 − dp_overlap_fraction`` that no
overlap hides.

ZeRO-3 / FSDP gathers the parameters before every microbatch's forward and backward (and once more
for the recomputed forward under full recompute on stacks that release them after every forward:
DeepSpeed; PyTorch FSDP and Megatron-FSDP keep the recomputed forward's gather for the backward,
``planner.perf.frameworks``) and reduce-scatters the gradients every microbatch, hidden behind that
microbatch's compute on the slowest stage. Each collective unit is its own NCCL call: a flat
buffer per layer (PyTorch FSDP), or every parameter tensor of the layer (DeepSpeed; 12 with
biases, 9 without, ``ModelSpec.has_biases``), timed at the units' mean size (the stage's
parameters over its units), so each pays the base and per-hop latency of the protocol NCCL's
tuner picks for that size (``collectives``: a unit of hundreds of MB runs ``Simple``, whose
ring latency over 512 ranks is ~2.4 ms, not the ``LL`` latency of an empty message). For
DeepSpeed the mean is a simplification: its tensors range from a bias or norm of ``h``
elements (``LL``, a quarter of the bandwidth but the lowest latency) to an MLP weight of
``4h²``; timing each at its own size makes the published ZeRO-3 runs faster still
(``benchmarks/RESULTS.md``). DeepSpeed's prefetch reaches only ``zero3_prefetch_params``
parameters ahead, hiding at most that share of the next tensor's gather
(``planner.perf.frameworks``). A stack whose ZeRO-3 collectives take a list of per-rank
tensors (``zero3_list_collectives``: DeepSpeed of 2021) pays one device copy per rank of the
group for every gather and reduce-scatter of a unit, each at least ``kernel_min_time_s``:
PyTorch's ``ProcessGroupNCCL::allgather`` (1.8-1.10) gathers into a flat buffer and copies
every rank's chunk out to its output tensor (``outputTensors[i][j].copy_(...)``), and
``reduce_scatter`` copies every input into a flat buffer first. A stack that prefetches
backward gathers only after the current unit's gradients (``zero3_backward_prefetch_post``:
FSDP ``BACKWARD_POST``, Composer's default) has every unit's backward all-gather on the
critical path: it is paid whole, and only the rest overlaps. A stack that runs ZeRO-3 in lock
step with the device (``zero3_lock_step``: DeepSpeed 0.3-0.4, 2021) has every gradient
reduce-scatter and every per-rank copy of its list collectives on the critical path too, and
overlaps only the NCCL kernels of the gathers it prefetches: DeepSpeed 0.3.13's
``PartitionedParameterCoordinator.fetch_sub_module`` (``runtime/zero/stage3.py``) ends every
submodule fetch with ``_synchronize_communication``, which waits for the gathers and calls
``torch.cuda.synchronize()``, a wait for every stream, the reduction stream included, where
the gradient hooks (``reduce_ipg_grads``) launched the reduce-scatters of the submodule's
backward (charged whole: each can overlap only the kernels of that backward still running when
its hook fires); ``Init._allgather_param`` (``partition_parameters.py``) calls
``torch.cuda.synchronize()`` again before each parameter's all-gather. The host issues the
per-rank copies of each list collective itself, in the calling thread
(``ProcessGroupNCCL::collective`` runs ``allgather``'s copy-out after ``ncclAllGather`` and
``reduce_scatter``'s copy-in before ``ncclReduceScatter``, torch 1.8-1.10), and DeepSpeed issues
the prefetched gathers from the submodule's pre-forward hook
(``pre_sub_module_forward_function``), so the submodule's compute is launched only after
their copies: on an idle device (just synchronised) the copies run alone. PyTorch FSDP (v1)
prepares every unit's unsharded gradient for its reduce-scatter with memory-bound passes
(``zero3_grad_prep_pass``: the cast to an fp32 reduce dtype, read 2 and write 4 bytes per
parameter, and the in-place pre-divide, read and write the reduce dtype: 14 bytes per
parameter with fp32 reduction, 4 with bf16), every microbatch; they are paid in full (HBM
passes of the size of the unit's gradient, beside the backward's own).

A stack that accumulates unsharded gradients between ZeRO-3 reductions
(``zero3_accumulate_unsharded``: NeMo Automodel's FSDP2, ``planner.perf.frameworks``) reduces
once per run of backward passes. Without a pipeline, each unit is still gathered for every
microbatch's forward and backward, and the reduce-scatter runs once per iteration under the
last microbatch's backward (hidden like a gather, up to ``dp_overlap_fraction`` of it). Under
pipeline parallelism, each unit is gathered once per run of the schedule
(``pipeline_schedule_runs``) and kept through every microbatch, and the reduce-scatter runs
once per run, after each model chunk's last backward, with the compute stream waiting for it:
paid whole. Every microbatch's 16-bit gradients are then added into an accumulator of the
reduce dtype (the first one cast into it): with an fp32 reduction 6 bytes per dense parameter
for the first microbatch of a run and 10 for every later one, an HBM pass on the compute
stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import CommKind, EfficiencyModel
from planner.perf.operators import LayerTimes
from planner.perf.ops import Flag, Real
from planner.perf.parameters import LocalParameters
from planner.perf.pipeline import PipelineSchedule
from planner.specs.parallelism import Recompute

__all__ = ["PARAM_GATHER_BYTES", "DataParallelTimes", "data_parallel_times", "gradient_buckets"]

_FULL = Recompute.FULL.code

PARAM_GATHER_BYTES = 2.0
"""Parameters are gathered in 16 bits (also under FP8 training: the FP8 copy is cast locally)."""

FP8_PARAM_GATHER_BYTES = 1.0
"""Bytes per parameter gathered when the weights are kept in FP8 (``parallelism.fp8_param_gather``;
Megatron-LM ``--fp8-param-gather``: "Keep the compute param in fp8 (do not use any other
intermediate dtype) and perform the param all-gather in fp8", ``megatron/training/arguments.py``
@ ``core_v0.14.0``); the scales (one per tensor, or one byte per 32 elements under MXFP8) are
left out."""


def param_gather_bytes(a: ScenarioArrays) -> Real:
    """Bytes per parameter of each scenario's data-parallel parameter gathers:
    ``FP8_PARAM_GATHER_BYTES`` with FP8 weights under a low precision, else
    ``PARAM_GATHER_BYTES``."""
    quantised = a.device.low_precision & a.fp8_param_gather
    return ops.where(quantised, FP8_PARAM_GATHER_BYTES, PARAM_GATHER_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataParallelTimes:
    """Data-parallel communication, seconds (numbers, or arrays of shape ``(n,)``):
    ``gradient_reduction_s`` and ``parameter_gather_s`` are one round of each over the dense
    and expert groups (per iteration at ZeRO 0-2, per microbatch at ZeRO-3, before any
    overlap); ``exposed_s`` is what the iteration pays."""

    gradient_reduction_s: Real
    parameter_gather_s: Real
    exposed_s: Real


def data_parallel_times(
    a: ScenarioArrays,
    eff: EfficiencyModel,
    link: coll.Link,
    *,
    params: LocalParameters,
    layer: LayerTimes,
    schedule: PipelineSchedule,
) -> DataParallelTimes:
    """Data-parallel communication of every scenario of ``a`` (module docstring); ``params``
    are the parameters per GPU of the stage holding the most."""
    zero = a.zero_stage
    full = a.recompute == _FULL
    regather = a.zero3_regather_on_recompute & full
    gathers = ops.where(
        zero >= 3, ops.where(regather, 3.0, 2.0), ops.where(zero >= 1, 1.0, 0.0)
    )  # parameter all-gathers per round
    dense_group = a.dense_data_parallel_size
    dense = _round(
        a, link, params=params.dense, group=dense_group, stride=a.tensor_parallel, gathers=gathers
    )
    grads, gather = dense.gradient_reduction_s, dense.parameter_gather_s
    experts_reduce = experts_gather = a.full(0.0)
    if ops.any_(a.num_moe_layers > 0):  # expert parameters: their own (smaller) group
        experts = _round(
            a,
            link,
            params=params.expert,
            group=a.expert_data_parallel_size,
            stride=a.expert_tensor_parallel * a.expert_parallel,
            gathers=gathers,
        )
        experts_reduce = ops.where(params.expert > 0, experts.gradient_reduction_s, 0.0)
        experts_gather = ops.where(params.expert > 0, experts.parameter_gather_s, 0.0)
        grads = grads + experts_reduce
        gather = gather + experts_gather
    keep = 1.0 - eff.comm_overlap(CommKind.DATA)
    layers = params.layers  # the busiest stage's layers: its backward / forward hides them
    v = a.virtual_pipeline
    chunked = a.chunk_grad_sync & (v > 1.0) & (a.pipeline_parallel > 1.0) & (zero <= 1)
    exposed_grads = ops.where(
        a.overlap_grad_reduce,
        _exposed(grads, keep, layers * layer.backward_s, a, chunked),
        grads,
    )
    # ZeRO-2 keeps only its shard of the gradients: each microbatch's are reduce-scattered
    # under that microbatch's backward (module docstring); ZeRO 0-1 accumulate them locally
    exposed_grads = ops.where(zero == 2, a.num_microbatches * exposed_grads, exposed_grads)
    exposed_gather = ops.where(
        a.overlap_param_gather,
        _exposed(gather, keep, layers * layer.forward_s, a, chunked),
        gather,
    )
    zero3 = a.full(0.0)
    if ops.any_(zero >= 3):
        zero3 = _zero3_s(
            a,
            eff,
            link,
            params=params,
            group=dense_group,
            gathers=gathers,
            experts_reduce_s=experts_reduce,
            experts_gather_s=experts_gather,
            keep=keep,
            schedule=schedule,
        )
    return DataParallelTimes(
        gradient_reduction_s=grads,
        parameter_gather_s=gather,
        exposed_s=ops.where(zero >= 3, zero3, exposed_grads + exposed_gather),
    )


def _zero3_s(
    a: ScenarioArrays,
    eff: EfficiencyModel,
    link: coll.Link,
    *,
    params: LocalParameters,
    group: Real,
    gathers: Real,
    experts_reduce_s: Real,
    experts_gather_s: Real,
    keep: Real,
    schedule: PipelineSchedule,
) -> Real:
    """Exposed ZeRO-3 / FSDP seconds per iteration (module docstring): per microbatch, every
    unit's ``gathers`` all-gathers and its reduce-scatter, one NCCL call each at the unit's size
    (``group`` ranks), beside the expert parameters' reduction and ``gathers`` gathers
    (``experts_reduce_s``, ``experts_gather_s``); the per-rank copies of list collectives; what
    the stack puts on the critical path (``serial``); FSDP's gradient preparation passes; the
    rest hidden behind the slowest stage up to ``keep``. A stack that accumulates unsharded
    gradients (``zero3_accumulate_unsharded``) is timed by ``_accumulating_zero3_s``."""
    tensors = ops.where(a.zero3_gather_per_tensor, ops.where(a.has_biases, 12.0, 9.0), 1.0)
    n_units = ops.maximum(params.layers * tensors, 1.0)
    unit_gather = coll.all_gather_time_s(
        params.dense * param_gather_bytes(a) / n_units, group, a.tensor_parallel, link
    )
    unit_reduce = coll.reduce_scatter_time_s(
        params.dense * a.grad_bytes_per_param / n_units, group, a.tensor_parallel, link
    )
    # collectives over lists of per-rank tensors: one copy kernel per rank, unit and collective
    copies = (
        (gathers + 1.0)
        * n_units
        * ops.where(a.zero3_list_collectives, group * eff.kernel_min_time_s, 0.0)
    )
    experts_round_s = experts_reduce_s + experts_gather_s
    per_microbatch = experts_round_s + n_units * (gathers * unit_gather + unit_reduce) + copies
    reach = ops.minimum(
        a.zero3_prefetch_params / ops.maximum(params.dense / n_units, 1.0), 1.0 - keep
    )
    keep_zero3 = ops.where(a.zero3_prefetch_params > 0, 1.0 - reach, keep)
    # BACKWARD_POST: each unit's backward gather waits for the previous unit's gradients
    serial = ops.where(a.zero3_backward_prefetch_post, n_units * unit_gather, 0.0)
    # lock step (DeepSpeed 0.3.x): every gradient reduce-scatter, and every per-rank copy the
    # host issues around a list collective, on the critical path
    serial = serial + ops.where(a.zero3_lock_step, n_units * unit_reduce + copies, 0.0)
    # FSDP's cast to the reduce dtype and pre-divide of every unit's unsharded gradient
    grad_bytes = a.grad_bytes_per_param
    prep = params.dense * (ops.where(grad_bytes > 2.0, 2.0 + grad_bytes, 0.0) + 2.0 * grad_bytes)
    prep_s = ops.where(
        a.zero3_grad_prep_pass, prep / eff.memory_bytes_per_s(prep / n_units, a.device), 0.0
    )
    overlapped = per_microbatch - serial
    hidden = overlapped - schedule.slowest_stage_s
    per_microbatch_s = a.num_microbatches * (
        serial + prep_s + ops.maximum(overlapped * keep_zero3, hidden)
    )
    accumulating = a.zero3_accumulate_unsharded
    if not ops.any_(accumulating):
        return per_microbatch_s
    reduce = experts_reduce_s + n_units * unit_reduce
    gather = experts_gather_s / ops.maximum(gathers, 1.0) + n_units * unit_gather
    return ops.where(
        accumulating,
        _accumulating_zero3_s(
            a,
            eff,
            params=params,
            reduce_s=reduce,
            gather_s=gather,
            gathers=gathers,
            keep=keep,
            window=schedule.slowest_stage_s,
        ),
        per_microbatch_s,
    )


def _accumulating_zero3_s(
    a: ScenarioArrays,
    eff: EfficiencyModel,
    *,
    params: LocalParameters,
    reduce_s: Real,
    gather_s: Real,
    gathers: Real,
    keep: Real,
    window: Real,
) -> Real:
    """Exposed seconds per iteration of a ZeRO-3 stack that accumulates unsharded gradients
    between reductions (module docstring): ``reduce_s`` one reduce-scatter of the stage's
    dense and expert gradients, ``gather_s`` one all-gather of its parameters; ``window`` the
    slowest stage's time per microbatch, behind which a collective hides up to ``keep``.

    Without a pipeline: ``gathers`` gathers every microbatch, one reduction per iteration
    under the last microbatch's backward. With one: one gather per schedule run, kept through
    every microbatch, and one reduction per run that the compute stream waits for, whole.
    Every microbatch's dense gradients are added into the unsharded accumulator in the reduce
    dtype (the first one cast into it): an HBM pass over the stage's dense parameters."""

    def hidden(total: Real) -> Real:
        return ops.maximum(total * keep, total - window)

    pipelined = a.pipeline_parallel > 1.0
    m = a.num_microbatches
    runs = ops.where(pipelined, a.pipeline_schedule_runs, 1.0)
    gathers_s = ops.where(pipelined, runs * hidden(gather_s), m * hidden(gathers * gather_s))
    reduces_s = ops.where(pipelined, runs * reduce_s, hidden(reduce_s))
    # the dense units' 16-bit gradients, cast into a wider reduce dtype: per run the first
    # microbatch's cast (read 2, write the accumulator), every later one's add (read 2, read
    # and write the accumulator); a 16-bit reduction accumulates in ``.grad`` as autograd does
    grad_bytes = a.grad_bytes_per_param
    per_param = runs * (2.0 + grad_bytes) + (m - runs) * (2.0 + 2.0 * grad_bytes)
    accumulate = ops.where(grad_bytes > 2.0, params.dense * per_param, 0.0)
    accumulate_s = accumulate / eff.memory_bytes_per_s(
        accumulate / ops.maximum(m * params.layers, 1.0), a.device
    )
    return gathers_s + reduces_s + accumulate_s


def _exposed(total: Real, keep: Real, window: Real, a: ScenarioArrays, chunked: Flag) -> Real:
    """Seconds of the data-parallel collective ``total`` (s) left exposed behind ``window``,
    the stage's backward (forward) of one microbatch; per model chunk where ``chunked``
    (module docstring)."""
    whole = ops.maximum(total * keep, total - window)
    if not ops.any_(chunked):
        return whole
    v = a.virtual_pipeline
    # chunk backwards between two chunks' last ones: p (Megatron-Core needs m % p == 0; a
    # scenario with fewer microbatches than stages has only m)
    p = ops.minimum(a.pipeline_parallel, a.num_microbatches)
    per_chunk = ops.maximum(total / v, total - (v - 1.0) * p * window / v)
    return ops.where(chunked, ops.maximum(total * keep, per_chunk), whole)


def gradient_buckets(a: ScenarioArrays, params: Real, group: Real) -> Real:
    """Collectives one gradient reduction of ``params`` parameters over a ``group``-rank
    data-parallel group runs in (module docstring): ``ceil(params / bucket)`` with the
    framework's bucket size at ZeRO 0-2 when the reduction overlaps the backward, else 1
    (ZeRO-3 reduces per unit, timed apart)."""
    bucket = ops.maximum(a.dp_bucket_min_params, a.dp_bucket_params_per_rank * group)
    return ops.where(
        (a.zero_stage >= 3) | ops.logical_not(a.overlap_grad_reduce),
        1.0,
        ops.maximum(ops.ceil(params / bucket), 1.0),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Round:
    """One gradient reduction and the parameter gathers of one data-parallel group, seconds."""

    gradient_reduction_s: Real
    parameter_gather_s: Real


def _round(
    a: ScenarioArrays,
    link: coll.Link,
    *,
    params: Real,
    group: Real,
    stride: Real,
    gathers: Real,
) -> _Round:
    """One round over a data-parallel group of ``group`` ranks ``stride`` apart holding
    ``params`` parameters each: the gradient all-reduce (ZeRO-0) or reduce-scatter, and
    ``gathers`` parameter all-gathers."""
    grads = params * a.grad_bytes_per_param
    buckets = gradient_buckets(a, params, group)
    all_reduce = buckets * coll.all_reduce_time_s(grads / buckets, group, stride, link)
    reduce_scatter = buckets * coll.reduce_scatter_time_s(grads / buckets, group, stride, link)
    all_gather = coll.all_gather_time_s(params * param_gather_bytes(a), group, stride, link)
    return _Round(
        gradient_reduction_s=ops.where(a.zero_stage == 0, all_reduce, reduce_scatter),
        parameter_gather_s=gathers * all_gather,
    )
