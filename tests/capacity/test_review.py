"""Reviews end to end on small inputs: what-ifs side by side, the sizing search's known answer,
the JSON/Markdown/HTML outputs, and pending-job starts from the running jobs' runtimes."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from planner.capacity import (
    QueuedJob,
    QueueSnapshot,
    RuntimeBand,
    fleet_from_nodes,
    forecast_pending,
    read_fleet,
    read_plan,
    read_snapshot,
    read_what_ifs,
    review_markdown,
    run_review,
)
from planner.capacity.html import review_html
from planner.specs.job import JobState, JobStatus, NodeState


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "link"):
            self.tags.append(dict(attrs))


def _script_tags(page: str) -> list[dict[str, str | None]]:
    parser = _Scripts()
    parser.feed(page)
    return parser.tags


EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
DAY = 86400.0

TIGHT_FLEET = """\
start: 2025-07-01
interruptions_per_gpu_hour: 0
pools:
  - {name: h100, gpu: h100-sxm, num_gpus: 8}
"""


def _tight_snapshot(start_s: float) -> QueueSnapshot:
    """Two pending 8-GPU jobs of one day each, both due in 1.5 days: one pool of 8 GPUs can
    finish only one of them in time; 8 more GPUs meet both deadlines."""

    def job(job_id: str, priority: float) -> QueuedJob:
        return QueuedJob(
            state=JobState(
                scheduler="slurm",
                cluster="c",
                job_id=job_id,
                partition="h100",
                status=JobStatus.PENDING,
                num_gpus=8,
            ),
            runtime=RuntimeBand(p10_s=DAY * 0.95, p50_s=DAY, p90_s=DAY * 1.05),
            priority=priority,
            deadline_s=start_s + 1.5 * DAY,
        )

    return QueueSnapshot(taken_at_s=start_s, jobs=(job("1", 2), job("2", 1)))


def test_sizing_finds_the_known_smallest_addition():
    fleet = read_fleet(TIGHT_FLEET, "fleet.yaml")
    start = fleet.start_s or 0.0
    review = run_review(
        fleet, (), _tight_snapshot(start), start_s=start, samples=40, rng=np.random.default_rng(0)
    )
    assert review.base.misses_at_p90 == ("2",)
    (answer,) = review.sizing
    assert answer.gpu == "h100-sxm"
    assert answer.gpus_added == 8  # one node of 8 H100s
    assert answer.latest_date_s is not None
    # the second job must start by 0.5 days (deadline 1.5 days, p90 runtime ~1.05 days)
    assert start <= answer.latest_date_s <= start + 0.5 * DAY


def test_what_ifs_side_by_side_on_the_examples():
    fleet = read_fleet((EXAMPLES / "fleet.yaml").read_text(), "fleet.yaml")
    plan = read_plan((EXAMPLES / "plan.yaml").read_text(), "plan.yaml", fleet)
    snapshot = read_snapshot((EXAMPLES / "jobs-snapshot.json").read_text(), "jobs.json")
    what_ifs = read_what_ifs(
        (EXAMPLES / "what-if-more-h100.yaml").read_text(), "w.yaml", fleet, plan, snapshot
    )
    review = run_review(
        fleet,
        plan,
        snapshot,
        what_ifs,
        start_s=fleet.start_s or 0.0,
        samples=20,
        rng=np.random.default_rng(1),
        seed=1,
        sizing=False,
    )
    names = [s.name for s in review.scenarios]
    assert names == ["base", "h100-early", "b200-pool", "ablation-first"]
    b200 = review.scenarios[2]
    moved = next(j for j in b200.jobs if j.name == "llama3-70b-pretrain")
    assert moved.pool == "b200"
    assert moved.num_gpus == 128
    assert any(o.pool == "b200" for o in b200.occupancy)
    data = json.loads(json.dumps(review.to_dict(), allow_nan=False))
    assert data["comparison"][0]["scenario"] == "base"
    assert {"start_s", "completion_s", "miss_probability"} <= set(data["scenarios"][0]["jobs"][0])
    markdown = review_markdown(review)
    assert "## Deadline risk: b200-pool" in markdown
    page = review_html(review)
    scripts = _script_tags(page)
    assert len(scripts) >= 5
    assert all("src" not in attrs for attrs in scripts)  # every script inline, nothing fetched
    assert 'id="chart-0"' in page


def test_pending_job_starts_when_the_running_job_is_predicted_to_end():
    """The issue's case: one running job with no time limit and two minutes left by its
    predicted runtime, and a pending job that needs its GPUs. Slurm's estimate (it assumes the
    running job runs to its limit, here none) is a year away; the planner's is two minutes."""
    now = 1_750_000_000.0
    nodes = [
        NodeState(name=f"n{i}", state="mixed", num_gpus=8, gpu_type="h100", partitions=("gpu",))
        for i in range(2)
    ]
    fleet = fleet_from_nodes(nodes)
    assert fleet.pools[0].num_gpus == 16
    running = QueuedJob(
        state=JobState(
            scheduler="slurm",
            cluster="dev",
            job_id="10",
            partition="gpu",
            status=JobStatus.RUNNING,
            num_gpus=16,
            gpu_type="h100",
            start_time_s=now - 3600,
            time_limit_s=None,
        ),
        runtime=RuntimeBand(p10_s=100.0, p50_s=120.0, p90_s=150.0),
    )
    pending = QueuedJob(
        state=JobState(
            scheduler="slurm",
            cluster="dev",
            job_id="11",
            partition="gpu",
            status=JobStatus.PENDING,
            num_gpus=8,
            gpu_type="h100",
            expected_start_time_s=now + 365 * DAY,
        ),
        runtime=RuntimeBand(p10_s=500.0, p50_s=600.0, p90_s=700.0),
    )
    forecasts = forecast_pending(
        fleet,
        QueueSnapshot(taken_at_s=now, jobs=(running, pending)),
        rng=np.random.default_rng(2),
        samples=200,
    )
    forecast = forecasts["11"]
    assert forecast.start_s[1] == pytest.approx(now + 120.0, rel=0, abs=10.0)
    assert forecast.start_s[0] >= now + 95.0
    assert forecast.start_s[2] <= now + 160.0
    assert forecast.completion_s[1] == pytest.approx(now + 720.0, abs=40.0)
    assert forecast.scheduler_start_s == now + 365 * DAY
    assert "10" not in forecasts
