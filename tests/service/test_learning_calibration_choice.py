"""Which correction a queued job's prediction gets when the cluster has both: the online
calibration's (learnt from the running jobs' steps) or the learnt one (fitted on the finished
runs). The learnt one takes the online one's place only where its held-out error, measured
against the online one's on the same folds, is no worse; with one run there are no folds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from benchmarks.learning_outliers import observed_run_row
from planner.perf.step import predict_batch
from planner.scenario.documents import prediction_json
from planner.scenario.parse import parse_scenario
from planner.service.learning import (
    Learner,
    Learning,
    LearningConfig,
    calibrate_prediction,
    learnt_of,
    model_fields,
)
from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_learning_service import (
    SLOWER,
    learn,
    predict,
    run_to_the_end,
    running_job,
    scenario_doc,
    write_scenario,
)
from .test_service import app_for, cycle, job_view

ONLINE = "step"
"""The ``calibration.method`` of the online calibration's whole-step correction."""


def queue(
    client: TestClient,
    source: ScriptedSource,
    make_job: JobFactory,
    root: Path,
    doc: Any,
    job_id: str = "q",
) -> dict[str, Any]:
    """The prediction of a job queued now with ``doc`` as its scenario file."""
    job = make_job(
        job_id=job_id,
        status=JobStatus.PENDING,
        comment=f"planner:scenario={write_scenario(root, doc)}",
    )
    source.set_jobs(job)
    cycle(client)
    return job_view(client, job_id)["prediction"]  # type: ignore[no-any-return]


def ratio(prediction: dict[str, Any]) -> float:
    return float(prediction["calibrated_iteration_time_s"] / prediction["iteration_time_s"])


