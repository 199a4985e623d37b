"""Slurm hints from the service: the hints file for job_submit.lua, quantized hints, and the
planner's own comment token never making a job look new."""

from __future__ import annotations

from pathlib import Path

from adapters.slurm import scenario_key
from adapters.slurm.hints import read_hints_file
from planner.service.describe import description_key
from planner.service.main import create_app
from planner.service.settings import Settings, SlurmSettings
from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import SCENARIO, cycle


def test_hints_file_for_job_submit(
    tmp_path: Path, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    from fastapi.testclient import TestClient

    from adapters.logs import LogTailer

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    hints = tmp_path / "hints.tsv"
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'p.db'}",
        slurm=SlurmSettings(hints="off", hints_file=str(hints)),
    )
    app = create_app(
        settings,
        store=SqlStore(settings.database_url),
        sources=[source],
        reader=LogTailer(),
        clock=clock,
        start_loops=False,
    )
    with TestClient(app) as client:
        source.set_jobs(make_job(status=JobStatus.PENDING, comment=f"planner:scenario={scenario}"))
        cycle(client)
        app.state.planner.run_cycle()
    table = read_hints_file(hints)
    assert scenario_key("alice", str(scenario)) in table
    assert "job:alice/train" in table
    limit_min, body = table[scenario_key("alice", str(scenario))]
    assert body.startswith("rt:300")  # 100 iterations of ~0.4 ms, rounded up to 5 minutes
    assert limit_min is not None


def test_own_hint_token_does_not_change_the_description_key(make_job: JobFactory) -> None:
    plain = make_job(comment="user text planner:scenario=/x.yaml")
    hinted = make_job(comment="user text planner:scenario=/x.yaml planner:hint=rt:600;eta:1")
    assert description_key(plain) == description_key(hinted)
    assert description_key(make_job(comment="other")) != description_key(plain)
