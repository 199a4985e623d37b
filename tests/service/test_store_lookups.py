"""What a unit of work answers from the job rows it loaded: the ended jobs of a name and user
(``UnitOfWork.ended_jobs_named``) as they are now, without flushing what is pending."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event

from planner.service.models import JobRow, ObservedRunRow
from planner.service.store.sql import SqlStore
from planner.service.store.unit_of_work import SqlUnitOfWork

T0 = 1_800_000_000.0


def _job(uow: SqlUnitOfWork, job_id: str, *, name: str, user: str, active: bool) -> JobRow:
    row = uow.new_job(scheduler="slurm", cluster="c", job_id=job_id, first_seen_s=T0)
    row.name, row.user, row.status, row.active = name, user, "running", active
    row.state, row.last_seen_s = {}, T0
    if not active:
        row.status, row.ended_s = "completed", T0
    return row


def test_ended_jobs_of_a_name_are_looked_up_among_the_loaded_rows_as_they_are_now(
    tmp_path: Path,
) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    with store.unit_of_work() as uow:
        uow.jobs_of("slurm", "c")
        _job(uow, "1", name="gpt", user="ann", active=False)
        _job(uow, "2", name="gpt", user="ann", active=True)
        _job(uow, "3", name="gpt", user="bob", active=False)
        _job(uow, "4", name="bert", user="ann", active=False)
    flushes: list[int] = []
    with store.unit_of_work() as uow:
        rows = {r.job_id: r for r in uow.jobs_of("slurm", "c")}
        assert [r.job_id for r in uow.ended_jobs_named("slurm", "c", "gpt", "ann")] == ["1"]
        event.listen(uow._s, "before_flush", lambda *_: flushes.append(1))
        # changed since: one ended, one renamed, one renamed away, a new one (pending)
        rows["2"].active, rows["2"].ended_s = False, T0 + 1
        rows["4"].name = "gpt"
        rows["1"].user = "cy"
        _job(uow, "10", name="gpt", user="ann", active=False)
        found = uow.ended_jobs_named("slurm", "c", "gpt", "ann")
        assert [r.job_id for r in found] == ["2", "4", "10"]
        assert [r.job_id for r in uow.ended_jobs_named("slurm", "c", "gpt", "cy")] == ["1"]
        assert flushes == []  # answered from the rows, nothing written to ask
    with store.unit_of_work() as uow:  # as stored: the same answer from a query
        found = uow.ended_jobs_named("slurm", "c", "gpt", "ann")
        assert sorted(r.job_id for r in found) == ["10", "2", "4"]


def test_a_jobs_predictions_include_the_pending_ones_without_a_flush(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    with store.unit_of_work() as uow:
        uow.jobs_of("slurm", "c")
        row = _job(uow, "1", name="gpt", user="ann", active=True)
        for made in (T0, T0 + 20.0, T0 + 10.0):
            uow.add_prediction(row, kind="eta", made_at_s=made, payload={"at": made})
    flushes: list[int] = []
    with store.unit_of_work() as uow:
        (row,) = uow.jobs_of("slurm", "c")
        event.listen(uow._s, "before_flush", lambda *_: flushes.append(1))
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 15.0, payload={"at": "a"})
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 15.0, payload={"at": "b"})  # replaces
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 30.0, payload={"at": "c"})
        uow.add_prediction(row, kind="model", made_at_s=T0 + 40.0, payload={"at": "m"})
        found = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=4)]
        assert found == [T0 + 10.0, "b", T0 + 20.0, "c"]
        assert [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=1)] == ["c"]
        assert flushes == []
    with store.unit_of_work() as uow:  # as stored: the same answer
        (row,) = uow.jobs_of("slurm", "c")
        found = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=4)]
        assert found == [T0 + 10.0, "b", T0 + 20.0, "c"]


def _run(job_id: str, step_s: float) -> ObservedRunRow:
    return ObservedRunRow(
        scheduler="slurm",
        cluster="c",
        job_id=job_id,
        recorded_s=T0,
        gpu="h100-sxm",
        scenario={},
        iteration_time_s=step_s,
        num_iterations=100,
        skip_reason=None,
    )


def test_observed_runs_are_stored_without_a_flush_per_run(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'p.db'}")
    store.migrate()
    with store.unit_of_work() as uow:
        uow.put_observed_run(_run("1", 0.1))
    flushes: list[int] = []
    with store.unit_of_work() as uow:
        uow.jobs_of("slurm", "c")
        event.listen(uow._s, "before_flush", lambda *_: flushes.append(1))
        _job(uow, "5", name="gpt", user="ann", active=True)  # pending: not written to ask
        for job_id in ("2", "3"):
            uow.put_observed_run(_run(job_id, 0.2))
        uow.put_observed_run(_run("3", 0.3))  # ended again in the same cycle: replaced
        assert flushes == []
        uow.put_observed_run(_run("1", 0.4))  # the stored one is replaced: deleted first
        assert len(flushes) == 1
    runs = store.observed_runs("slurm", "c", limit=10)
    assert sorted((r.job_id, r.iteration_time_s) for r in runs) == [
        ("1", 0.4),
        ("2", 0.2),
        ("3", 0.3),
    ]


def test_a_created_job_row_is_kept_holding_every_column_as_a_read_gives_it(
    tmp_path: Path,
) -> None:
    """The job rows a unit of work inserted are kept for the next one (``JobCache``) holding
    the value of every column, as rows read from the table hold them (None where the insert
    left a column out): reading an attribute without a value asks the ORM's loaders and makes
    its default anew at each read (80,000 reads of a 10,000-job cluster's steady cycle)."""
    db = f"sqlite:///{tmp_path / 'p.db'}"
    store = SqlStore(db)
    store.migrate()
    with store.unit_of_work() as uow:
        uow.jobs_of("slurm", "c")
        created = [
            _job(uow, "1", name="gpt", user="ann", active=True),
            _job(uow, "2", name="gpt", user="ann", active=False),
        ]

    def held(rows: list[JobRow]) -> dict[str, dict[str, object]]:
        return {
            row.job_id: {k: v for k, v in vars(row).items() if not k.startswith("_")}
            for row in rows
        }

    with store.unit_of_work() as uow:
        kept = uow.jobs_of("slurm", "c")
        assert {id(row) for row in kept} == {id(row) for row in created}  # taken back
        kept_values = held(kept)
    with SqlStore(db).unit_of_work() as uow:  # another store reads them from the table
        read_values = held(uow.jobs_of("slurm", "c"))
    assert kept_values == read_values
    assert kept_values["1"]["ended_s"] is None
