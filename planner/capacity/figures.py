"""The review's charts as plotly.js figures: plain ``{"data": [...], "layout": {...}}`` dicts in
plotly.js's schema (https://plotly.com/javascript/reference/), drawn in the page by the
plotly.js bundle that ``planner.capacity.html`` embeds.

Built directly rather than through plotly's Python figure classes (``plotly.graph_objects``):
the service image keeps plotly's JavaScript bundle and its default template and drops the
Python classes (``deploy/prune_venv.py``). The layouts are the ones ``plotly.subplots.
make_subplots`` writes (axis domains, shared x axes, subplot titles as annotations).

Every text that comes from the review's input (job, pool and scenario names) is escaped for
plotly.js (:func:`text`): plotly draws labels, titles and hover text from a subset of HTML
(``<a href>``, ``<b>``, ``<br>``), so a job named ``<a href="https://evil.example">`` would
otherwise become a link in the chart; escaped, it is shown as the characters it is.

Charts: occupied GPUs per pool over time (p10-p90 band, median, demand) against capacity; a
Gantt of the jobs most at risk (median start to median completion, p10-p90 of completion,
deadline marks); utilisation per pool and week; the scenarios side by side. Times are UTC
``YYYY-MM-DD HH:MM:SS`` strings (plotly.js's date format).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import TypedDict

from planner.capacity.review import Review
from planner.capacity.stats import JobForecast, ScenarioResult
from planner.capacity.tables import format_day, risk_order
from planner.json_types import JsonObject, JsonValue

__all__ = ["MAX_GANTT_JOBS", "Figure", "comparison", "gantt", "occupancy", "text", "weeks"]

MAX_GANTT_JOBS = 60
"""Jobs drawn in the Gantt chart: deadline jobs by risk first, then the longest others."""


class Figure(TypedDict):
    """A plotly.js figure: ``data`` (its traces) and ``layout``, in plotly.js's schema."""

    data: list[JsonObject]
    layout: JsonObject


_SUBPLOT_TITLE_FONT = {"size": 16}
#: ColorBrewer's Blues, light to dark, as plotly.py writes its named "Blues" scale (plotly.js's
#: own "Blues" runs the other way).
BLUES: list[list[float | str]] = [
    [i / 8, color]
    for i, color in enumerate(
        ("rgb(247,251,255)", "rgb(222,235,247)", "rgb(198,219,239)", "rgb(158,202,225)",
         "rgb(107,174,214)", "rgb(66,146,198)", "rgb(33,113,181)", "rgb(8,81,156)",
         "rgb(8,48,107)")
    )
]  # fmt: skip


def text(value: str) -> str:
    """``value`` as plain text in a plotly.js label, title or hover text: ``&``, ``<`` and
    ``>`` as entities (plotly.js parses its tags first and decodes entities only in the text
    between them, so no tag can be made of an escaped string)."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def when(epoch_s: float | None) -> str | None:
    """Epoch seconds as plotly.js's UTC date string (None stays None: a gap)."""
    if epoch_s is None or not math.isfinite(epoch_s):
        return None
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def values(numbers: Iterable[float]) -> list[float | None]:
    """Numbers as JSON values: NaN and infinities become null (a gap in the line)."""
    return [float(v) if math.isfinite(v) else None for v in numbers]


def _title(text: str, x: float, y: float) -> JsonObject:
    return {
        "font": _SUBPLOT_TITLE_FONT,
        "showarrow": False,
        "text": text,
        "x": x,
        "xanchor": "center",
        "xref": "paper",
        "y": y,
        "yanchor": "bottom",
        "yref": "paper",
    }


def _axis(index: int) -> str:
    return "" if index == 1 else str(index)


def _risk_color(job: JobForecast) -> str:
    p = job.miss_probability or 0.0
    return "#d62728" if p > 0.5 else "#ff7f0e" if p > 0.1 else "#2ca02c"


