"""The PyTorch-FSDP stacks' documented behaviours (llm-foundry/Composer, PyTorch FSDP v1), the
per-unit timing of ZeRO-3 collectives, Megatron-FSDP's collectives per microbatch, split-K GEMMs
and FlashAttention v1's rates: each moves the prediction the way its source says, and only where
it applies."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.perf import DefaultEfficiency, batch, predict, readers
from planner.perf import collectives as coll
from planner.perf.batch import ScenarioArrays
from planner.perf.engine import link_of
from planner.perf.frameworks import FRAMEWORK_PROFILES, FrameworkProfile, profile_of
from planner.perf.parameters import stage_params
from planner.scenario import parse_scenario, scenario_document_from_megatron_args
from planner.specs.scenario import Framework, Scenario


def _scenario(
    framework: str = "llm_foundry",
    gpu: str = "h100-sxm",
    preset: str = "mpt-7b",
    num_gpus: int = 8,
    **par: Any,
) -> Scenario:
    parallelism = {"global_batch_size": 8 * num_gpus, "micro_batch_size": 2, "zero_stage": 3}
    return parse_scenario(
        {
            "model": {"preset": preset},
            "hardware": {"gpu": gpu, "num_gpus": num_gpus},
            "parallelism": {**parallelism, **par},
            "training": {"framework": framework},
        }
    )


def _with(monkeypatch: pytest.MonkeyPatch, profile: FrameworkProfile) -> None:
    """Every scenario predicted next runs under ``profile``."""
    monkeypatch.setattr(batch, "profile_of", lambda framework: profile)
    monkeypatch.setattr(readers, "profile_of", lambda framework: profile)


def _only(field: str) -> set[Framework]:
    return {f for f, p in FRAMEWORK_PROFILES.items() if getattr(p, field) is True}


def test_composer_backward_post_prefetch_puts_each_backward_gather_on_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Composer's FSDP default ``BACKWARD_POST``: the next unit's gather waits for the current
    unit's gradients, so every backward all-gather is paid whole."""
    assert _only("zero3_backward_prefetch_post") == {Framework.LLM_FOUNDRY}
    s = _scenario(num_gpus=64)
    post = predict(s).breakdown.dp_comm_exposed_s
    _with(
        monkeypatch, replace(profile_of(Framework.LLM_FOUNDRY), zero3_backward_prefetch_post=False)
    )
    assert predict(s).breakdown.dp_comm_exposed_s < post


def test_fsdp_gradient_preparation_passes_cost_hbm_time_and_less_with_bf16_reduction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PyTorch FSDP (v1) casts each unit's unsharded gradient to the reduce dtype and
    pre-divides it before the reduce-scatter: 14 bytes per parameter with fp32 reduction,
    4 with bf16."""
    foundry = profile_of(Framework.LLM_FOUNDRY)
    assert foundry.zero3_grad_prep_pass
    times = {}
    for prep in (True, False):
        _with(monkeypatch, replace(foundry, zero3_grad_prep_pass=prep))
        for fp32 in (True, False):
            s = _scenario(grad_reduce_in_fp32=fp32)
            times[prep, fp32] = predict(s).breakdown.dp_comm_exposed_s
    fp32_cost = times[True, True] - times[False, True]
    bf16_cost = times[True, False] - times[False, False]
    assert 0.0 < bf16_cost < fp32_cost


def test_mpt_trains_without_dropout(monkeypatch: pytest.MonkeyPatch) -> None:
    """MPT's dropout rates default to 0.0 (no kernel runs): a GeLU model with dropout moves
    fewer element-wise bytes under llm-foundry than under a stack that applies it."""
    foundry = profile_of(Framework.LLM_FOUNDRY)
    assert not foundry.trains_with_dropout
    s = _scenario()
    without = predict(s).breakdown.compute_s
    _with(monkeypatch, replace(foundry, trains_with_dropout=True))
    assert predict(s).breakdown.compute_s > without


def test_composer_decoupled_adamw_runs_unfused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composer's ``DecoupledAdamW``: one eager fp32 kernel per operation and parameter
    (84 bytes per parameter) where fused Adam moves 34."""
    foundry = profile_of(Framework.LLM_FOUNDRY)
    assert foundry.eager_decoupled_adamw
    s = _scenario()
    unfused = predict(s).breakdown.optimizer_s
    _with(monkeypatch, replace(foundry, eager_decoupled_adamw=False))
    fused = predict(s).breakdown.optimizer_s
    assert unfused / fused == pytest.approx(84.0 / 34.0, rel=0.05)


