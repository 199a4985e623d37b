"""The routed experts' seconds of a prediction (``Prediction.moe_routed_compute_s``): the part
of ``compute`` and ``pp_bubble`` that scales with the busiest expert rank's tokens."""

from __future__ import annotations

from typing import Any

import pytest

from planner.perf import predict, predict_batch
from planner.perf.batch import ScenarioArrays
from planner.scenario import parse_scenario
from planner.scenario.documents import prediction_json
from planner.specs import Scenario


def _scenario(model: dict[str, Any], num_gpus: int = 8, **par: Any) -> Scenario:
    # a full-iteration CUDA graph issues nothing from the host inside the step, so no MoE
    # layer waits for its host read (planner.perf.moe_mlp.moe_host_exposed_s): the forward's
    # seconds are then the GPU's, and grow with every routed token
    return parse_scenario(
        {
            "model": {"seq_length": 4096, **model},
            "hardware": {"gpu": "h100-sxm", "num_gpus": num_gpus},
            "parallelism": {"global_batch_size": 64, **par},
            "training": {"framework": "megatron", "cuda_graphs": "full_iteration"},
        }
    )


def _imbalanced(model: dict[str, Any], num_gpus: int, **par: Any) -> tuple[Any, Any]:
    """The predictions at the busiest expert rank's imbalance 1.1 and 2.2."""
    low, high = (
        predict(_scenario({**model, "moe_imbalance_factor": rho}, num_gpus, **par))
        for rho in (1.1, 2.2)
    )
    return low, high


LAYOUTS_ONE_STAGE: list[tuple[dict[str, Any], int, dict[str, Any]]] = [
    ({"preset": "qwen3-30b-a3b"}, 8, {"expert_parallel": 8, "micro_batch_size": 2}),
    (
        {"preset": "gpt-oss-120b"},
        8,
        {"expert_parallel": 8, "precision": "fp8", "recompute": "full"},
    ),
    (
        {"preset": "deepseek-v3", "num_layers": 8},
        8,
        {"expert_parallel": 8, "recompute": "selective", "recompute_modules": ["moe"]},
    ),
]


@pytest.mark.parametrize(("model", "num_gpus", "par"), LAYOUTS_ONE_STAGE)
def test_the_imbalance_moves_compute_by_the_routed_seconds(
    model: dict[str, Any], num_gpus: int, par: dict[str, Any]
) -> None:
    """Every operator the imbalance factor scales is the routed experts' (their GEMMs and
    casts, activation, biases and clamp, the permutation; with full recompute the forward
    again, with selective ``moe`` recompute its repeat; DeepSeek-V3's MTP MoE layer in the LM
    head), so doubling it moves ``compute`` by exactly what it moves the routed seconds (the
    one activation kernel over routed and shared widths is split by elements: within 1e-4)."""
    low, high = _imbalanced(model, num_gpus, **par)
    moved = high.breakdown.compute_s - low.breakdown.compute_s
    assert moved > 0.0
    assert high.moe_routed_compute_s - low.moe_routed_compute_s == pytest.approx(moved, rel=1e-4)
    for p in (low, high):
        assert 0.0 < p.moe_routed_compute_s < p.breakdown.compute_s


def test_the_routed_seconds_take_their_share_of_the_bubble() -> None:
    """With ``p`` stages of ``L/p`` MoE layers each and ``m`` microbatches, the slowest stage
    runs ``m`` microbatches of its layers and the bubble ``(p-1)/v`` mean stages (Narayanan et
    al. SC'21 §2.2): the routed seconds move by ``1 + (p-1)/(v·m)`` times what compute moves
    (the bubble's exposed expert-parallel exchange is no routed compute)."""
    par = {"expert_parallel": 8, "pipeline_parallel": 2, "global_batch_size": 64}
    low, high = _imbalanced({"preset": "gpt-oss-120b"}, 16, **par)
    a = ScenarioArrays.from_scenario(_scenario({"preset": "gpt-oss-120b"}, 16, **par))
    assert a.first_stage_layers == a.last_stage_layers == 18.0
    p, v, m = a.pipeline_parallel, a.virtual_pipeline, a.num_microbatches
    moved = high.breakdown.compute_s - low.breakdown.compute_s
    routed = high.moe_routed_compute_s - low.moe_routed_compute_s
    assert routed == pytest.approx(moved * (1.0 + (p - 1.0) / (v * m)), rel=1e-6)
    assert high.moe_routed_compute_s < high.breakdown.compute_s + high.breakdown.pp_bubble_s


def test_dense_models_have_no_routed_seconds() -> None:
    dense = predict(_scenario({"preset": "llama3-8b"}, 8))
    assert dense.moe_routed_compute_s == 0.0
    assert prediction_json(dense, "dense")["moe_routed_compute_s"] == 0.0


def test_a_batch_gives_the_routed_seconds_of_each_scenario_alone() -> None:
    scenarios = [_scenario(m, n, **par) for m, n, par in LAYOUTS_ONE_STAGE]
    scenarios.append(_scenario({"preset": "llama3-8b"}, 8))
    batch = [p.moe_routed_compute_s for p in predict_batch(scenarios)]
    alone = [predict(s).moe_routed_compute_s for s in scenarios]
    assert batch == pytest.approx(alone, rel=1e-12)
