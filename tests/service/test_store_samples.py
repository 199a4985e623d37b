"""A job's step samples read within the unit of work that wrote them: ``timed_samples`` and
``sample_iterations`` answer what they answer once it committed, without flushing every
pending change first (samples added and replaced in it take the stored ones' places)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event

from planner.service.models import SampleTiming
from planner.service.store import SqlStore


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
