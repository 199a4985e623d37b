"""The vectorized engine: a batch of scenarios -> iteration time, breakdown, FLOPs and memory.

One pass over a structure of arrays (``ScenarioArrays``): numpy arrays for a batch, Python
numbers for one scenario (``predict``), through the same code (``planner.perf.ops``). Each part
of the model lives in its own module, which documents its terms, units and sources:

1. **Operators** (``planner.perf.operators``): every kernel of a transformer layer (attention
   GEMMs and core, MLP or MoE experts, norms and other memory-bound ops), the embedding and the
   LM head with its loss, timed per microbatch on one GPU from the ``EfficiencyModel``'s
   achieved FLOP/s and bytes/s; recompute repeats the attention core (selective) or the whole
   layer forward (full); activation offloading adds the time the compute stream waits for
   its host copies (``planner.perf.offload``).
2. **Communication** over a two-tier NVLink/NIC topology (``planner.perf.collectives``):
   tensor parallel (``tensor``), context parallel ring attention (``context``), expert
   parallel all-to-alls (``expert``), pipeline point-to-point (``pipeline``), data-parallel
   gradient reduction, parameter gathers and ZeRO-3/FSDP (``data``); each exposed where it
   exceeds what hides behind compute.
3. **Schedule** (``planner.perf.pipeline``): 1F1B / interleaved 1F1B; the slowest stage (first:
   embedding; last: LM head and loss) sets the steady state; the bubble is ``(p-1)/v`` times
   the mean stage's per-microbatch time (Narayanan et al. SC'21 §2.2).
4. **Optimizer** (``planner.perf.optimizer``): Adam over the locally owned parameters; and the
   step's fixed costs (``planner.perf.iteration``: gradient-buffer zeroing, the norm and
   found-inf all-reduces in ``optimizer``; layer-norm, tied-embedding and per-microbatch loss
   all-reduces in ``dp_comm_exposed``).
5. **FLOPs** (``planner.perf.flops``) and **memory** (``planner.perf.memory``), per iteration
   and per GPU.

The iteration time is the sum of the ``BREAKDOWN_KEYS`` terms.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.perf import collectives as coll
from planner.perf import ops
from planner.perf.batch import ScenarioArrays
from planner.perf.context import context_parallel_times
from planner.perf.data import data_parallel_times
from planner.perf.efficiency import EfficiencyModel
from planner.perf.expert import expert_parallel_times
from planner.perf.flops import iteration_flops
from planner.perf.iteration import iteration_costs
from planner.perf.lora import adapter_flops_per_token, adapter_params_per_gpu
from planner.perf.memory import MemoryArrays, layer_activations, memory_arrays
from planner.perf.offload import offload_exposed_s
from planner.perf.operators import OperatorTimes, layer_times, operator_times
from planner.perf.ops import Real
from planner.perf.optimizer import optimizer_times
from planner.perf.parameters import LocalParameters, stage_params
from planner.perf.pipeline import pipeline_schedule
from planner.perf.tensor import TensorParallelTimes, tensor_parallel_times

__all__ = ["BREAKDOWN_KEYS", "BatchResult", "evaluate", "link_of"]

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


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """Engine output for a batch: arrays of shape ``(n,)`` (seconds, FLOPs, bytes), Python
    floats for the one-scenario form. ``moe_routed_compute_s``: the seconds of ``compute`` and
    ``pp_bubble`` that the routed experts of the MoE layers take (``PipelineSchedule``; 0 for
    dense models)."""

    iteration_time_s: Real
    breakdown_s: dict[str, Real]
    moe_routed_compute_s: Real
    model_flops: Real
    hardware_flops: Real
    memory: MemoryArrays


def link_of(a: ScenarioArrays, eff: EfficiencyModel) -> coll.Link:
    """The two network tiers of every scenario of ``a``: line rates times the efficiency
    model's NCCL bus-bandwidth fractions, the GPUs' per-hop latencies."""
    return coll.Link(
        scale_up_bus_bandwidth_bytes_per_s=a.scale_up_bandwidth_bytes_per_s
        * eff.bus_bandwidth_fraction(scale_up=True),
        scale_out_bus_bandwidth_bytes_per_s=a.inter_node_bandwidth_bytes_per_s
        * eff.bus_bandwidth_fraction(scale_up=False),
        scale_up_latency_s=a.scale_up_latency_s,
        scale_out_latency_s=a.scale_out_latency_s,
        nvlink_domain_size=a.nvlink_domain_size,
        base_latency_s=eff.collective_latency_s,
    )


@dataclass(frozen=True, slots=True)
class _TrainedParameters:
    """Parameters per GPU the data-parallel group reduces and gathers (``reduced``) and the
    optimizer updates (``updated``)."""

    reduced: LocalParameters
    updated: LocalParameters


def _trained_params(a: ScenarioArrays, busiest: LocalParameters) -> _TrainedParameters:
    """All parameters, or under LoRA the adapters (``planner.perf.lora``): only they have
    gradients and optimizer states. A frozen base under ZeRO-3/FSDP is still gathered every
    microbatch, so the data-parallel collectives there keep the base's size (its gradient
    reduce-scatter, which a frozen base does not have, is then over-counted)."""
    if ops.all_(a.trains_base):
        return _TrainedParameters(reduced=busiest, updated=busiest)
    adapters = adapter_params_per_gpu(a)
    updated = LocalParameters(
        dense=ops.where(a.trains_base, busiest.dense, adapters),
        expert=ops.where(a.trains_base, busiest.expert, 0.0),
        layers=busiest.layers,
    )
    gathered = a.trains_base | (a.zero_stage >= 3)
    reduced = LocalParameters(
        dense=ops.where(gathered, busiest.dense, adapters),
        expert=ops.where(gathered, busiest.expert, 0.0),
        layers=busiest.layers,
    )
    return _TrainedParameters(reduced=reduced, updated=updated)


def evaluate(
    a: ScenarioArrays,
    eff: EfficiencyModel,
    *,
    operators: OperatorTimes | None = None,
    memory: MemoryArrays | None = None,
    tensor: TensorParallelTimes | None = None,
) -> BatchResult:
    """Iteration time, breakdown, FLOPs and memory of every scenario in ``a``: arrays of shape
    ``(n,)`` for arrays in, Python floats for the one-scenario form.

    ``operators`` (``operator_times(a, eff)``), ``memory`` (``memory_arrays(a, eff)``) and
    ``tensor`` (``tensor_parallel_times(a, eff, link_of(a, eff))``), when the caller has them
    already (a sweep shares the operator table and the tensor-parallel times among candidates,
    and checks memory before timing), are used as given, not recomputed."""
    if operators is None:
        operators = operator_times(a, eff)
    layer = layer_times(operators, a)
    link = link_of(a, eff)
    if tensor is None:
        tensor = tensor_parallel_times(a, eff, link)
    schedule = pipeline_schedule(
        a,
        link,
        operators=operators,
        layer=layer,
        tensor=tensor,
        context=context_parallel_times(a, link, layer),
        expert=expert_parallel_times(a, eff, link, layer),
    )
    params = stage_params(a)
    busiest = params.busiest()
    trained = _trained_params(a, busiest)
    data = data_parallel_times(a, eff, link, params=trained.reduced, layer=layer, schedule=schedule)
    fixed = iteration_costs(a, eff, link, trained.reduced)
    offload_s = a.full(0.0)
    # the activations offloading copies are the memory model's: computed once for both
    acts = layer_activations(a, eff) if ops.any_(a.activation_offload_layers > 0) else None
    if acts is not None:
        offload_s = offload_exposed_s(
            a, layer_bytes=acts.per_layer, forward_s=layer.forward_s, backward_s=layer.backward_s
        )
    breakdown = {
        "compute": schedule.compute_s + offload_s,
        "tp_comm_exposed": schedule.tp_comm_s,
        "cp_comm_exposed": schedule.cp_comm_s,
        "ep_comm_exposed": schedule.ep_comm_s,
        "pp_comm_exposed": schedule.p2p_s,
        "pp_bubble": schedule.bubble_s,
        "dp_comm_exposed": data.exposed_s + fixed.sync_s,
        "optimizer": optimizer_times(a, eff, trained.updated).step_s + fixed.optimizer_s,
    }
    iteration = a.full(0.0)
    for key in BREAKDOWN_KEYS:
        iteration = iteration + breakdown[key]
    flops = iteration_flops(
        a,
        num_sequences=a.global_batch_size,
        recompute=a.recompute,
        trains_base=a.trains_base,
        adapter_per_token=adapter_flops_per_token(a),
        span=ops.minimum(a.packed_sample_length, a.seq_length),
        recomputed_fraction=a.recomputed_layer_fraction,
        # the time model's rule (planner.perf.operators): op-level recompute keeps the cores
        selective_core_share=ops.where(
            a.recompute_core_attn & ops.logical_not(a.op_level_selective_recompute), 1.0, 0.0
        ),
    )
    return BatchResult(
        iteration_time_s=iteration,
        breakdown_s=breakdown,
        moe_routed_compute_s=schedule.moe_routed_s,
        model_flops=flops.model_total,
        hardware_flops=flops.hardware_total,
        memory=memory if memory is not None else memory_arrays(a, eff, params=params, layer=acts),
    )
