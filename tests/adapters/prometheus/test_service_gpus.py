"""The service shows each running job's GPU telemetry (dcgm-exporter series in a real Prometheus,
the backfill of tests/data/prometheus/telemetry.om.gz) in /v1/jobs/{id} and /metrics."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from adapters.prometheus.dcgm import MIB
from planner.service.main import create_app
from planner.service.settings import PrometheusSettings, Settings
from planner.service.store.sql import SqlStore
from planner.specs.job import JobState, JobStatus
from tests.adapters.prometheus.conftest import Telemetry
from tests.adapters.prometheus.test_real_prometheus import AT_S, _oracle
from tests.service.conftest import Clock, ScriptedSource

pytestmark = pytest.mark.integration


def _running(job_id: str, **kw: object) -> JobState:
    return JobState(
        scheduler="slurm",
        cluster="test",
        job_id=job_id,
        name="llm",
        status=JobStatus.RUNNING,
        num_gpus=4,
        start_time_s=AT_S - 1800,
        **kw,  # type: ignore[arg-type]
    )


def test_gpu_utilisation_and_tensor_activity_per_job(telemetry: Telemetry, tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'p.db'}",
        prometheus=PrometheusSettings(url=telemetry.prom.url, gpu_window_s=300.0),
    )
    source = ScriptedSource()
    # 4242: the exporter's HPC job mapping; 5151: matched by its host (every GPU of gpu-b01).
    source.set_jobs(_running("4242"), _running("5151", node_list=("gpu-b01",)))
    app = create_app(
        settings,
        store=SqlStore(settings.database_url),
        sources=[source],
        reader=LogTailer(),
        clock=Clock(AT_S),
        start_loops=False,
    )
    oracle = _oracle()
    with TestClient(app) as client:
        assert app.state.planner.ingestor.run_cycle().results == {"slurm": "ok"}
        gpus = client.get("/v1/jobs/4242").json()["gpus"]
        mine = [v for (_, _, who), v in oracle.items() if who == "4242"]
        assert gpus["num_gpus"] == 4
        assert gpus["at_s"] == AT_S
        assert gpus["window_s"] == 300.0
        expect_util = statistics.fmean(
            statistics.fmean(v["DCGM_FI_DEV_GPU_UTIL"]) / 100 for v in mine
        )
        expect_tensor = statistics.fmean(
            statistics.fmean(v["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]) for v in mine
        )
        expect_memory = max(statistics.fmean(v["DCGM_FI_DEV_FB_USED"]) for v in mine) * MIB
        assert gpus["gpu_util_ratio"] == pytest.approx(expect_util)
        assert gpus["tensor_active_ratio"] == pytest.approx(expect_tensor)
        assert gpus["memory_used_bytes"] == pytest.approx(expect_memory)

        shared = client.get("/v1/jobs/5151").json()["gpus"]
        assert shared["num_gpus"] == 4  # host match: the other job's GPUs 2-3 too
        assert shared["least_active_gpu"] in ("gpu-b01/2", "gpu-b01/3")  # the 0.3 GPUs
        assert shared["least_active_ratio"] < 0.5

        metrics = client.get("/metrics").text
        labels = 'cluster="test",job_id="4242",scheduler="slurm"'
        line = next(
            m
            for m in metrics.splitlines()
            if m.startswith(f"planner_job_gpu_utilization_ratio{{{labels}}}")
        )
        assert float(line.split()[-1]) == pytest.approx(expect_util)
        assert f"planner_job_gpu_tensor_active_ratio{{{labels}}}" in metrics
        assert f"planner_job_gpu_memory_used_bytes{{{labels}}}" in metrics
