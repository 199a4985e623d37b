"""Faults and operability: the store's faults (deleted or replaced SQLite file,
unreachable database, secrets in errors), every source failure counted, retention, the audit
trail of scheduler writes, and paged job lists."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from planner.errors import StoreError
from planner.recommend.time_limit import RuntimeHint
from planner.service.audit import AuditLog
from planner.service.loops.publish import SlurmHintsRuntime
from planner.service.models import RetentionPolicy
from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus

from .conftest import OPERATOR_TOKEN, Clock, JobFactory, ScriptedSource, bearer
from .test_service import SCENARIO, app_for, cycle, metric_value


def test_a_deleted_or_replaced_sqlite_file_fails_readiness_and_writes(
    tmp_path: Path, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    # Probe: with its SQLite file deleted the service kept writing to the unlinked file and
    # lost everything at the next restart without a word.
    db = tmp_path / "planner.db"
    with app_for(f"sqlite:///{db}", source, clock) as client:
        assert cycle(client) == {"slurm": "ok"}
        assert client.get("/readyz").json()["store"] == "ok"
        db.unlink()
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert "was deleted" in ready.json()["store"]
        jobs = client.get("/v1/jobs")
        assert jobs.status_code == 503
        assert "was deleted" in jobs.json()["error"]
        source.set_jobs(make_job(status=JobStatus.RUNNING))
        assert "was deleted" in cycle(client)["slurm"]
    assert not db.exists()  # nothing written to a new file behind the operator's back

    other = tmp_path / "other.db"
    with app_for(f"sqlite:///{other}", source, clock) as client:
        cycle(client)
        replacement = tmp_path / "replacement.db"
        replacement.write_bytes(other.read_bytes())
        os.replace(replacement, other)
        assert "replaced" in client.get("/readyz").json()["store"]


def test_errors_never_echo_the_database_password(caplog: pytest.LogCaptureFixture) -> None:
    # Probe: a malformed database URL was printed at start-up with its password.
    with pytest.raises(StoreError) as bad:
        SqlStore("postgresql+psycopg://planner:hunter2secret@db:5432:badport/planner")
    assert "hunter2secret" not in str(bad.value)
    # Probe: with PostgreSQL stopped, 503 bodies carried connection details.
    pytest.importorskip("psycopg")
    store = SqlStore("postgresql+psycopg://planner:hunter2secret@127.0.0.1:1/planner")
    with pytest.raises(StoreError) as down:
        store.list_jobs()
    assert "hunter2secret" not in str(down.value)
    public = down.value.public_message
    assert "127.0.0.1" not in public
    assert "planner@" not in public
    assert "unavailable" in public
    with pytest.raises(StoreError, match="next try in"):  # backoff: no new connection attempt
        store.list_jobs()
    assert "hunter2secret" not in caplog.text


def test_an_unexpected_parser_error_marks_the_source_down(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    # Probe: an unexpected squeue parser error left planner_source_up at 1 with no failure.
    with app_for(db_url, source, clock) as client:
        cycle(client)
        source.answer = KeyError("job_resources")
        result = cycle(client)["slurm"]
        assert "unexpected KeyError" in result
        metrics = client.get("/metrics").text
        assert metric_value(metrics, "planner_source_up", 'cluster="test",scheduler="slurm"') == 0
        (view,) = client.get("/v1/jobs").json()["sources"]
        assert "KeyError" in view["last_error"]
        assert view["consecutive_failures"] == 1


def test_retention_bounds_eta_history_samples_and_audit(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    job = make_job(status=JobStatus.PENDING, comment=f"planner:scenario={scenario}")
    with app_for(db_url, source, clock) as client:
        for i in range(12):  # one ETA per cycle: Slurm's backfill start estimate moves
            # (an unchanged job is not estimated again: planner.service.loops.incremental)
            source.set_jobs(replace(job, expected_start_time_s=clock.now + 600.0 + i))
            cycle(client)
            clock.now += 15
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        (row,) = store.list_jobs()
        assert len(store.predictions(row.id, kind="eta", limit=100)) == 12
        deleted = store.prune(RetentionPolicy(eta_rows=5), now_s=clock.now)
        assert deleted["eta_history"] == 7
        assert len(store.predictions(row.id, kind="eta", limit=100)) == 5
        store.prune(RetentionPolicy(eta_max_age_s=40), now_s=clock.now)
        assert len(store.predictions(row.id, kind="eta", limit=100)) == 2
        # the service prunes by itself, at most every retention.interval_s
        assert client.app.state.planner.pruner.maybe_prune() is not None  # type: ignore[attr-defined]
        assert client.app.state.planner.pruner.maybe_prune() is None  # type: ignore[attr-defined]


@dataclass
class Written:
    job_id: str
    comment: str = ""
    comment_changed: bool = True
    time_limit_min: int | None = 42
    error: Exception | None = None


class FakeWriter:
    """Stands in for ``SlurmHintWriter`` (its real runs are tests/adapters/slurm)."""

    def write_many(self, hints: Mapping[str, RuntimeHint]) -> dict[str, Written]:
        return {
            job_id: Written(job_id, comment=f"planner:hint=rt:{h.predicted_runtime_s:.0f}")
            for job_id, h in hints.items()
        }


def test_every_scheduler_write_is_audited(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    with app_for(db_url, source, clock) as client:
        state = client.app.state.planner  # type: ignore[attr-defined]
        source.set_jobs(make_job(status=JobStatus.PENDING, comment=f"planner:scenario={scenario}"))
        cycle(client)
        audit = AuditLog(state.store, clock)
        SlurmHintsRuntime(writer=FakeWriter(), audit=audit).after_cycle(state.store)
        records = client.get("/v1/audit", headers=bearer(OPERATOR_TOKEN)).json()["records"]
        assert {(r["action"], r["target"], r["actor"]) for r in records} == {
            ("comment", "42", "planner"),
            ("time_limit", "42", "planner"),
        }
        limit = next(r for r in records if r["action"] == "time_limit")
        assert limit["detail"]["time_limit_min"] == 42
        assert "peak-compute floor" in limit["reason"]
        assert audit.snapshot() == [
            (("slurm", "comment", "ok"), 1),
            (("slurm", "time_limit", "ok"), 1),
        ]


def test_jobs_are_paged_with_a_cursor(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    with app_for(db_url, source, clock) as client:
        source.set_jobs(*(make_job(job_id=str(i)) for i in (3, 10, 2, 1, 20)))
        cycle(client)
        every = client.get("/v1/jobs").json()
        assert [j["job_id"] for j in every["jobs"]] == ["1", "2", "3", "10", "20"]
        assert every["next_cursor"] is None
        seen, cursor = [], None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = client.get("/v1/jobs", params=params).json()
            seen += [j["job_id"] for j in page["jobs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == ["1", "2", "3", "10", "20"]
        bad = client.get("/v1/jobs", params={"cursor": "!!"})
        assert bad.status_code == 422
        assert bad.json()["error"].startswith("cursor:")


def test_jobs_come_in_pages_unless_every_job_is_asked_for(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    limits = {"jobs_page": 2, "jobs_unpaged_max": 5}
    with app_for(db_url, source, clock, limits=limits) as client:
        source.set_jobs(*(make_job(job_id=str(i)) for i in (3, 10, 2, 1, 20)))
        cycle(client)
        first = client.get("/v1/jobs").json()  # no limit: the default page
        assert [j["job_id"] for j in first["jobs"]] == ["1", "2"]
        assert "nodes" not in first["sources"][0]
        second = client.get("/v1/jobs", params={"cursor": first["next_cursor"]}).json()
        assert [j["job_id"] for j in second["jobs"]] == ["3", "10"]
        every = client.get("/v1/jobs", params={"limit": 0}).json()
        assert [j["job_id"] for j in every["jobs"]] == ["1", "2", "3", "10", "20"]
        assert every["next_cursor"] is None
        assert "nodes" in every["sources"][0]
        source.set_jobs(*(make_job(job_id=str(i)) for i in (3, 10, 2, 1, 20, 21)))
        cycle(client)
        refused = client.get("/v1/jobs", params={"limit": 0})
        assert refused.status_code == 422
        error = refused.json()["error"]
        assert error.startswith("limit:")
        assert "limits.jobs_unpaged_max" in error
        assert "next_cursor" in error
        negative = client.get("/v1/jobs", params={"limit": -1})
        assert negative.status_code == 422
