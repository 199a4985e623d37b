"""The top-k layouts of the benchmark spaces (``benchmarks/explore.py``) are layouts the
frameworks run: every rule of ``planner.specs.feasibility``, Megatron-Core's MoE rule (tensor
parallelism needs sequence parallelism), tensor parallelism inside the NVLink domain, a split
Megatron-Core accepts; and DeepSeek-V3 on 2,048 H100 offers pipeline 8 and 16 layouts."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from benchmarks.accuracy.cases import Case
from benchmarks.explore import SPACES, rank_case
from planner.scenario import predict_documents
from planner.scenario.plans import explore_document, parse_space, scenario_document
from planner.search import explore
from planner.search.explore import DEFAULT_TOLERANCE, ExploreEntry
from planner.specs.feasibility import first_violation, moe_tensor_parallel_rule
from planner.specs.pipeline_split import stage_layers_of

FAST_SPACES = ("gpt3-175b-a100-1024", "mixtral-8x7b-h100-256")
"""The benchmark spaces that explore in a few seconds (every knob open)."""

DEEPSEEK_FEW_KNOBS = {
    "micro_batch_size": [1],
    "recompute": ["full"],
    "zero_stage": [1],
    "context_parallel": [1],
}
"""DeepSeek-V3's benchmark space with the knobs that do not shape the pipeline fixed (the full
space takes ~15 CPU-s; its pipeline digit is checked whole)."""


def _check_layout(entry: ExploreEntry) -> None:
    """The frameworks' rules, each checked on its own (not only through ``Scenario``)."""
    s = entry.scenario
    par, framework = s.parallelism, str(s.training.framework)
    assert first_violation(s.model, s.hardware.num_gpus, par, framework=framework) is None
    if s.model.is_moe and moe_tensor_parallel_rule(framework) and par.tensor_parallel > 1:
        assert par.sequence_parallel, "Megatron-Core's MoELayer needs sequence parallelism"
    domain = s.hardware.nvlink_domain_size
    assert domain % par.tensor_parallel == 0, "tensor parallel leaves the NVLink domain"
    split = stage_layers_of(s.model, par, framework)  # raises for a split the framework refuses
    assert sum(split.ranks) == s.model.num_layers
    assert entry.prediction.fits_in_memory


def _check_result(doc: dict[str, Any], top_k: int) -> list[ExploreEntry]:
    result = explore(parse_space(copy.deepcopy(doc)), top_k=top_k)
    entries = [*result.top, *(e for r in result.top for e in r.equivalents)]
    for entry in entries:
        _check_layout(entry)
    # distinct choices: each ranked layout is more than the tolerance slower than the one before
    times = [e.prediction.iteration_time_s for e in result.top]
    for better, worse in itertools.pairwise(times):
        assert worse > better * (1 + DEFAULT_TOLERANCE)
    for ranked in result.top:
        for equivalent in ranked.equivalents:
            t = equivalent.prediction.iteration_time_s
            assert t <= ranked.prediction.iteration_time_s * (1 + DEFAULT_TOLERANCE)
    return list(result.top)


@pytest.mark.parametrize("name", FAST_SPACES)
def test_top_layouts_of_the_fast_benchmark_spaces_pass_every_rule(name: str) -> None:
    top = _check_result(SPACES[name], top_k=3)
    assert len(top) == 3


def test_deepseek_v3_on_2048_h100_offers_pipeline_8_and_16() -> None:
    doc = SPACES["deepseek-v3-h100-2048"]
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    degrees = {int(p) for p in sub.pipelines[:, 0]}
    assert {8, 16} <= degrees  # 61 layers: uneven first / last ranks (e.g. 1 + 14·4 + 4)
    few = copy.deepcopy(doc)
    few["parallelism"] |= DEEPSEEK_FEW_KNOBS
    _check_result(few, top_k=3)
    deep = copy.deepcopy(few)
    deep["parallelism"]["pipeline_parallel"] = [8, 16]
    top = _check_result(deep, top_k=3)
    assert {e.scenario.parallelism.pipeline_parallel for e in top} <= {8, 16}
    for entry in top:
        par = entry.scenario.parallelism
        assert (par.decoder_first_pipeline_num_layers, par.decoder_last_pipeline_num_layers) != (
            None,
            None,
        )
    # the JSON entry is a planner predict document that predicts the same
    answer = explore_document(copy.deepcopy(deep), top_k=1)
    best = answer["top"][0]
    assert "decoder_first_pipeline_num_layers" in best["parallelism"]
    (again,) = predict_documents([scenario_document(deep, best["parallelism"], best["num_gpus"])])
    assert again == best["prediction"]


def test_the_ranking_keeps_fp8_weights_and_names_the_fields_explore_refuses() -> None:
    """``benchmarks.explore --ranking`` of a run with FP8 weights and offloaded activations:
    the FP8 weights stay in its space (explore carries them), the offloading is left out and
    named; the published layout is ranked among the timed candidates."""
    doc: dict[str, Any] = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {
            "tensor_parallel": 1,
            "data_parallel": 8,
            "micro_batch_size": 1,
            "global_batch_size": 64,
            "zero_stage": 1,
            "precision": "fp8",
            "fp8_recipe": "tensorwise",
            "fp8_param_gather": True,
            "activation_offload_layers": 8,
        },
        "training": {"framework": "nemo"},
    }
    case = Case(
        source="test", config_id="fp8-weights", document=doc,
        measured_iteration_time_s=1.0, derived_from="test",
    )  # fmt: skip
    ranked = rank_case(case)
    assert ranked["dropped"] == ["activation_offload_layers"]
    assert ranked["fits"]
    assert 1 <= ranked["rank"] <= ranked["timed"]
    assert ranked["best_s"] <= ranked["predicted_s"]
