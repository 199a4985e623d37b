"""Build the planner's Grafana dashboards with Grafana's own typed builder (grafana-foundation-sdk).

``python deploy/grafana/build.py`` rewrites the committed ``*.json`` next to this file;
``--check`` exits 1 when they differ from what this script builds (run by the tests).
``layout/*.svg`` are layout sketches drawn from the panels' gridPos (not screenshots: no
Grafana server can run on the CI machines). The JSON is
type-checked against ``@grafana/schema`` by ``check.sh`` and every panel's PromQL runs against a
real Prometheus scraping a real planner in ``tests/deploy/test_dashboards.py``.

The panels, variables and links are the SDK's builders (``grafana_foundation_sdk.builders``),
so a misspelt option or a wrong enum value fails here rather than in Grafana; this file keeps
only the planner's PromQL and layout. The SDK is a dev dependency: only this script imports it,
to write the committed JSON that Grafana provisions.

Conventions: every panel and target uses the ``${datasource}`` variable; job series are first
aggregated by ``scheduler, cluster, job_id`` (HA replicas export the same series); the
``cluster`` variable's "All" value is ``.*``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from html import escape
from pathlib import Path
from typing import Any, TypeVar

from grafana_foundation_sdk.builders import (
    bargauge,
    common,
    dashboard,
    prometheus,
    stat,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import text as text_panel
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_models
from grafana_foundation_sdk.models import dashboard as models
from grafana_foundation_sdk.models import prometheus as prometheus_models
from grafana_foundation_sdk.models import text as text_models

HERE = Path(__file__).resolve().parent
DS = models.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAG = "llm-capacity-planner"
JOB = "scheduler, cluster, job_id"
C = 'cluster=~"$cluster"'
ONE = f'{C}, job_id="$job_id"'

Grid = tuple[int, int, int, int]
#: The SDK's panel builders (one class per panel plugin, each with the common panel options).
P = TypeVar("P", stat.Panel, timeseries.Panel, table.Panel, bargauge.Panel, text_panel.Panel)
Panel = stat.Panel | timeseries.Panel | table.Panel | bargauge.Panel | text_panel.Panel
#: A row header: the panels below it (up to the next row) belong to it.
Row = dashboard.Row


def running(expr: str) -> str:
    return f'{expr} and on ({JOB}) planner_job_info{{status="running"}}'


def pending(expr: str) -> str:
    return f'{expr} and on ({JOB}) planner_job_info{{status="pending"}}'


def by_job(metric: str, selector: str = C) -> str:
    return f"max by ({JOB}) ({metric}{{{selector}}})"


def counted(metric: str, status: str = "pending") -> str:
    """A per-cluster count over every job of a status (``planner_jobs``,
    ``planner_jobs_gpus``): per-job series of pending jobs cover only those with a prediction,
    at most ``metrics.max_pending_jobs`` of them."""
    return f'max by (scheduler, cluster) ({metric}{{{C}, status="{status}"}})'


def queued(metric: str) -> str:
    return counted(metric, "pending")


def target(
    expr: str, legend: str = "", ref: str = "A", *, table: bool = False
) -> prometheus.Dataquery:
    """One PromQL target on the ``${datasource}`` variable; ``table``: an instant query whose
    result Grafana shows as a table."""
    t = prometheus.Dataquery().datasource(DS).ref_id(ref).expr(expr).legend_format(legend)
    if table:
        t = t.format(prometheus_models.PromQueryFormat.TABLE).instant()
    return t


def _place(
    p: P,
    title: str,
    grid: Grid,
    targets: list[prometheus.Dataquery],
    *,
    unit: str = "short",
    description: str = "",
) -> P:
    """Title, position ``(x, y, w, h)`` in grid units, data source, targets and unit: what
    every panel here sets."""
    x, y, w, h = grid
    p = (
        p.title(title)
        .description(description)
        .grid_pos(models.GridPos(x=x, y=y, w=w, h=h))
        .datasource(DS)
        .unit(unit)
        .targets([])
    )
    for t in targets:
        p = p.with_target(t)
    return p


def _last_value() -> common.ReduceDataOptions:
    return common.ReduceDataOptions().calcs(["lastNotNull"]).values(False)


def stat_panel(
    title: str, grid: Grid, expr: str, unit: str = "short", description: str = ""
) -> stat.Panel:
    """A single value: the last value of ``expr``."""
    p = _place(stat.Panel(), title, grid, [target(expr, title)], unit=unit, description=description)
    return p.reduce_options(_last_value())


def timeseries_panel(
    title: str,
    grid: Grid,
    targets: list[prometheus.Dataquery],
    unit: str = "short",
    description: str = "",
) -> timeseries.Panel:
    return _place(timeseries.Panel(), title, grid, targets, unit=unit, description=description)


def band_panel(
    title: str,
    grid: Grid,
    exprs: tuple[str, str, str],
    unit: str = "short",
    description: str = "",
) -> timeseries.Panel:
    """The p50 as a line and the p10-p90 band as a shaded area: ``exprs`` are the p10, p50 and
    p90 queries (series ``p10``, ``p50``, ``p90``); the p90 series fills down to the p10 one
    (Grafana's fill-below-to), neither drawn as a line."""
    p10, p50, p90 = exprs
    targets = [target(p10, "p10", "A"), target(p50, "p50", "B"), target(p90, "p90", "C")]
    band = [models.DynamicConfigValue(id_val="custom.lineWidth", value=0)]
    return (
        timeseries_panel(title, grid, targets, unit=unit, description=description)
        .override_by_name(
            "p90",
            [
                *band,
                models.DynamicConfigValue(id_val="custom.fillBelowTo", value="p10"),
                models.DynamicConfigValue(id_val="custom.fillOpacity", value=25),
            ],
        )
        .override_by_name("p10", band)
    )


def table_panel(
    title: str,
    grid: Grid,
    targets: list[prometheus.Dataquery],
    description: str = "",
    units: Mapping[str, str] | None = None,
) -> table.Panel:
    """The instant ``targets`` merged into one row per series (``Value #<refId>`` columns, the
    time column hidden); ``units`` gives a column its unit."""
    p = _place(table.Panel(), title, grid, targets, description=description)
    p = p.with_transformation(models.DataTransformerConfig(id_val="merge", options={}))
    p = p.with_transformation(
        models.DataTransformerConfig(id_val="organize", options={"excludeByName": {"Time": True}})
    )
    for column, unit in (units or {}).items():
        p = p.override_by_name(column, [models.DynamicConfigValue(id_val="unit", value=unit)])
    return p


def variables(*, job: bool = False) -> list[Builder[models.VariableModel]]:
    """``datasource`` (Prometheus), ``cluster`` (multi, All = ``.*``) and, with ``job``, one
    ``job_id`` of the selected clusters."""
    out: list[Builder[models.VariableModel]] = [
        dashboard.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .hide(models.VariableHide.DONT_HIDE),
        dashboard.QueryVariable("cluster")
        .label("Cluster")
        .datasource(DS)
        .query({"query": "label_values(planner_job_info, cluster)", "refId": "cluster"})
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .include_all(True)
        .all_value(".*")
        .multi(True)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .hide(models.VariableHide.DONT_HIDE),
    ]
    if job:
        out.append(
            dashboard.QueryVariable("job_id")
            .label("Job")
            .datasource(DS)
            .query({"query": f"label_values(planner_job_info{{{C}}}, job_id)", "refId": "job_id"})
            .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .include_all(False)
            .multi(False)
            .sort(models.VariableSort.NUMERICAL_ASC)
            .hide(models.VariableHide.DONT_HIDE)
        )
    return out


def board(
    uid: str, title: str, description: str, panels: list[Panel | Row], *, job: bool = False
) -> dashboard.Dashboard:
    """A planner dashboard: tagged, linked to the others, panels numbered in order."""
    d = (
        dashboard.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags([TAG])
        .timezone("browser")
        .editable()
        .tooltip(models.DashboardCursorSync.CROSSHAIR)
        .version(1)
        .refresh("1m")
        .time("now-6h", "now")
        .fiscal_year_start_month(0)
        .live_now(False)
        .week_start("")
        .link(
            dashboard.DashboardLink("Planner dashboards")
            .type(models.DashboardLinkType.DASHBOARDS)
            .tags([TAG])
            .as_dropdown(True)
            .icon("external link")
            .include_vars(True)
            .keep_time(True)
            .target_blank(False)
            .tooltip("")
            .url("")
        )
        .variables(variables(job=job))
    )
    for i, p in enumerate(panels, start=1):
        d = d.with_row(p.id(i)) if isinstance(p, Row) else d.with_panel(p.id(i))
    return d


def row(title: str, y: int) -> Row:
    """A row header across the dashboard at grid row ``y`` (expanded)."""
    return Row(title).grid_pos(models.GridPos(x=0, y=y, w=24, h=1)).collapsed(False)


def bar_panel(
    title: str,
    grid: Grid,
    targets: list[prometheus.Dataquery],
    unit: str = "short",
    description: str = "",
) -> bargauge.Panel:
    """Horizontal bars, one per series (last value)."""
    return (
        _place(bargauge.Panel(), title, grid, targets, unit=unit, description=description)
        .orientation(common_models.VizOrientation.HORIZONTAL)
        .display_mode(common_models.BarGaugeDisplayMode.BASIC)
        .reduce_options(_last_value())
    )


def fleet() -> dashboard.Dashboard:
    eta = 'planner_job_eta_seconds{%s, quantile="%s"}'
    return board(
        "planner-fleet-eta",
        "Planner / Fleet ETA",
        "Every running job: progress, ETA band (p10-p90) and predicted completion.",
        [
            stat_panel(
                "Running jobs",
                (0, 0, 6, 4),
                f"sum({counted('planner_jobs', 'running')}) or vector(0)",
            ),
            stat_panel(
                "Pending jobs",
                (6, 0, 6, 4),
                f"sum({queued('planner_jobs')}) or vector(0)",
            ),
            stat_panel(
                "GPUs busy (running jobs)",
                (12, 0, 6, 4),
                f"sum({counted('planner_jobs_gpus', 'running')}) or vector(0)",
            ),
            stat_panel(
                "Sources not polled OK",
                (18, 0, 6, 4),
                f"count(max by (scheduler, cluster) (planner_source_up{{{C}}}) == 0) or vector(0)",
                description="Scheduler sources whose last poll failed (see PlannerIngestStale).",
            ),
            table_panel(
                "Running jobs",
                (0, 4, 24, 10),
                [
                    target(
                        f'max by ({JOB}, name, user) (planner_job_info{{{C}, status="running"}})',
                        ref="A",
                        table=True,
                    ),
                    target(running(by_job("planner_job_progress_ratio")), ref="B", table=True),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.1')})"), ref="C", table=True),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.5')})"), ref="D", table=True),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.9')})"), ref="E", table=True),
                    target(
                        running(by_job("planner_job_predicted_completion_timestamp_seconds"))
                        + " * 1000",
                        ref="F",
                        table=True,
                    ),
                    target(
                        by_job("planner_job_time_limit_timestamp_seconds") + " * 1000",
                        ref="G",
                        table=True,
                    ),
                    target(
                        running(by_job("planner_job_predicted_completion_p90_timestamp_seconds"))
                        + " * 1000",
                        ref="H",
                        table=True,
                    ),
                ],
                description="B progress, C/D/E remaining time p10/p50/p90, F predicted completion "
                "(p50), G time limit, H late completion (p90): a job whose H is past its G may "
                "not finish in time.",
                units={
                    "Value #B": "percentunit",
                    "Value #C": "dtdurations",
                    "Value #D": "dtdurations",
                    "Value #E": "dtdurations",
                    "Value #F": "dateTimeAsIso",
                    "Value #G": "dateTimeAsIso",
                    "Value #H": "dateTimeAsIso",
                },
            ),
            _place(
                bargauge.Panel(),
                "Progress",
                (0, 14, 12, 8),
                [target(running(by_job("planner_job_progress_ratio")), "{{cluster}}/{{job_id}}")],
                unit="percentunit",
            )
            .min(0)
            .max(1)
            .orientation(common_models.VizOrientation.HORIZONTAL)
            .display_mode(common_models.BarGaugeDisplayMode.GRADIENT)
            .reduce_options(_last_value()),
            timeseries_panel(
                "Remaining time (p50, band p10-p90)",
                (12, 14, 12, 8),
                [
                    target(running(f"max by ({JOB}) ({eta % (C, '0.5')})"), "{{job_id}} p50", "A"),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.1')})"), "{{job_id}} p10", "B"),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.9')})"), "{{job_id}} p90", "C"),
                ],
                unit="s",
            ),
            timeseries_panel(
                "Predicted completion slip over the last hour",
                (0, 22, 24, 8),
                [
                    target(
                        f"planner:job_completion_slip_seconds:1h{{{C}}}", "{{cluster}}/{{job_id}}"
                    ),
                ],
                unit="s",
                description="How much later the p50 completion is than the earliest "
                "predicted in the last hour (recording rule; alert PlannerJobETASlipped).",
            ),
        ],
    )


