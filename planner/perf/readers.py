"""Scenario fields the engine reads through a rule (issue 13): recompute modules, the
low-precision recipe, MoE routing and dispatch, LoRA and packed sequences.

Each reader takes a validated ``Scenario`` and returns the value of the ``ScenarioArrays``
field of the same name in ``READERS`` (``planner.perf.batch`` gathers them with its own
rules). Codes and flags follow the specs: ``Fp8Recipe.code``, ``MoETokenDispatcher.code``,
``TrainingSpec.adapts``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from planner.specs.parallelism import RecomputeModule
from planner.specs.scenario import LoraTarget, Scenario

__all__ = ["READERS"]


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
    """Busiest expert rank's tokens over the average: 1 with forced load balancing, the
    scenario's ``moe_imbalance_factor``, else NaN (the efficiency model's default)."""
    m = s.model
    if m.moe_router_force_load_balancing:
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


READERS: Mapping[str, Callable[[Scenario], Any]] = MappingProxyType(
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
    }
)
"""``ScenarioArrays`` field -> its reader."""
