"""The analytic efficiency model: batched-GEMM wave quantisation."""

from __future__ import annotations

import numpy as np

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
