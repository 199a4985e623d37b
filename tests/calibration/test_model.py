"""fit_calibration: held-out error, persistence as data, skipped ops, the recorded CPU run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adapters.sampling.files import read_sample_run
from planner.calibration import MEMORY_MODEL, Calibration, OpKind, fit_calibration
from planner.errors import CalibrationError
from tests.calibration.conftest import make_samples

FAST = ("power_law", "quadratic")
RECORDED = Path(__file__).parents[1] / "data" / "calibration" / "cpu_epyc_2core_fp32"


def test_fit_quotes_small_held_out_error_on_roofline_data(gemm_samples: list) -> None:
    cal = fit_calibration(gemm_samples, candidates=FAST)
    gemm = cal.operators["gemm/fwd"]
    assert gemm.held_out.num_test == round(len(gemm_samples) * 0.25)
    assert gemm.held_out.num_train + gemm.held_out.num_test == len(gemm_samples)
    assert gemm.held_out.mape < 0.15  # smooth roofline + 2 % noise
    assert cal.measured["peak_flop_per_s"] == pytest.approx(50e9, rel=0.1)


def test_json_round_trip_refits_identically(small_samples: list) -> None:
    cal = fit_calibration(small_samples, candidates=FAST)
    text = cal.to_json()
    assert "pickle" not in text
    back = Calibration.from_json(text)
    assert set(back.operators) == set(cal.operators)
    for name, op in cal.operators.items():
        other = back.operators[name]
        x, _ = op._training()
        assert np.allclose(op.regressor.predict(x), other.regressor.predict(x), atol=1e-9)
        assert other.regressor.selected_ == op.regressor.selected_
        assert other.held_out == op.held_out
    assert json.loads(back.to_json()) == json.loads(text)


def test_tampered_document_is_rejected(small_samples: list) -> None:
    data = json.loads(fit_calibration(small_samples, candidates=FAST).to_json())
    data["operators"][0]["check_log_time"][0] += 1.0
    with pytest.raises(CalibrationError, match="did not reproduce"):
        Calibration.from_dict(data)
    with pytest.raises(CalibrationError, match="format"):
        Calibration.from_dict({"format": "something-else"})
    with pytest.raises(CalibrationError, match="not JSON"):
        Calibration.from_json("{", source="c.json")


def test_too_few_samples_are_skipped_and_mixed_devices_rejected() -> None:
    few = make_samples(scale=0.001, ops=(OpKind.ADAM, OpKind.GEMM))
    cal = fit_calibration(few, candidates=FAST)
    assert "adam/step" in cal.skipped
    assert "gemm/fwd" in cal.skipped
    assert MEMORY_MODEL in cal.skipped
    import dataclasses

    other = [dataclasses.replace(few[0], device_name="Other CPU")]
    with pytest.raises(CalibrationError, match="fit one device at a time"):
        fit_calibration(few + other)
    with pytest.raises(CalibrationError, match="no samples"):
        fit_calibration([])


def test_recorded_cpu_gemm_held_out_error() -> None:
    """Golden: the real CPU run of tests/data/calibration predicts held-out GEMMs to < 25 %."""
    run = read_sample_run(RECORDED)
    gemm = [s for s in run.ops if s.op is OpKind.GEMM]
    assert len(gemm) >= 100
    assert {s.device for s in run.ops} == {"cpu"}
    cal = fit_calibration(gemm, candidates=FAST)
    assert cal.operators["gemm/fwd"].held_out.mape < 0.25
