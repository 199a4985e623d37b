"""Per-iteration fixed costs and per-microbatch collectives (planner.perf.iteration)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.perf import DefaultEfficiency, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.data import gradient_buckets
from planner.perf.engine import link_of
from planner.perf.iteration import iteration_costs
from planner.perf.parameters import stage_params
from planner.scenario import parse_scenario
from planner.specs import Scenario


def _scenario(
    *,
    framework: str = "megatron",
    precision: str = "bf16",
    untie: bool = False,
    pp: int = 4,
    dp: int = 64,
    gbs: int = 512,
    **par: Any,
) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "gpt3-175b", "untie_embeddings": untie},
            "hardware": {"gpu": "a100-80gb", "num_gpus": 8 * pp * dp},
            "parallelism": {
                "tensor_parallel": 8,
                "pipeline_parallel": pp,
                "micro_batch_size": 1,
                "global_batch_size": gbs,
                "precision": precision,
                "sequence_parallel": True,
                "recompute": "full",
                **par,
            },
            "training": {"framework": framework},
        }
    )


def _costs(s: Scenario) -> Any:
    a = ScenarioArrays.from_scenario(s)
    eff = DefaultEfficiency()
    return iteration_costs(a, eff, link_of(a, eff), stage_params(a).busiest())


def test_tied_embeddings_across_stages_all_reduce_their_gradient() -> None:
    tied, untied = _costs(_scenario()), _costs(_scenario(untie=True))
    single = _costs(_scenario(pp=1, dp=256, recompute="full"))
    # 51200 x 12288 / 8 fp32 gradients between two nodes: ~12 ms on 8 x HDR
    assert 5e-3 < tied.sync_s - untied.sync_s < 30e-3
    assert single.sync_s < untied.sync_s + 1e-3


def test_found_inf_only_under_loss_scaling() -> None:
    fp16 = _costs(_scenario(precision="fp16"))
    bf16 = _costs(_scenario(grad_reduce_in_fp32=False))  # the same 16-bit gradient buffer
    assert fp16.optimizer_s > bf16.optimizer_s
    assert fp16.optimizer_s - bf16.optimizer_s < 1e-3  # a latency-bound all-reduce


def test_the_loss_all_reduce_runs_per_microbatch_on_megatron_only() -> None:
    few, many = _costs(_scenario(gbs=256)), _costs(_scenario(gbs=1024))
    per_microbatch = (many.sync_s - few.sync_s) / (16 - 4)
    # a tree all-reduce over 64 nodes: tens of microseconds
    assert 10e-6 < per_microbatch < 200e-6
    fsdp_few = _costs(_scenario(framework="fsdp", gbs=256, untie=True))
    fsdp_many = _costs(_scenario(framework="fsdp", gbs=1024, untie=True))
    assert fsdp_many.sync_s == pytest.approx(fsdp_few.sync_s)


def test_fixed_costs_are_small_for_a_large_model_and_in_the_breakdown() -> None:
    s = _scenario()
    p = predict(s)
    c = _costs(s)
    assert c.optimizer_s + c.sync_s < 0.01 * p.iteration_time_s
    assert p.breakdown.optimizer_s >= c.optimizer_s
    assert p.breakdown.dp_comm_exposed_s >= c.sync_s


def test_gradient_buckets_follow_the_framework() -> None:
    """Megatron-Core reduces gradients in buckets of max(4e7, 1e6·dp) parameters when the
    reduction overlaps the backward, in one collective otherwise; DeepSpeed in 5e8 (with
    overlap_comm, off by default below ZeRO-3)."""

    def buckets(params: float, **kw: Any) -> float:
        a = ScenarioArrays.from_scenario(_scenario(pp=1, zero_stage=1, gbs=384, **kw))
        return float(gradient_buckets(a, params, a.dense_data_parallel_size))

    assert buckets(4e9, dp=32) == 100.0  # 40M-parameter buckets
    assert buckets(4e9, dp=48) == 84.0  # 48M
    assert buckets(4e9, dp=128) == 32.0  # 1M per rank: 128M-parameter buckets
    assert buckets(4e9, dp=48, overlap_grad_reduce=False) == 1.0
    assert buckets(4e9, dp=48, framework="deepspeed", overlap_grad_reduce=True) == 8.0
    # DeepSpeed's overlap_comm defaults to false below ZeRO-3: one reduction after the backward
    assert buckets(4e9, dp=48, framework="deepspeed") == 1.0
    assert buckets(1e6, dp=48) == 1.0
