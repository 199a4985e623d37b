"""Calibration from observed runs: the tree posterior is exact, the factors are recovered and
shrunk toward the prior, unseen GPUs learn from their architecture, the file round-trips."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.calibration.files import load_calibration_file, parse_json
from planner.calibration.observed import (
    FORMAT,
    ObservedCalibration,
    ObservedParams,
    cross_validated_errors,
    fit_observed,
    observe_runs,
)
from planner.calibration.observed_fit import fit_tree
from planner.calibration.observed_runs import (
    LEVELS,
    RunKey,
    RunSample,
    read_observed_runs,
    run_key,
)
from planner.calibration.residual import FEATURES, ResidualModel
from planner.errors import CalibrationError, SpecError
from planner.scenario import parse_scenario, predict_documents

ZERO_FEATURES = (0.0,) * len(FEATURES)


def _key(gpu: str = "h100-sxm", *, arch: str = "hopper", cluster: str = "c") -> RunKey:
    return RunKey(
        cluster=cluster,
        gpu=gpu,
        architecture=arch,
        recipe="bf16",
        framework="megatron",
        family="dense",
    )


def _run(
    key: RunKey, compute_s: float, network_s: float, factors: tuple[float, float]
) -> RunSample:
    observed = factors[0] * compute_s + factors[1] * network_s
    return RunSample(
        key=key,
        compute_s=compute_s,
        network_s=network_s,
        observed_s=observed,
        features=ZERO_FEATURES,
        predicted_memory_bytes=1e10,
    )


def test_tree_posterior_is_the_mixed_model_solution() -> None:
    """Without network terms the model is linear in u: the two-pass posterior equals the dense
    solve of the mixed-model equations (means and covariances of every leaf's total)."""
    rng = np.random.default_rng(0)
    # a three-level tree: root -> 2 groups -> 5 leaves
    parents = [np.zeros(1, np.int64), np.zeros(2, np.int64), np.array([0, 0, 1, 1, 1])]
    leaf = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4])
    n = leaf.size
    compute = rng.uniform(1, 3, n)
    log_observed = np.log(compute) + rng.normal(0.1, 0.1, n)
    tau = np.array([[0.2, 0.3], [0.15, 0.2], [0.1, 0.1]])
    sigma = np.full(n, 0.08)
    fit = fit_tree(
        parents,
        leaf,
        compute_s=compute,
        network_s=np.zeros(n),
        log_observed=log_observed,
        offset=np.zeros(n),
        prior_log_sd=tau,
        noise_log_sd=sigma,
        huber_k=1e9,
    )
    # dense: unknowns = root, 2 groups, 5 leaves (u only)
    group_of_leaf = parents[2]
    design = np.zeros((n, 8))
    design[:, 0] = 1
    design[np.arange(n), 1 + group_of_leaf[leaf]] = 1
    design[np.arange(n), 3 + leaf] = 1
    prior_precision = np.diag(1 / np.r_[tau[0, 0], tau[1, 0], tau[1, 0], [tau[2, 0]] * 5] ** 2)
    precision = design.T @ design / 0.08**2 + prior_precision
    covariance = np.linalg.inv(precision)
    mean = covariance @ design.T @ (log_observed - np.log(compute)) / 0.08**2
    for g in range(5):
        path = np.zeros(8)
        path[[0, 1 + group_of_leaf[g], 3 + g]] = 1
        assert fit.mean[2][g, 0] == pytest.approx(path @ mean, abs=1e-9)
        assert fit.cov[2][g, 0, 0] == pytest.approx(path @ covariance @ path, rel=1e-9)


def test_compute_and_network_factors_are_told_apart_when_shares_differ() -> None:
    key = _key()
    shares = np.linspace(0.05, 0.6, 30)
    runs = [_run(key, 10 * (1 - s), 10 * s, (1.2, 1.6)) for s in shares]
    cal = fit_observed(runs)
    group = cal.groups[-1][key.path()[-1]]
    assert math.exp(group.u) == pytest.approx(1.2, rel=0.03)
    assert math.exp(group.u + group.v) == pytest.approx(1.6, rel=0.05)
    assert group.network_separated
    # a new layout with another communication share inherits both
    found = cal.correct(key, 5.0, 5.0, ZERO_FEATURES)
    assert found.factor == pytest.approx((1.2 * 5 + 1.6 * 5) / 10, rel=0.03)
    assert found.network_separated


def test_one_share_gives_one_factor_for_the_step() -> None:
    key = _key()
    runs = [_run(key, 8.0, 2.0, (1.25, 1.25)) for _ in range(20)]
    cal = fit_observed(runs)
    group = cal.groups[-1][key.path()[-1]]
    assert not group.network_separated
    found = cal.correct(key, 8.0, 2.0, ZERO_FEATURES)
    assert found.factor == pytest.approx(1.25, rel=0.03)


