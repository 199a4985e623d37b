"""Scenario fields the engine reads through a rule: recompute and its modules, gradient
reduction (overlap, precision), the optimizer's state dtypes, the low-precision recipe, MoE
routing and dispatch, LoRA and packed sequences, the resolved layout (expert tensor parallel,
layers per stage), the memory headroom and loss scaling.

Each reader takes a validated ``Scenario`` and returns the value of the ``ScenarioArrays``
field of the same name in ``READERS`` (``planner.perf.batch`` gathers them with the device
rules). Codes and flags follow the specs: ``Fp8Recipe.code``, ``MoETokenDispatcher.code``,
``TrainingSpec.adapts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from planner.perf.frameworks import profile_of
from planner.specs.feasibility import expert_tensor_parallel_of, stage_layers_of
from planner.specs.hardware import Precision
from planner.specs.parallelism import (
    MainParamsDtype,
    OptimizerDtype,
    OptimizerImplementation,
    RecomputeModule,
)
from planner.specs.pipeline_split import StageLayers
from planner.specs.scenario import CudaGraphs, LoraTarget, Scenario

__all__ = ["DEFAULT_MEMORY_HEADROOM_BYTES", "READERS"]


def _recompute_module(module: RecomputeModule) -> Callable[[Scenario], bool]:
    """Reader of ``recompute_<module>``: the module is in ``parallelism.recompute_modules``
    (absent: Megatron's default, ``core_attn`` alone). The engine applies it only where the
    recompute is selective."""

    def read(s: Scenario) -> bool:
        chosen = s.parallelism.recompute_modules
        if chosen is None:
            return module is RecomputeModule.CORE_ATTN
        return module in chosen

    read.__doc__ = f"``{module}`` is recomputed under selective recompute."
    return read


def _fp8_recipe(s: Scenario) -> int:
    """The GEMM recipe's code (``Fp8Recipe.code``; 0 in 16-bit training): the scenario's
    ``fp8_recipe``, else the precision's default."""
    recipe = s.parallelism.low_precision_recipe
    return 0 if recipe is None else recipe.code


def _moe_token_dispatcher(s: Scenario) -> int:
    """``model.moe_token_dispatcher_type`` as its code (0 alltoall, 1 allgather, 2 flex)."""
    return s.model.moe_token_dispatcher_type.code


def _moe_imbalance(s: Scenario) -> float:
    """Busiest expert rank's tokens over the average: 1 with forced load balancing or a
    round-robin gate, the scenario's ``moe_imbalance_factor``, else NaN (the efficiency
    model's default)."""
    m = s.model
    if m.moe_router_force_load_balancing or m.moe_router_round_robin:
        return 1.0
    return math.nan if m.moe_imbalance_factor is None else m.moe_imbalance_factor


def _moe_expert_capacity_factor(s: Scenario) -> float:
    """``model.moe_expert_capacity_factor``; NaN when dropless."""
    factor = s.model.moe_expert_capacity_factor
    return math.nan if factor is None else factor


def _trains_base(s: Scenario) -> bool:
    """False when the base weights are frozen (``training.mode: lora``)."""
    return s.training.trains_base


def _lora_rank(s: Scenario) -> float:
    """The LoRA rank (0 unless LoRA training)."""
    return float(s.training.adapter_rank)


def _lora_target(target: LoraTarget) -> Callable[[Scenario], bool]:
    """Reader of ``lora_<target>``: LoRA adapts that linear layer."""

    def read(s: Scenario) -> bool:
        return s.training.adapts(target)

    read.__doc__ = f"LoRA adapts ``{target}``."
    return read


def _packed_sample_length(s: Scenario) -> float:
    """Mean tokens per packed sample (``training.packed_sample_length``), else the sequence."""
    packed = s.training.packed_sample_length
    return float(s.model.seq_length if packed is None else packed)


def _full_iteration_cuda_graph(s: Scenario) -> bool:
    """``training.cuda_graphs`` is ``full_iteration``: the loop replays one graph of the whole
    forward and backward, so the host issues no kernel inside it."""
    return s.training.cuda_graphs is CudaGraphs.FULL_ITERATION


def _compiled_loss(s: Scenario) -> bool:
    """``training.compiled_loss``: the cross-entropy runs under torch.compile."""
    return s.training.compiled_loss


_RECIPE_AND_MOE_READERS: Mapping[str, Callable[[Scenario], Any]] = MappingProxyType(
    {
        "moe_token_dispatcher": _moe_token_dispatcher,
        "moe_imbalance": _moe_imbalance,
        "moe_expert_capacity_factor": _moe_expert_capacity_factor,
        "fp8_recipe": _fp8_recipe,
        **{f"recompute_{m.value}": _recompute_module(m) for m in RecomputeModule},
        "trains_base": _trains_base,
        "lora_rank": _lora_rank,
        **{f"lora_{t.value}": _lora_target(t) for t in LoraTarget},
        "packed_sample_length": _packed_sample_length,
        "full_iteration_cuda_graph": _full_iteration_cuda_graph,
        "compiled_loss": _compiled_loss,
    }
)
"""``ScenarioArrays`` field -> its reader."""


DEFAULT_MEMORY_HEADROOM_BYTES = 1.0 * 2**30
"""Memory a layout leaves free beyond its predicted peak to count as fitting, when
``hardware.memory_headroom_gib`` is unset: 1 GiB (what it stands for and its sources are in
``planner.perf.memory``)."""


def _recompute(s: Scenario) -> int:
    """``parallelism.recompute`` as its code (``Recompute.code``: 0 none, 1 selective, 2 full)."""
    return s.parallelism.recompute.code


def _stated_else_framework(s: Scenario, name: str) -> bool:
    """The flag ``parallelism.<name>`` where the scenario states it, else the framework
    profile's attribute of the same name."""
    chosen = getattr(s.parallelism, name)
    if chosen is not None:
        return bool(chosen)
    return bool(getattr(profile_of(s.training.framework), name))


STATED_ELSE_FRAMEWORK: Final = (
    "overlap_grad_reduce",
    "tp_comm_overlap",
    "recompute_early_stop",
    "separate_qkv_projections",
    "separate_gate_up_projections",
    "fp8_tp_all_gather",
)
"""Flags read as ``parallelism.<name>`` where the scenario states it, else the framework's
default (``FrameworkProfile.<name>``, ``planner.perf.frameworks``). ``overlap_grad_reduce``
(overlapped, except DeepSpeed ZeRO 0-2) is read by ZeRO 0-2 only: ZeRO-3 reduces per unit
under its own schedule (``planner.perf.data``), so the value stays the stage-independent one a
candidate of another stage copies (``planner.perf.candidates``)."""


def _stated_else_framework_reader(name: str) -> Callable[[Scenario], bool]:
    """The reader of one ``STATED_ELSE_FRAMEWORK`` flag."""

    def read(s: Scenario) -> bool:
        return _stated_else_framework(s, name)

    return read


def _overlap_param_gather(s: Scenario) -> bool:
    """``parallelism.overlap_param_gather``; unset means overlapped."""
    return s.parallelism.overlap_param_gather is not False


def _grad_bytes_per_param(s: Scenario) -> float:
    """Bytes per parameter of the gradient buffer and its data-parallel reduction: 4 when
    gradients are reduced in fp32, else 2. The scenario's ``grad_reduce_in_fp32``, else the
    framework's default: 16-bit under fp16 (loss scaling), the profile's choice otherwise
    (``planner.perf.frameworks``)."""
    par = s.parallelism
    in_fp32 = par.grad_reduce_in_fp32
    if in_fp32 is None:
        profile = profile_of(s.training.framework)
        in_fp32 = profile.grad_reduce_in_fp32 and par.precision is not Precision.FP16
    return 4.0 if in_fp32 else 2.0


def _stated_master(s: Scenario) -> MainParamsDtype | None:
    """The dtype of the optimizer's master the scenario states: ``main_params_dtype``, fp32
    where only ``store_param_remainders`` is given; None where neither is (the profile's)."""
    par = s.parallelism
    if par.main_params_dtype is None and par.store_param_remainders is None:
        return None
    return par.main_params_dtype or MainParamsDtype.FP32


def _master_weight_bytes(s: Scenario) -> float:
    """Bytes per owned parameter of the optimizer's master below ZeRO-3
    (``ParallelismSpec`` docstring): the profile's ``master_weight_bytes`` unless the scenario
    states ``main_params_dtype`` or ``store_param_remainders``; then fp32 4 (2 with remainders:
    the scenario's ``store_param_remainders``, else the profile's), fp16 2, bf16 0 (the
    optimizer updates the weights, counted as weights)."""
    profile = profile_of(s.training.framework)
    dtype = _stated_master(s)
    if dtype is None:
        return profile.master_weight_bytes
    remainders = s.parallelism.store_param_remainders
    if remainders is None:
        remainders = (
            profile.store_param_remainders and s.parallelism.precision is not Precision.FP16
        )
    return 2.0 if dtype is MainParamsDtype.FP32 and remainders else dtype.bytes


def _zero3_master_weight_bytes(s: Scenario) -> float:
    """``_master_weight_bytes`` under ZeRO-3: the profile's ``zero3_master_weight_bytes``
    unless stated; the shards keep the whole master (no remainders): fp32 4, fp16 2, bf16 0
    (``planner.perf.memory`` counts PyTorch FSDP's bf16 shard as the weights)."""
    dtype = _stated_master(s)
    if dtype is None:
        return profile_of(s.training.framework).zero3_master_weight_bytes
    return dtype.bytes


def _optimizer_updates_weights(s: Scenario) -> bool:
    """No master, the optimizer updates the 16-bit weights: ``main_params_dtype`` is bf16;
    where the scenario states no master dtype, a profile keeping no master at any ZeRO stage
    (``master_weight_bytes`` and ``zero3_master_weight_bytes`` 0: NeMo Automodel's
    ``torch.optim.Adam`` over the bf16 FSDP2 shards, ``planner.perf.frameworks``), so its
    16-bit shard is counted as the weights under ZeRO-3 and the step reads and writes it, as
    for a stated ``main_params_dtype: bf16``."""
    dtype = _stated_master(s)
    if dtype is None:
        profile = profile_of(s.training.framework)
        return profile.master_weight_bytes == 0.0 and profile.zero3_master_weight_bytes == 0.0
    return dtype is MainParamsDtype.BF16


def _stated_precision_aware(s: Scenario) -> bool:
    """The scenario states the optimizer's dtypes with a master copy: Megatron-Core's
    precision-aware optimizer, which hands Transformer Engine's ``FusedAdam`` the 16-bit
    gradient as it was reduced (``FrameworkProfile.optimizer_grad_read``)."""
    master = _stated_master(s)
    return master is not None and master is not MainParamsDtype.BF16


def _optimizer_grad_bytes(s: Scenario) -> float:
    """Bytes per element of the gradient the optimizer step and its gradient-norm pass read
    (``FrameworkProfile.optimizer_grad_read``): the reduced gradient's
    (``grad_bytes_per_param``) without a master (the optimizer updates the 16-bit weights from
    their own gradients), under a profile that reads it as reduced, and under Megatron-LM's
    precision-aware optimizer; else 4 (an fp32 gradient or fp32 copy)."""
    read = profile_of(s.training.framework).optimizer_grad_read
    if (
        _optimizer_updates_weights(s)
        or read == "as_reduced"
        or (read == "fp32_copy" and _stated_precision_aware(s))
    ):
        return _grad_bytes_per_param(s)
    return 4.0


def _optimizer_grad_cast_bytes(s: Scenario) -> float:
    """HBM bytes per owned parameter of casting a 16-bit gradient into the fp32 copy the step
    reads (``optimizer_grad_read`` ``fp32_copy`` without the precision-aware optimizer: read
    the 16-bit gradient, write 4 bytes); 0 where the step reads the gradient it has."""
    grad = _grad_bytes_per_param(s)
    read = profile_of(s.training.framework).optimizer_grad_read
    if read != "fp32_copy" or grad >= 4.0 or _optimizer_grad_bytes(s) < 4.0:
        return 0.0
    return grad + 4.0


def _moment_bytes(s: Scenario, dtype: OptimizerDtype | None) -> float:
    """Bytes per element of one Adam moment: ``dtype``'s, else half the profile's
    ``adam_moment_bytes``."""
    if dtype is None:
        return 0.5 * profile_of(s.training.framework).adam_moment_bytes
    return dtype.bytes


def _adam_moment_bytes(s: Scenario) -> float:
    """Bytes per owned parameter of both Adam moments: ``exp_avg_dtype`` and
    ``exp_avg_sq_dtype``, each the profile's half of ``adam_moment_bytes`` where unset."""
    par = s.parallelism
    return _moment_bytes(s, par.exp_avg_dtype) + _moment_bytes(s, par.exp_avg_sq_dtype)


def _exp_avg_sq_bytes(s: Scenario) -> float:
    """Bytes per element of Adam's second moment (``exp_avg_sq_dtype``, else the profile's
    half of ``adam_moment_bytes``): the dtype of the ``foreach`` step's square-root list."""
    return _moment_bytes(s, s.parallelism.exp_avg_sq_dtype)


def _adam_foreach(s: Scenario) -> bool:
    """The optimizer step allocates ``foreach`` Adam's ``sqrt(exp_avg_sq)`` list
    (``planner.perf.memory``): the scenario's ``optimizer_implementation`` is ``foreach``; the
    profile's ``adam_foreach`` where it states none."""
    chosen = s.parallelism.optimizer_implementation
    if chosen is None:
        return profile_of(s.training.framework).adam_foreach
    return chosen is OptimizerImplementation.FOREACH


def _adam_foreach_tp1_only(s: Scenario) -> bool:
    """``adam_foreach`` holds only at ``tensor_parallel`` 1: the profile's
    ``adam_foreach_tp1_only`` where the scenario states no ``optimizer_implementation``; a
    stated one holds at every degree (``ParallelismSpec`` docstring)."""
    if s.parallelism.optimizer_implementation is not None:
        return False
    return profile_of(s.training.framework).adam_foreach_tp1_only


def _recomputed_layer_fraction(s: Scenario) -> float:
    """Share of each model chunk's transformer layers that full recompute re-runs: 1, or
    ``parallelism.recompute_num_layers`` of the first pipeline stage's chunk (Megatron-Core
    ``TransformerBlock._checkpointed_forward``, ``recompute_method == 'block'``: the first
    ``recompute_num_layers`` layers of the block, i.e. of each pipeline model chunk, are
    checkpointed, the others run as without recompute; NVIDIA/Megatron-LM
    ``megatron/core/transformer/transformer_block.py`` @ ``core_v0.14.0``)."""
    par = s.parallelism
    if par.recompute_num_layers is None:
        return 1.0
    chunk_layers = _stages(s).first / par.virtual_pipeline
    return min(par.recompute_num_layers / chunk_layers, 1.0) if chunk_layers > 0 else 1.0


def _total_tokens(s: Scenario) -> float:
    """``training.total_tokens``, NaN when unset."""
    tokens = s.training.total_tokens
    return math.nan if tokens is None else tokens


def _train_iters(s: Scenario) -> float:
    """``training.train_iters``, NaN when unset."""
    iters = s.training.train_iters
    return math.nan if iters is None else iters


def _expert_tensor_parallel(s: Scenario) -> int:
    """``parallelism.expert_tensor_parallel``, resolved (``feasibility.expert_tensor_parallel_of``:
    the tensor-parallel degree unless set, unless the experts fold only with fewer, or unless
    the framework keeps the experts whole)."""
    par = s.parallelism
    framework = s.training.framework
    return int(expert_tensor_parallel_of(s.model, s.hardware.num_gpus, par, framework))


_LAST_STAGES: list[tuple[Scenario, StageLayers]] = []
"""The last scenario's split (its three readers run one after the other)."""


def _stages(s: Scenario) -> StageLayers:
    last = _LAST_STAGES[0] if _LAST_STAGES else None  # one read: safe under threads
    if last is not None and last[0] is s:
        return last[1]
    stages = stage_layers_of(s.model, s.parallelism, s.training.framework)
    _LAST_STAGES[:] = [(s, stages)]
    return stages


def _first_stage_layers(s: Scenario) -> int:
    """Transformer layers of pipeline rank 0 (``planner.specs.pipeline_split``)."""
    return _stages(s).first


def _middle_stage_layers(s: Scenario) -> int:
    """Transformer layers of the busiest middle pipeline rank (0 without one)."""
    return _stages(s).middle


def _last_stage_layers(s: Scenario) -> int:
    """Transformer layers of the last pipeline rank."""
    return _stages(s).last


def _memory_headroom_bytes(s: Scenario) -> float:
    """``hardware.memory_headroom_gib`` in bytes, or the default (``planner.perf.memory``)."""
    gib = getattr(s.hardware, "memory_headroom_gib", None)
    return DEFAULT_MEMORY_HEADROOM_BYTES if gib is None else float(gib) * 2.0**30


def _host_link_bandwidth_bytes_per_s(s: Scenario) -> float:
    """The GPU's host-link bandwidth, one direction, bytes/s (``GpuSpec``); NaN where the
    catalog has none (a scenario that offloads activations then fails validation)."""
    rate = s.hardware.gpu.host_link_bandwidth_bytes_per_s
    return math.nan if rate is None else rate


def _loss_scaling(s: Scenario) -> bool:
    """fp16 training: dynamic loss scaling, whose optimizer step checks for inf/NaN."""
    return s.parallelism.precision is Precision.FP16


def _has_dropout(s: Scenario) -> bool:
    """The model trains with dropout (``ModelSpec.has_dropout``: GPT-style GeLU models) and
    the framework's model code applies it (``FrameworkProfile.trains_with_dropout``: not
    llm-foundry's MPT, whose dropout probabilities default to 0)."""
    return s.model.has_dropout and profile_of(s.training.framework).trains_with_dropout


READERS: Mapping[str, Callable[[Scenario], Any]] = MappingProxyType(
    {
        "recompute": _recompute,
        "recomputed_layer_fraction": _recomputed_layer_fraction,
        "overlap_param_gather": _overlap_param_gather,
        **{name: _stated_else_framework_reader(name) for name in STATED_ELSE_FRAMEWORK},
        "grad_bytes_per_param": _grad_bytes_per_param,
        "master_weight_bytes": _master_weight_bytes,
        "zero3_master_weight_bytes": _zero3_master_weight_bytes,
        "optimizer_updates_weights": _optimizer_updates_weights,
        "optimizer_grad_bytes": _optimizer_grad_bytes,
        "optimizer_grad_cast_bytes": _optimizer_grad_cast_bytes,
        "adam_moment_bytes": _adam_moment_bytes,
        "exp_avg_sq_bytes": _exp_avg_sq_bytes,
        "adam_foreach": _adam_foreach,
        "adam_foreach_tp1_only": _adam_foreach_tp1_only,
        "total_tokens": _total_tokens,
        "train_iters": _train_iters,
        **_RECIPE_AND_MOE_READERS,
        "expert_tensor_parallel": _expert_tensor_parallel,
        "first_stage_layers": _first_stage_layers,
        "middle_stage_layers": _middle_stage_layers,
        "last_stage_layers": _last_stage_layers,
        "memory_headroom_bytes": _memory_headroom_bytes,
        "host_link_bandwidth_bytes_per_s": _host_link_bandwidth_bytes_per_s,
        "loss_scaling": _loss_scaling,
        "has_dropout": _has_dropout,
    }
)
"""Fields of ``ScenarioArrays`` read from the scenario through a rule, with their readers."""
