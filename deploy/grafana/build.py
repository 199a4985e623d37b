"""Build the planner's Grafana dashboards (Classic JSON model) from plain dicts.

``python deploy/grafana/build.py`` rewrites the committed ``*.json`` next to this file;
``--check`` exits 1 when they differ from what this script builds (run by the tests).
``layout/*.svg`` are layout sketches drawn from the panels' gridPos (not screenshots: no
Grafana server can run on the CI machines). The JSON is
type-checked against ``@grafana/schema`` by ``check.sh`` and every panel's PromQL runs against a
real Prometheus scraping a real planner in ``tests/deploy/test_dashboards.py``.

Conventions: every panel and target uses the ``${datasource}`` variable; job series are first
aggregated by ``scheduler, cluster, job_id`` (HA replicas export the same series); the
``cluster`` variable's "All" value is ``.*``.
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
JOB = "scheduler, cluster, job_id"
C = 'cluster=~"$cluster"'
ONE = f'{C}, job_id="$job_id"'


def running(expr: str) -> str:
    return f'{expr} and on ({JOB}) planner_job_info{{status="running"}}'


def pending(expr: str) -> str:
    return f'{expr} and on ({JOB}) planner_job_info{{status="pending"}}'


def by_job(metric: str, selector: str = C) -> str:
    return f"max by ({JOB}) ({metric}{{{selector}}})"


def target(expr: str, legend: str = "", ref: str = "A", *, table: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend}
    if table:
        t.update({"format": "table", "instant": True, "range": False})
    return t


def panel(
    kind: str,
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    *,
    unit: str = "short",
    description: str = "",
    options: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    x, y, w, h = grid
    p: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": description,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": options or {},
    }
    p.update(extra or {})
    return p


def stat(
    title: str,
    grid: tuple[int, int, int, int],
    expr: str,
    unit: str = "short",
    description: str = "",
) -> dict[str, Any]:
    return panel(
        "stat",
        title,
        grid,
        [target(expr, title)],
        unit=unit,
        description=description,
        options={"reduceOptions": {"calcs": ["lastNotNull"], "values": False}},
    )


def table(
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[dict[str, Any]],
    description: str = "",
    units: dict[str, str] | None = None,
) -> dict[str, Any]:
    overrides = [
        {
            "matcher": {"id": "byName", "options": name},
            "properties": [{"id": "unit", "value": unit}],
        }
        for name, unit in (units or {}).items()
    ]
    p = panel(
        "table",
        title,
        grid,
        targets,
        description=description,
        extra={
            "transformations": [
                {"id": "merge", "options": {}},
                {"id": "organize", "options": {"excludeByName": {"Time": True}}},
            ]
        },
    )
    p["fieldConfig"]["overrides"] = overrides
    return p


def variables(*, job: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "type": "datasource",
            "name": "datasource",
            "label": "Data source",
            "query": "prometheus",
            "hide": 0,
        },
        {
            "type": "query",
            "name": "cluster",
            "label": "Cluster",
            "datasource": DS,
            "query": {"query": "label_values(planner_job_info, cluster)", "refId": "cluster"},
            "refresh": 2,
            "includeAll": True,
            "allValue": ".*",
            "multi": True,
            "sort": 1,
            "hide": 0,
        },
    ]
    if job:
        out.append(
            {
                "type": "query",
                "name": "job_id",
                "label": "Job",
                "datasource": DS,
                "query": {
                    "query": f"label_values(planner_job_info{{{C}}}, job_id)",
                    "refId": "job_id",
                },
                "refresh": 2,
                "includeAll": False,
                "multi": False,
                "sort": 3,
                "hide": 0,
            }
        )
    return out


def dashboard(
    uid: str, title: str, description: str, panels: list[dict[str, Any]], *, job: bool = False
) -> dict[str, Any]:
    for i, p in enumerate(panels, start=1):
        p["id"] = i
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["llm-capacity-planner"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "title": "Planner dashboards",
                "type": "dashboards",
                "tags": ["llm-capacity-planner"],
                "asDropdown": True,
                "icon": "external link",
                "includeVars": True,
                "keepTime": True,
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            }
        ],
        "annotations": {"list": []},
        "templating": {"list": variables(job=job)},
        "panels": panels,
    }


def fleet() -> dict[str, Any]:
    eta = 'planner_job_eta_seconds{%s, quantile="%s"}'
    return dashboard(
        "planner-fleet-eta",
        "Planner / Fleet ETA",
        "Every running job: progress, ETA band (p10-p90) and predicted completion.",
        [
            stat(
                "Running jobs",
                (0, 0, 6, 4),
                "count(" + by_job("planner_job_info", f'{C}, status="running"') + ") or vector(0)",
            ),
            stat(
                "Pending jobs",
                (6, 0, 6, 4),
                "count(" + by_job("planner_job_info", f'{C}, status="pending"') + ") or vector(0)",
            ),
            stat(
                "GPUs busy (running jobs)",
                (12, 0, 6, 4),
                f"sum({running(by_job('planner_job_gpus'))}) or vector(0)",
            ),
            stat(
                "Sources not polled OK",
                (18, 0, 6, 4),
                f"count(max by (scheduler, cluster) (planner_source_up{{{C}}}) == 0) or vector(0)",
                description="Scheduler sources whose last poll failed (see PlannerIngestStale).",
            ),
            table(
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
                ],
                description="B progress, C/D/E remaining time p10/p50/p90, F predicted completion "
                "(p50), G time limit.",
                units={
                    "Value #B": "percentunit",
                    "Value #C": "dtdurations",
                    "Value #D": "dtdurations",
                    "Value #E": "dtdurations",
                    "Value #F": "dateTimeAsIso",
                    "Value #G": "dateTimeAsIso",
                },
            ),
            panel(
                "bargauge",
                "Progress",
                (0, 14, 12, 8),
                [target(running(by_job("planner_job_progress_ratio")), "{{cluster}}/{{job_id}}")],
                unit="percentunit",
                options={
                    "orientation": "horizontal",
                    "displayMode": "gradient",
                    "reduceOptions": {"calcs": ["lastNotNull"], "values": False},
                },
                extra={
                    "fieldConfig": {
                        "defaults": {"unit": "percentunit", "min": 0, "max": 1},
                        "overrides": [],
                    }
                },
            ),
            panel(
                "timeseries",
                "Remaining time (p50, band p10-p90)",
                (12, 14, 12, 8),
                [
                    target(running(f"max by ({JOB}) ({eta % (C, '0.5')})"), "{{job_id}} p50", "A"),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.1')})"), "{{job_id}} p10", "B"),
                    target(running(f"max by ({JOB}) ({eta % (C, '0.9')})"), "{{job_id}} p90", "C"),
                ],
                unit="s",
            ),
            panel(
                "timeseries",
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


def job_detail() -> dict[str, Any]:
    def one(metric: str, extra: str = "") -> str:
        return f"max({metric}{{{ONE}{extra}}})"

    return dashboard(
        "planner-job-detail",
        "Planner / Job detail",
        "One job: predicted vs observed step time, ETA band, stragglers, model error.",
        [
            stat("Progress", (0, 0, 4, 4), one("planner_job_progress_ratio"), "percentunit"),
            stat(
                "Remaining (p50)",
                (4, 0, 5, 4),
                one("planner_job_eta_seconds", ', quantile="0.5"'),
                "dtdurations",
            ),
            stat(
                "Predicted completion",
                (9, 0, 5, 4),
                one("planner_job_predicted_completion_timestamp_seconds") + " * 1000",
                "dateTimeFromNow",
            ),
            stat(
                "Time limit",
                (14, 0, 5, 4),
                one("planner_job_time_limit_timestamp_seconds") + " * 1000",
                "dateTimeFromNow",
            ),
            stat("GPUs", (19, 0, 5, 4), one("planner_job_gpus")),
            panel(
                "timeseries",
                "Step time: observed estimate vs performance model",
                (0, 4, 12, 8),
                [
                    target(one("planner_job_step_time_seconds"), "observed (p50 estimate)", "A"),
                    target(one("planner_job_predicted_step_time_seconds"), "model", "B"),
                ],
                unit="s",
            ),
            panel(
                "timeseries",
                "Remaining time band",
                (12, 4, 12, 8),
                [
                    target(one("planner_job_eta_seconds", ', quantile="0.1"'), "p10", "A"),
                    target(one("planner_job_eta_seconds", ', quantile="0.5"'), "p50", "B"),
                    target(one("planner_job_eta_seconds", ', quantile="0.9"'), "p90", "C"),
                ],
                unit="s",
            ),
            panel(
                "timeseries",
                "Straggler slowdown (step time / straggler-free step time)",
                (0, 12, 12, 8),
                [target(one("planner_job_straggler_slowdown_ratio"), "slowdown")],
                unit="short",
                description="1 = no stragglers. Alert PlannerJobStraggler above 1.1 for 10 min.",
            ),
            stat(
                "Hours of the remaining run lost to stragglers",
                (12, 12, 6, 8),
                one("planner_job_straggler_hours_lost"),
                "h",
            ),
            panel(
                "text",
                "Straggler culprits",
                (18, 12, 6, 8),
                [],
                options={
                    "mode": "markdown",
                    "content": "The flagged ranks, their nodes and the advice are in the "
                    "planner API: `GET /v1/jobs/${job_id}/stragglers`.\n\nThey are not "
                    "exported as metrics yet.",
                },
            ),
            panel(
                "timeseries",
                "Model error (model / observed step time - 1)",
                (0, 20, 12, 8),
                [target(one("planner_job_model_error_ratio"), "model error")],
                unit="percentunit",
                description="Positive: the model predicts slower steps "
                "than observed. Alert PlannerModelDrift on the median over jobs.",
            ),
            panel(
                "timeseries",
                "Iterations completed",
                (12, 20, 12, 8),
                [target(one("planner_job_iteration"), "iteration")],
            ),
        ],
        job=True,
    )


def queue() -> dict[str, Any]:
    pend = 'status="pending"'
    eta = f'max by ({JOB}) (planner_job_eta_seconds{{{C}, quantile="0.5"}})'
    return dashboard(
        "planner-queue",
        "Planner / Queue",
        "Pending jobs: predicted runtime, predicted memory and whether it fits.",
        [
            stat(
                "Pending jobs",
                (0, 0, 6, 4),
                f"count({by_job('planner_job_info', C + ', ' + pend)}) or vector(0)",
            ),
            stat(
                "GPUs requested by the queue",
                (6, 0, 6, 4),
                f"sum({pending(by_job('planner_job_gpus'))}) or vector(0)",
            ),
            stat(
                "Pending jobs predicted to run out of memory",
                (12, 0, 6, 4),
                f"count({pending(by_job('planner_job_predicted_fits_in_memory') + ' == 0')})"
                " or vector(0)",
                description="Alert PlannerQueuedJobPredictedOOM.",
            ),
            stat(
                "Queued GPU-hours (predicted)",
                (18, 0, 6, 4),
                f"sum({pending(by_job('planner_job_gpus'))} * on ({JOB}) {eta}) / 3600"
                " or vector(0)",
                description="Sum over pending jobs of GPUs x predicted runtime.",
            ),
            table(
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
                ],
                description="B GPUs requested, C predicted runtime, D predicted step time, "
                "E predicted peak memory per GPU, F fits (1) or not (0), G predicted completion "
                "(when the scheduler has a start estimate).",
                units={
                    "Value #C": "dtdurations",
                    "Value #D": "s",
                    "Value #E": "bytes",
                    "Value #G": "dateTimeAsIso",
                },
            ),
            panel(
                "timeseries",
                "GPUs requested by pending jobs",
                (0, 14, 12, 8),
                [
                    target(
                        f"sum by (cluster) ({pending(by_job('planner_job_gpus'))})", "{{cluster}}"
                    ),
                ],
            ),
            panel(
                "timeseries",
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


def capacity() -> dict[str, Any]:
    busy = f"sum by (cluster) ({running(by_job('planner_job_gpus'))})"
    soon = (
        f"sum by (cluster) ({running(by_job('planner_job_gpus'))} and on ({JOB}) "
        f"({by_job('planner_job_predicted_completion_timestamp_seconds')} - time() < 86400))"
    )
    return dashboard(
        "planner-capacity",
        "Planner / Capacity",
        "GPUs held by running jobs, requested by the queue, and freed by predicted completions.",
        [
            stat(
                "GPUs busy",
                (0, 0, 6, 4),
                f"sum({running(by_job('planner_job_gpus'))}) or vector(0)",
            ),
            stat(
                "GPUs requested by pending jobs",
                (6, 0, 6, 4),
                f"sum({pending(by_job('planner_job_gpus'))}) or vector(0)",
            ),
            stat(
                "GPUs freed within 24 h (predicted)",
                (12, 0, 6, 4),
                f"sum({soon}) or vector(0)",
                description="GPUs of running jobs whose p50 completion is within 24 h.",
            ),
            stat(
                "Sources polled OK",
                (18, 0, 6, 4),
                f"sum(max by (scheduler, cluster) (planner_source_up{{{C}}}))",
            ),
            panel(
                "timeseries",
                "GPUs busy and requested",
                (0, 4, 12, 8),
                [
                    target(busy, "{{cluster}} busy", "A"),
                    target(
                        f"sum by (cluster) ({pending(by_job('planner_job_gpus'))})",
                        "{{cluster}} requested",
                        "B",
                    ),
                ],
            ),
            panel(
                "timeseries",
                "GPUs freed within 24 h (predicted)",
                (12, 4, 12, 8),
                [
                    target(soon, "{{cluster}}"),
                ],
            ),
            table(
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
        ],
    )


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


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


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
