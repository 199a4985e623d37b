"""Trace-based straggler analysis through the API: upload, and traces that jobs name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
ST_TRACE = TRACES / "bytedance-straggler-trace-ST.parquet"
ST_META = TRACES / "bytedance-straggler-meta-ST.yaml"


def test_upload_a_trace(db_url: str, source: ScriptedSource, clock: Clock) -> None:
    with app_for(db_url, source, clock) as client:
        response = client.post(
            "/v1/stragglers",
            files={
                "trace": (ST_TRACE.name, ST_TRACE.read_bytes(), "application/octet-stream"),
                "meta": (ST_META.name, ST_META.read_bytes(), "application/yaml"),
            },
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["slowdown"] == pytest.approx(1.18, abs=0.02)
        assert "pipeline" in body["diagnosis"]


def test_upload_garbage_is_a_clear_422(db_url: str, source: ScriptedSource, clock: Clock) -> None:
    with app_for(db_url, source, clock) as client:
        response = client.post(
            "/v1/stragglers",
            files={
                "trace": ("t.csv", b"dp_rank,stage\n0,0\n", "text/csv"),
                "meta": ("m.yaml", ST_META.read_bytes(), "application/yaml"),
            },
        )
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert "t.csv" in detail
        assert "/tmp" not in detail


def test_a_job_that_names_its_trace(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory, cluster_root: Path
) -> None:
    # the traces are world-readable files outside the job's working directory, under an
    # allowed root every user may search (the checkout's own directories may be private: a
    # clone in ``mktemp -d`` is, and the job's user is not a user of this host)
    trace, meta = (shutil.copy(f, cluster_root / f.name) for f in (ST_TRACE, ST_META))
    comment = f"planner:trace={trace} planner:trace-meta={meta}"
    with app_for(db_url, source, clock, allowed_file_roots=[str(cluster_root)]) as client:
        source.set_jobs(make_job(status=JobStatus.RUNNING, comment=comment))
        cycle(client)
        body = client.get("/v1/jobs/42/stragglers").json()
        assert body["available"] is True
        assert body["source"] == "trace"
        assert body["slowdown"] == pytest.approx(1.18, abs=0.02)
        metrics = client.get("/metrics").text
        assert 'planner_job_straggler_slowdown_ratio{cluster="test",job_id="42"' in metrics


def test_a_job_whose_trace_is_missing(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory, tmp_path: Path
) -> None:
    comment = f"planner:trace={tmp_path}/none.parquet planner:trace-meta={ST_META}"
    with app_for(db_url, source, clock) as client:
        source.set_jobs(make_job(status=JobStatus.RUNNING, comment=comment))
        cycle(client)
        body = client.get("/v1/jobs/42/stragglers").json()
        assert body["available"] is False
