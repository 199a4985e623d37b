"""A job row a unit of work creates is inserted once, as the unit of work left it: its step
samples and predictions, and the reads of the store made meanwhile, wait for its id instead of
writing it early (a first cycle of 10,000 new jobs inserted every row at the first sample, then
updated each at the end with everything the cycle set on it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sqlalchemy import event

from .test_store_samples import _store

T0 = 1_800_000_000.0


def test_new_job_rows_are_inserted_once_with_what_the_unit_of_work_set(tmp_path: Path) -> None:
    store = _store(tmp_path)
    written: Counter[str] = Counter()

    def count(_c: object, _cur: object, statement: str, params: object, *_: object) -> None:
        words = statement.split()
        if words[0].upper() in ("INSERT", "UPDATE"):
            table = words[2] if words[0].upper() == "INSERT" else words[1]
            written[f"{words[0].upper()} {table}"] += 1

    with store.unit_of_work() as uow:
        uow.jobs_of("slurm", "c")
        rows = []
        for job_id in ("1", "2", "3"):
            row = uow.new_job(scheduler="slurm", cluster="c", job_id=job_id, first_seen_s=T0)
            row.name, row.user, row.status, row.active = "gpt", "ann", "running", True
            row.state, row.last_seen_s = {}, T0
            rows.append(row)
        event.listen(store.engine, "before_cursor_execute", count)
        for n, row in enumerate(rows):
            assert uow.calibration("eta") is None  # a read of the store meanwhile
            uow.add_sample(
                row, iteration=10, step_time_s=1.0 + n, num_iterations=10, time_s=T0, loss=None
            )
            uow.replace_sample(
                row, iteration=10, step_time_s=2.0 + n, num_iterations=10, time_s=T0, loss=None
            )
            assert [s.step_time_s for s in uow.timed_samples(row, limit=5)] == [2.0 + n]
            assert uow.sample_iterations(row) == {10}
            for made in (T0, T0 + 1.0, T0 + 2.0):
                uow.add_prediction(row, kind="eta", made_at_s=made, payload={"n": n, "at": made})
            uow.prune_predictions(row, kind="eta", keep=2)
            found = uow.job_predictions(row, kind="eta", limit=5)
            assert [p.payload["at"] for p in found] == [T0, T0 + 1.0, T0 + 2.0]
            row.iteration, row.eta = 10, {"n": n}  # set after its samples and predictions
        rows[0].schedule = {"eval_interval": 100}  # rows of two shapes: set, left unset
        assert written == Counter()  # nothing written before the unit of work ends
    event.remove(store.engine, "before_cursor_execute", count)
    assert written["UPDATE jobs"] == 0  # each row inserted once, with everything set on it
    # SQLite: the new rows of each table in one statement (ids given by the unit of work)
    assert (written["INSERT jobs"], written["INSERT predictions"]) == (1, 1)
    with store.unit_of_work() as uow:
        stored = sorted(uow.jobs_of("slurm", "c"), key=lambda r: r.job_id)
        assert [(r.iteration, r.eta) for r in stored] == [(10, {"n": n}) for n in range(3)]
        assert [r.schedule for r in stored] == [{"eval_interval": 100}, None, None]
        assert [r.id for r in stored] == [1, 2, 3]  # as the database gives them
        for n, row in enumerate(stored):
            assert [s.step_time_s for s in uow.timed_samples(row, limit=5)] == [2.0 + n]
            found = uow.job_predictions(row, kind="eta", limit=5)
            assert [p.payload for p in found] == [{"n": n, "at": T0 + d} for d in (1.0, 2.0)]


def test_a_new_jobs_predictions_are_stored_in_the_order_added_across_a_flush(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    with store.unit_of_work() as uow:
        row = uow.new_job(scheduler="slurm", cluster="c", job_id="1", first_seen_s=T0)
        row.name, row.user, row.status, row.active = "gpt", "ann", "running", True
        row.state, row.last_seen_s = {}, T0
        uow.add_prediction(row, kind="eta", made_at_s=T0, payload={"at": "a"})
        uow._s.flush()  # the row gets its id while its first prediction waits
        assert row.id is not None
        uow.add_prediction(row, kind="eta", made_at_s=T0, payload={"at": "b"})  # replaces a
        uow.add_prediction(row, kind="eta", made_at_s=T0, payload={"at": "c"})  # replaces b
        uow.add_prediction(row, kind="model", made_at_s=T0, payload={"at": "m"})
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 1.0, payload={"at": "d"})
        during = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=5)]
        uow.delete_ended_jobs(ended_before_s=T0)  # writes every pending row (none is deleted)
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 1.0, payload={"at": "e"})  # d
        uow.add_prediction(row, kind="eta", made_at_s=T0 + 2.0, payload={"at": "f"})
        written = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=5)]
        last = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=2)]
    with store.unit_of_work() as uow:
        (row,) = uow.jobs_of("slurm", "c")
        after = [p.payload["at"] for p in uow.job_predictions(row, kind="eta", limit=5)]
        model = [p.payload["at"] for p in uow.job_predictions(row, kind="model", limit=5)]
    assert during == ["c", "d"]
    assert written == after == ["c", "e", "f"]
    assert last == ["e", "f"]
    assert model == ["m"]