def occupancy(result: ScenarioResult) -> Figure:
    """Occupied GPUs per pool (one row each, x axes shared): the p10-p90 band, the median, the
    median demand (occupied plus waiting) and the capacity, over the review's 6-hour bins."""
    pools = result.occupancy
    rows = max(len(pools), 1)
    spacing = 0.08
    height = (1.0 - spacing * (rows - 1)) / rows
    annotations: list[JsonObject] = []
    layout: dict[str, JsonValue] = {"annotations": annotations}
    data: list[JsonObject] = []
    for row, occ in enumerate(pools, start=1):
        top = 1.0 - (row - 1) * (height + spacing)
        bottom = max(0.0, top - height)
        ax = _axis(row)
        x_axis: dict[str, JsonValue] = {"anchor": f"y{ax}", "domain": [0.0, 1.0]}
        if row < rows:  # shared x axes: the bottom row's ticks only
            x_axis |= {"matches": f"x{_axis(rows)}", "showticklabels": False}
        layout[f"xaxis{ax}"] = x_axis
        layout[f"yaxis{ax}"] = {
            "anchor": f"x{ax}",
            "domain": [round(bottom, 10), round(top, 10)],
            "title": {"text": "GPUs"},
        }
        annotations.append(_title(text(occ.pool), 0.5, round(top, 10)))
        t = [when(float(x)) for x in occ.edges_s[:-1]]
        first = row == 1
        on: JsonObject = {"xaxis": f"x{ax}", "yaxis": f"y{ax}", "x": t, "type": "scatter"}
        data += [
            {
                **on,
                "y": values(occ.occupied[2]),
                "line": {"width": 0},
                "showlegend": False,
                "hoverinfo": "skip",
            },
            {
                **on,
                "y": values(occ.occupied[0]),
                "fill": "tonexty",
                "fillcolor": "rgba(31,119,180,0.25)",
                "line": {"width": 0},
                "name": "occupied p10-p90",
                "showlegend": first,
                "legendgroup": "band",
            },
            {
                **on,
                "y": values(occ.occupied[1]),
                "line": {"color": "#1f77b4"},
                "name": "occupied p50",
                "showlegend": first,
                "legendgroup": "p50",
            },
            {
                **on,
                "y": values(occ.demand_p50),
                "line": {"color": "#ff7f0e", "dash": "dot"},
                "name": "demand p50 (occupied + waiting)",
                "showlegend": first,
                "legendgroup": "demand",
            },
            {
                **on,
                "y": values(occ.capacity),
                "line": {"color": "#222", "shape": "hv"},
                "name": "capacity",
                "showlegend": first,
                "legendgroup": "cap",
            },
        ]
    layout |= {
        "title": {"text": f"Occupied GPUs per pool ({text(result.name)})"},
        "height": 260 * len(pools) + 120,
        "margin": {"t": 80},
    }
    return {"data": data, "layout": layout}


def gantt_jobs(result: ScenarioResult) -> list[JobForecast]:
    """The jobs the Gantt chart draws (at most ``MAX_GANTT_JOBS``): deadline jobs by risk,
    then the longest of the others."""
    risky = risk_order(result.jobs)
    others = sorted(
        (j for j in result.jobs if j.deadline_s is None and j.start_s[1] is not None),
        key=lambda j: -((j.completion_s[1] or 0) - (j.start_s[1] or 0)),
    )
    return (risky + others)[:MAX_GANTT_JOBS]


