"""GPU telemetry of running jobs (dcgm-exporter series through Prometheus): GPU utilisation,
tensor-core and SM activity, memory used; kept on the job for ``/v1/jobs/{id}`` and
``/metrics``. A failing metrics system keeps the last reading and is retried next cycle."""

from __future__ import annotations

import dataclasses
import logging

from planner.errors import PlannerError
from planner.ports import GpuTelemetry
from planner.service.models import JobRow
from planner.specs.job import JobState, JobStatus

log = logging.getLogger(__name__)


def read_gpus(gpus: GpuTelemetry | None, row: JobRow, job: JobState, *, now_s: float) -> None:
    """Refresh ``row.gpus`` for a running job; clear it once the job is no longer running."""
    if gpus is None:
        return
    if job.status != JobStatus.RUNNING:
        row.gpus = None
        return
    try:
        usage = gpus.read(job, now_s=now_s)
    except PlannerError as exc:
        log.warning("job %s: GPU telemetry not read: %s", row.job_id, exc)
        return
    row.gpus = None if usage is None else dataclasses.asdict(usage)
