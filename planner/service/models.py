"""The records of the planner's store: plain objects, one class per table.

Each record class lists its columns as annotated attributes and imports no database library:
``planner.service.store.tables`` declares the tables (the schema itself is owned by the Alembic
migrations) and maps these classes onto them when the store is imported, so the service's loops
and routes change a row by setting its attributes and the store's unit of work writes the
changes on commit. A record built by its keyword constructor holds only the attributes given
(the store fills in the columns' defaults when it inserts the row, as a table's row would).

Every time column holds POSIX epoch seconds (float). JSON columns hold plain, JSON-serialisable
values produced by the service (job snapshots, scenario documents, prediction and ETA objects).
A JSON column reads back as it was written, by this or another version of the planner, so its
Python type is ``dict[str, object]``: its readers check each value they use
(``planner.service.stored_json``, ``planner.forecast.stored``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from planner.stragglers.exposure import SlowEpisode

SCHEDULER_CHARS: Final = 32
"""The length of every table's ``scheduler`` column (``planner.service.store.tables``); what a
request may name (``GET /v1/calibrations/runs``)."""
CLUSTER_CHARS: Final = 128
"""The length of every table's ``cluster`` column, as ``SCHEDULER_CHARS``."""

_COLUMNS: dict[type[Record], frozenset[str]] = {}


def _columns(record: type[Record]) -> frozenset[str]:
    """The annotated attributes (columns) of a record class and its bases."""
    found = _COLUMNS.get(record)
    if found is None:
        names = (name for k in record.__mro__ for name in vars(k).get("__annotations__", {}))
        found = _COLUMNS[record] = frozenset(names)
    return found


class Record:
    """A row of one table of the store: its columns are the class's annotated attributes.

    ``Record(**values)`` sets the attributes named (the others stay unset until the store
    inserts the row and reads back its defaults); raises ``TypeError`` for a name that is no
    column of the class, as a declarative SQLAlchemy class does.
    """

    def __init__(self, **values: object) -> None:
        columns = _columns(type(self))
        for name, value in values.items():
            if name not in columns:
                raise TypeError(
                    f"{name!r} is an invalid keyword argument for {type(self).__name__}"
                )
            setattr(self, name, value)


class JobColumns:
    """The columns of a job that the API's job summary shows as they are stored, declared
    once: the store's :class:`JobRow` and ``planner.service.api.models.JobSummary`` both take
    them from here. ``status``: the ``planner.specs.job.JobStatus`` value; ``active``: the job
    is queued or holds resources (``JobStatus.is_active``), false once it ended."""

    scheduler: str
    cluster: str
    job_id: str
    name: str
    user: str
    status: str
    active: bool


class JobRow(JobColumns, Record):
    """One job of one scheduler/cluster: its latest snapshot, description, prediction and ETA
    (the columns the API shows as stored: :class:`JobColumns`).

    ``progress_mark``: the last progress record read (``planner.forecast.observations.
    ProgressMark`` as a dict), so a step time can span two reads; ``gpus``: the latest GPU
    telemetry of the job (``planner.ports.JobGpuUsage`` as a dict), None without DCGM.
    ``progress_history``: its pauses, restarts and recent pace (``planner.forecast.history.
    ProgressHistory`` as a dict); ``schedule``: the evaluation and checkpoint intervals its
    arguments state (``planner.forecast.arguments.TrainingSchedule``); ``outcome``: once it
    ended, how its ETAs did (``planner.service.loops.outcomes``).
    """

    id: int
    state: dict[str, object]
    first_seen_s: float
    last_seen_s: float
    ended_s: float | None
    described_by: str
    description_detail: str
    description_key: str
    scenario: dict[str, object] | None
    # where each value of a launch description came from, what was assumed and left unknown
    description_facts: Mapping[str, object] | None
    prediction: dict[str, object] | None
    train_iters: int | None
    iteration: int | None
    last_progress_s: float | None
    log_cursor: dict[str, object] | None
    eta: dict[str, object] | None
    stragglers: dict[str, object] | None
    telemetry_since_s: float | None
    progress_mark: dict[str, object] | None
    gpus: dict[str, object] | None
    # ETA: what the job's progress showed, what its arguments state, how its ETAs did
    progress_history: dict[str, object] | None
    schedule: dict[str, object] | None
    outcome: dict[str, object] | None
    # the pending job's predicted start and completion from the queue simulation
    # (planner.service.loops.queue_forecast); kept once the job starts (the last one made).
    queue_forecast: dict[str, object] | None
    # the first part of ``job_sort_key(job_id)`` (the listing's order, indexed)
    sort_number: int


class StepSampleRow(Record):
    """One progress observation of a job: mean step time over ``num_iterations`` ending at
    ``iteration``, observed at ``time_s``."""

    id: int
    job_pk: int
    iteration: int
    step_time_s: float | None
    num_iterations: int
    time_s: float
    loss: float | None
    logged_step_time_s: float | None


class SampleTiming(NamedTuple):
    """The columns of a step sample the ETA reads (read as plain tuples, not rows)."""

    iteration: int
    step_time_s: float | None
    num_iterations: int
    time_s: float
    logged_step_time_s: float | None


class PredictionRow(Record):
    """History of what the planner predicted for a job (``kind``: ``eta`` or ``model``)."""

    id: int
    job_pk: int
    made_at_s: float
    kind: str
    payload: dict[str, object]


