"""What the ingest loop works with: its knobs and its dependencies (no behaviour here)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field

from planner.calibration import OnlineCalibration
from planner.capacity.fleet import Fleet
from planner.ports import GpuTelemetry, JobTelemetry, ProgressReader, SchedulerSource, TraceSource
from planner.service.describe import JobDescription
from planner.service.learning import Learning
from planner.service.loops.forecast_worker import QueueForecaster
from planner.service.loops.incremental import IngestMemo
from planner.service.store import Store
from planner.specs.job import NodeState


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueForecastConfig:
    """The knobs of the pending jobs' forecast (``planner.service.loops.queue_forecast``):
    Monte Carlo samples, least seconds between two forecasts of an unchanged queue, a fleet
    file's pools to use instead of the sources' nodes (None: the nodes), from how many
    active jobs on a queue is forecast in the worker process (0: never), whether jobs are
    placed on the nodes when the source reports what they ask of each, and Slurm's seconds
    between two backfill cycles (``bf_interval``)."""

    enabled: bool = True
    samples: int = 100
    interval_s: float = 30.0
    fleet: Fleet | None = None
    worker_min_jobs: int = 1000
    place_on_nodes: bool = False
    backfill_interval_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestSettings:
    """The knobs of the ingest loop (taken from ``planner.service.settings.Settings``)."""

    model_prior_log_sd: float = 0.3
    max_scenario_file_bytes: int = 1024 * 1024
    ended_job_retention_s: float = 7 * 24 * 3600.0
    trace_analysis_interval_s: float = 300.0
    queue_forecast: QueueForecastConfig = field(default_factory=QueueForecastConfig)
    job_text_chars: int = 4096


@dataclass(slots=True)
class OnlineCache:
    """The online calibration, loaded from the store on first use and kept between cycles."""

    value: OnlineCalibration | None = None


#: What a launch was described as: its description and training schedule.
Described = tuple[JobDescription, dict[str, object] | None]


@dataclass(slots=True)
class LaunchDescriptions:
    """The descriptions made in one source's cycle, by what they are made from (the job's
    ``description_key``, scheduler, cluster, user and node count: everything
    ``planner.service.describe.describe_job`` reads of a job, and whose view of its files it
    reads): a cluster's jobs share few launches (a user's sbatch script submitted again and
    again), and each is described once per cycle. Emptied at the start of every cycle (a file a
    launch names may change between two; across cycles ``planner.service.describe`` reuses a
    description only when the files it read still read the same).

    Each caller gets its own copy, so that a job's row changing its description in place
    changes no other job's: a description that holds mappings is kept pickled (one
    serialisation when kept, one copy per job that reuses it; a deep copy cost seven times
    more), one of text and numbers only (``described_by: none``, most of a first cycle's jobs)
    is kept as it is (nothing in it can change)."""

    entries: dict[tuple[str, ...], bytes | Described] = field(default_factory=dict)

    def get(self, key: tuple[str, ...]) -> Described | None:
        """A copy of the description and training schedule kept under ``key`` (None: none)."""
        hit = self.entries.get(key)
        if isinstance(hit, bytes):
            copied: Described = pickle.loads(hit)
            return copied
        return hit

    def put(
        self, key: tuple[str, ...], description: JobDescription, schedule: dict[str, object] | None
    ) -> None:
        """Keep what ``key``'s launch was described as (a copy: the caller keeps its own)."""
        mutable = (description.document, description.prediction, description.facts, schedule)
        if all(part is None for part in mutable):
            self.entries[key] = (description, None)
        else:
            self.entries[key] = pickle.dumps((description, schedule))


@dataclass(slots=True, kw_only=True)
class IngestDeps:
    """Everything one ingest cycle reads from or writes to.

    ``store``: the database port; ``sources``: the schedulers polled; ``reader``: the job-log
    tailer; ``traces``: per-rank traces jobs name; ``telemetry``: progress and per-rank timings
    from a metrics system; ``gpus``: per-job GPU telemetry (DCGM); ``online``: the cached online
    calibration; ``memo``: what the last good cycle left each job at and ``forecaster``: the
    worker process of large queues' forecasts (``planner.service.loops.
    incremental``, ``forecast_worker``); ``learning``: what finished jobs taught
    (``planner.service.learning``).
    """

    store: Store
    sources: list[SchedulerSource]
    reader: ProgressReader
    settings: IngestSettings = field(default_factory=IngestSettings)
    traces: TraceSource | None = None
    telemetry: JobTelemetry | None = None
    gpus: GpuTelemetry | None = None
    online: OnlineCache = field(default_factory=OnlineCache)
    memo: IngestMemo = field(default_factory=IngestMemo)
    forecaster: QueueForecaster = field(default_factory=QueueForecaster)
    learning: Learning = field(default_factory=Learning)
    #: the stored form of each node of the last cycle (``cycle.node_documents``)
    node_documents: dict[NodeState, dict[str, object]] = field(default_factory=dict)
    #: this cycle's launch descriptions (``LaunchDescriptions``)
    descriptions: LaunchDescriptions = field(default_factory=LaunchDescriptions)
    #: (scheduler, cluster) -> seconds of its last good cycle's poll and whole cycle
    cycle_seconds: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)


def source_name(source: SchedulerSource) -> str:
    """Key of a source in the ``sources`` table (one per scheduler instance)."""
    return getattr(source, "name", source.scheduler)
