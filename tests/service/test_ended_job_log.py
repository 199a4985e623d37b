"""A job's log is read as complete when the service sees the job end: what the log's parser held
for lines that will not come is given then (``ProgressReader.read``'s ``final``). A Hugging
Face Trainer job whose only progress is its training bar, killed before the bar ran
``adapters.logs.trainer.ADOPT_S``, gets the progress its whole log gives, its ETA's observed
step time from the bar's clock and an observed run for the service's learning: whether its
last bytes came in the cycle it ended or before it (a quiet log), with a planner restart
before the end, when the scheduler stops listing it without accounting of its end, or with
more log at its end than one read takes. A job first seen already
ended gets the same ETA and observed run, kept out of the online calibration."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import UTC
from pathlib import Path

import pytest

from adapters.logs.reading import read_log
from adapters.logs.trainer import ADOPT_S
from planner.specs.job import JobStatus
from tests.adapters.logs.test_trainer_bar import bar, summary

from .conftest import Clock, JobFactory, ScriptedSource
from .test_learning_launches import STEPS, hf_script, launched_job, mini_llama, stored_run
from .test_service import app_for, cycle, job_view

STEP_S = 2.0
KILLED_AT = 60
"""The step the job was killed at (of ``STEPS``): its bar ran 2 s x 59 = 118 s."""
CYCLE_S = 30.0


def _parts(quiet_end: bool) -> list[str]:
    """The log as each 30 s cycle finds it grown: the Trainer's summary and bar opening, then
    the bar's refreshes (start-up 4 s, then 2 s steps), a carriage return before each and no
    line end (a bar that never closed); ``quiet_end``: the job printed a last line (its error)
    after the bar, read in the cycle before it ended."""
    assert STEP_S * (KILLED_AT - 1) < ADOPT_S
    assert KILLED_AT < STEPS
    readings = [(n, 4.0 + STEP_S * (n - 1)) for n in range(1, KILLED_AT + 1)]
    per_cycle = int(CYCLE_S / STEP_S)
    parts = ["\n".join(summary(STEPS)) + "\n" + bar([(0, 0.0)], STEPS)]
    parts += [bar(readings[k : k + per_cycle], STEPS) for k in range(0, KILLED_AT, per_cycle)]
    if quiet_end:
        parts.append("\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    return parts


@pytest.mark.parametrize(
    "case", ["grown at the end", "quiet at the end", "planner restart", "gone from the scheduler"]
)
def test_a_trainer_job_killed_before_its_bar_is_adopted_gets_its_progress(
    cluster_root: Path, make_job: JobFactory, case: str
) -> None:
    root = cluster_root
    db_url = f"sqlite:///{root / 'planner.db'}"
    source, clock = ScriptedSource(), Clock()
    model = mini_llama(root, "bar", layers=4, hidden=512)
    job, log = launched_job(root, make_job, clock, "1", hf_script(model, micro=4))
    parts = _parts(quiet_end=case == "quiet at the end")
    last = len(parts) if case == "quiet at the end" else len(parts) - 1
    with contextlib.ExitStack() as planner:
        client = planner.enter_context(app_for(db_url, source, clock, allowed_file_roots=[]))
        source.set_jobs(job)
        for part in parts[:last]:
            with log.open("a") as out:
                out.write(part)
            log.chmod(0o644)
            clock.now += CYCLE_S
            assert cycle(client) == {"slurm": "ok"}
        running = job_view(client, "1")
        # the bar's records are held for ADOPT_S of bar time: a running job shows none
        assert running["samples"] == []
        assert (running["eta"] or {}).get("observed_step_time_s") is None
        if case == "planner restart":
            planner.close()
            client = planner.enter_context(app_for(db_url, source, clock, allowed_file_roots=[]))
        with log.open("a") as out:
            out.write("".join(parts[last:]))
        clock.now += CYCLE_S
        if case == "gone from the scheduler":  # no longer listed, and no accounting of it
            source.set_jobs()
        else:
            source.set_jobs(
                dataclasses.replace(job, status=JobStatus.FAILED, end_time_s=clock.now - 5.0)
            )
        assert cycle(client) == {"slurm": "ok"}
        view = job_view(client, "1")
        run = stored_run(client, "1")
        clock.now += CYCLE_S
        assert cycle(client) == {"slurm": "ok"}  # still reported ended: nothing read again
        again = job_view(client, "1")
    whole = read_log(log.read_text(), tz=UTC)
    assert whole.framework == "transformers"
    got = [(s["iteration"], s["num_iterations"]) for s in view["samples"]]
    assert got == [(r.iteration, r.num_iterations) for r in whole.records]
    assert got[-1][0] == 56  # spans of at least 10 s of the bar's clock (5 steps)
    assert view["status"] == ("unknown" if case == "gone from the scheduler" else "failed")
    assert view["eta"]["finished"] is True
    assert view["eta"]["observed_step_time_s"] == pytest.approx(STEP_S, rel=0.02)
    assert run.skip_reason is None
    assert run.iteration_time_s == pytest.approx(STEP_S, rel=0.02)
    assert run.num_iterations == 56
    assert again["samples"] == view["samples"]


@pytest.mark.parametrize(("per_cycle", "watched"), [(None, True), (700, True), (700, False)])
def test_an_ended_trainer_job_s_whole_log_is_read(
    cluster_root: Path, make_job: JobFactory, per_cycle: int | None, watched: bool
) -> None:
    """The job's whole log is written by the time it ends (``watched``: the service saw it
    pending, with its ETA prior, before that; else it first sees it already ended, as the
    scheduler's accounting window lists jobs to a service that just started). The read of its
    log that reaches the end gives the held bar records: one read (``max_log_bytes_per_cycle``
    as set by default), or, with 700 bytes a cycle, a read a cycle, each going on where the
    last stopped, while the scheduler reports the job; later cycles read nothing more. A job
    the service estimated before it ended then has the ETA and the observed run of its step
    time; so has one first seen ended, its ETA marked ``seen_running`` false and kept out of
    the online calibration (which learns from the watched job)."""
    root = cluster_root
    db_url = f"sqlite:///{root / 'planner.db'}"
    source, clock = ScriptedSource(), Clock()
    model = mini_llama(root, "bar", layers=4, hidden=512)
    job, log = launched_job(root, make_job, clock, "1", hf_script(model, micro=4))
    settings = {} if per_cycle is None else {"max_log_bytes_per_cycle": per_cycle}
    read_at: list[int] = []
    with app_for(db_url, source, clock, allowed_file_roots=[], **settings) as client:
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        if watched:
            source.set_jobs(dataclasses.replace(job, status=JobStatus.PENDING))
            assert cycle(client) == {"slurm": "ok"}
            assert job_view(client, "1")["eta"]["method"] == "prior"
        log.write_text("".join(_parts(quiet_end=False)))
        log.chmod(0o644)
        size = log.stat().st_size
        clock.now += 200.0
        source.set_jobs(dataclasses.replace(job, status=JobStatus.CANCELLED, end_time_s=clock.now))
        for _ in range(size // 700 + 3):
            clock.now += CYCLE_S
            assert cycle(client) == {"slurm": "ok"}
            (row,) = store.find_jobs("1")
            read_at.append(row.log_cursor["offset_bytes"])
            if read_at[-1] < size:
                assert job_view(client, "1")["samples"] == []
        view = job_view(client, "1")
        runs = store.observed_runs("slurm", "test", limit=100)
        runs += store.observed_runs("slurm", "test", limit=100, skipped=True)
        online = client.get("/v1/calibrations").json()["online"]["groups"]
    end = read_at.index(size)
    read = [b - a for a, b in zip([0, *read_at], read_at, strict=False)]
    if per_cycle is None:
        assert end == 0
    else:
        assert end >= 3
        assert all(0 < n <= per_cycle for n in read[: end + 1])  # up to a line end
    assert read_at[end:] == [size] * (len(read_at) - end)
    assert len(read_at) - end >= 2
    whole = read_log(log.read_text(), tz=UTC)
    assert [s["iteration"] for s in view["samples"]] == [r.iteration for r in whole.records]
    assert view["eta"]["seen_running"] is watched
    assert bool(online) is watched, online  # only a watched job feeds the online calibration
    (run,) = runs
    assert view["eta"]["observed_step_time_s"] == pytest.approx(STEP_S, rel=0.02)
    assert run.skip_reason is None
    assert run.iteration_time_s == pytest.approx(STEP_S, rel=0.02)


def test_a_queued_job_gone_from_the_scheduler_ends_unread(
    cluster_root: Path, make_job: JobFactory
) -> None:
    """A queued job the scheduler stops listing (cancelled, no accounting) ends as
    ``unknown``: it has no log to read (its output file is not opened) and is not a run."""
    root = cluster_root
    source, clock = ScriptedSource(), Clock()
    model = mini_llama(root, "bar", layers=4, hidden=512)
    job, log = launched_job(root, make_job, clock, "1", hf_script(model, micro=4))
    with app_for(
        f"sqlite:///{root / 'planner.db'}", source, clock, allowed_file_roots=[]
    ) as client:
        source.set_jobs(dataclasses.replace(job, status=JobStatus.PENDING, start_time_s=None))
        assert cycle(client) == {"slurm": "ok"}
        source.set_jobs()
        clock.now += CYCLE_S
        assert cycle(client) == {"slurm": "ok"}
        (row,) = client.app.state.planner.store.find_jobs("1")  # type: ignore[attr-defined]
        store = client.app.state.planner.store  # type: ignore[attr-defined]
        runs = store.observed_runs("slurm", "test", limit=100, skipped=True)
    assert (row.status, row.active, row.ended_s) == ("unknown", False, clock.now)
    assert row.log_cursor is None
    assert not log.exists()
    assert runs == []
