"""Scenario documents (dicts read from YAML/JSON) -> validated ``Scenario`` values.

Implements the public contract in ``docs/scenario-format.md``: unknown keys are errors with a
did-you-mean hint, defaults are filled as documented, numeric fields take a number or text
holding one (``planner.scenario.numbers``), and every problem raises
``SpecError("<dotted.field>", "<what is wrong and how to fix it>")``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar, cast

from planner.catalog import get_gpu, model_preset
from planner.errors import SpecError
from planner.scenario.numbers import MAX_INTEGER, number_or_value
from planner.specs._checks import require_int
from planner.specs.hardware import HardwareSpec, Precision
from planner.specs.model import (
    MLA_FIELDS,
    MOE_FLAG_FIELDS,
    Activation,
    ModelSpec,
    MoETokenDispatcher,
)
from planner.specs.parallelism import Fp8Recipe, ParallelismSpec, Recompute, RecomputeModule
from planner.specs.pipeline_split import virtual_stages
from planner.specs.scenario import (
    Framework,
    LoraTarget,
    Scenario,
    TrainingMode,
    TrainingSpec,
)

__all__ = ["SECTION_KEYS", "parse_scenario"]

_MODEL_KEYS = (
    "preset",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "ffn_hidden_size",
    "vocab_size",
    "seq_length",
    "activation",
    "untie_embeddings",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "num_shared_experts",
    "num_dense_layers",
    "moe_layer_freq",
    "moe_shared_expert_intermediate_size",
    "moe_router_num_groups",
    "moe_router_group_topk",
    "moe_token_dispatcher_type",
    "moe_expert_capacity_factor",
    "moe_imbalance_factor",
    *MOE_FLAG_FIELDS,
    "multi_latent_attention",
    *MLA_FIELDS,
    "window_size",
    "window_attn_skip_freq",
    "mtp_num_layers",
)
_MODEL_OPTION_KEYS = (
    *MOE_FLAG_FIELDS,
    "multi_latent_attention",
    "moe_expert_capacity_factor",
    "moe_imbalance_factor",
)
"""Model flags and ratios passed on as given (the spec checks their types)."""
_MODEL_NON_INT_KEYS = (
    "preset",
    "activation",
    "untie_embeddings",
    "moe_layer_freq",
    "moe_token_dispatcher_type",
    *_MODEL_OPTION_KEYS,
)
"""Model fields that are not plain integers (flags, enums, ratios, the layer pattern)."""
_MLA_DEFAULTS = {
    "kv_lora_rank": 32,
    "qk_head_dim": 128,
    "qk_pos_emb_head_dim": 64,
    "v_head_dim": 128,
}
"""Megatron-LM's argument defaults for multi-latent attention (``--kv-lora-rank`` 32,
``--qk-head-dim`` 128, ``--qk-pos-emb-head-dim`` 64, ``--v-head-dim`` 128; no query latent)."""
_HARDWARE_KEYS = (
    "gpu",
    "num_gpus",
    "gpus_per_node",
    "nvlink_domain_size",
    "inter_node_bandwidth_gbit_per_s",
    "memory_headroom_gib",
)
_PARALLELISM_KEYS = (
    "tensor_parallel",
    "pipeline_parallel",
    "context_parallel",
    "expert_parallel",
    "data_parallel",
    "virtual_pipeline",
    "sequence_parallel",
    "micro_batch_size",
    "global_batch_size",
    "recompute",
    "recompute_modules",
    "zero_stage",
    "precision",
    "fp8_recipe",
    "flash_attention",
    "grad_reduce_in_fp32",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "expert_tensor_parallel",
    "pipeline_layout",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
)
_TRAINING_KEYS = (
    "framework",
    "total_tokens",
    "train_iters",
    "mode",
    "lora_rank",
    "lora_targets",
    "packed_sample_length",
)

SECTION_KEYS: Mapping[str, tuple[str, ...]] = {
    "model": _MODEL_KEYS,
    "hardware": _HARDWARE_KEYS,
    "parallelism": _PARALLELISM_KEYS,
    "training": _TRAINING_KEYS,
}
"""Allowed keys per section of a scenario document (the public contract plus extensions)."""

_TOP_KEYS = ("name", "model", "hardware", "parallelism", "training")

_NUMERIC_TYPES = frozenset({"int", "float", "int | None", "float | None"})
_NUMERIC_KEYS: Mapping[str, frozenset[str]] = {
    section: frozenset(f.name for f in dataclasses.fields(spec) if f.type in _NUMERIC_TYPES)
    for section, spec in (
        ("model", ModelSpec),
        ("hardware", HardwareSpec),
        ("parallelism", ParallelismSpec),
        ("training", TrainingSpec),
    )
}
"""The numeric fields of each section (those its spec types ``int`` or ``float``): they
accept a number or text holding one (``planner.scenario.numbers``)."""

E = TypeVar("E", bound=StrEnum)


def _hint(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"allowed keys: {', '.join(allowed)}"


def _section(doc: Mapping[str, object], name: str, *, required: bool) -> dict[str, object]:
    raw = doc.get(name)
    if raw is None:
        if required:
            raise SpecError(name, f"the '{name}' section is required")
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(name, f"must be a mapping of fields, got {type(raw).__name__}")
    allowed = SECTION_KEYS[name]
    out: dict[str, object] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or key not in allowed:
            raise SpecError(f"{name}.{key}", f"unknown field; {_hint(str(key), allowed)}")
        if value is not None:
            out[key] = number_or_value(value) if key in _NUMERIC_KEYS[name] else value
    return out


def _int(path: str, value: object) -> object:
    """Integral floats (``1e3`` from YAML/JSON) become ints; an integer beyond
    ``±MAX_INTEGER`` (``planner.scenario.numbers``) is refused as too large (a count that big
    overflows the model's float arithmetic); anything else is left for the spec to reject with a
    typed message."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        digits = len(str(abs(value)))
        raise SpecError(path, f"a {digits}-digit integer is too large; use at most 2^53")
    return value


_ENUM_VALUES: dict[type[StrEnum], dict[str, StrEnum]] = {}
"""Per enum class, its members by value (filled on first use: parsing runs per scenario)."""


def _enum(path: str, value: object, enum: type[E]) -> E:
    members = _ENUM_VALUES.get(enum)
    if members is None:
        members = _ENUM_VALUES[enum] = {m.value: m for m in enum}
    if isinstance(value, str):
        hit = members.get(value)
        if hit is not None:
            return cast(E, hit)
        lowered = value.strip().lower()
        normalized = lowered.replace("-", "_")
        hit = members.get(normalized) or members.get(lowered)
        if hit is not None:
            return cast(E, hit)
    allowed = tuple(members)
    if isinstance(value, str):
        close = difflib.get_close_matches(normalized, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise SpecError(path, f"unknown value {value!r}; {hint}use one of {', '.join(allowed)}")
    raise SpecError(path, f"must be one of {', '.join(allowed)}, got {value!r}")


def _require(section: Mapping[str, object], path: str, key: str, hint: str = "") -> object:
    if key not in section:
        raise SpecError(f"{path}.{key}", f"is required{hint}")
    return section[key]


def _parse_model(raw: dict[str, object]) -> ModelSpec:
    fields: dict[str, object] = {}
    preset = raw.get("preset")
    if preset is not None:
        if not isinstance(preset, str):
            raise SpecError("model.preset", f"must be a preset name, got {preset!r}")
        fields.update(model_preset(preset))
    fields.update({k: v for k, v in raw.items() if k != "preset"})
    hint = " (or set model.preset to start from a catalog model)"
    for key in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length"):
        _require(fields, "model", key, hint)
    ints = {
        k: _int(f"model.{k}", fields[k])
        for k in _MODEL_KEYS
        if k in fields and k not in _MODEL_NON_INT_KEYS
    }
    for key in ("num_layers", "hidden_size", "num_attention_heads", "vocab_size", "seq_length"):
        require_int(f"model.{key}", ints[key])
    hidden, heads = cast(int, ints["hidden_size"]), cast(int, ints["num_attention_heads"])
    if "kv_channels" not in ints:
        if hidden % heads:
            raise SpecError(
                "model.hidden_size",
                f"{hidden} is not divisible by num_attention_heads={heads}; "
                "change one of them or set model.kv_channels (per-head width)",
            )
        ints["kv_channels"] = hidden // heads
    ints.setdefault("num_query_groups", heads)
    if "ffn_hidden_size" not in ints:
        ints["ffn_hidden_size"] = 4 * hidden  # Megatron-LM default
    num_experts = ints.get("num_experts", 0)
    if isinstance(num_experts, int) and num_experts > 0:
        ints.setdefault("moe_ffn_hidden_size", ints["ffn_hidden_size"])
        ints.setdefault("moe_router_topk", 2)  # Megatron-LM default --moe-router-topk
    if fields.get("multi_latent_attention") is True:
        for key, default in _MLA_DEFAULTS.items():
            ints.setdefault(key, default)
    activation = _enum("model.activation", fields.get("activation", "gelu"), Activation)
    dispatcher = _enum(
        "model.moe_token_dispatcher_type",
        fields.get("moe_token_dispatcher_type", "alltoall"),
        MoETokenDispatcher,
    )
    flags: dict[str, object] = {key: fields[key] for key in _MODEL_OPTION_KEYS if key in fields}
    if "moe_layer_freq" in fields:
        flags["moe_layer_freq"] = _layer_freq(fields["moe_layer_freq"])
    return ModelSpec(
        activation=activation,
        untie_embeddings=fields.get("untie_embeddings", True),  # type: ignore[arg-type]
        moe_token_dispatcher_type=dispatcher,
        preset=preset if isinstance(preset, str) else None,
        **flags,  # type: ignore[arg-type]
        **ints,  # type: ignore[arg-type]
    )


def _layer_freq(value: object) -> object:
    """``model.moe_layer_freq``: an int (every N-th layer), or a list of 0/1 per layer (a
    tuple for the spec); integral floats become ints. Any other type is refused here, dense
    model or not (the spec checks the pattern of MoE models only)."""
    items = value if isinstance(value, list | tuple) else (value,)
    ints = tuple(_int("model.moe_layer_freq", v) for v in items)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in ints):
        raise SpecError(
            "model.moe_layer_freq",
            "must be an integer N (every N-th layer is MoE) or a list of one 0 (dense) or "
            f"1 (MoE) per layer, got {value!r}",
        )
    return ints if isinstance(value, list | tuple) else ints[0]


def _parse_hardware(raw: dict[str, object]) -> HardwareSpec:
    key = _require(raw, "hardware", "gpu", " (a catalog key such as h100-sxm)")
    if not isinstance(key, str):
        raise SpecError("hardware.gpu", f"must be a catalog key such as 'h100-sxm', got {key!r}")
    gpu = get_gpu(key)
    num_gpus = _int("hardware.num_gpus", _require(raw, "hardware", "num_gpus"))
    return HardwareSpec(
        gpu=gpu,
        num_gpus=num_gpus,  # type: ignore[arg-type]
        gpus_per_node=_int("hardware.gpus_per_node", raw.get("gpus_per_node", gpu.gpus_per_node)),  # type: ignore[arg-type]
        nvlink_domain_size=_int(  # type: ignore[arg-type]
            "hardware.nvlink_domain_size", raw.get("nvlink_domain_size", gpu.nvlink_domain_size)
        ),
        inter_node_bandwidth_gbit_per_s=raw.get(  # type: ignore[arg-type]
            "inter_node_bandwidth_gbit_per_s", gpu.scale_out_bandwidth_bytes_per_s * 8.0 / 1e9
        ),
        memory_headroom_gib=raw.get("memory_headroom_gib"),  # type: ignore[arg-type]
    )


_NON_INT_PARALLELISM_KEYS = (
    "sequence_parallel",
    "recompute",
    "recompute_modules",
    "precision",
    "fp8_recipe",
    "flash_attention",
    "grad_reduce_in_fp32",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "pipeline_layout",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
)


def _pipeline_layout(raw: object, ints: dict[str, object]) -> object:
    """``parallelism.pipeline_layout`` as ``ParallelismSpec`` takes it: a Megatron layout
    string as given, a list of layer counts as a tuple, a list of stage strings joined with
    ``|``; when ``virtual_pipeline`` is absent it is derived from the layout (as Megatron-Core
    derives it), the layout's virtual stages over ``pipeline_parallel``."""
    layout: object = raw
    if isinstance(raw, list | tuple):
        if raw and all(isinstance(x, str) for x in raw):
            layout = "|".join(str(x) for x in raw)
        else:
            layout = tuple(_int(f"parallelism.pipeline_layout[{i}]", x) for i, x in enumerate(raw))
    if "virtual_pipeline" not in ints and isinstance(layout, str | tuple):
        p = ints.get("pipeline_parallel", 1)
        stages = len(virtual_stages(layout)) if layout else 0
        if isinstance(p, int) and p > 0 and stages and stages % p == 0:
            ints["virtual_pipeline"] = stages // p
    return layout


def _parse_parallelism(raw: dict[str, object], num_gpus: int) -> ParallelismSpec:
    ints: dict[str, object] = {
        k: _int(f"parallelism.{k}", raw[k])
        for k in _PARALLELISM_KEYS
        if k in raw and k not in _NON_INT_PARALLELISM_KEYS
    }
    _require(ints, "parallelism", "global_batch_size", " (sequences per iteration)")
    tp = ints.get("tensor_parallel", 1)
    if "data_parallel" not in ints:
        keys = ("tensor_parallel", "pipeline_parallel", "context_parallel")
        sizes = [ints.get(k, 1) for k in keys]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            model_parallel = 1
            for key, size in zip(keys, sizes, strict=True):
                model_parallel *= cast(int, size)
                if num_gpus % model_parallel:
                    raise SpecError(
                        f"parallelism.{key}",
                        f"hardware.num_gpus={num_gpus} cannot be split into replicas of "
                        f"tensor·pipeline·context = {model_parallel} GPUs, so data_parallel "
                        f"cannot be derived; choose {key} so that the product divides {num_gpus}",
                    )
            ints["data_parallel"] = num_gpus // model_parallel
    default_sp = isinstance(tp, int) and tp > 1
    extra: dict[str, object] = {}
    if "pipeline_layout" in raw:
        extra["pipeline_layout"] = _pipeline_layout(raw["pipeline_layout"], ints)
    for key in ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"):
        if key in raw:
            extra[key] = raw[key]
    return ParallelismSpec(
        sequence_parallel=raw.get("sequence_parallel", default_sp),  # type: ignore[arg-type]
        recompute=_enum("parallelism.recompute", raw.get("recompute", "none"), Recompute),
        recompute_modules=_recompute_modules(raw.get("recompute_modules")),
        precision=_enum("parallelism.precision", raw.get("precision", "bf16"), Precision),
        fp8_recipe=(
            None
            if raw.get("fp8_recipe") is None
            else _enum("parallelism.fp8_recipe", raw["fp8_recipe"], Fp8Recipe)
        ),
        flash_attention=raw.get("flash_attention", True),  # type: ignore[arg-type]
        grad_reduce_in_fp32=raw.get("grad_reduce_in_fp32"),  # type: ignore[arg-type]
        overlap_grad_reduce=raw.get("overlap_grad_reduce"),  # type: ignore[arg-type]
        overlap_param_gather=raw.get("overlap_param_gather"),  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
        **ints,  # type: ignore[arg-type]
    )


def _recompute_modules(value: object) -> tuple[RecomputeModule, ...] | None:
    """``parallelism.recompute_modules``: a list of module names (or one name)."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise SpecError(
            "parallelism.recompute_modules",
            f"must be a list of {', '.join(RecomputeModule)}, got {value!r}",
        )
    return tuple(_enum("parallelism.recompute_modules", v, RecomputeModule) for v in items)


def _parse_training(raw: dict[str, object]) -> TrainingSpec:
    framework = _enum("training.framework", raw.get("framework", "megatron"), Framework)
    targets = raw.get("lora_targets")
    if targets is not None:
        items = [targets] if isinstance(targets, str) else targets
        if not isinstance(items, list | tuple):
            raise SpecError("training.lora_targets", f"must be a list of {', '.join(LoraTarget)}")
        targets = tuple(_enum("training.lora_targets", t, LoraTarget) for t in items)
    optional = {
        key: _int(f"training.{key}", raw[key])
        for key in ("lora_rank", "packed_sample_length", "train_iters")
        if raw.get(key) is not None
    }
    return TrainingSpec(
        framework=framework,
        total_tokens=raw.get("total_tokens"),  # type: ignore[arg-type]
        mode=_enum("training.mode", raw.get("mode", "pretrain"), TrainingMode),
        lora_targets=targets,
        **optional,  # type: ignore[arg-type]
    )


def parse_scenario(doc: object) -> Scenario:
    """Validate one scenario document (a mapping as read from YAML/JSON) into a ``Scenario``.

    Fills the documented defaults (model preset values, ``num_query_groups`` = heads,
    ``ffn_hidden_size`` = 4·hidden, ``data_parallel`` = num_gpus/(tp·pp·cp),
    ``sequence_parallel`` = tp > 1, hardware values from the GPU catalog, ...). Raises
    ``SpecError("<dotted.field>", "<what is wrong and how to fix it>")`` for unknown keys
    (with a did-you-mean hint), wrong types, missing required fields and inconsistent layouts.
    """
    if isinstance(doc, SpecError):
        raise doc
    if not isinstance(doc, Mapping):
        raise SpecError("", f"a scenario must be a mapping, got {type(doc).__name__}")
    for key in doc:
        if not isinstance(key, str) or key not in _TOP_KEYS:
            raise SpecError(str(key), f"unknown top-level field; {_hint(str(key), _TOP_KEYS)}")
    name = doc.get("name")
    if name is not None and not isinstance(name, str | int | float):
        raise SpecError("name", f"must be text, got {type(name).__name__}")
    model = _parse_model(_section(doc, "model", required=True))
    hardware = _parse_hardware(_section(doc, "hardware", required=True))
    parallelism = _parse_parallelism(_section(doc, "parallelism", required=True), hardware.num_gpus)
    training = _parse_training(_section(doc, "training", required=False))
    return Scenario(
        name=None if name is None else str(name),
        model=model,
        hardware=hardware,
        parallelism=parallelism,
        training=training,
    )
