"""The store port: what the service's loops and routes ask of the database.

Two Protocols: :class:`Store` (reads for the API and ``/metrics``, and opening a unit of work)
and :class:`UnitOfWork` (the repository methods one ingest step uses inside one transaction:
everything it does commits together or not at all, so readers see whole cycles). The rows are the
record classes of ``planner.service.models`` (plain attribute objects, mapped onto the tables by
``planner.service.store.tables``: a loop changes a job by setting its attributes, and the unit
of work writes the changes on commit).

``planner.service.store.sql.SqlStore`` implements both over SQLAlchemy; tests may substitute
anything with the same methods. Every method raises ``StoreError`` when the database fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from planner.service.models import (
    AuditEntry,
    AuditRow,
    CalibrationRow,
    HeartbeatRow,
    JobRow,
    JobSortKey,
    NodeSlownessRow,
    ObservedRunCount,
    ObservedRunRow,
    PredictionRow,
    RetentionPolicy,
    ReviewRow,
    SampleTiming,
    SourceRow,
    StepSampleRow,
)


class UnitOfWork(Protocol):
    """Repository methods inside one transaction (see the module docstring)."""

    def source(self, name: str, *, scheduler: str) -> SourceRow:
        """The health row of source ``name``, created (empty, cluster ``""``) when new."""
        ...

    def jobs_of(self, scheduler: str, cluster: str) -> list[JobRow]:
        """Every stored job of one scheduler and cluster."""
        ...

    def new_job(self, *, scheduler: str, cluster: str, job_id: str, first_seen_s: float) -> JobRow:
        """A new job row, added to the store (described by nothing yet)."""
        ...

    def delete_ended_jobs(self, *, ended_before_s: float) -> None:
        """Remove inactive jobs that ended before ``ended_before_s`` (epoch s), with their
        samples and predictions."""
        ...

    def sample_iterations(self, job: JobRow, *, since: int | None = None) -> set[int]:
        """Iterations the job already has a step sample for (from ``since`` on, when given)."""
        ...

    def add_sample(
        self,
        job: JobRow,
        *,
        iteration: int,
        step_time_s: float | None,
        num_iterations: int,
        time_s: float,
        loss: float | None,
        logged_step_time_s: float | None = None,
    ) -> None:
        """Store one step sample (mean step time over ``num_iterations`` ending at
        ``iteration``, observed at ``time_s``; ``logged_step_time_s`` the compute time the log
        printed for them, when it printed one)."""
        ...

    def replace_sample(
        self,
        job: JobRow,
        *,
        iteration: int,
        step_time_s: float | None,
        num_iterations: int,
        time_s: float,
        loss: float | None,
        logged_step_time_s: float | None = None,
    ) -> None:
        """Replace the job's step sample of ``iteration`` with a newer observation (the
        iteration was done again after a restart); as ``add_sample`` when it has none."""
        ...

    def timed_samples(self, job: JobRow, *, limit: int) -> list[SampleTiming]:
        """The newest ``limit`` samples of the job that have a step time, oldest first."""
        ...

    def read_samples_ahead(self, jobs: Sequence[JobRow], *, limit: int) -> None:
        """Read at once what ``timed_samples(job, limit=limit)`` and ``sample_iterations`` will
        read of each of ``jobs`` later in this unit of work (they answer the same with or
        without it)."""
        ...

    def add_prediction(
        self, job: JobRow, *, kind: str, made_at_s: float, payload: dict[str, object]
    ) -> None:
        """Store a prediction of ``kind`` (``model`` or ``eta``) in the job's history; one
        made at the same ``made_at_s`` in the same unit of work replaces that one (a cycle
        keeps one entry per job and kind: the last it made)."""
        ...

    def prune_predictions(self, job: JobRow, *, kind: str, keep: int) -> None:
        """Keep only the newest ``keep`` predictions of ``kind`` of the job."""
        ...

    def calibration(self, name: str) -> CalibrationRow | None:
        """One stored calibration by name."""
        ...

    def put_calibration(self, name: str, state: dict[str, object], updated_s: float) -> None:
        """Create or replace a named calibration."""
        ...

    # ETA: a finished job's ETA history, read back to learn from it
    def job_predictions(self, job: JobRow, *, kind: str, limit: int) -> list[PredictionRow]:
        """The newest ``limit`` predictions of ``kind`` of the job, oldest first."""
        ...

    # Node slowness history (straggler impact for queued jobs).

    def slow_episodes(
        self, scheduler: str, cluster: str, *, since_s: float
    ) -> list[NodeSlownessRow]:
        """Slow-node episodes of one cluster last seen at or after ``since_s``, oldest first."""
        ...

    def add_slow_episode(
        self,
        *,
        scheduler: str,
        cluster: str,
        node: str,
        job_id: str,
        now_s: float,
        ranks: int,
        slowdown: float,
    ) -> NodeSlownessRow:
        """Start an episode of ``node`` being slow for ``job_id`` at ``now_s``."""
        ...

    def forget_nodes(self, scheduler: str, cluster: str, nodes: Sequence[str]) -> None:
        """Remove every episode of these nodes (drained: they leave the history)."""
        ...

    def put_observed_run(self, run: ObservedRunRow) -> None:
        """Store a finished job as an observed run; it replaces the job's earlier run (same
        scheduler, cluster and job id: a requeued job ended again)."""
        ...

    # Load: what a cycle over 10,000 jobs asks in bulk.

    def ended_jobs_named(self, scheduler: str, cluster: str, name: str, user: str) -> list[JobRow]:
        """The cluster's inactive jobs of this name and user, as they are now."""
        ...

    def touch_jobs(self, jobs: Sequence[JobRow], *, last_seen_s: float) -> None:
        """Set ``last_seen_s`` of these stored jobs in bulk (nothing else changes)."""
        ...

    def write_jobs(self, changes: Sequence[tuple[JobRow, Mapping[str, object]]]) -> None:
        """Give each row the values of its mapping (attribute name -> value), written in bulk
        now rather than row by row when the unit of work ends; the rows read as changed."""
        ...


