"""A review as Markdown, for a review document: comparison, sizing, deadline risk, pools per
week, teams."""

from __future__ import annotations

from planner.capacity.review import Review
from planner.capacity.tables import (
    Table,
    comparison_table,
    format_time,
    not_capacity_table,
    notes,
    pool_week_table,
    queue_table,
    risk_table,
    sizing_table,
    team_table,
)

__all__ = ["review_markdown"]


def _cell(text: str) -> str:
    """A table cell: ``|`` escaped and line breaks as spaces, so user text keeps the row."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _render(table: Table) -> list[str]:
    header, rows = table
    if not rows:
        return ["(none)"]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return out + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]


def review_markdown(review: Review) -> str:
    """The review as a Markdown document."""
    seed = f" (seed {review.seed})." if review.seed is not None else "."
    lines = [
        "# Capacity review",
        "",
        f"From {format_time(review.start_s)} UTC over {review.horizon_s / 86400:.0f} days; "
        f"{review.num_samples} Monte Carlo samples per scenario{seed}",
        "",
        review.model_note,
        "",
        "## Scenarios",
        "",
        *_render(comparison_table(review)),
    ]
    if review.not_capacity:
        count = len(review.not_capacity)
        lines += ["", f"## {count} deadline(s) capacity cannot save", ""]
        lines += _render(not_capacity_table(review))
    if review.sizing:
        lines += ["", "## Smallest addition meeting every deadline at p90", ""]
        lines += _render(sizing_table(review))
    for result in review.scenarios:
        lines += ["", f"## Deadline risk: {result.name}", ""]
        lines += _render(risk_table(result)[0])
    lines += ["", "## Pools per week (base)", "", *_render(pool_week_table(review.base))]
    lines += ["", "## Teams (base)", "", *_render(team_table(review.base))]
    if review.base.queues:
        lines += ["", "## ClusterQueues (base)", "", *_render(queue_table(review.base))]
    if notes(review.base):
        lines += ["", "## Notes", "", *(f"- {n}" for n in notes(review.base))]
    return "\n".join(lines) + "\n"
