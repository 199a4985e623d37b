"""The service under load, at a small scale: the fake Slurm of ``benchmarks/load.py`` prints what
the real adapter parses; the ingest is incremental (an unchanged job is not described again, its
stored snapshot and ETA are not rewritten) and gives what a full pass gives; a page of
``/v1/jobs`` reads only its rows; ``/metrics`` exports per-job series only for the jobs that
need them; a large queue is forecast in the worker process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session

from adapters.logs import LogTailer
from adapters.slurm import SlurmSource
from adapters.slurm.sacct import parse_sacct_json
from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.squeue import parse_squeue_json
from benchmarks.fake_slurm import FakeSlurm
from planner.errors import SourceError
from planner.service.job_series import exported_jobs
from planner.service.loops import IngestLoop, IngestSettings, incremental, jobs
from planner.service.loops.context import QueueForecastConfig
from planner.service.loops.incremental import eta_remaining_now
from planner.service.loops.publish import slurm_jobs
from planner.service.metrics import PlannerCollector
from planner.service.models import JobRow
from planner.service.store.sql import SqlStore
from planner.specs.job import JobState, JobStatus

from .conftest import Clock

T0 = 1_800_000_000.0


def _cluster(root: Path, clock: Clock, **kw: Any) -> FakeSlurm:
    fake = FakeSlurm(
        root / "cluster",
        **{"jobs": 120, "nodes": 30, "gpus": 600, "users": 12, "churn": 0.05, "seed": 1, **kw},
        clock=clock,
    )
    fake.populate()
    return fake


def _loop(fake: FakeSlurm, db: Path, clock: Clock, **settings: Any) -> IngestLoop:
    store = SqlStore(f"sqlite:///{db}")
    store.migrate()
    source = SlurmSource(
        bin_dir=str(fake.bin_dir),
        allowed_file_roots=[str(fake.shared)],
        max_script_fetches=100_000,  # every script in the first cycle: descriptions settle
        clock=clock,
    )
    return IngestLoop(
        store, [source], LogTailer(), clock=clock, settings=IngestSettings(**settings)
    )


def _ingesting(root: Path, db: Path) -> tuple[Clock, FakeSlurm, IngestLoop]:
    """A small fake cluster under ``root`` and an ingest loop storing it in ``db``."""
    clock = Clock(T0)
    fake = _cluster(root, clock)
    return clock, fake, _loop(fake, db, clock)


def test_the_fake_slurm_prints_what_the_real_adapter_parses(cluster_root: Path) -> None:
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock)
    counts = fake.summary()
    squeue = parse_squeue_json((fake.out / "squeue.json").read_text())
    active = [j for j in squeue if j.status.is_active]
    assert len(active) == counts["jobs"] == 120
    assert sum(j.status == JobStatus.RUNNING for j in active) == counts["running"] > 10
    arrays = [j for j in active if j.job_id.endswith("]")]
    assert len(arrays) == counts["pending_arrays"]
    running = [j for j in active if j.status == JobStatus.RUNNING]
    assert all(j.gpus_allocated and j.node_list and j.gpu_type in {"h100", "a100"} for j in running)
    assert all(j.stdout_path and j.stdout_path.startswith(str(fake.home)) for j in running)
    nodes = parse_sinfo_json((fake.out / "sinfo.json").read_text())
    assert len(nodes) == 30
    assert sum(n.num_gpus for n in nodes) == counts["gpus_installed"]
    assert sum(n.num_gpus_allocated for n in nodes) == sum(j.num_gpus for j in running)
    assert any("drain" in n.state for n in nodes)
    ended = parse_sacct_json((fake.out / "sacct.json").read_text())
    assert ended
    assert all(not j.status.is_active and j.end_time_s for j in ended)

    # through the real commands (sh scripts), as the service runs them
    source = SlurmSource(bin_dir=str(fake.bin_dir), max_script_fetches=3, clock=clock)
    snap = source.snapshot()
    assert snap.cluster == "loadcluster"
    assert len(snap.nodes) == 30
    assert sum(j.batch_script is not None for j in snap.jobs) == 3
    changed = fake.advance()
    assert changed["ended"] >= 1
    assert changed["submitted"] >= 1
    assert len(source.snapshot().jobs) >= len(snap.jobs)


def test_an_unchanged_job_is_not_described_or_rewritten_again(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, churn=0.0)
    loop = _loop(fake, tmp_path / "p.db", clock)
    described: list[str] = []
    real = jobs.describe_job

    def counting(job: Any, read: Any, **kw: Any) -> Any:
        described.append(job.job_id)
        return real(job, read, **kw)

    monkeypatch.setattr(jobs, "describe_job", counting)
    assert loop.run_cycle().results == {"slurm": "ok"}
    first = len(described)
    assert first >= 120
    store = loop.deps.store
    before = {r.job_id: r for r in store.list_jobs()}

    clock.now += 15.0  # nothing changed in Slurm, no log grew
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert len(described) == first  # no job described again
    after = {r.job_id: r for r in store.list_jobs()}
    kept = 0
    for job_id, row in after.items():
        old = before[job_id]
        assert row.state == old.state
        if row.active:  # not rewritten to say it was seen: /v1/jobs takes the source's poll
            assert row.last_seen_s == old.last_seen_s
            # a running job's ETA stays as made unless it is overdue (now past a quantile)
            ends = (old.eta or {}).get("completion_time_s") or {}
            if row.status == "running" and ends and min(ends.values()) >= clock.now:
                kept += 1
                assert row.eta["made_at_s"] == old.eta["made_at_s"]
    assert kept > 10

    # a log that grows re-estimates its job's ETA at once; a new job is described
    running = next(
        j
        for j in fake.jobs.values()
        if j.state == "RUNNING" and j.logs and j.comment and j.iteration < j.train_iters - 500
    )
    clock.now += running.step_s * running.log_interval * 2
    fake.advance()
    assert loop.run_cycle().results == {"slurm": "ok"}
    (row,) = store.find_jobs(fake.display_id(running))
    assert row.eta is not None
    assert row.eta["made_at_s"] == clock.now
    assert row.iteration == running.iteration
    assert len(described) == first + fake.counts["submitted"]


def test_a_first_cycle_inserts_each_new_job_once_and_finishes_the_ended_ones(
    tmp_path: Path, cluster_root: Path
) -> None:
    _, _, loop = _ingesting(cluster_root, tmp_path / "p.db")
    updates: list[str] = []

    def count(_c: object, _cur: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE JOBS"):
            updates.append(statement.split(" WHERE ", maxsplit=1)[0])

    event.listen(loop.deps.store.engine, "before_cursor_execute", count)
    assert loop.run_cycle().results == {"slurm": "ok"}
    # each new row was inserted as the cycle left it: no update writes its snapshot again
    assert not [u for u in updates if "state" in u.replace("=", " ").split()]
    ended = [r for r in loop.deps.store.list_jobs() if not r.active]
    assert ended  # jobs first seen ended: each finished (its outcome) in that first cycle
    assert [r.job_id for r in ended if r.outcome is None] == []


def test_a_cycle_takes_back_the_job_rows_the_last_one_committed(
    tmp_path: Path, cluster_root: Path
) -> None:
    """A steady cycle does not read and decode every job row again (10,000 rows cost
    about a second a cycle): it takes the rows the last cycle committed, unless another writer
    (a second replica's cycle) moved the table since."""
    clock, fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    assert loop.run_cycle().results == {"slurm": "ok"}
    store = loop.deps.store
    loads: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        # the whole-cluster read of ``jobs_of``: every column of the cluster's jobs
        if statement.lstrip().startswith("SELECT jobs.id,") and statement.rstrip().endswith(
            "WHERE jobs.scheduler = ? AND jobs.cluster = ?"
        ):
            loads.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    for _ in range(2):
        clock.now += 15.0
        fake.advance()
        assert loop.run_cycle().results == {"slurm": "ok"}
    assert loads == []

    other = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")  # another replica polls the cluster
    with other.unit_of_work() as uow:
        uow.source("slurm", scheduler="slurm").last_attempt_s = clock.now + 1.0
    clock.now += 15.0
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert len(loads) == 1


def test_slurm_hints_read_the_jobs_the_cycle_committed(tmp_path: Path, cluster_root: Path) -> None:
    """The Slurm hints after a cycle read the rows the cycle committed (no whole-cluster read
    of 10,000 rows again), the same jobs as ``list_jobs`` in the same order and state."""
    clock, fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    assert loop.run_cycle().results == {"slurm": "ok"}
    clock.now += 15.0
    fake.advance()
    assert loop.run_cycle().results == {"slurm": "ok"}
    store = loop.deps.store
    loads: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().startswith("SELECT jobs.id,"):
            loads.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    rows = slurm_jobs(store)
    event.remove(store.engine, "before_cursor_execute", count)
    assert loads == []

    def stored(jobs: list[JobRow]) -> Any:  # as JSON holds them (a kept row may hold tuples)
        return json.loads(json.dumps([(r.job_id, r.status, r.prediction, r.eta) for r in jobs]))

    assert stored(rows) == stored(store.list_jobs())


def _estimated_statuses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The status of every job whose ETA the ingest loop makes from now on (``update_eta``
    runs as it is; each call is recorded)."""
    estimated: list[str] = []
    real = jobs.update_eta

    def counting(uow: Any, row: JobRow, job: Any, **kw: Any) -> None:
        estimated.append(row.status)
        real(uow, row, job, **kw)

    monkeypatch.setattr(jobs, "update_eta", counting)
    return estimated


def test_a_pending_eta_is_made_from_the_prediction_its_cycle_stores(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node history gives pending jobs their expected straggler term after their ETAs
    were made: they are made again in the same cycle, so the stored ETA carries the term and
    the next cycle, with nothing changed, estimates none of them again (it once did all
    2,300 of a 10,000-job cluster's pending jobs with a prediction)."""
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, churn=0.0)
    loop = _loop(fake, tmp_path / "p.db", clock)
    assert loop.run_cycle().results == {"slurm": "ok"}
    pending = [r for r in loop.deps.store.list_jobs() if r.status == "pending" and r.prediction]
    assert len(pending) > 5
    for row in pending:
        term = row.prediction["expected_straggler"]
        assert row.eta["straggler_factor"] == term["factor"]
    estimated = _estimated_statuses(monkeypatch)
    clock.now += 15.0
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert "pending" not in estimated


