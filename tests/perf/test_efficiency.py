"""The analytic efficiency model: batched-GEMM wave quantisation."""

from __future__ import annotations

import numpy as np
import pytest

from planner.perf import DefaultEfficiency
from planner.perf.batch import ScenarioArrays
from planner.scenario import parse_scenario


def _a100() -> ScenarioArrays:
    doc = {
        "model": {"preset": "gpt3-175b"},
        "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
        "parallelism": {"tensor_parallel": 8, "global_batch_size": 8},
    }
    return ScenarioArrays.from_scenarios([parse_scenario(doc)])


def test_batched_gemm_fills_the_sms_with_all_its_products() -> None:
    # unfused attention's P.V for 384 (batch x heads) products: 2048 x 96 output tiles are
    # only 16 per product; one product alone fills 16 of 108 SMs, 384 of them fill every wave
    eff = DefaultEfficiency()
    dev = _a100().device
    m, n, k = np.array([2048.0]), np.array([96.0]), np.array([2048.0])
    one = eff.gemm_flop_per_s(m, n, k, dev, low_precision=False)
    many = eff.gemm_flop_per_s(m, n, k, dev, low_precision=False, batch=np.array([384.0]))
    assert many[0] > 5.0 * one[0]
    # a large GEMM already fills every wave: batching changes (almost) nothing
    big = (np.array([32768.0]), np.array([6912.0]), np.array([2304.0]))
    plain = eff.gemm_flop_per_s(*big, dev, low_precision=False)
    batched = eff.gemm_flop_per_s(*big, dev, low_precision=False, batch=np.array([4.0]))
    assert plain[0] <= batched[0] <= 1.02 * plain[0]
    # never above the architecture's GEMM fraction of the peak
    frac = eff.constants["gemm_peak_fraction_ampere"]
    assert many[0] <= frac * dev.peak16_flop_per_s[0]


def _device(gpu: str) -> ScenarioArrays:
    doc = {
        "model": {"preset": "gpt3-175b"},
        "hardware": {"gpu": gpu, "num_gpus": 8},
        "parallelism": {"tensor_parallel": 8, "global_batch_size": 8},
    }
    return ScenarioArrays.from_scenarios([parse_scenario(doc)])


def test_blackwell_low_precision_efficiency_acts_on_blackwell_fp8_gemms_only() -> None:
    shipped = DefaultEfficiency()
    halved = DefaultEfficiency.from_constants(
        {
            "low_precision_gemm_relative_efficiency_blackwell": 0.5
            * shipped.constants["low_precision_gemm_relative_efficiency_blackwell"]
        }
    )
    shape = (np.array([16384.0]), np.array([8192.0]), np.array([8192.0]))
    for gpu, expected in (("b200", 0.5), ("gb200", 0.5), ("h100-sxm", 1.0), ("a100-80gb", 1.0)):
        dev = _device(gpu).device
        fp8 = [e.gemm_flop_per_s(*shape, dev, low_precision=True)[0] for e in (shipped, halved)]
        bf16 = [e.gemm_flop_per_s(*shape, dev, low_precision=False)[0] for e in (shipped, halved)]
        assert fp8[1] / fp8[0] == pytest.approx(expected), gpu
        assert bf16[1] == pytest.approx(bf16[0]), gpu