def test_few_runs_are_shrunk_toward_the_prior() -> None:
    key = _key()
    runs = [_run(key, 10.0, 0.0, (1.3, 1.3)) for _ in range(10)]
    one = fit_observed(runs[:1]).correct(key, 10.0, 0.0, ZERO_FEATURES)
    ten = fit_observed(runs).correct(key, 10.0, 0.0, ZERO_FEATURES)
    assert 1.0 < one.factor < ten.factor < 1.3 + 1e-9
    assert ten.factor == pytest.approx(1.3, rel=0.04)
    assert ten.log_sd < one.log_sd
    assert (one.level, ten.num_runs) == ("key", 10)


def test_an_unseen_gpu_learns_from_its_architecture() -> None:
    """B300 has no run: its correction comes from the other Blackwell parts'."""
    runs = []
    for gpu in ("b200", "gb200", "gb300"):
        key = _key(gpu, arch="blackwell")
        runs += [_run(key, 10.0 + i, 0.0, (1.3, 1.3)) for i in range(6)]
    hopper = _key()
    runs += [_run(hopper, 10.0 + i, 0.0, (1.0, 1.0)) for i in range(6)]
    cal = fit_observed(runs)
    b300 = cal.correct(_key("b300", arch="blackwell"), 10.0, 0.0, ZERO_FEATURES)
    assert b300.level == "architecture_bits"
    assert b300.factor > 1.15
    assert cal.correct(hopper, 10.0, 0.0, ZERO_FEATURES).factor == pytest.approx(1.0, abs=0.05)
    assert b300.log_sd > cal.correct(_key("b200", arch="blackwell"), 10, 0, ZERO_FEATURES).log_sd


def test_one_generations_family_bias_stays_on_its_generation() -> None:
    """MoE runs 40 % slower than the model on Blackwell and as predicted on Hopper (dense as
    predicted on both): a Hopper MoE GPU type no run has seen inherits Hopper's MoE runs, not
    Blackwell's bias through a family level shared across generations."""
    runs = []
    for gpu, arch, moe_factor in (
        ("b200", "blackwell", 1.4),
        ("gb200", "blackwell", 1.4),
        ("h100-sxm", "hopper", 1.0),
    ):
        for family, factor in (("moe", moe_factor), ("dense", 1.0)):
            key = replace(_key(gpu, arch=arch), family=family)
            runs += [_run(key, 10.0 + i, 0.0, (factor, factor)) for i in range(6)]
    cal = fit_observed(runs)
    h200 = cal.correct(replace(_key("h200", arch="hopper"), family="moe"), 10.0, 0.0, ZERO_FEATURES)
    assert h200.factor == pytest.approx(1.0, abs=0.01)
    b300 = cal.correct(
        replace(_key("b300", arch="blackwell"), family="moe"), 10.0, 0.0, ZERO_FEATURES
    )
    assert b300.factor > 1.25


def test_no_run_corrects_nothing() -> None:
    cal = fit_observed([])
    found = cal.correct(_key(), 10.0, 1.0, ZERO_FEATURES)
    assert (found.factor, found.level, found.num_runs) == (1.0, "none", 0)
    assert found.log_sd > 0.2


def test_residual_model_keeps_nothing_for_noise_and_ridge_for_a_trend() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(80, len(FEATURES)))
    noise = ResidualModel().fit(x, rng.normal(0, 0.05, 80))
    assert noise.selected_ == "none"
    assert noise.predict_one(x[0].tolist()) == 0.0
    trend = ResidualModel().fit(x, 0.2 * x[:, 0] + rng.normal(0, 0.02, 80))
    assert trend.selected_ == "ridge"
    assert trend.cv_mse_["ridge"] < trend.cv_mse_["none"]
    far = [100.0] + [0.0] * (len(FEATURES) - 1)  # clipped to the training range
    edge = [float(x[:, 0].max())] + [0.0] * (len(FEATURES) - 1)
    assert trend.predict_one(far) == pytest.approx(trend.predict_one(edge))
    again = ResidualModel.from_json(json.loads(json.dumps(trend.to_json())))
    assert again.predict_one(x[1].tolist()) == pytest.approx(trend.predict_one(x[1].tolist()))


def test_few_runs_fit_no_residual_model() -> None:
    x = np.ones((5, len(FEATURES)))
    assert ResidualModel().fit(x, np.ones(5)).selected_ == "none"
    with pytest.raises(CalibrationError, match="X must be"):
        ResidualModel().fit(np.ones((5, 2)), np.ones(5))


# -- runs as files, end to end -------------------------------------------------------------


