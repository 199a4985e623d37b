"""The MoE model effect of the observed-runs calibration: a crossed group beside the tree whose
backfitted posterior is the mixed model's, a MoE model's bias carried to a GPU type of its
architecture none of its runs used (not to another architecture), none for dense models, its
runs' noise measured around it, and the file round-trip."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from planner.calibration import observed_fit
from planner.calibration.observed import (
    ObservedCalibration,
    ObservedParams,
    fit_observed,
    observe_runs,
)
from planner.calibration.observed_fit import TreeFit, fit_tree
from planner.calibration.observed_runs import (
    ObservedRun,
    RunKey,
    RunSample,
    model_shape,
    run_key,
)
from planner.calibration.residual import FEATURES
from planner.errors import SpecError
from planner.scenario import parse_scenario, predict_documents

ZERO_FEATURES = (0.0,) * len(FEATURES)
GPT_OSS = "L36-h2880-a64-f2880-v201088-e128x4-m2880"
QWEN = "L94-h4096-a64-f12288-v151936-e128x8-m1536"


def _key(gpu: str, model: str, *, family: str = "moe", architecture: str = "blackwell") -> RunKey:
    return RunKey(
        cluster="c",
        gpu=gpu,
        architecture=architecture,
        recipe="bf16",
        framework="nemo",
        family=family,
        model=model,
    )


def _run(key: RunKey, factor: float, compute_s: float = 1.0) -> RunSample:
    return RunSample(
        key=key,
        compute_s=compute_s,
        network_s=0.0,
        observed_s=factor * compute_s,
        features=ZERO_FEATURES,
        predicted_memory_bytes=1e10,
    )


def _two_models(family: str) -> list[RunSample]:
    """On two GPU types, one model's runs 60 % slower than predicted and another's as
    predicted (three runs each, a few percent apart)."""
    runs = []
    for gpu in ("b200", "gb200"):
        for jitter in (0.97, 1.0, 1.03):
            runs.append(_run(_key(gpu, GPT_OSS, family=family), 1.6 * jitter))
            runs.append(_run(_key(gpu, QWEN, family=family), 1.0 * jitter))
    return runs


def _factor(cal: ObservedCalibration, key: RunKey) -> float:
    return cal.correct(key, 1.0, 0.0, ZERO_FEATURES).factor


def test_the_crossed_effect_is_the_mixed_model_posterior(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear in u (no network terms, no Huber, fixed variances): the backfitted tree and
    crossed group converge to the dense solve of the mixed-model equations with both, and the
    fit's ten steps are within 0.005 of it where every crossed group spans every leaf."""
    rng = np.random.default_rng(1)
    parents = [np.zeros(1, np.int64), np.array([0, 0, 0])]
    leaf = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    crossed = np.array([0, 1, -1, 0, 1, 1, 0, -1])
    n = leaf.size
    compute = rng.uniform(1, 3, n)
    log_observed = np.log(compute) + rng.normal(0.2, 0.15, n)
    tau = np.array([[0.3, 0.3], [0.15, 0.15]])
    tau_c, sigma = 0.2, 0.1

    common: dict[str, Any] = {
        "compute_s": compute,
        "network_s": np.zeros(n),
        "log_observed": log_observed,
        "offset": np.zeros(n),
        "prior_log_sd": tau,
        "noise_log_sd": np.full(n, sigma),
        "huber_k": 1e9,
    }

    def fit() -> TreeFit:
        return fit_tree(parents, leaf, **common, crossed=[crossed], crossed_prior_log_sd=[tau_c])

    # unknowns: root, 3 leaves, 2 crossed groups
    design = np.zeros((n, 6))
    design[:, 0] = 1
    design[np.arange(n), 1 + leaf] = 1
    inside = crossed >= 0
    design[np.arange(n)[inside], 4 + crossed[inside]] = 1
    prior = np.diag(1 / np.r_[tau[0, 0], [tau[1, 0]] * 3, [tau_c] * 2] ** 2)
    covariance = np.linalg.inv(design.T @ design / sigma**2 + prior)
    mean = covariance @ design.T @ (log_observed - np.log(compute)) / sigma**2
    ten = fit()
    assert ten.crossed_mean[0] == pytest.approx(mean[4:], abs=5e-3)
    monkeypatch.setattr(observed_fit, "GN_ITERATIONS", 200)
    converged = fit()
    assert converged.crossed_mean[0] == pytest.approx(mean[4:], abs=1e-6)
    assert converged.mean[1][:, 0] == pytest.approx(mean[0] + mean[1:4], abs=1e-6)
    with pytest.raises(ValueError, match="one entry per crossed factor"):
        fit_tree(parents, leaf, **common, crossed=[crossed])


