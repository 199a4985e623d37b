"""Fleet, plan, snapshot and what-if files: what they accept and their per-line errors
(``file:line: field: what is wrong and the fix``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from planner.capacity import (
    DocumentError,
    SchedulerKind,
    read_fleet,
    read_plan,
    read_snapshot,
    read_what_ifs,
)
from planner.capacity.fields import slurm_time_limit_s
from planner.capacity.runtime import RuntimeBand
from planner.capacity.snapshot import QueuedJob, QueueSnapshot, snapshot_document
from planner.specs.job import JobState, JobStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"

FLEET = """\
name: f
start: 2025-07-01
pools:
  - name: h100
    gpu: h100-sxm
    num_gpus: 64
    changes:
      - {date: 2025-08-01, gpus: 64}
"""

SCENARIO = (
    "{model: {preset: llama3-8b}, "
    "parallelism: {context_parallel: 2, global_batch_size: 128, precision: fp8}}"
)


def _plan(extra: str) -> str:
    return f"jobs:\n  - name: a\n    scenario: {SCENARIO}\n    total_tokens: 1.0e10\n{extra}"


def _error(fn, *args) -> str:
    with pytest.raises(DocumentError) as info:
        fn(*args)
    return str(info.value)


def test_example_files_parse():
    fleet = read_fleet((EXAMPLES / "fleet.yaml").read_text(), "fleet.yaml")
    assert fleet.scheduler is SchedulerKind.SLURM
    assert fleet.pool_names == ("h100", "a100")
    plan = read_plan((EXAMPLES / "plan.yaml").read_text(), "plan.yaml", fleet)
    assert {j.name for j in plan} >= {"llama3-70b-pretrain", "gpt-1b-sweep"}
    sweep = next(j for j in plan if j.name == "gpt-1b-sweep")
    assert sweep.gpu is None
    assert sweep.num_gpus is None
    snapshot = read_snapshot((EXAMPLES / "jobs-snapshot.json").read_text(), "jobs.json")
    assert [j.running for j in snapshot.jobs] == [True, True, False]
    what_ifs = read_what_ifs(
        (EXAMPLES / "what-if-more-h100.yaml").read_text(), "w.yaml", fleet, plan, snapshot
    )
    assert [w.name for w in what_ifs] == ["h100-early", "b200-pool", "ablation-first"]


def test_fleet_capacity_over_time():
    fleet = read_fleet(FLEET, "fleet.yaml")
    pool = fleet.pools[0]
    assert pool.capacity_at(fleet.start_s or 0) == 64
    assert pool.max_gpus == 128
    assert pool.partitions == ("h100",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            FLEET.replace("num_gpus: 64", "num_gpus: -8"),
            "fleet.yaml:6: pools[0].num_gpus: must be >= 0",
        ),
        (FLEET.replace("gpu: h100-sxm", "gpu: h1000"), "fleet.yaml:5: pools[0].gpu:"),
        (
            FLEET.replace("    num_gpus: 64", "    num_gpu: 64"),
            "fleet.yaml:6: pools[0].num_gpu: unknown field; did you mean 'num_gpus'?",
        ),
        (
            FLEET.replace("gpus: 64}", "gpus: -200}"),
            "fleet.yaml:8: pools[0].changes[0].gpus: removes more GPUs than the pool has",
        ),
        (
            FLEET.replace("2025-08-01", "next week"),
            "fleet.yaml:8: pools[0].changes[0].date: is not a date",
        ),
        (FLEET + "scheduler: pbs\n", "fleet.yaml:9: scheduler: must be slurm or kueue"),
        (FLEET + "scheduler: kueue\n", "queues: scheduler kueue needs queues"),
        ("pools: [\n", "fleet.yaml:2: not valid YAML/JSON"),
    ],
)
def test_fleet_errors_name_file_line_and_field(text, expected):
    assert _error(read_fleet, text, "fleet.yaml").startswith(expected) or expected in _error(
        read_fleet, text, "fleet.yaml"
    )


def test_plan_errors_name_file_line_and_field():
    fleet = read_fleet(FLEET, "fleet.yaml")
    assert "plan.yaml:5: jobs[0].gpu: no pool of the fleet has a100-80gb GPUs" in _error(
        read_plan, _plan("    gpu: a100-80gb\n    num_gpus: 8\n"), "plan.yaml", fleet
    )
    assert "plan.yaml:5: jobs[0].deadline: is not after earliest_start" in _error(
        read_plan,
        _plan("    deadline: 2025-07-01\n    earliest_start: 2025-07-02\n    num_gpus: 8\n"),
        "plan.yaml",
        fleet,
    )
    message = _error(
        read_plan, _plan("    num_gpus: 8\n    time_limit: two weeks\n"), "plan.yaml", fleet
    )
    assert message.startswith("plan.yaml:6: jobs[0].time_limit: is not a Slurm time limit")
    message = _error(read_plan, _plan("    num_gpus: 6\n"), "plan.yaml", fleet)
    assert message.startswith("plan.yaml:3: jobs[0].scenario.parallelism")
    message = _error(
        read_plan,
        "jobs:\n  - name: a\n    megatron_args: --foo 1\n    num_gpus: 8\n",
        "plan.yaml",
        fleet,
    )
    assert "plan.yaml:3: jobs[0].megatron_args: needs at least --num-layers" in message
    assert "is required: the job's token budget" in _error(
        read_plan,
        f"jobs:\n  - name: a\n    scenario: {SCENARIO}\n    num_gpus: 8\n",
        "plan.yaml",
        fleet,
    )


def test_plan_accepts_megatron_arguments_and_recommend():
    fleet = read_fleet(FLEET, "fleet.yaml")
    plan = read_plan(
        "jobs:\n  - name: m\n    megatron_args: --num-layers 24 --hidden-size 2048 "
        "--num-attention-heads 16 "
        "--seq-length 2048 --micro-batch-size 4 --global-batch-size 256 --bf16\n"
        "    train_iters: 1000\n    num_gpus: recommend\n    time_limit: 2-00:00:00\n",
        "plan.yaml",
        fleet,
    )
    job = plan[0]
    assert job.num_gpus is None
    assert job.time_limit_s == 2 * 86400
    assert job.scenario.training.train_iters == 1000


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 5400.0),
        ("90:30", 5430.0),
        ("2:00:00", 7200.0),
        ("1-12", 129600.0),
        ("1-12:30", 131400.0),
        ("14-00:00:00", 14 * 86400.0),
        ("UNLIMITED", None),
    ],
)
def test_slurm_time_limits(text, seconds):
    assert slurm_time_limit_s(text) == seconds


def test_snapshot_errors():
    assert "jobs.json:3: jobs[0].runtime_s: is required" in _error(
        read_snapshot,
        '{"taken_at": 0,\n "jobs": [\n  {"job_id": "1", "status": "running", "num_gpus": 8}]}',
        "jobs.json",
    )
    assert "jobs.json:2: jobs[0].status: must be one of" in _error(
        read_snapshot,
        '{"taken_at": 0, "jobs": [\n {"job_id": "1", "status": "zombie", "num_gpus": 8, '
        '"runtime_s": {"p50_s": 60}}]}',
        "jobs.json",
    )
    assert "jobs.json:2: jobs[0].runtime_s.p50_s: the band must be ordered" in _error(
        read_snapshot,
        '{"taken_at": 0, "jobs": [\n {"job_id": "1", "status": "running", "num_gpus": 8, '
        '"runtime_s": {"p10_s": 90, "p50_s": 60}}]}',
        "jobs.json",
    )
    ended = read_snapshot(
        '{"taken_at": 0, "jobs": [{"job_id": "1", "status": "completed", "num_gpus": 8, '
        '"runtime_s": {"p50_s": 60}}]}',
        "j.json",
    )
    assert ended.jobs == ()


def test_what_if_errors():
    fleet = read_fleet(FLEET, "fleet.yaml")
    plan = read_plan(_plan("    num_gpus: 8\n"), "plan.yaml", fleet)
    assert "w.yaml:3: capacity[0].pool: 'b200' is no pool of the fleet" in _error(
        read_what_ifs, "name: x\ncapacity:\n  - {pool: b200, gpus: 8}\n", "w.yaml", fleet, plan
    )
    assert "w.yaml:3: jobs[0].job: no job 'zz'" in _error(
        read_what_ifs, "name: x\njobs:\n  - {job: zz, priority: 3}\n", "w.yaml", fleet, plan
    )
    assert "w.yaml:3: jobs[0].layout: must be best" in _error(
        read_what_ifs, "name: x\njobs:\n  - {job: a, layout: fastest}\n", "w.yaml", fleet, plan
    )


def test_relative_dates_count_from_the_review_start():
    """``+Nd``/``+Nh``/``+Nw`` are days, hours, weeks after the review's start: the start
    given, else the fleet's own start; the example files plan from whenever they run."""
    day = 86400.0
    fleet = read_fleet(FLEET.replace("2025-08-01", "+31d"), "fleet.yaml")
    assert fleet.pools[0].changes[0].at_s == fleet.start_s + 31 * day
    later = 1_800_000_000.0
    moved = read_fleet(FLEET.replace("2025-08-01", "+31d"), "fleet.yaml", start_s=later)
    assert moved.start_s == fleet.start_s  # the fleet's own start is kept as written
    assert moved.pools[0].changes[0].at_s == later + 31 * day
    plan = read_plan(
        _plan("    num_gpus: 8\n    earliest_start: +36h\n    deadline: +2w\n"),
        "plan.yaml",
        fleet,
        start_s=later,
    )
    assert plan[0].earliest_start_s == later + 1.5 * day
    assert plan[0].deadline_s == later + 14 * day
    no_start = FLEET.replace("start: 2025-07-01\n", "").replace("2025-08-01", "+31d")
    assert "fleet.yaml:7: pools[0].changes[0].date: '+31d' is relative to the review's start" in (
        _error(read_fleet, no_start, "fleet.yaml")
    )
    assert "is not a date: '+31x'" in _error(
        read_fleet, FLEET.replace("2025-08-01", "+31x"), "fleet.yaml"
    )


