"""Online recalibration: per-key corrections from running jobs (planner.calibration.online)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.recalibration import robust_mean_step_s
from planner.calibration.online import (
    CalibrationKey,
    CalibrationLevel,
    JobObservation,
    OnlineCalibration,
    key_from_scenario,
)
from planner.errors import SpecError
from planner.scenario import predict_documents

ROOT = Path(__file__).resolve().parents[2]
KEY = CalibrationKey(scheduler="slurm", cluster="c1", gpu="h100-sxm", framework="megatron")
OTHER_FW = CalibrationKey(scheduler="slurm", cluster="c1", gpu="h100-sxm", framework="torchtitan")
OTHER_GPU = CalibrationKey(scheduler="slurm", cluster="c1", gpu="a100-sxm-80gb", framework="x")
OTHER_CLUSTER = CalibrationKey(
    scheduler="slurm", cluster="c2", gpu="h100-sxm", framework="megatron"
)

ratios = st.floats(min_value=0.01, max_value=100.0)
iterations = st.integers(min_value=1, max_value=100_000)


def _observe(
    cal: OnlineCalibration, key: CalibrationKey, job: str, ratio: float, n: int = 200, t: float = 0
) -> None:
    cal.observe(
        key, job, predicted_step_s=0.5, observed_step_s=0.5 * ratio, num_iterations=n, time_s=t
    )


def test_no_jobs_means_no_correction() -> None:
    c = OnlineCalibration(model_log_sd=0.3).correction(KEY)
    assert (c.factor, c.log_sd, c.num_jobs, c.level) == (1.0, 0.3, 0, CalibrationLevel.NONE)


@settings(max_examples=40, deadline=None)
@given(
    ratio=ratios,
    counts=st.lists(iterations, min_size=1, max_size=12),
    times=st.lists(st.floats(min_value=0, max_value=1e8), min_size=12, max_size=12),
)
def test_factor_recovers_a_constant_true_ratio(
    ratio: float, counts: list[int], times: list[float]
) -> None:
    cal = OnlineCalibration(min_iterations=1)
    for i, n in enumerate(counts):
        _observe(cal, KEY, f"j{i}", ratio, n, times[i])
    c = cal.correction(KEY)
    assert c.level is CalibrationLevel.KEY
    assert c.num_jobs == len(counts)
    assert c.factor == pytest.approx(ratio, rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(ratio=ratios, m=st.integers(min_value=1, max_value=15), extra=st.integers(1, 15))
def test_more_jobs_narrow_the_uncertainty(ratio: float, m: int, extra: int) -> None:
    few, many = OnlineCalibration(), OnlineCalibration()
    for i in range(m):
        _observe(few, KEY, f"j{i}", ratio)
    for i in range(m + extra):
        _observe(many, KEY, f"j{i}", ratio)
    assert many.correction(KEY).log_sd < few.correction(KEY).log_sd


def test_more_jobs_narrow_the_standard_error_with_scattered_ratios() -> None:
    rng = np.random.default_rng(7)
    ses = []
    for m in (2, 8, 32):
        cal = OnlineCalibration()
        for i, dev in enumerate(rng.normal(0.0, 0.1, m)):
            _observe(cal, KEY, f"j{i}", 1.3 * math.exp(dev))
        est = cal.estimate(CalibrationLevel.KEY, KEY.prefix(CalibrationLevel.KEY))
        assert est is not None
        ses.append(est.log_se)
    assert ses[0] > ses[1] > ses[2]
    # 32 jobs drawn with spread 0.1: the estimated spread is near it and the factor near 1.3
    assert est.spread_log_sd == pytest.approx(0.1, abs=0.04)
    assert cal.correction(KEY).factor == pytest.approx(1.3, rel=0.06)


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.tuples(ratios, iterations), min_size=1, max_size=20))
def test_one_jobs_repeated_observations_count_once(values: list[tuple[float, int]]) -> None:
    cal = OnlineCalibration(min_iterations=1)
    for t, (ratio, n) in enumerate(values):
        _observe(cal, KEY, "same", ratio, n, float(t))
    c = cal.correction(KEY)
    last_ratio = values[-1][0]
    assert c.num_jobs == 1
    assert c.factor == pytest.approx(last_ratio, rel=1e-9)
    assert cal.num_samples_ == len(values)
    own = cal.correction(KEY, job_id="same")
    assert own.level is CalibrationLevel.JOB
    assert own.factor == pytest.approx(last_ratio, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from([KEY, OTHER_FW, OTHER_GPU, OTHER_CLUSTER]),
            st.integers(0, 6),
            ratios,
            iterations,
            st.floats(min_value=0, max_value=1e9),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_json_round_trip_is_exact(
    jobs: list[tuple[CalibrationKey, int, float, int, float]],
) -> None:
    cal = OnlineCalibration(half_life_s=3600.0)
    for key, j, ratio, n, t in jobs:
        _observe(cal, key, f"j{j}", ratio, n, t)
    doc = cal.to_json()
    back = OnlineCalibration.from_json(json.loads(json.dumps(doc)))
    assert back.to_json() == doc
    for key in (KEY, OTHER_FW, OTHER_GPU, OTHER_CLUSTER):
        for job in (None, "j0"):
            assert back.correction(key, job) == cal.correction(key, job)


def test_recalibrate_matches_incremental_updates() -> None:
    rng = np.random.default_rng(3)
    keys = [KEY, OTHER_FW, OTHER_GPU, OTHER_CLUSTER]
    cal = OnlineCalibration(half_life_s=5000.0)
    rows = []
    for t in range(300):
        row = JobObservation(
            key=keys[int(rng.integers(4))],
            job_id=f"j{int(rng.integers(40))}",
            predicted_step_time_s=float(rng.uniform(0.1, 2)),
            observed_step_time_s=float(rng.uniform(0.1, 2)),
            num_iterations=int(rng.integers(1, 5000)),
            time_s=float(t * 60),
        )
        rows.append(row)
        cal.add(row)
    rebuilt = OnlineCalibration(half_life_s=5000.0)
    rebuilt.recalibrate(reversed(rows))  # order does not matter: the latest per job wins
    assert set(rebuilt.estimates_) == set(cal.estimates_)
    for group, est in cal.estimates_.items():
        other = rebuilt.estimates_[group]
        assert other.num_jobs == est.num_jobs
        for a, b in (
            (other.log_ratio, est.log_ratio),
            (other.spread_log_sd, est.spread_log_sd),
            (other.log_se, est.log_se),
        ):
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12)
    assert rebuilt.num_samples_ == 300


def test_hierarchical_fallback_inflates_the_uncertainty() -> None:
    cal = OnlineCalibration()
    for i in range(5):
        _observe(cal, KEY, f"j{i}", 2.0)
    on_key = cal.correction(KEY)
    other_fw = cal.correction(OTHER_FW)
    other_gpu = cal.correction(OTHER_GPU)
    other_cluster = cal.correction(OTHER_CLUSTER)
    assert on_key.level is CalibrationLevel.KEY
    assert other_fw.level is CalibrationLevel.GPU
    assert other_gpu.level is CalibrationLevel.CLUSTER
    assert other_cluster.level is CalibrationLevel.NONE
    assert on_key.factor == other_fw.factor == other_gpu.factor == pytest.approx(2.0)
    assert on_key.log_sd < other_fw.log_sd < other_gpu.log_sd
    assert other_cluster.factor == 1.0


def test_min_jobs_backs_off_until_the_key_has_enough() -> None:
    cal = OnlineCalibration(min_jobs=2)
    for i in range(3):
        _observe(cal, OTHER_FW, f"o{i}", 1.5)
    _observe(cal, KEY, "k0", 3.0)
    assert cal.correction(KEY).level is CalibrationLevel.GPU  # 4 jobs on the GPU, 1 on the key
    _observe(cal, KEY, "k1", 3.0)
    c = cal.correction(KEY)
    assert (c.level, c.factor) == (CalibrationLevel.KEY, pytest.approx(3.0))


def test_an_outlier_job_hardly_moves_the_factor() -> None:
    cal = OnlineCalibration()
    for i, dev in enumerate((-0.05, -0.02, 0.0, 0.02, 0.05)):
        _observe(cal, KEY, f"j{i}", 1.5 * math.exp(dev))
    _observe(cal, KEY, "misdescribed", 1.5 * 8.0)  # e.g. ran on an eighth of the GPUs
    assert cal.correction(KEY).factor == pytest.approx(1.5, rel=0.05)


def test_short_and_old_jobs_weigh_less() -> None:
    cal = OnlineCalibration(half_life_s=86400.0, iterations_half_weight=20.0)
    _observe(cal, KEY, "long", 2.0, n=10_000, t=0.0)
    _observe(cal, KEY, "short", 1.0, n=2, t=0.0)
    assert cal.correction(KEY).factor > 1.6  # the 2-iteration job counts ~1/11 of the long one
    cal = OnlineCalibration(half_life_s=86400.0)
    _observe(cal, KEY, "old", 1.0, t=0.0)
    _observe(cal, KEY, "new", 2.0, t=10 * 86400.0)
    assert cal.correction(KEY).factor > 1.9  # ten half-lives later


def test_job_level_needs_enough_iterations() -> None:
    cal = OnlineCalibration(min_iterations=50)
    _observe(cal, KEY, "a", 2.0, n=10)
    assert cal.correction(KEY, "a").level is CalibrationLevel.NONE  # a warm-up is no evidence
    _observe(cal, KEY, "b", 3.0, n=60)
    assert cal.correction(KEY, "a").level is CalibrationLevel.KEY
    assert cal.correction(KEY).factor == pytest.approx(3.0)
    _observe(cal, KEY, "a", 2.0, n=100)
    own = cal.correction(KEY, "a")
    assert (own.level, own.factor) == (CalibrationLevel.JOB, pytest.approx(2.0))
    assert own.log_sd == pytest.approx(math.hypot(0.05, 0.10 / 10))


def test_apply_adds_calibrated_fields_and_keeps_the_models() -> None:
    cal = OnlineCalibration()
    _observe(cal, KEY, "j", 4.0)
    prediction = {
        "iteration_time_s": 0.5,
        "tokens_per_s": 1000.0,
        "mfu": 0.4,
        "time_to_train_s": 100.0,
        "fits_in_memory": True,
    }
    original = copy.deepcopy(prediction)
    out = cal.apply(prediction, KEY)
    assert prediction == original
    assert {k: out[k] for k in original} == original
    assert out["calibrated_iteration_time_s"] == pytest.approx(2.0)
    assert out["calibrated_tokens_per_s"] == pytest.approx(250.0)
    assert out["calibrated_mfu"] == pytest.approx(0.1)
    assert out["calibrated_time_to_train_s"] == pytest.approx(400.0)
    assert "calibrated_fits_in_memory" not in out
    calibration = out["calibration"]
    assert calibration["level"] == "key"
    assert calibration["num_jobs"] == 1
    assert calibration["factor"] == pytest.approx(4.0)
    # tau = tau0 (one job says nothing about the spread) and the se of one 200-iteration job
    assert calibration["log_sd"] == pytest.approx(0.10 * math.sqrt(1 + 220 / 200))
    json.dumps(out)
    with pytest.raises(SpecError, match="iteration_time_s"):
        cal.apply({"iteration_time_s": None}, KEY)


def test_error_stats_by_scheduler_cluster_and_key() -> None:
    cal = OnlineCalibration()
    _observe(cal, KEY, "a", 2.0)  # predicted/observed - 1 = -0.5
    _observe(cal, OTHER_FW, "b", 0.5)  # +1.0
    _observe(cal, OTHER_CLUSTER, "c", 1.25)  # -0.2
    assert cal.error_stats("slurm", "c1").median_abs_error_ratio == pytest.approx(0.75)
    assert cal.error_stats("slurm", "c1").num_jobs == 2
    assert cal.error_stats("slurm").median_abs_error_ratio == pytest.approx(0.5)
    assert cal.error_stats("slurm", key=KEY).median_abs_error_ratio == pytest.approx(0.5)
    empty = cal.error_stats("kubernetes")
    assert (empty.median_abs_error_ratio, empty.num_jobs) == (None, 0)


def test_invalid_inputs_raise_spec_errors() -> None:
    cal = OnlineCalibration()
    with pytest.raises(SpecError, match="observed_step_time_s"):
        _observe(cal, KEY, "j", -1.0)
    with pytest.raises(SpecError, match="num_iterations"):
        _observe(cal, KEY, "j", 1.0, n=0)
    with pytest.raises(SpecError, match="half_life_s"):
        OnlineCalibration(half_life_s=0.0)
    with pytest.raises(SpecError, match="format_version"):
        OnlineCalibration.from_json({"format_version": 99})
    with pytest.raises(SpecError, match="malformed"):
        OnlineCalibration.from_json({"format_version": 1, "params": {}, "jobs": [{"x": 1}]})


def test_key_from_scenario() -> None:
    doc = yaml.safe_load((ROOT / "deploy/dev/tiny_gpt/scenario.yaml").read_text())
    key = key_from_scenario("slurm", "dev", doc)
    assert key == CalibrationKey(
        scheduler="slurm", cluster="dev", gpu="h100-sxm", framework="megatron"
    )
    assert key_from_scenario("slurm", "dev", {"hardware": {}}) is None


def test_key_from_scenario_normalises_names_as_the_parser_does() -> None:
    """Two spellings of one GPU and framework are one calibration group."""
    upper = {"hardware": {"gpu": " H100-SXM"}, "training": {"framework": "Megatron"}}
    lower = {"hardware": {"gpu": "h100-sxm"}, "training": {"framework": "megatron"}}
    dashed = {"hardware": {"gpu": "A100-80GB"}, "training": {"framework": "LLM-Foundry"}}
    assert key_from_scenario("slurm", "c", upper) == key_from_scenario("slurm", "c", lower)
    assert key_from_scenario("slurm", "c", dashed) == CalibrationKey(
        scheduler="slurm", cluster="c", gpu="a100-80gb", framework="llm_foundry"
    )
    assert key_from_scenario("slurm", "c", {"hardware": {"gpu": "no-such-gpu"}}) is None
    unknown_framework = {"hardware": {"gpu": "h100-sxm"}, "training": {"framework": "jax?"}}
    assert key_from_scenario("slurm", "c", unknown_framework) is None


def _tiny(num_layers: int, hidden: int, heads: int) -> dict[str, object]:
    doc = yaml.safe_load((ROOT / "deploy/dev/tiny_gpt/scenario.yaml").read_text())
    doc["name"] = f"tiny-l{num_layers}-h{hidden}"
    doc["model"].update(
        num_layers=num_layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=heads,
        ffn_hidden_size=4 * hidden,
    )
    return dict(doc)


def test_a_first_job_improves_the_prediction_of_a_different_second_job() -> None:
    """Reality = model x cluster factor 1.8 x config deviation; after the first job has run,
    the second (another shape) is predicted within the deviations, not within 80 %."""
    first, second = predict_documents([_tiny(2, 128, 4), _tiny(4, 256, 8)])
    cluster_factor, dev_first, dev_second = 1.8, math.exp(0.08), math.exp(-0.05)
    true_second = second["iteration_time_s"] * cluster_factor * dev_second
    cal = OnlineCalibration()
    cal.observe(
        KEY,
        "first",
        predicted_step_s=first["iteration_time_s"],
        observed_step_s=first["iteration_time_s"] * cluster_factor * dev_first,
        num_iterations=100,
        time_s=0.0,
    )
    out = cal.apply(second, KEY)
    before = abs(second["iteration_time_s"] / true_second - 1)
    after = abs(out["calibrated_iteration_time_s"] / true_second - 1)
    assert before > 0.4
    assert after == pytest.approx(math.exp(0.13) - 1, rel=1e-6)  # the two deviations only
    # the truth lies within the band: |log error| < 1.28 log_sd
    assert abs(math.log(true_second / out["calibrated_iteration_time_s"])) < (
        1.2816 * out["calibration"]["log_sd"]
    )


def _measured_mean_s(name: str, upto: int | None = None) -> tuple[float, int]:
    """The service's robust mean step time of a recorded log (the ETA, no prior)."""
    return robust_mean_step_s(ROOT / "tests/data/logs" / name, upto)


