"""A job's step samples read within the unit of work that wrote them: ``timed_samples`` and
``sample_iterations`` answer what they answer once it committed, without flushing every
pending change first (samples added and replaced in it take the stored ones' places)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from planner.service.models import SampleTiming, StepSampleRow
from planner.service.store import unit_of_work
from planner.service.store.sql import SqlStore


def _store(tmp_path: Path) -> SqlStore:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    return store


def test_samples_written_in_the_unit_of_work_are_read_as_once_committed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.unit_of_work() as uow:
        job = uow.new_job(scheduler="slurm", cluster="c", job_id="7", first_seen_s=0.0)
        job.status, job.state, job.last_seen_s = "RUNNING", {}, 0.0
        for i in range(10, 110, 10):  # stored: 10..100, 30 without a step time
            uow.add_sample(
                job,
                iteration=i,
                step_time_s=None if i == 30 else 1.0 + i / 1000,
                num_iterations=10,
                time_s=float(i),
                loss=None,
            )
    with store.unit_of_work() as uow:
        (job,) = uow.jobs_of("slurm", "c")
        job.name = "renamed"  # pending, as a cycle's own changes are while it reads samples
        for i in (110, 120):
            uow.add_sample(
                job, iteration=i, step_time_s=2.0, num_iterations=10, time_s=float(i), loss=None
            )
        uow.add_sample(  # pending, without a step time
            job, iteration=130, step_time_s=None, num_iterations=10, time_s=130.0, loss=None
        )
        # redone after a restart: one loses its step time, one gets a new one
        uow.replace_sample(
            job, iteration=100, step_time_s=None, num_iterations=10, time_s=200.0, loss=None
        )
        uow.replace_sample(
            job, iteration=90, step_time_s=3.0, num_iterations=10, time_s=190.0, loss=None
        )
        uow.add_sample(
            job, iteration=140, step_time_s=4.0, num_iterations=10, time_s=140.0, loss=None
        )
        statements: list[str] = []

        def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
            statements.append(statement.split(maxsplit=1)[0].upper())

        event.listen(store.engine, "before_cursor_execute", count)
        during = {n: uow.timed_samples(job, limit=n) for n in (0, 1, 4, 50)}
        iterations = uow.sample_iterations(job, since=95)
        everything = uow.sample_iterations(job)
        event.remove(store.engine, "before_cursor_execute", count)
        assert set(statements) == {"SELECT"}  # read without writing what is pending
    with store.unit_of_work() as uow:
        (job,) = uow.jobs_of("slurm", "c")
        after = {n: uow.timed_samples(job, limit=n) for n in (0, 1, 4, 50)}
        assert uow.sample_iterations(job, since=95) == iterations
        assert uow.sample_iterations(job) == everything
    assert during == after
    assert iterations == {100, 110, 120, 130, 140}
    assert [s.iteration for s in during[4]] == [90, 110, 120, 140]
    assert during[4][0] == SampleTiming(90, 3.0, 10, 190.0, None)
    assert [s.iteration for s in during[50]] == [10, 20, 40, 50, 60, 70, 80, 90, 110, 120, 140]
    assert during[0] == []


def test_samples_are_stored_as_values_without_a_flush(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.unit_of_work() as uow:
        jobs = []
        for job_id in ("1", "2", "3"):
            job = uow.new_job(scheduler="slurm", cluster="c", job_id=job_id, first_seen_s=0.0)
            job.status, job.state, job.last_seen_s = "RUNNING", {}, 0.0
            jobs.append(job)
        uow.add_sample(
            jobs[0], iteration=10, step_time_s=1.0, num_iterations=10, time_s=10.0, loss=None
        )
    with store.unit_of_work() as uow:
        jobs = sorted(uow.jobs_of("slurm", "c"), key=lambda j: j.job_id)
        flushes: list[int] = []
        event.listen(uow._s, "before_flush", lambda *_: flushes.append(1))
        for job in jobs:
            for i in (20, 30):
                uow.add_sample(
                    job, iteration=i, step_time_s=2.0, num_iterations=10, time_s=float(i), loss=None
                )
        # redone after a restart: a stored sample and one of this unit of work
        uow.replace_sample(
            jobs[0], iteration=10, step_time_s=3.0, num_iterations=5, time_s=40.0, loss=0.5
        )
        uow.replace_sample(
            jobs[1], iteration=30, step_time_s=4.0, num_iterations=10, time_s=41.0, loss=None
        )
        assert flushes == []  # nothing pending was written to store them
        assert not any(isinstance(row, StepSampleRow) for row in uow._s.new)  # no ORM rows
    with store.unit_of_work() as uow:
        jobs = sorted(uow.jobs_of("slurm", "c"), key=lambda j: j.job_id)
        found = [
            [
                (s.iteration, s.step_time_s, s.num_iterations, s.time_s)
                for s in uow.timed_samples(j, limit=10)
            ]
            for j in jobs
        ]
    assert found == [
        [(10, 3.0, 5, 40.0), (20, 2.0, 10, 20.0), (30, 2.0, 10, 30.0)],
        [(20, 2.0, 10, 20.0), (30, 4.0, 10, 41.0)],
        [(20, 2.0, 10, 20.0), (30, 2.0, 10, 30.0)],
    ]
    (stored,) = [s for s in store.samples(jobs[0].id, limit=10) if s.iteration == 10]
    assert stored.loss == 0.5


def test_the_samples_of_a_new_job_are_not_asked_of_the_table(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.unit_of_work() as uow:
        job = uow.new_job(scheduler="slurm", cluster="c", job_id="1", first_seen_s=0.0)
        job.status, job.state, job.last_seen_s = "RUNNING", {}, 0.0
        statements: list[str] = []

        def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
            if "step_samples" in statement:
                statements.append(statement)

        event.listen(store.engine, "before_cursor_execute", count)
        assert uow.sample_iterations(job) == set()
        uow.add_sample(job, iteration=10, step_time_s=1.0, num_iterations=10, time_s=1.0, loss=None)
        uow.replace_sample(
            job, iteration=20, step_time_s=2.0, num_iterations=10, time_s=2.0, loss=None
        )
        assert uow.sample_iterations(job, since=15) == {20}
        assert [s.iteration for s in uow.timed_samples(job, limit=5)] == [10, 20]
        event.remove(store.engine, "before_cursor_execute", count)
        assert statements == []  # a new job has no stored samples to ask for
    with store.unit_of_work() as uow:
        (job,) = uow.jobs_of("slurm", "c")
        assert [s.iteration for s in uow.timed_samples(job, limit=5)] == [10, 20]


def _stored_jobs(db: Path) -> SqlStore:
    """A store of jobs 1..4 with stored samples: job 1 has 10..100 (30 without a step time),
    job 2 has 10..20, job 3 has 100 samples (1..100), job 4 has none."""
    store = SqlStore(f"sqlite:///{db}")
    store.migrate()
    with store.unit_of_work() as uow:
        for job_id, iterations in (
            ("1", range(10, 110, 10)),
            ("2", range(10, 30, 10)),
            ("3", range(1, 101)),
            ("4", range(0)),
        ):
            job = uow.new_job(scheduler="slurm", cluster="c", job_id=job_id, first_seen_s=0.0)
            job.status, job.state, job.last_seen_s = "RUNNING", {}, 0.0
            for i in iterations:
                step = None if (job_id, i) == ("1", 30) else 1.0 + i / 1000
                uow.add_sample(
                    job, iteration=i, step_time_s=step, num_iterations=10, time_s=i, loss=None
                )
    return store


def _written_and_read(store: SqlStore, *, ahead: bool) -> dict[str, Any]:
    """What ``timed_samples`` and ``sample_iterations`` answer of each job while the unit of
    work adds and replaces samples (read ahead of the writes, or not), and the number of
    queries of one job's samples they issued."""
    with store.unit_of_work() as uow:
        jobs = {j.job_id: j for j in uow.jobs_of("slurm", "c")}
        queries: list[str] = []

        def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
            if "FROM step_samples" in statement and "job_pk = ?" in statement:
                queries.append(statement)

        event.listen(store.engine, "before_cursor_execute", count)
        if ahead:
            uow.read_samples_ahead(list(jobs.values()), limit=4)
        answers: dict[str, Any] = {}
        for step in range(3):
            for job_id, job in sorted(jobs.items()):
                newest = max(uow.sample_iterations(job) or {0})
                answers[f"{job_id} since {step}"] = uow.sample_iterations(job, since=newest + 1)
                answers[f"{job_id} timed {step}"] = uow.timed_samples(job, limit=4)
                if step == 0:  # a restart redoes the newest two: one loses its step time
                    for i, time in ((newest, None), (newest - 10, 5.0)):
                        uow.replace_sample(
                            job,
                            iteration=i,
                            step_time_s=time,
                            num_iterations=10,
                            time_s=1.0,
                            loss=None,
                        )
                uow.add_sample(
                    job,
                    iteration=newest + 1,
                    step_time_s=None,
                    num_iterations=1,
                    time_s=2.0,
                    loss=None,
                )
        event.remove(store.engine, "before_cursor_execute", count)
        answers["queries"] = len(queries)
    return answers