def test_a_node_drained_without_slow_node_history_estimates_no_pending_eta_again(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that drains or returns changes every pending job's expected straggler term (the
    cluster's node count in it), not its factor while no node was ever slow: the term is
    stored, and no ETA is made again for it (a 10,000-job cluster's 2,300 pending ETAs were,
    at every node change: 2.7-3.0 CPU-s against 1.9 for a steady cycle)."""
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, churn=0.0)
    loop = _loop(fake, tmp_path / "p.db", clock)
    assert loop.run_cycle().results == {"slurm": "ok"}

    def nodes_in_terms() -> set[int]:
        rows = loop.deps.store.list_jobs()
        return {
            r.prediction["expected_straggler"]["cluster_nodes"]
            for r in rows
            if r.status == "pending" and r.prediction
        }

    (before,) = nodes_in_terms()
    estimated = _estimated_statuses(monkeypatch)
    next(n for n in fake.nodes if not n.drained).drained = True
    fake.write()
    clock.now += 15.0
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert nodes_in_terms() == {before - 1}  # the term says what it was made from
    assert "pending" not in estimated  # ...and the ETAs, made with the same factor, stay
    clock.now += 15.0
    assert loop.run_cycle().results == {"slurm": "ok"}
    assert "pending" not in estimated  # nor the cycle after: made from what is stored


def _view(row: JobRow, now: float) -> dict[str, Any]:
    """What a cycle leaves a job at, with a running ETA's remaining time taken at ``now``."""
    eta = dict(row.eta or {})
    for key in ("made_at_s", "history_made_at_s", "history_progress"):
        eta.pop(key, None)
    if row.status != "pending" and row.eta:  # (an ended job's: as of its last ETA's making)
        eta["remaining_s"] = None if eta.get("finished") else eta_remaining_now(row.eta, now)
    return {
        "status": row.status,
        "state": row.state,
        "described_by": row.described_by,
        "prediction": row.prediction,
        "iteration": row.iteration,
        "eta": eta,
        "queue_forecast": row.queue_forecast,
        "ended_s": row.ended_s,
    }


def _diff(a: dict[str, Any], b: dict[str, Any], path: str = "") -> list[str]:
    """Where two nested dicts differ (paths with both values)."""
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _diff(x, y, f"{path}{key}.")
        elif x != y:
            out.append(f"{path}{key}: {x!r} != {y!r}")
    return out


def test_the_incremental_cycle_gives_what_a_full_pass_gives(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services ingest the same churning cluster at the same times: one incrementally, the
    other forgetting its memos before every cycle (every job changed: the full pass)."""
    monkeypatch.setattr(incremental, "KNOWLEDGE_REFRESH_S", 0.0)  # new knowledge at once
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, jobs=60, nodes=16, gpus=300)
    forecast = QueueForecastConfig(interval_s=0.0)
    fast = _loop(fake, tmp_path / "fast.db", clock, queue_forecast=forecast)
    full = _loop(fake, tmp_path / "full.db", clock, queue_forecast=forecast)
    for step in range(4):
        if step:
            clock.now += 60.0
            fake.advance()
        full.deps.memo = incremental.IngestMemo()
        assert fast.run_cycle().results == full.run_cycle().results == {"slurm": "ok"}
        a = {r.job_id: _view(r, clock.now) for r in fast.deps.store.list_jobs()}
        b = {r.job_id: _view(r, clock.now) for r in full.deps.store.list_jobs()}
        assert a.keys() == b.keys()
        for job_id, view in a.items():
            assert view == b[job_id], (step, job_id, _diff(view, b[job_id]))


def test_a_page_of_jobs_reads_the_rows_of_the_page(tmp_path: Path, cluster_root: Path) -> None:
    _clock, _fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    loop.run_cycle()
    store = loop.deps.store
    every = [r.job_id for r in store.list_jobs()]
    assert len(every) > 120
    for size in (1, 7, 50, 1000):
        seen: list[str] = []
        after = None
        while True:
            page = store.list_jobs(after=after, limit=size)
            seen += [r.job_id for r in page]
            if len(page) < size:
                break
            last = page[-1]
            after = (last.scheduler, last.cluster, jobs_sort_key(last.job_id))
        assert seen == every, size
    running = store.list_jobs(status="running", limit=5)
    assert [r.job_id for r in running] == [r.job_id for r in store.list_jobs(status="running")][:5]


def jobs_sort_key(job_id: str) -> tuple[int, str]:
    from planner.service.models import job_sort_key

    return job_sort_key(job_id)


def test_metrics_export_per_job_series_only_for_jobs_that_need_them(
    tmp_path: Path, cluster_root: Path
) -> None:
    clock, _fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    loop.run_cycle()
    store = loop.deps.store
    active = store.list_jobs(active_only=True)
    text = _exposition(PlannerCollector(store, clock))
    with_series = {line.split('job_id="')[1].split('"')[0] for line in text if "job_info{" in line}
    need = {r.job_id for r in active if r.status != "pending" or r.prediction is not None}
    assert with_series == need
    assert any(r.status == "pending" and r.prediction is None for r in active)  # left out...
    counted = {
        (line.split('status="')[1].split('"')[0]): float(line.rsplit(" ", 1)[1])
        for line in text
        if line.startswith("planner_jobs{")
    }
    assert sum(counted.values()) == len(active)  # ...but counted
    gpus = sum(
        float(line.rsplit(" ", 1)[1]) for line in text if line.startswith("planner_jobs_gpus{")
    )
    assert gpus == sum(r.state["num_gpus"] for r in active)

    capped = _exposition(PlannerCollector(store, clock, max_pending_jobs=2))
    pending = [line for line in capped if "job_info{" in line and 'status="pending"' in line]
    assert len(pending) == 2
    rows = store.jobs_for_metrics()
    kept = exported_jobs(rows, 2)
    assert sum(r.status == "pending" for r in kept) == 2
    capped_rows = store.jobs_for_metrics(max_pending=2)  # the store picks the same two
    assert [r.job_id for r in capped_rows] == [r.job_id for r in kept]
    assert [r for r in kept if r.status != "pending"] == [r for r in rows if r.status != "pending"]


def _exposition(collector: PlannerCollector) -> list[str]:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode().splitlines()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status  # a zombie until its parent reaps it


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _until(done: Any, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (value := done()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return value


def test_a_large_queue_is_forecast_in_the_worker_process(
    tmp_path: Path, cluster_root: Path
) -> None:
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, jobs=40, nodes=12, gpus=200)
    big = QueueForecastConfig(worker_min_jobs=1)  # every queue is large
    loop = _loop(fake, tmp_path / "p.db", clock, queue_forecast=big)
    worker = loop.deps.forecaster
    try:
        loop.run_cycle()  # hands the queue to the worker
        store = loop.deps.store
        assert not worker.ready("slurm/loadcluster")  # one forecast per source at a time
        assert all(r.queue_forecast is None for r in store.list_jobs(status="pending"))
        made = clock.now

        def stored() -> list[Any]:
            clock.now += 15.0
            loop.run_cycle()
            return [r.queue_forecast for r in store.list_jobs(status="pending") if r.queue_forecast]

        forecasts = _until(stored)
        assert forecasts
        assert all(f["made_at_s"] == made for f in forecasts)  # made from the first cycle
        assert worker.last_duration_s["slurm/loadcluster"] > 0
        # stopping the service stops a forecast in flight, and the worker with it
        worker.submit("other", _sleep, 600.0)
        pids = list(worker._executor._processes)  # type: ignore[union-attr]
        assert pids
    finally:
        loop.close()
    assert _until(lambda: not any(_alive(pid) for pid in pids), 10.0)


def test_the_listing_index_is_filled_in_for_stored_jobs(tmp_path: Path) -> None:
    """Migration 0007 gives jobs stored before it their place in the listing."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import text

    from planner.service.store.sql import _MIGRATIONS

    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with store.engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "0006_eta_history")
        for pk, job_id in enumerate(("10", "9", "9_1", "abc", "100_[0-3]"), start=1):
            connection.execute(
                text(
                    "INSERT INTO jobs (id, scheduler, cluster, job_id, name, user, status, "
                    "active, state, first_seen_s, last_seen_s, described_by, "
                    "description_detail, description_key) VALUES (:pk, 'slurm', 'c', :job_id, "
                    "'', '', 'pending', 1, '{}', 0, 0, 'none', '', '')"
                ),
                {"pk": pk, "job_id": job_id},
            )
    store.migrate()
    assert store.revision() == "0011_heartbeats"
    paged = [r.job_id for r in store.list_jobs(limit=2)]
    after = ("slurm", "c", jobs_sort_key("9_1"))
    assert paged == ["9", "9_1"]
    assert [r.job_id for r in store.list_jobs(after=after, limit=10)] == ["10", "100_[0-3]", "abc"]
    assert [r.job_id for r in store.list_jobs()] == ["9", "9_1", "10", "100_[0-3]", "abc"]


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        ' {"errors": [], "jobs": [ {"x": 1} , {"y": [2, {"z": null}]} ] } ',
        '{"a": [1], "a": [2]}',
        '{"a": "\\u00e9", "b": NaN, "c": [true, false]}',
        '{"a": [1,]}',
        '{"a": 1,}',
        '{"a": 1} x',
        "[1]",
        "",
        '{"a": [1 2]}',
        '{"a" 1}',
        '{"a": [',
        '{"a"',
        "{1: 2}",
        '{"a": []]}',
        "null",
    ],
)
def test_slurm_json_is_decoded_in_pieces_as_json_loads_decodes_it(text: str) -> None:
    import json

    from adapters.slurm.output import loads_in_pieces

    def outcome(decode: Any) -> Any:
        try:
            return ("ok", decode(text))
        except ValueError as exc:
            return ("error", type(exc).__name__, str(exc))

    assert outcome(loads_in_pieces) == outcome(json.loads)


