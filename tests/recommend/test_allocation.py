"""Allocation recommendations: scaling curve, knee, deadline, running-job restart advice."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from planner.errors import SpecError
from planner.recommend import default_gpu_counts, recommend
from planner.scenario.plans import parse_request, recommend_document
from planner.scenario.request import recommendation_json

JOB: dict[str, Any] = {
    "name": "small-job",
    "model": {
        "num_layers": 8,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "seq_length": 1024,
        "vocab_size": 32000,
    },
    "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
    "parallelism": {"global_batch_size": 64, "zero_stage": 1, "recompute": ["none", "full"]},
    "training": {"total_tokens": 1.0e10},
    "recommend": {},
}


@pytest.fixture
def job() -> dict[str, Any]:
    return copy.deepcopy(JOB)


def _answer(doc: dict[str, Any]) -> dict[str, Any]:
    """``recommend`` on the parsed document, as the ``planner recommend --json`` object."""
    return recommendation_json(recommend(parse_request(doc)), doc)


def test_default_gpu_counts() -> None:
    assert default_gpu_counts(16) == (1, 2, 4, 8, 16)
    assert default_gpu_counts(24) == (1, 2, 4, 8, 16, 24)


def test_scaling_curve_efficiencies_and_knee(job: dict[str, Any]) -> None:
    result = _answer(job)
    rows = result["scaling"]
    assert [r["num_gpus"] for r in rows] == [1, 2, 4, 8, 16]
    feasible = [r for r in rows if r["feasible"]]
    assert feasible[0]["scaling_efficiency"] == 1.0
    assert feasible[0]["marginal_efficiency"] is None
    for prev, row in itertools.pairwise(feasible):
        expected = (
            (row["tokens_per_s"] - prev["tokens_per_s"]) / (row["num_gpus"] - prev["num_gpus"])
        ) / (prev["tokens_per_s"] / prev["num_gpus"])
        assert row["marginal_efficiency"] == pytest.approx(expected)
        assert row["time_to_train_s"] == pytest.approx(1.0e10 / row["tokens_per_s"])
    (knee,) = result["knee"]
    # the knee is the last count before the first step below the threshold
    counts = [r["num_gpus"] for r in feasible]
    stop = next((r["num_gpus"] for r in feasible[1:] if r["marginal_efficiency"] < 0.5), None)
    expected_knee = counts[-1] if stop is None else counts[counts.index(stop) - 1]
    assert knee["num_gpus"] == expected_knee
    assert result["recommendation"]["num_gpus"] == knee["num_gpus"]


def test_knee_moves_with_the_threshold(job: dict[str, Any]) -> None:
    job["recommend"]["marginal_efficiency_threshold"] = 10.0  # no step ever pays that much
    result = _answer(job)
    first = next(r for r in result["scaling"] if r["feasible"])
    assert result["knee"][0]["num_gpus"] == first["num_gpus"]


def test_smallest_allocation_meeting_the_deadline(job: dict[str, Any]) -> None:
    curve = _answer(job)["scaling"]
    times = {r["num_gpus"]: r["time_to_train_s"] for r in curve if r["feasible"]}
    deadline = (times[4] + times[8]) / 2  # 8 GPUs meet it, 4 do not
    job["recommend"]["deadline_s"] = deadline
    result = _answer(job)
    assert "error" not in result
    assert result["smallest_meeting_deadline"]["num_gpus"] == 8
    assert result["recommendation"]["num_gpus"] == 8
    assert [r["meets_deadline"] for r in result["scaling"] if r["feasible"]][-2:] == [True, True]


def test_unreachable_deadline_says_why_and_what_would_do(job: dict[str, Any]) -> None:
    job["recommend"]["deadline_s"] = 1.0
    result = recommend_document(job)
    assert result["error"].startswith("infeasible: the deadline")
    assert "Feasible with a deadline of at least" in result["error"]
    assert "token budget of at most" in result["error"]
    assert result["smallest_meeting_deadline"] is None
    assert result["scaling"]  # the curve still comes back


def test_pools_of_several_gpu_types(job: dict[str, Any]) -> None:
    job["recommend"]["pools"] = [
        {"gpu": "a100-80gb", "free_gpus": 8},
        {"gpu": "h100-sxm", "free_gpus": 4},
    ]
    job["recommend"]["gpu_counts"] = [4, 8]
    result = _answer(job)
    assert [(r["gpu"], r["num_gpus"]) for r in result["scaling"]] == [
        ("a100-80gb", 4),
        ("a100-80gb", 8),
        ("h100-sxm", 4),
    ]
    assert {k["gpu"] for k in result["knee"]} == {"a100-80gb", "h100-sxm"}


def test_running_job_restart_advice(job: dict[str, Any]) -> None:
    job["recommend"]["gpu_counts"] = [16]
    job["recommend"]["running"] = {
        "num_gpus": 16,
        "parallelism": {
            "tensor_parallel": 16,
            "global_batch_size": 64,
            "recompute": "full",
            "zero_stage": 1,
        },
        "tokens_trained": 1.0e9,
    }
    run = _answer(job)["running"]
    assert run["faster"]
    assert run["speedup"] > 1.0
    cost = run["restart_cost"]
    assert cost["total_s"] == pytest.approx(
        cost["checkpoint_save_s"]
        + cost["checkpoint_load_s"]
        + cost["relaunch_s"]
        + cost["warmup_s"]
    )
    assert run["remaining_tokens"] == 9.0e9
    assert run["time_saved_s"] == pytest.approx(
        run["remaining_time_current_s"] - run["remaining_time_after_restart_s"]
    )
    assert run["restart_pays"] == (run["time_saved_s"] > 0)
    assert run["best"]["parallelism"]["global_batch_size"] == 64
    # nearly done: the restart no longer pays
    job["recommend"]["running"]["tokens_trained"] = 1.0e10 - 1.0e6
    late = _answer(job)["running"]
    assert not late["restart_pays"]


def test_restart_cost_terms(job: dict[str, Any]) -> None:
    job["recommend"]["restart"] = {
        "checkpoint_bandwidth_gb_per_s": 1.0,
        "relaunch_s": 60,
        "warmup_iterations": 2,
    }
    cost = parse_request(job).restart.cost(0.5, 1.0e9)
    assert cost.checkpoint_bytes == 14.0e9
    assert cost.checkpoint_load_s == pytest.approx(14.0)
    assert cost.total_s == pytest.approx(14.0 + 14.0 + 60.0 + 1.0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["training"].pop("total_tokens"), "training.total_tokens"),
        (lambda d: d["recommend"].update(pools=[]), "recommend.pools"),
        (
            lambda d: d["recommend"].update(pools=[{"gpu": "h100-sxm"}]),
            "recommend.pools[0].free_gpus",
        ),
        (lambda d: d["recommend"].update(deadline_s=-1), "recommend.deadline_s"),
        (lambda d: d["recommend"].update(deadlin_s=1), "recommend.deadlin_s"),
        (lambda d: d["recommend"].update(running={"num_gpus": 8}), "recommend.running.parallelism"),
    ],
)
def test_bad_requests_name_the_field(job: dict[str, Any], change: Any, field: str) -> None:
    change(job)
    with pytest.raises(SpecError) as err:
        parse_request(job)
    assert err.value.field == field


def test_running_layout_errors_point_into_running(job: dict[str, Any]) -> None:
    job["recommend"]["gpu_counts"] = [16]
    job["recommend"]["running"] = {
        "num_gpus": 16,
        "parallelism": {"tensor_parallel": 3, "global_batch_size": 64},
    }
    result = recommend_document(job)
    assert result["error"].startswith("recommend.running.parallelism")


def test_no_pool_can_run_the_job(job: dict[str, Any]) -> None:
    job["model"] = {"preset": "gpt3-175b"}
    job["recommend"]["gpu_counts"] = [1, 2]
    result = recommend_document(job)
    assert result["error"].startswith("infeasible: no GPU count of any pool")


def test_stated_tp_comm_overlap_is_recommended_with_sequence_parallelism(
    job: dict[str, Any],
) -> None:
    """Megatron-LM (the default framework) refuses ``--tp-comm-overlap`` at tensor
    parallelism 1 and without sequence parallelism: a job stating ``tp_comm_overlap: true``
    is still planned (its pools' pure data-parallel bases leave the overlap out), and every
    layout recommended, for the pools and for the running job, states it with tensor and
    sequence parallelism."""
    job["parallelism"]["tp_comm_overlap"] = True
    job["recommend"]["gpu_counts"] = [8, 16]
    job["recommend"]["running"] = {
        "num_gpus": 16,
        "parallelism": {
            "tensor_parallel": 2,
            "global_batch_size": 64,
            "recompute": "full",
            "zero_stage": 1,
        },
        "tokens_trained": 1.0e9,
    }
    answer = _answer(job)
    layouts = [p["parallelism"] for p in answer["scaling"] if p["feasible"]]
    assert len(layouts) == 2
    layouts.append(answer["running"]["best"]["parallelism"])
    for layout in layouts:
        assert layout["tp_comm_overlap"] is True
        assert layout["tensor_parallel"] > 1
        assert layout["sequence_parallel"] is True
