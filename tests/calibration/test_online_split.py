"""Compute and network recalibrated apart (planner.calibration.online_split)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.calibration.online import (
    CalibrationKey,
    CalibrationLevel,
    Component,
    OnlineCalibration,
)
from planner.calibration.online_split import (
    IntervalTiming,
    ModelSplit,
    expected_max_normal,
    iteration_jitter_s,
    split_observed_step,
    window_share,
)

KEY = CalibrationKey(scheduler="slurm", cluster="c1", gpu="h100-sxm", framework="megatron")
OTHER_FW = CalibrationKey(scheduler="slurm", cluster="c1", gpu="h100-sxm", framework="torchtitan")

factors = st.floats(min_value=0.05, max_value=500.0)
seconds = st.floats(min_value=1e-4, max_value=10.0)


def breakdown(
    compute: float,
    dp: float,
    *,
    optimizer: float = 0.0,
    bubble: float = 0.0,
    tp: float = 0.0,
    pp: float = 0.0,
) -> dict[str, float]:
    return {
        "compute": compute,
        "tp_comm_exposed": tp,
        "cp_comm_exposed": 0.0,
        "ep_comm_exposed": 0.0,
        "pp_comm_exposed": pp,
        "pp_bubble": bubble,
        "dp_comm_exposed": dp,
        "optimizer": optimizer,
    }


def observed(b: dict[str, float], f_c: float, f_n: float) -> tuple[float, float]:
    """The step and the window share a job with true factors f_c, f_n shows."""
    window = f_c * (b["compute"] + b["pp_bubble"]) + f_n * (
        b["tp_comm_exposed"] + b["pp_comm_exposed"]
    )
    gap = f_c * b["optimizer"] + f_n * b["dp_comm_exposed"]
    return window + gap, window / (window + gap)


@settings(max_examples=60, deadline=None)
@given(f_c=factors, f_n=factors, compute=seconds, dp=seconds, frac=st.floats(0.0, 0.2))
def test_both_factors_are_recovered_exactly(
    f_c: float, f_n: float, compute: float, dp: float, frac: float
) -> None:
    b = breakdown(compute, dp, optimizer=frac * compute, bubble=frac * compute, tp=frac * dp)
    step, share = observed(b, f_c, f_n)
    split = split_observed_step(ModelSplit.from_breakdown(b), step, share)  # type: ignore[arg-type]
    assert split.compute_factor == pytest.approx(f_c, rel=1e-6)
    assert split.network_factor == pytest.approx(f_n, rel=1e-6)


def test_a_job_without_communication_gives_its_compute_factor_alone() -> None:
    b = breakdown(0.2, 0.0, optimizer=0.01)
    split = split_observed_step(ModelSplit.from_breakdown(b), 21.0, 0.9)  # type: ignore[arg-type]
    assert split.compute_factor == pytest.approx(100.0)
    assert split.network_factor is None


def test_in_window_communication_alone_cannot_be_told_apart() -> None:
    # tensor-parallel communication inside the window and nothing after it: one equation, two
    # unknowns; the whole-step ratio is all the job can teach
    b = breakdown(0.2, 0.0, tp=0.1)
    split = split_observed_step(ModelSplit.from_breakdown(b), 30.0, 1.0)  # type: ignore[arg-type]
    assert (split.compute_factor, split.network_factor) == (None, None)
    # small in-window communication: the compute factor from the window
    b = breakdown(0.2, 0.0, tp=0.01)
    split = split_observed_step(ModelSplit.from_breakdown(b), 30.0, 1.0)  # type: ignore[arg-type]
    assert split.compute_factor == pytest.approx(150.0)
    assert split.network_factor is None


def test_a_hidden_network_gives_no_network_factor() -> None:
    # the gap is all optimizer at the compute factor: nothing left for the network
    b = breakdown(0.2, 0.001, optimizer=0.01)
    split = split_observed_step(ModelSplit.from_breakdown(b), 2.0 + 0.05, 2.0 / 2.05)  # type: ignore[arg-type]
    assert split.compute_factor == pytest.approx(10.0)
    assert split.network_factor is None


def test_bad_inputs_give_nothing() -> None:
    model = ModelSplit.from_breakdown(breakdown(0.2, 0.1))
    assert model is not None
    for step, share in ((0.0, 0.5), (math.nan, 0.5), (1.0, 0.0), (1.0, 1.5)):
        split = split_observed_step(model, step, share)
        assert (split.compute_factor, split.network_factor) == (None, None)
    assert ModelSplit.from_breakdown({"compute": 1.0}) is None
    assert ModelSplit.from_breakdown(breakdown(0.0, 0.1)) is None
    assert ModelSplit.from_breakdown({**breakdown(0.1, 0.1), "optimizer": -1.0}) is None
    assert ModelSplit.from_breakdown({**breakdown(0.1, 0.1), "optimizer": True}) is None


def test_window_share_adds_the_wait_for_the_slowest_rank_of_each_iteration() -> None:
    # one rank alone: its mean compute over its step
    single = [IntervalTiming(iterations=5, step_s=0.05, compute_s=(0.04,))]
    assert window_share(single) == pytest.approx(0.8)
    # two ranks whose interval means differ by noise only: sigma from the spread, and the
    # expected maximum of two normals (1/sqrt(pi)) of it is the wait
    rng = np.random.default_rng(7)
    sigma, n, ranks = 0.02, 5, 2
    per_iteration = 0.1 + sigma * rng.standard_normal((4000, n, ranks))
    means = per_iteration.mean(axis=1)
    steps = per_iteration.max(axis=2).mean(axis=1) + 0.03  # + communication
    intervals = [
        IntervalTiming(iterations=n, step_s=float(s), compute_s=tuple(float(c) for c in m))
        for m, s in zip(means, steps, strict=True)
    ]
    assert iteration_jitter_s(intervals) == pytest.approx(sigma, rel=0.05)
    share = window_share(intervals)
    assert share is not None
    # the window comes out as the true per-iteration maximum, give or take the estimate
    truth = float(per_iteration.max(axis=2).mean() / steps.mean())
    assert share == pytest.approx(truth, rel=0.02)
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.01)
    assert expected_max_normal(1) == 0.0
    assert window_share([IntervalTiming(iterations=1, step_s=math.nan, compute_s=(0.1,))]) is None
    assert window_share([]) is None


def _teach(
    cal: OnlineCalibration,
    key: CalibrationKey,
    job: str,
    b: dict[str, float],
    f_c: float,
    f_n: float,
    n: int = 200,
) -> None:
    step, share = observed(b, f_c, f_n)
    cal.observe(
        key, job, predicted_step_s=sum(b.values()), observed_step_s=step, num_iterations=n, time_s=0
    )
    cal.observe_split(
        key, job, breakdown=b, observed_step_s=step, window_share=share, num_iterations=n, time_s=0
    )


def test_a_new_layout_inherits_both_factors() -> None:
    """Learnt on a job whose step is half communication, a job on one GPU (no network terms)
    and a job with a larger network share are predicted with each factor on its own terms;
    one factor for the whole step would be 1.8x too slow on the first and too fast on the
    second."""
    f_c, f_n = 100.0, 1000.0
    cal = OnlineCalibration()
    _teach(cal, KEY, "dp2", breakdown(0.010, 0.001, optimizer=0.0002), f_c, f_n)
    one_gpu = {"iteration_time_s": 0.0102, "breakdown_s": breakdown(0.010, 0.0, optimizer=0.0002)}
    out = cal.apply(one_gpu, KEY)
    assert out["calibration"]["method"] == "components"
    assert out["calibrated_iteration_time_s"] == pytest.approx(f_c * 0.0102)
    assert cal.correction(KEY).factor * 0.0102 > 1.75 * out["calibrated_iteration_time_s"]
    wide = breakdown(0.010, 0.004, optimizer=0.0002)
    out = cal.apply({"iteration_time_s": sum(wide.values()), "breakdown_s": wide}, KEY)
    assert out["calibrated_iteration_time_s"] == pytest.approx(f_c * 0.0102 + f_n * 0.004)
    comp = out["calibration"]["components"]
    assert comp["compute"]["factor"] == pytest.approx(f_c)
    assert comp["network"]["factor"] == pytest.approx(f_n)
    assert out["calibration"]["level"] == "key"
    assert 0 < out["calibration"]["log_sd"] < cal.correction(KEY).log_sd * 1.01
    json.dumps(out)


def test_one_jobs_split_is_no_surer_of_the_step_than_its_whole_step() -> None:
    """Compute and network factors learnt from one job share its deviation and noise: the
    step they correct together has their share-weighted log-sd (here each part's, equal to
    the whole step's), not the smaller sum in quadrature of independent errors (0.71 of it at
    an even split)."""
    cal = OnlineCalibration()
    _teach(cal, KEY, "dp2", breakdown(0.010, 0.010), 100.0, 100.0, n=80)
    whole = cal.correction(KEY)
    parts = [cal.component_correction(c, KEY) for c in (Component.COMPUTE, Component.NETWORK)]
    assert [p.log_sd for p in parts] == pytest.approx([whole.log_sd] * 2)
    b = breakdown(0.010, 0.010)
    info = cal.apply({"iteration_time_s": sum(b.values()), "breakdown_s": b}, KEY)["calibration"]
    assert isinstance(info, dict)
    assert info["method"] == "components"
    assert info["log_sd"] == pytest.approx(whole.log_sd)


def test_components_follow_the_levels_and_fall_back_to_the_whole_step() -> None:
    cal = OnlineCalibration()
    # jobs without per-rank timings teach only the whole step
    cal.observe(KEY, "a", predicted_step_s=0.01, observed_step_s=2.0, num_iterations=100, time_s=0)
    b = breakdown(0.010, 0.002)
    out = cal.apply({"iteration_time_s": 0.012, "breakdown_s": b}, KEY)
    assert out["calibration"]["method"] == "step"
    assert out["calibrated_iteration_time_s"] == pytest.approx(2.0 / 0.01 * 0.012)
    # a split learnt on another framework is less specific than the key's whole-step factor
    _teach(cal, OTHER_FW, "t", b, 50.0, 500.0)
    assert (
        cal.apply({"iteration_time_s": 0.012, "breakdown_s": b}, KEY)["calibration"]["method"]
        == "step"
    )
    # on a key that only the split job taught, both apply at the gpu level
    third = CalibrationKey(scheduler="slurm", cluster="c1", gpu="h100-sxm", framework="nemo")
    out = cal.apply({"iteration_time_s": 0.012, "breakdown_s": b}, third)
    assert out["calibration"]["method"] == "components"
    assert out["calibration"]["level"] == CalibrationLevel.GPU.value
    net = cal.component_correction(Component.NETWORK, third)
    assert net.level is CalibrationLevel.GPU
    assert cal.component_correction(Component.STEP, KEY).factor == pytest.approx(
        cal.correction(KEY).factor
    )
    # no breakdown: the whole-step factor
    assert cal.apply({"iteration_time_s": 0.012}, third)["calibration"]["method"] == "step"


def test_json_round_trip_keeps_the_components_and_reads_version_1() -> None:
    cal = OnlineCalibration()
    _teach(cal, KEY, "dp2", breakdown(0.010, 0.001, optimizer=0.0002), 100.0, 1000.0)
    doc = json.loads(json.dumps(cal.to_json()))
    assert doc["format_version"] == 2
    back = OnlineCalibration.from_json(doc)
    assert back.to_json() == cal.to_json()
    for c in (Component.COMPUTE, Component.NETWORK):
        assert back.component_correction(c, KEY) == cal.component_correction(c, KEY)
    v1 = {k: v for k, v in doc.items() if k != "components"} | {"format_version": 1}
    old = OnlineCalibration.from_json(v1)
    assert old.correction(KEY) == cal.correction(KEY)
    assert old.component_correction(Component.NETWORK, KEY).level is CalibrationLevel.NONE


def test_recalibrate_rebuilds_the_components() -> None:
    cal = OnlineCalibration()
    _teach(cal, KEY, "dp2", breakdown(0.010, 0.001, optimizer=0.0002), 100.0, 1000.0)
    rebuilt = OnlineCalibration()
    rebuilt.recalibrate(
        cal.jobs_.values(), {c: g.jobs.values() for c, g in cal.components_.items()}
    )
    for c in (Component.STEP, Component.COMPUTE, Component.NETWORK):
        assert rebuilt.component_correction(c, KEY).factor == pytest.approx(
            cal.component_correction(c, KEY).factor
        )
