"""Physical limits of timing samples (``planner.calibration.limits``) and fits a budget can
stop (``planner.calibration.regress.fit_stoppable``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from planner.calibration import (
    Collective,
    CollectiveSample,
    OpSample,
    Tier,
    read_op_samples_csv,
)
from planner.calibration.limits import (
    MAX_BUS_BYTES_PER_S,
    MAX_BYTES_PER_S,
    MAX_FLOP_PER_S,
)
from planner.calibration.ops import OpKind, Pass
from planner.calibration.regress import CANDIDATES, _make, fit_stoppable
from planner.catalog import gpu_catalog
from planner.errors import CalibrationError, SpecError
from planner.search.budget import SearchBudget, SearchCancelledError, budget_scope
from planner.specs.hardware import Precision

DATA = Path(__file__).resolve().parents[1] / "data" / "calibration"


def _gemm(m: float, time_s: float = 1e-3) -> OpSample:
    return OpSample(
        op=OpKind.GEMM,
        pass_=Pass.FORWARD,
        dtype="float32",
        dims={"m": m, "n": m, "k": m},
        time_median_s=time_s,
    )


def test_the_limits_stay_far_beyond_every_device_of_the_catalog() -> None:
    for key, gpu in gpu_catalog().items():
        peaks = []
        for precision in Precision:
            try:
                peaks.append(gpu.peak_flop_per_s(precision))
            except SpecError:  # a precision the device lacks
                continue
        assert 4 * max(peaks) < MAX_FLOP_PER_S, key
        assert 100 * gpu.hbm_bandwidth_bytes_per_s < MAX_BYTES_PER_S, key
        assert 100 * gpu.scale_up_bandwidth_bytes_per_s < MAX_BUS_BYTES_PER_S, key


def test_recorded_sample_runs_are_within_the_limits() -> None:
    files = sorted(DATA.glob("*/op_samples.csv"))
    assert files
    for path in files:
        assert read_op_samples_csv(path.read_text(), source=str(path))


def test_absurd_samples_are_refused_naming_the_column() -> None:
    with pytest.raises(CalibrationError, match=r"column 'm' is 1e\+30, over the physical"):
        _gemm(1e30)
    with pytest.raises(CalibrationError, match=r"column 'flop / time_median_s"):
        _gemm(65536, time_s=1e-6)
    with pytest.raises(CalibrationError, match=r"column 'time_median_s' is 1e-12 s"):
        _gemm(64, time_s=1e-12)
    with pytest.raises(CalibrationError, match=r"column 'time_p75_s' is 1e\+06 s"):
        OpSample(
            op=OpKind.ADD,
            pass_=Pass.FORWARD,
            dtype="float32",
            dims={"tokens": 16, "width": 16},
            time_median_s=1e-5,
            time_p75_s=1e6,
        )
    with pytest.raises(CalibrationError, match=r"column 'num_ranks' is 1e\+07"):
        CollectiveSample(
            collective=Collective.ALL_REDUCE,
            num_ranks=10**7,
            tier=Tier.SCALE_OUT,
            size_bytes=1e6,
            time_s=1e-3,
        )
    assert math.isclose(_gemm(4096).flop, 2 * 4096**3)


def test_a_stoppable_fit_is_the_same_fit_and_stops_when_cancelled() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, 5))
    t = x @ rng.normal(size=5) + 0.1 * rng.normal(size=200)
    for name in CANDIDATES:
        plain = _make(name, 3).fit(x, t).predict(x)
        assert np.array_equal(fit_stoppable(_make(name, 3), x, t).predict(x), plain), name
        budget = SearchBudget()
        budget.cancel()
        with budget_scope(budget), pytest.raises(SearchCancelledError):
            fit_stoppable(_make(name, 3), x, t)
