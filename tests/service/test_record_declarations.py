"""Each set of columns is declared once and every other place that speaks of them is checked
against that declaration: a record's annotated columns are its table's columns; the API's views
of jobs, sources, audit records and stored reviews take their fields from the records' column
classes (``JobColumns``, ``SourceColumns``, ``AuditColumns``, ``ReviewColumns``) and publish
exactly the contract below; the job routes answer the API's models as they build them; the step
samples the unit of work writes are ``StepSampleRow``'s columns but its ``id``. Where one shape
is declared on both sides of a boundary that a declaration cannot cross (the core's frozen
dataclasses and the store's mutable records, the core's JSON and the API's documented models),
the two name the same fields, but those the test names."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

import pytest
from pydantic import BaseModel
from sqlalchemy.orm import class_mapper

from planner.forecast.eta import EtaEstimate
from planner.forecast.history import Pause, PhaseEvent, ProgressHistory, RestartRecord
from planner.forecast.values import StepObservation
from planner.ports import JobGpuUsage
from planner.scenario.documents import PredictionJson
from planner.service.api.jobs import job_view
from planner.service.api.models import (
    AuditRecord,
    Eta,
    GpuUsage,
    JobSummary,
    LaunchFacts,
    NodeView,
    Prediction,
    SourceView,
    StepSample,
)
from planner.service.api.review_models import LatestReview, StoredReview
from planner.service.describe import LaunchFactsJson
from planner.service.job_events import job_events
from planner.service.models import (
    AuditColumns,
    AuditEntry,
    AuditRow,
    JobColumns,
    JobRow,
    NodeSlownessRow,
    Record,
    ReviewColumns,
    ReviewRow,
    SampleTiming,
    SourceColumns,
    SourceRow,
    StepSampleRow,
)
from planner.service.store import tables
from planner.service.store.unit_of_work import _SAMPLE_COLUMNS, _SAMPLE_UPDATE, _Sample
from planner.specs.job import NodeState
from planner.stragglers.exposure import SlowEpisode


def _columns(record: type[Record]) -> dict[str, object]:
    """A record's columns with their types, as the record class declares them."""
    return get_type_hints(record)


@pytest.mark.parametrize("record", list(tables._TABLES), ids=lambda r: r.__name__)
def test_a_record_declares_its_table_columns(record: type[Record]) -> None:
    mapped = {c.key for c in class_mapper(record).column_attrs}
    assert set(_columns(record)) == mapped


def test_the_job_summary_starts_with_the_job_columns() -> None:
    assert issubclass(JobRow, JobColumns)
    assert issubclass(JobSummary, JobColumns)
    shared = list(get_type_hints(JobColumns))
    assert set(shared) <= set(_columns(JobRow))
    assert list(JobSummary.model_fields)[: len(shared)] == [
        "scheduler", "cluster", "job_id", "name", "user", "status", "active",
    ]  # fmt: skip


def test_the_source_view_starts_with_the_source_columns() -> None:
    assert issubclass(SourceRow, SourceColumns)
    assert issubclass(SourceView, SourceColumns)
    shared = list(get_type_hints(SourceColumns))
    assert list(SourceView.model_fields)[: len(shared)] == [
        "name", "scheduler", "cluster", "last_success_s", "last_attempt_s",
    ]  # fmt: skip


def test_a_job_view_is_the_job_summary_with_every_field_set() -> None:
    """The page of jobs answers the ``JobSummary`` that ``job_view`` builds (no second shape of
    it): every field the model declares is set from the row, so a field added to the model
    reaches the answer or fails here (one without a default fails mypy in ``job_view``)."""
    row = JobRow(
        scheduler="slurm", cluster="a", job_id="7", name="pretrain", user="ana",
        status="running", active=True, state={"partition": "gpu", "num_gpus": 8},
        described_by="none", description_detail="no scenario", iteration=10, train_iters=100,
        last_progress_s=5.0, prediction=None, eta=None, first_seen_s=1.0, last_seen_s=5.0,
        ended_s=None, outcome=None, queue_forecast=None,
    )  # fmt: skip
    view = job_view(row, None)
    assert type(view) is JobSummary
    assert view.model_fields_set == set(JobSummary.model_fields)
    assert (view.partition, view.num_gpus, view.gpu_type) == ("gpu", 8, None)


def test_a_job_event_declares_every_field_it_carries() -> None:
    """The events of ``GET /v1/jobs/{id}`` are ``JobEvent``s as ``job_events`` builds them: a
    field one kind carries that the model does not declare (an extra of the open model, absent
    from ``/openapi.json``) fails here."""
    history = ProgressHistory(
        pauses=[Pause(after_iteration=10, iteration=12, duration_s=30.0, time_s=100.0)],
        phases=[
            PhaseEvent(
                start_iteration=20, ratio=1.3, seen_iteration=25, seen_time_s=150.0,
                explained_by="rank 3",
            )
        ],
        restarts=[
            RestartRecord(
                from_iteration=50, to_iteration=40, time_s=200.0, gap_s=60.0, overhead_s=90.0
            )
        ],
    )  # fmt: skip
    events = job_events(JobRow(progress_history=history.to_json(), schedule=None))
    assert [e.kind for e in events] == ["pause", "phase", "restart"]
    assert [e.model_extra for e in events] == [{}, {}, {}]
    assert events[1].explained_by == "rank 3"


