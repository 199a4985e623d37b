"""Each set of columns is declared once and every other place that speaks of them is checked
against that declaration: a record's annotated columns are its table's columns; the API's
views of jobs, audit records and stored reviews take their fields from the records' column
classes (``JobColumns``, ``AuditColumns``, ``ReviewColumns``) and publish exactly the contract
below; the step samples the unit of work writes are ``StepSampleRow``'s columns but its
``id``."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

import pytest
from sqlalchemy.orm import class_mapper

from planner.service.api.models import AuditRecord, JobSummary
from planner.service.api.review_models import LatestReview, StoredReview
from planner.service.models import (
    AuditColumns,
    AuditRow,
    JobColumns,
    JobRow,
    Record,
    ReviewColumns,
    ReviewRow,
    StepSampleRow,
)
from planner.service.store import tables
from planner.service.store.unit_of_work import _SAMPLE_COLUMNS, _SAMPLE_UPDATE, _Sample


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
    assert sample == row
    assert tuple(sample) == _SAMPLE_COLUMNS
    updated = {c.key for c in _SAMPLE_UPDATE.table.c if c.key in _SAMPLE_UPDATE.compile().params}
    assert updated == set(sample) - {"job_pk", "iteration"}
