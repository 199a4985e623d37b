"""``GET /v1/calibrations/runs`` gives a cluster's kept runs as the JSON lines ``planner
calibrate observe`` reads: fitted offline by the command, they give the calibration the service
learnt from them, factor for factor, and the same held-out error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from benchmarks.learning_outliers import observed_run_row
from planner.cli import app as cli
from planner.scenario import predict_documents
from planner.service.models import ObservedRunRow

from .conftest import Clock, ScriptedSource
from .test_learning_service import learn
from .test_learning_service import scenario_doc as megatron_doc
from .test_service import app_for

PACES = (1.30, 1.27, 1.33, 1.29, 1.31, 1.28, 1.32, 1.30, 1.8, 1.75)
"""Measured over model step of each run: two keys (the last two on A100s)."""


def _runs() -> list[ObservedRunRow]:
    docs = [
        megatron_doc(
            f"r{i}", 2 + i % 5, 128 + 64 * (i // 5), gpu="a100-80gb" if i >= 8 else "h100-sxm"
        )
        for i in range(len(PACES))
    ]
    model = [float(p["iteration_time_s"]) for p in predict_documents(docs)]  # type: ignore[arg-type]
    runs = [
        observed_run_row(doc, pace * step_s, job_id=i, cluster="test")
        for i, (doc, pace, step_s) in enumerate(zip(docs, PACES, model, strict=True))
    ]
    for run in runs[1::2]:
        run.memory_per_gpu_bytes = 40e9
    return runs


def _without_runs(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "runs"}


def test_the_exported_runs_fit_offline_to_the_service_s_calibration(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    with app_for(db_url, source, clock) as client:
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        with store.unit_of_work() as uow:
            for run in _runs():
                uow.put_observed_run(run)
            uow.put_observed_run(  # kept with its reason, not fitted: not exported
                ObservedRunRow(
                    scheduler="slurm",
                    cluster="test",
                    job_id="99",
                    recorded_s=99.0,
                    gpu="",
                    scenario={"name": "x"},
                    iteration_time_s=None,
                    num_iterations=3,
                    skip_reason="iteration_time_s: the job's log gave no step time",
                )
            )
        assert learn(client) == {"slurm/test": "ok"}
        learnt = store.calibration("observed/slurm/test").state
        response = client.get(
            "/v1/calibrations/runs", params={"scheduler": "slurm", "cluster": "test"}
        )
        newest = client.get(
            "/v1/calibrations/runs", params={"scheduler": "slurm", "cluster": "test", "limit": 3}
        )
        other = client.get("/v1/calibrations/runs", params={"scheduler": "slurm", "cluster": "x"})
        bad = client.get("/v1/calibrations/runs", params={"scheduler": "slurm"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["scenario"]["name"] for line in lines] == [f"r{i}" for i in range(len(PACES))]
    assert [line["cluster"] for line in lines] == ["test"] * len(PACES)
    assert [line.get("memory_per_gpu_bytes") for line in lines[:2]] == [None, 40e9]
    assert [json.loads(x)["scenario"]["name"] for x in newest.text.splitlines()] == [
        "r7",
        "r8",
        "r9",
    ]
    assert (other.status_code, other.text) == (200, "")
    assert bad.status_code == 422
    assert "cluster" in bad.text

    runs = tmp_path / "runs.jsonl"
    runs.write_text(response.text)
    out = tmp_path / "calibration.json"
    result = CliRunner().invoke(
        cli, ["calibrate", "observe", str(runs), "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    offline = json.loads(out.read_text())
    assert _without_runs(offline) == _without_runs(learnt["calibration"])
    summary = json.loads(result.stdout)
    held_out = learnt["held_out"]
    assert summary["num_runs"] == learnt["num_runs"] == len(PACES)
    assert (
        summary["held_out"]["calibrated_mean_abs_error_ratio"]
        == held_out["calibrated_mean_abs_error_ratio"]
    )
