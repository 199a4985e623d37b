"""Stragglers of a running job: the live tracker fed with per-rank timings, and the what-if
analysis of a trace the job names (``planner:trace=PATH planner:trace-meta=PATH``)."""

from __future__ import annotations

import dataclasses
import logging

from planner.errors import PlannerError
from planner.ports import TraceSource
from planner.service.describe import trace_paths_from_comment
from planner.service.loops.incremental import eta_remaining_now
from planner.service.models import JobRow
from planner.service.stored_json import fields, number
from planner.specs.job import JobState, JobStatus, RankStepRecord
from planner.stragglers import analyse, assess_impact
from planner.stragglers.live import LiveStragglers

log = logging.getLogger(__name__)


def remaining_s(row: JobRow, now_s: float | None = None) -> float | None:
    """The job's p50 remaining time from its ETA (a running job's at ``now_s`` from its
    completion, when given), None when inactive or unknown."""
    if not row.active:
        return None
    value = fields((row.eta or {}).get("remaining_s")).get("p50")
    if now_s is not None and row.status != JobStatus.PENDING.value:
        value = (eta_remaining_now(row.eta, now_s) or {}).get("p50", value)
    return float(value) if isinstance(value, int | float) else None


def update_stragglers(
    row: JobRow, records: list[RankStepRecord], now_s: float | None = None
) -> None:
    """Feed per-rank timings to the job's live straggler tracker; refresh its report (hours
    lost over the remaining time at ``now_s``)."""
    stored = fields((row.stragglers or {}).get("state"))
    try:
        tracker = LiveStragglers.from_json(stored) if stored else None
        if records and (tracker is None or tracker.world_size != records[-1].world_size):
            tracker = LiveStragglers.new(records[-1].world_size)  # new or resized job
        if tracker is None:
            return
        tracker.add(records)
    except PlannerError as exc:
        log.warning("job %s: per-rank timings not usable: %s", row.job_id, exc)
        return
    report = tracker.report(remaining_s=remaining_s(row, now_s))
    row.stragglers = {
        **(row.stragglers or {}),
        "state": tracker.to_json(),
        "report": None if report is None else report.to_dict(),
    }


def analyse_trace(
    traces: TraceSource | None,
    row: JobRow,
    job: JobState,
    *,
    now_s: float,
    interval_s: float,
) -> None:
    """What-if analysis of the trace the job names, when it changed and at most once per
    ``interval_s``; the report (or the error) goes into ``row.stragglers["trace"]``."""
    paths = trace_paths_from_comment(job)
    if paths is None or traces is None:
        return
    stored = fields((row.stragglers or {}).get("trace"))
    fingerprint = traces.fingerprint(*paths, job=job)
    if fingerprint is None or fingerprint == stored.get("fingerprint"):
        return
    last = number(stored.get("analysed_at_s"))
    if last is not None and now_s - last < interval_s:
        return
    doc: dict[str, object] = {
        "fingerprint": fingerprint,
        "analysed_at_s": now_s,
        "trace_path": paths[0],
        "meta_path": paths[1],
    }
    try:
        report = analyse(traces.read(*paths, job=job))
    except PlannerError as exc:
        log.warning("job %s: trace %s not analysed: %s", row.job_id, paths[0], exc)
        doc["error"] = str(exc)
    else:
        doc["report"] = report.to_dict()
        remaining = remaining_s(row, now_s)
        if remaining is not None:
            doc["impact"] = dataclasses.asdict(assess_impact(report, remaining))
    row.stragglers = {**(row.stragglers or {}), "trace": doc}