def job_detail() -> dashboard.Dashboard:
    def one(metric: str, extra: str = "") -> str:
        return f"max({metric}{{{ONE}{extra}}})"

    return board(
        "planner-job-detail",
        "Planner / Job detail",
        "One job: predicted vs observed step time, ETA band, stragglers, model error.",
        [
            stat_panel("Progress", (0, 0, 4, 4), one("planner_job_progress_ratio"), "percentunit"),
            stat_panel(
                "Remaining (p50)",
                (4, 0, 5, 4),
                one("planner_job_eta_seconds", ', quantile="0.5"'),
                "dtdurations",
            ),
            stat_panel(
                "Predicted completion",
                (9, 0, 5, 4),
                one("planner_job_predicted_completion_timestamp_seconds") + " * 1000",
                "dateTimeFromNow",
            ),
            stat_panel(
                "Time limit",
                (14, 0, 5, 4),
                one("planner_job_time_limit_timestamp_seconds") + " * 1000",
                "dateTimeFromNow",
            ),
            stat_panel("GPUs", (19, 0, 5, 4), one("planner_job_gpus")),
            timeseries_panel(
                "Step time: observed estimate vs performance model",
                (0, 4, 12, 8),
                [
                    target(one("planner_job_step_time_seconds"), "observed (p50 estimate)", "A"),
                    target(one("planner_job_predicted_step_time_seconds"), "model", "B"),
                ],
                unit="s",
            ),
            band_panel(
                "Remaining time (p50, band p10-p90)",
                (12, 4, 12, 8),
                (
                    one("planner_job_eta_seconds", ', quantile="0.1"'),
                    one("planner_job_eta_seconds", ', quantile="0.5"'),
                    one("planner_job_eta_seconds", ', quantile="0.9"'),
                ),
                unit="s",
            ),
            timeseries_panel(
                "Straggler slowdown (step time / straggler-free step time)",
                (0, 12, 12, 8),
                [target(one("planner_job_straggler_slowdown_ratio"), "slowdown")],
                unit="short",
                description="1 = no stragglers. Alert PlannerJobStraggler above 1.1 for 10 min.",
            ),
            stat_panel(
                "Hours of the remaining run lost to stragglers",
                (12, 12, 6, 8),
                one("planner_job_straggler_hours_lost"),
                "h",
            ),
            _place(text_panel.Panel(), "Straggler culprits", (18, 12, 6, 8), [])
            .mode(text_models.TextMode.MARKDOWN)
            .content(
                "The flagged ranks, their nodes and the advice are in the planner API: "
                "`GET /v1/jobs/${job_id}/stragglers`.\n\nThey are not exported as metrics yet."
            ),
            timeseries_panel(
                "Model error (model / observed step time - 1)",
                (0, 20, 12, 8),
                [target(one("planner_job_model_error_ratio"), "model error")],
                unit="percentunit",
                description="Positive: the model predicts slower steps "
                "than observed. Alert PlannerModelDrift on the median over jobs.",
            ),
            timeseries_panel(
                "Iterations completed",
                (12, 20, 12, 8),
                [target(one("planner_job_iteration"), "iteration")],
            ),
            band_panel(
                "Predicted completion (p50, band p10-p90)",
                (0, 28, 24, 8),
                (
                    one("planner_job_predicted_completion_p10_timestamp_seconds") + " * 1000",
                    one("planner_job_predicted_completion_timestamp_seconds") + " * 1000",
                    one("planner_job_predicted_completion_p90_timestamp_seconds") + " * 1000",
                ),
                unit="dateTimeAsIso",
                description="When the job will end, as predicted at each moment: the p50 and "
                "its p10-p90 band. A band that narrows as the job runs is the ETA settling; a "
                "p50 that climbs is the job slipping (alert PlannerJobETASlipped).",
            ),
        ],
        job=True,
    )


