"""What the NeMo 1.0, NeMo 2.0 and Megatron-Bridge readers share: the Megatron vocabulary
padding, precision names, activation names and the MoE routing knobs."""

from __future__ import annotations

import math
import re

from planner.launch.types import Facts

__all__ = [
    "MOE_ROUTING_KNOBS",
    "moe_routing_keys",
    "padded_vocab",
    "precision_of_trainer",
    "set_activation",
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
