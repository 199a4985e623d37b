"""The answers a review board acts on: a what-if never hides a job it makes invalid, sizing
tells capacity problems from time limits, GPU names resolve by their common aliases, every
error of a file is reported, and the report has queue waits, layouts, causes, quota use and
the cost of reserved capacity."""

from __future__ import annotations

import json

import numpy as np
import pytest

from planner.capacity import (
    QueueSnapshot,
    RuntimeBand,
    read_fleet,
    read_plan,
    read_what_ifs,
    review_markdown,
    run_review,
)
from planner.capacity.documents import DocumentError
from planner.capacity.html import review_html
from planner.capacity.tables import comparison_table, risk_table, team_table
from planner.catalog import get_gpu
from planner.errors import SpecError
from tests.capacity.helpers import queued

DAY = 86400.0
BAND = RuntimeBand(p10_s=DAY * 0.95, p50_s=DAY, p90_s=DAY * 1.05)

FLEET = """\
start: 2025-07-01
horizon_days: 60
pools:
  - {name: h100, gpu: H100, num_gpus: 512, cost_per_gpu_hour: 2.5,
     default_time_limit: "30-00:00:00"}
  - {name: gb200, gpu: GB200 NVL72, num_gpus: 576, cost_per_gpu_hour: 6.0,
     default_time_limit: "30-00:00:00"}
"""

PLAN = """\
defaults: {layout: LAYOUT}
jobs:
  - name: llama3-70b-pretrain
    scenario:
      model: {preset: llama3-70b}
      parallelism: {tensor_parallel: 8, pipeline_parallel: 4, global_batch_size: 1024,
                    recompute: selective}
    total_tokens: 2.0e11
    gpu: h100-sxm
    num_gpus: 256
    deadline: +40d
  - name: llama3-8b
    scenario:
      model: {preset: llama3-8b}
      parallelism: {context_parallel: 2, global_batch_size: 256}
    total_tokens: 2.0e10
    gpu: h100-sxm
    num_gpus: 64
    deadline: +20d
"""

TO_GB200 = """\
- name: to-gb200
  jobs:
    - {job: llama3-70b-pretrain, pool: gb200, num_gpus: 576}
"""


def _review(layout: str, what_if: str = TO_GB200, **kwargs):
    fleet = read_fleet(FLEET, "fleet.yaml")
    plan = read_plan(PLAN.replace("LAYOUT", layout), "plan.yaml", fleet)
    what_ifs = read_what_ifs(what_if, "w.yaml", fleet, plan)
    return run_review(
        fleet,
        plan,
        None,
        what_ifs,
        start_s=fleet.start_s or 0.0,
        samples=20,
        rng=np.random.default_rng(0),
        sizing=False,
        **kwargs,
    )


def test_a_what_if_that_invalidates_a_job_shows_it_and_is_not_comparable():
    """576 GB200 with global batch 1024: data parallel 18 does not divide it. The scenario's
    row says it is not comparable (the job, the reason, the fix), the job stays in its table
    and its counts (a missed deadline, not a silently smaller plan)."""
    review = _review("fixed")
    moved = review.scenarios[1]
    rows = review.comparison()
    assert rows[0]["comparable"]
    assert rows[0]["deadlines_missed_at_p90"] == 0
    assert not rows[1]["comparable"]
    why = rows[1]["not_comparable"]
    assert "llama3-70b-pretrain cannot run here" in why
    assert "1024 is not divisible by data_parallel" in why
    assert "layout: best" in why
    assert rows[1]["jobs_with_deadline"] == rows[0]["jobs_with_deadline"] == 2
    assert moved.misses_at_p90 == ("llama3-70b-pretrain",)
    assert rows[1]["deadlines_missed_at_p90"] == 1
    table, risk = risk_table(moved)
    assert table[1][0][0] == "llama3-70b-pretrain"
    assert table[1][0][-1].startswith("cannot run: gb200:")
    assert risk[0] == 1.0
    assert comparison_table(review)[1][1][2].startswith("not comparable until fixed")
    page = review_html(review)
    assert "not comparable until fixed" in page
    assert "cannot run: gb200" in page
    assert "not comparable until fixed" in review_markdown(review)
    assert json.loads(json.dumps(review.to_dict()))["comparison"][1]["comparable"] is False


def test_layout_best_runs_the_nearest_valid_layout_and_says_which():
    review = _review("best")
    moved = review.scenarios[1]
    assert moved.excluded == ()
    assert review.comparison()[1]["comparable"]
    job = next(j for j in moved.jobs if j.name == "llama3-70b-pretrain")
    assert job.pool == "gb200"
    assert job.layout == "tp 8 · pp 4 · dp 16"
    assert job.num_gpus == 512
    assert "layout: best ran tp 8 · pp 4 · dp 16 on 512 GPUs" in job.note
    assert "nearest count to 576" in job.note