def queue() -> dashboard.Dashboard:
    pend = 'status="pending"'
    eta = f'max by ({JOB}) (planner_job_eta_seconds{{{C}, quantile="0.5"}})'
    return board(
        "planner-queue",
        "Planner / Queue",
        "Pending jobs: predicted runtime, predicted memory and whether it fits.",
        [
            stat_panel(
                "Pending jobs",
                (0, 0, 6, 4),
                f"sum({queued('planner_jobs')}) or vector(0)",
            ),
            stat_panel(
                "GPUs requested by the queue",
                (6, 0, 6, 4),
                f"sum({queued('planner_jobs_gpus')}) or vector(0)",
            ),
            stat_panel(
                "Pending jobs predicted to run out of memory",
                (12, 0, 6, 4),
                f"count({pending(by_job('planner_job_predicted_fits_in_memory') + ' == 0')})"
                " or vector(0)",
                description="Alert PlannerQueuedJobPredictedOOM.",
            ),
            stat_panel(
                "Queued GPU-hours (predicted)",
                (18, 0, 6, 4),
                f"sum({pending(by_job('planner_job_gpus'))} * on ({JOB}) {eta}) / 3600"
                " or vector(0)",
                description="Sum over pending jobs of GPUs x predicted runtime (the pending "
                "jobs with a prediction that /metrics lists: metrics.max_pending_jobs).",
            ),
            table_panel(
                "Pending jobs",
                (0, 4, 24, 10),
                [
                    target(
                        f"max by ({JOB}, name, user) (planner_job_info{{{C}, {pend}}})",
                        ref="A",
                        table=True,
                    ),
                    target(pending(by_job("planner_job_gpus")), ref="B", table=True),
                    target(pending(eta), ref="C", table=True),
                    target(
                        pending(by_job("planner_job_predicted_step_time_seconds")),
                        ref="D",
                        table=True,
                    ),
                    target(
                        pending(by_job("planner_job_predicted_memory_bytes")), ref="E", table=True
                    ),
                    target(
                        pending(by_job("planner_job_predicted_fits_in_memory")), ref="F", table=True
                    ),
                    target(
                        pending(by_job("planner_job_predicted_completion_timestamp_seconds"))
                        + " * 1000",
                        ref="G",
                        table=True,
                    ),
                    target(
                        pending(by_job("planner_job_predicted_start_timestamp_seconds"))
                        + " * 1000",
                        ref="H",
                        table=True,
                    ),
                ],
                description="B GPUs requested, C predicted runtime, D predicted step time, "
                "E predicted peak memory per GPU, F fits (1) or not (0), G predicted completion "
                "and H predicted start (p50, from the running jobs' predicted runtimes: the "
                "queue forecast; not the scheduler's estimate).",
                units={
                    "Value #C": "dtdurations",
                    "Value #D": "s",
                    "Value #E": "bytes",
                    "Value #G": "dateTimeAsIso",
                    "Value #H": "dateTimeAsIso",
                },
            ),
            timeseries_panel(
                "GPUs requested by pending jobs",
                (0, 14, 12, 8),
                [
                    target(f"sum by (cluster) ({queued('planner_jobs_gpus')})", "{{cluster}}"),
                ],
            ),
            timeseries_panel(
                "Predicted peak memory per GPU of pending jobs",
                (12, 14, 12, 8),
                [
                    target(
                        pending(by_job("planner_job_predicted_memory_bytes")),
                        "{{cluster}}/{{job_id}}",
                    )
                ],
                unit="bytes",
            ),
        ],
    )