def test_samples_read_ahead_answer_as_the_queries_of_each_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_samples_ahead`` reads the samples of many jobs at once; ``timed_samples`` and
    ``sample_iterations`` then answer from them what they answer from a query each (the newest
    timed samples, what the unit of work wrote taking their places), without one; past as
    many writes of a job as it read spare samples, a query again."""
    asked = _written_and_read(_stored_jobs(tmp_path / "a.db"), ahead=False)
    assert [s.iteration for s in asked["1 timed 0"]] == [70, 80, 90, 100]
    # 90 and 100 redone: 100 lost its step time, 90 has a new one
    assert asked["1 timed 1"][-1] == SampleTiming(90, 5.0, 10, 1.0, None)
    assert [s.iteration for s in asked["1 timed 1"]] == [60, 70, 80, 90]
    # per job: three questions a step, three steps, and two replacements looked up
    assert asked["queries"] == 4 * (3 * 3 + 2)
    ahead = _written_and_read(_stored_jobs(tmp_path / "b.db"), ahead=True)
    assert ahead.pop("queries") == 4 * (3 + 2)  # left: all of a job's iterations; replacements
    assert ahead == {k: v for k, v in asked.items() if k != "queries"}

    monkeypatch.setattr(unit_of_work, "TIMED_AHEAD_SPARE", 1)
    spare = _written_and_read(_stored_jobs(tmp_path / "c.db"), ahead=True)
    # jobs 1 and 3 have more timed samples than were read: after their writes of step 0,
    # their timed samples are queried again (steps 1 and 2)
    assert spare.pop("queries") == 4 * (3 + 2) + 2 * 2
    assert spare == ahead
