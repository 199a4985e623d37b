"""The service's loops as plain functions of their dependencies and the time.

``cycle``: one ingest cycle over every source (``run_cycle``) and the per-process
``IngestLoop``; ``jobs``: merging a snapshot's jobs; ``progress``: logs, exported metrics and
reported progress as step samples; ``eta``, ``stragglers``, ``calibration``, ``gpus``: what is
computed per job; ``publish``: what the leader writes back to the schedulers after a cycle
(Kueue AdmissionCheck, hint annotations, Slurm hints). None of them runs SQL: they use the
``Store`` port (``planner.service.store``).
"""

from planner.service.loops.context import IngestDeps, IngestSettings, OnlineCache, source_name
from planner.service.loops.cycle import CycleReport, IngestLoop, ingest_source, run_cycle

__all__ = [
    "CycleReport",
    "IngestDeps",
    "IngestLoop",
    "IngestSettings",
    "OnlineCache",
    "ingest_source",
    "run_cycle",
    "source_name",
]