def capacity() -> dashboard.Dashboard:
    busy = f"sum by (cluster) ({counted('planner_jobs_gpus', 'running')})"
    soon = (
        f"sum by (cluster) ({running(by_job('planner_job_gpus'))} and on ({JOB}) "
        f"({by_job('planner_job_predicted_completion_timestamp_seconds')} - time() < 86400))"
    )
    return board(
        "planner-capacity",
        "Planner / Capacity",
        "GPUs held by running jobs, requested by the queue, and freed by predicted completions.",
        [
            stat_panel(
                "GPUs busy",
                (0, 0, 6, 4),
                f"sum({counted('planner_jobs_gpus', 'running')}) or vector(0)",
            ),
            stat_panel(
                "GPUs requested by pending jobs",
                (6, 0, 6, 4),
                f"sum({queued('planner_jobs_gpus')}) or vector(0)",
            ),
            stat_panel(
                "GPUs freed within 24 h (predicted)",
                (12, 0, 6, 4),
                f"sum({soon}) or vector(0)",
                description="GPUs of running jobs whose p50 completion is within 24 h.",
            ),
            stat_panel(
                "Sources polled OK",
                (18, 0, 6, 4),
                f"sum(max by (scheduler, cluster) (planner_source_up{{{C}}}))",
            ),
            timeseries_panel(
                "GPUs busy and requested",
                (0, 4, 12, 8),
                [
                    target(busy, "{{cluster}} busy", "A"),
                    target(
                        f"sum by (cluster) ({queued('planner_jobs_gpus')})",
                        "{{cluster}} requested",
                        "B",
                    ),
                ],
            ),
            timeseries_panel(
                "GPUs freed within 24 h (predicted)",
                (12, 4, 12, 8),
                [
                    target(soon, "{{cluster}}"),
                ],
            ),
            table_panel(
                "Scheduler sources",
                (0, 12, 24, 6),
                [
                    target(
                        f"time() - max by (scheduler, cluster) "
                        f"(planner_ingest_last_success_timestamp_seconds{{{C}}})",
                        ref="A",
                        table=True,
                    ),
                    target(
                        f"max by (scheduler, cluster) (planner_source_up{{{C}}})",
                        ref="B",
                        table=True,
                    ),
                    target(
                        f"max by (scheduler, cluster) (planner_ingest_consecutive_failures{{{C}}})",
                        ref="C",
                        table=True,
                    ),
                ],
                description="A seconds since the last successful poll, B up, C failed polls "
                "since the last success.",
                units={"Value #A": "s"},
            ),
            *capacity_forecast(18),
        ],
    )


