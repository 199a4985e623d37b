"""Block recompute (``parallelism.recompute_num_layers``): full recompute of the first ``N``
layers of each pipeline model chunk, the others keeping their activations (Megatron-Core
``TransformerBlock._checkpointed_forward``, ``recompute_method == 'block'``)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import DefaultEfficiency, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.memory import layer_activations
from planner.scenario import parse_scenario
from planner.specs import Scenario

L = 32  # Llama 3 8B


def _scenario(*, pp: int = 1, **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-8b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {
                "pipeline_parallel": pp,
                "micro_batch_size": 1,
                "global_batch_size": 64,
                **par,
            },
            "training": {"framework": "megatron"},
        }
    )


def _per_layer(s: Scenario) -> float:
    a = ScenarioArrays.from_scenario(s)
    return float(layer_activations(a, DefaultEfficiency()).per_layer)


@pytest.mark.parametrize("n", [1, 5, 16])
def test_the_first_layers_recompute_and_the_others_keep_their_activations(n: int) -> None:
    """Per layer on average: ``n/L`` of a recomputed layer's bytes (its input) and the rest a
    kept layer's; the recomputed forward FLOPs and time scale by ``n/L`` as well."""
    none, full = _scenario(recompute="none"), _scenario(recompute="full")
    block = _scenario(recompute="full", recompute_num_layers=n)
    f = n / L
    expected = f * _per_layer(full) + (1 - f) * _per_layer(none)
    assert _per_layer(block) == pytest.approx(expected)
    p_none, p_full, p_block = predict(none), predict(full), predict(block)
    extra = p_block.hfu / p_block.mfu - 1
    assert extra == pytest.approx(f * (p_full.hfu / p_full.mfu - 1))
    assert p_none.iteration_time_s < p_block.iteration_time_s < p_full.iteration_time_s
    assert p_none.memory_per_gpu_bytes > p_block.memory_per_gpu_bytes
    assert p_block.memory_per_gpu_bytes > p_full.memory_per_gpu_bytes


def test_the_count_is_per_pipeline_chunk_and_caps_at_its_layers() -> None:
    """Two stages of 16 layers: 8 per chunk is half of each stage; 16 or more is every layer."""
    half = ScenarioArrays.from_scenario(_scenario(pp=2, recompute="full", recompute_num_layers=8))
    assert float(half.recomputed_layer_fraction) == pytest.approx(0.5)
    for n in (16, 40):
        every = _scenario(pp=2, recompute="full", recompute_num_layers=n)
        whole = _scenario(pp=2, recompute="full")
        assert predict(every).iteration_time_s == pytest.approx(predict(whole).iteration_time_s)


@pytest.mark.parametrize(("par", "says"), [({"recompute": "selective"}, "full"), ({}, "full")])
def test_it_needs_full_recompute(par: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says) as info:
        _scenario(recompute_num_layers=4, **par)
    assert info.value.field == "parallelism.recompute_num_layers"


def test_the_count_is_positive() -> None:
    with pytest.raises(SpecError) as info:
        _scenario(recompute="full", recompute_num_layers=0)
    assert info.value.field == "parallelism.recompute_num_layers"
