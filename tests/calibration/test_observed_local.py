"""The local residual within keys: a key whose error follows its configuration is followed, a
target unlike its key's runs (or a key of few runs) keeps the key's factor, and the term
persists as data."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from planner.calibration.files import ObserveReport
from planner.calibration.local_residual import LocalResidual
from planner.calibration.observed import FORMAT, ObservedCalibration, fit_observed
from planner.calibration.observed_runs import RunKey, RunSample
from planner.calibration.observed_transfer import KEY_LEVEL
from planner.calibration.residual import FEATURES, run_features
from planner.errors import CalibrationError
from planner.scenario import parse_scenario


def _features(tokens: float, gpus: float = 3.0) -> tuple[float, ...]:
    """A dense BF16 run on ``2**gpus`` GPUs with ``2**tokens`` tokens per micro-batch."""
    named = {
        "network_share": 0.1,
        "optimizer_share": 0.02,
        "log2_num_gpus": gpus,
        "log2_tokens_per_microbatch": tokens,
        "log2_seq_per_context_rank": 11.0,
        "log2_hidden_per_tensor_rank": 12.0,
    }
    return tuple(named.get(name, 0.0) for name in FEATURES)


def _key(cluster: str) -> RunKey:
    return RunKey(
        cluster=cluster,
        gpu="a100-sxm-80gb",
        architecture="ampere",
        recipe="bf16",
        framework="foundry",
        family="dense",
    )


def _trend(tokens: float) -> float:
    """The log error of the key that follows its configuration: 15 % too fast below 2^12
    tokens per micro-batch, 15 % too slow above."""
    return 0.15 if tokens >= 12 else -0.15


def _sample(key: RunKey, tokens: float, log_error: float, gpus: float = 3.0) -> RunSample:
    return RunSample(
        key=key,
        compute_s=1.0,
        network_s=0.0,
        observed_s=math.exp(log_error),
        features=_features(tokens, gpus),
        predicted_memory_bytes=1e10,
    )


def _trend_runs() -> list[RunSample]:
    """One key (``trend``) whose error follows the tokens per micro-batch, and three keys
    whose runs scatter by 2 % around the model, all over the same configurations."""
    rng = np.random.default_rng(1)
    runs = []
    for tokens in np.repeat(np.arange(8.0, 16.0), 3):
        runs.append(_sample(_key("trend"), tokens, _trend(tokens) + rng.normal(0, 0.01)))
        for cluster in ("a", "b", "c"):
            runs.append(_sample(_key(cluster), tokens, rng.normal(0, 0.02)))
    return runs


def _local_of(cal: ObservedCalibration, s: RunSample) -> float:
    return math.log(cal.correct(s.key, s.compute_s, s.network_s, s.features).local_factor)


def test_a_key_whose_error_follows_a_feature_is_followed() -> None:
    """The key's single factor sits between its two halves; the local term moves a new run to
    its half: the held-out error drops from about 15 % to a few percent."""
    cal = fit_observed(_trend_runs())
    choice = cal.local.choices_["dense"]
    assert choice.selected == "kernel"
    assert choice.cv_mse["kernel"] < choice.cv_mse["none"] / 4
    for tokens in (8.5, 10.5, 12.5, 15.5):
        target = _sample(_key("trend"), tokens, _trend(tokens))
        found = cal.correct(target.key, target.compute_s, target.network_s, target.features)
        without = abs(found.factor / found.local_factor / target.observed_s - 1)
        with_local = abs(found.factor / target.observed_s - 1)
        assert without > 0.10
        assert with_local < 0.04
    # what it learnt is said in `planner calibrate observe`'s summary
    report = ObserveReport(
        calibration=cal,
        samples=cal.samples,
        errors=[],
        held_out={"prior_mean_abs_error_ratio": 0.1, "calibrated_mean_abs_error_ratio": 0.05},
    )
    assert f"dense kernel (bandwidth {choice.bandwidth:g}, " in report.lines()[3]
    assert report.summary()["local_residual"][0]["selected"] == "kernel"
    # the scattered keys are left where they are: their runs share no trend
    quiet = _sample(_key("a"), 15.5, 0.0)
    assert abs(_local_of(cal, quiet)) < 0.02


def test_a_moe_key_weighs_the_runs_of_the_target_model() -> None:
    """Two MoE models on one key whose errors follow the tokens per micro-batch in opposite
    directions: the model effect holds their means, the local term each model's own trend
    (pooled over the key the two would cancel)."""
    rng = np.random.default_rng(3)
    runs = []
    for tokens in np.repeat(np.arange(8.0, 16.0), 3):
        for cluster in ("a", "b", "c"):
            for model, sign in (("m1", 1.0), ("m2", -1.0)):
                key = replace(_key(cluster), family="moe", model=model)
                trend = sign * _trend(tokens) if cluster == "a" else 0.0
                runs.append(_sample(key, tokens, trend + rng.normal(0, 0.01)))
    cal = fit_observed(runs)
    assert cal.local.choices_["moe"].selected == "kernel"
    for model, sign in (("m1", 1.0), ("m2", -1.0)):
        key = replace(_key("a"), family="moe", model=model)
        for tokens in (8.5, 15.5):
            local = _local_of(cal, _sample(key, tokens, 0.0))
            assert local * sign * _trend(tokens) > 0
            assert abs(local) > 0.08


def test_noise_within_keys_keeps_no_local_term() -> None:
    """Keys whose runs only scatter: cross-validation keeps ``none``, the correction is the
    key's factor."""
    rng = np.random.default_rng(2)
    runs = [
        _sample(_key(cluster), tokens, rng.normal(0, 0.05))
        for tokens in np.repeat(np.arange(8.0, 16.0), 3)
        for cluster in ("a", "b", "c", "d")
    ]
    cal = fit_observed(runs)
    assert cal.local.choices_["dense"].selected == "none"
    assert cal.local.runs_ == {}
    assert _local_of(cal, runs[0]) == 0.0


