"""Scenario documents (mappings read from YAML/JSON) -> validated ``Scenario`` values.

Implements the public contract in ``docs/scenario-format.md``. A document is validated once,
at this edge, by the format's schema (``planner.scenario.schema.ScenarioSchema``: unknown
keys, value types, numbers given as text, enumerations in any case); the specs are then built
from the schema's typed values, with the documented defaults filled and the rules across
fields left to the specs. Every problem raises
``SpecError("<dotted.field>", "<what is wrong and how to fix it>")``: unknown keys with a
did-you-mean hint, wrong types with the value given and the type wanted.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from typing import TypeVar, get_args, get_origin

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from planner.catalog import get_gpu, model_preset, model_preset_keys
from planner.errors import SpecError
from planner.scenario.numbers import integer_or_value, number_or_value
from planner.scenario.schema import (
    SECTIONS,
    HardwareSection,
    ModelSection,
    ParallelismSection,
    ScenarioSchema,
    TrainingSection,
    choice_text,
)
from planner.specs._checks import require_int
from planner.specs.feasibility import default_sequence_parallel
from planner.specs.hardware import HardwareSpec, Precision
from planner.specs.model import (
    Activation,
    ModelSpec,
    MoETokenDispatcher,
    RopeType,
    SoftmaxType,
)
from planner.specs.parallelism import ParallelismSpec, Recompute
from planner.specs.pipeline_split import DEFAULT_FRAMEWORK, virtual_stages
from planner.specs.scenario import CudaGraphs, Framework, Scenario, TrainingMode, TrainingSpec

__all__ = ["SECTION_KEYS", "parse_scenario"]

SECTION_KEYS: Mapping[str, tuple[str, ...]] = {
    name: tuple(section.model_fields) for name, section in SECTIONS.items()
}
"""Allowed keys per section of a scenario document (the schema's fields)."""

_TOP_KEYS = tuple(ScenarioSchema.model_fields)

_MLA_DEFAULTS = (32, 128, 64, 128)
"""Megatron-LM's argument defaults for multi-latent attention: ``--kv-lora-rank`` 32,
``--qk-head-dim`` 128, ``--qk-pos-emb-head-dim`` 64, ``--v-head-dim`` 128 (no query latent)."""

_REQUIRED_HINTS = {
    "hardware.gpu": " (a catalog key such as h100-sxm)",
    "parallelism.global_batch_size": " (sequences per iteration)",
}
"""What a required field holds, for its "is required" message."""

_TYPE_MESSAGES = {
    "model.preset": "must be a preset name, got {value!r}",
    "hardware.gpu": "must be a catalog key such as 'h100-sxm', got {value!r}",
    "model.moe_layer_freq": "must be an integer N (every N-th layer is MoE) or a list of one 0 "
    "(dense) or 1 (MoE) per layer, got {value!r}",
    "training.framework_version": "must be text such as '25.11' (quote it: as a number, "
    "25.10 would lose its trailing zero), got {value!r}",
    "parallelism.pipeline_layout": "must be a layout string (such as 'Et*3|(tt|)*29,m|L'), a "
    "list of stage strings or a list of layers per virtual stage, got {value!r}",
}
"""Fields whose value may take several forms: what a value of the wrong type is told."""

_UNKNOWN = frozenset({"extra_forbidden", "invalid_key"})
"""Pydantic's error types for a key the schema does not have."""

_SCOPES = ("name", "model", "hardware", "parallelism", "training")
"""The order in which problems are reported: one section after the other."""

_T = TypeVar("_T")


def parse_scenario(doc: object) -> Scenario:
    """Validate one scenario document (a mapping as read from YAML/JSON) into a ``Scenario``.

    Fills the documented defaults (model preset values, ``num_query_groups`` = heads,
    ``ffn_hidden_size`` = 4·hidden, ``data_parallel`` = num_gpus/(tp·pp·cp),
    ``sequence_parallel`` = tp > 1 (false under NeMo Automodel), hardware values from the GPU
    catalog, ...). Raises
    ``SpecError("<dotted.field>", "<what is wrong and how to fix it>")`` for unknown keys
    (with a did-you-mean hint), wrong types, missing required fields and inconsistent layouts;
    a ``SpecError`` given as the document (a reader's error for it) is raised as it is.
    """
    if isinstance(doc, SpecError):
        raise doc
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a scenario must be a mapping, got {type(doc).__name__}")
    try:
        schema = ScenarioSchema.model_validate(doc)
    except ValidationError as exc:
        first = min(exc.errors(), key=_rank)
        _build_sections_before(str(first["loc"][0]) if first["loc"] else "", doc)
        raise _spec_error(first, doc) from None
    model = _model(schema.model)
    hardware = _hardware(schema.hardware)
    training = schema.training or _NO_TRAINING
    framework = _or(training.framework, Framework.MEGATRON)
    return Scenario(
        name=schema.name,
        model=model,
        hardware=hardware,
        parallelism=_parallelism(schema.parallelism, hardware.num_gpus, framework=framework),
        training=_training(training),
    )


# ---------------------------------------------------------------------------- the specs


def _or(value: _T | None, default: _T) -> _T:
    """``value``, or ``default`` when it is absent."""
    return default if value is None else value


@cache
def _preset_sections() -> Mapping[str, ModelSection]:
    """Every catalog model preset as a model section, by key (validated once)."""
    sections: dict[str, ModelSection] = {}
    for key in model_preset_keys():
        try:
            sections[key] = ModelSection.model_validate(model_preset(key))
        except ValidationError as exc:
            raise SpecError(f"catalog/models.yaml:{key}", str(exc)) from None
    return sections


def _with_preset(given: ModelSection) -> ModelSection:
    """``given`` over its preset's values (``given`` alone without ``preset``)."""
    if given.preset is None:
        return given
    preset = _preset_sections().get(given.preset.strip().lower())
    if preset is None:  # the catalog's own reading (raises with its did-you-mean hint)
        preset = ModelSection.model_validate(model_preset(given.preset))
    changes = {key: getattr(given, key) for key in given.model_fields_set}
    return preset.model_copy(update={k: v for k, v in changes.items() if v is not None})


def _model(given: ModelSection) -> ModelSpec:
    m = _with_preset(given)
    num_layers = _size("num_layers", m.num_layers)
    hidden = _size("hidden_size", m.hidden_size)
    heads = _size("num_attention_heads", m.num_attention_heads)
    vocab = _size("vocab_size", m.vocab_size)
    seq = _size("seq_length", m.seq_length)
    kv_channels = m.kv_channels
    if kv_channels is None:
        if hidden % heads:
            raise SpecError(
                "model.hidden_size",
                f"{hidden} is not divisible by num_attention_heads={heads}; "
                "change one of them or set model.kv_channels (per-head width)",
            )
        kv_channels = hidden // heads
    ffn = _or(m.ffn_hidden_size, 4 * hidden)  # Megatron-LM default
    num_experts = _or(m.num_experts, 0)
    moe = num_experts > 0
    mla = m.multi_latent_attention is True
    kv_lora, qk_head, qk_pos, v_head = _MLA_DEFAULTS if mla else (0, 0, 0, 0)
    return ModelSpec(
        num_layers=num_layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=_or(m.num_query_groups, heads),
        ffn_hidden_size=ffn,
        vocab_size=vocab,
        seq_length=seq,
        kv_channels=kv_channels,
        activation=_or(m.activation, Activation.GELU),
        untie_embeddings=_or(m.untie_embeddings, True),
        num_experts=num_experts,
        moe_router_topk=_or(m.moe_router_topk, 2 if moe else 0),  # Megatron --moe-router-topk
        moe_ffn_hidden_size=_or(m.moe_ffn_hidden_size, ffn if moe else 0),
        num_shared_experts=_or(m.num_shared_experts, 0),
        num_dense_layers=_or(m.num_dense_layers, 0),
        moe_layer_freq=_layer_freq(m.moe_layer_freq),
        moe_shared_expert_intermediate_size=_or(m.moe_shared_expert_intermediate_size, 0),
        moe_token_dispatcher_type=_or(m.moe_token_dispatcher_type, MoETokenDispatcher.ALLTOALL),
        moe_grouped_gemm=_or(m.moe_grouped_gemm, False),
        moe_expert_capacity_factor=m.moe_expert_capacity_factor,
        moe_pad_expert_input_to_capacity=_or(m.moe_pad_expert_input_to_capacity, False),
        moe_router_force_load_balancing=_or(m.moe_router_force_load_balancing, False),
        moe_router_round_robin=_or(m.moe_router_round_robin, False),
        moe_imbalance_factor=m.moe_imbalance_factor,
        moe_router_num_groups=_or(m.moe_router_num_groups, 0),
        moe_router_group_topk=_or(m.moe_router_group_topk, 0),
        overlap_moe_expert_parallel_comm=_or(m.overlap_moe_expert_parallel_comm, False),
        moe_expert_bias=_or(m.moe_expert_bias, False),
        activation_func_clamp_value=_or(m.activation_func_clamp_value, 0.0),
        multi_latent_attention=mla,
        q_lora_rank=_or(m.q_lora_rank, 0),
        kv_lora_rank=_or(m.kv_lora_rank, kv_lora),
        qk_head_dim=_or(m.qk_head_dim, qk_head),
        qk_pos_emb_head_dim=_or(m.qk_pos_emb_head_dim, qk_pos),
        v_head_dim=_or(m.v_head_dim, v_head),
        window_size=_or(m.window_size, 0),
        window_attn_skip_freq=_or(m.window_attn_skip_freq, 0),
        rope_type=_or(m.rope_type, RopeType.ROPE),
        softmax_type=_or(m.softmax_type, SoftmaxType.VANILLA),
        qk_layernorm=_or(m.qk_layernorm, False),
        mtp_num_layers=_or(m.mtp_num_layers, 0),
        preset=given.preset,
    )


def _size(key: str, value: int | None) -> int:
    """A size every model needs (from the preset or given), positive."""
    if value is None:
        raise SpecError(
            f"model.{key}", "is required (or set model.preset to start from a catalog model)"
        )
    require_int(f"model.{key}", value)
    return value


def _layer_freq(value: int | list[int] | None) -> int | tuple[int, ...]:
    """``model.moe_layer_freq`` as ``ModelSpec`` takes it: an int, or one 0/1 per layer as a
    tuple (default: every layer, 1)."""
    if value is None:
        return 1
    return value if isinstance(value, int) else tuple(value)


def _hardware(given: HardwareSection) -> HardwareSpec:
    gpu = get_gpu(given.gpu)
    return HardwareSpec(
        gpu=gpu,
        num_gpus=given.num_gpus,
        gpus_per_node=_or(given.gpus_per_node, gpu.gpus_per_node),
        nvlink_domain_size=_or(given.nvlink_domain_size, gpu.nvlink_domain_size),
        inter_node_bandwidth_gbit_per_s=_or(
            given.inter_node_bandwidth_gbit_per_s,
            gpu.scale_out_bandwidth_bytes_per_s * 8.0 / 1e9,
        ),
        memory_headroom_gib=given.memory_headroom_gib,
    )


def _pipeline_layout(value: str | list[int] | list[str] | None) -> str | tuple[int, ...] | None:
    """``parallelism.pipeline_layout`` as ``ParallelismSpec`` takes it: a Megatron layout
    string as given, a list of stage strings joined with ``|``, a list of layer counts (one
    per virtual stage) as a tuple."""
    if value is None or isinstance(value, str):
        return value
    stages = [x for x in value if isinstance(x, str)]
    if value and len(stages) == len(value):
        return "|".join(stages)
    return tuple(x for x in value if isinstance(x, int))


def _data_parallel(tp: int, pp: int, cp: int, num_gpus: int) -> int:
    """``num_gpus / (tensor · pipeline · context)``, naming the size that does not divide
    ``num_gpus``; 1 when a size is not positive (the spec names that field)."""
    sizes = {"tensor_parallel": tp, "pipeline_parallel": pp, "context_parallel": cp}
    if any(size < 1 for size in sizes.values()):
        return 1
    model_parallel = 1
    for key, size in sizes.items():
        model_parallel *= size
        if num_gpus % model_parallel:
            raise SpecError(
                f"parallelism.{key}",
                f"hardware.num_gpus={num_gpus} cannot be split into replicas of "
                f"tensor·pipeline·context = {model_parallel} GPUs, so data_parallel "
                f"cannot be derived; choose {key} so that the product divides {num_gpus}",
            )
    return num_gpus // model_parallel


def _parallelism(
    given: ParallelismSection,
    num_gpus: int,
    *,
    framework: str = DEFAULT_FRAMEWORK,
) -> ParallelismSpec:
    tp = _or(given.tensor_parallel, 1)
    pp = _or(given.pipeline_parallel, 1)
    cp = _or(given.context_parallel, 1)
    layout = _pipeline_layout(given.pipeline_layout)
    virtual = given.virtual_pipeline
    if virtual is None:  # from the layout, as Megatron-Core derives it
        stages = len(virtual_stages(layout)) if layout else 0
        virtual = stages // pp if pp > 0 and stages and stages % pp == 0 else 1
    modules = given.recompute_modules
    return ParallelismSpec(
        tensor_parallel=tp,
        pipeline_parallel=pp,
        context_parallel=cp,
        expert_parallel=_or(given.expert_parallel, 1),
        data_parallel=(
            _data_parallel(tp, pp, cp, num_gpus)
            if given.data_parallel is None
            else given.data_parallel
        ),
        virtual_pipeline=virtual,
        sequence_parallel=_or(given.sequence_parallel, default_sequence_parallel(tp, framework)),
        micro_batch_size=_or(given.micro_batch_size, 1),
        global_batch_size=given.global_batch_size,
        recompute=_or(given.recompute, Recompute.NONE),
        recompute_modules=(modules,) if isinstance(modules, StrEnum) else _tuple(modules),
        recompute_num_layers=given.recompute_num_layers,
        zero_stage=_or(given.zero_stage, 1),
        precision=_or(given.precision, Precision.BF16),
        fp8_recipe=given.fp8_recipe,
        flash_attention=_or(given.flash_attention, True),
        grad_reduce_in_fp32=given.grad_reduce_in_fp32,
        overlap_grad_reduce=given.overlap_grad_reduce,
        overlap_param_gather=given.overlap_param_gather,
        tp_comm_overlap=given.tp_comm_overlap,
        recompute_early_stop=given.recompute_early_stop,
        separate_qkv_projections=given.separate_qkv_projections,
        separate_gate_up_projections=given.separate_gate_up_projections,
        fp8_tp_all_gather=given.fp8_tp_all_gather,
        fp8_param_gather=_or(given.fp8_param_gather, False),
        megatron_fsdp=_or(given.megatron_fsdp, False),
        activation_offload_layers=_or(given.activation_offload_layers, 0),
        main_params_dtype=given.main_params_dtype,
        exp_avg_dtype=given.exp_avg_dtype,
        exp_avg_sq_dtype=given.exp_avg_sq_dtype,
        store_param_remainders=given.store_param_remainders,
        optimizer_implementation=given.optimizer_implementation,
        expert_tensor_parallel=given.expert_tensor_parallel,
        pipeline_layout=layout,
        decoder_first_pipeline_num_layers=given.decoder_first_pipeline_num_layers,
        decoder_last_pipeline_num_layers=given.decoder_last_pipeline_num_layers,
        account_for_embedding_in_pipeline_split=_or(
            given.account_for_embedding_in_pipeline_split, False
        ),
        account_for_loss_in_pipeline_split=_or(given.account_for_loss_in_pipeline_split, False),
        pipeline_batch_size=given.pipeline_batch_size,
    )


def _tuple(items: list[_T] | None) -> tuple[_T, ...] | None:
    return None if items is None else tuple(items)


_NO_TRAINING = TrainingSection()


def _training(given: TrainingSection) -> TrainingSpec:
    targets = given.lora_targets
    return TrainingSpec(
        framework=_or(given.framework, Framework.MEGATRON),
        total_tokens=given.total_tokens,
        train_iters=given.train_iters,
        mode=_or(given.mode, TrainingMode.PRETRAIN),
        lora_rank=given.lora_rank,
        lora_targets=(targets,) if isinstance(targets, StrEnum) else _tuple(targets),
        packed_sample_length=given.packed_sample_length,
        framework_version=None
        if given.framework_version is None
        else given.framework_version.strip(),
        cuda_graphs=_or(given.cuda_graphs, CudaGraphs.NONE),
        compiled_loss=_or(given.compiled_loss, False),
    )


# ---------------------------------------------------------------------------- the errors


def _rank(error: ErrorDetails) -> tuple[int, int]:
    """Which of the schema's errors is reported: unknown top-level keys first, then the name,
    then section by section its own problem (absent, not a mapping), its unknown keys, and its
    values (the schema's field order)."""
    loc = error["loc"]
    unknown = error["type"] in _UNKNOWN
    if len(loc) == 1 and unknown:
        return (0, 0)
    scope = _SCOPES.index(str(loc[0])) + 1 if loc and loc[0] in _SCOPES else len(_SCOPES) + 1
    return (scope, 0 if len(loc) < 2 else 1 if unknown else 2)


def _build_sections_before(scope: str, doc: Mapping[object, object]) -> None:
    """Build the sections that come before ``scope`` (the section of the schema's first
    error; they are valid): a problem of theirs across fields is reported first, section
    after section, as a reader of the document goes."""
    if scope not in ("hardware", "parallelism", "training"):
        return
    _model(ModelSection.model_validate(doc.get("model")))
    if scope != "hardware":
        hardware = _hardware(HardwareSection.model_validate(doc.get("hardware")))
        if scope == "training":
            section = ParallelismSection.model_validate(doc.get("parallelism"))
            _parallelism(section, hardware.num_gpus)


def _hint(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"allowed keys: {', '.join(allowed)}"


def _spec_error(error: ErrorDetails, doc: Mapping[object, object]) -> SpecError:
    """The ``SpecError`` for one of the schema's ``error``s on ``doc``: the dotted field and
    what to do, in the words of the format (``docs/scenario-format.md``)."""
    loc = error["loc"]
    head = str(loc[0]) if loc else ""
    if len(loc) == 1 and error["type"] in _UNKNOWN:
        return SpecError(head, f"unknown top-level field; {_hint(head, _TOP_KEYS)}")
    if head == "name":
        return SpecError("name", f"must be text, got {type(doc.get('name')).__name__}")
    section = doc.get(head)
    if len(loc) == 1 or not isinstance(section, Mapping):
        if section is None:
            return SpecError(head, f"the '{head}' section is required")
        return SpecError(head, f"must be a mapping of fields, got {type(section).__name__}")
    key = str(loc[1])
    path = f"{head}.{key}"
    if error["type"] in _UNKNOWN:
        return SpecError(path, f"unknown field; {_hint(key, SECTION_KEYS[head])}")
    value = section.get(key)
    if value is None:
        return SpecError(path, f"is required{_REQUIRED_HINTS.get(path, '')}")
    return _value_error(path, SECTIONS[head].model_fields[key].annotation, value, error["type"])


def _value_error(path: str, annotation: object, value: object, kind: str) -> SpecError:
    """The error for ``value``, of a type the field (its ``annotation``) does not take;
    ``kind`` is pydantic's error type for it."""
    number = integer_or_value(value)
    if kind.startswith("int") and isinstance(number, float) and number.is_integer():
        digits = len(str(abs(int(number))))  # beyond MAX_INTEGER: within, it would be an int
        return SpecError(path, f"a {digits}-digit integer is too large; use at most 2^53")
    message = _TYPE_MESSAGES.get(path)
    if message is not None:
        return SpecError(path, message.format(value=value))
    choices = _enum_in(annotation)
    if choices is not None:
        return _choice_error(path, value, choices, listed=_takes_list(annotation))
    if kind.startswith("int"):
        return SpecError(path, f"must be an integer, got {number!r} ({type(number).__name__})")
    if kind.startswith("float"):
        number = number_or_value(value)
        return SpecError(path, f"must be a number, got {number!r} ({type(number).__name__})")
    if kind.startswith("bool"):
        return SpecError(path, f"must be true or false, got {value!r} ({type(value).__name__})")
    return SpecError(path, f"must be text, got {value!r} ({type(value).__name__})")


def _enum_in(annotation: object) -> type[StrEnum] | None:
    """The enumeration a field's annotation holds (inside ``Annotated``, unions, lists)."""
    if isinstance(annotation, type) and issubclass(annotation, StrEnum):
        return annotation
    for arg in get_args(annotation):
        found = _enum_in(arg)
        if found is not None:
            return found
    return None


def _takes_list(annotation: object) -> bool:
    """Whether a field's annotation takes a list (of names, for enumerations)."""
    return get_origin(annotation) is list or any(_takes_list(a) for a in get_args(annotation))


def _choice_error(path: str, value: object, enum: type[StrEnum], *, listed: bool) -> SpecError:
    """The error for ``value`` in a field of ``enum``'s values (``listed``: or a list of
    them): the first name that is none of them, with a did-you-mean hint."""
    allowed = tuple(member.value for member in enum)
    if listed and isinstance(value, list | tuple):
        value = next((v for v in value if choice_text(v) not in allowed), value)
    elif listed and not isinstance(value, str):
        return SpecError(path, f"must be a list of {', '.join(allowed)}, got {value!r}")
    if isinstance(value, str):
        wanted = str(choice_text(value))
        close = difflib.get_close_matches(wanted, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return SpecError(path, f"unknown value {value!r}; {hint}use one of {', '.join(allowed)}")
    return SpecError(path, f"must be one of {', '.join(allowed)}, got {value!r}")
