"""The store on PostgreSQL (the HA setup: one leader writes, every replica reads).

A real PostgreSQL (Debian package) is started by ``deploy/dev/postgres-up.sh``; each test gets a
throw-away database. Skips only when the server binaries or the psycopg driver are missing.
"""

from __future__ import annotations

import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import make_url

from adapters.logs import LogTailer
from planner.errors import StoreError
from planner.service.loops import IngestLoop
from planner.service.main import create_app
from planner.service.models import JobRow, SourceRow
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore
from planner.service.store.tables import METADATA
from planner.specs.job import JobStatus

from .conftest import Clock, JobFactory, ScriptedSource

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "dev"
PG_PORT = os.environ.get("PG_PORT", "15432")
STACK_ROOT = os.environ.get("STACK_ROOT") or "/tmp/planner-dev-stack"


def _server_binaries() -> Path | None:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def _is_up() -> bool:
    pg_bin = _server_binaries()
    if pg_bin is None:
        return False
    proc = subprocess.run(
        [str(pg_bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", PG_PORT],
        check=False,
        timeout=10,
    )
    return proc.returncode == 0


def _script(name: str) -> None:
    proc = subprocess.run(
        ["bash", str(DEPLOY / name)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "STACK_ROOT": STACK_ROOT, "PG_PORT": PG_PORT},
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    """URL of the planner database on a running PostgreSQL; stopped afterwards if started here."""
    if _server_binaries() is None:
        pytest.skip(
            "PostgreSQL server not installed (/usr/lib/postgresql/*/bin/initdb): run "
            "deploy/dev/install-deps.sh"
        )
    pytest.importorskip("psycopg", reason="the psycopg driver is missing: pip install -e .[dev]")
    owned = not _is_up()
    _script("postgres-up.sh")
    yield f"postgresql+psycopg://planner:planner@127.0.0.1:{PG_PORT}/planner"
    if owned:
        _script("postgres-down.sh")


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty database for one test (dropped afterwards)."""
    name = f"planner_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


def test_migrations_run_on_postgres_and_match_the_models(pg_url: str, tmp_path: Path) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    store = SqlStore(pg_url)
    assert store.revision() is None
    store.migrate()
    store.migrate()  # idempotent
    reference = SqlStore(f"sqlite:///{tmp_path / 'ref.db'}")
    reference.migrate()
    assert store.revision() == reference.revision()
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), METADATA) == []
        tables = set(inspect(conn).get_table_names())
    assert {"jobs", "sources", "alembic_version"} <= tables
    # a second replica starting against the migrated database changes nothing
    replica = SqlStore(pg_url)
    replica.migrate()
    assert replica.revision() == reference.revision()
    for s in (store, replica, reference):
        s.dispose()


def test_leader_writes_while_a_replica_serves_reads(
    pg_url: str, make_job: JobFactory, clock: Clock
) -> None:
    leader_store = SqlStore(pg_url)
    leader_store.migrate()
    source = ScriptedSource()
    leader = IngestLoop(leader_store, [source], LogTailer(), clock=clock)
    replica = create_app(
        Settings(database_url=pg_url),
        store=SqlStore(pg_url),
        sources=[],
        reader=LogTailer(),
        clock=clock,
        start_loops=False,
    )
    cycles = 25
    errors: list[str] = []

    def lead() -> None:
        try:
            for i in range(1, cycles + 1):
                # each cycle adds two jobs and finishes the oldest running one
                jobs = [
                    make_job(
                        job_id=str(n),
                        status=JobStatus.COMPLETED if n < i else JobStatus.RUNNING,
                    )
                    for n in range(1, 2 * i + 1)
                ]
                source.set_jobs(*jobs, taken_at_s=clock.now)
                report = leader.run_cycle()
                if not report.all_ok:
                    errors.append(str(report.results))
        except Exception as exc:  # surfaced below, in the test's thread
            errors.append(repr(exc))

    seen_counts: list[int] = []

    def read_jobs(client: TestClient) -> None:
        response = client.get("/v1/jobs")
        assert response.status_code == 200, response.text
        ids = sorted(int(j["job_id"]) for j in response.json()["jobs"])
        # a cycle is one transaction: readers see whole cycles (an even job count, ids 1..n)
        assert ids == list(range(1, len(ids) + 1))
        assert len(ids) % 2 == 0
        seen_counts.append(len(ids))

    with TestClient(replica) as client:
        thread = threading.Thread(target=lead)
        thread.start()
        while thread.is_alive():
            read_jobs(client)
        thread.join()
        read_jobs(client)
        assert errors == []
        assert seen_counts == sorted(seen_counts)  # never goes back
        assert seen_counts[-1] == 2 * cycles
        assert len(set(seen_counts)) > 3  # the reads really overlapped the writes
        final = client.get("/v1/jobs", params={"active": True}).json()["jobs"]
        assert sorted(int(j["job_id"]) for j in final) == list(range(cycles, 2 * cycles + 1))
    leader_store.dispose()


def half_write(store: SqlStore) -> None:
    """Change one stored row and add another in one unit of work."""
    with store.session() as s:
        row = s.get(SourceRow, "slurm")
        assert row is not None
        row.cluster = "half-written"
        s.add(SourceRow(name="new", scheduler="slurm", cluster="n", consecutive_failures=0))


def test_failed_writes_leave_stored_data_intact(pg_url: str) -> None:
    store = SqlStore(pg_url)
    store.migrate()
    with store.session() as s:
        s.add(SourceRow(name="slurm", scheduler="slurm", cluster="c", consecutive_failures=0))

    # a constraint violation rolls the whole unit of work back
    with pytest.raises(StoreError, match="database error"), store.session() as s:
        s.add_all(
            [
                SourceRow(name="other", scheduler="slurm", cluster="x", consecutive_failures=0),
                SourceRow(name="slurm", scheduler="slurm", cluster="dup", consecutive_failures=0),
            ]
        )
    assert [(r.name, r.cluster) for r in store.sources()] == [("slurm", "c")]

    # the connection dies (leader killed, failover) after the writes, before the commit
    admin = SqlStore(pg_url)

    def kill_backend(conn: Any) -> None:
        pid = conn.connection.dbapi_connection.info.backend_pid
        with admin.engine.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    event.listen(store.engine, "commit", kill_backend)
    try:
        with pytest.raises(StoreError, match=r"terminat|closed|connection"):
            half_write(store)
    finally:
        event.remove(store.engine, "commit", kill_backend)
    assert [(r.name, r.cluster) for r in admin.sources()] == [("slurm", "c")]
    # and the store recovers on the next unit of work (a fresh pooled connection)
    with store.session() as s:
        s.add(
            JobRow(
                scheduler="slurm",
                cluster="c",
                job_id="1",
                status="running",
                state={},
                first_seen_s=0.0,
                last_seen_s=0.0,
            )
        )
    assert [r.job_id for r in admin.list_jobs()] == ["1"]
    assert [(r.name, r.cluster) for r in store.sources()] == [("slurm", "c")]
    store.dispose()
    admin.dispose()