def test_the_review_start_rule_and_request_bodies():
    """The start: given, else the later of the fleet's start and the snapshot's time, else
    now; request bodies (no lines) are read with the same checks, errors naming the field."""
    from planner.capacity.documents import load_document, located
    from planner.capacity.inputs import review_inputs, review_start_s

    assert review_start_s(5.0, 1.0, 9.0, 100.0) == 5.0
    assert review_start_s(None, 1.0, 9.0, 100.0) == 9.0
    assert review_start_s(None, 12.0, 9.0, 100.0) == 12.0
    assert review_start_s(None, None, None, 100.0) == 100.0
    snapshot = read_snapshot((EXAMPLES / "jobs-snapshot.json").read_text(), "jobs.json")
    now = 1_800_000_000.0
    moved = read_snapshot(
        (EXAMPLES / "jobs-snapshot.json")
        .read_text()
        .replace("2025-07-01T00:00:00Z", "2027-01-15T00:00:00Z"),
        "jobs.json",
    )
    plan_doc = load_document((EXAMPLES / "plan.yaml").read_text(), "plan.yaml")
    fleet_doc = load_document((EXAMPLES / "fleet.yaml").read_text(), "fleet.yaml")
    inputs = review_inputs(fleet_doc, plan_doc, (), moved, now_s=now)
    assert inputs.start_s == moved.taken_at_s  # later than the fleet's 2025-07-01
    ablation = next(j for j in inputs.planned if j.name == "llama3-8b-ablation")
    assert ablation.deadline_s == moved.taken_at_s + 19 * 86400.0
    same = review_inputs(fleet_doc, plan_doc, (), snapshot, now_s=now)
    assert same.start_s == snapshot.taken_at_s == same.fleet.start_s
    body = {"name": "f", "pools": [{"name": "h100", "gpu": "h100-sxm", "num_gpu": 8}]}
    with pytest.raises(DocumentError) as info:
        review_inputs(located(body, "fleet"), None, now_s=now)
    assert str(info.value) == "fleet: pools[0].num_gpu: unknown field; did you mean 'num_gpus'?"
    ok = review_inputs(
        located({"pools": [{"name": "h100", "gpu": "h100-sxm", "num_gpus": 8}]}, "fleet"),
        located({"jobs": []}, "plan"),
        now_s=now,
    )
    assert ok.start_s == now
    assert ok.planned == ()


