"""device_spec from measured peaks; the show summary."""

from __future__ import annotations

import pytest

from planner.calibration import Calibration, device_spec, fit_calibration
from planner.calibration.report import calibration_summary, summary_lines
from planner.errors import CalibrationError
from planner.specs import Precision
from tests.calibration.conftest import make_samples


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    return fit_calibration(make_samples(scale=0.15), candidates=("power_law",))


def test_device_spec_carries_measured_peaks(calibration: Calibration) -> None:
    spec = device_spec(calibration, key="cpu-x")
    assert spec.key == "cpu-x"
    assert spec.peak_flop_per_s(Precision.BF16) == calibration.measured["peak_flop_per_s"]
    assert spec.hbm_bandwidth_bytes_per_s == calibration.measured["memory_bandwidth_bytes_per_s"]
    assert spec.hbm_bandwidth_bytes_per_s == pytest.approx(10e9, rel=0.2)
    with pytest.raises(CalibrationError, match="GEMM and streaming"):
        device_spec(Calibration(device={}, operators={}))


def test_summary_names_every_operator_with_held_out_error(calibration: Calibration) -> None:
    lines = summary_lines(calibration)
    text = "\n".join(lines)
    for name in calibration.operators:
        assert name in text
    assert "held-out MAPE" in lines[2]
    summary = calibration_summary(calibration)
    gemm = next(o for o in summary["operators"] if o["operator"] == "gemm/fwd")
    assert gemm["domain"]["log2_m"][0] >= 64
    assert gemm["held_out"]["num_test"] > 0
