"""SQLAlchemy tables of the planner's store (schema owned by the Alembic migrations).

Every time column holds POSIX epoch seconds (float). JSON columns hold plain, JSON-serialisable
values produced by the service (job snapshots, scenario documents, prediction and ETA objects).
A JSON column reads back as it was written, by this or another version of the planner, so its
Python type is ``dict[str, object]`` (its readers check each value they use:
``planner.service.stored_json``, ``planner.forecast.stored``), or :data:`UncheckedJson` where
some readers still index it unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

UncheckedJson: TypeAlias = dict[str, Any]
"""A JSON object of a column that some readers in the ingest loops, the ``/metrics``
collector or the reviews still index without checking each value (``JobRow.state``,
``prediction``, ``log_cursor``, ``eta``, ``stragglers``, ``progress_mark``, ``schedule``,
``queue_forecast``, ``PredictionRow.payload``, ``CalibrationRow.state``). A column becomes
``dict[str, object]`` once all its readers narrow what they read."""


class Base(DeclarativeBase):
    """Declarative base of the store's tables."""


class JobRow(Base):
    """One job of one scheduler/cluster: its latest snapshot, description, prediction and ETA.

    ``progress_mark``: the last progress record read (``planner.forecast.observations.
    ProgressMark`` as a dict), so a step time can span two reads; ``gpus``: the latest GPU
    telemetry of the job (``planner.ports.JobGpuUsage`` as a dict), None without DCGM.
    ``progress_history``: its pauses, restarts and recent pace (``planner.forecast.history.
    ProgressHistory`` as a dict); ``schedule``: the evaluation and checkpoint intervals its
    arguments state (``planner.forecast.arguments.TrainingSchedule``); ``outcome``: once it
    ended, how its ETAs did (``planner.service.loops.outcomes``).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("scheduler", "cluster", "job_id", name="uq_jobs_key"),
        # a page of the listing is a range of one of these (``sort_number``)
        Index("ix_jobs_listing", "scheduler", "cluster", "sort_number", "job_id"),
        Index("ix_jobs_listing_active", "active", "scheduler", "cluster", "sort_number", "job_id"),
        Index("ix_jobs_listing_status", "status", "scheduler", "cluster", "sort_number", "job_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scheduler: Mapped[str] = mapped_column(String(32))
    cluster: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    user: Mapped[str] = mapped_column(String(128), default="")
    status: Mapped[str] = mapped_column(String(32), index=True)
    active: Mapped[bool] = mapped_column(default=True, index=True)
    state: Mapped[UncheckedJson] = mapped_column(JSON)
    first_seen_s: Mapped[float] = mapped_column(Float)
    last_seen_s: Mapped[float] = mapped_column(Float)
    ended_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    described_by: Mapped[str] = mapped_column(String(32), default="none")
    description_detail: Mapped[str] = mapped_column(Text, default="")
    description_key: Mapped[str] = mapped_column(Text, default="")
    scenario: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
    # where each value of a launch description came from, what was assumed and left unknown
    description_facts: Mapped[Mapping[str, object] | None] = mapped_column(JSON, nullable=True)
    prediction: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    train_iters: Mapped[int | None] = mapped_column(Integer, nullable=True)
    iteration: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_progress_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    log_cursor: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    eta: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    stragglers: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    telemetry_since_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    progress_mark: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    gpus: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
    # ETA: what the job's progress showed, what its arguments state, how its ETAs did
    progress_history: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
    schedule: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    outcome: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
    # the pending job's predicted start and completion from the queue simulation
    # (planner.service.loops.queue_forecast); kept once the job starts (the last one made).
    queue_forecast: Mapped[UncheckedJson | None] = mapped_column(JSON, nullable=True)
    # the first part of ``job_sort_key(job_id)`` (the listing's order, indexed)
    sort_number: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class StepSampleRow(Base):
    """One progress observation of a job: mean step time over ``num_iterations`` ending at
    ``iteration``, observed at ``time_s``."""

    __tablename__ = "step_samples"
    __table_args__ = (
        UniqueConstraint("job_pk", "iteration", name="uq_step_samples_job_iteration"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    iteration: Mapped[int] = mapped_column(Integer)
    step_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    num_iterations: Mapped[int] = mapped_column(Integer, default=1)
    time_s: Mapped[float] = mapped_column(Float)
    loss: Mapped[float | None] = mapped_column(Float, nullable=True)
    logged_step_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)


class SampleTiming(NamedTuple):
    """The columns of a step sample the ETA reads (read as plain tuples, not rows)."""

    iteration: int
    step_time_s: float | None
    num_iterations: int
    time_s: float
    logged_step_time_s: float | None


class PredictionRow(Base):
    """History of what the planner predicted for a job (``kind``: ``eta`` or ``model``)."""

    __tablename__ = "predictions"
    __table_args__ = (Index("ix_predictions_job_time", "job_pk", "made_at_s"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_pk: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    made_at_s: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(16))
    payload: Mapped[UncheckedJson] = mapped_column(JSON)


class SourceRow(Base):
    """Health of one telemetry source (e.g. Slurm on one cluster): last success and last error."""

    __tablename__ = "sources"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    scheduler: Mapped[str] = mapped_column(String(32))
    cluster: Mapped[str] = mapped_column(String(128), default="")
    last_attempt_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_success_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    nodes: Mapped[list[dict[str, object]] | None] = mapped_column(JSON, nullable=True)
    warnings: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)


class CalibrationRow(Base):
    """A named calibration state kept as data (e.g. ``online``: per-cluster corrections)."""

    __tablename__ = "calibrations"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[UncheckedJson] = mapped_column(JSON)
    updated_s: Mapped[float] = mapped_column(Float)


class HeartbeatRow(Base):
    """What a process of the service last reported about itself (``planner.service.
    processes``): ``name`` (e.g. ``ingest/<host>-<pid>``), ``body`` (the status record as JSON
    text, read by the API process) and when it was written, Unix epoch seconds."""

    __tablename__ = "heartbeats"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    body: Mapped[str] = mapped_column(Text)
    updated_s: Mapped[float] = mapped_column(Float)


# the audit trail of what the planner wrote (schedulers) and what it was sent (uploads).


class AuditRow(Base):
    """One write the planner made to a scheduler, or a state change it accepted over the API.

    ``actor``: who (``planner`` for the ingest loop's writes, else the API principal);
    ``action``: what (``comment``, ``time_limit``, ``hints_file``, ``annotations``,
    ``calibration_upload``); ``target``: the job id, file or calibration; ``outcome``: ``ok``,
    ``error`` or ``skipped``; ``reason``: why (the prediction behind it, or the error);
    ``detail``: values written (JSON).
    """

    __tablename__ = "audit"
    __table_args__ = (Index("ix_audit_at", "at_s"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at_s: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(32))
    scheduler: Mapped[str] = mapped_column(String(32), default="")
    cluster: Mapped[str] = mapped_column(String(128), default="")
    target: Mapped[str] = mapped_column(String(512), default="")
    outcome: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    detail: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """An audit record to append (the fields of :class:`AuditRow`)."""

    at_s: float
    actor: str
    action: str
    outcome: str
    scheduler: str = ""
    cluster: str = ""
    target: str = ""
    reason: str = ""
    detail: dict[str, object] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """What the store keeps (``planner.service.security_settings.RetentionSettings``): ETA
    estimates per job (newest ``eta_rows``, none older than ``eta_max_age_s``), step samples per
    job (newest ``samples_per_job``), audit records younger than ``audit_max_age_s``."""

    eta_rows: int = 200
    eta_max_age_s: float = 3 * 24 * 3600.0
    samples_per_job: int = 5000
    audit_max_age_s: float = 30 * 24 * 3600.0


#: The columns of a job ``/metrics`` reads (``Store.jobs_for_metrics`` loads only these).
METRIC_COLUMNS = (
    "scheduler",
    "cluster",
    "job_id",
    "name",
    "user",
    "status",
    "described_by",
    "state",
    "prediction",
    "iteration",
    "eta",
    "stragglers",
    "gpus",
    "queue_forecast",
)


def predicted_start(row: JobRow) -> float | None:
    """The p50 start the queue forecast predicts for the job (epoch seconds; None: none)."""
    start = (row.queue_forecast or {}).get("start_s")
    value = start.get("p50") if isinstance(start, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def soonest_first(rows: Sequence[JobRow]) -> list[JobRow]:
    """Pending jobs by their predicted start, soonest first (none: last), then in listing
    order (which pending jobs get series on ``/metrics``)."""

    def key(row: JobRow) -> tuple[float, str, str, tuple[int, str]]:
        start = predicted_start(row)
        return (
            math.inf if start is None else start,
            row.scheduler,
            row.cluster,
            job_sort_key(row.job_id),
        )

    return sorted(rows, key=key)


#: Where a job sorts in a listing: (scheduler, cluster, ``job_sort_key(job_id)``).
JobSortKey = tuple[str, str, tuple[int, str]]


def job_sort_key(job_id: str) -> tuple[int, str]:
    """Order of job ids within a cluster: numerically by the id's leading number (array tasks
    ``123_4`` after ``123``), ids without one last."""
    head = job_id.split("_", 1)[0]
    return (int(head), job_id) if head.isdigit() else (1 << 62, job_id)


def listing_key(row: JobRow) -> tuple[str, str, tuple[int, str]]:
    """Order of the job listing (``GET /v1/jobs``, ``Store.list_jobs``): by scheduler, cluster
    and :func:`job_sort_key`."""
    return (row.scheduler, row.cluster, job_sort_key(row.job_id))


class NodeSlownessRow(Base):
    """One episode of a slow node (``planner.stragglers.exposure.SlowEpisode``): a node on which
    a running job had ranks flagged (or the node itself flagged as slow), from ``started_s`` to
    ``last_seen_s``, with the job's what-if ``slowdown``. Drained nodes leave the history."""

    __tablename__ = "node_slowness"
    __table_args__ = (Index("ix_node_slowness_node", "scheduler", "cluster", "node"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scheduler: Mapped[str] = mapped_column(String(32))
    cluster: Mapped[str] = mapped_column(String(128))
    node: Mapped[str] = mapped_column(String(256))
    job_id: Mapped[str] = mapped_column(String(64))
    started_s: Mapped[float] = mapped_column(Float)
    last_seen_s: Mapped[float] = mapped_column(Float, index=True)
    ranks: Mapped[int] = mapped_column(Integer, default=1)
    slowdown: Mapped[float] = mapped_column(Float)


class ReviewRow(Base):
    """A capacity review the service ran on its schedule (``planner.service.reviews``):
    ``result`` is ``Review.to_dict()`` (``docs/capacity-formats.md``), ``summary`` its
    comparison rows, ``html``/``markdown`` the documents; ``error`` (with no result) when the
    review could not run."""

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    made_at_s: Mapped[float] = mapped_column(Float, index=True)
    trigger: Mapped[str] = mapped_column(String(16))
    fleet: Mapped[str] = mapped_column(String(256), default="")
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    summary: Mapped[list[dict[str, object]] | None] = mapped_column(JSON, nullable=True)
    result: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
    html: Mapped[str | None] = mapped_column(Text, nullable=True)
    markdown: Mapped[str | None] = mapped_column(Text, nullable=True)


class ObservedRunRow(Base):
    """One finished job as a measured run for the observed-runs calibration
    (``planner.service.learning``): its scenario document, the measured step time
    (``iteration_time_s``, s: the ETA's robust mean of its wall-clock step times) over
    ``num_iterations`` iterations, the most GPU memory one of its GPUs used when DCGM reported
    it, and ``skip_reason`` when the run cannot be learnt from (a step time that is zero or not
    a number, a GPU the catalog does not know): kept with its reason, never fitted. One row per
    job (a requeued job's later end replaces it)."""

    __tablename__ = "observed_runs"
    __table_args__ = (
        UniqueConstraint("scheduler", "cluster", "job_id", name="uq_observed_runs_job"),
        Index("ix_observed_runs_cluster", "scheduler", "cluster", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    scheduler: Mapped[str] = mapped_column(String(32))
    cluster: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str] = mapped_column(String(64))
    recorded_s: Mapped[float] = mapped_column(Float)
    ended_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu: Mapped[str] = mapped_column(String(64), default="")
    scenario: Mapped[dict[str, object]] = mapped_column(JSON)
    iteration_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    num_iterations: Mapped[int] = mapped_column(Integer, default=0)
    memory_per_gpu_bytes: Mapped[float | None] = mapped_column(Float, nullable=True)
    skip_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class ObservedRunCount(NamedTuple):
    """What one cluster's observed runs hold: usable runs, runs skipped with a reason, and
    the newest row's id (a refit is due when it moved)."""

    scheduler: str
    cluster: str
    num_runs: int
    num_skipped: int
    newest_id: int
