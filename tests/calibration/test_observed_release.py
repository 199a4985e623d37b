"""The framework's release in the observed-runs calibration: runs of one release correct another
only through their key (the shrinkage rule of ``planner.calibration.observed``), a release never
seen takes its key's correction, a run that states none is its key's."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from planner.calibration.files import observe_files
from planner.calibration.observed import ObservedRun, fit_observed, observe_runs, run_key
from planner.calibration.observed_fit import fit_tree
from planner.calibration.observed_runs import RunKey, RunSample
from planner.calibration.residual import FEATURES
from planner.scenario import parse_scenario

ZERO_FEATURES = (0.0,) * len(FEATURES)


def _key(release: str) -> RunKey:
    return RunKey(
        cluster="c",
        gpu="gb200",
        architecture="blackwell",
        recipe="mxfp8",
        framework="nemo",
        release=release,
        family="moe",
    )


def _runs(release: str, factor: float, count: int) -> list[RunSample]:
    """``count`` runs of ``release`` whose step is ``factor`` times the model's (compute only,
    a spread of step sizes as a key's layouts give)."""
    return [
        RunSample(
            key=_key(release),
            compute_s=compute,
            network_s=0.0,
            observed_s=factor * compute,
            features=ZERO_FEATURES,
            predicted_memory_bytes=1e10,
        )
        for compute in np.linspace(2.0, 6.0, count)
    ]


def test_one_release_does_not_correct_another() -> None:
    """Container 25.09 runs as predicted, 25.11 1.8x slower on the same key (one release to
    the next changed GB200 Qwen3-30B-A3B's throughput 1.7x at one layout in Megatron-Bridge's
    archive). Pooled in one key, the twelve 25.09 runs set the correction of both (x1.02, the
    25.11 runs down-weighted as outliers); per release, each keeps its own, and a release never
    seen takes its key's."""
    cal = fit_observed(_runs("25.09", 1.0, 12) + _runs("25.11", 1.8, 3))
    old = cal.correct(_key("25.09"), 4.0, 0.0, ZERO_FEATURES)
    new = cal.correct(_key("25.11"), 4.0, 0.0, ZERO_FEATURES)
    assert old.factor == pytest.approx(1.0, abs=0.03)
    assert new.factor == pytest.approx(1.8, rel=0.06)
    assert (old.level, new.level, new.num_runs) == ("release", "release", 3)
    unseen = cal.correct(_key("26.02"), 4.0, 0.0, ZERO_FEATURES)
    key_level = cal.groups[-2][_key("26.02").path()[-2]]
    assert unseen.level == "key"
    assert unseen.factor == pytest.approx(math.exp(key_level.u), rel=1e-9)
    assert 1.0 < unseen.factor < new.factor
    assert unseen.log_sd > new.log_sd


def test_a_release_with_fewer_runs_stays_nearer_its_key() -> None:
    """The shrinkage rule: one 25.11 run moves its release less than three do."""
    seen = _runs("25.09", 1.0, 12)
    one, three = (
        fit_observed(seen + _runs("25.11", 1.8, n)).correct(_key("25.11"), 4.0, 0.0, ZERO_FEATURES)
        for n in (1, 3)
    )
    assert 1.0 < one.factor < three.factor < 1.8


def test_runs_that_state_no_release_are_their_key() -> None:
    """Without a release the calibration is the key's: the release level adds no deviation and
    no uncertainty (what every calibration learnt before the field was)."""
    cal = fit_observed(_runs("", 1.3, 10))
    found = cal.correct(_key(""), 4.0, 0.0, ZERO_FEATURES)
    assert found.level == "key"
    key_group = cal.groups[-2][_key("").path()[-2]]
    release_group = cal.groups[-1][_key("").path()[-1]]
    assert release_group.u == pytest.approx(key_group.u, abs=1e-9)
    assert release_group.var_u == pytest.approx(key_group.var_u, rel=1e-6)


def test_fixed_groups_are_their_parents() -> None:
    """A level whose groups are all fixed gives the posterior of the tree without it."""
    rng = np.random.default_rng(1)
    parents = [np.zeros(1, np.int64), np.zeros(2, np.int64), np.array([0, 0, 1])]
    leaf = np.array([0, 0, 1, 2, 2, 2])
    n = leaf.size
    compute = rng.uniform(1, 3, n)
    network = rng.uniform(0, 1, n)
    observed = np.log(compute + 1.2 * network) + rng.normal(0.1, 0.05, n)
    tau = np.array([[0.2, 0.3], [0.15, 0.2], [0.1, 0.1]])
    common: dict[str, Any] = {
        "compute_s": compute,
        "network_s": network,
        "log_observed": observed,
        "offset": np.zeros(n),
        "noise_log_sd": np.full(n, 0.08),
        "huber_k": 1.5,
        "prior_dof": 2.0,
    }
    short = fit_tree(parents, leaf, prior_log_sd=tau, **common)
    longer = fit_tree(
        [*parents, np.arange(3, dtype=np.int64)],
        leaf,
        prior_log_sd=np.vstack([tau, [[0.3, 0.3]]]),
        fixed=[np.zeros(1, bool), np.zeros(2, bool), np.zeros(3, bool), np.ones(3, bool)],
        **common,
    )
    for level in range(3):
        assert longer.mean[level] == pytest.approx(short.mean[level], abs=1e-8)
        assert longer.cov[level] == pytest.approx(short.cov[level], abs=1e-8)
    assert longer.mean[3] == pytest.approx(short.mean[2], abs=1e-8)


def _document(release: str | None) -> dict[str, Any]:
    training: dict[str, Any] = {"framework": "nemo"}
    if release is not None:
        training["framework_version"] = release
    return {
        "model": {"preset": "llama3-8b", "seq_length": 4096},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"tensor_parallel": 2, "global_batch_size": 64},
        "training": training,
    }


def test_the_release_is_read_from_the_scenario() -> None:
    """``training.framework_version`` is the key's release; the runs' key rows carry it."""
    assert run_key(parse_scenario(_document("25.11")), "c").release == "25.11"
    assert run_key(parse_scenario(_document(None)), "c").release == ""
    runs = [ObservedRun(document=_document("25.11"), iteration_time_s=9.0, source="t", line=1)]
    fit = observe_runs(runs)
    cal, samples, errors = fit.calibration, fit.samples, fit.errors
    assert errors == []
    assert [r["release"] for r in cal.to_json()["runs"]] == ["25.11"]
    assert samples[0].key.release == "25.11"


def test_observe_names_each_keys_release() -> None:
    """``planner calibrate observe`` prints a key's release beside its framework."""
    lines = [
        json.dumps({"scenario": _document(release), "iteration_time_s": time_s})
        for release, time_s in (("25.09", 9.0), ("25.11", 12.0), (None, 10.0))
    ]
    report = observe_files(["runs.jsonl"], lambda _: "\n".join(lines))
    keys = [line for line in report.lines() if line.startswith("  ")]
    assert sorted(line.split(":")[0].split()[3:5] for line in keys) == [
        ["nemo", "25.09"],
        ["nemo", "25.11"],
        ["nemo", "dense"],
    ]
