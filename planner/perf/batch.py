"""Structure of arrays over a batch of scenarios: the one input of the engine.

``ScenarioArrays.from_scenarios(scenarios)`` reads every field the engine needs once, into
float64 (or bool/int) arrays of shape ``(n,)``; ``ScenarioArrays.from_scenario(scenario)``
reads the same fields of one scenario as Python ``float``/``bool``/``int`` (the one-scenario
form). The engine computes both forms with the same code (``planner.perf.ops``).

Every field is read by name: a field of ``ScenarioArrays`` (or ``DeviceArrays``) named like an
attribute of the scenario's ``ModelSpec``, ``ParallelismSpec``, ``HardwareSpec``, ``GpuSpec``
or framework profile (``planner.perf.frameworks``) is that attribute; the few that need a
rule (``_SCENARIO_RULES``, ``_DEVICE_RULES``) have one named reader each. The Python type of
a field in the one-scenario form follows its annotation: ``Real`` -> ``float``, ``Flag`` ->
``bool``, ``Count`` -> ``int``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from planner.perf import ops
from planner.perf.efficiency import ARCHITECTURES, DeviceArrays
from planner.perf.frameworks import FrameworkProfile, profile_of
from planner.perf.ops import Count, Flag, Real
from planner.perf.readers import DEFAULT_MEMORY_HEADROOM_BYTES, READERS
from planner.specs.hardware import GpuSpec, HardwareSpec, Precision
from planner.specs.model import ModelSpec
from planner.specs.parallelism import ParallelismSpec
from planner.specs.scenario import Framework, Scenario

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "DEFAULT_MEMORY_HEADROOM_BYTES",
    "ScenarioArrays",
    "constant_column",
    "from_fields",
    "with_fields",
]

_ARRAY = np.ndarray
_D = TypeVar("_D", bound="DataclassInstance")


def from_fields(cls: type[_D], values: Mapping[str, object]) -> _D:
    """``cls(**values)``: the dataclass ``cls`` (``ScenarioArrays``, ``DeviceArrays``, ...)
    from its fields by name, as a loop over ``dataclasses.fields`` or over ``_COLUMNS`` reads
    them; each value is of its field's type (the loop's rule), which no static check sees
    through a loop: ``tests/perf/test_field_kinds.py`` checks the values of every builder
    field by field instead. Raises ``TypeError`` for a missing or unknown field."""
    return cls(**values)


def with_fields(obj: _D, changes: Mapping[str, object]) -> _D:
    """``dataclasses.replace(obj, **changes)``, for ``changes`` built by a loop over the
    fields (see ``from_fields``)."""
    return replace(obj, **changes)


def constant_column(value: NDArray[Any], n: int) -> NDArray[Any]:
    """``value[0]`` for ``n`` scenarios: a read-only view of shape ``(n,)`` with stride 0 (no
    copy; the engine only reads its inputs). ``value`` has at least one element."""
    out: NDArray[Any] = np.ndarray((n,), dtype=value.dtype, buffer=value[:1].copy(), strides=(0,))
    out.flags.writeable = False
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioArrays:
    """Every number the engine reads (SI units, counts as float): one array element per
    scenario, or one Python number each in the one-scenario form.

    Model (``ModelSpec`` attributes, Megatron-LM names): ``query_width``/``kv_width`` are the
    widths of all query / key heads together (GQA/MQA through ``kv_width``);
    ``gated_linear_unit``, ``has_dropout``, ``has_biases`` and ``has_rotary_embeddings`` are the
    model facts ``ModelSpec`` derives from the activation (``has_dropout`` also false where the
    framework's model code trains without it, ``FrameworkProfile.trains_with_dropout``).
    Parallelism (``ParallelismSpec``): the degrees, batch sizes, ``num_microbatches``,
    ``pipeline_schedule_runs`` (runs of the pipeline schedule per iteration, 1 unless
    ``pipeline_batch_size`` splits the iteration),
    ``recompute`` (``Recompute.code``: 0 none, 1 selective, 2 full) and ``recompute_<module>``
    (``RecomputeModule``: what selective recompute repeats), ``recomputed_layer_fraction`` (the
    share of a model chunk's layers full recompute re-runs: 1, or ``recompute_num_layers`` of
    the first stage's chunk), ``fp8_recipe`` (``Fp8Recipe.code``,
    0 in 16-bit), ``zero_stage``, ``flash_attention``; ``overlap_grad_reduce`` /
    ``overlap_param_gather`` are the scenario's flags (true unless set to false);
    ``fp8_param_gather`` and ``activation_offload_layers`` the scenario's (false, 0 unset);
    ``grad_bytes_per_param`` is the gradient buffer and its data-parallel reduction, bytes per
    parameter (4 fp32, 2 16-bit; ``parallelism.grad_reduce_in_fp32`` or the framework's
    default); ``master_weight_bytes``, ``zero3_master_weight_bytes``, ``adam_moment_bytes``
    (both moments), ``exp_avg_sq_bytes`` (the second, per element) and
    ``optimizer_updates_weights`` (no master: the optimizer updates the 16-bit weights) are the
    scenario's optimizer dtypes (``main_params_dtype`` ...), else the framework profile's
    (``planner.perf.readers``); ``adam_foreach`` / ``adam_foreach_tp1_only`` the scenario's
    ``optimizer_implementation`` (foreach: true / false), else the profile's;
    ``optimizer_grad_bytes`` (per element of the gradient the optimizer step reads) and
    ``optimizer_grad_cast_bytes`` (per owned parameter, casting a 16-bit gradient into an
    fp32 copy first) follow them and ``grad_bytes_per_param``
    (``FrameworkProfile.optimizer_grad_read``). Hardware (``HardwareSpec`` / ``GpuSpec``):
    ``num_gpus``, ``nvlink_domain_size``, per-GPU one-direction bandwidths and per-hop
    latencies of both tiers, ``host_link_bandwidth_bytes_per_s`` (NaN where the catalog has
    none), ``hbm_bytes``, and ``device`` (peaks, HBM bandwidth, SMs, architecture). Framework
    (``FrameworkProfile``, see ``planner.perf.frameworks``): ``fused_attention`` ...
    ``pp_comm_overlap``, ``chunk_grad_sync``, ``grouped_gemm_streams``, ``moe_host_forward_s``,
    ``moe_host_expert_forward_s``, ``moe_router_forward_kernels``,
    ``moe_flex_router_forward_kernels``, ``fp8_norm_fused_cast``,
    ``expert_up_bias_in_gemm``, ``flex_attention_for_sinks``,
    ``activation_clamp_eager``, ``yarn_rope_unfused``, ``loss_upcast_fp32``, ``fused_norms``;
    ``separate_qkv_projections``, ``separate_gate_up_projections`` and ``fp8_tp_all_gather``
    the scenario's where stated, else the profile's (``planner.perf.readers``).
    Training:
    ``total_tokens`` and ``train_iters``, NaN when the scenario leaves them out; ``trains_base``
    (false under LoRA),
    ``lora_rank`` and ``lora_<target>`` (``TrainingSpec.adapts``), ``packed_sample_length``
    (the sequence when not packed), ``full_iteration_cuda_graph`` (``training.cuda_graphs`` is
    ``full_iteration``), ``compiled_loss`` (``training.compiled_loss``).

    Model fields (``ModelSpec`` properties): the attention widths the engine times
    (``attention_q_width`` ... ``attention_down_width``, ``kv_up_width``: GQA and MLA alike),
    the attention weights per layer (``attention_gemm_params``, ``attention_replicated_params``
    held whole by every TP rank, ``attention_params`` with norms), ``full_attention_fraction``
    and ``window_size`` (sliding-window layers), ``per_head_qk_norm`` (Qwen3's QK-norm),
    ``shared_expert_ffn_hidden_size``, the MTP
    modules (``mtp_num_layers``, ``num_mtp_moe_layers``, ``mtp_params``), and the MoE cost
    knobs: ``moe_token_dispatcher`` (``MoETokenDispatcher.code``), ``moe_imbalance`` (busiest
    expert rank over the average: 1 under forced balance, the scenario's
    ``moe_imbalance_factor``, else NaN = the efficiency model's default), ``moe_expert_capacity_
    factor`` (NaN: dropless), ``moe_pad_expert_input_to_capacity`` (drop-and-pad).

    Layout (``planner.specs.pipeline_split``, ``planner.specs.feasibility``):
    ``expert_tensor_parallel`` is the resolved expert tensor-parallel degree (MoE parallel
    folding; ``tensor_parallel`` unless set); ``first_stage_layers``, ``middle_stage_layers``
    and ``last_stage_layers`` are the transformer layers of pipeline rank 0, of the busiest
    middle rank (0 when ``pipeline_parallel <= 2``) and of rank ``p-1``, all chunks of the rank
    (``num_layers / pipeline_parallel`` each for an even split; ``num_layers`` on the one stage
    when ``pipeline_parallel == 1``). ``memory_headroom_bytes`` is the memory a layout must
    leave free to fit (``hardware.memory_headroom_gib``, ``planner.perf.memory``).

    Per-iteration costs (``planner.perf.iteration``): ``loss_scaling`` (fp16: the optimizer
    checks the gradients for inf/NaN), and the framework's ``grad_buffer_memset`` and
    ``loss_all_reduce_per_microbatch`` (``planner.perf.frameworks``); its
    ``wgrad_accumulation_fusion`` (weight gradients added into the gradient buffer by the GEMM,
    ``planner.perf.optable``).
    """

    num_scenarios: int
    # model
    num_layers: Real
    hidden_size: Real
    num_attention_heads: Real
    query_width: Real
    kv_width: Real
    ffn_hidden_size: Real
    vocab_size: Real
    seq_length: Real
    gated_linear_unit: Flag
    has_dropout: Flag
    has_biases: Flag
    has_rotary_embeddings: Flag
    untie_embeddings: Flag
    num_experts: Real
    moe_router_topk: Real
    moe_ffn_hidden_size: Real
    num_shared_experts: Real
    num_moe_layers: Real
    # model (MLA, MTP, MoE layer frequency, shared experts, windows, MoE cost knobs)
    multi_latent_attention: Flag
    attention_q_width: Real
    attention_k_width: Real
    attention_v_width: Real
    attention_out_width: Real
    attention_in_width: Real
    attention_down_width: Real
    kv_up_width: Real
    q_lora_rank: Real
    kv_lora_rank: Real
    qk_pos_emb_head_dim: Real
    attention_gemm_params: Real
    attention_replicated_params: Real
    attention_params: Real
    full_attention_fraction: Real
    window_size: Real
    shared_expert_ffn_hidden_size: Real
    mtp_num_layers: Real
    num_mtp_moe_layers: Real
    mtp_params: Real
    moe_grouped_gemm: Flag
    moe_router_round_robin: Flag
    moe_router_num_groups: Real
    moe_router_group_topk: Real
    moe_token_dispatcher: Count
    moe_imbalance: Real
    moe_expert_capacity_factor: Real
    moe_pad_expert_input_to_capacity: Flag
    overlap_moe_expert_parallel_comm: Flag
    moe_expert_bias: Flag
    activation_func_clamp_value: Real
    has_attention_sink: Flag
    yarn_rotary: Flag
    per_head_qk_norm: Flag
    # parallelism
    tensor_parallel: Real
    pipeline_parallel: Real
    context_parallel: Real
    expert_parallel: Real
    data_parallel: Real
    virtual_pipeline: Real
    sequence_parallel: Flag
    micro_batch_size: Real
    global_batch_size: Real
    num_microbatches: Real
    pipeline_schedule_runs: Real
    recompute: Count
    recomputed_layer_fraction: Real
    fp8_recipe: Count
    recompute_core_attn: Flag
    recompute_layernorm: Flag
    recompute_moe_act: Flag
    recompute_mla_up_proj: Flag
    recompute_mlp: Flag
    recompute_moe: Flag
    recompute_shared_experts: Flag
    zero_stage: Count
    flash_attention: Flag
    overlap_grad_reduce: Flag
    overlap_param_gather: Flag
    grad_bytes_per_param: Real
    fp8_param_gather: Flag
    activation_offload_layers: Real
    # hardware
    num_gpus: Real
    nvlink_domain_size: Real
    scale_up_bandwidth_bytes_per_s: Real
    inter_node_bandwidth_bytes_per_s: Real
    host_link_bandwidth_bytes_per_s: Real
    scale_up_latency_s: Real
    scale_out_latency_s: Real
    hbm_bytes: Real
    # framework
    fused_attention: Flag
    fused_elementwise: Flag
    tp_comm_overlap: Flag
    fused_cross_entropy: Flag
    loss_bytes_per_logit: Real
    fp8_weight_cache: Flag
    op_level_selective_recompute: Flag
    recompute_early_stop: Flag
    flash_attention_v1: Flag
    zero3_gather_per_tensor: Flag
    zero3_prefetch_params: Real
    zero3_regather_on_recompute: Flag
    pp_comm_overlap: Flag
    chunk_grad_sync: Flag
    zero3_backward_prefetch_post: Flag
    zero3_grad_prep_pass: Flag
    zero3_accumulate_unsharded: Flag
    eager_decoupled_adamw: Flag
    master_weight_bytes: Real
    zero3_master_weight_bytes: Real
    zero3_model_weight_shard: Flag
    adam_moment_bytes: Real
    exp_avg_sq_bytes: Real
    optimizer_updates_weights: Flag
    optimizer_grad_bytes: Real
    optimizer_grad_cast_bytes: Real
    adam_foreach: Flag
    adam_foreach_tp1_only: Flag
    grouped_gemm_streams: Real
    moe_host_forward_s: Real
    moe_host_expert_forward_s: Real
    moe_router_forward_kernels: Real
    moe_flex_router_forward_kernels: Real
    fp8_tp_all_gather: Flag
    separate_qkv_projections: Flag
    separate_gate_up_projections: Flag
    fp8_norm_fused_cast: Flag
    expert_up_bias_in_gemm: Flag
    flex_attention_for_sinks: Flag
    activation_clamp_eager: Flag
    yarn_rope_unfused: Flag
    loss_upcast_fp32: Flag
    fused_norms: Flag
    # training
    total_tokens: Real
    train_iters: Real
    trains_base: Flag
    lora_rank: Real
    lora_linear_qkv: Flag
    lora_linear_proj: Flag
    lora_linear_fc1: Flag
    lora_linear_fc2: Flag
    packed_sample_length: Real
    full_iteration_cuda_graph: Flag
    compiled_loss: Flag
    # layout (uneven pipeline stages, MoE parallel folding) and memory headroom
    expert_tensor_parallel: Real
    first_stage_layers: Real
    middle_stage_layers: Real
    last_stage_layers: Real
    memory_headroom_bytes: Real
    # per-iteration fixed costs (planner.perf.iteration)
    loss_scaling: Flag
    grad_buffer_memset: Flag
    loss_all_reduce_per_microbatch: Flag
    wgrad_accumulation_fusion: Flag
    zero3_list_collectives: Flag
    zero3_lock_step: Flag
    dp_bucket_min_params: Real
    dp_bucket_params_per_rank: Real
    device: DeviceArrays

    @property
    def scalar(self) -> bool:
        """True for the one-scenario form (Python numbers instead of arrays)."""
        return not isinstance(self.num_layers, _ARRAY)

    def full(self, value: float) -> Real:
        """``value`` for every scenario: the number itself, or an array of shape ``(n,)``."""
        return value if self.scalar else np.full(self.num_scenarios, value)

    @property
    def tokens_per_iteration(self) -> Real:
        """Tokens of one iteration, ``global_batch_size · seq_length``."""
        return self.global_batch_size * self.seq_length

    @property
    def tokens_per_microbatch(self) -> Real:
        """Tokens of one microbatch on one context-parallel rank,
        ``micro_batch_size · seq_length / context_parallel``."""
        return self.micro_batch_size * self.seq_length / self.context_parallel

    @property
    def dense_data_parallel_size(self) -> Real:
        """GPUs holding replicas of the same dense parameters, ``data_parallel ·
        context_parallel``: the group that reduces their gradients and that the distributed
        optimizer / ZeRO shards them over (Megatron-Core's data-parallel group with context
        parallelism)."""
        return self.data_parallel * self.context_parallel

    @property
    def expert_data_parallel_size(self) -> Real:
        """The same for the routed experts' parameters: Megatron-Core's expert data-parallel
        group under MoE parallel folding, ``tensor · context · data / (expert_tensor ·
        expert)`` (``parallel_state``: ``world / (expert_tensor · expert · pipeline)``), at
        least 1; ``data · context / expert`` when the expert tensor-parallel degree is the
        tensor-parallel one."""
        folded = self.tensor_parallel * self.dense_data_parallel_size
        return ops.maximum(folded / (self.expert_tensor_parallel * self.expert_parallel), 1.0)

    @property
    def expert_tokens_per_microbatch(self) -> Real:
        """Tokens one rank's experts see per microbatch from each expert-parallel peer's
        share: the ``tok = b·S/c`` tokens of a tensor-parallel group, spread over its
        ``tensor_parallel`` ranks and gathered over the ``expert_tensor_parallel`` ranks that
        share an expert (``tok · expert_tensor / tensor``; ``tok`` when they are equal, as
        Megatron-Core's all-to-all dispatcher does with an all-gather over the expert
        tensor-parallel group)."""
        return self.tokens_per_microbatch * self.expert_tensor_parallel / self.tensor_parallel

    def take(self, index: NDArray[np.int64]) -> ScenarioArrays:
        """The scenarios ``index`` (shape ``(k,)``) of a batch: every field of shape ``(k,)``.
        Raises ``ValueError`` for the one-scenario form."""
        if self.scalar:
            raise ValueError("take needs a batch of arrays, not the one-scenario form")
        k = int(index.shape[0])

        def pick(value: object) -> object:
            if not isinstance(value, _ARRAY):
                return value
            if value.strides == (0,):  # one value broadcast to every scenario: stays one
                return value[:k] if k <= value.shape[0] else constant_column(value, k)
            return value[index]

        device = from_fields(
            DeviceArrays,
            {f.name: pick(getattr(self.device, f.name)) for f in fields(DeviceArrays)},
        )
        columns: dict[str, object] = {
            f.name: pick(getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("num_scenarios", "device")
        }
        return from_fields(ScenarioArrays, {"num_scenarios": k, "device": device, **columns})

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> ScenarioArrays:
        """The one-scenario form of a validated ``Scenario``: every field a Python number."""
        values: dict[str, object] = {
            name: kind(value) for (name, kind), value in zip(_COLUMNS, _row(scenario), strict=True)
        }
        device = from_fields(
            DeviceArrays,
            {
                **{name: values.pop(name) for name in _DEVICE_COLUMNS},
                "gpu_index": 0,
                "gpu_keys": (scenario.hardware.gpu.key,),
            },
        )
        return from_fields(cls, {"num_scenarios": 1, "device": device, **values})

    @classmethod
    def from_scenarios(cls, scenarios: Sequence[Scenario]) -> ScenarioArrays:
        """Gather the fields of ``scenarios`` (validated ``Scenario`` values) into arrays."""
        n = len(scenarios)
        # one (n, columns) float64 conversion, transposed so that each column is contiguous
        table = np.array([_row(s) for s in scenarios], dtype=np.float64)
        table = table.reshape(n, len(_COLUMNS)).T.copy()
        values: dict[str, object] = {
            name: table[j] if kind is float else table[j].astype(_DTYPES[kind])
            for j, (name, kind) in enumerate(_COLUMNS)
        }
        keys: dict[str, int] = {}
        gpu_index = [keys.setdefault(s.hardware.gpu.key, len(keys)) for s in scenarios]
        device = from_fields(
            DeviceArrays,
            {
                **{name: values.pop(name) for name in _DEVICE_COLUMNS},
                "gpu_index": np.asarray(gpu_index, dtype=np.int64),
                "gpu_keys": tuple(keys),
            },
        )
        return from_fields(cls, {"num_scenarios": n, "device": device, **values})


# ---- where each field comes from ----------------------------------------------------------

_LOW_PRECISION = (Precision.FP8, Precision.MXFP8, Precision.NVFP4)


_SCENARIO_RULES = READERS
"""Fields of the scenario that need a rule, with their readers (``planner.perf.readers``)."""


def _peak_flop_per_s(gpu: GpuSpec, precision: Precision) -> float:
    """Dense peak of the GPU in the scenario's GEMM precision, FLOP/s."""
    return gpu.peak_flop_per_s(precision)


def _peak16_flop_per_s(gpu: GpuSpec, precision: Precision) -> float:
    """Dense 16-bit peak of the GPU (BF16, else FP16), FLOP/s: attention and the LM head."""
    for each, peak in gpu.dense_peak_flop_per_s:
        if each is Precision.BF16:
            return peak
    return gpu.peak_flop_per_s(Precision.FP16)


def _low_precision(gpu: GpuSpec, precision: Precision) -> bool:
    """True when the transformer GEMMs run in FP8, MXFP8 or NVFP4."""
    return precision in _LOW_PRECISION


def _architecture(gpu: GpuSpec, precision: Precision) -> int:
    """The GPU's architecture as an index into ``ARCHITECTURES``."""
    return ARCHITECTURES.index(gpu.architecture)


def _sfu_exp2_per_s(gpu: GpuSpec, precision: Precision) -> float:
    """The GPU's base-2 exponentials per second, infinite where the catalog has no figure."""
    rate = gpu.sfu_exp2_per_s
    return float("inf") if rate is None else rate


_DEVICE_RULES: Mapping[str, Callable[[GpuSpec, Precision], Any]] = MappingProxyType(
    {
        "peak_flop_per_s": _peak_flop_per_s,
        "peak16_flop_per_s": _peak16_flop_per_s,
        "low_precision": _low_precision,
        "architecture": _architecture,
        "sfu_exp2_per_s": _sfu_exp2_per_s,
    }
)
"""Fields of the GPU running in the scenario's precision that need a rule, with their readers."""

_KINDS: Mapping[str, Callable[[Any], Any]] = MappingProxyType(
    {"Real": float, "Flag": bool, "Count": int}
)
"""Python type of each annotation in the one-scenario form."""
_TYPES: Mapping[str, Callable[[Any], Any]] = MappingProxyType(
    {
        f.name: _KINDS[str(f.type)]
        for cls in (ScenarioArrays, DeviceArrays)
        for f in fields(cls)
        if str(f.type) in _KINDS and f.name != "gpu_index"
    }
)
"""Every field read from a scenario, with its Python type in the one-scenario form."""


def _attributes(cls: type) -> frozenset[str]:
    """Names of the dataclass fields and properties of ``cls``."""
    properties = {name for name, value in vars(cls).items() if isinstance(value, property)}
    return frozenset({f.name for f in fields(cls)} | properties)


def _same_names(*sources: type) -> tuple[tuple[str, ...], ...]:
    """For each of ``sources`` in turn, the fields of ``_TYPES`` it has an attribute of the
    same name for, in field order (fields with a rule, or of an earlier source, excluded)."""
    taken = {*_SCENARIO_RULES, *_DEVICE_RULES}
    out = []
    for cls in sources:
        own = tuple(name for name in _TYPES if name not in taken and name in _attributes(cls))
        taken.update(own)
        out.append(own)
    if missing := sorted(set(_TYPES) - taken):
        raise TypeError(f"ScenarioArrays fields without a source: {missing}")
    return tuple(out)


_MODEL_FIELDS, _PARALLELISM_FIELDS, _HARDWARE_FIELDS, _GPU_FIELDS, _FRAMEWORK_FIELDS = _same_names(
    ModelSpec, ParallelismSpec, HardwareSpec, GpuSpec, FrameworkProfile
)
"""Fields read as the attribute of the same name of ``scenario.model``, ``.parallelism``,
``.hardware``, ``.hardware.gpu`` and the profile of ``scenario.training.framework``."""
_read_model = attrgetter(*_MODEL_FIELDS)
_read_parallelism = attrgetter(*_PARALLELISM_FIELDS)
_read_hardware = attrgetter(*_HARDWARE_FIELDS)
_read_gpu = attrgetter(*_GPU_FIELDS)
_read_framework = attrgetter(*_FRAMEWORK_FIELDS)
_SCENARIO_READERS = tuple(_SCENARIO_RULES.values())
_DEVICE_READERS = tuple(_DEVICE_RULES.values())

_FRAMEWORK_VALUES: dict[int, tuple[FrameworkProfile, tuple[Any, ...]]] = {}
"""The ``_FRAMEWORK_FIELDS`` values per framework profile, with the profile they were read
from (a hit must be that very object)."""
_DEVICE_VALUES: dict[tuple[str, Precision], tuple[GpuSpec, tuple[Any, ...]]] = {}
"""The ``_GPU_FIELDS`` and ``_DEVICE_RULES`` values per GPU and precision, with the GPU they
were read from (a hit must be that very object: catalog GPUs are shared by every scenario)."""


def _framework_values(framework: Framework) -> tuple[Any, ...]:
    """Values of ``_FRAMEWORK_FIELDS`` for the profile of ``framework``."""
    profile = profile_of(framework)
    hit = _FRAMEWORK_VALUES.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1]
    values: tuple[Any, ...] = _read_framework(profile)
    _FRAMEWORK_VALUES[id(profile)] = (profile, values)
    return values


def _device_values(gpu: GpuSpec, precision: Precision) -> tuple[Any, ...]:
    """Values of ``_GPU_FIELDS`` then ``_DEVICE_RULES`` for ``gpu`` in ``precision``."""
    key = (gpu.key, precision)
    hit = _DEVICE_VALUES.get(key)
    if hit is not None and hit[0] is gpu:
        return hit[1]
    values = (*_read_gpu(gpu), *(read(gpu, precision) for read in _DEVICE_READERS))
    _DEVICE_VALUES[key] = (gpu, values)
    return values


def _row(s: Scenario) -> list[Any]:
    """The values of ``_COLUMNS`` for one scenario, numbers as read (the caller converts)."""
    hardware = s.hardware
    return [
        *_read_model(s.model),
        *_read_parallelism(s.parallelism),
        *_read_hardware(hardware),
        *_framework_values(s.training.framework),
        *[read(s) for read in _SCENARIO_READERS],
        *_device_values(hardware.gpu, s.parallelism.precision),
    ]


_COLUMNS: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
    (name, _TYPES[name])
    for name in (
        *_MODEL_FIELDS,
        *_PARALLELISM_FIELDS,
        *_HARDWARE_FIELDS,
        *_FRAMEWORK_FIELDS,
        *_SCENARIO_RULES,
        *_GPU_FIELDS,
        *_DEVICE_RULES,
    )
)
"""Every field ``_row`` reads, in its order, with the Python type of the one-scenario form."""
_DEVICE_COLUMNS = tuple(name for name, _ in _COLUMNS if name in DeviceArrays.__dataclass_fields__)
_DTYPES: dict[Callable[[Any], Any], Any] = {bool: np.bool_, int: np.int64}
