"""The review's tables as rows of text, shared by the Markdown and the HTML reports.
Dates are UTC."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from planner.capacity.review import Review
from planner.capacity.stats import JobForecast, ScenarioResult

__all__ = [
    "MAX_JOB_ROWS",
    "Table",
    "comparison_table",
    "format_day",
    "format_duration",
    "format_time",
    "not_capacity_table",
    "notes",
    "percent",
    "pool_week_table",
    "queue_table",
    "risk_order",
    "risk_table",
    "sizing_table",
    "team_table",
]

MAX_JOB_ROWS = 60
"""Deadline-risk rows shown per scenario (the JSON has every job)."""

Table = tuple[list[str], list[list[str]]]
"""(header, rows)."""


def format_time(epoch_s: float | None) -> str:
    """``2025-06-01 08:00`` (UTC), or ``never`` for None."""
    if epoch_s is None:
        return "never"
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%d %H:%M")


def format_day(epoch_s: float | None) -> str:
    """``2025-06-01`` (UTC), or ``-`` for None."""
    if epoch_s is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%d")


def percent(p: float | None) -> str:
    """``42%``, or ``-`` for None."""
    return "-" if p is None else f"{100 * p:.0f}%"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def format_duration(seconds: float | None) -> str:
    """``3.2 d``, ``5.0 h`` or ``12 min``; ``never`` for None."""
    if seconds is None:
        return "never"
    if seconds >= 86400.0:
        return f"{seconds / 86400.0:.1f} d"
    if seconds >= 3600.0:
        return f"{seconds / 3600.0:.1f} h"
    return f"{seconds / 60.0:.0f} min"


def _why(job: JobForecast) -> str:
    """Why a deadline job misses, in words ("-" when it never does)."""
    if not job.miss_probability or job.miss_cause is None:
        return "-"
    if job.miss_cause == "time limit":
        limit = format_duration(job.time_limit_s) if job.time_limit_s else "its limit"
        return f"time limit ({limit} < runtime p90 {format_duration(job.runtime_p90_s)})"
    if job.miss_cause == "failure":
        return (
            f"failures ({job.failures_mean:.1f} per run, {job.lost_gpu_hours_mean:,.0f} GPU-h lost)"
        )
    queued = f"queued {format_duration(job.wait_s[1])} at p90"
    if job.preemptions_mean > 0:
        queued += (
            f"; preempted {job.preemptions_mean:.1f} times, "
            f"{job.preempted_gpu_hours_mean:,.0f} GPU-h lost"
        )
    return f"capacity ({queued})"


def risk_order(jobs: Sequence[JobForecast]) -> list[JobForecast]:
    """Deadline jobs by miss probability (highest first), then by p90 completion."""
    with_deadline = [j for j in jobs if j.deadline_s is not None]
    return sorted(
        with_deadline,
        key=lambda j: (-(j.miss_probability or 0.0), j.completion_s[2] or float("inf")),
    )


def comparison_table(review: Review) -> Table:
    """One row per scenario; a scenario that leaves out a job the base runs says so in its
    ``comparable`` cell, with the reason and the fix."""
    header = ["scenario", "change", "comparable", "deadline jobs", "expected misses"]
    header += ["missed at p90", "utilisation", "GPU-hours", "lost GPU-h", "goodput", "cost"]
    rows = [
        [
            r["scenario"],
            r["description"],
            "yes" if r["comparable"] else r["not_comparable"],
            str(r["jobs_with_deadline"]),
            f"{r['expected_deadline_misses']:.2f}",
            str(r["deadlines_missed_at_p90"]),
            percent(r["utilisation"]),
            _num(r["gpu_hours"]),
            _num(r["lost_gpu_hours"]),
            percent(r["goodput"]),
            _num(r["cost"]),
        ]
        for r in review.comparison()
    ]
    return header, rows


def sizing_table(review: Review) -> Table:
    """One row per GPU type of the sizing search: the answer in words (``add N GPUs of T by
    D``, ``0 to add``), and the deadlines this type cannot save."""
    header = ["GPU type", "pool", "answer", "deadlines it cannot save"]
    rows = [[s.gpu, s.pool, s.answer(), ", ".join(s.unfixable) or "-"] for s in review.sizing]
    return header, rows


def not_capacity_table(review: Review) -> Table:
    """The base's missed deadlines that no capacity saves, with the fix."""
    header = ["job", "not a capacity problem", "fix"]
    rows = [[n.job, n.cause, n.fix] for n in review.not_capacity]
    return header, rows


