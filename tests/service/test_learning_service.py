"""The service learns from the jobs it sees finish: observed runs in the real store (SQLite),
a calibration fitted per cluster, used by the next predictions and listed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from benchmarks.learning_outliers import scenario_doc
from planner.service.learning import learnt_of, run_row
from planner.service.models import CalibrationRow, JobRow
from planner.specs.job import JobState, JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, megatron_line

SLOWER = 3.0
"""How much slower than the model the cluster runs (its measured pace)."""


def write_scenario(root: Path, doc: dict[str, Any]) -> Path:
    path = root / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o644)
    return path


def running_job(
    root: Path, make_job: JobFactory, clock: Clock, doc: dict[str, Any], job_id: str
) -> tuple[JobState, Path]:
    """A running job launched with ``doc`` as its scenario file, and the log it writes."""
    log = root / f"{doc['name']}.out"
    job = make_job(
        job_id=job_id,
        status=JobStatus.RUNNING,
        comment=f"planner:scenario={write_scenario(root, doc)}",
        start_time_s=clock.now,
        stdout_path=str(log),
    )
    return job, log


def run_to_the_end(
    client: TestClient,
    source: ScriptedSource,
    clock: Clock,
    job: JobState,
    log: Path,
    *,
    step_ms: float,
    last: int = 100,
) -> None:
    """The job runs, its log shows ``step_ms`` per iteration up to ``last``, then it ends."""
    text = "".join(megatron_line(i, 100, step_ms) for i in range(5, last + 1, 5))
    run_with_log(client, source, clock, job, log, text)


def run_with_log(
    client: TestClient, source: ScriptedSource, clock: Clock, job: JobState, log: Path, text: str
) -> None:
    """The job runs (one ingest cycle), its log is written as ``text`` (read at the next
    cycle, 60 s later), then it ends."""
    source.set_jobs(job)
    cycle(client)
    log.write_text(text)
    log.chmod(0o644)
    clock.now += 60
    cycle(client)
    ended = JobState(
        **{
            **{f: getattr(job, f) for f in job.__dataclass_fields__},
            "status": JobStatus.COMPLETED,
            "end_time_s": clock.now + 5,
        }
    )
    clock.now += 10
    source.set_jobs(ended)
    cycle(client)


def predict(client: TestClient, doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/predict?cluster=test", json=doc)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def learn(client: TestClient) -> dict[str, str]:
    return client.app.state.planner.learner.run()  # type: ignore[attr-defined,no-any-return]


def test_the_next_prediction_moves_toward_the_measured_pace(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    tmp_path = cluster_root
    first = scenario_doc("a", 2, 128)
    second = scenario_doc("b", 4, 192)
    job, log = running_job(tmp_path, make_job, clock, first, "1")
    with app_for(db_url, source, clock) as client:
        before = predict(client, second)
        assert "calibration" not in before  # nothing learnt yet
        model_step = predict(client, first)["iteration_time_s"]
        run_to_the_end(client, source, clock, job, log, step_ms=1000 * SLOWER * model_step)
        measured = client.get("/v1/jobs/1").json()["eta"]["observed_step_time_s"]
        assert measured == pytest.approx(SLOWER * model_step, rel=0.05)

        early = make_job(
            job_id="3",
            status=JobStatus.PENDING,
            comment=f"planner:scenario={write_scenario(tmp_path, second)}",
        )
        source.set_jobs(early)
        cycle(client)  # queued before anything was learnt: the online calibration's
        assert client.get("/v1/jobs/3").json()["prediction"]["calibration"]["method"] != (
            "observed_runs"
        )

        assert learn(client) == {"slurm/test": "ok"}
        assert learn(client) == {}  # nothing new: no refit
        clock.now += 30  # the API reads the learnt calibrations again

        after = predict(client, second)
        assert after["calibration"]["method"] == "observed_runs"
        assert after["calibration"]["num_jobs"] == 1
        # one run moves its key part of the way (the prior's shrinkage), toward the pace seen
        ratio = after["calibrated_iteration_time_s"] / after["iteration_time_s"]
        assert 1.5 < ratio <= SLOWER * 1.05
        assert after["iteration_time_s"] == before["iteration_time_s"]

        # the jobs queued now and before keep the online calibration's correction: one run
        # gives the fit no held-out error to show it does better
        # (test_learning_calibration_choice)
        queued = make_job(
            job_id="2",
            status=JobStatus.PENDING,
            comment=f"planner:scenario={write_scenario(tmp_path, second)}",
        )
        source.set_jobs(queued, early)
        cycle(client)
        for job_id in ("2", "3"):
            prediction = client.get(f"/v1/jobs/{job_id}").json()["prediction"]
            assert prediction["calibration"]["method"] == "step"

        listing = client.get("/v1/calibrations").json()["learnt"]
        assert [(c["scheduler"], c["cluster"], c["num_runs"]) for c in listing] == [
            ("slurm", "test", 1)
        ]
        assert listing[0]["applied"]
        assert listing[0]["fitted_s"] <= clock.now
        assert listing[0]["keys"][0]["gpu"] == "h100-sxm"


def test_bad_runs_are_skipped_with_their_reason(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    tmp_path = cluster_root
    unknown = scenario_doc("u", 2, 128, gpu="h900-imaginary")
    short = scenario_doc("s", 2, 128)
    with app_for(db_url, source, clock) as client:
        model_step = predict(client, short)["iteration_time_s"]
        for job_id, doc, last in (("1", unknown, 100), ("2", short, 10)):
            job, log = running_job(tmp_path, make_job, clock, doc, job_id)
            run_to_the_end(
                client, source, clock, job, log, step_ms=1000 * SLOWER * model_step, last=last
            )
        assert learn(client) == {"slurm/test": "ok"}
        listing = client.get("/v1/calibrations").json()["learnt"][0]
        assert listing["num_runs"] == 0
        assert not listing["applied"]
        reasons = {s["job_id"]: s["reason"] for s in listing["skipped"]}
        assert reasons["2"].startswith("num_iterations: ran 10")
        assert "gpu" in reasons["1"]
        clock.now += 30
        assert "calibration" not in predict(client, short)


@pytest.mark.parametrize(
    ("step", "field"),
    [(0.0, "iteration_time_s"), (math.nan, "iteration_time_s"), (None, "iteration_time_s")],
)
def test_a_run_without_a_usable_step_time_names_it(step: float | None, field: str) -> None:
    row = JobRow(
        scheduler="slurm",
        cluster="test",
        job_id="7",
        scenario=scenario_doc("a", 2, 128),
        eta={"observed_step_time_s": step},
        iteration=100,
    )
    run = run_row(row, min_iterations=20, now_s=0.0)
    assert run is not None
    assert run.skip_reason is not None
    assert run.skip_reason.startswith(f"{field}:")
    assert run.iteration_time_s is None or run.iteration_time_s == 0.0


@pytest.mark.parametrize("calibration", [None, [1, 2], "observed"])
def test_a_stored_fit_of_another_shape_is_logged_and_not_used(
    calibration: object, caplog: pytest.LogCaptureFixture
) -> None:
    """A learnt calibration whose stored ``calibration`` is not an object (a state written by
    another version) reads as none, with the row named in the log, never a traceback."""
    row = CalibrationRow(
        name="observed/slurm/test",
        state={
            "scheduler": "slurm",
            "cluster": "test",
            "fitted_s": 1.0,
            "calibration": calibration,
        },
        updated_s=1.0,
    )
    assert learnt_of(row) is None
    assert "stored calibration observed/slurm/test unusable" in caplog.text


def test_a_stored_fit_in_an_older_format_is_fitted_again_from_the_stored_runs(
    cluster_root: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """After an upgrade that changes the calibration's format, the stored fit no longer reads;
    the cluster's runs are still stored, so the learner fits them again at its next run
    instead of leaving the cluster without corrections until another job ends."""
    doc = scenario_doc("a", 2, 128)
    job, log = running_job(cluster_root, make_job, clock, doc, "1")
    with app_for(db_url, source, clock) as client:
        model_step = predict(client, doc)["iteration_time_s"]
        run_to_the_end(client, source, clock, job, log, step_ms=1000 * SLOWER * model_step)
        assert learn(client) == {"slurm/test": "ok"}
        assert learn(client) == {}

        store = client.app.state.planner.store  # type: ignore[attr-defined]
        row = store.calibration("observed/slurm/test")
        state = dict(row.state)
        state["calibration"] = {**state["calibration"], "format": "planner-observed-runs/0"}
        store.put_calibration(row.name, state, row.updated_s)
        assert learnt_of(store.calibration(row.name)) is None

        assert learn(client) == {"slurm/test": "ok"}  # fitted again from the stored run
        refit = store.calibration(row.name)
        assert learnt_of(refit) is not None
        assert refit.state["num_runs"] == 1
        assert learn(client) == {}