class SourceColumns:
    """The columns of a telemetry source that the API's view of it shows first, as they are
    stored, declared once: the store's :class:`SourceRow` and ``planner.service.api.models.
    SourceView`` both take them from here. ``last_success_s`` / ``last_attempt_s``: when a poll
    last succeeded / was last tried (epoch s; None: never)."""

    name: str
    scheduler: str
    cluster: str
    last_success_s: float | None
    last_attempt_s: float | None


class SourceRow(SourceColumns, Record):
    """Health of one telemetry source (e.g. Slurm on one cluster): last success and last error
    (and the columns of :class:`SourceColumns`)."""

    last_error: str | None
    consecutive_failures: int
    nodes: list[dict[str, object]] | None
    warnings: list[str] | None


class CalibrationRow(Record):
    """A named calibration state kept as data (e.g. ``online``: per-cluster corrections)."""

    name: str
    state: dict[str, object]
    updated_s: float


class HeartbeatRow(Record):
    """What a process of the service last reported about itself (``planner.service.
    processes``): ``name`` (e.g. ``ingest/<host>-<pid>``), ``body`` (the status record as JSON
    text, read by the API process) and when it was written, Unix epoch seconds."""

    name: str
    body: str
    updated_s: float


# the audit trail of what the planner wrote (schedulers) and what it was sent (uploads).


class AuditColumns:
    """The columns of an audit record, declared once: the store's :class:`AuditRow` and the
    API's view of it (``planner.service.api.models.AuditRecord``) both take them from here.

    ``actor``: who (``planner`` for the ingest loop's writes, else the API principal);
    ``action``: what (``comment``, ``time_limit``, ``hints_file``, ``annotations``,
    ``calibration_upload``); ``target``: the job id, file or calibration; ``outcome``: ``ok``,
    ``error`` or ``skipped``; ``reason``: why (the prediction behind it, or the error);
    ``detail``: values written (JSON).
    """

    id: int
    at_s: float
    actor: str
    action: str
    scheduler: str
    cluster: str
    target: str
    outcome: str
    reason: str
    detail: dict[str, object] | None


class AuditRow(AuditColumns, Record):
    """One write the planner made to a scheduler, or a state change it accepted over the API
    (its columns: :class:`AuditColumns`)."""


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


class NodeSlownessRow(Record):
    """One episode of a slow node of one scheduler/cluster: a node on which a running job had
    ranks flagged (or the node itself flagged as slow), from ``started_s`` to ``last_seen_s``,
    with the job's what-if ``slowdown``. Drained nodes leave the history.

    Its columns but ``id``, ``scheduler`` and ``cluster`` are the fields of the core's
    ``planner.stragglers.exposure.SlowEpisode`` (names and types; ``tests/service/
    test_record_declarations.py`` holds them equal), read back as one by :meth:`episode`."""

    id: int
    scheduler: str
    cluster: str
    node: str
    job_id: str
    started_s: float
    last_seen_s: float
    ranks: int
    slowdown: float

    def episode(self) -> SlowEpisode:
        """The stored episode as the core reads it: each field from its column."""
        return SlowEpisode(**{f.name: getattr(self, f.name) for f in _EPISODE_FIELDS})


_EPISODE_FIELDS = dataclasses.fields(SlowEpisode)


class ReviewColumns:
    """The columns of a stored review that the API shows as they are, declared once: the
    store's :class:`ReviewRow` and the API's ``planner.service.api.review_models.StoredReview``
    both take them from here. ``made_at_s``: when it ran (epoch s); ``trigger``: what ran it;
    ``fleet``: the fleet file; ``elapsed_s``: how long it took, seconds; ``error``: why it
    could not run (None when it ran)."""

    id: int
    made_at_s: float
    trigger: str
    fleet: str
    elapsed_s: float
    error: str | None


class ReviewRow(ReviewColumns, Record):
    """A capacity review the service ran on its schedule (``planner.service.reviews``):
    ``result`` is ``Review.to_dict()`` (``docs/capacity-formats.md``), ``summary`` its
    comparison rows, ``html``/``markdown`` the documents; ``error`` (with no result) when the
    review could not run. Its other columns: :class:`ReviewColumns`."""

    summary: list[dict[str, object]] | None
    result: dict[str, object] | None
    html: str | None
    markdown: str | None


class ObservedRunRow(Record):
    """One finished job as a measured run for the observed-runs calibration
    (``planner.service.learning``): its scenario document, the measured step time
    (``iteration_time_s``, s: the ETA's robust mean of its wall-clock step times) over
    ``num_iterations`` iterations, the most GPU memory one of its GPUs used when DCGM reported
    it, and ``skip_reason`` when the run cannot be learnt from (a step time that is zero or not
    a number, a GPU the catalog does not know): kept with its reason, never fitted. One row per
    job (a requeued job's later end replaces it)."""

    id: int
    scheduler: str
    cluster: str
    job_id: str
    recorded_s: float
    ended_s: float | None
    gpu: str
    scenario: dict[str, object]
    iteration_time_s: float | None
    num_iterations: int
    memory_per_gpu_bytes: float | None
    skip_reason: str | None


class ObservedRunCount(NamedTuple):
    """What one cluster's observed runs hold: usable runs, runs skipped with a reason, and
    the newest row's id (a refit is due when it moved)."""

    scheduler: str
    cluster: str
    num_runs: int
    num_skipped: int
    newest_id: int
