"""Online calibration in the service, and the /v1/calibrations endpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.learning_outliers import scenario_doc
from planner.specs.job import JobStatus

from .conftest import OPERATOR_TOKEN, Clock, JobFactory, ScriptedSource, bearer
from .test_service import app_for, cycle, megatron_line, metric_value

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "calibration" / "cpu_epyc_2core_fp32"


def scenario(tmp_path: Path, name: str, layers: int, hidden: int) -> Path:
    doc = scenario_doc(name, layers, hidden, train_iters=400)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_second_job_starts_from_what_the_first_taught(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
) -> None:
    first, second = scenario(tmp_path, "a", 2, 128), scenario(tmp_path, "b", 4, 192)
    log = tmp_path / "a.out"
    job_a = make_job(
        job_id="1",
        status=JobStatus.RUNNING,
        comment=f"planner:scenario={first}",
        start_time_s=clock.now,
        stdout_path=str(log),
    )
    with app_for(db_url, source, clock) as client:
        source.set_jobs(job_a)
        cycle(client)
        model_a = client.get("/v1/jobs/1").json()["prediction"]
        assert model_a["calibration"]["level"] == "none"
        # The cluster is 100x slower than the model says (CPUs behind "H100" GRES).
        observed = 100 * model_a["iteration_time_s"]
        log.write_text("".join(megatron_line(i, 400, 1000 * observed) for i in range(5, 101, 5)))
        clock.now += 30
        cycle(client)

        job_b = make_job(job_id="2", status=JobStatus.PENDING, comment=f"planner:scenario={second}")
        source.set_jobs(job_a, job_b)
        cycle(client)
        pred_b = client.get("/v1/jobs/2").json()["prediction"]
        assert pred_b["calibration"]["level"] == "key"
        assert pred_b["calibration"]["factor"] == pytest.approx(100, rel=0.1)
        assert pred_b["calibrated_iteration_time_s"] == pytest.approx(
            100 * pred_b["iteration_time_s"], rel=0.1
        )
        # The pending job's runtime uses the calibrated step time.
        eta_b = client.get("/v1/jobs/2").json()["eta"]
        assert eta_b["remaining_s"]["p50"] == pytest.approx(
            400 * pred_b["calibrated_iteration_time_s"], rel=0.2
        )

        metrics = client.get("/metrics").text
        error = metric_value(
            metrics, "planner_model_error_ratio", 'cluster="test",scheduler="slurm"'
        )
        assert error == pytest.approx(0.99, abs=0.01)
        assert metric_value(metrics, "planner_calibration_samples_total", "") >= 1

        listing = client.get("/v1/calibrations").json()
        groups = {tuple(g["group"]): g for g in listing["online"]["groups"]}
        assert groups[("slurm", "test", "h100-sxm", "megatron")]["factor"] == pytest.approx(
            100, rel=0.1
        )


def test_upload_operator_samples(db_url: str, source: ScriptedSource, clock: Clock) -> None:
    lines = (SAMPLES / "op_samples.csv").read_text().splitlines()
    subset = "\n".join([lines[0], *[row for row in lines[1:] if row.startswith("gemm,")][:60]])
    with app_for(db_url, source, clock) as client:
        response = client.post(
            "/v1/calibrations",
            files={"op_samples": ("op_samples.csv", subset + "\n", "text/csv")},
            data={"name": "cpu"},
            headers=bearer(OPERATOR_TOKEN),
        )
        assert response.status_code == 200, response.text
        listing = client.get("/v1/calibrations").json()
        assert [o["name"] for o in listing["operators"]] == ["cpu"]
        assert any("gemm" in line for line in listing["operators"][0]["summary"])

        bad = client.post(
            "/v1/calibrations",
            files={"op_samples": ("broken.csv", "op,pass\ngemm,fwd\n", "text/csv")},
            headers=bearer(OPERATOR_TOKEN),
        )
        assert bad.status_code == 422
        assert "broken.csv:1: missing column" in bad.json()["detail"]


def test_compute_and_network_are_learnt_apart_from_rank_timings(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
) -> None:
    """A job on 2 GPUs prints its ranks' compute and step times: its step splits into a
    compute and a network factor, and a job on 1 GPU (no communication) gets the compute
    factor alone, where one factor for the whole step would also carry the network's."""
    first = scenario(tmp_path, "a", 2, 128)
    doc = yaml.safe_load(first.read_text())
    doc["hardware"]["num_gpus"] = 1
    doc["parallelism"]["global_batch_size"] = 4
    second = tmp_path / "b.yaml"
    second.write_text(yaml.safe_dump(doc))
    log = tmp_path / "a.out"
    job_a = make_job(
        job_id="1",
        status=JobStatus.RUNNING,
        comment=f"planner:scenario={first}",
        start_time_s=clock.now,
        stdout_path=str(log),
    )
    f_c, f_n = 100.0, 2000.0
    with app_for(db_url, source, clock) as client:
        source.set_jobs(job_a)
        cycle(client)
        b = client.get("/v1/jobs/1").json()["prediction"]["breakdown_s"]
        window = f_c * (b["compute"] + b["pp_bubble"])
        step = window + f_c * b["optimizer"] + f_n * b["dp_comm_exposed"]
        assert b["dp_comm_exposed"] > 0
        lines = []
        for i in range(5, 101, 5):
            lines.append(megatron_line(i, 400, 1000 * step))
            lines += [
                json.dumps(
                    {
                        "event": "rank_step",
                        "iteration": i,
                        "rank": r,
                        "world_size": 2,
                        "compute_time_s": window,
                        "step_time_s": step,
                        "num_iterations": 5,
                    }
                )
                + "\n"
                for r in range(2)
            ]
        log.write_text("".join(lines))
        clock.now += 30
        cycle(client)

        job_b = make_job(job_id="2", status=JobStatus.PENDING, comment=f"planner:scenario={second}")
        source.set_jobs(job_a, job_b)
        cycle(client)
        pred_b = client.get("/v1/jobs/2").json()["prediction"]
        assert pred_b["calibration"]["method"] == "components"
        components = pred_b["calibration"]["components"]
        assert components["compute"]["factor"] == pytest.approx(f_c, rel=0.02)
        assert components["network"]["factor"] == pytest.approx(f_n, rel=0.02)
        expected = f_c * pred_b["iteration_time_s"]  # one GPU: no network terms
        assert pred_b["calibrated_iteration_time_s"] == pytest.approx(expected, rel=0.02)
        assert components["step"]["factor"] > 1.2 * f_c

        groups = client.get("/v1/calibrations").json()["online"]["groups"]
        learnt = {(g["component"], g["level"]) for g in groups}
        assert {("compute", "key"), ("network", "key"), ("step", "key")} <= learnt