def test_a_moe_models_bias_reaches_a_gpu_type_its_runs_never_used() -> None:
    cal = fit_observed(_two_models("moe"))
    without = fit_observed(_two_models("moe"), ObservedParams(moe_model_prior_log_sd=0.0))
    new_gpu_slow = _factor(cal, _key("gb300", GPT_OSS))
    new_gpu_fast = _factor(cal, _key("gb300", QWEN))
    # the tree alone gives both models the GPU types' mean; the model effect tells them apart
    assert _factor(without, _key("gb300", GPT_OSS)) == pytest.approx(
        _factor(without, _key("gb300", QWEN))
    )
    assert new_gpu_slow / new_gpu_fast > 1.3
    assert cal.model_effects["blackwell", GPT_OSS].num_runs == 6
    # a model no run has shown gets the tree's factor, with the learnt spread of models
    unseen = cal.correct(_key("gb300", "L2-other"), 1.0, 0.0, ZERO_FEATURES)
    assert new_gpu_fast < unseen.factor < new_gpu_slow
    assert unseen.log_sd > cal.correct(_key("gb300", QWEN), 1.0, 0.0, ZERO_FEATURES).log_sd


def test_a_models_effect_stays_on_its_gpu_architecture() -> None:
    """The model errs differently per GPU generation (as per model family: ``LEVELS``): what
    one MoE model's Blackwell runs say does not reach its runs on Hopper."""
    cal = fit_observed(_two_models("moe"))
    hopper = [_key("h100-sxm", model, architecture="hopper") for model in (GPT_OSS, QWEN)]
    assert _factor(cal, hopper[0]) == pytest.approx(_factor(cal, hopper[1]))


def test_dense_models_get_no_model_effect() -> None:
    cal = fit_observed(_two_models("dense"))
    assert cal.model_effects == {}
    assert _factor(cal, _key("gb300", GPT_OSS, family="dense")) == pytest.approx(
        _factor(cal, _key("gb300", QWEN, family="dense"))
    )


def test_a_moe_runs_noise_is_its_spread_around_its_model() -> None:
    """Two models on one key that differ by 60 %: with the model effect that difference is the
    effect's, not the runs' noise."""
    with_effect = fit_observed(_two_models("moe")).noise_log_sd["moe"]
    params = ObservedParams(moe_model_prior_log_sd=0.0)
    without = fit_observed(_two_models("moe"), params).noise_log_sd["moe"]
    assert with_effect < 0.08 < 0.15 < without


def test_the_model_effects_read_back_from_the_file() -> None:
    cal = fit_observed(_two_models("moe"))
    back = ObservedCalibration.from_json(json.loads(cal.dumps()))
    for model in (GPT_OSS, QWEN, "L2-other"):
        key = _key("gb300", model)
        assert back.correct(key, 1.0, 0.0, ZERO_FEATURES) == cal.correct(
            key, 1.0, 0.0, ZERO_FEATURES
        )
    assert back.params.moe_model_prior_log_sd == 0.10
    assert [s.key.model for s in back.samples] == [s.key.model for s in cal.samples]


def test_a_negative_model_sd_is_refused_by_name() -> None:
    with pytest.raises(SpecError, match="moe_model_prior_log_sd"):
        ObservedParams(moe_model_prior_log_sd=-0.1)