def test_a_snapshot_document_reads_back_with_every_job_field():
    """``snapshot_document`` (what ``GET /v1/reviews/queue`` serves) and ``read_snapshot``
    (``planner review --jobs``) agree on every ``JobState`` field, a Kubernetes job's launch
    manifest included."""
    state = JobState(
        scheduler="kubernetes", cluster="east", job_id="ml/llama", name="llama", user="ann",
        partition="h100", account="research", status=JobStatus.PENDING, state_reason="Quota",
        node_list=("node-1", "node-2"), num_nodes=2, num_gpus=16, gpus_allocated=True,
        gpu_type="h100", submit_time_s=1751155200.0, start_time_s=1751155260.0,
        end_time_s=1751241600.0, expected_start_time_s=1751155230.0, time_limit_s=86400.0,
        stdout_path="/logs/llama.out", work_dir="/work", command="torchrun train.py",
        batch_script="#!/bin/bash\ntorchrun train.py\n", comment="planner:hint",
        namespace="ml", queue_name="team-a", queue_position=4, progress_ratio=0.25,
        reported_remaining_s=3600.0, progress_updated_s=1751155290.0,
        launch_manifest='{"kind": "PyTorchJob"}',
    )  # fmt: skip
    unset = [f.name for f in dataclasses.fields(JobState) if getattr(state, f.name) == f.default]
    assert unset == []  # a new field joins this test
    job = QueuedJob(
        state=state, runtime=RuntimeBand(p10_s=60.0, p50_s=90.0, p90_s=120.0), team="ml"
    )
    snapshot = QueueSnapshot(taken_at_s=1751155200.0, jobs=(job,))
    text = json.dumps(snapshot_document(snapshot))
    assert read_snapshot(text, "queue.json") == snapshot


@pytest.mark.parametrize("section", ["training", "hardware"])
@pytest.mark.parametrize("value", ["5", "[1, 2]", "abc"])
def test_a_scenario_section_that_is_no_mapping_is_named(section: str, value: str) -> None:
    scenario = SCENARIO.replace("{model:", f"{{{section}: {value}, model:", 1)
    plan = (
        f"jobs:\n  - name: a\n    scenario: {scenario}\n    total_tokens: 1.0e10\n    num_gpus: 8\n"
    )
    message = _error(read_plan, plan, "plan.yaml", read_fleet(FLEET, "fleet.yaml"))
    assert message.startswith(
        f"plan.yaml:3: jobs[0].scenario.{section}: must be a mapping of its fields"
    )


def test_an_empty_scenario_section_reads_as_none_given() -> None:
    scenario = SCENARIO.replace("{model:", "{training: {}, model:", 1)
    plan = (
        f"jobs:\n  - name: a\n    scenario: {scenario}\n    total_tokens: 1.0e10\n    num_gpus: 8\n"
    )
    (job,) = read_plan(plan, "plan.yaml", read_fleet(FLEET, "fleet.yaml"))
    assert job.document["training"] == {"total_tokens": 1.0e10}
