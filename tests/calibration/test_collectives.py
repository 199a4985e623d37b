"""Alpha-beta fits of collectives: recovery, held-out error, CSV."""

from __future__ import annotations

import numpy as np
import pytest

from planner.calibration import (
    Collective,
    CollectiveModel,
    CollectiveSample,
    Tier,
    bus_factor,
    fit_alpha_beta,
    fit_collectives,
    format_collective_samples_csv,
    read_collective_samples_csv,
)
from planner.errors import CalibrationError


def test_bus_factors_follow_nccl_tests() -> None:
    assert bus_factor(Collective.ALL_REDUCE, 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor(Collective.ALL_GATHER, 8) == pytest.approx(7 / 8)
    assert bus_factor(Collective.REDUCE_SCATTER, 2) == pytest.approx(0.5)
    assert bus_factor(Collective.SEND_RECV, 8) == 1.0


def _curve(alpha: float, busbw: float, n: int = 8) -> list[CollectiveSample]:
    sizes = 2.0 ** np.arange(10, 31, 2)
    f = bus_factor(Collective.ALL_REDUCE, n)
    return [
        CollectiveSample(
            collective=Collective.ALL_REDUCE,
            num_ranks=n,
            tier=Tier.SCALE_UP,
            size_bytes=float(s),
            time_s=alpha + f * s / busbw,
            source="test",
        )
        for s in sizes
    ]


def test_fit_recovers_alpha_and_bus_bandwidth() -> None:
    (model,) = fit_collectives(_curve(20e-6, 360e9))
    assert model.alpha_s == pytest.approx(20e-6, rel=1e-6)
    assert model.bus_bandwidth_bytes_per_s == pytest.approx(360e9, rel=1e-6)
    assert model.held_out_mape < 1e-6
    assert float(model.time_s(2**30)) == pytest.approx(20e-6 + 1.75 * 2**30 / 360e9)
    assert CollectiveModel.from_dict(model.to_dict()) == model


@pytest.mark.parametrize(
    ("field", "value"), [("alpha_s", {"s": 1}), ("sources", "nccl-tests"), ("num_ranks", [8])]
)
def test_a_malformed_collective_model_is_a_calibration_error(field: str, value: object) -> None:
    (model,) = fit_collectives(_curve(20e-6, 360e9))
    with pytest.raises(CalibrationError, match=field):
        CollectiveModel.from_dict({**model.to_dict(), field: value})


def test_fit_groups_by_collective_group_size_and_tier() -> None:
    models = fit_collectives(_curve(20e-6, 360e9, n=8) + _curve(40e-6, 40e9, n=16))
    assert [(m.num_ranks, round(m.bus_bandwidth_bytes_per_s / 1e9)) for m in models] == [
        (8, 360),
        (16, 40),
    ]


def test_one_size_cannot_separate_latency_from_bandwidth() -> None:
    with pytest.raises(CalibrationError, match="two or more sizes"):
        fit_alpha_beta(Collective.ALL_REDUCE, 2, [1024.0, 1024.0], [1e-3, 1.1e-3])
    assert fit_collectives(_curve(1e-5, 1e9)[:1]) == []


def test_csv_round_trip_and_errors() -> None:
    samples = _curve(1e-5, 1e9)
    back = read_collective_samples_csv(format_collective_samples_csv(samples))
    assert back == samples
    with pytest.raises(CalibrationError, match=r"c\.csv:2: .*'all_sum'"):
        read_collective_samples_csv(
            "collective,num_ranks,tier,size_bytes,time_s\nall_sum,2,scale_up,1,1\n",
            source="c.csv",
        )
    with pytest.raises(CalibrationError, match="num_ranks must be >= 2"):
        read_collective_samples_csv(
            "collective,num_ranks,tier,size_bytes,time_s\nall_reduce,1,scale_up,1,1\n"
        )