def test_zero3_units_each_pay_the_latency_of_their_own_size() -> None:
    """Each FSDP unit is its own NCCL call timed at the unit's size (the Simple protocol's
    latency for blocks of hundreds of MB over 512 ranks), not one collective of the whole
    model: with nothing hidden, a microbatch pays per block two gathers of its 16-bit
    parameters and one reduce-scatter of its gradients."""
    s = _scenario(framework="fsdp", num_gpus=512, recompute="full")
    eff = DefaultEfficiency.from_constants({"dp_overlap_fraction": 0.0})
    a = ScenarioArrays.from_scenario(s)
    link = link_of(a, eff)
    params = stage_params(a).busiest().dense
    blocks = s.model.num_layers
    gather = coll.all_gather_time_s(2.0 * params / blocks, a.num_gpus, 1.0, link)
    reduce = coll.reduce_scatter_time_s(
        a.grad_bytes_per_param * params / blocks, a.num_gpus, 1.0, link
    )
    whole = coll.all_gather_time_s(2.0 * params, a.num_gpus, 1.0, link)
    assert blocks * gather > 1.5 * whole  # the per-call latencies add up
    p = predict(s, eff)
    microbatches = s.parallelism.global_batch_size / (s.parallelism.micro_batch_size * 512)
    per_microbatch = p.breakdown.dp_comm_exposed_s / microbatches
    assert per_microbatch == pytest.approx(blocks * (2.0 * gather + reduce), rel=1e-6)


def _a100_h100() -> ScenarioArrays:
    docs = [
        {
            "model": {"preset": "gpt3-175b"},
            "hardware": {"gpu": gpu, "num_gpus": 8},
            "parallelism": {"tensor_parallel": 8, "global_batch_size": 8},
        }
        for gpu in ("a100-80gb", "h100-sxm")
    ]
    return ScenarioArrays.from_scenarios([parse_scenario(d) for d in docs])


def test_split_k_fills_the_waves_of_small_output_long_k_gemms() -> None:
    """A 1024 x 1024 output (32 tiles of 128 x 256 on 108 SMs) over K = 65,536 (a weight
    gradient of a small model) splits K three ways: ~3x the rate of the same output over a
    short K, which cannot split."""
    eff = DefaultEfficiency()
    dev = _a100_h100().device
    m, n = np.array([1024.0, 1024.0]), np.array([1024.0, 1024.0])
    long_k = eff.gemm_flop_per_s(m, n, np.array([65536.0] * 2), dev, low_precision=False)
    short_k = eff.gemm_flop_per_s(m, n, np.array([1024.0] * 2), dev, low_precision=False)
    assert long_k[0] > 2.5 * short_k[0]
    frac = eff.constants["gemm_peak_fraction_ampere"]
    assert long_k[0] <= frac * dev.peak16_flop_per_s[0]


def test_split_k_leaves_gemms_that_fill_a_wave_alone() -> None:
    eff = DefaultEfficiency()
    dev = _a100_h100().device
    m, n = np.array([8192.0] * 2), np.array([8192.0] * 2)  # 64 x 32 tiles: many waves
    short = eff.gemm_flop_per_s(m, n, np.array([8192.0] * 2), dev, low_precision=False)
    long = eff.gemm_flop_per_s(m, n, np.array([65536.0] * 2), dev, low_precision=False)
    half = eff.constants["gemm_k_half"]  # only the main-loop depth factor differs
    expected = (65536.0 / (65536.0 + half)) / (8192.0 / (8192.0 + half))
    assert long[0] / short[0] == pytest.approx(expected)


def test_flash_attention_v1_has_no_narrow_head_penalty() -> None:
    """flash-attn 1.0.9 runs head dim 64 at least as fast per FLOP as 128 (measured on an
    H100, benchmarks/flash_attention_v1_h100.py); FlashAttention-2 runs it slower."""
    eff = DefaultEfficiency()
    dev = _a100_h100().device
    seq = np.array([8192.0, 8192.0])

    def rate(head_dim: float, v1: bool) -> Any:
        return eff.attention_flop_per_s(
            seq, dev, backward=False, fused=False, head_dim=np.full(2, head_dim), flash_v1=v1
        )

    assert rate(64.0, True) == pytest.approx(rate(128.0, True))
    assert np.all(rate(64.0, False) < rate(128.0, False))


def test_flash_attention_v1_on_hopper_is_its_ampere_rate_scaled_by_sms_and_clock() -> None:
    eff = DefaultEfficiency()
    dev = _a100_h100().device
    v1 = eff.attention_flop_per_s(
        np.array([8192.0] * 2), dev, backward=True, fused=False, flash_v1=True
    )
    speedup = eff.constants["flash_attention1_hopper_speedup"]
    assert speedup == pytest.approx(132 * 1.98 / (108 * 1.41), rel=1e-3)
    assert v1[1] / v1[0] == pytest.approx(speedup, rel=0.01)


