"""The service end to end in-process: ingest cycles, store, API and metrics, restart, faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.errors import SourceTemporaryError
from planner.service.main import create_app
from planner.service.security_settings import AuthSettings
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource, write_token_file

SCENARIO = """\
name: tiny-gpt
model:
  num_layers: 2
  hidden_size: 128
  num_attention_heads: 4
  seq_length: 128
  vocab_size: 1024
hardware:
  gpu: h100-sxm
  num_gpus: 2
parallelism:
  tensor_parallel: 1
  pipeline_parallel: 1
  micro_batch_size: 4
  global_batch_size: 8
training:
  train_iters: 100
"""


def megatron_line(iteration: int, total: int, ms: float) -> str:
    return (
        f" iteration {iteration:8d}/{total:8d} | consumed samples: {iteration * 8:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} | learning rate: 1.000000E-04 |"
        f" global batch size:     8 | lm loss: 6.900000E+00 | loss scale: 1.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


def metric_value(metrics: str, name: str, labels: str) -> float:
    """The value of the sample ``name{labels}`` in an exposition text."""
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    line = next(line for line in metrics.splitlines() if line.startswith(prefix))
    return float(line[len(prefix) :])


def app_for(
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    *,
    allowed_file_roots: list[str] | None = None,
    **settings_kw: Any,
) -> TestClient:
    tokens = write_token_file(Path(db_url.removeprefix("sqlite:///")).parent / "tokens")
    settings = Settings(
        database_url=db_url,
        ingest_interval_s=5.0,
        auth=AuthSettings(token_file=str(tokens)),
        **settings_kw,
    )
    # the test's directory holds its jobs' logs: read under the job-file rules as in service
    settings.slurm.allowed_file_roots = [*(allowed_file_roots or []), str(tokens.parent)]
    app = create_app(
        settings, store=SqlStore(db_url), sources=[source], clock=clock, start_loops=False
    )
    return TestClient(app)


def cycle(client: TestClient) -> dict[str, str]:
    report = client.app.state.planner.ingestor.run_cycle()  # type: ignore[attr-defined]
    return report.results  # type: ignore[no-any-return]


def job_view(client: TestClient, job_id: str = "42") -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def test_pending_then_running_job_gets_prediction_progress_and_eta(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    scenario_file: Path,
) -> None:
    log = tmp_path / "job.out"
    comment = f"planner:scenario={scenario_file}"
    with app_for(db_url, source, clock) as client:
        assert client.get("/readyz").status_code == 503  # no cycle yet
        source.set_jobs(make_job(status=JobStatus.PENDING, comment=comment, gpus_allocated=False))
        assert cycle(client) == {"slurm": "ok"}
        assert client.get("/readyz").status_code == 200

        pending = job_view(client)
        assert pending["described_by"] == "scenario_file"
        assert pending["prediction"]["iteration_time_s"] > 0
        assert pending["progress"]["train_iters"] == 100
        runtime = pending["eta"]["remaining_s"]["p50"]
        assert runtime == pytest.approx(100 * pending["prediction"]["iteration_time_s"], rel=0.25)

        # Running: 30 of 100 iterations done at 0.5 s each (the CPU is far slower than the H100
        # the scenario names: the observations must win over the model's prior).
        start = clock.now
        log.write_text("".join(megatron_line(i, 100, 500.0) for i in range(5, 31, 5)))
        clock.now = start + 16.0
        source.set_jobs(
            make_job(
                status=JobStatus.RUNNING,
                comment=comment,
                start_time_s=start,
                time_limit_s=3600.0,
                stdout_path=str(log),
                node_list=("node1",),
            )
        )
        assert cycle(client) == {"slurm": "ok"}
        running = job_view(client)
        assert running["status"] == "running"
        assert running["progress"]["iteration"] == 30
        assert running["progress"]["progress_ratio"] == pytest.approx(0.3)
        eta = running["eta"]
        assert eta["step_time_s"]["p50"] == pytest.approx(0.5, rel=0.1)
        assert eta["remaining_s"]["p10"] <= eta["remaining_s"]["p50"] <= eta["remaining_s"]["p90"]
        assert eta["remaining_s"]["p50"] == pytest.approx(70 * 0.5, rel=0.15)
        assert [s["iteration"] for s in running["samples"]] == [5, 10, 15, 20, 25, 30]

        listing = client.get("/v1/jobs").json()
        assert listing["stale"] is False
        assert [j["job_id"] for j in listing["jobs"]] == ["42"]
        assert listing["sources"][0]["cluster"] == "test"

        metrics = client.get("/metrics").text
        labels = 'cluster="test",job_id="42",scheduler="slurm"'
        assert f"planner_job_progress_ratio{{{labels}}} 0.3" in metrics
        assert (
            'planner_job_eta_seconds{cluster="test",job_id="42",quantile="0.5",scheduler="slurm"}'
            in (metrics)
        )
        assert f"planner_job_predicted_completion_timestamp_seconds{{{labels}}}" in metrics
        # the completion band, one gauge per bound (Grafana's job detail draws it)
        band = [
            metric_value(metrics, f"planner_job_predicted_completion{q}_timestamp_seconds", labels)
            for q in ("_p10", "", "_p90")
        ]
        assert band[0] < band[1] < band[2]
        assert band[1] == pytest.approx(clock.now + eta["remaining_s"]["p50"], abs=1.0)
        assert "planner_ingest_last_success_timestamp_seconds{" in metrics
        assert metric_value(metrics, "planner_job_time_limit_timestamp_seconds", labels) == (
            start + 3600.0
        )
        assert f"planner_job_predicted_fits_in_memory{{{labels}}} 1.0" in metrics
        error_line = next(
            line
            for line in metrics.splitlines()
            if line.startswith("planner_job_model_error_ratio{")
        )
        # The H100 scenario predicts well under a millisecond; the CPU job takes 0.5 s.
        assert float(error_line.split()[-1]) < -0.9


def test_source_failure_keeps_last_state_marks_it_stale_and_recovers(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    with app_for(db_url, source, clock) as client:
        source.set_jobs(make_job(status=JobStatus.RUNNING, start_time_s=clock.now))
        cycle(client)
        good_at = clock.now

        clock.now += 60
        source.answer = SourceTemporaryError("slurm:squeue", "Unable to contact slurm controller")
        assert "Unable to contact" in cycle(client)["slurm"]
        listing = client.get("/v1/jobs").json()
        assert [j["job_id"] for j in listing["jobs"]] == ["42"]
        assert listing["jobs"][0]["status"] == "running"
        assert listing["stale"] is True
        src = listing["sources"][0]
        assert src["age_s"] == pytest.approx(60)
        assert src["last_success_s"] == good_at
        assert "Unable to contact" in src["last_error"]
        assert "planner_source_up{" in client.get("/metrics").text

        clock.now += 5
        source.set_jobs(make_job(status=JobStatus.RUNNING, start_time_s=good_at))
        assert cycle(client) == {"slurm": "ok"}
        listing = client.get("/v1/jobs").json()
        assert listing["stale"] is False
        assert listing["sources"][0]["last_error"] is None


def test_restart_keeps_jobs_samples_and_predictions(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    scenario_file: Path,
) -> None:
    log = tmp_path / "job.out"
    log.write_text("".join(megatron_line(i, 100, 400.0) for i in range(10, 41, 10)))
    job = make_job(
        status=JobStatus.RUNNING,
        comment=f"planner:scenario={scenario_file}",
        start_time_s=clock.now,
        stdout_path=str(log),
    )
    source.set_jobs(job)
    with app_for(db_url, source, clock) as client:
        cycle(client)
        before = job_view(client)

    # A new process on the same database, before its first cycle: everything is still there.
    failing = ScriptedSource()
    failing.answer = SourceTemporaryError("slurm:squeue", "down")
    with app_for(db_url, failing, clock) as client:
        after = job_view(client)
        assert after["samples"] == before["samples"]
        assert after["prediction"] == before["prediction"]
        assert after["eta"] == before["eta"]
        assert len(after["eta_history"]) == 1

        # The log cursor was stored too: the next cycle reads only new lines.
        with log.open("a") as f:
            f.write(megatron_line(50, 100, 400.0))
        failing.set_jobs(job)
        cycle(client)
        assert [s["iteration"] for s in job_view(client)["samples"]] == [10, 20, 30, 40, 50]


def test_jobs_that_end_drop_out_of_metrics(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    with app_for(db_url, source, clock) as client:
        source.set_jobs(
            make_job(status=JobStatus.RUNNING), make_job(job_id="43", status=JobStatus.RUNNING)
        )
        cycle(client)
        assert 'job_id="43"' in client.get("/metrics").text
        clock.now += 10
        source.set_jobs(
            make_job(status=JobStatus.COMPLETED, end_time_s=clock.now - 1),
        )
        cycle(client)
        metrics = client.get("/metrics").text
        assert 'job_id="42"' not in metrics
        assert 'job_id="43"' not in metrics
        jobs = {j["job_id"]: j for j in client.get("/v1/jobs").json()["jobs"]}
        assert jobs["42"]["status"] == "completed"
        assert jobs["42"]["ended_s"] == clock.now - 1
        assert jobs["43"]["active"] is False  # vanished from the scheduler: ended
        active = client.get("/v1/jobs", params={"active": True}).json()["jobs"]
        assert active == []


def test_megatron_arguments_describe_a_job_without_a_scenario(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    script = (
        "#!/bin/bash\n#SBATCH -n 2\nsrun python pretrain_gpt.py \\\n"
        "  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\\n"
        "  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 \\\n"
        "  --global-batch-size 64 --train-iters 5000 --bf16\n"
    )
    with app_for(db_url, source, clock) as client:
        source.set_jobs(
            make_job(status=JobStatus.PENDING, batch_script=script, num_gpus=8),
            make_job(job_id="44", status=JobStatus.PENDING, command="/bin/sleep 100"),
        )
        cycle(client)
        described = job_view(client, "42")
        assert described["described_by"] == "megatron"
        assert "job.sbatch" in described["launch_description"]["provenance"]["model.num_layers"]
        assert described["progress"]["train_iters"] == 5000
        assert described["prediction"]["iteration_time_s"] > 0
        bare = job_view(client, "44")
        assert bare["described_by"] == "none"
        assert bare["prediction"] is None
        assert bare["eta"] is None


def test_the_log_of_a_job_fills_what_its_launch_left_open(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """A launch without a sequence length is described with the model's own; once the job's
    log prints Megatron-LM's argument dump, the job is described again from it (once)."""
    script = (
        "#!/bin/bash\nsrun python pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
        "--num-attention-heads 16 --micro-batch-size 1 --global-batch-size 64 "
        "--train-iters 5000 --bf16\n"
    )
    dump = "".join(
        f"  {name} {'.' * (40 - len(name))} {value}\n"
        for name, value in (("num_layers", 24), ("seq_length", 3072), ("world_size", 2))
    )
    log = tmp_path / "train.out"
    log.write_text(
        "------------------------ arguments ------------------------\n"
        + dump
        + "-------------------- end of arguments ---------------------\n"
        + megatron_line(5, 5000, 500.0)
    )
    with app_for(db_url, source, clock) as client:
        source.set_jobs(make_job(status=JobStatus.PENDING, batch_script=script))
        cycle(client)
        pending = job_view(client)
        assert pending["described_by"] == "megatron"
        assert "model.seq_length" not in pending["launch_description"]["provenance"]
        clock.now += 10
        running = make_job(
            status=JobStatus.RUNNING,
            batch_script=script,
            start_time_s=clock.now - 5,
            stdout_path=str(log),
        )
        source.set_jobs(running)
        cycle(client)
        described = job_view(client)
        assert described["scenario"]["model"]["seq_length"] == 3072
        assert described["launch_description"]["provenance"]["model.seq_length"] == "log:3"
        clock.now += 10
        source.set_jobs(running)
        cycle(client)  # described once from the log, not at every cycle
        assert job_view(client)["launch_description"]["provenance"]["model.seq_length"] == "log:3"


