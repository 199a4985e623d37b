"""A job's step samples read within the unit of work that wrote them: ``timed_samples`` and
``sample_iterations`` answer what they answer once it committed, without flushing every
pending change first (samples added and replaced in it take the stored ones' places)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event

from planner.service.models import SampleTiming, StepSampleRow
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
