"""Today's queue: running and pending jobs with their predicted runtimes, as the simulator's input.

``QueuedJob`` is a scheduler snapshot (``planner.specs.job.JobState``) plus what the planner
predicts for it: the runtime band (remaining wall time for a running job, the whole run for a
pending one), priority, team, deadline. The service builds these from its store; the CLI reads
them from a JSON file (``--jobs``, format in ``docs/capacity-formats.md``, "Jobs snapshot").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from planner.capacity.documents import Located, check_keys, load_document
from planner.capacity.fields import optional, read_number, read_timestamp_s, require
from planner.capacity.runtime import DEFAULT_CHECKPOINT_INTERVAL_S, RuntimeBand
from planner.errors import SpecError
from planner.specs.job import JobState, JobStatus

__all__ = ["QueueSnapshot", "QueuedJob", "parse_snapshot", "read_snapshot", "snapshot_document"]

_RUNNING = frozenset({JobStatus.RUNNING, JobStatus.COMPLETING, JobStatus.SUSPENDED})


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedJob:
    """One running or pending job with its predicted runtime.

    ``runtime`` is the remaining wall time from the snapshot's ``taken_at_s`` for a running job
    and the whole run for a pending one (seconds, log-normal band). ``priority``: higher starts
    first (Slurm's job priority, Kueue's workload priority). ``pool`` names the fleet pool
    explicitly; otherwise the job's partition (or Kueue flavor) or GPU type picks it. A job
    of no GPUs (``num_gpus`` 0) that holds ``num_nodes`` nodes of a GPU partition (a CPU-only
    job) holds them whole in a review that places jobs on nodes. ``draw_group``: jobs of one
    non-empty group (the same program on the same hardware) draw their runtimes at one
    quantile of their bands in each sample of the queue forecast
    (``planner.capacity.runtime.share_draws``); empty: the job's own draw.
    """

    state: JobState
    runtime: RuntimeBand
    priority: float = 0.0
    team: str = ""
    deadline_s: float | None = None
    checkpoint_interval_s: float = DEFAULT_CHECKPOINT_INTERVAL_S
    pool: str | None = None
    draw_group: str = ""

    def __post_init__(self) -> None:
        if not self.state.status.is_active:
            raise SpecError("status", f"must be running or pending, got {self.state.status}")
        if self.state.num_gpus < 1 and self.state.num_nodes < 1:
            raise SpecError(
                "num_gpus",
                f"must be >= 1 (GPUs allocated or requested), got {self.state.num_gpus}; a job "
                "without GPUs that holds nodes gives num_nodes",
            )

    @property
    def display_name(self) -> str:
        """``"<job id> (<name>)"``, or the id alone: the job's name in reviews."""
        return f"{self.state.job_id} ({self.state.name})" if self.state.name else self.state.job_id

    @property
    def running(self) -> bool:
        """True when the job holds its GPUs (running, completing or suspended)."""
        return self.state.status in _RUNNING


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSnapshot:
    """The active jobs at ``taken_at_s`` (epoch seconds)."""

    taken_at_s: float
    jobs: tuple[QueuedJob, ...] = ()


_STATE_FIELDS = tuple(f.name for f in dataclasses.fields(JobState))
_EXTRA_FIELDS = ("runtime_s", "priority", "team", "deadline", "checkpoint_interval_s", "pool")

_T = TypeVar("_T")
_D = TypeVar("_D")


def _text(node: Located) -> str:
    value = node.value
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise node.error(f"must be text, got {value!r}")
    return str(value)


def _count(node: Located) -> int:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise node.error(f"must be a non-negative integer, got {value!r}")
    return value


def _seconds(node: Located) -> float:
    return read_number(node, positive=False)


def _flag(node: Located) -> bool:
    if not isinstance(node.value, bool):
        raise node.error(f"must be true or false, got {node.value!r}")
    return node.value


def _status(node: Located) -> JobStatus:
    try:
        return JobStatus(str(node.value).lower())
    except ValueError:
        raise node.error(f"must be one of {', '.join(JobStatus)}, got {node.value!r}") from None


def _node_names(node: Located) -> tuple[str, ...]:
    value = node.value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise node.error("must be a list of node names")
    return tuple(str(v) for v in value)


def _field(node: Located, key: str, read: Callable[[Located], _T], default: _D) -> _T | _D:
    """The child ``key`` of ``node`` as ``read`` reads it, ``default`` when absent or null."""
    child = node.get(key)
    return default if child is None else read(child)


