"""The service reads a job's log as the job's user may see it (``adapters.files``): a job whose
stdout path is a symlink to another user's root-only log gets nothing of that log published
(no iterations, step times, loss or ETA from it), and why is stored with the job and logged."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi import FastAPI

from planner.service.store.sql import SqlStore
from planner.specs.job import JobStatus, TailCursor

from .conftest import Clock, JobFactory, ScriptedSource
from .test_service import app_for, cycle, job_view, megatron_line


@pytest.fixture
def their_log() -> Iterator[Path]:
    """Another user's log outside the test's (the job's) tree, readable by root only."""
    other = Path(tempfile.mkdtemp(prefix="planner-other-user-", dir="/tmp"))
    other.chmod(0o755)
    path = other / "their-run.out"
    path.write_text("".join(megatron_line(i, 1000, 777.0) for i in range(10, 301, 10)))
    path.chmod(0o600)
    try:
        yield path
    finally:
        shutil.rmtree(other, ignore_errors=True)


def test_a_log_symlinked_to_another_users_log_publishes_nothing_of_it(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    their_log: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = tmp_path / "job.out"
    log.symlink_to(their_log)
    job = make_job(
        job_id="7",
        status=JobStatus.RUNNING,
        start_time_s=clock.now - 100,
        time_limit_s=36000.0,
        stdout_path=str(log),
        work_dir=str(tmp_path),
    )
    source.set_jobs(job)
    with caplog.at_level(logging.WARNING), app_for(db_url, source, clock) as client:
        for _ in range(3):
            clock.now += 30
            assert cycle(client) == {"slurm": "ok"}
        view = job_view(client, "7")
        assert view["samples"] == []
        # the job's owner sees why its log is not read, and what to do about it
        assert view["log"]["path"] == str(log)
        assert "outside the allowed directories" in view["log"]["not_read"]
        assert "allowed_file_roots" in view["log"]["fix"]
        assert str(their_log) not in str(view["log"])
        assert view["progress"]["iteration"] is None
        metrics = client.get("/metrics").text
    assert not [
        line for line in metrics.splitlines() if 'job_id="7"' in line and "iteration" in line
    ]
    assert "777" not in str(view)
    assert "4.2" not in str(view)
    row = next(r for r in SqlStore(db_url).list_jobs() if r.job_id == "7")
    assert row.log_cursor is not None
    assert "outside the allowed directories" in row.log_cursor["error"]
    assert str(their_log) not in row.log_cursor["error"]
    warnings = [r.getMessage() for r in caplog.records if "its log is not read" in r.getMessage()]
    assert len(warnings) == 1, warnings  # logged when the reason changes, not every cycle
    assert "outside the allowed directories" in warnings[0]


def test_a_log_that_becomes_readable_is_read_and_the_reason_goes(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
) -> None:
    log = tmp_path / "job.out"
    os.mkfifo(log)  # a FIFO as stdout: refused, never opened for reading
    job = make_job(status=JobStatus.RUNNING, start_time_s=clock.now, stdout_path=str(log))
    source.set_jobs(job)
    with app_for(db_url, source, clock) as client:
        cycle(client)
        row = next(r for r in SqlStore(db_url).list_jobs() if r.job_id == "42")
        assert row.log_cursor is not None
        assert "not a regular file (a FIFO)" in row.log_cursor["error"]
        shown = job_view(client)["log"]
        assert "not a regular file (a FIFO)" in shown["not_read"]
        assert "regular file" in shown["fix"]
        log.unlink()
        log.write_text("".join(megatron_line(i, 100, 400.0) for i in range(10, 31, 10)))
        clock.now += 30
        cycle(client)
        view = job_view(client)
        assert [s["iteration"] for s in view["samples"]] == [10, 20, 30]
        assert view["log"]["not_read"] is None
        assert view["log"]["offset_bytes"] == log.stat().st_size
    row = next(r for r in SqlStore(db_url).list_jobs() if r.job_id == "42")
    assert row.log_cursor is not None
    assert "error" not in row.log_cursor


def test_an_ended_jobs_last_lines_are_read_under_the_directory_it_ran_in(
    db_url: str, source: ScriptedSource, clock: Clock, make_job: JobFactory
) -> None:
    """The accounting record of an ended job may name neither its working directory nor its
    log: the last lines are still read, as the job's file, under the directory it ran in."""
    run_dir = Path(tempfile.mkdtemp(prefix="planner-run-dir-", dir="/tmp"))  # not an allowed root
    run_dir.chmod(0o755)
    try:
        log = run_dir / "job.out"
        log.write_text("".join(megatron_line(i, 100, 400.0) for i in range(10, 31, 10)))
        running = make_job(
            status=JobStatus.RUNNING,
            start_time_s=clock.now,
            stdout_path=str(log),
            work_dir=str(run_dir),
        )
        with app_for(db_url, source, clock) as client:
            source.set_jobs(running)
            cycle(client)
            with log.open("a") as f:
                f.write(megatron_line(40, 100, 400.0))
            clock.now += 30
            source.set_jobs(make_job(status=JobStatus.COMPLETED, end_time_s=clock.now))
            cycle(client)
            assert [s["iteration"] for s in job_view(client)["samples"]] == [10, 20, 30, 40]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_log_that_did_not_grow_is_not_read_again(
    tmp_path: Path,
    db_url: str,
    source: ScriptedSource,
    clock: Clock,
    make_job: JobFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thousands of running jobs mostly print nothing between two cycles: one look at all
    their logs (``ProgressReader.unchanged``) spares each quiet log its read (a hand-off to a
    reader thread); a log that grew is read, and what it printed arrives as before."""
    log = tmp_path / "job.out"
    log.write_text("".join(megatron_line(i, 100, 400.0) for i in range(10, 31, 10)))
    job = make_job(status=JobStatus.RUNNING, start_time_s=clock.now, stdout_path=str(log))
    source.set_jobs(job)
    with app_for(db_url, source, clock) as client:
        reader = cast(FastAPI, client.app).state.planner.ingestor.deps.reader
        reads: list[str] = []
        read = reader.read

        def counted(cursor: TailCursor, **kw: Any) -> Any:
            reads.append(cursor.path)
            return read(cursor, **kw)

        monkeypatch.setattr(reader, "read", counted)
        cycle(client)
        assert reads == [str(log)]
        for _ in range(2):
            clock.now += 30
            cycle(client)
        assert reads == [str(log)]  # it did not grow: not read again
        with log.open("a") as out:
            out.write(megatron_line(40, 100, 400.0))
        clock.now += 30
        cycle(client)
        assert reads == [str(log)] * 2
        assert [s["iteration"] for s in job_view(client)["samples"]] == [10, 20, 30, 40]