class Store(Protocol):
    """The service's database (see the module docstring)."""

    @property
    def safe_url(self) -> str:
        """The database URL with any password hidden (for logs)."""
        ...

    def migrate(self) -> None:
        """Create or upgrade the schema to the newest revision."""
        ...

    def revision(self) -> str | None:
        """The schema revision the database is at (None before the first migration)."""
        ...

    def dispose(self) -> None:
        """Close every pooled connection."""
        ...

    def unit_of_work(self) -> AbstractContextManager[UnitOfWork]:
        """A transaction: commits on success, rolls back and raises ``StoreError`` on failure."""
        ...

    def list_jobs(
        self,
        *,
        active_only: bool = False,
        status: str | None = None,
        after: JobSortKey | None = None,
        limit: int | None = None,
    ) -> list[JobRow]:
        """Jobs ordered by scheduler, cluster and numeric job id where possible; with ``after``
        only those after that sort key (``planner.service.models.JobSortKey``), at most
        ``limit``."""
        ...

    def find_jobs(
        self, job_id: str, *, scheduler: str | None = None, cluster: str | None = None
    ) -> list[JobRow]:
        """Every stored job with this id (several when clusters share ids)."""
        ...

    def jobs_for_metrics(self, *, max_pending: int | None = None) -> list[JobRow]:
        """Active jobs that are not pending, and pending ones with a prediction (at most
        ``max_pending``, the soonest predicted starts), ordered as ``list_jobs``, with only
        the columns ``/metrics`` reads (``planner.service.job_series``)."""
        ...

    def job_counts(self) -> list[tuple[str, str, str, int, int]]:
        """(scheduler, cluster, status, jobs, GPUs) of the active jobs."""
        ...

    def job_clusters(self, scheduler: str) -> list[str]:
        """The clusters of ``scheduler`` that have stored jobs, sorted."""
        ...

    def samples(self, job_pk: int, *, limit: int = 200) -> list[StepSampleRow]:
        """The newest ``limit`` step samples of a job, oldest first."""
        ...

    def predictions(self, job_pk: int, *, kind: str, limit: int = 100) -> list[PredictionRow]:
        """The newest ``limit`` stored predictions of one kind for a job, oldest first."""
        ...

    def calibrations(self, *, prefix: str = "") -> list[CalibrationRow]:
        """Every stored calibration, or those whose name starts with ``prefix``."""
        ...

    def calibration(self, name: str) -> CalibrationRow | None:
        """One stored calibration by name."""
        ...

    def put_calibration(self, name: str, state: dict[str, object], updated_s: float) -> None:
        """Create or replace a named calibration."""
        ...

    def sources(self, *, nodes: bool = True) -> Sequence[SourceRow]:
        """Health rows of every source the service has polled (without ``nodes``: their node
        lists are not loaded and must not be read)."""
        ...

    def observed_run_counts(self) -> list[ObservedRunCount]:
        """Per cluster with observed runs: usable and skipped runs, the newest row's id."""
        ...

    def observed_runs(
        self, scheduler: str, cluster: str, *, limit: int, skipped: bool = False
    ) -> list[ObservedRunRow]:
        """The newest ``limit`` usable runs of one cluster (``skipped``: those skipped with a
        reason instead), oldest first."""
        ...

    def prune_observed_runs(self, scheduler: str, cluster: str, *, keep: int) -> int:
        """Delete all but the newest ``keep`` runs of one cluster; returns how many went."""
        ...

    # process heartbeats (planner.service.processes): the ingest process's status record.

    def put_heartbeat(self, name: str, body: str, updated_s: float) -> None:
        """Create or replace the heartbeat ``name`` (``body``: JSON text)."""
        ...

    def heartbeats(self, *, prefix: str = "") -> list[HeartbeatRow]:
        """Every heartbeat whose name starts with ``prefix``, newest first."""
        ...

    # readiness, audit trail, retention.

    def check(self) -> None:
        """Raise ``StoreError`` unless the database answers and is the one opened."""
        ...

    def add_audit(self, entries: Sequence[AuditEntry]) -> None:
        """Append audit records."""
        ...

    def audit(self, *, limit: int = 100, action: str | None = None) -> list[AuditRow]:
        """The newest ``limit`` audit records, newest first."""
        ...

    def prune(self, policy: RetentionPolicy, *, now_s: float) -> dict[str, int]:
        """Delete what the retention ``policy`` does not keep; rows deleted per kind."""
        ...

    # ------------------------------------------------------------ capacity reviews

    def add_review(self, review: ReviewRow, *, keep: int) -> int:
        """Store a review (its id is returned) and keep only the newest ``keep``."""
        ...

    def latest_review(
        self, *, with_result: bool = True, with_documents: bool = False
    ) -> ReviewRow | None:
        """The newest stored review that ran (no ``error``); its ``result`` only
        ``with_result``, its ``html``/``markdown`` only ``with_documents`` (else None)."""
        ...

    def list_reviews(self, *, limit: int = 20) -> list[ReviewRow]:
        """The newest ``limit`` reviews, newest first, without result or documents."""
        ...
