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
    "format_time",
    "notes",
    "percent",
    "pool_week_table",
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


def risk_order(jobs: Sequence[JobForecast]) -> list[JobForecast]:
    """Deadline jobs by miss probability (highest first), then by p90 completion."""
    with_deadline = [j for j in jobs if j.deadline_s is not None]
    return sorted(
        with_deadline,
        key=lambda j: (-(j.miss_probability or 0.0), j.completion_s[2] or float("inf")),
    )


def comparison_table(review: Review) -> Table:
    """One row per scenario."""
    header = ["scenario", "change", "deadline jobs", "expected misses", "missed at p90"]
    header += ["utilisation", "GPU-hours", "cost"]
    rows = [
        [
            r["scenario"],
            r["description"],
            str(r["jobs_with_deadline"]),
            f"{r['expected_deadline_misses']:.2f}",
            str(r["deadlines_missed_at_p90"]),
            percent(r["utilisation"]),
            _num(r["gpu_hours"]),
            _num(r["cost"]),
        ]
        for r in review.comparison()
    ]
    return header, rows


def sizing_table(review: Review) -> Table:
    """One row per GPU type of the sizing search."""
    header = ["GPU type", "pool", "GPUs to add", "latest arrival", "deadlines it cannot save"]
    rows = [
        [
            s.gpu,
            s.pool,
            "not enough" if s.gpus_added is None else str(s.gpus_added),
            format_day(s.latest_date_s) if s.gpus_added else "-",
            ", ".join(s.unfixable) or "-",
        ]
        for s in review.sizing
    ]
    return header, rows


def risk_table(result: ScenarioResult) -> tuple[Table, list[JobForecast]]:
    """The deadline jobs most at risk (``MAX_JOB_ROWS``), and the jobs of the rows."""
    jobs = risk_order(result.jobs)[:MAX_JOB_ROWS]
    header = ["job", "team", "pool", "GPUs", "deadline", "start p50", "done p50", "done p90"]
    header += ["P(miss)", "P(time limit)"]
    rows = [
        [
            j.name,
            j.team,
            j.pool or "-",
            str(j.num_gpus),
            format_day(j.deadline_s),
            format_time(j.start_s[1]),
            format_time(j.completion_s[1]),
            format_time(j.completion_s[2]),
            percent(j.miss_probability),
            percent(j.timeout_probability),
        ]
        for j in jobs
    ]
    return (header, rows), jobs


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
    """One row per team."""
    header = ["team", "GPU-hours (mean)", "p10", "p90", "cost (mean)"]
    rows = [
        [
            t.team,
            _num(t.gpu_hours_mean),
            _num(t.gpu_hours[0]),
            _num(t.gpu_hours[1]),
            _num(t.cost_mean),
        ]
        for t in result.teams
    ]
    return header, rows


def notes(result: ScenarioResult) -> list[str]:
    """Excluded jobs and warnings, one line each."""
    lines = [f"{name} cannot run: {reason}" for name, reason in result.excluded]
    return lines + list(result.warnings)
