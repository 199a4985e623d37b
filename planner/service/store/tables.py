"""The store's tables, and the mapping of the record classes of ``planner.service.models``
onto them.

The tables are declared here with SQLAlchemy Core (:data:`METADATA`, the schema the Alembic
migrations in ``planner.service.migrations`` create and are checked against); importing this
module maps each record class onto its table (``registry.map_imperatively``), so the classes
stay plain (the service's loops and routes never import SQLAlchemy) while the store loads,
tracks and writes them as ORM objects: attribute changes are written on commit, a session keeps
one object per row. Every time column holds POSIX epoch seconds (float).

:class:`Attributes` gives a record class's mapped attributes as query expressions
(``JOB.scheduler == "slurm"``), typed, for the store's queries.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapper, QueryableAttribute, class_mapper, registry

from planner.service.models import (
    CLUSTER_CHARS,
    SCHEDULER_CHARS,
    AuditRow,
    CalibrationRow,
    HeartbeatRow,
    JobRow,
    NodeSlownessRow,
    ObservedRunRow,
    PredictionRow,
    Record,
    ReviewRow,
    SourceRow,
    StepSampleRow,
)

METADATA = MetaData()
"""The store's schema (``target_metadata`` of the Alembic migrations)."""


def _id() -> Column[int]:
    return Column("id", Integer, primary_key=True, autoincrement=True)


#: A job's JSON columns that may be empty: None is stored as SQL NULL (not as JSON ``null``),
#: so that every such column is in a new row's INSERT, NULL when the row has no value: the
#: rows a unit of work inserts all have one shape and are written in batches (a column set to
#: None and one left unset were two shapes: a first cycle's 10,000 new rows went in hundreds of
#: statements). Rows stored before may still hold JSON ``null``; both read back as None.
_JOB_JSON = JSON(none_as_null=True)

JOBS_TABLE = Table(
    "jobs",
    METADATA,
    _id(),
    Column("scheduler", String(SCHEDULER_CHARS), nullable=False),
    Column("cluster", String(CLUSTER_CHARS), nullable=False),
    Column("job_id", String(64), nullable=False, index=True),
    Column("name", String(256), nullable=False, default=""),
    Column("user", String(128), nullable=False, default=""),
    Column("status", String(32), nullable=False, index=True),
    Column("active", Boolean(), nullable=False, default=True, index=True),
    Column("state", JSON, nullable=False),
    Column("first_seen_s", Float, nullable=False),
    Column("last_seen_s", Float, nullable=False),
    Column("ended_s", Float, nullable=True),
    Column("described_by", String(32), nullable=False, default="none"),
    Column("description_detail", Text, nullable=False, default=""),
    Column("description_key", Text, nullable=False, default=""),
    Column("scenario", _JOB_JSON, nullable=True),
    Column("description_facts", _JOB_JSON, nullable=True),
    Column("prediction", _JOB_JSON, nullable=True),
    Column("train_iters", Integer, nullable=True),
    Column("iteration", Integer, nullable=True),
    Column("last_progress_s", Float, nullable=True),
    Column("log_cursor", _JOB_JSON, nullable=True),
    Column("eta", _JOB_JSON, nullable=True),
    Column("stragglers", _JOB_JSON, nullable=True),
    Column("telemetry_since_s", Float, nullable=True),
    Column("progress_mark", _JOB_JSON, nullable=True),
    Column("gpus", _JOB_JSON, nullable=True),
    Column("progress_history", _JOB_JSON, nullable=True),
    Column("schedule", _JOB_JSON, nullable=True),
    Column("outcome", _JOB_JSON, nullable=True),
    Column("queue_forecast", _JOB_JSON, nullable=True),
    Column("sort_number", BigInteger, nullable=False, default=0, server_default="0"),
    UniqueConstraint("scheduler", "cluster", "job_id", name="uq_jobs_key"),
    # a page of the listing is a range of one of these (``sort_number``)
    Index("ix_jobs_listing", "scheduler", "cluster", "sort_number", "job_id"),
    Index("ix_jobs_listing_active", "active", "scheduler", "cluster", "sort_number", "job_id"),
    Index("ix_jobs_listing_status", "status", "scheduler", "cluster", "sort_number", "job_id"),
)

STEP_SAMPLES_TABLE = Table(
    "step_samples",
    METADATA,
    _id(),
    Column(
        "job_pk", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True
    ),
    Column("iteration", Integer, nullable=False),
    Column("step_time_s", Float, nullable=True),
    Column("num_iterations", Integer, nullable=False, default=1),
    Column("time_s", Float, nullable=False),
    Column("loss", Float, nullable=True),
    Column("logged_step_time_s", Float, nullable=True),
    UniqueConstraint("job_pk", "iteration", name="uq_step_samples_job_iteration"),
)

