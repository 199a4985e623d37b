"""Prometheus adapter: the HTTP API client, dcgm-exporter GPU telemetry joined to jobs, and the
training-step metrics jobs export (``job_exporter``, a one-file helper for training scripts).

* :class:`PrometheusClient` — ``query``/``query_range`` with timeouts; failures become
  ``SourceTemporaryError`` (retry) or ``SourcePermanentError`` (bad PromQL, auth, wrong URL).
* :class:`DcgmTelemetry` — per-GPU snapshots (SM/tensor activity, utilisation, memory, PCIe
  and NVLink bytes) of a job's pods or of a Slurm job, across dcgm-exporter label spellings;
  :class:`DcgmJobTelemetry` summarises them per job for the service.
* :class:`TrainingTelemetry` — ``RankStepRecord`` per rank and interval, ``ProgressRecord``.
"""

from adapters.prometheus.client import PrometheusClient, Sample, Series
from adapters.prometheus.dcgm import (
    DCGM_FIELDS,
    DcgmJobTelemetry,
    DcgmLabels,
    DcgmTelemetry,
    GpuSnapshot,
)
from adapters.prometheus.jobs import PrometheusJobTelemetry
from adapters.prometheus.training import JobSelector, TrainingTelemetry

__all__ = [
    "DCGM_FIELDS",
    "DcgmJobTelemetry",
    "DcgmLabels",
    "DcgmTelemetry",
    "GpuSnapshot",
    "JobSelector",
    "PrometheusClient",
    "PrometheusJobTelemetry",
    "Sample",
    "Series",
    "TrainingTelemetry",
]