def test_time_limit_misses_are_not_a_capacity_problem():
    """A one-day job with a 6-hour limit on an idle pool misses its 1.1-day deadline because
    every kill costs lost work, a restart and a requeue: no GPUs fix that. Sizing says 0 to
    add, and the review names the deadline with the limit to ask for (its p90 runtime)."""
    fleet = read_fleet(
        "start: 2025-07-01\npools:\n  - {name: h100, gpu: h100-sxm, num_gpus: 64}\n",
        "fleet.yaml",
    )
    start = fleet.start_s or 0.0
    job = queued("7", "h100", BAND, time_limit_s=6 * 3600.0, deadline_s=start + 1.02 * DAY)
    snapshot = QueueSnapshot(taken_at_s=start, jobs=(job,))
    review = run_review(
        fleet, (), snapshot, start_s=start, samples=40, rng=np.random.default_rng(1)
    )
    assert review.base.misses_at_p90 == ("7",)
    assert review.base.jobs[0].miss_cause == "time limit"
    (unsaved,) = review.not_capacity
    assert unsaved.job == "7"
    assert unsaved.cause == "time limit"
    assert unsaved.raise_limit_to_s == pytest.approx(review.base.jobs[0].runtime_p90_s)
    assert "raise it to 1-0" in unsaved.fix
    assert "(p90 runtime)" in unsaved.fix
    (answer,) = review.sizing
    assert answer.gpus_added == 0
    assert answer.answer() == "0 to add"
    assert "1 deadline(s) capacity cannot save" in review_markdown(review)


@pytest.mark.parametrize(
    "name", ["H100", "h100", "H100-80GB", "H100 SXM5", "h100-sxm", "h100_sxm5", "NVIDIA-H100"]
)
def test_gpu_aliases_resolve_to_the_catalog_entry(name):
    assert get_gpu(name).key == "h100-sxm"


def test_did_you_mean_ranks_the_same_family_first():
    with pytest.raises(SpecError) as info:
        get_gpu("h100-sxm6")
    assert "did you mean 'h100-sxm' or 'h100-sxm-96gb'?" in info.value.message
    assert "'h200'" not in info.value.message.split("known GPUs")[0]
    with pytest.raises(SpecError) as info:
        get_gpu("A100")  # 40 or 80 GB: no alias, both suggested
    assert "'a100-80gb' or 'a100-40gb'" in info.value.message


def test_every_error_of_a_file_is_reported_with_its_field_path():
    fleet = read_fleet(FLEET, "fleet.yaml")
    bad = (
        PLAN.replace("LAYOUT", "fixed")
        .replace("deadline: +40d", "deadline: soon")
        .replace("num_gpus: 64", "num_gpus: -3")
        .replace("total_tokens: 2.0e10", "total_tokens: 2.0e10\n    priorty: 3")
    )
    with pytest.raises(DocumentError) as info:
        read_plan(bad, "plan.yaml", fleet)
    lines = str(info.value).splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("plan.yaml:11: jobs[0].deadline: is not a date")
    assert "jobs[1].priorty: unknown field; did you mean 'priority'?" in lines[1]
    assert "jobs[1].num_gpus: must be >= 1" in lines[2]
    bad_fleet = FLEET.replace("num_gpus: 512", "num_gpus: -1").replace("GB200 NVL72", "gb201")
    with pytest.raises(DocumentError) as info:
        read_fleet(bad_fleet, "fleet.yaml")
    assert [line.split(": ")[1] for line in str(info.value).splitlines()] == [
        "pools[0].num_gpus",
        "pools[1].gpu",
    ]


def test_reserved_capacity_costs_whether_used_or_not():
    """512 more GB200 that no job uses cost 512 x 60 days x 24 h x 6.0 more; before, added
    capacity cost nothing unless used. Teams' chargeback stays their use."""
    more = "- name: more-gb200\n  capacity:\n    - {pool: gb200, gpus: 512}\n"
    review = _review("fixed", more)
    base, more_gpus = review.comparison()
    assert more_gpus["cost"] - base["cost"] == pytest.approx(512 * 60 * 24 * 6.0)
    assert more_gpus["usage_cost"] == pytest.approx(base["usage_cost"])


