"""Stragglers: what-if slowdown, attribution and diagnosis from per-rank traces; online
detection over live per-rank times; impact on the ETA (pure core, no I/O).

* ``analyse(trace)`` -> ``StragglerReport`` (``planner.stragglers.whatif``; Lin et al. OSDI '25).
* ``StragglerDetector`` (``planner.stragglers.online``): incremental, JSON-serialisable.
* ``assess_impact(report, remaining_time_s)`` -> ``StragglerImpact``.
* ``LiveStragglers`` (``planner.stragglers.live``): a running job's per-rank timings -> flags,
  what-if slowdown and impact.
"""

from planner.stragglers.graph import JobGraph, build_graph
from planner.stragglers.impact import StragglerImpact, assess_impact
from planner.stragglers.live import LiveStragglerReport, LiveStragglers
from planner.stragglers.online import RankFlag, StragglerDetector, compute_time_series
from planner.stragglers.whatif import Diagnosis, StragglerReport, WorkerSlowdown, analyse

__all__ = [
    "Diagnosis",
    "JobGraph",
    "LiveStragglerReport",
    "LiveStragglers",
    "RankFlag",
    "StragglerDetector",
    "StragglerImpact",
    "StragglerReport",
    "WorkerSlowdown",
    "analyse",
    "assess_impact",
    "build_graph",
    "compute_time_series",
]