def _job_state(node: Located) -> JobState:
    """The ``JobState`` fields of a job entry (the scheduler defaults to ``slurm``)."""
    return JobState(
        scheduler=_field(node, "scheduler", _text, "slurm"),
        cluster=_field(node, "cluster", _text, ""),
        job_id=_text(require(node, "job_id", "the scheduler's job id")),
        name=_field(node, "name", _text, ""),
        user=_field(node, "user", _text, ""),
        partition=_field(node, "partition", _text, ""),
        account=_field(node, "account", _text, ""),
        status=_status(require(node, "status", "running or pending")),
        state_reason=_field(node, "state_reason", _text, ""),
        node_list=_field(node, "node_list", _node_names, ()),
        num_nodes=_field(node, "num_nodes", _count, 0),
        num_gpus=_field(node, "num_gpus", _count, 0),
        gpus_allocated=_field(node, "gpus_allocated", _flag, False),
        gpu_type=_field(node, "gpu_type", _text, None),
        submit_time_s=_field(node, "submit_time_s", _seconds, None),
        start_time_s=_field(node, "start_time_s", _seconds, None),
        end_time_s=_field(node, "end_time_s", _seconds, None),
        expected_start_time_s=_field(node, "expected_start_time_s", _seconds, None),
        time_limit_s=_field(node, "time_limit_s", _seconds, None),
        stdout_path=_field(node, "stdout_path", _text, None),
        work_dir=_field(node, "work_dir", _text, None),
        command=_field(node, "command", _text, None),
        batch_script=_field(node, "batch_script", _text, None),
        comment=_field(node, "comment", _text, ""),
        namespace=_field(node, "namespace", _text, ""),
        queue_name=_field(node, "queue_name", _text, ""),
        queue_position=_field(node, "queue_position", _count, None),
        progress_ratio=_field(node, "progress_ratio", _seconds, None),
        reported_remaining_s=_field(node, "reported_remaining_s", _seconds, None),
        progress_updated_s=_field(node, "progress_updated_s", _seconds, None),
        launch_manifest=_field(node, "launch_manifest", _text, None),
    )


def _band(node: Located) -> RuntimeBand:
    check_keys(node, ("p10_s", "p50_s", "p90_s"))
    p50 = read_number(require(node, "p50_s", "the median runtime in seconds"))
    p10 = optional(node, "p10_s")
    p90 = optional(node, "p90_s")
    try:
        return RuntimeBand(
            p10_s=read_number(p10) if p10 else p50,
            p50_s=p50,
            p90_s=read_number(p90) if p90 else p50,
        )
    except SpecError as exc:
        raise node.error(exc.message, exc.field) from None


def _parse_job(node: Located) -> QueuedJob | None:
    check_keys(node, (*_STATE_FIELDS, *_EXTRA_FIELDS))
    state = _job_state(node)
    status_node = require(node, "status", "running or pending")
    if not state.status.is_active:
        return None  # ended jobs take no part in the forecast
    runtime = _band(require(node, "runtime_s", "the predicted runtime band {p10_s, p50_s, p90_s}"))
    priority, team = optional(node, "priority"), optional(node, "team")
    deadline, ckpt, pool = (
        optional(node, "deadline"),
        optional(node, "checkpoint_interval_s"),
        optional(node, "pool"),
    )
    try:
        return QueuedJob(
            state=state,
            runtime=runtime,
            priority=read_number(priority, positive=False) if priority else 0.0,
            team=str(team.value) if team else (state.account or state.user or "default"),
            deadline_s=read_timestamp_s(deadline) if deadline else None,
            checkpoint_interval_s=read_number(ckpt) if ckpt else DEFAULT_CHECKPOINT_INTERVAL_S,
            pool=str(pool.value) if pool else None,
        )
    except SpecError as exc:
        target = status_node if exc.field == "status" else node
        raise target.error(exc.message, None if exc.field == "status" else exc.field) from None


def parse_snapshot(root: Located) -> QueueSnapshot:
    """A ``QueueSnapshot`` from a jobs document ``{"taken_at": ..., "jobs": [...]}``; jobs
    that already ended are dropped. Raises ``DocumentError`` with file, line and field."""
    check_keys(root, ("taken_at", "jobs"))
    taken_at = read_timestamp_s(require(root, "taken_at", "when the snapshot was taken"))
    jobs = []
    seen: set[tuple[str, str, str]] = set()
    for item in require(root, "jobs", "the running and pending jobs").items():
        job = _parse_job(item)
        if job is None:
            continue
        key = (job.state.scheduler, job.state.cluster, job.state.job_id)
        if key in seen:
            raise item.error(f"duplicate job {job.state.job_id!r}; list each job once", "job_id")
        seen.add(key)
        jobs.append(job)
    return QueueSnapshot(taken_at_s=taken_at, jobs=tuple(jobs))


def read_snapshot(text: str, source: str) -> QueueSnapshot:
    """Parse the text of a jobs snapshot file (JSON or YAML) named ``source``."""
    return parse_snapshot(load_document(text, source))


def snapshot_document(snapshot: QueueSnapshot) -> dict[str, object]:
    """The jobs-snapshot document of ``snapshot`` (what ``planner review --jobs`` reads back:
    ``{"taken_at": epoch s, "jobs": [...]}``, each job its non-empty ``JobState`` fields plus
    ``runtime_s`` and the planner's fields)."""
    jobs: list[dict[str, object]] = []
    for job in snapshot.jobs:
        entry: dict[str, object] = {}
        for name in _STATE_FIELDS:
            value = getattr(job.state, name)
            if value is None or value in ("", ()):
                continue
            entry[name] = (
                list(value)
                if isinstance(value, tuple)
                else str(value)
                if name == "status"
                else value
            )
        entry["runtime_s"] = {
            "p10_s": job.runtime.p10_s,
            "p50_s": job.runtime.p50_s,
            "p90_s": job.runtime.p90_s,
        }
        entry["priority"] = job.priority
        if job.team:
            entry["team"] = job.team
        if job.deadline_s is not None:
            entry["deadline"] = job.deadline_s
        entry["checkpoint_interval_s"] = job.checkpoint_interval_s
        if job.pool is not None:
            entry["pool"] = job.pool
        jobs.append(entry)
    return {"taken_at": snapshot.taken_at_s, "jobs": jobs}