def capacity_forecast(y: int) -> list[Panel | Row]:
    """The "Capacity forecast" row: the newest scheduled capacity review (``review.schedule``):
    occupied GPUs per pool and week against capacity, deadline risk, scenarios, sizing."""
    week = 'planner_capacity_forecast_gpus{quantile="%s"}'
    return [
        row("Capacity forecast (newest scheduled review)", y),
        stat_panel(
            "Review age",
            (0, y + 1, 4, 4),
            "time() - max(planner_capacity_review_timestamp_seconds)",
            unit="s",
            description="Seconds since the newest stored capacity review was made.",
        ),
        stat_panel(
            "Expected deadline misses",
            (4, y + 1, 4, 4),
            'max(planner_capacity_expected_deadline_misses{scenario="base"})',
            description="Sum over the planned jobs' miss probabilities (base scenario).",
        ),
        stat_panel(
            "Jobs likely to miss",
            (8, y + 1, 4, 4),
            "count(max by (job) (planner_plan_deadline_miss_probability) > 0.5) or vector(0)",
            description="Jobs missing their deadline in more than half the samples.",
        ),
        bar_panel(
            "Deadline miss probability",
            (12, y + 1, 12, 8),
            [target("topk(20, max by (job) (planner_plan_deadline_miss_probability))", "{{job}}")],
            unit="percentunit",
            description="The 20 jobs most at risk of missing their deadline (base scenario).",
        ),
        bar_panel(
            "Expected misses per scenario",
            (0, y + 5, 6, 4),
            [
                target(
                    "max by (scenario) (planner_capacity_expected_deadline_misses)",
                    "{{scenario}}",
                )
            ],
        ),
        bar_panel(
            "GPUs to add to meet every deadline at p90",
            (6, y + 5, 6, 4),
            [target("max by (gpu, pool) (planner_capacity_sizing_gpus)", "{{gpu}} in {{pool}}")],
            description="The sizing search's smallest addition per GPU type (0: none needed).",
        ),
        table_panel(
            "Occupied GPUs per pool and week (forecast)",
            (0, y + 9, 24, 10),
            [
                target(f"max by (pool, week) ({week % '0.1'})", ref="A", table=True),
                target(f"max by (pool, week) ({week % '0.5'})", ref="B", table=True),
                target(f"max by (pool, week) ({week % '0.9'})", ref="C", table=True),
                target(
                    "max by (pool, week) (planner_capacity_forecast_capacity_gpus)",
                    ref="D",
                    table=True,
                ),
            ],
            description="Per pool and week (its first day, UTC) of the review: occupied GPUs "
            "A p10, B p50, C p90 (mean over the week, Monte Carlo samples), D GPUs installed.",
        ),
    ]


