"""CalibratedEfficiency: calibrated inside the sampled domain on the sampled device, the
analytic fallback elsewhere, provenance in describe(); end to end through predict()."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.calibration import (
    CalibratedEfficiency,
    Calibration,
    Collective,
    CollectiveSample,
    Tier,
    bus_factor,
    device_spec,
    fit_calibration,
)
from planner.errors import CalibrationError
from planner.perf import DefaultEfficiency, DeviceArrays, EfficiencyModel, predict, predict_batch
from planner.scenario import parse_scenario
from planner.specs import Scenario
from tests.calibration.conftest import make_samples

KEY = "sampled-cpu"


def _collectives() -> list[CollectiveSample]:
    out = []
    for coll in (Collective.ALL_REDUCE, Collective.ALL_GATHER):
        for size in 2.0 ** np.arange(10, 25, 2):
            t = 3e-4 + bus_factor(coll, 2) * size / 1e9
            out.append(
                CollectiveSample(
                    collective=coll, num_ranks=2, tier=Tier.SCALE_UP, size_bytes=size, time_s=t
                )
            )
    return out


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    return fit_calibration(
        make_samples(scale=0.2), _collectives(), candidates=("power_law", "quadratic")
    )


def _device(keys: tuple[str, ...], index: list[int]) -> DeviceArrays:
    n = len(index)
    return DeviceArrays(
        peak_flop_per_s=np.full(n, 50e9),
        peak16_flop_per_s=np.full(n, 50e9),
        low_precision=np.zeros(n, dtype=bool),
        hbm_bandwidth_bytes_per_s=np.full(n, 10e9),
        num_sms=np.ones(n),
        architecture=np.zeros(n, dtype=np.int64),
        gpu_index=np.asarray(index, dtype=np.int64),
        gpu_keys=keys,
    )


def test_gemm_inside_domain_on_the_device_is_calibrated(calibration: Calibration) -> None:
    eff = CalibratedEfficiency(calibration, device_key=KEY)
    dev = _device((KEY, "h100-sxm"), [0, 1])
    m = np.array([[512.0, 512.0], [1e6, 1e6]])  # second row: far outside the sampled m
    n = np.full((2, 2), 384.0)
    k = np.full((2, 2), 128.0)
    got = eff.gemm_flop_per_s(m, n, k, dev, low_precision=False)
    base = DefaultEfficiency().gemm_flop_per_s(m, n, k, dev, low_precision=False)
    op = calibration.operators["gemm/fwd"]
    x = op.features({"m": np.array([512.0]), "n": np.array([384.0]), "k": np.array([128.0])}, 4.0)
    assert got[0, 0] == pytest.approx(2 * 512 * 384 * 128 / op.predict_time_s(x)[0])
    assert got[0, 1] == base[0, 1]  # another device: fallback
    assert got[1, 0] == base[1, 0]  # outside the domain: fallback
    queries = eff.describe()["queries"]["gemm_flop_per_s"]
    assert queries == {"calibrated": 1, "other device": 2, "outside sampled domain": 1}
    low = eff.gemm_flop_per_s(m, n, k, dev, low_precision=True)
    assert np.array_equal(
        low, DefaultEfficiency().gemm_flop_per_s(m, n, k, dev, low_precision=True)
    )


def test_describe_lists_calibrated_and_fallback_members(calibration: Calibration) -> None:
    eff = CalibratedEfficiency(calibration, device_key=KEY)
    info = eff.describe()
    assert {"gemm_flop_per_s", "attention_flop_per_s", "memory_bytes_per_s"} <= set(
        info["calibrated"]
    )
    assert "comm_overlap" in info["fallback"]
    assert info["fallback_model"] == "DefaultEfficiency"
    assert eff.collective_latency_s == pytest.approx(3e-4, rel=1e-3)
    assert eff.kernel_min_time_s == calibration.measured["kernel_min_time_s"]
    eff.reset_usage()
    assert eff.describe()["queries"] == {}
    with pytest.raises(CalibrationError, match="not sampled"):
        CalibratedEfficiency(calibration, device_key=KEY, dtype="bfloat16")


def test_bus_fraction_uses_fitted_busbw_over_line_rate(calibration: Calibration) -> None:
    eff = CalibratedEfficiency(calibration, device_key=KEY, line_rate_bytes_per_s={"scale_up": 2e9})
    got = eff.bus_bandwidth_fraction(scale_up=np.array([True, False]))
    assert got[0] == pytest.approx(0.5, rel=1e-3)
    assert got[1] == DefaultEfficiency().bus_bandwidth_fraction(scale_up=np.array([False]))[0]


def _tiny(gpu_spec: object | None = None) -> Scenario:
    doc = {
        "model": {
            "num_layers": 2,
            "hidden_size": 128,
            "num_attention_heads": 4,
            "ffn_hidden_size": 512,
            "vocab_size": 1024,
            "seq_length": 128,
            "activation": "gelu",
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": 2},
        "parallelism": {"data_parallel": 2, "micro_batch_size": 4, "global_batch_size": 8},
    }
    sc = parse_scenario(doc)
    if gpu_spec is None:
        return sc
    hw = dataclasses.replace(sc.hardware, gpu=gpu_spec, gpus_per_node=2, nvlink_domain_size=2)
    return dataclasses.replace(sc, hardware=hw)


def test_predict_end_to_end_on_the_sampled_device(calibration: Calibration) -> None:
    spec = device_spec(calibration, key=KEY)
    eff = CalibratedEfficiency(calibration, device_key=KEY, attention_batch_heads=16)
    model: EfficiencyModel = eff
    calibrated = predict(_tiny(spec), model)
    analytic = predict(_tiny(spec))
    assert 0 < calibrated.iteration_time_s < 10
    assert calibrated.iteration_time_s != analytic.iteration_time_s
    queries = eff.describe()["queries"]
    assert queries["gemm_flop_per_s"]["calibrated"] > 0
    assert queries["attention_flop_per_s"]["calibrated"] == 2


def test_other_devices_get_exactly_the_analytic_prediction(calibration: Calibration) -> None:
    eff = CalibratedEfficiency(
        calibration, device_key=KEY, fallback=DefaultEfficiency(), calibrated_scalars=False
    )
    h100 = _tiny()
    got = predict(h100, eff)
    base = predict(h100)
    assert got.iteration_time_s == base.iteration_time_s
    assert eff.describe()["queries"]["gemm_flop_per_s"]["calibrated"] == 0
    assert "kernel_min_time_s" in eff.describe()["fallback"]


def test_calibrated_scalars_apply_to_every_scenario_of_a_batch(calibration: Calibration) -> None:
    """The Protocol's scalars are not per device: documented, and visible here."""
    eff = CalibratedEfficiency(calibration, device_key=KEY)
    assert eff.kernel_min_time_s == calibration.measured["kernel_min_time_s"]
    assert predict(_tiny(), eff).iteration_time_s != predict(_tiny()).iteration_time_s


def test_one_scenario_form_equals_the_batch(calibration: Calibration) -> None:
    """``predict`` (Python numbers) and the batch (arrays) ask the calibrated model the same."""
    eff = CalibratedEfficiency(
        calibration,
        device_key=KEY,
        attention_batch_heads=16,
        line_rate_bytes_per_s={"scale_up": 2e9},
    )
    scenarios = [_tiny(device_spec(calibration, key=KEY)), _tiny()]
    for scenario, together in zip(scenarios, predict_batch(scenarios, eff), strict=True):
        alone = predict(scenario, eff)
        assert type(alone.iteration_time_s) is float
        assert alone.iteration_time_s == pytest.approx(together.iteration_time_s, rel=1e-12)
        assert alone.breakdown.as_dict() == pytest.approx(together.breakdown.as_dict(), rel=1e-12)
        assert alone.memory == together.memory
