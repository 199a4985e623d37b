"""Every string of a review placed in its HTML page is text, never markup: the tables escape
HTML, and plotly.js labels, titles and hover text escape the subset of HTML plotly draws
(``<a href>``, ``<b>``, ...).

Probe of the finding: a job named ``<a href="https://evil.example/phish">`` became a clickable
link in the review's Gantt chart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from planner.capacity import run_review
from planner.capacity.documents import located
from planner.capacity.figures import comparison, gantt, occupancy, text, weeks
from planner.capacity.html import review_html
from planner.capacity.inputs import review_inputs
from planner.capacity.snapshot import parse_snapshot

EVIL = '<a href="https://evil.example/phish">click</a>'


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _review() -> Any:
    fleet = {
        "name": "f",
        "start": "2025-07-01",
        "horizon_days": 14,
        "pools": [{"name": "h100", "gpu": "h100-sxm", "num_gpus": 16}],
    }
    jobs = {
        "taken_at": "2025-07-01T00:00:00Z",
        "jobs": [
            {
                "job_id": "1",
                "name": EVIL,
                "user": "<b>mallory</b>",
                "partition": "h100",
                "status": "pending",
                "num_gpus": 8,
                "gpu_type": "h100",
                "runtime_s": {"p10_s": 3600, "p50_s": 7200, "p90_s": 14400},
            }
        ],
    }
    what_ifs = [{"name": "more", "capacity": [{"pool": "h100", "gpus": 8}]}]
    inputs = review_inputs(
        located(fleet, "fleet"),
        None,
        [located(what_ifs, "what_ifs")],
        parse_snapshot(located(jobs, "jobs")),
        now_s=0.0,
    )
    return run_review(
        inputs.fleet,
        inputs.planned,
        inputs.snapshot,
        inputs.what_ifs,
        start_s=inputs.start_s,
        samples=4,
        rng=np.random.default_rng(0),
        sizing=False,
    )


def test_job_names_are_plain_text_in_every_chart() -> None:
    review = _review()
    charts = [
        gantt(review.base, review.start_s + review.horizon_s),
        comparison(review),
        weeks(review.base),
        *(occupancy(s) for s in review.scenarios),
    ]
    shown = [s for chart in charts for s in _strings(chart)]
    assert not [s for s in shown if "<" in s or ">" in s], "markup reached a plotly figure"
    labels = gantt(review.base, review.start_s + review.horizon_s)["data"][0]
    assert labels["y"] == [text(review.base.jobs[0].name)]
    assert labels["y"][0] == '1 (&lt;a href="https://evil.example/phish"&gt;click&lt;/a&gt;)'
    assert labels["hovertext"][0].startswith(labels["y"][0] + ": 8 GPUs on h100")


def test_the_page_has_no_markup_from_the_input() -> None:
    page = review_html(_review())
    assert "evil.example/phish" in page  # the name is there, as text
    assert '<a href="https://evil.example' not in page
    assert "<b>mallory</b>" not in page
    assert text("a & <b>") == "a &amp; &lt;b&gt;"
