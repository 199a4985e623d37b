"""The typed recommendation: specs in, Recommendation out, JSON only at the edge."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from planner.errors import SpecError
from planner.perf.step import predict
from planner.recommend import (
    CurvePoint,
    Pool,
    Recommendation,
    RecommendRequest,
    RunningAdvice,
    recommend,
)
from planner.scenario import parse_scenario
from planner.scenario.plans import parse_request, recommend_document
from planner.search import Knobs
from planner.specs.parallelism import Recompute
from tests.recommend.test_allocation import JOB

RUNNING = copy.deepcopy(JOB) | {
    "recommend": {
        "gpu_counts": [4, 8, 16],
        "running": {
            "num_gpus": 16,
            "parallelism": {"tensor_parallel": 16, "global_batch_size": 64, "recompute": "full"},
            "tokens_trained": 1.0e9,
        },
    }
}


def test_a_request_built_from_specs_needs_no_document() -> None:
    job = {k: v for k, v in JOB.items() if k != "recommend"}
    scenario = parse_scenario(job | {"parallelism": {"global_batch_size": 64}})
    request = RecommendRequest(
        name="typed",
        total_tokens=1.0e10,
        pools=(Pool(gpu="h100-sxm", free_gpus=8, base=scenario),),
        global_batch_size=(64,),
        knobs=Knobs(zero_stage=(1,), recompute=(Recompute.NONE, Recompute.FULL)),
        gpu_counts=(4, 8),
    )
    answer = recommend(request)
    assert isinstance(answer, Recommendation)
    assert [(p.gpu, p.num_gpus) for p in answer.scaling] == [("h100-sxm", 4), ("h100-sxm", 8)]
    for point in answer.scaling:
        assert isinstance(point, CurvePoint)
        assert point.best is not None
        assert point.best.prediction == predict(point.best.scenario)
        assert point.time_to_train_s == pytest.approx(1.0e10 / point.tokens_per_s)
    assert answer.running is None
    assert answer.unmet_deadline is None


def test_typed_answer_and_its_json_agree() -> None:
    answer = recommend(parse_request(copy.deepcopy(RUNNING)))
    body = recommend_document(copy.deepcopy(RUNNING))
    rows = [p for p in answer.scaling if p.feasible]
    assert [r["scaling_efficiency"] for r in body["scaling"] if r["feasible"]] == [
        p.scaling_efficiency for p in rows
    ]
    assert body["recommendation"]["num_gpus"] == answer.recommendation.num_gpus
    running = answer.running
    assert isinstance(running, RunningAdvice)
    assert running.best is not None
    assert running.best.scenario.parallelism.global_batch_size == 64
    assert body["running"]["time_saved_s"] == running.time_saved_s
    assert body["running"]["restart_pays"] == running.restart_pays
    assert body["running"]["best"]["rank"] == 1


def test_request_values_are_validated() -> None:
    request = parse_request(copy.deepcopy(RUNNING))
    with pytest.raises(SpecError, match=r"training\.total_tokens"):
        replace(request, total_tokens=0.0)
    with pytest.raises(SpecError, match=r"recommend\.pools"):
        replace(request, pools=())
    with pytest.raises(SpecError, match=r"recommend\.gpu_counts"):
        replace(request, gpu_counts=(0,))