def test_an_eta_documents_every_field_of_an_estimate() -> None:
    """The stored ETA is an ``EtaEstimate`` (``planner.service.loops.eta.eta_to_dict``) with
    what the service adds to it; the API's ``Eta`` declares each of those fields, so that a
    field the estimate gains is documented in ``/openapi.json`` (or this fails)."""
    added_by_the_service = {"made_at_s", "finished", "seen_running", "straggler_factor"}
    estimate = {f.name for f in fields(EtaEstimate)}
    assert set(Eta.model_fields) == estimate | added_by_the_service


def test_a_shown_step_sample_reads_step_sample_columns() -> None:
    columns = _columns(StepSampleRow)
    assert {name: columns[name] for name in StepSample.model_fields} == {
        name: field.annotation for name, field in StepSample.model_fields.items()
    }


def test_a_slow_node_row_holds_a_slow_episode() -> None:
    """The store's episode columns are the core's ``SlowEpisode`` fields, whichever of the two
    gains a field, and the row reads back as the episode."""
    columns = _columns(NodeSlownessRow)
    episode = get_type_hints(SlowEpisode)
    assert {name: columns.get(name) for name in episode} == episode
    assert set(columns) - set(episode) == {"id", "scheduler", "cluster"}
    values = {"node": "n1", "job_id": "7", "started_s": 1.0, "last_seen_s": 4.0, "ranks": 2}
    row = NodeSlownessRow(id=1, scheduler="slurm", cluster="a", slowdown=1.3, **values)
    assert row.episode() == SlowEpisode(slowdown=1.3, **values)


def test_the_audit_view_is_the_audit_columns() -> None:
    assert issubclass(AuditRow, AuditColumns)
    assert issubclass(AuditRecord, AuditColumns)
    assert list(AuditRecord.model_fields) == list(_columns(AuditRow))
    # the public contract: a new column reaches the API only with this list changed
    assert list(AuditRecord.model_fields) == [
        "id", "at_s", "actor", "action", "scheduler", "cluster", "target", "outcome", "reason",
        "detail",
    ]  # fmt: skip


def test_the_stored_review_views_read_only_review_columns() -> None:
    assert issubclass(ReviewRow, ReviewColumns)
    assert issubclass(StoredReview, ReviewColumns)
    columns = _columns(ReviewRow)
    assert set(LatestReview.model_fields) <= set(columns)  # each read from the row by name
    assert list(StoredReview.model_fields) == [*get_type_hints(ReviewColumns), "summary"]
    assert list(LatestReview.model_fields) == [
        "id", "made_at_s", "trigger", "fleet", "elapsed_s", "error", "summary", "result",
    ]  # fmt: skip


def test_a_written_sample_is_a_step_sample_row_but_its_id() -> None:
    row = {k: v for k, v in _columns(StepSampleRow).items() if k != "id"}
    hints = get_type_hints(_Sample)
    sample = {f.name: hints[f.name] for f in fields(_Sample) if f.name != "stored"}
    assert {"job_pk": int, **sample} == row  # the job's id is given when it is written
    assert ("job_pk", *sample) == _SAMPLE_COLUMNS
    updated = {c.key for c in _SAMPLE_UPDATE.table.c if c.key in _SAMPLE_UPDATE.compile().params}
    assert updated == set(sample) - {"job_pk", "iteration"}


def _hints(declared: object) -> dict[str, object]:
    """A declaration's fields with their types, in order (a dataclass, TypedDict, NamedTuple,
    record or pydantic model)."""
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return {name: f.annotation for name, f in declared.model_fields.items()}
    return get_type_hints(declared)


@pytest.mark.parametrize(
    ("first", "second", "only_first"),
    [
        # an audit record to append is the audit columns but the id the store gives it
        (AuditColumns, AuditEntry, {"id"}),
        # the GPU telemetry the API shows is the port's record of it, stored as a dict
        (GpuUsage, JobGpuUsage, set()),
        # whether the log was read as a witness is the ingest loop's, not shown
        (LaunchFactsJson, LaunchFacts, {"log_read"}),
        # the columns of a step sample the ETA reads are a step observation's
        (StepObservation, SampleTiming, set()),
        # an invalid scenario's prediction is its error
        (Prediction, PredictionJson, {"error"}),
        # a source's health as shown: its row and how old and stale its last success is
        (SourceView, SourceRow, {"age_s", "stale"}),
        # the nodes of a source as its last good poll stored them (``dataclasses.asdict``)
        (NodeView, NodeState, set()),
    ],
    ids=lambda d: getattr(d, "__name__", ""),
)
def test_a_shape_declared_twice_names_the_same_fields(
    first: type, second: type, only_first: set[str]
) -> None:
    """Shapes declared on both sides of a boundary the declarations cannot share (a frozen
    dataclass and a table's columns, the core and the API's documented models): the same
    field names but those named here."""
    assert set(_hints(first)) - only_first == set(_hints(second))
