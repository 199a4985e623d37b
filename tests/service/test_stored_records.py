"""The typed readers of what the store's JSON columns keep: each reads back what the service
wrote (in memory, and after the JSON round trip of the database), and a value of another shape
(a record stored by another version) is refused instead of used unchecked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from planner.forecast.arguments import TrainingSchedule
from planner.forecast.history import Pause, ProgressHistory
from planner.service.loops.eta import schedule_of
from planner.service.loops.histories import read_history, write_history
from planner.service.loops.jobs import job_state_dict
from planner.service.loops.progress import stored_cursor
from planner.service.models import JobRow
from planner.service.stored_job import stored_job_state as _state
from planner.specs.job import JobState, JobStatus, TailCursor

T0 = 1_800_000_000.0


def _stored(doc: dict[str, object]) -> dict[str, object]:
    back: dict[str, object] = json.loads(json.dumps(doc))
    return back


def test_a_log_cursor_reads_back_as_written() -> None:
    cursor = TailCursor(
        path="/logs/1.out",
        inode=7,
        offset_bytes=120,
        size_bytes=300,
        parser_state='{"version":1,"frameworks":["transformers"]}',
    )
    for doc in (dataclasses.asdict(cursor), _stored(dataclasses.asdict(cursor))):
        assert stored_cursor(doc) == cursor
    assert stored_cursor({"path": "/a"}) == TailCursor(path="/a")
    # stored before cursors carried the parser's state: none
    older = {"path": "/a", "inode": 7, "offset_bytes": 120, "size_bytes": 300}
    assert stored_cursor(older) == TailCursor(path="/a", inode=7, offset_bytes=120, size_bytes=300)


@pytest.mark.parametrize(
    "doc",
    [
        {"path": "/a", "page": 3},  # a key a cursor has not
        {"inode": 3},  # no path
        {"path": "/a", "offset_bytes": "12"},  # a number as text
        {"path": "/a", "parser_state": {"version": 1}},  # the parser's state not as its text
    ],
)
def test_a_log_cursor_of_another_shape_is_refused(doc: dict[str, object]) -> None:
    with pytest.raises(TypeError, match="not a"):
        stored_cursor(doc)


def test_a_training_schedule_reads_back_as_written() -> None:
    schedule = TrainingSchedule(
        eval_interval=100,
        save_interval=500,
        global_batch_size=64,
        rampup_batch_size=(16, 16, 1000),
        eval_global_batch_size=128,
    )
    for doc in (dataclasses.asdict(schedule), _stored(dataclasses.asdict(schedule))):
        assert schedule_of(JobRow(schedule=doc)) == schedule
    other = {**dataclasses.asdict(schedule), "warmup_iters": 10}
    assert schedule_of(JobRow(schedule=other)) is None
    assert schedule_of(JobRow(schedule={"eval_interval": "100"})) is None
    assert schedule_of(JobRow(schedule={"rampup_batch_size": [16, 16]})) is None


def test_a_job_snapshot_reads_back_as_written() -> None:
    job = JobState(
        scheduler="slurm",
        cluster="c",
        job_id="42",
        name="pretrain",
        status=JobStatus.RUNNING,
        node_list=("n1", "n2"),
        num_nodes=2,
        num_gpus=16,
        gpus_allocated=True,
        submit_time_s=10,
        start_time_s=20.5,
        time_limit_s=3600.0,
        queue_position=None,
    )
    for doc in (job_state_dict(job), _stored(job_state_dict(job))):
        assert _state(JobRow(state=doc, status="running")) == job
    assert _state(JobRow(state={**job_state_dict(job), "status": "lost"}, status="x")) is None
    assert _state(JobRow(state={**job_state_dict(job), "node_list": [1]}, status="x")) is None
    assert _state(JobRow(state={"scheduler": "slurm"}, status="running")) is None


def test_every_field_of_a_job_snapshot_reads_back() -> None:
    """The reader takes each of ``JobState``'s fields from its declaration (by its type):
    a snapshot with none of them at its default reads back whole, but the two fields the
    store leaves out (``job_state_dict``)."""
    job = JobState(
        scheduler="slurm", cluster="c", job_id="42", name="pretrain", user="ana",
        partition="gpu", account="llm", status=JobStatus.PENDING, state_reason="Priority",
        node_list=("n1",), num_nodes=1, num_gpus=8, gpus_allocated=True, gpu_type="h100",
        submit_time_s=10.0, start_time_s=20.0, end_time_s=30.0, expected_start_time_s=25.0,
        time_limit_s=3600.0, stdout_path="/logs/42.out", work_dir="/work", command="train.sh",
        batch_script="#!/bin/sh", comment="planner:scenario=/s.yaml", namespace="team",
        queue_name="lq", queue_position=3, progress_ratio=0.5, reported_remaining_s=60.0,
        progress_updated_s=29.0, launch_manifest="{}",
    )  # fmt: skip
    defaults = JobState(scheduler="", cluster="", job_id="")
    assert [
        f.name for f in dataclasses.fields(job) if getattr(job, f.name) == getattr(defaults, f.name)
    ] == []
    stored = dataclasses.replace(job, batch_script=None, launch_manifest=None)
    assert _state(JobRow(state=_stored(job_state_dict(job)), status="running")) == stored


def test_a_progress_history_written_is_handed_to_the_next_read_once() -> None:
    history = ProgressHistory()
    history.start(10, T0)
    history.pauses.append(Pause(after_iteration=50, iteration=60, duration_s=20.0, time_s=T0))
    row = JobRow()
    write_history(row, history)
    assert row.progress_history == history.to_json()
    taken = read_history(row)
    assert taken is history  # not read back from the dict just written
    again = read_history(row)  # taken off the row: the next read is the column's
    assert again is not history
    assert again == history
    # the column written by anything else (or read afresh from the store) is read, whatever
    # the object kept beside it
    write_history(row, history)
    row.progress_history = {**history.to_json(), "first_iteration": 20}
    assert read_history(row).first_iteration == 20
    write_history(row, history)
    row.progress_history = None
    assert read_history(row) == ProgressHistory()