def _scenario(
    tp: int, dp: int, *, gpu: str = "h100-sxm", framework: str = "megatron"
) -> dict[str, Any]:
    return {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": gpu, "num_gpus": tp * dp},
        "parallelism": {"tensor_parallel": tp, "global_batch_size": 16 * dp},
        "training": {"framework": framework},
    }


def _runs_text(factor: float, cluster: str = "east") -> str:
    docs = [_scenario(tp, dp) for tp in (1, 2, 4, 8) for dp in (1, 2, 4)]
    lines = []
    for doc, result in zip(docs, predict_documents(docs), strict=True):
        line = {
            "scenario": doc,
            "iteration_time_s": factor * result["iteration_time_s"],
            "memory_per_gpu_bytes": 0.9 * result["memory_per_gpu_bytes"],
            "cluster": cluster,
        }
        lines.append(json.dumps(line))
    return "\n".join(lines) + "\n"


def test_observe_then_predict_adds_the_calibrated_fields() -> None:
    runs, errors = read_observed_runs(_runs_text(1.25), "runs.jsonl")
    assert not errors
    fit = observe_runs(runs)
    cal, samples, left_out = fit.calibration, fit.samples, fit.errors
    assert (len(samples), left_out) == (12, [])
    doc = _scenario(2, 8)
    plain = predict_documents([doc])[0]
    (calibrated,) = predict_documents([doc], calibration=cal, cluster="east")
    for name in ("iteration_time_s", "tokens_per_s", "mfu", "memory_per_gpu_bytes"):
        assert calibrated[name] == plain[name]  # the model's fields as the model computed them
    assert calibrated["calibrated_iteration_time_s"] == pytest.approx(
        1.25 * plain["iteration_time_s"], rel=0.05
    )
    assert calibrated["calibrated_tokens_per_s"] == pytest.approx(
        plain["tokens_per_s"] / calibrated["calibration"]["factor"]
    )
    assert calibrated["calibrated_memory_per_gpu_bytes"] == pytest.approx(
        0.9 * plain["memory_per_gpu_bytes"], rel=0.03
    )
    info = calibrated["calibration"]
    assert (info["method"], info["level"], info["num_jobs"]) == ("observed_runs", "key", 12)
    assert info["key"]["cluster"] == "east"
    # another cluster is not lent this one's factor: with one cluster's runs alone, its bias
    # and the model's cannot be told apart (observed_transfer.lent_level)
    (elsewhere,) = predict_documents([doc], calibration=cal, cluster="west")
    where = elsewhere["calibration"]
    assert isinstance(where, dict)
    assert where["level"] == "none"
    assert where["factor"] == pytest.approx(1.0, abs=0.01)
    assert where["log_sd"] > info["log_sd"]
    # an invalid scenario keeps its error line
    (bad,) = predict_documents([{"name": "x"}], calibration=cal)
    assert "error" in bad
    assert "calibration" not in bad


def test_held_out_error_improves_on_a_biased_model() -> None:
    runs, _ = read_observed_runs(_runs_text(1.3), "runs.jsonl")
    samples = observe_runs(runs).samples
    held = cross_validated_errors(samples)
    assert held["prior_mean_abs_error_ratio"] == pytest.approx(0.3 / 1.3, rel=1e-6)
    assert held["calibrated_mean_abs_error_ratio"] < 0.05
    # the online calibration on the same folds learns the same 1.3 (one factor per key)
    jobs = [(100, 0.0)] * len(samples)
    online = cross_validated_errors(samples, online_jobs=jobs)["online_mean_abs_error_ratio"]
    assert online < 0.05
    with pytest.raises(SpecError, match="online_jobs"):
        cross_validated_errors(samples, online_jobs=jobs[1:])


def test_names_are_normalised_as_the_parser_does() -> None:
    upper = _scenario(1, 1, gpu="H100-SXM", framework="Megatron")
    assert run_key(parse_scenario(upper), "c") == run_key(parse_scenario(_scenario(1, 1)), "c")
    key = run_key(parse_scenario(_scenario(1, 1)), "c")
    assert (key.gpu, key.recipe, key.framework, key.family) == (
        "h100-sxm",
        "bf16",
        "megatron",
        "dense",
    )
    assert [len(p) for p in key.path()] == [0, 1, 2, 3, 3, 5, 6]
    assert len(LEVELS) == len(key.path())