def test_jobs_and_teams_carry_waits_layouts_causes_and_quota():
    kueue = FLEET + (
        "scheduler: kueue\nqueues:\n"
        "  - {name: research, cohort: all, nominal_gpus: {h100: 64}}\n"
        "  - {name: prod, cohort: all, nominal_gpus: {h100: 448, gb200: 576}}\n"
    )
    fleet = read_fleet(kueue, "fleet.yaml")
    plan_text = (
        PLAN.replace("LAYOUT", "fixed")
        .replace("    num_gpus: 256\n", "    num_gpus: 256\n    queue: prod\n")
        .replace("    num_gpus: 64\n", "    num_gpus: 64\n    queue: research\n")
    )
    plan = read_plan(plan_text, "plan.yaml", fleet)
    review = run_review(
        fleet, plan, None, start_s=fleet.start_s or 0.0, samples=10,
        rng=np.random.default_rng(0), sizing=False,
    )  # fmt: skip
    table, _ = risk_table(review.base)
    header, rows = table
    assert header[4:8] == ["layout", "deadline", "wait p50", "wait p90"]
    assert header[-1] == "why it misses"
    big = next(r for r in rows if r[0] == "llama3-70b-pretrain")
    assert big[4] == "tp 8 · pp 4 · dp 8"
    prod = next(t for t in review.base.teams if t.team == "prod")
    assert prod.quota_gpu_hours == pytest.approx((448 + 576) * 60 * 24)
    assert prod.quota_use == pytest.approx(prod.queued_gpu_hours_mean / prod.quota_gpu_hours)
    assert prod.queued_gpu_hours_mean == pytest.approx(prod.gpu_hours_mean)
    assert team_table(review.base)[0][-1] == "quota use"
    queues = {q.queue: q for q in review.base.queues}
    assert queues["research"].cohort == "all"
    assert queues["research"].nominal_gpu_hours == pytest.approx(64 * 60 * 24)
    assert "ClusterQueues (base)" in review_html(review)


MIXED = """\
start: 2025-07-01
interruptions_per_gpu_hour: 0
clusters:
  - name: slurm-a
    scheduler: slurm
    pools: [{name: h100, gpu: h100-sxm, num_gpus: 16}]
  - name: k8s
    scheduler: kueue
    pools: [{name: a100, gpu: a100-80gb, num_gpus: 16}]
    queues: [{name: team, nominal_gpus: {a100: 8}}]
"""


def test_a_fleet_of_clusters_runs_each_pool_under_its_scheduler():
    """Two 8-GPU jobs on each cluster's 16 GPUs: Slurm runs both at once; Kueue's
    ClusterQueue has 8 GPUs of quota, so its second job waits a day for the first."""
    fleet = read_fleet(MIXED, "fleet.yaml")
    assert [(p.name, p.cluster, fleet.scheduler_of(p).value) for p in fleet.pools] == [
        ("h100", "slurm-a", "slurm"),
        ("a100", "k8s", "kueue"),
    ]
    start = fleet.start_s or 0.0
    day = RuntimeBand(p10_s=DAY, p50_s=DAY, p90_s=DAY)
    jobs = [queued(n, "h100", day) for n in ("s1", "s2")]
    jobs += [queued(n, "a100", day, queue="team") for n in ("k1", "k2")]
    snapshot = QueueSnapshot(taken_at_s=start, jobs=tuple(jobs))
    review = run_review(
        fleet, (), snapshot, start_s=start, samples=5, rng=np.random.default_rng(0), sizing=False
    )
    starts = {j.name: (j.start_s[1] or 0.0) - start for j in review.base.jobs}
    assert starts == {"s1": 0.0, "s2": 0.0, "k1": 0.0, "k2": DAY}
    (queue,) = review.base.queues
    assert queue.used_gpu_hours_mean == pytest.approx(2 * 8 * 24)


def test_cluster_errors_name_their_path():
    bad = MIXED.replace("scheduler: kueue", "scheduler: lsf").replace(
        "num_gpus: 16}]\n  - name: k8s", "num_gpu: 16}]\n  - name: k8s"
    )
    with pytest.raises(DocumentError) as info:
        read_fleet(bad, "fleet.yaml")
    text = str(info.value)
    assert "clusters[0].pools[0].num_gpu: unknown field; did you mean 'num_gpus'?" in text
    assert "clusters[1].scheduler: must be slurm or kueue, got 'lsf'" in text


def test_checkpoint_interval_from_megatron_save_interval():
    """``--save-interval 500`` in a job's Megatron-LM arguments: a checkpoint every 500
    iterations at the predicted step time (work time over the run's steps), and the job's note
    says so; a job that gives none gets the documented default and a review note counts it."""
    from pathlib import Path

    from planner.capacity.build import build_workload

    examples = Path(__file__).resolve().parents[2] / "deploy" / "examples"
    fleet = read_fleet((examples / "fleet-clusters.yaml").read_text(), "fleet.yaml")
    text = (examples / "plan-clusters.yaml").read_text()
    plan = read_plan(text, "plan.yaml", fleet)
    w = build_workload(fleet, plan, start_s=fleet.start_s or 0.0)
    j = w.job_index("gpt-1b-ablations")
    (k,) = np.flatnonzero(w.opt_job == j)
    steps = 5.0e10 / (256 * 2048)
    assert w.opt_checkpoint_s[k] == pytest.approx(500 * np.exp(w.opt_log_work_mu[k]) / steps)
    assert "checkpoints every 500 iterations (--save-interval)" in w.job_notes[j]
    assert w.opt_checkpoint_s[w.opt_job == w.job_index("llama3-70b-pretrain")][0] == 1800.0
    bare = read_plan(text.replace("  checkpoint_interval_minutes: 30", ""), "plan.yaml", fleet)
    notes = build_workload(fleet, bare, start_s=fleet.start_s or 0.0).warnings
    assert any("4 planned job(s) give no checkpoint interval" in n for n in notes)
