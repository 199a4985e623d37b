"""Selective recompute of named modules (Megatron-Core ``--recompute-modules``)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import predict
from planner.scenario import parse_scenario
from planner.specs import Scenario


def _scenario(**par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "qwen3-30b-a3b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {"global_batch_size": 32, "expert_parallel": 8, **par},
        }
    )


def test_default_selective_is_core_attention() -> None:
    default = predict(_scenario(recompute="selective"))
    named = predict(_scenario(recompute="selective", recompute_modules=["core_attn"]))
    assert named.iteration_time_s == default.iteration_time_s
    assert named.memory_per_gpu_bytes == default.memory_per_gpu_bytes


def test_recomputing_the_moe_block_trades_time_for_memory() -> None:
    none = predict(_scenario(recompute="none"))
    moe = predict(_scenario(recompute="selective", recompute_modules=["moe"]))
    full = predict(_scenario(recompute="full"))
    assert none.iteration_time_s < moe.iteration_time_s < full.iteration_time_s
    assert full.memory.activations_bytes < moe.memory.activations_bytes
    assert moe.memory.activations_bytes < none.memory.activations_bytes
    # the block's forward runs again, token exchange included
    assert moe.breakdown.ep_comm_exposed_s == pytest.approx(1.5 * none.breakdown.ep_comm_exposed_s)


def test_cheap_modules_save_memory_for_little_time() -> None:
    none = predict(_scenario(recompute="none"))
    cheap = predict(_scenario(recompute="selective", recompute_modules=["layernorm", "moe_act"]))
    assert cheap.memory.activations_bytes < none.memory.activations_bytes
    assert cheap.iteration_time_s < 1.05 * none.iteration_time_s


def test_modules_need_selective_recompute() -> None:
    with pytest.raises(SpecError, match=r"parallelism\.recompute_modules"):
        _scenario(recompute="full", recompute_modules=["moe"])
    with pytest.raises(SpecError, match=r"parallelism\.recompute_modules"):
        _scenario(recompute="selective", recompute_modules=["attention"])
