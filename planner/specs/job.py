"""What the adapters report about the outside world, as frozen snapshots.

Adapters (``adapters/slurm``, ``adapters/logs``, later Kubernetes and Prometheus) translate what
schedulers and logs say into these values; the core and the service consume only these.
All times are POSIX epoch seconds (float, UTC); durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class JobStatus(StrEnum):
    """Scheduler-neutral job state. Slurm's states map onto these (``adapters.slurm``)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETING = "completing"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"

    @property
    def is_active(self) -> bool:
        """True while the job is queued or holds resources (pending to suspended)."""
        return self in _ACTIVE


_ACTIVE = frozenset(
    {JobStatus.PENDING, JobStatus.RUNNING, JobStatus.COMPLETING, JobStatus.SUSPENDED}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobState:
    """One job as its scheduler reports it at one moment.

    ``num_gpus`` is the GPU count allocated (running jobs) or requested (pending jobs), from the
    scheduler's GRES/TRES; ``gpus_allocated`` says which. ``gpu_type`` is the scheduler's GRES type
    name (e.g. ``"h100"``), not a catalog key. ``command`` is the job's command line or batch script
    path; ``batch_script`` its text when the scheduler could give it. ``stdout_path`` is already
    expanded (no ``%j`` patterns). ``expected_start_time_s`` is the scheduler's estimate for a
    pending job (Slurm's backfill estimate), if any.

    Fields filled by schedulers that have them (``adapters.kubernetes``): ``namespace`` (the
    job's Kubernetes namespace), ``queue_name`` (Kueue LocalQueue), ``queue_position`` (0-based
    position among the pending workloads of its ClusterQueue, from Kueue's visibility API),
    ``progress_ratio`` (0..1 and ``reported_remaining_s``, the job's own progress report, e.g.
    Kubeflow TrainJob ``status.trainerStatus``) and ``progress_updated_s`` (when it was reported).
    ``launch_manifest`` is the Kubernetes object the job runs as, as JSON, reduced to what says
    how it starts (``apiVersion``, ``kind``, ``metadata.name``/``namespace``, ``spec``), for the
    launch readers (``planner.launch.kubernetes``: the container's ``env``, the controller's
    injected variables, ``$(VAR)`` references); None when the scheduler has none or it was too
    large.
    """

    scheduler: str
    cluster: str
    job_id: str
    name: str = ""
    user: str = ""
    partition: str = ""
    account: str = ""
    status: JobStatus = JobStatus.UNKNOWN
    state_reason: str = ""
    node_list: tuple[str, ...] = ()
    num_nodes: int = 0
    num_gpus: int = 0
    gpus_allocated: bool = False
    gpu_type: str | None = None
    submit_time_s: float | None = None
    start_time_s: float | None = None
    end_time_s: float | None = None
    expected_start_time_s: float | None = None
    time_limit_s: float | None = None
    stdout_path: str | None = None
    work_dir: str | None = None
    command: str | None = None
    batch_script: str | None = None
    comment: str = ""
    namespace: str = ""
    queue_name: str = ""
    queue_position: int | None = None
    progress_ratio: float | None = None
    reported_remaining_s: float | None = None
    progress_updated_s: float | None = None
    launch_manifest: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """One node of a cluster: capacity and what jobs hold of it now, from the scheduler.

    ``num_cpus``/``num_cpus_allocated`` are CPUs (Slurm's ``cpus``/``alloc_cpus``),
    ``memory_bytes``/``memory_allocated_bytes`` the memory jobs may ask for and what they hold
    (``real_memory``/``alloc_memory``), ``num_gpus``/``num_gpus_allocated`` the GPUs."""

    name: str
    state: str
    num_gpus: int = 0
    num_gpus_allocated: int = 0
    gpu_type: str | None = None
    num_cpus: int = 0
    memory_bytes: float = 0.0
    partitions: tuple[str, ...] = ()
    num_cpus_allocated: int = 0
    memory_allocated_bytes: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeShare:
    """What one running job holds on one node: CPUs, memory (bytes) and GPUs."""

    node: str
    num_cpus: int = 0
    memory_bytes: float = 0.0
    num_gpus: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResources:
    """What an active job asks of each node (pending) or holds on each (running).

    A pending job starts once ``num_nodes`` nodes of one of its ``partitions`` (all nodes
    when empty), all of ``required_nodes`` among them and none of ``excluded_nodes``, each
    have ``cpus_per_node`` CPUs, ``memory_per_node_bytes`` of memory and ``gpus_per_node``
    GPUs (of ``gpu_type`` when set) free; an ``exclusive`` job needs nodes no job holds
    anything of, and while it runs no other job gets them. ``held`` lists a running job's
    holding on each of its nodes (empty for a pending job).
    """

    job_id: str
    num_nodes: int = 1
    cpus_per_node: int = 1
    memory_per_node_bytes: float = 0.0
    gpus_per_node: int = 0
    gpu_type: str | None = None
    exclusive: bool = False
    partitions: tuple[str, ...] = ()
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()
    held: tuple[NodeShare, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSnapshot:
    """Everything one scheduler source reported in one poll (``taken_at_s`` epoch seconds).

    ``jobs`` holds the active jobs and, when the scheduler's accounting could tell, jobs that
    ended recently (their final state and end time). ``warnings`` lists non-fatal problems met
    while reading (e.g. accounting disabled), one line each. ``resources`` holds what active
    jobs ask of or hold on each node, for the schedulers that report it (Slurm).
    ``backfill_interval_s`` is the seconds between two of the scheduler's backfill cycles as
    its configuration says (Slurm: ``SchedulerParameters`` ``bf_interval``); None when the
    source does not know it or the scheduler does not backfill.
    """

    scheduler: str
    cluster: str
    taken_at_s: float
    jobs: tuple[JobState, ...] = ()
    nodes: tuple[NodeState, ...] = ()
    warnings: tuple[str, ...] = field(default=())
    resources: tuple[JobResources, ...] = ()
    backfill_interval_s: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressRecord:
    """One training-progress observation parsed from a job's log.

    ``iteration`` is the number of optimizer steps completed; ``train_iters`` the total the job
    will run, when the line says. ``step_time_s`` is the mean wall time per iteration over the
    ``num_iterations`` iterations the line summarises (Megatron logs one line per
    ``--log-interval``). ``timestamp_s`` is the time printed on the line, or None when the line
    carries none (the reader then uses the time it read the line). ``framework`` names the log
    format (``megatron``, ``torchtitan``, ``lightning``, ...).
    """

    iteration: int
    train_iters: int | None = None
    step_time_s: float | None = None
    num_iterations: int = 1
    timestamp_s: float | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    framework: str = "megatron"


@dataclass(frozen=True, slots=True, kw_only=True)
class RankStepRecord:
    """One rank's timing of one logging interval, the input of live straggler detection.

    Printed by every rank of a job (see ``adapters.logs.parsers``, JSON event ``rank_step``).
    ``iteration`` is the last iteration of the interval; ``compute_time_s`` the rank's mean
    forward+backward time per iteration over it, without waiting for gradient synchronisation
    (the time a straggler-free peer would not have to wait for); ``step_time_s`` its mean wall
    time per iteration, waits included. ``node`` is the host the rank runs on, when printed.
    """

    iteration: int
    rank: int
    world_size: int
    compute_time_s: float
    step_time_s: float | None = None
    num_iterations: int = 1
    timestamp_s: float | None = None
    node: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TailCursor:
    """Where reading a log file stopped: lets the service resume after a restart.

    ``inode`` and ``size_bytes`` detect rotation or truncation; ``offset_bytes`` points just past
    the last complete line consumed; a partial last line is re-read next time.
    ``last_iteration`` is the iteration of the last Megatron-style interval line consumed, so
    the next read can tell how many iterations its first line averages over (None: unknown).
    ``parser_state`` is what the reader learnt from the lines before ``offset_bytes`` that later
    lines depend on (a format's header, a progress bar's total and clock), as the reader's own
    JSON text (``adapters.logs.context.LogContext.carried``), so that a new reader goes on as
    the one that stopped would have (None: nothing, or a cursor stored without it).
    """

    path: str
    inode: int = 0
    offset_bytes: int = 0
    size_bytes: int = 0
    last_iteration: int | None = None
    parser_state: str | None = None