def test_real_runs_a_second_shape_is_predicted_from_the_first() -> None:
    """Golden: tiny GPTs recorded on 2 CPU cores (tests/data/logs), predicted as on 2 x H100 (the
    job asks for fake H100 GRES). Measured: from the 2-layer run's first 200 iterations, the
    4-layer/h192 run is predicted -24 % off (uncorrected -99.6 %); with the 3-layer/h256 run
    too, +3 % (benchmarks/results/recalibration.md)."""
    runs = {
        "tiny_gpt_megatron_900it.log": _tiny(2, 128, 4),
        "tiny_gpt_l3h256_megatron_250it.log": _tiny(3, 256, 8),
        "tiny_gpt_l4h192_megatron_300it.log": _tiny(4, 192, 6),
    }
    model = dict(
        zip(
            runs,
            (p["iteration_time_s"] for p in predict_documents(list(runs.values()))),
            strict=True,
        )
    )
    target = "tiny_gpt_l4h192_megatron_300it.log"
    truth_s, _ = _measured_mean_s(target)
    cal = OnlineCalibration()
    errors = []
    for prior in ("tiny_gpt_megatron_900it.log", "tiny_gpt_l3h256_megatron_250it.log"):
        observed_s, n = _measured_mean_s(prior, upto=200)
        cal.observe(
            KEY,
            prior,
            predicted_step_s=model[prior],
            observed_step_s=observed_s,
            num_iterations=n,
            time_s=0.0,
        )
        errors.append(model[target] * cal.correction(KEY).factor / truth_s - 1)
    assert model[target] / truth_s - 1 < -0.99
    assert errors[0] == pytest.approx(-0.24, abs=0.05)
    assert errors[1] == pytest.approx(0.03, abs=0.05)