def gantt(result: ScenarioResult, horizon_end_s: float) -> Figure:
    """Jobs as horizontal bars from the median start to the median completion (the horizon's
    end when they do not complete), the p10-p90 of completion as a line, deadlines as marks;
    bars coloured by the probability of missing the deadline (> 50 % red, > 10 % orange)."""
    jobs = list(reversed(gantt_jobs(result)))
    names = [text(j.name) for j in jobs]
    end = [j.completion_s[1] if j.completion_s[1] is not None else horizon_end_s for j in jobs]
    data: list[JsonObject] = [
        {
            "type": "bar",
            "orientation": "h",
            "y": names,
            "x": [(e - (j.start_s[1] or e)) * 1000.0 for j, e in zip(jobs, end, strict=True)],
            "base": [when(j.start_s[1]) for j in jobs],
            "marker": {"color": [_risk_color(j) for j in jobs]},
            "name": "median start to median completion",
            "hovertext": [
                f"{text(j.name)}: {j.num_gpus} GPUs on {text(str(j.pool))}, P(miss) "
                + ("-" if j.miss_probability is None else f"{j.miss_probability:.0%}")
                for j in jobs
            ],
        }
    ]
    for j in jobs:
        lo = j.completion_s[0]
        hi = j.completion_s[2] if j.completion_s[2] is not None else horizon_end_s
        if lo is not None:
            data.append(
                {
                    "type": "scatter",
                    "x": [when(lo), when(hi)],
                    "y": [text(j.name), text(j.name)],
                    "mode": "lines+markers",
                    "line": {"color": "#333", "width": 2},
                    "marker": {"symbol": "line-ns-open", "size": 10},
                    "showlegend": False,
                    "hoverinfo": "skip",
                }
            )
    data.append(  # the legend entry of the p10-p90 lines
        {
            "type": "scatter",
            "x": [],
            "y": [],
            "mode": "lines",
            "line": {"color": "#333"},
            "name": "completion p10-p90",
        }
    )
    deadlines = [j for j in jobs if j.deadline_s is not None]
    data.append(
        {
            "type": "scatter",
            "x": [when(j.deadline_s) for j in deadlines],
            "y": [text(j.name) for j in deadlines],
            "mode": "markers",
            "marker": {"symbol": "x", "size": 10, "color": "#000"},
            "name": "deadline",
        }
    )
    title = f"Jobs ({text(result.name)}): median start to completion, p10-p90 of completion"
    layout: JsonObject = {
        "title": {"text": title},
        "height": max(300, 22 * len(jobs) + 150),
        "xaxis": {"type": "date"},
        "barmode": "overlay",
    }
    return {"data": data, "layout": layout}


def weeks(result: ScenarioResult) -> Figure:
    """Median utilisation (%) per pool and week as a heatmap."""
    pools = list(dict.fromkeys(p.pool for p in result.pool_weeks))
    starts = list(dict.fromkeys(p.week_start_s for p in result.pool_weeks))
    busy = {(p.pool, p.week_start_s): 100 * p.utilisation for p in result.pool_weeks}
    data: list[JsonObject] = [
        {
            "type": "heatmap",
            "z": [[busy.get((pool, w)) for w in starts] for pool in pools],
            "x": [format_day(w) for w in starts],
            "y": [text(pool) for pool in pools],
            "colorscale": BLUES,
            "zmin": 0,
            "zmax": 100,
            "colorbar": {"title": {"text": "% busy"}},
        }
    ]
    layout: JsonObject = {
        "title": {"text": f"Utilisation per pool and week, median ({text(result.name)})"},
        "height": 160 + 40 * len(pools),
    }
    return {"data": data, "layout": layout}


def comparison(review: Review) -> Figure:
    """The scenarios side by side: expected deadline misses and misses at p90 (left),
    utilisation in % (right)."""
    rows = review.comparison()
    names = [text(r["scenario"]) for r in rows]
    data: list[JsonObject] = [
        {
            "type": "bar",
            "x": names,
            "y": [r["expected_deadline_misses"] for r in rows],
            "name": "expected misses",
            "xaxis": "x",
            "yaxis": "y",
        },
        {
            "type": "bar",
            "x": names,
            "y": [r["deadlines_missed_at_p90"] for r in rows],
            "name": "missed at p90",
            "xaxis": "x",
            "yaxis": "y",
        },
        {
            "type": "bar",
            "x": names,
            "y": [100 * r["utilisation"] for r in rows],
            "name": "utilisation",
            "showlegend": False,
            "xaxis": "x2",
            "yaxis": "y2",
        },
    ]
    layout: JsonObject = {
        "xaxis": {"anchor": "y", "domain": [0.0, 0.45]},
        "yaxis": {"anchor": "x", "domain": [0.0, 1.0]},
        "xaxis2": {"anchor": "y2", "domain": [0.55, 1.0]},
        "yaxis2": {"anchor": "x2", "domain": [0.0, 1.0]},
        "annotations": [
            _title("deadline misses", 0.225, 1.0),
            _title("utilisation (%)", 0.775, 1.0),
        ],
        "title": {"text": "Scenarios side by side"},
        "height": 400,
        "barmode": "group",
    }
    return {"data": data, "layout": layout}
