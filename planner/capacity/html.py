"""A review as one self-contained HTML page: charts made with plotly, its JavaScript embedded
once (no network needed to view it), tables in plain HTML.

Charts: occupied GPUs per pool over time (p10-p90 band, median, demand) against capacity; a
Gantt of the jobs most at risk (median start to median completion, p10-p90 of completion,
deadline marks); utilisation per pool and week; the scenarios side by side.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from planner.capacity.review import Review
from planner.capacity.stats import JobForecast, ScenarioResult
from planner.capacity.tables import (
    Table,
    comparison_table,
    format_day,
    format_time,
    notes,
    risk_order,
    risk_table,
    sizing_table,
    team_table,
)

__all__ = ["MAX_GANTT_JOBS", "review_html"]

MAX_GANTT_JOBS = 60
"""Jobs drawn in the Gantt chart: deadline jobs by risk first, then the longest others."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.risk-high { background: #f8d0d0; } .risk-mid { background: #fbeacc; }
.note { color: #666; font-size: 0.9em; }
"""


def _when(epoch_s: float | None) -> dt.datetime | None:
    return None if epoch_s is None else dt.datetime.fromtimestamp(epoch_s, dt.UTC)


def _occupancy(result: ScenarioResult) -> go.Figure:
    pools = result.occupancy
    fig = make_subplots(
        rows=len(pools),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[o.pool for o in pools],
        vertical_spacing=0.08,
    )
    for row, occ in enumerate(pools, start=1):
        t = [_when(float(x)) for x in occ.edges_s[:-1]]
        first = row == 1
        fig.add_trace(
            go.Scatter(
                x=t, y=occ.occupied[2], line={"width": 0}, showlegend=False, hoverinfo="skip"
            ),
            row=row,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=t,
                y=occ.occupied[0],
                fill="tonexty",
                fillcolor="rgba(31,119,180,0.25)",
                line={"width": 0},
                name="occupied p10-p90",
                showlegend=first,
                legendgroup="band",
            ),
            row=row,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=t,
                y=occ.occupied[1],
                line={"color": "#1f77b4"},
                name="occupied p50",
                showlegend=first,
                legendgroup="p50",
            ),
            row=row,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=t,
                y=occ.demand_p50,
                line={"color": "#ff7f0e", "dash": "dot"},
                name="demand p50 (occupied + waiting)",
                showlegend=first,
                legendgroup="demand",
            ),
            row=row,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=t,
                y=occ.capacity,
                line={"color": "#222", "shape": "hv"},
                name="capacity",
                showlegend=first,
                legendgroup="cap",
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text="GPUs", row=row, col=1)
    fig.update_layout(
        title=f"Occupied GPUs per pool ({result.name})",
        height=260 * len(pools) + 120,
        margin={"t": 80},
    )
    return fig


def _gantt_jobs(result: ScenarioResult) -> list[JobForecast]:
    risky = risk_order(result.jobs)
    others = sorted(
        (j for j in result.jobs if j.deadline_s is None and j.start_s[1] is not None),
        key=lambda j: -((j.completion_s[1] or 0) - (j.start_s[1] or 0)),
    )
    return (risky + others)[:MAX_GANTT_JOBS]


def _gantt(result: ScenarioResult, horizon_end_s: float) -> go.Figure:
    jobs = list(reversed(_gantt_jobs(result)))
    names = [j.name for j in jobs]
    start = [_when(j.start_s[1]) for j in jobs]
    end = [j.completion_s[1] if j.completion_s[1] is not None else horizon_end_s for j in jobs]
    duration_ms = [(e - (j.start_s[1] or e)) * 1000.0 for j, e in zip(jobs, end, strict=True)]
    colors = [
        "#d62728"
        if (j.miss_probability or 0) > 0.5
        else "#ff7f0e"
        if (j.miss_probability or 0) > 0.1
        else "#2ca02c"
        for j in jobs
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            y=names,
            x=duration_ms,
            base=start,
            orientation="h",
            marker={"color": colors},
            name="median start to median completion",
            hovertext=[
                f"{j.name}: {j.num_gpus} GPUs on {j.pool}, P(miss) "
                + ("-" if j.miss_probability is None else f"{j.miss_probability:.0%}")
                for j in jobs
            ],
        )
    )
    lo = [_when(j.completion_s[0]) for j in jobs]
    hi = [
        _when(j.completion_s[2] if j.completion_s[2] is not None else horizon_end_s) for j in jobs
    ]
    for name, a, b in zip(names, lo, hi, strict=True):
        if a is not None and b is not None:
            fig.add_trace(
                go.Scatter(
                    x=[a, b],
                    y=[name, name],
                    mode="lines+markers",
                    line={"color": "#333", "width": 2},
                    marker={"symbol": "line-ns-open", "size": 10},
                    showlegend=False,
                    hoverinfo="skip",
                )
            )
    fig.add_trace(
        go.Scatter(
            x=[_when(j.completion_s[0]) for j in jobs][:0],
            y=[],
            mode="lines",
            line={"color": "#333"},
            name="completion p10-p90",
        )
    )
    deadlines = [(j.name, _when(j.deadline_s)) for j in jobs if j.deadline_s is not None]
    fig.add_trace(
        go.Scatter(
            x=[d for _, d in deadlines],
            y=[n for n, _ in deadlines],
            mode="markers",
            marker={"symbol": "x", "size": 10, "color": "#000"},
            name="deadline",
        )
    )
    fig.update_layout(
        title=f"Jobs ({result.name}): median start to completion, p10-p90 of completion",
        height=max(300, 22 * len(jobs) + 150),
        xaxis={"type": "date"},
        barmode="overlay",
    )
    return fig


def _weeks(result: ScenarioResult) -> go.Figure:
    pools = list(dict.fromkeys(p.pool for p in result.pool_weeks))
    weeks = list(dict.fromkeys(p.week_start_s for p in result.pool_weeks))
    z = [
        [
            next(
                100 * p.utilisation
                for p in result.pool_weeks
                if p.pool == pool and p.week_start_s == w
            )
            for w in weeks
        ]
        for pool in pools
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[format_day(w) for w in weeks],
            y=pools,
            colorscale="Blues",
            zmin=0,
            zmax=100,
            colorbar={"title": "% busy"},
        )
    )
    fig.update_layout(
        title=f"Utilisation per pool and week, median ({result.name})", height=160 + 40 * len(pools)
    )
    return fig


def _comparison(review: Review) -> go.Figure:
    rows = review.comparison()
    names = [r["scenario"] for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["deadline misses", "utilisation (%)"])
    fig.add_trace(
        go.Bar(x=names, y=[r["expected_deadline_misses"] for r in rows], name="expected misses"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(x=names, y=[r["deadlines_missed_at_p90"] for r in rows], name="missed at p90"),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            x=names, y=[100 * r["utilisation"] for r in rows], name="utilisation", showlegend=False
        ),
        row=1,
        col=2,
    )
    fig.update_layout(title="Scenarios side by side", height=400, barmode="group")
    return fig


def _table(table: Table, classes: Sequence[str] = ()) -> str:
    header, rows = table
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _risk_table(result: ScenarioResult) -> str:
    table, jobs = risk_table(result)
    if not jobs:
        return "<p>No job has a deadline.</p>"
    classes = [
        "risk-high"
        if (j.miss_probability or 0) > 0.5
        else "risk-mid"
        if (j.miss_probability or 0) > 0.1
        else ""
        for j in jobs
    ]
    return _table(table, classes)


def review_html(review: Review) -> str:
    """The review as one HTML document (UTF-8 text), every script inline."""
    figures = [
        _comparison(review),
        _occupancy(review.base),
        _gantt(review.base, review.start_s + review.horizon_s),
        _weeks(review.base),
    ]
    figures += [_occupancy(scenario) for scenario in review.scenarios[1:]]
    charts = [
        pio.to_html(
            fig,
            include_plotlyjs=(i == 0),
            full_html=False,
            div_id=f"chart-{i}",
            config={"displaylogo": False},
        )
        for i, fig in enumerate(figures)
    ]
    sizing = ""
    if review.sizing:
        sizing = "<h2>Smallest addition meeting every deadline at p90</h2>"
        sizing += _table(sizing_table(review))
    listed = "".join(f"<li>{html.escape(n)}</li>" for n in notes(review.base))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Capacity review</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Capacity review</h1>",
        f"<p>From {format_time(review.start_s)} UTC over {review.horizon_s / 86400:.0f} days; "
        f"{review.num_samples} Monte Carlo samples per scenario.</p>",
        "<h2>Scenarios</h2>",
        _table(comparison_table(review)),
        charts[0],
        sizing,
        "<h2>Deadline risk (base)</h2>",
        _risk_table(review.base),
        charts[2],
        "<h2>Occupancy (base)</h2>",
        charts[1],
        charts[3],
        "<h2>Teams (base)</h2>",
        _table(team_table(review.base)),
    ]
    for scenario, chart in zip(review.scenarios[1:], charts[4:], strict=True):
        parts += [f"<h2>Scenario {html.escape(scenario.name)}</h2>", _risk_table(scenario), chart]
    if listed:
        parts += ["<h2>Notes</h2>", f"<ul class='note'>{listed}</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)
