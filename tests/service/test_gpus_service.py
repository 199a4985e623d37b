"""DCGM GPU telemetry in the service, against a recorded Prometheus answer
(tests/data/prometheus/dcgm_query_job_4242.json; the live check is
tests/adapters/prometheus/test_service_gpus.py)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from adapters.prometheus import DcgmJobTelemetry, DcgmTelemetry, PrometheusClient
from planner.service.main import create_app
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource

RECORDED = Path(__file__).resolve().parents[1] / "data" / "prometheus" / "dcgm_query_job_4242.json"
AT_S = 1_795_172_370.0


def _answer(exchange: dict[str, Any]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        form = dict(httpx.QueryParams(request.content.decode()))
        if request.url.path == "/api/v1/query" and form["query"] == exchange["request"]["query"]:
            return httpx.Response(200, json=exchange["response"])
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}
        )

    return httpx.MockTransport(handle)


def _series_means(exchange: dict[str, Any], metric: str) -> list[float]:
    return [
        statistics.fmean(float(v) for _, v in s["values"])
        for s in exchange["response"]["data"]["result"]
        if s["metric"]["__name__"] == metric
    ]


def test_job_gpus_in_detail_and_metrics(
    db_url: str, source: ScriptedSource, make_job: JobFactory
) -> None:
    exchange = json.loads(RECORDED.read_text())
    client = PrometheusClient("http://prometheus.test", transport=_answer(exchange))
    app = create_app(
        Settings(database_url=db_url),
        store=SqlStore(db_url),
        sources=[source],
        reader=LogTailer(),
        gpus=DcgmJobTelemetry(DcgmTelemetry(client)),
        clock=Clock(AT_S),
        start_loops=False,
    )
    with TestClient(app) as http:
        source.set_jobs(
            make_job(job_id="4242", status=JobStatus.RUNNING, start_time_s=AT_S - 60),
            make_job(job_id="77", status=JobStatus.RUNNING, node_list=("nowhere",)),
            make_job(job_id="78", status=JobStatus.PENDING),
        )
        assert app.state.planner.ingestor.run_cycle().results == {"slurm": "ok"}
        gpus = http.get("/v1/jobs/4242").json()["gpus"]
        util = _series_means(exchange, "DCGM_FI_DEV_GPU_UTIL")
        tensor = _series_means(exchange, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
        assert gpus["num_gpus"] == len(util) == 4
        assert gpus["gpu_util_ratio"] == pytest.approx(statistics.fmean(util) / 100)
        assert gpus["tensor_active_ratio"] == pytest.approx(statistics.fmean(tensor))
        assert gpus["memory_used_bytes"] == pytest.approx(
            max(_series_means(exchange, "DCGM_FI_DEV_FB_USED")) * 2**20
        )
        assert http.get("/v1/jobs/77").json()["gpus"] is None  # nothing exported for it
        assert http.get("/v1/jobs/78").json()["gpus"] is None  # pending: no GPUs yet
        metrics = http.get("/metrics").text
        labels = 'cluster="test",job_id="4242",scheduler="slurm"'
        assert f"planner_job_gpu_utilization_ratio{{{labels}}} " in metrics
        assert f"planner_job_gpu_tensor_active_ratio{{{labels}}} " in metrics
        assert 'planner_job_gpu_utilization_ratio{cluster="test",job_id="77"' not in metrics


def test_a_failing_prometheus_keeps_the_last_reading(
    db_url: str, source: ScriptedSource, make_job: JobFactory
) -> None:
    exchange = json.loads(RECORDED.read_text())
    answers = [_answer(exchange)]

    def handle(request: httpx.Request) -> httpx.Response:
        if not answers:
            return httpx.Response(503, text="unavailable")
        return answers[0].handle_request(request)

    client = PrometheusClient("http://prometheus.test", transport=httpx.MockTransport(handle))
    app = create_app(
        Settings(database_url=db_url),
        store=SqlStore(db_url),
        sources=[source],
        reader=LogTailer(),
        gpus=DcgmJobTelemetry(DcgmTelemetry(client)),
        clock=Clock(AT_S),
        start_loops=False,
    )
    with TestClient(app) as http:
        source.set_jobs(make_job(job_id="4242", status=JobStatus.RUNNING))
        app.state.planner.ingestor.run_cycle()
        before = http.get("/v1/jobs/4242").json()["gpus"]
        answers.clear()
        assert app.state.planner.ingestor.run_cycle().results == {"slurm": "ok"}
        assert http.get("/v1/jobs/4242").json()["gpus"] == before
        assert before["num_gpus"] == 4