def test_the_key_of_a_scenario_carries_its_models_shape_dispatcher_and_routing_mode() -> None:
    """Each token dispatcher is its own model effect, and so is a learnt router without a
    capacity (dropless); forced or round-robin balance and a capacity factor share the
    shape's and dispatcher's. A dense model's label is its shape."""

    def label(**routing: object) -> str:
        doc = {
            "model": {"preset": "qwen3-235b-a22b", **routing},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 64},
            "parallelism": {
                "expert_parallel": 8,
                "pipeline_parallel": 2,
                "global_batch_size": 64,
            },
        }
        scenario = parse_scenario(doc)
        assert model_shape(scenario.model) == QWEN
        return run_key(scenario).model

    balanced = {"moe_router_force_load_balancing": True}
    assert label() == f"{QWEN}-alltoall-dropless"
    assert label(**balanced) == f"{QWEN}-alltoall"
    assert label(moe_router_round_robin=True) == f"{QWEN}-alltoall"
    assert label(moe_expert_capacity_factor=1.0) == f"{QWEN}-alltoall"
    capped = {"moe_expert_capacity_factor": 1.0, "moe_pad_expert_input_to_capacity": True}
    assert label(**capped) == f"{QWEN}-alltoall"
    assert label(moe_token_dispatcher_type="flex", **balanced) == f"{QWEN}-flex"
    assert label(moe_token_dispatcher_type="allgather") == f"{QWEN}-allgather-dropless"
    dense = parse_scenario(
        {
            "model": {"preset": "llama3-8b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {"global_batch_size": 64},
        }
    )
    assert run_key(dense).model == model_shape(dense.model)


def test_one_far_run_does_not_set_its_groups_effect() -> None:
    """A key whose runs of one model are 10-20 % over the prediction and whose one run of
    another model is 2.5x (0.9 in log), that model's other runs on another key as predicted:
    the far run is mostly its key's, and the model's effect keeps near its other runs (Huber
    within the group; 0.13 without)."""
    parents = [np.zeros(1, np.int64), np.zeros(2, np.int64)]
    leaf = np.array([0, 0, 0, 0, 1, 1])
    crossed = np.array([1, 1, 1, 0, 0, 0])
    log_ratio = np.array([0.1, 0.15, 0.2, 0.9, 0.0, 0.02])
    n = leaf.size
    fit = fit_tree(
        parents,
        leaf,
        compute_s=np.ones(n),
        network_s=np.zeros(n),
        log_observed=log_ratio,
        offset=np.zeros(n),
        prior_log_sd=np.array([[0.3, 0.3], [0.1, 0.1]]),
        noise_log_sd=np.full(n, 0.1),
        huber_k=1.5,
        crossed=[crossed],
        crossed_prior_log_sd=[0.3],
    )
    assert abs(fit.crossed_mean[0][0]) < 0.05


def test_the_runs_of_one_model_routed_two_ways_are_corrected_apart() -> None:
    """One key's runs of one MoE model at three sequence lengths, each routed dropless and with
    forced balance: the dropless runs 15 % over the prediction, the balanced ones as
    predicted. A new run of either mode gets its own mode's correction."""
    docs = [
        {
            "model": {"preset": "mixtral-8x7b", "seq_length": seq, **routing},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 64},
            "parallelism": {"expert_parallel": 8, "global_batch_size": 64},
        }
        for seq in (2048, 4096, 8192)
        for routing in ({}, {"moe_router_force_load_balancing": True})
        for _ in range(3)
    ]
    runs = [
        ObservedRun(
            document=doc,
            iteration_time_s=(1.0 if doc["model"].get("moe_router_force_load_balancing") else 1.15)
            * predicted["iteration_time_s"],
            cluster="c",
        )
        for doc, predicted in zip(docs, predict_documents(docs), strict=True)
    ]
    fit = observe_runs(runs)
    cal, samples, skipped = fit.calibration, fit.samples, fit.errors
    assert (len(samples), skipped) == (len(docs), [])

    def factor(**routing: object) -> float:
        doc = {
            "model": {"preset": "mixtral-8x7b", "seq_length": 3072, **routing},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 64},
            "parallelism": {"expert_parallel": 8, "global_batch_size": 64},
        }
        (found,) = predict_documents([doc], calibration=cal, cluster="c")
        return float(found["calibration"]["factor"])

    dropless, balanced = factor(), factor(moe_router_force_load_balancing=True)
    assert dropless / balanced == pytest.approx(1.15, rel=0.04)


def test_the_runs_of_one_model_on_two_dispatchers_are_corrected_apart() -> None:
    """One model's forced-balance runs on two Blackwell GPU types, each with the flex
    dispatcher (60 % over the prediction) and all-to-all (as predicted), at three sequence
    lengths: a new run of either dispatcher on a third GPU type of the architecture gets its
    own dispatcher's correction, not one pooled over both."""

    def doc(gpu: str, dispatcher: str, seq: int) -> dict[str, Any]:
        return {
            "model": {
                "preset": "qwen3-30b-a3b",
                "seq_length": seq,
                "moe_router_force_load_balancing": True,
                "moe_token_dispatcher_type": dispatcher,
            },
            "hardware": {"gpu": gpu, "num_gpus": 8},
            "parallelism": {"expert_parallel": 8, "global_batch_size": 64},
        }

    docs = [
        doc(gpu, dispatcher, seq)
        for gpu in ("gb200", "b200")
        for dispatcher in ("flex", "alltoall")
        for seq in (2048, 4096, 8192)
    ]
    runs = [
        ObservedRun(
            document=d,
            iteration_time_s=(1.6 if d["model"]["moe_token_dispatcher_type"] == "flex" else 1.0)
            * predicted["iteration_time_s"],
            cluster="c",
        )
        for d, predicted in zip(docs, predict_documents(docs), strict=True)
    ]
    fit = observe_runs(runs)
    cal, samples, skipped = fit.calibration, fit.samples, fit.errors
    assert (len(samples), skipped) == (len(docs), [])
    flex, alltoall = (
        float(found["calibration"]["factor"])
        for found in predict_documents(
            [doc("gb300", "flex", 3072), doc("gb300", "alltoall", 3072)],
            calibration=cal,
            cluster="c",
        )
    )
    assert flex / alltoall == pytest.approx(1.6, rel=0.05)