def _slower_runs(
    store: SqlStore, docs: list[dict[str, Any]], queued: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Store a run of each of ``docs`` at ``SLOWER`` times the model's step; returns the
    model's prediction of each document and of ``queued``, by name."""
    model: dict[str, dict[str, Any]] = {
        doc["name"]: dict(prediction_json(prediction, doc["name"]))
        for doc, prediction in zip(
            [*docs, queued],
            predict_batch([parse_scenario(d) for d in [*docs, queued]]),
            strict=True,
        )
    }
    with store.unit_of_work() as uow:
        for i, doc in enumerate(docs):
            step_s = SLOWER * model[doc["name"]]["iteration_time_s"]
            uow.put_observed_run(observed_run_row(doc, step_s, job_id=i, cluster="test"))
    return model


def test_after_one_run_a_queued_job_keeps_the_online_correction(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """One run ``SLOWER`` times slower than the model (its log's step times): the online
    calibration learnt the pace from its many steps; the learnt fit of that one run is shrunk
    toward the model and has no held-out error to show it does better, so the queued job
    keeps the online correction. The API's predictions, which the online calibration does not
    correct, take the learnt one."""
    done, queued = scenario_doc("a", 2, 128), scenario_doc("b", 4, 192)
    job, log = running_job(cluster_root, make_job, clock, done, "1")
    with app_for(db_url, source, clock) as client:
        model_step = predict(client, done)["iteration_time_s"]
        run_to_the_end(client, source, clock, job, log, step_ms=1000 * SLOWER * model_step)
        measured = job_view(client, "1")["eta"]["observed_step_time_s"]
        pace = measured / model_step  # SLOWER, as the log's 0.1 ms rounding left it
        assert learn(client) == {"slurm/test": "ok"}
        clock.now += 30
        prediction = queue(client, source, make_job, cluster_root, queued)
        assert prediction["calibration"]["method"] == ONLINE
        online = ratio(prediction)

        store = client.app.state.planner.store  # type: ignore[attr-defined]
        learnt = learnt_of(store.calibration("observed/slurm/test"))
        assert learnt is not None
        assert learnt.applied
        assert not learnt.replaces_online
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert (listing["applied"], listing["replaces_online"]) == (True, False)
        assert listing["online_error_ratio"] is None  # one run: no folds
        by_learnt = learnt.calibration.apply(
            model_fields(prediction), parse_scenario(queued), cluster="test"
        )
        shrunk = ratio(by_learnt)
        assert abs(online - pace) < abs(shrunk - pace)
        assert shrunk < online == pytest.approx(pace, rel=0.005)

        from_api = predict(client, queued)
        assert from_api["calibration"]["method"] == "observed_runs"
        assert ratio(from_api) == pytest.approx(shrunk, rel=1e-9)


def test_a_learnt_fit_whose_held_out_error_beats_the_online_one_takes_its_place(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """BF16 runs ``SLOWER`` times and FP16 runs 1.5 times slower than the model on one GPU type
    and framework: the online calibration's key (cluster, GPU, framework) mixes them, the
    learnt one keeps a key per precision. After the first run the online correction stays;
    after six the learnt one's held-out error is below the online one's, and a job queued
    before that fit gets the learnt correction of its precision after it."""
    shapes = [(2, 128), (4, 192), (3, 256)]
    paces = {"bf16": SLOWER, "fp16": 1.5}
    queued = scenario_doc("q", 2, 192)
    with app_for(db_url, source, clock) as client:
        for number, ((layers, hidden), precision) in enumerate(
            ((shape, precision) for shape in shapes for precision in paces), start=1
        ):
            doc = scenario_doc(f"r{number}", layers, hidden)
            doc["parallelism"]["precision"] = precision
            job, log = running_job(cluster_root, make_job, clock, doc, str(number))
            model_step = predict(client, doc)["iteration_time_s"]
            step_ms = 1000 * paces[precision] * model_step
            run_to_the_end(client, source, clock, job, log, step_ms=step_ms)
            clock.now += 60
            if number == 1:  # one run: no folds, the online correction stays
                assert learn(client) == {"slurm/test": "ok"}
                clock.now += 30
                early = queue(client, source, make_job, cluster_root, queued, "early")
                assert early["calibration"]["method"] == ONLINE
        before = queue(client, source, make_job, cluster_root, queued)
        assert before["calibration"]["method"] == ONLINE
        assert ratio(before) < 0.9 * SLOWER  # the online key mixes both paces

        assert learn(client) == {"slurm/test": "ok"}
        (listing,) = client.get("/v1/calibrations").json()["learnt"]
        assert listing["num_runs"] == len(shapes) * len(paces)
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        held = store.calibration("observed/slurm/test").state["held_out"]
        assert held["calibrated_mean_abs_error_ratio"] < held["online_mean_abs_error_ratio"]
        assert listing["applied"]
        assert listing["replaces_online"]
        assert listing["online_error_ratio"] == held["online_mean_abs_error_ratio"]

        clock.now += 30
        cycle(client)  # the queued job's prediction takes the new fit
        after = job_view(client, "q")["prediction"]
        assert after["calibration"]["method"] == "observed_runs"
        assert after["iteration_time_s"] == before["iteration_time_s"]
        assert abs(ratio(after) - SLOWER) < abs(ratio(before) - SLOWER)
        assert ratio(after) == pytest.approx(SLOWER, rel=0.1)


def test_a_fit_without_time_for_its_folds_corrects_only_what_the_online_one_does_not(
    tmp_path: Path,
) -> None:
    """Six runs fitted with no CPU time left for the held-out folds (``fit_cpu_budget_s``
    0): the fit is applied, but nothing measured it against the online calibration, so a
    prediction the online one corrected keeps that correction; one it did not correct takes
    the fit's."""
    store = SqlStore(f"sqlite:///{tmp_path / 'planner.db'}")
    store.migrate()
    docs = [scenario_doc(f"r{i}", layers, 128) for i, layers in enumerate((2, 3, 4, 5, 6, 7))]
    queued = scenario_doc("q", 2, 192)
    model = _slower_runs(store, docs, queued)
    config = LearningConfig(fit_cpu_budget_s=0.0)
    assert Learner(store, lambda: 100.0, config).run() == {"slurm/test": "ok"}
    state = store.calibration("observed/slurm/test")
    assert state is not None
    assert state.state["held_out"] is None
    assert state.state["applied"]
    assert "corrects only what the online calibration leaves" in str(state.state["reason"])

    online = {**model["q"], "calibrated_iteration_time_s": 2.0, "calibration": {"level": "key"}}
    learning = Learning(config=config)
    with store.unit_of_work() as uow:
        kept = calibrate_prediction(
            learning, uow, scheduler="slurm", cluster="test", document=queued, online=online
        )
        fitted = calibrate_prediction(
            learning, uow, scheduler="slurm", cluster="test", document=queued, online=model["q"]
        )
    assert kept == online
    assert fitted["calibration"]["method"] == "observed_runs"  # type: ignore[index]
    assert ratio(fitted) == pytest.approx(SLOWER, rel=0.05)
    store.dispose()


def test_a_fit_of_the_job_s_own_release_replaces_the_online_correction(tmp_path: Path) -> None:
    """Six runs stating one framework release (``training.framework_version``) and a stored
    fit whose held-out error beats the online calibration's: a queued job of that release,
    which the online calibration corrects at its key, takes the learnt correction of its
    release (the learnt tree's deepest level: counted as no correction before, so the job
    kept the online one)."""
    store = SqlStore(f"sqlite:///{tmp_path / 'planner.db'}")
    store.migrate()
    docs = [scenario_doc(f"r{i}", layers, 128) for i, layers in enumerate((2, 3, 4, 5, 6, 7))]
    queued = scenario_doc("q", 2, 192)
    for doc in [*docs, queued]:
        doc["training"]["framework_version"] = "25.11"
    model = _slower_runs(store, docs, queued)
    assert Learner(store, lambda: 100.0, LearningConfig()).run() == {"slurm/test": "ok"}
    row = store.calibration("observed/slurm/test")
    assert row is not None
    state = dict(row.state)
    state["held_out"] = {
        **state["held_out"],  # type: ignore[dict-item]
        "calibrated_mean_abs_error_ratio": 0.01,
        "online_mean_abs_error_ratio": 0.02,
    }
    store.put_calibration(row.name, state, row.updated_s + 1.0)
    online = {**model["q"], "calibrated_iteration_time_s": 2.0, "calibration": {"level": "key"}}
    with store.unit_of_work() as uow:
        chosen = calibrate_prediction(
            Learning(), uow, scheduler="slurm", cluster="test", document=queued, online=online
        )
    assert chosen["calibration"]["method"] == "observed_runs"  # type: ignore[index]
    assert chosen["calibration"]["level"] == "release"  # type: ignore[index]
    assert ratio(chosen) == pytest.approx(SLOWER, rel=0.05)
    store.dispose()
