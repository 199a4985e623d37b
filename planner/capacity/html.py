"""A review as one self-contained HTML page: charts drawn by plotly.js, its bundle embedded
once (no network needed to view it), tables in plain HTML.

The charts are plotly.js figures (``planner.capacity.figures``) drawn with plotly's default
template; the bundle (``plotly.min.js``) and the template (``templates/plotly.json``) are read
from the installed ``plotly`` package's data, so the page draws what ``plotly.io.to_html``
would. Raises ``SpecError`` when the plotly package (its data files) is not installed.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

from planner.capacity import figures
from planner.capacity.figures import MAX_GANTT_JOBS, Figure
from planner.capacity.review import Review
from planner.capacity.stats import ScenarioResult
from planner.capacity.tables import (
    Table,
    comparison_table,
    format_time,
    not_capacity_table,
    notes,
    queue_table,
    risk_table,
    sizing_table,
    team_table,
)
from planner.errors import SpecError
from planner.json_types import JsonObject, JsonValue

__all__ = ["MAX_GANTT_JOBS", "plotly_assets", "plotly_figure_html", "review_html"]

_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
.risk-high { background: #f8d0d0; } .risk-mid { background: #fbeacc; }
.note { color: #666; font-size: 0.9em; }
"""


@functools.cache
def plotly_assets() -> tuple[str, JsonObject]:
    """plotly.js's bundle (the text of ``plotly.min.js``) and plotly's default template (the
    ``plotly`` template: a ``{"data", "layout"}`` dict), from the installed ``plotly`` package's
    data files (found without importing the package). Raises ``SpecError`` when missing."""
    spec = importlib.util.find_spec("plotly")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        data = Path(location) / "package_data"
        bundle, template = data / "plotly.min.js", data / "templates" / "plotly.json"
        if bundle.is_file() and template.is_file():
            return bundle.read_text(encoding="utf-8"), json.loads(template.read_text("utf-8"))
    raise SpecError(
        "plotly",
        "the plotly package's plotly.min.js and templates/plotly.json are not installed; "
        "install the planner's dependencies (pip install llm-capacity-planner)",
    )


def _script_json(value: JsonValue) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, ``<!--`` or ``&`` entities)."""
    text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def plotly_figure_html(figure: Figure, div_id: str) -> str:
    """A ``<div class="plotly-graph-div">`` and the script that draws ``figure`` in it with
    plotly's default template (plotly.js must be loaded before, see ``review_html``)."""
    _, template = plotly_assets()
    layout: JsonObject = {"template": template, **figure["layout"]}
    return (
        f'<div id="{html.escape(div_id)}" class="plotly-graph-div" '
        'style="height:100%; width:100%;"></div>\n'
        "<script>if (document.getElementById(" + _script_json(div_id) + ")) {"
        f"Plotly.newPlot({_script_json(div_id)}, {_script_json(figure['data'])}, "
        f"{_script_json(layout)}, {_script_json(_CONFIG)})" + "};</script>"
    )


def _table(table: Table, classes: Sequence[str] = ()) -> str:
    header, rows = table
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if i < len(classes) and classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _risk_table(result: ScenarioResult) -> str:
    table, risk = risk_table(result)
    if not risk:
        return "<p>No job has a deadline.</p>"
    classes = ["risk-high" if p > 0.5 else "risk-mid" if p > 0.1 else "" for p in risk]
    return _table(table, classes)


def review_html(review: Review) -> str:
    """The review as one HTML document (UTF-8 text), every script inline."""
    charts_figures = [
        figures.comparison(review),
        figures.occupancy(review.base),
        figures.gantt(review.base, review.start_s + review.horizon_s),
        figures.weeks(review.base),
    ]
    charts_figures += [figures.occupancy(scenario) for scenario in review.scenarios[1:]]
    bundle, _ = plotly_assets()
    charts = [plotly_figure_html(fig, f"chart-{i}") for i, fig in enumerate(charts_figures)]
    sizing = ""
    if review.not_capacity:
        sizing += f"<h2>{len(review.not_capacity)} deadline(s) capacity cannot save</h2>"
        sizing += _table(not_capacity_table(review))
    if review.sizing:
        sizing += "<h2>Smallest addition meeting every deadline at p90</h2>"
        sizing += _table(sizing_table(review))
    queues = ""
    if review.base.queues:
        queues = "<h2>ClusterQueues (base)</h2>" + _table(queue_table(review.base))
    listed = "".join(f"<li>{html.escape(n)}</li>" for n in notes(review.base))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Capacity review</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<script>{bundle}</script>",
        "<h1>Capacity review</h1>",
        f"<p>From {format_time(review.start_s)} UTC over {review.horizon_s / 86400:.0f} days; "
        f"{review.num_samples} Monte Carlo samples per scenario.</p>",
        f"<p class='note'>{html.escape(review.model_note)}</p>",
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
        queues,
    ]
    for scenario, chart in zip(review.scenarios[1:], charts[4:], strict=True):
        parts += [f"<h2>Scenario {html.escape(scenario.name)}</h2>", _risk_table(scenario), chart]
    if listed:
        parts += ["<h2>Notes</h2>", f"<ul class='note'>{listed}</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)
