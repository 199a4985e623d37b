"""Model facts the engine reads by name (``ModelSpec.has_biases`` etc.), and the arrays' names."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from planner.perf import DefaultEfficiency, ops
from planner.perf.batch import ScenarioArrays
from planner.perf.context import context_parallel_times
from planner.perf.data import data_parallel_times
from planner.perf.engine import evaluate, link_of
from planner.perf.expert import expert_parallel_times
from planner.perf.operators import layer_times, operator_times
from planner.perf.parameters import stage_params
from planner.perf.pipeline import pipeline_schedule
from planner.perf.tensor import tensor_parallel_times
from planner.scenario import parse_scenario
from planner.specs import Scenario
from planner.specs.model import Activation


def _scenario(preset: str, **parallelism: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": preset},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {"global_batch_size": 64, **parallelism},
            "training": {"framework": "deepspeed"},
        }
    )


@pytest.mark.parametrize(
    ("preset", "biases", "dropout", "rotary", "gated"),
    [
        ("gpt3-175b", True, True, False, False),  # GPT-3: biases, dropout, learned positions
        ("llama3-8b", False, False, True, True),  # Llama: no biases, no dropout, RoPE, SwiGLU
        ("nemotron4-15b", False, False, False, False),  # squared ReLU
    ],
)
def test_model_facts_follow_the_activation(
    preset: str, biases: bool, dropout: bool, rotary: bool, gated: bool
) -> None:
    model = _scenario(preset).model
    assert (model.has_biases, model.has_dropout) == (biases, dropout)
    assert (model.has_rotary_embeddings, model.gated_linear_unit) == (rotary, gated)
    assert model.gated_linear_unit is (model.activation is Activation.SWIGLU)


def _zero3_exposed(scenario: Scenario, **facts: bool) -> float:
    """DeepSpeed ZeRO-3 exposed data-parallel seconds, with model facts overridden."""
    eff = DefaultEfficiency()
    a = dataclasses.replace(ScenarioArrays.from_scenario(scenario), **facts)
    operators = operator_times(a, eff)
    layer = layer_times(operators, a)
    link = link_of(a, eff)
    schedule = pipeline_schedule(
        a,
        link,
        operators=operators,
        layer=layer,
        tensor=tensor_parallel_times(a, eff, link),
        context=context_parallel_times(a, link, layer),
        expert=expert_parallel_times(a, eff, link),
    )
    times = data_parallel_times(
        a, eff, link, params=stage_params(a).busiest(), layer=layer, schedule=schedule
    )
    return float(times.exposed_s)


def test_zero3_per_tensor_gathers_count_the_bias_tensors() -> None:
    """DeepSpeed gathers every parameter tensor: 12 per layer with biases, 9 without; only
    ``has_biases`` moves that count, not dropout or the activation."""
    scenario = _scenario("llama3-8b", zero_stage=3)
    assert not scenario.model.has_biases
    without = _zero3_exposed(scenario)
    engine = evaluate(ScenarioArrays.from_scenario(scenario), DefaultEfficiency())
    assert without == engine.breakdown_s["dp_comm_exposed"]
    assert _zero3_exposed(scenario, has_biases=True) > without
    assert _zero3_exposed(scenario, has_dropout=True) == without


def test_array_fields_use_the_specs_names() -> None:
    """No one- or two-letter names; every model field is the ``ModelSpec`` attribute of the
    same name, every parallelism degree the ``ParallelismSpec`` one."""
    scenario = _scenario("mixtral-8x7b", tensor_parallel=2, expert_parallel=4)
    a = ScenarioArrays.from_scenario(scenario)
    names = [f.name for f in dataclasses.fields(a)] + [f.name for f in dataclasses.fields(a.device)]
    assert all(len(name) > 2 for name in names), names
    for name in ("num_layers", "hidden_size", "num_experts", "moe_router_topk", "has_biases"):
        assert getattr(a, name) == getattr(scenario.model, name), name
    for name in ("tensor_parallel", "expert_parallel", "num_microbatches", "zero_stage"):
        assert getattr(a, name) == getattr(scenario.parallelism, name), name
    assert a.recompute == scenario.parallelism.recompute.code
    assert a.tokens_per_microbatch == 4096.0  # micro-batch 1 x 4096 tokens, no CP
    assert a.dense_data_parallel_size == 4.0
    assert a.expert_data_parallel_size == ops.maximum(4.0 / 4.0, 1.0)
