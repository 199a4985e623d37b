"""``JobTelemetry`` over Prometheus: which series belong to a job, and reading them per cycle.

Slurm jobs are matched by the exporter's job-id label (``job_id`` by default; the job exporter
sets it from ``SLURM_JOB_ID``); Kubernetes jobs (``namespace/kind/name``) by namespace and the
pod-name prefix ``name`` that JobSet, PyTorchJob and TrainJob pods share.
"""

from __future__ import annotations

from adapters.prometheus.client import PrometheusClient
from adapters.prometheus.training import JobSelector, TrainingTelemetry
from planner.specs.job import JobState, ProgressRecord, RankStepRecord


class PrometheusJobTelemetry:
    """Implements :class:`planner.ports.JobTelemetry`; ``step_s`` is the range-query step
    (keep it at or below the scrape interval), ``max_window_s`` bounds one read."""

    def __init__(
        self,
        client: PrometheusClient,
        *,
        slurm_job_label: str = "job_id",
        step_s: float = 15.0,
        max_window_s: float = 3600.0,
    ) -> None:
        self.training = TrainingTelemetry(client)
        self.slurm_job_label = slurm_job_label
        self.step_s = step_s
        self.max_window_s = max_window_s

    def selector(self, job: JobState) -> JobSelector | None:
        """The series selector of ``job``, None for a scheduler this adapter cannot map."""
        if job.scheduler == "slurm":
            return JobSelector.slurm(job.job_id, label=self.slurm_job_label)
        if job.scheduler == "kubernetes":
            parts = job.job_id.split("/")
            if len(parts) == 3:
                return JobSelector.pods(parts[0], parts[2])
        return None

    def read(
        self, job: JobState, *, since_s: float, now_s: float
    ) -> list[ProgressRecord | RankStepRecord]:
        """Per-rank interval records since ``since_s`` and the job's progress now; raises
        ``SourceError`` when Prometheus fails."""
        selector = self.selector(job)
        if selector is None or now_s <= since_s:
            return []
        start_s = max(since_s, now_s - self.max_window_s)
        records: list[ProgressRecord | RankStepRecord] = [
            r
            for r in self.training.rank_steps(
                selector, start_s=start_s, end_s=now_s, step_s=self.step_s, align=True
            )
            if r.timestamp_s is None or r.timestamp_s > since_s
        ]
        progress = self.training.progress(selector, at_s=now_s)
        if progress is not None:
            records.append(progress)
        return records
