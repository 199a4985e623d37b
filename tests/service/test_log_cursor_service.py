"""A job's log read on by a new planner over the same store (a restart) gives the progress one
planner gives: what the log's parser learnt from lines before the stored cursor (here a Hugging
Face Trainer's training summary, its bar's clock and the records held until the bar is adopted)
travels with the cursor the service stores (``TailCursor.parser_state``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import sqlalchemy

from planner.service.store.sql import SqlStore
from planner.service.store.tables import JOBS_TABLE
from planner.specs.job import JobStatus
from tests.adapters.logs.test_trainer_bar import refresh, summary

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, job_view, megatron_line

CYCLES = 40
STEPS_PER_CYCLE = 3
STEP_S = 10.0


def _trainer_log_part(cycle_index: int) -> str:
    """What the job printed in the ``cycle_index``-th 30 s: its summary and bar opening first,
    then three bar refreshes of 10 s steps (300 steps in all)."""
    total = CYCLES * STEPS_PER_CYCLE
    head = "\n".join(summary(total)) + "\n\r" + refresh(0, total, 0.0) if cycle_index == 0 else ""
    steps = range(cycle_index * STEPS_PER_CYCLE + 1, (cycle_index + 1) * STEPS_PER_CYCLE + 1)
    return head + "".join("\r" + refresh(n, total, 5.0 + STEP_S * n) for n in steps)


def _samples(
    root: Path, make_job: JobFactory, restarts: frozenset[int]
) -> list[tuple[int, float | None, int]]:
    """The job's stored samples after every cycle read its log, the planner started anew (same
    store, same clock) before the cycles in ``restarts``."""
    root.mkdir()
    db_url = f"sqlite:///{root / 'planner.db'}"
    source, clock = ScriptedSource(), Clock()
    log = root / "job.out"
    source.set_jobs(
        make_job(
            status=JobStatus.RUNNING,
            start_time_s=clock.now,
            time_limit_s=36000.0,
            stdout_path=str(log),
            work_dir=str(root),
        )
    )
    with contextlib.ExitStack() as planner:
        client = planner.enter_context(app_for(db_url, source, clock))
        for k in range(CYCLES):
            if k in restarts:
                planner.close()
                client = planner.enter_context(app_for(db_url, source, clock))
            with log.open("a") as out:
                out.write(_trainer_log_part(k))
            clock.now += STEPS_PER_CYCLE * STEP_S
            assert cycle(client) == {"slurm": "ok"}
        samples = job_view(client)["samples"]
    return [(s["iteration"], s["step_time_s"], s["num_iterations"]) for s in samples]


def test_a_trainer_bar_read_on_after_planner_restarts_gives_the_same_samples(
    tmp_path: Path, make_job: JobFactory
) -> None:
    """Restarts while the bar's records are held (cycle 5: 150 s of bar) and after it was
    adopted (cycles 20 and 30): the samples one planner stores, to the last step."""
    one = _samples(tmp_path / "one", make_job, frozenset())
    restarted = _samples(tmp_path / "restarted", make_job, frozenset({5, 20, 30}))
    assert restarted == one
    assert one[-1][0] == CYCLES * STEPS_PER_CYCLE - 1  # the last refresh is read one late
    assert any(step_time_s is not None for _, step_time_s, _ in one[-10:])


def test_a_stored_cursor_of_another_shape_reads_on_from_where_it_stopped(
    tmp_path: Path, db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """A job row whose stored cursor this version cannot take whole (a key it has not, as a
    later version or a damaged row leaves), found by a planner started over the store: the
    ingest cycle goes on for every job, and the log is read on from the offset the cursor kept
    (not again from its start, which its progress would take for a restart)."""
    logs = {job_id: tmp_path / f"job{job_id}.out" for job_id in ("1", "2")}
    source.set_jobs(
        *(
            make_job(
                job_id=job_id,
                status=JobStatus.RUNNING,
                start_time_s=clock.now,
                time_limit_s=36000.0,
                stdout_path=str(path),
                work_dir=str(tmp_path),
            )
            for job_id, path in logs.items()
        )
    )
    for path in logs.values():
        path.write_text("".join(megatron_line(i, 1000, 400.0) for i in range(10, 31, 10)))
    with app_for(db_url, source, clock) as client:
        clock.now += 30
        assert cycle(client) == {"slurm": "ok"}
    engine = sqlalchemy.create_engine(db_url)
    with engine.begin() as conn:
        stored = conn.execute(
            sqlalchemy.select(JOBS_TABLE.c.log_cursor).where(JOBS_TABLE.c.job_id == "1")
        ).scalar_one()
        conn.execute(
            sqlalchemy.update(JOBS_TABLE)
            .where(JOBS_TABLE.c.job_id == "1")
            .values(log_cursor={**stored, "page": 3, "parser_state": {"not": "text"}})
        )
    engine.dispose()
    for path in logs.values():
        with path.open("a") as out:
            out.write("".join(megatron_line(i, 1000, 400.0) for i in range(40, 61, 10)))
    with app_for(db_url, source, clock) as client:
        clock.now += 30
        assert cycle(client) == {"slurm": "ok"}
        views = [job_view(client, job_id) for job_id in logs]
    for view in views:
        assert [s["iteration"] for s in view["samples"]] == [10, 20, 30, 40, 50, 60]
        assert view["log"]["not_read"] is None
    # the same log read the same way: the same samples, events and ETA
    for key in ("samples", "events", "eta", "progress"):
        assert views[0][key] == views[1][key], key
    rows = {row.job_id: row for row in SqlStore(db_url).list_jobs()}
    stored_again = {k: v for k, v in (rows["1"].log_cursor or {}).items() if k != "inode"}
    assert stored_again == {
        **{k: v for k, v in (rows["2"].log_cursor or {}).items() if k != "inode"},
        "path": str(logs["1"]),
    }  # written again in this version's shape
