"""Flash attention's exponential roof: one ``exp2`` per executed score on the special function
units, against Blackwell's doubled tensor rate and Blackwell Ultra's doubled SFU rate."""

from __future__ import annotations

import dataclasses

import pytest

from planner.catalog import gpu_catalog
from planner.perf import DefaultEfficiency
from planner.perf.batch import ScenarioArrays
from planner.perf.operators import OperatorTimes, operator_times
from planner.scenario import parse_scenario
from planner.specs import Scenario
from planner.specs.hardware import Precision


def _scenario(gpu: str, *, heads: int) -> Scenario:
    """Llama 3 8B (hidden 4096) with ``heads`` heads: head dim 4096 / heads."""
    doc = {
        "model": {"preset": "llama3-8b", "num_attention_heads": heads},
        "hardware": {"gpu": gpu, "num_gpus": 8},
        "parallelism": {"tensor_parallel": 1, "micro_batch_size": 1, "global_batch_size": 8},
        "training": {"framework": "megatron"},
    }
    return parse_scenario(doc)


def _times(s: Scenario) -> OperatorTimes:
    return operator_times(ScenarioArrays.from_scenario(s), DefaultEfficiency())


def _exp_over_tensor(gpu: str, head_dim: int) -> float:
    """Exponential work over tensor work of the forward, each at its pipe's peak: the tensor
    FLOPs per score are 2·(d_qk + d_v)."""
    spec = gpu_catalog()[gpu]
    peak16 = spec.peak_flop_per_s(Precision.BF16)
    assert spec.sfu_exp2_per_s is not None
    return peak16 / (spec.sfu_exp2_per_s * 4.0 * head_dim)


def test_narrow_heads_on_blackwell_wait_for_the_exponentials() -> None:
    """Heads of 64 on GB200 (2.5 PFLOP/s 16-bit, 5 TeraExponentials/s): the exponentials take
    1.95x the tensor time, so the forward runs that much longer than on GB300 (the same
    16-bit peak, 10.7 TeraExponentials/s: tensor-bound at 0.91)."""
    ratio = _exp_over_tensor("gb200", 64)
    assert ratio == pytest.approx(2500e12 / (5e12 * 256))
    assert _exp_over_tensor("gb300", 64) < 1.0
    blackwell = _times(_scenario("gb200", heads=64)).dense_recompute_s
    ultra = _times(_scenario("gb300", heads=64)).dense_recompute_s
    assert blackwell / ultra == pytest.approx(ratio, rel=1e-9)


def test_exponential_bound_time_does_not_depend_on_the_tensor_peak() -> None:
    """B200 (2.25 PFLOP/s) and GB200 (2.5) share the Blackwell SFU rate: exponential-bound
    forwards take the same time on both."""
    b200 = _times(_scenario("b200", heads=64)).dense_recompute_s
    gb200 = _times(_scenario("gb200", heads=64)).dense_recompute_s
    assert b200 == pytest.approx(gb200, rel=1e-9)


def test_heads_of_128_and_the_backward_stay_on_the_tensor_roof() -> None:
    """Heads of 128 on GB200: exponentials at 0.98 of the tensor work, so GB200 and GB300 (the
    same 16-bit peak) run the forward alike; the backward's 2.5x tensor work outweighs its one
    recomputed exponential per score even at head dim 64."""
    assert _exp_over_tensor("gb200", 128) < 1.0
    assert _exp_over_tensor("gb200", 64) < 2.5
    wide = [_times(_scenario(g, heads=32)) for g in ("gb200", "gb300")]
    assert wide[0].dense_recompute_s == pytest.approx(wide[1].dense_recompute_s, rel=1e-12)
    narrow = _scenario("gb200", heads=64)
    no_roof = dataclasses.replace(
        narrow,
        hardware=dataclasses.replace(
            narrow.hardware,
            gpu=dataclasses.replace(narrow.hardware.gpu, sfu_exp2_per_s=None),
        ),
    )
    assert _times(narrow).dense_backward_s == pytest.approx(
        _times(no_roof).dense_backward_s, rel=1e-12
    )
    assert _times(narrow).dense_recompute_s > 1.9 * _times(no_roof).dense_recompute_s