DASHBOARDS = {
    "planner-fleet-eta.json": fleet,
    "planner-job-detail.json": job_detail,
    "planner-queue.json": queue,
    "planner-capacity.json": capacity,
}


def sketch(d: dict[str, Any]) -> str:
    """An SVG layout sketch of a dashboard drawn from its panels' gridPos (24 columns; one
    grid row = 30 px as in Grafana). Not a screenshot: no data is drawn."""
    col, row, top = 40, 30, 50
    height = top + row * max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in d["panels"]) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{24 * col + 20}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="#f4f5f5"/>',
        f'<text x="10" y="20" font-size="16" font-weight="bold">{escape(d["title"])}</text>',
        '<text x="10" y="38" fill="#666">Layout sketch drawn from the dashboard JSON '
        "(gridPos), not a screenshot</text>",
    ]
    for p in d["panels"]:
        g = p["gridPos"]
        x, y = 10 + g["x"] * col, top + g["y"] * row
        w, h = g["w"] * col - 4, g["h"] * row - 4
        out.append(
            f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="3" fill="#fff" stroke="#c7d0d9"/>'
        )
        out.append(
            f'<text x="{x + 6}" y="{y + 16}" font-weight="bold">'
            f"{escape(p['title'][: max(8, w // 7)])}</text>"
        )
        out.append(f'<text x="{x + 6}" y="{y + 32}" fill="#888">{p["type"]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def model(build: Callable[[], dashboard.Dashboard]) -> models.Dashboard:
    """The built dashboard model.

    The SDK gives every variable the interval variable's ``auto``/``auto_min``/``auto_count``
    (``VariableModel``'s defaults); Grafana 13's schema (``@grafana/schema``, which ``check.sh``
    type-checks against) knows them on interval variables only, so they are dropped elsewhere.
    """
    d = build().build()
    for v in d.templating.list_val or []:
        if v.type_val != models.VariableType.INTERVAL:
            v.auto = v.auto_min = v.auto_count = None
    return d


def render(build: Callable[[], dashboard.Dashboard]) -> str:
    """The dashboard as the JSON Grafana provisions (the SDK's encoder, 2-space indent)."""
    return JSONEncoder(indent=2, sort_keys=False).encode(model(build)) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    (HERE / "layout").mkdir(exist_ok=True)
    for name, build in DASHBOARDS.items():
        text = render(build)
        svg = sketch(json.loads(text))
        for path, content in ((HERE / name, text), (HERE / "layout" / f"{name[:-5]}.svg", svg)):
            if "--check" in argv:
                if not path.exists() or path.read_text() != content:
                    stale.append(path.name)
            else:
                path.write_text(content)
    if stale:
        print(f"out of date (run python deploy/grafana/build.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
