"""``/metrics`` while the store cannot be read: the planner's series keep their last values and
``planner_store_up`` says the store is down, instead of the whole scrape failing. The store
fails for real: its SQLite file is moved away (the store refuses a file that is not the one it
opened) and then put back."""

from __future__ import annotations

import os
from pathlib import Path

from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, metric_value

JOB = 'cluster="test",job_id="42",scheduler="slurm"'
SOURCE = 'cluster="test",scheduler="slurm"'


def series(text: str) -> list[str]:
    """The sample lines of an exposition, without ``planner_store_up``."""
    return sorted(
        line
        for line in text.splitlines()
        if line and not line.startswith("#") and not line.startswith("planner_store_up")
    )


def test_metrics_keep_their_last_values_while_the_store_is_down(
    tmp_path: Path, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    db = tmp_path / "planner.db"
    away = tmp_path / "planner.db.away"
    with app_for(f"sqlite:///{db}", source, clock) as client:
        source.set_jobs(make_job(status=JobStatus.RUNNING, start_time_s=clock.now))
        assert cycle(client) == {"slurm": "ok"}
        before = client.get("/metrics")
        assert before.status_code == 200
        assert metric_value(before.text, "planner_store_up", "") == 1
        assert metric_value(before.text, "planner_job_gpus", JOB) == 2
        assert metric_value(before.text, "planner_source_up", SOURCE) == 1

        os.rename(db, away)  # the store's file is gone: every read raises StoreError
        assert client.get("/readyz").status_code == 503
        down = client.get("/metrics")
        assert down.status_code == 200
        assert metric_value(down.text, "planner_store_up", "") == 0
        assert series(down.text) == series(before.text)  # the last values, every series
        assert metric_value(down.text, "planner_job_gpus", JOB) == 2
        assert metric_value(down.text, "planner_source_up", SOURCE) == 1

        os.rename(away, db)  # back: read again
        back = client.get("/metrics")
        assert metric_value(back.text, "planner_store_up", "") == 1
        assert metric_value(back.text, "planner_job_gpus", JOB) == 2


def test_metrics_answer_when_the_store_is_down_from_the_first_scrape(
    tmp_path: Path, source: ScriptedSource, clock: Clock
) -> None:
    db = tmp_path / "planner.db"
    with app_for(f"sqlite:///{db}", source, clock) as client:
        db.unlink()
        down = client.get("/metrics")
        assert down.status_code == 200
        assert metric_value(down.text, "planner_store_up", "") == 0
        assert "# TYPE planner_ingest_cycle_seconds gauge" in down.text  # its own metrics