def _routed_run(model: str, share: float, slower: float, *, given: bool = True) -> RunSample:
    """A run of ``model`` on one Hopper key whose routed experts hold ``share`` of its 10 s of
    compute and take ``slower`` times their predicted seconds (``given`` False: a prediction
    without ``moe_routed_compute_s``)."""
    key = _key("h100-sxm", model, architecture="hopper")
    routed = share * 10.0
    return RunSample(
        key=key,
        compute_s=10.0,
        network_s=0.0,
        observed_s=10.0 + routed * (slower - 1.0),
        features=ZERO_FEATURES,
        predicted_memory_bytes=1e10,
        routed_s=routed if given else None,
    )


DROPLESS_QWEN = f"{QWEN}-dropless"


def _long_context_error(model: str, *, given: bool) -> tuple[float, ObservedCalibration]:
    """``model``'s routed experts 1.6x slower than predicted at every sequence length, seen at
    lengths where they hold about half the compute, beside MoE runs of the key that are
    predicted well (of a model whose shape is not stated: no effect of their own, so they
    set the key's factor); the calibrated error at a length where they hold a fifth (its step
    12 % over the prediction there, 25-30 % at the short lengths), and the calibration."""
    runs = [_routed_run("", share, 1.0, given=given) for share in (0.1, 0.3, 0.5) * 2]
    runs += [_routed_run(model, share, 1.6, given=given) for share in (0.5, 0.45, 0.5, 0.45)]
    cal = fit_observed(runs)
    target = _routed_run(model, 0.2, 1.6, given=given)
    found = cal.correct(target.key, 10.0, 0.0, ZERO_FEATURES, routed_s=target.routed_s)
    return 10.0 * found.factor / target.observed_s - 1.0, cal


def test_a_dropless_models_effect_multiplies_its_routed_experts_seconds() -> None:
    """Routed dropless by a learnt router, the model's effect multiplies the routed experts'
    seconds: learnt where they hold half the compute, it predicts the long context within
    2 %, a factor beyond the short lengths' whole-step log ratio."""
    error, cal = _long_context_error(DROPLESS_QWEN, given=True)
    assert abs(error) < 0.02
    assert cal.model_effects["hopper", DROPLESS_QWEN].u > math.log(1.0 + 0.5 * 0.6)


@pytest.mark.parametrize(("model", "given"), [(DROPLESS_QWEN, False), (QWEN, True)])
def test_an_effect_on_all_the_compute_carries_the_short_lengths_bias(
    model: str, *, given: bool
) -> None:
    """Without the routed seconds (a prediction that does not give them), or for a model
    whose routing the model knows (forced balance, a capacity: ``observed_runs.model_label``),
    the effect multiplies all the compute terms: it carries the short lengths' 28 % to the
    long context, 12 % over."""
    error, _ = _long_context_error(model, given=given)
    assert error > 0.10


def test_the_routed_part_of_a_prediction_takes_the_dropless_models_effect() -> None:
    cal = fit_observed([_routed_run(DROPLESS_QWEN, share, 1.6) for share in (0.5, 0.45, 0.4)])
    key = _key("h100-sxm", DROPLESS_QWEN, architecture="hopper")
    effect = cal.model_effects["hopper", DROPLESS_QWEN].u
    whole = cal.correct(key, 10.0, 2.0, ZERO_FEATURES)
    assert whole == cal.correct(key, 10.0, 2.0, ZERO_FEATURES, routed_s=10.0)
    part = cal.correct(key, 10.0, 2.0, ZERO_FEATURES, routed_s=2.0)
    assert 1.0 < part.factor < whole.factor
    # the compute terms' factor: the tree's on all of them, the effect on their routed fifth
    tree = whole.compute_factor / math.exp(effect)
    assert part.compute_factor == pytest.approx(tree * (1.0 + 0.2 * math.expm1(effect)))


def test_the_routed_seconds_of_the_runs_read_back_from_the_file() -> None:
    """A run stored without ``routed_s`` (a file of an earlier planner) reads back as None."""
    runs = [_routed_run(DROPLESS_QWEN, 0.5, 1.6), _routed_run(DROPLESS_QWEN, 0.4, 1.6, given=False)]
    cal = fit_observed(runs)
    doc = json.loads(cal.dumps())
    assert [r["routed_s"] for r in doc["runs"]] == [5.0, None]
    back = ObservedCalibration.from_json(doc)
    assert [s.routed_s for s in back.samples] == [5.0, None]
    key = _key("h100-sxm", DROPLESS_QWEN, architecture="hopper")
    assert back.correct(key, 10.0, 1.0, ZERO_FEATURES, routed_s=3.0) == cal.correct(
        key, 10.0, 1.0, ZERO_FEATURES, routed_s=3.0
    )
    del doc["runs"][0]["routed_s"]
    assert ObservedCalibration.from_json(doc).samples[0].routed_s is None
