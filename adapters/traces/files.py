"""Trace files that jobs name in their comment (``planner:trace=PATH planner:trace-meta=PATH``).

``TraceFiles`` implements :class:`planner.ports.TraceSource`: a cheap fingerprint (size and
modification time, to re-analyse only when a trace grew) and the read itself. Paths a job names
(``job=`` given) are read under the job file rules of :mod:`adapters.files`: under the job's
working directory (Slurm) or ``allowed_file_roots``, as the job's user would see them, regular
files only, bounded in size and time. Without ``job`` the caller vouches for the paths (a trace
uploaded to the service, written by the planner itself): only the bounds apply.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from adapters.files import DEFAULT_TIMEOUT_S, job_file_access, read_job_file, stat_job_file
from adapters.traces.reader import (
    MAX_META_BYTES,
    MAX_TRACE_BYTES,
    file_bytes,
    read_layout,
    read_op_trace,
    trace_limits,
)
from planner.errors import SourcePermanentError, SpecError
from planner.specs.job import JobState
from planner.specs.trace import OpTrace

_SOURCE = "planner:trace"
REFUSED_FINGERPRINT = "refused"
"""The fingerprint of a trace a rule refuses: stable, so that the refusal is reported once."""


class TraceFiles:
    """Reads per-rank operation traces from the local (shared) file system.

    Parameters:
        allowed_file_roots: per scheduler name, the directories under which its jobs' traces
            may be read besides a Slurm job's working directory: ``{"slurm":
            slurm.allowed_file_roots, "kubernetes": kubernetes.allowed_file_roots}`` (the
            settings); default none (a Kubernetes job's traces, like its scenarios, only under
            its roots and only world-readable).
        max_trace_bytes / max_meta_bytes: size limits of the trace and of its meta file.
        timeout_s: time limit of reading one file, seconds.
        memory_budget_bytes: the most memory reading and analysing one trace may add
            (``adapters.traces.reader.trace_limits``): a larger file is refused before it is
            read (its size from ``stat``), a parquet trace of more rows before it is decoded,
            a CSV trace of more rows before it is analysed; None: only the limits above.
        budget_setting: the name errors give the budget (the service's setting).
    """

    def __init__(
        self,
        *,
        allowed_file_roots: Mapping[str, Sequence[str]] | None = None,
        max_trace_bytes: int = MAX_TRACE_BYTES,
        max_meta_bytes: int = MAX_META_BYTES,
        timeout_s: float = 4 * DEFAULT_TIMEOUT_S,
        memory_budget_bytes: int | None = None,
        budget_setting: str = "the trace memory budget",
    ) -> None:
        self._allowed_file_roots = {
            scheduler: tuple(roots) for scheduler, roots in (allowed_file_roots or {}).items()
        }
        self._max_trace_bytes = max_trace_bytes
        self._max_rows: int | None = None
        if memory_budget_bytes is not None:
            budget_bytes, self._max_rows = trace_limits(memory_budget_bytes)
            self._max_trace_bytes = min(max_trace_bytes, budget_bytes)
        self._memory_budget_bytes = memory_budget_bytes
        self._budget_setting = budget_setting
        self._max_meta_bytes = max_meta_bytes
        self._timeout_s = timeout_s

    def fingerprint(
        self, trace_path: str, meta_path: str, *, job: JobState | None = None
    ) -> str | None:
        """``size:mtime`` of both files, None when either is missing; for a job's files that a
        rule refuses, :data:`REFUSED_FINGERPRINT` (``read`` then says why)."""
        parts = []
        for path in (trace_path, meta_path):
            try:
                if job is None:
                    st = os.stat(path)
                else:
                    roots, user = self._access(job)
                    st = stat_job_file(
                        _SOURCE, path, roots=roots, user=user, timeout_s=self._timeout_s
                    )
            except OSError:
                return None
            except SourcePermanentError as exc:
                if exc.message.endswith(": no such file"):
                    return None
                return REFUSED_FINGERPRINT
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        return "|".join(parts)

    def read(self, trace_path: str, meta_path: str, *, job: JobState | None = None) -> OpTrace:
        """The trace (rows with bad values skipped and counted) of the files ``job`` names.

        Raises ``SpecError`` for bad content, relative paths and (without ``job``) a missing,
        non-regular or too large file; ``SourceError`` when a job file rule refuses a file or
        it cannot be read (the message never holds file content).
        """
        if not os.path.isabs(trace_path) or not os.path.isabs(meta_path):
            raise SpecError(_SOURCE, "trace and meta paths must be absolute")
        self._check_size(trace_path, job)
        meta = self._bytes(meta_path, self._max_meta_bytes, job)
        trace = self._bytes(trace_path, self._max_trace_bytes, job)
        layout = read_layout(meta_path, data=meta)
        return read_op_trace(
            trace_path, layout, skip_bad_rows=True, data=trace, max_rows=self._max_rows
        )

    def _check_size(self, path: str, job: JobState | None) -> None:
        """Refuse a trace file larger than the memory budget allows before reading it (a
        sparse file of 500 MiB once took the planner to 1.3 GB while it was read)."""
        if self._memory_budget_bytes is None:
            return
        try:
            if job is None:
                size = os.stat(path).st_size
            else:
                roots, user = self._access(job)
                size = stat_job_file(
                    _SOURCE, path, roots=roots, user=user, timeout_s=self._timeout_s
                ).st_size
        except OSError:
            return  # the read says why (missing, not readable)
        if size > self._max_trace_bytes:
            raise SpecError(
                path,
                f"{size:,} bytes, over the {self._max_trace_bytes:,} bytes whose reading and "
                f"analysis fit {self._budget_setting} ({self._memory_budget_bytes:,} bytes); "
                "keep fewer steps in the trace (or a parquet file) or raise it",
            )

    def _access(self, job: JobState) -> tuple[tuple[str, ...], str | None]:
        return job_file_access(job, self._allowed_file_roots.get(job.scheduler, ()))

    def _bytes(self, path: str, max_bytes: int, job: JobState | None) -> bytes:
        if job is None:
            return file_bytes(path, max_bytes)
        roots, user = self._access(job)
        return read_job_file(
            _SOURCE, path, roots=roots, user=user, max_bytes=max_bytes, timeout_s=self._timeout_s
        )
