"""What the NeMo 1.0, NeMo 2.0 and Megatron-Bridge readers share: the Megatron vocabulary
padding, precision names and notes (the fp16-base note the Megatron-LM readers take too),
activation names, the MoE routing knobs and Megatron-FSDP's ZeRO stage."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Protocol

from planner.launch.types import Facts
from planner.scenario.megatron_table import (
    MEGATRON_FSDP_STAGES,
    ddp_sharding_strategy_default,
    fused_adam_keeps_remainders,
    megatron_fsdp_main_dtype,
    megatron_fsdp_optimizer_note,
)

__all__ = [
    "MOE_ROUTING_KNOBS",
    "OPTIMIZER_DTYPE_NAMES",
    "fp16_base_note",
    "megatron_fsdp_facts",
    "moe_routing_keys",
    "optimizer_config_facts",
    "padded_vocab",
    "precision_of_trainer",
    "set_activation",
    "sixteen_bit_layers_note",
    "unexpanded",
]

MOE_ROUTING_KNOBS = (
    "moe_expert_capacity_factor",
    "moe_pad_expert_input_to_capacity",
    "moe_token_dispatcher_type",
    "moe_router_force_load_balancing",
    "moe_grouped_gemm",
)
"""Megatron-Core ``TransformerConfig`` fields that decide how MoE tokens are routed and computed
(NVIDIA/Megatron-LM ``megatron/core/transformer/transformer_config.py`` @ ``022bcb5afe88``),
each the scenario's ``model.<same name>``. The three stacks hand these fields to Megatron-Core
under their own name: Megatron-Bridge's model provider and NeMo 2.0's ``GPTConfig`` are
``TransformerConfig`` subclasses (``model.<name>``, ``model.config.<name>``), and NeMo 1.0's
``build_transformer_config`` copies every ``TransformerConfig`` field its ``model`` config holds
(NVIDIA/NeMo ``nemo/collections/nlp/models/language_modeling/megatron_base_model.py`` @
``9d86acd``; the default config lacks them: ``+model.<name>=...``)."""


def moe_routing_keys(prefix: str) -> tuple[tuple[str, str], ...]:
    """``(scenario field, config key)`` of each ``MOE_ROUTING_KNOBS`` entry, the config key
    under ``prefix`` (``model``, ``model.config``)."""
    return tuple((f"model.{name}", f"{prefix}.{name}") for name in MOE_ROUTING_KNOBS)


_PRECISIONS = {
    "16": "fp16",
    "16-mixed": "fp16",
    "16-true": "fp16",
    "fp16": "fp16",
    "fp16-mixed": "fp16",
    "bf16": "bf16",
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
}
_ACTIVATIONS = {
    "swiglu": "swiglu",
    "fast-swiglu": "swiglu",
    "geglu": "swiglu",
    "fast-geglu": "swiglu",
    "reglu": "swiglu",
    "fast-reglu": "swiglu",
    "gelu": "gelu",
    "relu": "gelu",
    "squared-relu": "squared_relu",
    "squared_relu": "squared_relu",
}


def unexpanded(arg: str) -> bool:
    """True when the value of a ``key=value`` argument is empty or holds a shell variable the
    launch left unexpanded (``$TP``; ``${...}`` is an interpolation, not a variable)."""
    _, eq, value = arg.partition("=")
    if not eq:
        return False
    return not value.strip() or re.search(r"\$(?!\{)", value) is not None


def padded_vocab(facts: Facts, vocab: int, multiple: int, tp: int, rule: str) -> int:
    """Set ``launch.padded_vocab_size``: ``vocab`` rounded up to a multiple of ``multiple`` x
    ``tp`` (Megatron's embedding padding; ``rule`` names where the framework does it), and
    return it."""
    step = max(1, multiple) * max(1, tp)
    padded = math.ceil(vocab / step) * step
    facts.set(
        "launch.padded_vocab_size",
        padded,
        f"derived: {vocab} padded to a multiple of {multiple} x TP {tp} ({rule})",
    )
    return padded


def precision_of_trainer(value: object) -> str | None:
    """The planner's precision (``bf16`` / ``fp16``) of a Lightning / NeMo precision setting
    (``16``, ``"16-mixed"``, ``"bf16-mixed"``, ...); None for 32-bit or unknown values."""
    if isinstance(value, bool) or value is None:
        return None
    text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return _PRECISIONS.get(text.strip().lower())


def fp16_base_note(precision: str, source: str) -> str:
    """The note for a Megatron-Core mixed-precision config with ``fp16`` set and ``fp8`` (or
    ``fp4``) GEMMs (``source``): Megatron-Bridge's and NeMo 2.0's ``fp16_with_*`` recipes
    (``fp16_mixed()`` with ``fp8`` / ``fp8_recipe`` set: NVIDIA-NeMo/Megatron-Bridge
    ``src/megatron/bridge/training/mixed_precision.py`` @ ``7af9601c``, NVIDIA/NeMo
    ``nemo/collections/llm/recipes/precision/mixed_precision.py`` @ ``8cfedd72``). The scenario's
    ``precision`` holds one value and its low precisions sit on bf16, so the run is read as
    ``precision`` (``fp8``, ``mxfp8``, ``nvfp4``: the GEMMs, most of the step). What the model
    does with fp16 that the reading leaves out is its dynamic loss scaling: Megatron-Core builds
    a ``DynamicGradScaler`` for ``fp16`` without ``loss_scale`` (NVIDIA/Megatron-LM
    ``megatron/core/optimizer/__init__.py`` @ ``core_v0.15.0``), whose step all-reduces the
    found-inf flag,
    counted only under ``precision: fp16`` (``planner.perf.iteration``). fp16 and bf16 tensors
    take the same 2 bytes; the 16-bit gradient reduction of ``fp16_mixed()``
    (``grad_reduce_in_fp32`` false) is read as its own field."""
    return (
        f"mixed precision: fp16 parameters and activations with {precision} GEMMs ({source}); "
        f"the scenario's {precision} sits on bf16, so the run is read as {precision} without "
        "fp16's dynamic loss scaling (its found-inf all-reduce in the optimizer step is not "
        "counted); fp16 and bf16 tensors take the same 2 bytes"
    )


def sixteen_bit_layers_note(start: object, end: object, precision: str, key: str) -> str:
    """The note for a low-precision run whose first ``start`` and last ``end`` transformer
    layers stay in 16 bits (Megatron-Core ``first_last_layers_bf16`` with
    ``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16``, ``key`` the config key it
    is read from): no scenario field holds them."""
    return (
        f"{key}: the first {start} and last {end} transformer layers run in 16 bits "
        f"(first_last_layers_bf16); the planner times every layer in {precision}"
    )


def set_activation(facts: Facts, value: object, source: str) -> None:
    """Set ``model.activation`` from a NeMo / Megatron activation name (gated variants share
    SwiGLU's three-matrix MLP); unknown names leave it unset with a note."""
    if not isinstance(value, str):
        return
    name = _ACTIVATIONS.get(value.strip().lower())
    if name is None:
        facts.note(f"activation {value!r}: not one the planner models; left at its default")
        return
    facts.set("model.activation", name, source)


def megatron_fsdp_facts(facts: Facts, on: str, strategy: object, strategy_source: str) -> None:
    """Megatron-FSDP, turned on where ``on`` says: ``parallelism.megatron_fsdp`` and
    ``parallelism.zero_stage``, the stage of the DDP config's ``data_parallel_sharding_strategy``
    ``strategy`` (``MEGATRON_FSDP_STAGES``) from ``strategy_source``. None (unset) or a name
    Megatron-FSDP does not know (it raises ``ValueError``, noted) takes Megatron-Core's
    ``DistributedDataParallelConfig`` default, assumed and noted."""
    facts.set("parallelism.megatron_fsdp", True, on)
    if isinstance(strategy, str) and strategy in MEGATRON_FSDP_STAGES:
        facts.set("parallelism.zero_stage", MEGATRON_FSDP_STAGES[strategy], strategy_source)
        return
    value, source = ddp_sharding_strategy_default()
    if strategy is not None:
        facts.note(
            f"data_parallel_sharding_strategy {strategy!r} ({strategy_source}) is not one of "
            f"Megatron-FSDP's ({', '.join(MEGATRON_FSDP_STAGES)}; it raises ValueError)"
        )
    stage = MEGATRON_FSDP_STAGES[value]
    facts.note(
        f"Megatron-FSDP without a data_parallel_sharding_strategy: Megatron-Core's default "
        f"{value} assumed (ZeRO {stage})"
    )
    facts.default("parallelism.zero_stage", stage, f"{on}; {value}: default of {source}")


OPTIMIZER_DTYPE_NAMES: dict[str, str] = {
    **dict.fromkeys(("fp32", "float32", "torch.float32", "32", "32-true"), "fp32"),
    **dict.fromkeys(("fp16", "float16", "torch.float16", "16", "16-mixed"), "fp16"),
    **dict.fromkeys(("bf16", "bfloat16", "torch.bfloat16", "bf16-mixed"), "bf16"),
}
"""A dtype as a Megatron-Bridge or NeMo 2.0 override writes it -> the scenario's name.
Megatron-Bridge turns a string given for a ``torch.dtype`` field into one with
``str_to_dtype`` (``training/utils/omegaconf_utils.py`` ``_apply_overrides``;
``utils/activation_map.py`` ``DTYPE_MAP``: these names, NVIDIA-NeMo/Megatron-Bridge @
067f987df03b8355b03192d88d70f1709fedf51a). Not here: FP8 moments, which Transformer Engine's
``FusedAdam`` takes only as ``torch.uint8`` (``fused_adam.py`` @ v2.7), a name
``DTYPE_MAP`` lacks (its ``fp8`` is ``torch.float8_e4m3fn``, which ``FusedAdam`` refuses)."""


class _Found(Protocol):
    @property
    def value(self) -> object: ...
    @property
    def source(self) -> str: ...


_OPTIMIZER_DTYPES = ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")


def optimizer_config_facts(
    lookup: Callable[[str], _Found | None],
    prefix: str,
    facts: Facts,
    *,
    bf16: bool,
    fp8_recipe: object,
    default_source: str,
    megatron_fsdp: str | None = None,
    release: str | None = None,
) -> None:
    """``parallelism.main_params_dtype``, ``exp_avg_dtype``, ``exp_avg_sq_dtype`` and
    ``store_param_remainders`` from a Megatron-Core ``OptimizerConfig`` (Megatron-Bridge's
    ``optimizer.*``, NeMo 2.0's ``optim.config.*``: ``lookup(prefix + field)``), as Megatron-Core
    builds the optimizer from it (NVIDIA/Megatron-LM ``megatron/core/optimizer/__init__.py``,
    ``optimizer_config.py`` @ core_v0.14.0 and d98e8a64dd):

    * ``use_precision_aware_optimizer`` false (the default): nothing (the framework's fp32
      master and moments; Megatron-Core asserts the dtypes fp32 then, noted otherwise);
    * true: each dtype as given (``OptimizerConfig`` default fp32; an unknown name is noted
      and nothing is stated); under ``optimizer_cpu_offload`` nothing (host memory);
    * ``store_param_remainders`` (``OptimizerConfig`` default true): Megatron-Core hands an fp32
      master to Transformer Engine's ``FusedAdam`` only while ``fp8_recipe`` is None or
      ``delayed`` (``use_precision_aware_optimizer_no_fp8_or_ds_fp8``), which keeps it as
      16-bit remainders of bf16 weights; otherwise the distributed optimizer keeps the whole
      fp32 master (false). ``bf16``: the weights are bf16; ``fp8_recipe``: the
      ``OptimizerConfig``'s when it computes that flag (Megatron-Bridge copies the
      ``MixedPrecisionConfig``'s over it before ``finalize``; NeMo 2.0 builds it before its
      precision plugin runs). ``default_source`` cites the config class for the defaults.

    Under Megatron-FSDP ``megatron_fsdp`` is ``megatron_table.megatron_fsdp_master``'s answer
    for the NeMo Framework container ``release`` (None: not under it): ``"optimizer"`` reads
    as above; ``"megatron_fsdp"`` takes the master from the DDP config's
    ``megatron_fsdp_main_params_dtype`` (``lookup("ddp.megatron_fsdp_main_params_dtype")``;
    Megatron-Core's ``DistributedDataParallelConfig`` default ``torch.float32`` @ d98e8a64dd),
    the moments as given and no remainders; ``"both"`` reads nothing (noted)."""
    on = lookup(prefix + "use_precision_aware_optimizer")
    stated = {name: lookup(prefix + name) for name in _OPTIMIZER_DTYPES}
    if on is None or on.value is not True:
        lower = [
            f"{name}={found.value}"
            for name, found in stated.items()
            if found is not None and OPTIMIZER_DTYPE_NAMES.get(str(found.value)) != "fp32"
        ]
        if lower:
            facts.note(
                f"optimizer {', '.join(lower)} without use_precision_aware_optimizer: "
                "Megatron-Core's OptimizerConfig asserts fp32 there ('... can only be fp32 "
                "when not using precision-aware optimizer'); not read"
            )
        return
    offload = lookup(prefix + "optimizer_cpu_offload")
    if offload is not None and offload.value is True:
        facts.note(
            f"{prefix}optimizer_cpu_offload keeps optimizer states in host memory, which the "
            "scenario does not model: the GPU's optimizer memory is predicted as without it"
        )
        return
    if megatron_fsdp == "both":
        facts.note(str(megatron_fsdp_optimizer_note("both", release, False, "")))
        return
    values: dict[str, tuple[str, str]] = {}
    for name, found in stated.items():
        if found is None or found.value is None:
            values[name] = ("fp32", f"{on.source} ({default_source} default {name} fp32)")
            continue
        dtype = OPTIMIZER_DTYPE_NAMES.get(str(found.value))
        if dtype is None:
            facts.note(
                f"{prefix}{name}={found.value}: not a dtype Transformer Engine's FusedAdam "
                "takes from this config (FP8 states are torch.uint8, which the config's names "
                "do not give); the optimizer dtypes are not read"
            )
            return
        values[name] = (dtype, found.source)
    if megatron_fsdp == "megatron_fsdp":
        _megatron_fsdp_master_facts(lookup, values, facts, bf16=bf16, on=on.source, release=release)
        return
    for name, (dtype, source) in values.items():
        facts.set(f"parallelism.{name}", dtype, source)
    if values["main_params_dtype"][0] != "fp32" or not bf16:
        return
    if not fused_adam_keeps_remainders(fp8_recipe):
        facts.set(
            "parallelism.store_param_remainders",
            False,
            f"derived: fp8_recipe {fp8_recipe}: Megatron-Core keeps the whole fp32 master "
            "(use_precision_aware_optimizer_no_fp8_or_ds_fp8 false)",
        )
        return
    remainders = lookup(prefix + "store_param_remainders")
    if remainders is not None and isinstance(remainders.value, bool):
        facts.set("parallelism.store_param_remainders", remainders.value, remainders.source)
    else:
        facts.set(
            "parallelism.store_param_remainders",
            True,
            f"{on.source} ({default_source} default store_param_remainders true)",
        )


_FSDP_MAIN_KEY = "ddp.megatron_fsdp_main_params_dtype"


def _megatron_fsdp_master_facts(
    lookup: Callable[[str], _Found | None],
    values: dict[str, tuple[str, str]],
    facts: Facts,
    *,
    bf16: bool,
    on: str,
    release: str | None,
) -> None:
    """The moments of ``values`` with Megatron-FSDP's main weights as the master
    (``megatron_fsdp_master`` ``"megatron_fsdp"``): ``ddp.megatron_fsdp_main_params_dtype``
    (default fp32; None or ``auto`` no buffer) read by ``megatron_fsdp_main_dtype``, and an
    fp32 master whole (``FusedAdam`` keeps no master, so no remainders). Nothing where that
    dtype is no scenario dtype (noted)."""
    found = lookup(_FSDP_MAIN_KEY)
    if found is None:
        name: str | None = "fp32"
        source = f"{on} (Megatron-Core DistributedDataParallelConfig default {_FSDP_MAIN_KEY} fp32)"
    else:
        text = None if found.value is None else str(found.value)
        name = None if text in (None, "auto") else OPTIMIZER_DTYPE_NAMES.get(str(text), "unknown")
        source = found.source
    main = megatron_fsdp_main_dtype(name, bf16=bf16)
    if main is None:
        facts.note(
            str(megatron_fsdp_optimizer_note("megatron_fsdp", release, False, _FSDP_MAIN_KEY))
        )
        return
    facts.set("parallelism.main_params_dtype", main, source)
    for field, (dtype, where) in values.items():
        if field != "main_params_dtype":
            facts.set(f"parallelism.{field}", dtype, where)
    if main == "fp32" and bf16:
        facts.set(
            "parallelism.store_param_remainders",
            False,
            f"derived: {on} under Megatron-FSDP: FusedAdam keeps no master of its main weights",
        )