def test_unlike_or_few_runs_keep_the_key_factor() -> None:
    """A target far from every run of its key, a key of one run and a key never seen get no
    local correction."""
    runs = _trend_runs()
    lone = _sample(_key("lone"), 9.0, 0.3)
    cal = fit_observed([*runs, lone])
    assert cal.local.choices_["dense"].selected == "kernel"
    # same key, a configuration unlike any of its runs (256 GPUs where all ran on 8)
    far = _sample(_key("trend"), 8.5, 0.0, gpus=8.0)
    assert abs(_local_of(cal, far)) < 1e-3
    # one run: its residual is its key's mean, nothing is left to tell configurations apart
    assert _local_of(cal, _sample(_key("lone"), 9.0, 0.0)) == pytest.approx(0.0, abs=1e-12)
    assert _local_of(cal, _sample(_key("never"), 9.0, 0.0)) == 0.0


def test_the_kernel_shrinks_toward_the_key_with_few_near_runs() -> None:
    """One near run moves the target by ``w r / (w + lambda)``, many near runs by nearly their
    mean: the pseudo-runs' shrinkage."""
    model = LocalResidual(bandwidths=(0.5,), pseudo_runs=(1.0,))
    keys = [("dense", "k")] * 12 + [("dense", "j")] * 12
    x = np.asarray([_features(8.0 + (i % 12) * 0.5) for i in range(24)])
    r = np.asarray([0.1 if i % 12 >= 6 else -0.1 for i in range(24)])
    model.fit(x, r, keys)
    assert model.choices_["dense"].selected == "kernel"
    key = ("dense", "k")
    z, residuals = model.runs_[key]
    one = LocalResidual(bandwidths=(0.5,), pseudo_runs=(1.0,))
    one.choices_, one.scale_ = model.choices_, model.scale_
    one.runs_ = {key: (z[-1:], residuals[-1:])}
    target = _features(13.5)
    assert one.predict_one(key, target) == pytest.approx(residuals[-1] / 2, rel=1e-9)
    assert model.predict_one(key, target) > 0.07


def test_the_local_term_persists_as_data() -> None:
    """It round-trips through the file; a file of the previous format names what to do; a
    malformed entry is an error."""
    cal = fit_observed(_trend_runs())
    text = cal.dumps()
    doc = json.loads(text)
    assert doc["format"] == FORMAT
    assert doc["local_residual"]["families"][0]["selected"] == "kernel"
    loaded = ObservedCalibration.from_json(doc)
    for tokens in (8.5, 12.5):
        s = _sample(_key("trend"), tokens, 0.0)
        assert loaded.correct(s.key, 1.0, 0.0, s.features) == cal.correct(
            s.key, 1.0, 0.0, s.features
        )
        assert s.key.path()[KEY_LEVEL] in loaded.local.runs_
    old = dict(doc, format="planner-observed-runs/6")
    del old["local_residual"]
    with pytest.raises(CalibrationError, match="run `planner calibrate observe` again"):
        ObservedCalibration.from_json(old)
    broken = json.loads(text)
    broken["local_residual"]["keys"][0]["residuals"] = broken["local_residual"]["keys"][0][
        "residuals"
    ][:-1]
    with pytest.raises(CalibrationError, match="local residual"):
        ObservedCalibration.from_json(broken)
    other = json.loads(text)
    other["local_residual"]["features"] = ["x"]
    with pytest.raises(CalibrationError, match="calibrate observe"):
        ObservedCalibration.from_json(other)


def test_one_token_count_at_two_sequence_lengths_is_two_configurations() -> None:
    """``log2_seq_per_context_rank`` tells micro-batch 4 at sequence 2,048 from micro-batch 1
    at 8,192 (the same tokens per micro-batch), and context parallelism divides it."""

    def features(seq: int, micro: int, cp: int) -> dict[str, float]:
        scenario = parse_scenario(
            {
                "model": {"preset": "llama3-8b", "seq_length": seq},
                "hardware": {"gpu": "h100-sxm", "num_gpus": 8 * cp},
                "parallelism": {
                    "context_parallel": cp,
                    "micro_batch_size": micro,
                    "global_batch_size": 64,
                },
            }
        )
        return dict(zip(FEATURES, run_features(scenario, {"compute": 1.0}), strict=True))

    short, long = features(2048, 4, 1), features(8192, 1, 1)
    assert short["log2_tokens_per_microbatch"] == long["log2_tokens_per_microbatch"] == 13.0
    assert (short["log2_seq_per_context_rank"], long["log2_seq_per_context_rank"]) == (11.0, 13.0)
    assert features(8192, 1, 2)["log2_seq_per_context_rank"] == 12.0