def test_broken_scenario_file_is_reported_not_fatal(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {num_layers: -1}\n")
    with app_for(db_url, source, clock) as client:
        source.set_jobs(
            make_job(comment=f"planner:scenario={bad}"),
            make_job(job_id="45", comment="planner:scenario=/nonexistent/x.yaml"),
        )
        assert cycle(client) == {"slurm": "ok"}
        broken = job_view(client, "42")
        assert broken["described_by"] == "scenario_file"
        assert broken["prediction"] is None
        assert broken["description"]
        missing = job_view(client, "45")
        assert "/nonexistent/x.yaml" in missing["description"]


def test_cluster_gpus_and_build_info(db_url: str, source: ScriptedSource, clock: Clock) -> None:
    from planner import __version__
    from planner.specs.job import ClusterSnapshot, NodeState

    source.answer = ClusterSnapshot(
        scheduler="slurm",
        cluster="test",
        taken_at_s=clock.now,
        nodes=(
            NodeState(name="n1", state="mixed", num_gpus=8, num_gpus_allocated=6),
            NodeState(name="n2", state="idle", num_gpus=8),
            NodeState(name="n3", state="drained", num_gpus=8, num_gpus_allocated=2),
        ),
    )
    with app_for(db_url, source, clock) as client:
        cycle(client)
        metrics = client.get("/metrics").text
        labels = 'cluster="test",scheduler="slurm"'
        assert metric_value(metrics, "planner_cluster_gpus", labels + ',state="allocated"') == 6
        assert metric_value(metrics, "planner_cluster_gpus", labels + ',state="idle"') == 10
        assert metric_value(metrics, "planner_cluster_gpus", labels + ',state="unavailable"') == 8
        assert f'planner_build_info{{version="{__version__}"}} 1.0' in metrics


def test_job_lookup_errors(db_url: str, source: ScriptedSource, clock: Clock) -> None:
    with app_for(db_url, source, clock) as client:
        response = client.get("/v1/jobs/999")
        assert response.status_code == 404
        assert "job_id" in response.json()["detail"]


def test_no_source_is_ready_at_once(db_url: str, clock: Clock) -> None:
    settings = Settings(database_url=db_url)
    app = create_app(settings, sources=[], reader=LogTailer(), clock=clock, start_loops=False)
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        assert client.get("/v1/jobs").json()["jobs"] == []
        assert client.get("/openapi.json").json()["info"]["title"] == "LLM capacity planner"


def rank_lines(iteration: int, compute: list[float], comm_s: float = 0.01) -> str:
    step = max(compute) + comm_s
    return "".join(
        json.dumps(
            {
                "event": "rank_step",
                "iteration": iteration,
                "rank": r,
                "world_size": len(compute),
                "compute_time_s": c,
                "step_time_s": step,
                "num_iterations": 5,
                "node": "node1",
            }
        )
        + "\n"
        for r, c in enumerate(compute)
    )


def test_stragglers_endpoint_and_metrics(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    scenario_file: Path,
) -> None:
    log = tmp_path / "job.out"
    log.write_text("")
    job = make_job(
        status=JobStatus.RUNNING,
        comment=f"planner:scenario={scenario_file}",
        start_time_s=clock.now,
        stdout_path=str(log),
    )
    with app_for(db_url, source, clock) as client:
        source.set_jobs(job, make_job(job_id="46", status=JobStatus.RUNNING))
        cycle(client)
        assert client.get("/v1/jobs/42/stragglers").json()["available"] is False
        assert client.get("/v1/jobs/404/stragglers").status_code == 404
        for i in range(1, 41):
            slow = 1.6 if i > 15 else 1.0
            compute = [0.05 * (1 + 0.01 * ((i * 7) % 3)), 0.05 * slow]
            with log.open("a") as f:
                f.write(megatron_line(5 * i, 100 * 5, 1000 * (max(compute) + 0.01)))
                f.write(rank_lines(5 * i, compute))
            if i % 10 == 0:
                clock.now += 10
                cycle(client)
        body = client.get("/v1/jobs/42/stragglers").json()
        assert body["available"] is True
        assert [s["rank"] for s in body["stragglers"]] == [1]
        assert body["slowdown"] == pytest.approx((0.08 + 0.01) / (0.05 + 0.01), rel=0.05)
        assert body["action"] == "drain-node"
        assert body["hours_lost"] > 0
        assert body["predicted_completion_without_stragglers_s"] is not None
        metrics = client.get("/metrics").text
        assert 'planner_job_straggler_slowdown_ratio{cluster="test",job_id="42"' in metrics
        assert 'planner_job_straggler_hours_lost{cluster="test",job_id="42"' in metrics
        assert (
            'planner_job_straggler_rank_slowdown_ratio{cluster="test",job_id="42",node="node1",'
            'rank="1",scheduler="slurm"}' in metrics
        )
        assert 'planner_job_straggler_slowdown_ratio{cluster="test",job_id="46"' not in metrics


def test_progress_the_job_reports_itself_feeds_the_eta(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    scenario_file: Path,
) -> None:
    """A job whose only progress is its own report (a TrainJob's trainerStatus): iterations
    from the ratio, step times from successive reports, the report shown beside our ETA."""
    comment = f"planner:scenario={scenario_file}"
    start = clock.now
    with app_for(db_url, source, clock) as client:
        for ratio, t in ((0.2, start + 40.0), (0.5, start + 100.0)):
            clock.now = t
            source.set_jobs(
                make_job(
                    status=JobStatus.RUNNING,
                    comment=comment,
                    start_time_s=start,
                    progress_ratio=ratio,
                    reported_remaining_s=123.0,
                    progress_updated_s=t,
                )
            )
            cycle(client)
        job = job_view(client)
        assert job["progress"]["iteration"] == 50
        assert job["samples"][-1]["step_time_s"] == pytest.approx(2.0)  # 60 s for 30 iterations
        assert job["scheduler_reported"] == {
            "progress_ratio": 0.5,
            "remaining_s": 123.0,
            "updated_s": start + 100.0,
        }
        assert job["eta"]["remaining_s"]["p50"] == pytest.approx(50 * 2.0, rel=0.3)