def test_bad_runs_are_reported_by_line() -> None:
    # Llama 3 8B, 16 sequences of 8192 tokens on one H100: 20 s per step is about 38 % MFU
    good = json.dumps({"scenario": _scenario(1, 1), "iteration_time_s": 20.0})
    text = "\n".join(
        [
            good,
            "not json",
            json.dumps({"scenario": _scenario(1, 1), "iteration_time_s": 20.0, "when": 1}),
            json.dumps({"scenario": _scenario(1, 1)}),
            json.dumps({"scenario": _scenario(1, 1), "iteration_time_s": -1}),
            json.dumps({"scenario": {"model": {}}, "iteration_time_s": 1.0}),
            json.dumps(
                {"scenario": _scenario(1, 1), "iteration_time_s": 20.0, "tokens_per_s": 1.0}
            ),
            json.dumps({"scenario": _scenario(1, 1), "tokens_per_s": 8192 * 16 / 20.0}),
        ]
    )
    runs, errors = read_observed_runs(text, "r.jsonl")
    assert [e.split(":")[1] for e in errors] == ["2", "3", "4", "5"]
    assert "when: unknown field" in errors[1]
    assert "iteration_time_s: missing" in errors[2]
    fit = observe_runs(runs)
    samples, left_out = fit.samples, fit.errors
    assert len(samples) == 2
    assert [e.split(":")[1] for e in left_out] == ["6", "7"]
    assert "tokens_per_s" in left_out[1]
    assert samples[1].observed_s == pytest.approx(20.0)


def test_the_file_round_trips_and_is_told_from_operator_models() -> None:
    runs, _ = read_observed_runs(_runs_text(1.2), "runs.jsonl")
    fit = observe_runs(runs)
    cal, samples = fit.calibration, fit.samples
    text = cal.dumps()
    assert parse_json(text, "f")["format"] == FORMAT
    efficiency, loaded = load_calibration_file(text, source="obs.json")
    assert efficiency is None
    assert isinstance(loaded, ObservedCalibration)
    for s in samples:
        a = cal.correct(s.key, s.compute_s, s.network_s, s.features)
        b = loaded.correct(s.key, s.compute_s, s.network_s, s.features)
        assert a == b
    assert loaded.stale_warnings() == []
    with pytest.raises(CalibrationError, match="neither planner-calibration/1"):
        load_calibration_file('{"model": {}}', source="scenario.json")
    with pytest.raises(CalibrationError, match=r"obs\.json: not JSON"):
        load_calibration_file("{", source="obs.json")
    broken = json.loads(text)
    broken["groups"][0]["var_u"] = "x"
    with pytest.raises(CalibrationError, match="malformed"):
        load_calibration_file(json.dumps(broken), source="obs.json")
    older = dict(json.loads(text), format="planner-observed-runs/10")
    with pytest.raises(CalibrationError, match="run `planner calibrate observe`"):
        load_calibration_file(json.dumps(older), source="obs.json")
    newer = dict(json.loads(text), format="planner-observed-runs/12")
    with pytest.raises(CalibrationError, match="this planner reads planner-observed-runs/11"):
        load_calibration_file(json.dumps(newer), source="obs.json")
    stale = ObservedCalibration.from_json(dict(json.loads(text), prior={"planner_version": "0"}))
    assert "may be stale" in stale.stale_warnings()[0]


def test_params_are_checked() -> None:
    with pytest.raises(Exception, match="prior_log_sd"):
        ObservedParams(prior_log_sd=((0.1, 0.1),))
    with pytest.raises(Exception, match="residual_min_runs"):
        ObservedParams(residual_min_runs=1)


def test_a_step_beyond_the_gpus_peak_is_left_out_naming_it() -> None:
    """A run whose measured step would put its scenario's model FLOPs above its GPUs' dense
    peak (a step time of another job, or a scenario far larger than the run) is left out with
    a reason naming ``iteration_time_s``; the others are learnt from as without it. Here the
    run's step is the one that runs the model FLOPs at 3x the GPUs' peak."""
    text = _runs_text(1.25)
    doc = _scenario(2, 8)
    plain = predict_documents([doc])[0]
    impossible = {"scenario": doc, "iteration_time_s": plain["iteration_time_s"] * plain["mfu"] / 3}
    runs, errors = read_observed_runs(text + json.dumps(impossible) + "\n", "runs.jsonl")
    assert not errors
    fit = observe_runs(runs)
    cal, samples, left_out = fit.calibration, fit.samples, fit.errors
    assert len(samples) == 12
    (reason,) = left_out
    assert reason.startswith("runs.jsonl:13: iteration_time_s: ")
    assert "3 times its GPUs' dense peak" in reason
    without = observe_runs(read_observed_runs(text, "runs.jsonl")[0]).calibration
    (a,) = predict_documents([doc], calibration=cal, cluster="east")
    (b,) = predict_documents([doc], calibration=without, cluster="east")
    assert a["calibrated_iteration_time_s"] == b["calibrated_iteration_time_s"]