def test_a_job_s_window_share_spans_the_tracker_s_window_not_its_evidence() -> None:
    """The online split reads the window share over the straggler tracker's last ``WINDOW``
    intervals (the what-if's span), not over the longer history it keeps as evidence for its
    flags: a job whose first 40 intervals waited 40 % of the step and whose last 20 waited
    10 % has the share of the last 20."""
    from planner.calibration.online_split import IntervalTiming, window_share
    from planner.service.loops.calibration import job_window_share
    from planner.service.models import JobRow
    from planner.specs.job import RankStepRecord
    from planner.stragglers.live import EVIDENCE_WINDOW, WINDOW, LiveStragglers

    tracker = LiveStragglers.new(2)
    for k in range(1, EVIDENCE_WINDOW + 1):
        compute = 0.06 if k <= EVIDENCE_WINDOW - WINDOW else 0.09
        tracker.add(
            [
                RankStepRecord(
                    iteration=5 * k,
                    rank=r,
                    world_size=2,
                    compute_time_s=compute,
                    step_time_s=0.1,
                    num_iterations=5,
                )
                for r in range(2)
            ]
        )
    assert len(tracker.history) == EVIDENCE_WINDOW
    last = [
        IntervalTiming(iterations=5, step_s=h.step_time_s, compute_s=h.compute_s)
        for h in tracker.history[-WINDOW + 1 :]
    ]
    share = job_window_share(JobRow(stragglers={"state": tracker.to_json()}))
    assert share == pytest.approx(window_share(last))
    everything = [
        IntervalTiming(iterations=5, step_s=h.step_time_s, compute_s=h.compute_s)
        for h in tracker.history[1:]
    ]
    assert share != pytest.approx(window_share(everything), abs=0.05)
