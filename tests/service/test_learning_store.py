"""Observed runs in the store and the learner over them, on SQLite and (integration) on
PostgreSQL: one row per job, counts per cluster, newest runs read back, pruning, a fit per
cluster that lands only when there is something new."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.calibration.observed_runs import ObservedRun, samples_from_runs
from planner.service.learning import (
    Learner,
    LearningConfig,
    LearntCalibrations,
    calibration_name,
    learnt_of,
)
from planner.service.models import ObservedRunRow
from planner.service.store.sql import SqlStore

from .test_store_postgres import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]  # the PostgreSQL fixtures, used below

SCENARIO: dict[str, Any] = {
    "name": "tiny",
    "model": {
        "num_layers": 2,
        "hidden_size": 128,
        "num_attention_heads": 4,
        "seq_length": 128,
        "vocab_size": 1024,
    },
    "hardware": {"gpu": "h100-sxm", "num_gpus": 2},
    "parallelism": {"micro_batch_size": 4, "global_batch_size": 8},
}


def run(
    job_id: str,
    step_s: float | None,
    *,
    cluster: str = "a",
    reason: str | None = None,
    scenario: dict[str, Any] | None = None,
) -> ObservedRunRow:
    return ObservedRunRow(
        scheduler="slurm",
        cluster=cluster,
        job_id=job_id,
        recorded_s=1.0,
        gpu="h100-sxm",
        scenario=scenario or SCENARIO,
        iteration_time_s=step_s,
        num_iterations=100,
        skip_reason=reason,
    )


def check_store(store: SqlStore) -> None:
    store.migrate()
    with store.unit_of_work() as uow:
        for i in range(5):
            uow.put_observed_run(run(str(i), 0.01 * (i + 1)))
        uow.put_observed_run(run("bad", None, reason="iteration_time_s: no step time"))
        uow.put_observed_run(run("0", 0.5, cluster="b"))
    with store.unit_of_work() as uow:
        uow.put_observed_run(run("4", 0.07))  # job 4 ended again: its run is replaced
    counts = {(c.scheduler, c.cluster): c for c in store.observed_run_counts()}
    assert (counts["slurm", "a"].num_runs, counts["slurm", "a"].num_skipped) == (5, 1)
    assert counts["slurm", "b"].num_runs == 1
    newest = store.observed_runs("slurm", "a", limit=2)
    assert [(r.job_id, r.iteration_time_s) for r in newest] == [("3", 0.04), ("4", 0.07)]
    skipped = store.observed_runs("slurm", "a", limit=10, skipped=True)
    assert [r.skip_reason for r in skipped] == ["iteration_time_s: no step time"]

    learner = Learner(store, lambda: 100.0, LearningConfig(max_runs=4, keep_runs=3))
    assert learner.run() == {"slurm/a": "ok", "slurm/b": "ok"}
    assert learner.run() == {}  # nothing new
    store.put_calibration("online", {}, 1.0)
    names = [r.name for r in store.calibrations(prefix="observed/")]
    assert names == ["observed/slurm/a", "observed/slurm/b"]
    state = store.calibration(calibration_name("slurm", "a"))
    assert state is not None
    assert state.state["num_runs"] == 4  # the newest max_runs
    assert state.state["held_out"]["num_runs"] == 4
    counts = {(c.scheduler, c.cluster): c for c in store.observed_run_counts()}
    assert counts["slurm", "a"].num_runs + counts["slurm", "a"].num_skipped == 3  # kept
    store.dispose()


def test_observed_runs_on_sqlite(tmp_path: Path) -> None:
    check_store(SqlStore(f"sqlite:///{tmp_path / 'planner.db'}"))


@pytest.mark.integration
def test_observed_runs_on_postgres(pg_url: str) -> None:
    check_store(SqlStore(pg_url))


def test_a_long_cluster_name_fits_the_name_column() -> None:
    name = calibration_name("kubernetes", "c" * 128)
    assert len(name) <= 64
    assert name != calibration_name("kubernetes", "c" * 127)


def test_the_learnt_calibration_must_also_beat_the_online_one(tmp_path: Path) -> None:
    """Three runs of a cluster far slower than the model (CPUs described as H100s, as on the
    dev Slurm, by 180, 350 and 700 times): the learnt factors, shrunk toward the prior, beat the
    uncorrected model on held-out runs but not the online calibration, whose corrections then
    stay; the fit corrects what nothing else does (the API's predictions of the cluster)."""
    shapes = [(2, 4), (4, 4), (2, 1)]
    documents = []
    for layers, micro_batch in shapes:
        doc = {**SCENARIO, "model": {**SCENARIO["model"], "num_layers": layers}}
        doc["parallelism"] = {**SCENARIO["parallelism"], "micro_batch_size": micro_batch}
        documents.append(doc)
    model, _ = samples_from_runs(
        [ObservedRun(document=d, iteration_time_s=1.0, cluster="a") for d in documents]
    )
    store = SqlStore(f"sqlite:///{tmp_path / 'planner.db'}")
    store.migrate()
    with store.unit_of_work() as uow:
        for i, (doc, sample, slower) in enumerate(
            zip(documents, model, (180, 350, 700), strict=True)
        ):
            uow.put_observed_run(run(str(i), sample.predicted_s * slower, scenario=doc))
    assert Learner(store, lambda: 100.0, LearningConfig()).run() == {"slurm/a": "ok"}
    state = store.calibration(calibration_name("slurm", "a"))
    assert state is not None
    held = state.state["held_out"]
    learnt, online = held["calibrated_mean_abs_error_ratio"], held["online_mean_abs_error_ratio"]
    assert learnt < held["prior_mean_abs_error_ratio"]
    assert online < learnt
    assert state.state["applied"]
    assert str(state.state["reason"]).endswith(
        "; corrects only what the online calibration leaves uncorrected"
    )
    fit = learnt_of(state)
    assert fit is not None
    assert not fit.replaces_online
    assert LearntCalibrations(store).for_cluster("a") is not None
    store.dispose()


def test_a_defect_met_fitting_one_cluster_leaves_the_others_fitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever one cluster's fit raises (here a ``TypeError``, as a defect met in its stored
    runs would), the learner fits the other clusters, reports the failure for that one and logs
    its traceback; its last fit stays."""
    import planner.service.learning as learning

    store = SqlStore(f"sqlite:///{tmp_path / 'planner.db'}")
    store.migrate()
    with store.unit_of_work() as uow:
        for cluster in ("a", "b", "c"):
            for i in range(3):
                uow.put_observed_run(run(f"{cluster}{i}", 0.05 * (i + 1), cluster=cluster))
    fit = learning.fit_cluster

    def fit_failing_on_b(*args: Any, **kwargs: Any) -> Any:
        if args[1].cluster == "b":
            raise TypeError("'NoneType' object is not subscriptable")
        return fit(*args, **kwargs)

    monkeypatch.setattr(learning, "fit_cluster", fit_failing_on_b)
    results = Learner(store, lambda: 100.0, LearningConfig()).run()
    assert results["slurm/a"] == results["slurm/c"] == "ok"
    assert results["slurm/b"].startswith("TypeError: ")
    assert [r.name for r in store.calibrations(prefix="observed/")] == [
        "observed/slurm/a",
        "observed/slurm/c",
    ]
    assert any(r.exc_info for r in caplog.records if "learning on slurm/b failed" in r.message)