@pytest.mark.parametrize(
    "text",
    [
        '{"meta": {}, "errors": [], "jobs": [{"a": 1}, {"b": [2]}]}',
        '{"jobs": []}',
        '{"jobs": [1]}',
        '{"errors": [{"error": "x"}], "jobs": []}',
        '{"jobs": {}}',
        "{}",
        "[]",
        '{"jobs": [{"a": 1}], "jobs": [{"b": 2}]}',  # valid, not streamed: decoded whole
        '{"jobs": [{"a": 1}',
    ],
)
def test_squeue_records_are_streamed_as_a_whole_decode_reads_them(text: str) -> None:
    from adapters.slurm.output import OutputReader, StreamRestartError

    reader = OutputReader("slurm:squeue")

    def outcome(read: Any) -> Any:
        try:
            return ("ok", read())
        except StreamRestartError:
            return ("ok", reader.load(text, "jobs"))
        except SourceError as exc:
            return ("error", str(exc))

    assert outcome(lambda: list(reader.iter_items(text, "jobs"))) == outcome(
        lambda: reader.load(text, "jobs")
    )


def test_a_page_of_jobs_leaves_the_nodes_out(
    db_url: str, source: Any, clock: Clock, make_job: Any
) -> None:
    from planner.specs.job import ClusterSnapshot, NodeState

    from .test_service import app_for, cycle

    nodes = tuple(NodeState(name=f"n{i}", state="idle", num_gpus=8) for i in range(3))
    jobs = tuple(make_job(job_id=str(i)) for i in range(5))
    source.answer = ClusterSnapshot(
        scheduler="slurm", cluster="test", taken_at_s=clock.now, jobs=jobs, nodes=nodes
    )
    with app_for(db_url, source, clock) as client:
        cycle(client)
        every = client.get("/v1/jobs", params={"limit": 0}).json()
        assert [n["name"] for n in every["sources"][0]["nodes"]] == ["n0", "n1", "n2"]
        page = client.get("/v1/jobs", params={"limit": 2}).json()
        assert [j["job_id"] for j in page["jobs"]] == ["0", "1"]
        assert "nodes" not in page["sources"][0]
        assert page["sources"][0]["stale"] is False
        # an unchanged job's row is not rewritten, yet it was seen at the last poll
        clock.now += 15.0
        source.answer = ClusterSnapshot(
            scheduler="slurm", cluster="test", taken_at_s=clock.now, jobs=jobs, nodes=nodes
        )
        cycle(client)
        seen = {j["last_seen_s"] for j in client.get("/v1/jobs").json()["jobs"]}
        assert seen == {clock.now}


