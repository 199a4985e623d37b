"""The split service's pieces in one test process: the ingest side's status record written to a
real SQLite store and read back by an API app built with an ``IngestView`` (readiness, the
loop's metrics under the names one process exports), and the supervisor restarting a child that
exits. The whole process tree runs in ``test_split_processes.py``."""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from adapters.logs import LogTailer
from planner.service.audit import AuditLog
from planner.service.main import build_service, create_app, ingest_status, metrics_registry
from planner.service.processes import HeartbeatWriter, IngestView, Supervisor
from planner.service.settings import Settings
from planner.service.store.sql import SqlStore

from .conftest import Clock, ScriptedSource

STALE_S = 60.0


def _families(registry: CollectorRegistry) -> list[str]:
    return [family.name for family in registry.collect()]


def test_the_api_process_reads_readiness_and_metrics_from_the_ingest_status(
    db_url: str, source: ScriptedSource, clock: Clock
) -> None:
    settings = Settings(database_url=db_url, auth={"mode": "none"})
    store = SqlStore(db_url)
    store.migrate()
    ingest = build_service(settings, store=store, sources=[source], reader=LogTailer(), clock=clock)
    beat = HeartbeatWriter(store, functools.partial(ingest_status, ingest, started_s=clock())).beat
    view = IngestView(SqlStore(db_url), clock, stale_after_s=STALE_S)
    app = create_app(settings, store=SqlStore(db_url), clock=clock, ingest_view=view)
    with TestClient(app) as client:
        # no ingest process yet: an API-only process serves reads, and says what is missing
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["processes"] == "api"
        assert ready.json()["ingest"] == "no ingest process reported in the last 60 s"
        assert ready.json()["leader"] is False

        ingest.state.run_cycle()
        # the last forecast the worker process made for the source, as it records it
        ingest.state.ingestor.deps.forecaster.last_duration_s["slurm/test"] = 12.5
        beat()
        clock.now += 2  # past the view's cache
        body = client.get("/readyz").json()
        assert (body["ingest"], body["sources"], body["cycles_ok"]) == ("ok", ["slurm"], 1)
        assert body["leader"] is True  # what the ingest process says of itself

        metrics = client.get("/metrics").text
        assert 'planner_ingest_cycle_seconds{cluster="test",scheduler="slurm"}' in metrics
        assert 'planner_ingest_poll_seconds{cluster="test",scheduler="slurm"}' in metrics
        assert 'planner_queue_forecast_seconds{cluster="test",scheduler="slurm"} 12.5' in metrics

        clock.now += STALE_S + 1  # the ingest process went silent
        assert client.get("/readyz").json()["ingest"].startswith("no ingest process reported")
    ingest.state.stop()


def test_split_metrics_have_the_names_of_one_process(db_url: str, clock: Clock) -> None:
    store = SqlStore(db_url)
    store.migrate()
    service = build_service(Settings(database_url=db_url), store=store, sources=[], clock=clock)
    audit = AuditLog(store, clock)
    single = metrics_registry(store, service.state.ingestor, audit, kubernetes_stats=dict)
    view = IngestView(store, clock, stale_after_s=STALE_S)
    split = metrics_registry(
        store, service.state.ingestor, audit, ingest_view=view, kubernetes=True
    )
    assert _families(split) == _families(single)
    service.state.ingestor.close()


def _exiting_child() -> multiprocessing.process.BaseProcess:
    return multiprocessing.get_context("fork").Process(target=os._exit, args=(3,))


def _sleeping_child() -> multiprocessing.process.BaseProcess:
    return multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))


def _until(check: object, timeout_s: float = 30.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_child_that_exits_is_reported_and_started_again(tmp_path: Path) -> None:
    supervisor = Supervisor(_exiting_child, min_backoff_s=0.05, max_backoff_s=0.1, poll_s=0.02)
    supervisor.start()
    try:
        _until(lambda: supervisor.restarts >= 2)
        _until(lambda: supervisor.problem() is not None)
        assert "exited with code 3" in (supervisor.problem() or "")
        store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
        store.migrate()
        view = IngestView(store, time.time, stale_after_s=STALE_S, child=supervisor)
        assert view.gates_readiness
        assert not view.leads()
        assert view.problem() is not None
    finally:
        supervisor.stop(timeout_s=5)


def test_a_running_child_is_healthy_until_stopped() -> None:
    supervisor = Supervisor(_sleeping_child, poll_s=0.02)
    supervisor.start()
    try:
        pid = supervisor.pid
        assert pid is not None
        assert supervisor.problem() is None
        assert supervisor.restarts == 0
    finally:
        supervisor.stop(timeout_s=5)
    assert supervisor.pid is None
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


_ORPHAN_CHILD = """
import os, sys, time
from planner.service.ingest_child import end_with_parent
assert end_with_parent(os.getppid())
print("armed", flush=True)
time.sleep(120)
"""

_PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
time.sleep(120)
"""


def _ended(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie nobody reaped yet (an orphan's new parent may not
    reap at once)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_an_ingest_child_ends_with_its_parent_even_while_it_starts_up() -> None:
    """The ingest child arms the kernel's parent-death signal before it imports the service:
    a parent killed with SIGKILL (no chance to stop its child) takes the child with it, where
    the child would otherwise sleep on as an orphan."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _ORPHAN_CHILD], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    try:
        assert parent.stdout.readline().strip() == "armed"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 60  # a hang detector: the signal comes at once
        while not _ended(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(child_pid), "the child outlived its killed parent"
    finally:
        parent.kill()
        if not _ended(child_pid):
            os.kill(child_pid, signal.SIGKILL)
