"""Protocols through which the service reaches the outside world; adapters implement them.

The dependency points one way: ``adapters`` import these and ``planner.specs``; the core never
imports an adapter. Only the service's composition root (``planner.service.main``) wires them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from planner.specs.job import (
    ClusterSnapshot,
    JobState,
    ProgressRecord,
    RankStepRecord,
    TailCursor,
)
from planner.specs.trace import OpTrace


class SchedulerSource(Protocol):
    """A scheduler the planner watches (Slurm now; Kubernetes later)."""

    @property
    def scheduler(self) -> str:
        """Short scheduler name used as the ``scheduler`` label, e.g. ``"slurm"``."""
        ...

    def snapshot(self) -> ClusterSnapshot:
        """Read jobs and nodes now.

        Raises ``SourceTemporaryError`` (timeout, daemon down: retry later) or
        ``SourcePermanentError`` (command missing, unsupported output: fix the configuration).
        """
        ...

    def read_text_file(
        self, path: str, max_bytes: int, *, job: JobState | None = None, head: bool = False
    ) -> str:
        """Read a file ``job`` refers to (a scenario, a config its launch names, its log), as
        that job's user may see it (under the source's allowed directories; without ``job`` only
        what any user may read); raises ``SourceError`` (never with the file's content in the
        message). ``head``: a longer file gives its first ``max_bytes`` bytes (undecodable bytes
        replaced) instead of an error."""
        ...


class ProgressReader(Protocol):
    """Incremental reader of training progress from a job's log file."""

    def read(
        self, cursor: TailCursor, *, job: JobState | None = None, final: bool = False
    ) -> tuple[list[ProgressRecord | RankStepRecord], TailCursor]:
        """Parse the lines appended since ``cursor``; returns the records and the new cursor.

        Records are job progress (``ProgressRecord``) or per-rank timings (``RankStepRecord``).
        ``job``: the job whose log it is; the file is then read as that job's user may see it,
        under the same rules as its other files (``SchedulerSource.read_text_file``). Without
        ``job`` the caller vouches for the path. ``final``: the log is complete (its job
        ended): a read that reaches its end also gives its unterminated last line and the
        records held for lines that will not come, as a whole-log read does, also when the
        file did not change; the cursor returned then holds none (a second final read gives
        nothing).

        A missing file returns no records and the cursor unchanged; a rotated or truncated file
        is read from its start. Garbage lines are skipped. Raises ``SourceError`` when the file
        is refused or cannot be read (never for, nor with, its content).
        """
        ...

    def unchanged(self, cursors: Sequence[TailCursor]) -> set[str]:
        """The paths among ``cursors`` whose file certainly did not change since its cursor
        (``read`` would read nothing and return the cursor as it is), told by a cheap look at
        all of them at once that reads nothing; any other path is read with ``read``."""
        ...


class TraceSource(Protocol):
    """Per-rank operation traces named by jobs (``planner:trace=PATH planner:trace-meta=PATH``)."""

    def fingerprint(
        self, trace_path: str, meta_path: str, *, job: JobState | None = None
    ) -> str | None:
        """A value that changes when either file changes; None when one is missing. ``job``:
        the job naming them (its files are checked as its user may see them)."""
        ...

    def read(self, trace_path: str, meta_path: str, *, job: JobState | None = None) -> OpTrace:
        """The trace; raises ``SpecError`` (bad content) or ``SourceError`` (cannot read, or
        ``job``'s user may not read it). Without ``job`` the caller vouches for the paths."""
        ...


class JobTelemetry(Protocol):
    """Training progress and per-rank timings of a job from a metrics system (Prometheus)."""

    def read(
        self, job: JobState, *, since_s: float, now_s: float
    ) -> list[ProgressRecord | RankStepRecord]:
        """Records observed in ``(since_s, now_s]``, oldest first; ``[]`` when the job exports
        nothing. Raises ``SourceError`` when the metrics system fails."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class JobGpuUsage:
    """GPU telemetry of one job (NVIDIA DCGM fields through dcgm-exporter), averaged over
    ``window_s`` seconds ending at ``at_s`` (epoch s), over the ``num_gpus`` GPUs that reported.

    ``gpu_util_ratio``: mean ``DCGM_FI_DEV_GPU_UTIL`` (fraction of time a kernel ran, 0..1);
    ``tensor_active_ratio``: mean ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` (fraction of cycles the
    tensor cores were busy, 0..1); ``sm_active_ratio``: mean ``DCGM_FI_PROF_SM_ACTIVE``;
    ``memory_used_bytes``: the most framebuffer memory any one GPU used (``DCGM_FI_DEV_FB_USED``),
    to compare with the predicted peak memory per GPU; ``least_active_gpu``: ``host/gpu`` of the
    GPU with the lowest activity (SM activity, else utilisation) and ``least_active_ratio`` its
    value (a straggler suspect when far below the mean). Fields the site does not export are None.
    """

    num_gpus: int
    at_s: float
    window_s: float
    gpu_util_ratio: float | None = None
    tensor_active_ratio: float | None = None
    sm_active_ratio: float | None = None
    memory_used_bytes: float | None = None
    least_active_gpu: str | None = None
    least_active_ratio: float | None = None


class GpuTelemetry(Protocol):
    """Per-job GPU telemetry from a metrics system (dcgm-exporter series in Prometheus)."""

    def read(self, job: JobState, *, now_s: float) -> JobGpuUsage | None:
        """The job's GPU usage over the window ending at ``now_s``; None when no GPU of the job
        is exported. Raises ``SourceError`` when the metrics system fails."""
        ...