def test_queue_forecasts_are_written_in_bulk_and_only_when_they_change(
    tmp_path: Path, cluster_root: Path
) -> None:
    """The records of a queue forecast and the pending jobs' ETAs that take them are written
    in one statement per set of columns, not row by row by the flush; a cycle whose forecast
    is not made again leaves every pending job's row as it was (none for the flush to look
    at: at 10,000 jobs, 6,900 rows a cycle)."""
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, churn=0.0)
    forecast = QueueForecastConfig(interval_s=3600.0)  # made once, in the cycle (small queue)
    loop = _loop(fake, tmp_path / "p.db", clock, queue_forecast=forecast)
    store = loop.deps.store
    written: list[tuple[str, int]] = []
    flushed: list[int] = []

    def count(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        if statement.startswith("UPDATE jobs SET") and "queue_forecast" in statement:
            written.append((statement, len(params) if many else 1))

    def dirty(session: Any, _context: Any, _instances: Any) -> None:
        flushed.append(sum(isinstance(o, JobRow) and o.status == "pending" for o in session.dirty))

    event.listen(store.engine, "before_cursor_execute", count)
    event.listen(Session, "before_flush", dirty)
    try:
        assert loop.run_cycle().results == {"slurm": "ok"}
        pending = [r for r in store.list_jobs(status="pending") if r.state["num_gpus"] > 0]
        assert pending
        assert all(r.queue_forecast for r in pending)
        assert len(written) <= 2  # records alone, records with the ETAs that take them
        assert sum(rows for _, rows in written) == len(pending)
        for row in pending:
            if row.eta is not None:
                assert row.eta["completion_from"] == "queue_forecast"
                assert row.eta["start_time_s"] == row.queue_forecast["start_s"]
        written.clear()
        flushed.clear()
        clock.now += 15.0
        assert loop.run_cycle().results == {"slurm": "ok"}
        assert written == []
        assert flushed
        assert max(flushed) == 0
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        event.remove(Session, "before_flush", dirty)


def test_a_cycle_reads_the_samples_of_the_jobs_that_progressed_together(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step samples of the jobs whose logs a cycle reads (what their new samples join,
    what their ETAs are fitted to) are read in two queries per 500 jobs, not two per job
    (700 a cycle at 10,000 jobs); the ETAs are the ones a full pass makes (the tests of the
    incremental ingest)."""
    clock, fake, loop = _ingesting(cluster_root, tmp_path / "p.db")
    assert loop.run_cycle().results == {"slurm": "ok"}
    store = loop.deps.store
    per_job: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "FROM step_samples" in statement and "job_pk = ?" in statement:
            per_job.append(statement)

    estimated = _estimated_statuses(monkeypatch)
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        for _ in range(2):
            clock.now += 60.0
            fake.advance()
            assert loop.run_cycle().results == {"slurm": "ok"}
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert estimated.count("running") >= 10  # that many running jobs printed progress
    assert per_job == []


def test_an_unchanged_job_is_known_by_the_objects_its_last_cycle_kept(
    tmp_path: Path, cluster_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job the source reports as the very object of its last poll (its squeue record did
    not change) is known unchanged without comparing its fields, and keeps its memo (not a new
    one per job and cycle): a steady cycle of 10,000 jobs compared 10,000 snapshots field by
    field and made 10,000 memos."""
    clock = Clock(T0)
    fake = _cluster(cluster_root, clock, churn=0.0)
    loop = _loop(fake, tmp_path / "p.db", clock)
    for _ in range(2):
        assert loop.run_cycle().results == {"slurm": "ok"}
        clock.now += 15.0
    before = dict(loop.deps.memo.jobs)
    compared: list[str] = []
    real = JobState.__eq__

    def counting(self: JobState, other: object) -> Any:
        compared.append(self.job_id)
        return real(self, other)

    monkeypatch.setattr(JobState, "__eq__", counting)
    assert loop.run_cycle().results == {"slurm": "ok"}
    active = [k for k, memo in before.items() if memo.job.status.is_active]
    assert len(active) > 100
    assert all(loop.deps.memo.jobs[k] is before[k] for k in active)
    assert not set(compared) & {job_id for _, _, job_id in active}
