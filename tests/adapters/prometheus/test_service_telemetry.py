"""The service reads a job's progress and per-rank timings from a real Prometheus.

Four live ``job_exporter`` ranks (one 1.5x slow) are scraped by the real Prometheus of the
``telemetry`` fixture; the planner, with ``prometheus.url`` set, sees the Slurm job ``live-77``
progress and flags the slow rank through its live straggler tracker.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from adapters.logs import LogTailer
from planner.service.main import create_app
from planner.service.settings import PrometheusSettings, Settings
from planner.service.store.sql import SqlStore
from planner.specs.job import JobState, JobStatus
from tests.adapters.prometheus.conftest import LIVE_JOB_ID, LIVE_RANKS, SLOW_RANK, Telemetry
from tests.service.conftest import ScriptedSource

pytestmark = pytest.mark.integration


def test_progress_and_stragglers_from_prometheus(telemetry: Telemetry, tmp_path: Path) -> None:
    prom = telemetry.prom
    prom.wait_for(f'training_iteration{{job_id="{LIVE_JOB_ID}"}}', min_results=LIVE_RANKS)
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'p.db'}",
        prometheus=PrometheusSettings(url=prom.url, step_s=1.0),
    )
    source = ScriptedSource()
    source.set_jobs(
        JobState(
            scheduler="slurm",
            cluster="test",
            job_id=LIVE_JOB_ID,
            name="live",
            status=JobStatus.RUNNING,
            num_gpus=LIVE_RANKS,
            start_time_s=time.time() - 30,
        )
    )
    app = create_app(
        settings,
        store=SqlStore(settings.database_url),
        sources=[source],
        reader=LogTailer(),
        start_loops=False,
    )
    with TestClient(app) as client:
        ingestor = app.state.planner.ingestor
        deadline = time.monotonic() + 40
        body: dict[str, object] = {}
        while time.monotonic() < deadline:
            ingestor.run_cycle()
            body = client.get(f"/v1/jobs/{LIVE_JOB_ID}/stragglers").json()
            if body.get("available") and body.get("stragglers"):
                break
            time.sleep(2)
        job = client.get(f"/v1/jobs/{LIVE_JOB_ID}").json()
        assert (job["progress"]["iteration"] or 0) > 0
        assert job["progress"]["train_iters"] == 1_000_000
        assert body.get("available") is True, body
        flagged = [s["rank"] for s in body["stragglers"]]  # type: ignore[index]
        assert flagged == [SLOW_RANK], body