def test_megatron_fsdp_gathers_once_for_recompute_and_backward_and_reduces_every_microbatch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Megatron-FSDP (the ``megatron`` profile's ZeRO-3): under full recompute the recomputed
    forward's gather is kept for the backward (two gathers per microbatch, not three), every
    microbatch reduce-scatters its gradients, and the expert parameters are gathered and
    reduced over the expert data-parallel group (``t_e·e`` apart), the dense ones per layer over
    the data-parallel group: with nothing hidden, each microbatch pays exactly that."""
    megatron = profile_of(Framework.MEGATRON)
    assert not megatron.zero3_regather_on_recompute
    eff = DefaultEfficiency.from_constants({"dp_overlap_fraction": 0.0})
    par = {"tensor_parallel": 2, "expert_parallel": 8, "expert_tensor_parallel": 1}
    par |= {"micro_batch_size": 1, "sequence_parallel": True, "recompute": "full"}

    def per_microbatch(microbatches: int) -> float:
        gbs = 32 * microbatches
        s = _scenario("megatron", "h100-sxm", "qwen3-235b-a22b", 64, **par, global_batch_size=gbs)
        return predict(s, eff).breakdown.dp_comm_exposed_s / microbatches

    s = _scenario("megatron", "h100-sxm", "qwen3-235b-a22b", 64, **par, global_batch_size=128)
    a = ScenarioArrays.from_scenario(s)
    link = link_of(a, eff)
    params = stage_params(a).busiest()
    units = s.model.num_layers
    grad = a.grad_bytes_per_param
    dense_unit = 2.0 * coll.all_gather_time_s(2.0 * params.dense / units, 32, 2.0, link)
    dense_unit += coll.reduce_scatter_time_s(grad * params.dense / units, 32, 2.0, link)
    experts = 2.0 * coll.all_gather_time_s(2.0 * params.expert, 8, 8.0, link)
    experts += coll.reduce_scatter_time_s(grad * params.expert, 8, 8.0, link)
    # (plus Megatron's per-microbatch loss all-reduce, tens of microseconds)
    assert per_microbatch(4) == pytest.approx(units * dense_unit + experts, rel=1e-4)
    assert per_microbatch(8) == pytest.approx(per_microbatch(4), rel=1e-6)
    _with(monkeypatch, replace(megatron, zero3_regather_on_recompute=True))
    assert per_microbatch(4) > 1.2 * (units * dense_unit + experts)  # a third gather


def test_megatron_fsdp_is_timed_and_sized_as_the_zero_stage_of_its_sharding_strategy() -> None:
    """A Megatron-LM launch under ``--use-megatron-fsdp`` reads as the ZeRO stage its
    ``--data-parallel-sharding-strategy`` shards (``MEGATRON_FSDP_STAGES``), and the model
    works from that stage alone: each strategy predicts what the same stage predicts without
    Megatron-FSDP (``no_shard`` the plain launch, ``optim`` the distributed optimizer's), the
    stages' memory falls as each shards one more kind of state, and ``no_shard`` with FP8
    weights is taken (Megatron-LM accepts it) and keeps one byte less per weight."""
    base = (
        "pretrain_gpt.py --num-layers 16 --hidden-size 2048 --num-attention-heads 16 "
        "--seq-length 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 "
    )

    def predicted(flags: str, **parallelism: object) -> Any:
        doc = scenario_document_from_megatron_args(base + flags, num_gpus=8, gpu="h100-sxm")
        assert doc is not None
        doc["parallelism"] |= parallelism
        return predict(parse_scenario(doc))

    fsdp = "--use-megatron-fsdp --data-parallel-sharding-strategy "
    same_stage = {
        "no_shard": predicted(""),
        "optim": predicted("--use-distributed-optimizer"),
        "optim_grads": predicted("--use-distributed-optimizer", zero_stage=2),
        "optim_grads_params": predicted("--use-distributed-optimizer", zero_stage=3),
    }
    totals = []
    for strategy, expected in same_stage.items():
        got = predicted(fsdp + strategy)
        assert got.iteration_time_s == expected.iteration_time_s
        assert got.memory == expected.memory
        states = got.memory.weights_bytes + got.memory.gradients_bytes
        totals.append(states + got.memory.optimizer_bytes)
    assert totals == sorted(totals, reverse=True)
    assert len(set(totals)) == 4
    fp8 = "--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather " + fsdp + "no_shard"
    fp8_weights = predicted(fp8)
    sixteen_bit = predicted(fp8.replace(" --fp8-param-gather", ""))
    assert fp8_weights.memory.weights_bytes < sixteen_bit.memory.weights_bytes