def risk_table(result: ScenarioResult) -> tuple[Table, list[float]]:
    """The jobs that cannot run (first), then the deadline jobs most at risk
    (``MAX_JOB_ROWS``), and each row's miss probability."""
    jobs = risk_order(result.jobs)[:MAX_JOB_ROWS]
    header = ["job", "team", "pool", "GPUs", "layout", "deadline", "wait p50", "wait p90"]
    header += ["done p50", "done p90", "P(miss)", "why it misses"]
    deadlines = result.excluded_deadlines or (None,) * len(result.excluded)
    rows = [
        [
            name,
            "-",
            "-",
            "-",
            "-",
            format_day(d),
            "never",
            "never",
            "never",
            "never",
            "100%" if d is not None else "-",
            f"cannot run: {reason}",
        ]
        for (name, reason), d in zip(result.excluded, deadlines, strict=True)
    ]
    risk = [1.0] * len(rows)
    for j in jobs:
        rows.append(
            [
                j.name,
                j.team,
                j.pool or "-",
                str(j.num_gpus),
                j.layout or "-",
                format_day(j.deadline_s),
                format_duration(j.wait_s[0]),
                format_duration(j.wait_s[1]),
                format_time(j.completion_s[1]),
                format_time(j.completion_s[2]),
                percent(j.miss_probability),
                _why(j),
            ]
        )
        risk.append(j.miss_probability or 0.0)
    return (header, rows), risk


def pool_week_table(result: ScenarioResult) -> Table:
    """One row per pool and week."""
    header = ["pool", "week of", "capacity GPU-h", "busy GPU-h p50", "utilisation"]
    header += ["idle GPU-h", "demand GPUs p50"]
    rows = [
        [
            p.pool,
            format_day(p.week_start_s),
            _num(p.capacity_gpu_hours),
            _num(p.busy_gpu_hours[1]),
            percent(p.utilisation),
            _num(p.idle_gpu_hours),
            _num(p.demand_gpus[1]),
        ]
        for p in result.pool_weeks
    ]
    return header, rows


def team_table(result: ScenarioResult) -> Table:
    """One row per team: GPU-hours, lost GPU-hours, chargeback cost, quota use; and, when
    Kueue preempted any of its jobs' runs, preemptions per sample and the GPU-hours they
    cost."""
    header = ["team", "GPU-hours (mean)", "p10", "p90", "lost GPU-h", "cost (mean)"]
    header += ["quota use"]
    preempted = any(t.preemptions_mean > 0 for t in result.teams)
    if preempted:
        header += ["preemptions (mean)", "preempted GPU-h"]
    rows = []
    for t in result.teams:
        row = [
            t.team,
            _num(t.gpu_hours_mean),
            _num(t.gpu_hours[0]),
            _num(t.gpu_hours[1]),
            _num(t.lost_gpu_hours_mean),
            _num(t.cost_mean),
            percent(t.quota_use),
        ]
        if preempted:
            row += [f"{t.preemptions_mean:.1f}", _num(t.preempted_gpu_hours_mean)]
        rows.append(row)
    return header, rows


def queue_table(result: ScenarioResult) -> Table:
    """One row per Kueue ClusterQueue: cohort, nominal and used GPU-hours, use."""
    header = ["ClusterQueue", "cohort", "nominal GPU-h", "used GPU-h (mean)", "use"]
    rows = [
        [
            q.queue,
            q.cohort or "-",
            _num(q.nominal_gpu_hours),
            _num(q.used_gpu_hours_mean),
            percent(q.use),
        ]
        for q in result.queues
    ]
    return header, rows


def notes(result: ScenarioResult) -> list[str]:
    """Excluded jobs, layout choices and warnings, one line each."""
    lines = [f"{name} cannot run: {reason}" for name, reason in result.excluded]
    lines += [f"{j.name}: {j.note}" for j in result.jobs if j.note]
    return lines + list(result.warnings)