PREDICTIONS_TABLE = Table(
    "predictions",
    METADATA,
    _id(),
    Column("job_pk", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("made_at_s", Float, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("payload", JSON, nullable=False),
    Index("ix_predictions_job_time", "job_pk", "made_at_s"),
)

SOURCES_TABLE = Table(
    "sources",
    METADATA,
    Column("name", String(64), primary_key=True),
    Column("scheduler", String(SCHEDULER_CHARS), nullable=False),
    Column("cluster", String(CLUSTER_CHARS), nullable=False, default=""),
    Column("last_attempt_s", Float, nullable=True),
    Column("last_success_s", Float, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("consecutive_failures", Integer, nullable=False, default=0),
    Column("nodes", JSON, nullable=True),
    Column("warnings", JSON, nullable=True),
)

CALIBRATIONS_TABLE = Table(
    "calibrations",
    METADATA,
    Column("name", String(64), primary_key=True),
    Column("state", JSON, nullable=False),
    Column("updated_s", Float, nullable=False),
)

HEARTBEATS_TABLE = Table(
    "heartbeats",
    METADATA,
    Column("name", String(128), primary_key=True),
    Column("body", Text, nullable=False),
    Column("updated_s", Float, nullable=False),
)

AUDIT_TABLE = Table(
    "audit",
    METADATA,
    _id(),
    Column("at_s", Float, nullable=False),
    Column("actor", String(128), nullable=False),
    Column("action", String(32), nullable=False),
    Column("scheduler", String(SCHEDULER_CHARS), nullable=False, default=""),
    Column("cluster", String(CLUSTER_CHARS), nullable=False, default=""),
    Column("target", String(512), nullable=False, default=""),
    Column("outcome", String(16), nullable=False),
    Column("reason", Text, nullable=False, default=""),
    Column("detail", JSON, nullable=True),
    Index("ix_audit_at", "at_s"),
)

NODE_SLOWNESS_TABLE = Table(
    "node_slowness",
    METADATA,
    _id(),
    Column("scheduler", String(SCHEDULER_CHARS), nullable=False),
    Column("cluster", String(CLUSTER_CHARS), nullable=False),
    Column("node", String(256), nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("started_s", Float, nullable=False),
    Column("last_seen_s", Float, nullable=False, index=True),
    Column("ranks", Integer, nullable=False, default=1),
    Column("slowdown", Float, nullable=False),
    Index("ix_node_slowness_node", "scheduler", "cluster", "node"),
)

REVIEWS_TABLE = Table(
    "reviews",
    METADATA,
    _id(),
    Column("made_at_s", Float, nullable=False, index=True),
    Column("trigger", String(16), nullable=False),
    Column("fleet", String(256), nullable=False, default=""),
    Column("elapsed_s", Float, nullable=False, default=0.0),
    Column("error", Text, nullable=True),
    Column("summary", JSON, nullable=True),
    Column("result", JSON, nullable=True),
    Column("html", Text, nullable=True),
    Column("markdown", Text, nullable=True),
)

OBSERVED_RUNS_TABLE = Table(
    "observed_runs",
    METADATA,
    _id(),
    Column("scheduler", String(SCHEDULER_CHARS), nullable=False),
    Column("cluster", String(CLUSTER_CHARS), nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("recorded_s", Float, nullable=False),
    Column("ended_s", Float, nullable=True),
    Column("gpu", String(64), nullable=False, default=""),
    Column("scenario", JSON, nullable=False),
    Column("iteration_time_s", Float, nullable=True),
    Column("num_iterations", Integer, nullable=False, default=0),
    Column("memory_per_gpu_bytes", Float, nullable=True),
    Column("skip_reason", Text, nullable=True),
    UniqueConstraint("scheduler", "cluster", "job_id", name="uq_observed_runs_job"),
    Index("ix_observed_runs_cluster", "scheduler", "cluster", "id"),
)

_TABLES: dict[type[Record], Table] = {
    JobRow: JOBS_TABLE,
    StepSampleRow: STEP_SAMPLES_TABLE,
    PredictionRow: PREDICTIONS_TABLE,
    SourceRow: SOURCES_TABLE,
    CalibrationRow: CALIBRATIONS_TABLE,
    HeartbeatRow: HEARTBEATS_TABLE,
    AuditRow: AUDIT_TABLE,
    NodeSlownessRow: NODE_SLOWNESS_TABLE,
    ReviewRow: REVIEWS_TABLE,
    ObservedRunRow: OBSERVED_RUNS_TABLE,
}

_REGISTRY = registry(metadata=METADATA)
for _record, _table in _TABLES.items():
    _REGISTRY.map_imperatively(_record, _table)


class Attributes:
    """The mapped attributes of one record class as query expressions: ``JOB.cluster`` is
    ``JobRow.cluster`` as SQLAlchemy instruments it, typed ``QueryableAttribute`` (the record
    class itself types it as the column's value). Raises ``AttributeError`` for a name that is
    no column of the class."""

    def __init__(self, record: type[Record]) -> None:
        self._mapper: Mapper[Record] = class_mapper(record)

    def __getattr__(self, name: str) -> QueryableAttribute[Any]:
        if name.startswith("_"):  # never a column (nor ``_mapper`` before it is set)
            raise AttributeError(name)
        found = self._mapper.column_attrs.get(name)
        attribute = found.class_attribute if found is not None else None
        if not isinstance(attribute, QueryableAttribute):
            raise AttributeError(f"{self._mapper.class_.__name__} has no column {name!r}")
        return attribute


JOB = Attributes(JobRow)
STEP_SAMPLE = Attributes(StepSampleRow)
PREDICTION = Attributes(PredictionRow)
SOURCE = Attributes(SourceRow)
CALIBRATION = Attributes(CalibrationRow)
HEARTBEAT = Attributes(HeartbeatRow)
AUDIT = Attributes(AuditRow)
NODE_SLOWNESS = Attributes(NodeSlownessRow)
REVIEW = Attributes(ReviewRow)
OBSERVED_RUN = Attributes(ObservedRunRow)
