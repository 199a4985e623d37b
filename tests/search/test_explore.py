"""Exploration: counts, one engine with `planner predict`, ordering, Pareto front, errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from planner.errors import InfeasibleError, SpecError
from planner.perf.candidates import candidate_arrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate
from planner.perf.memory import memory_arrays
from planner.perf.step import predict
from planner.scenario import parse_scenario, predict_documents
from planner.scenario.plans import (
    explore_document,
    explore_documents,
    parse_space,
    scenario_document,
)
from planner.search import REJECT_REASONS, Objective, explore, sweep
from planner.search.space import EQUIVALENT_LAYOUT, OUT_OF_MEMORY
from planner.specs.parallelism import Recompute


def layout_of(cols: Any, i: int) -> dict[str, Any]:
    """The scenario-format ``parallelism`` section of candidate ``i`` (valid or not)."""
    return {
        "tensor_parallel": int(cols.tensor_parallel[i]),
        "pipeline_parallel": int(cols.pipeline_parallel[i]),
        "context_parallel": int(cols.context_parallel[i]),
        "expert_parallel": int(cols.expert_parallel[i]),
        "data_parallel": int(cols.data_parallel[i]),
        "virtual_pipeline": int(cols.virtual_pipeline[i]),
        "sequence_parallel": bool(cols.sequence_parallel[i]),
        "micro_batch_size": int(cols.micro_batch_size[i]),
        "global_batch_size": int(cols.global_batch_size[i]),
        "recompute": Recompute.from_code(int(cols.recompute[i])).value,
        "zero_stage": int(cols.zero_stage[i]),
        "account_for_embedding_in_pipeline_split": bool(
            cols.flag("account_for_embedding_in_pipeline_split")[i]
        ),
        "account_for_loss_in_pipeline_split": bool(
            cols.flag("account_for_loss_in_pipeline_split")[i]
        ),
    }


def _all_valid(doc: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """Every candidate of the (single) sub-space that tiles the GPUs, timed by the engine."""
    space = parse_space(doc)
    (sub,) = space.subspaces
    cols, reason = sub.decode(0, sub.size)
    cols = cols.take(np.flatnonzero(reason < 0))
    arrays = candidate_arrays(sub.base_arrays, cols)
    result = evaluate(arrays, DefaultEfficiency())
    return space, cols, arrays, result


def test_counts_add_up_and_equal_the_product(small: dict[str, Any]) -> None:
    space = parse_space(small)
    outcome = sweep(space)
    sizes = [len(v) for v in space.subspaces[0].values]
    assert outcome.enumerated == math.prod(sizes) == space.size
    assert outcome.enumerated == outcome.evaluated + sum(outcome.rejected.values())
    assert set(outcome.rejected) == set(REJECT_REASONS)
    assert outcome.evaluated > 0


def test_top_entries_are_planner_predict_for_that_layout(small: dict[str, Any]) -> None:
    space = parse_space(small)
    result = explore(space, top_k=5)
    assert [e.rank for e in result.top] == [1, 2, 3, 4, 5]
    assert [e.prediction for e in result.top] == [predict(e.scenario) for e in result.top]
    top = explore_document(small, top_k=5)["top"]
    assert [e["rank"] for e in top] == [1, 2, 3, 4, 5]
    docs = [scenario_document(small, e["parallelism"], e["num_gpus"]) for e in top]
    assert predict_documents(docs) == [e["prediction"] for e in top]
    # and the vectorized sweep's objective is the same number
    for entry, value in zip(top, result.outcome.top_objective, strict=True):
        assert entry["prediction"]["iteration_time_s"] == pytest.approx(value, rel=1e-9)


def test_other_parallelism_fields_reach_every_candidate(small: dict[str, Any]) -> None:
    """Precision, gradient-reduction precision and overlap are one value per document: the
    sweep times every candidate with them and each entry's layout states them."""
    fixed = {
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        "grad_reduce_in_fp32": True,
    }
    small["parallelism"].update(fixed, zero_stage=[1])
    result = explore(parse_space(small), top_k=3)
    top = explore_document(small, top_k=3)["top"]
    for entry in top:
        assert fixed.items() <= entry["parallelism"].items()
    docs = [scenario_document(small, e["parallelism"], e["num_gpus"]) for e in top]
    assert predict_documents(docs) == [e["prediction"] for e in top]
    for entry, value in zip(top, result.outcome.top_objective, strict=True):
        assert entry["prediction"]["iteration_time_s"] == pytest.approx(value, rel=1e-9)
    overlapped = explore(
        parse_space({**small, "parallelism": {"global_batch_size": 64, "zero_stage": [1]}})
    )
    best = result.top[0].prediction.iteration_time_s
    assert overlapped.top[0].prediction.iteration_time_s < best
    small["parallelism"]["overlap_grad_reduce"] = [True, False]
    with pytest.raises(SpecError, match=r"parallelism\.overlap_grad_reduce"):
        parse_space(small)


def test_vectorized_and_one_at_a_time_agree(small: dict[str, Any]) -> None:
    _, cols, _, result = _all_valid(small)
    rng = np.random.default_rng(1)
    pick = rng.choice(cols.n, 100, replace=False)
    mem = result.memory.total
    for i in pick:
        doc = scenario_document(small, layout_of(cols, int(i)), 16)
        pred = predict_documents([doc])[0]
        assert pred["iteration_time_s"] == pytest.approx(result.iteration_time_s[i], rel=1e-9)
        assert pred["memory_per_gpu_bytes"] == pytest.approx(mem[i], rel=1e-9)


def test_reject_reasons_match_the_scenario_rules(small: dict[str, Any]) -> None:
    space = parse_space(small)
    (sub,) = space.subspaces
    rng = np.random.default_rng(2)
    index = rng.choice(sub.size, 300, replace=False)
    cols, reason = sub.decode_at(index)
    for i in range(cols.n):
        doc = scenario_document(small, layout_of(cols, i), 16)
        if reason[i] < 0 or reason[i] == EQUIVALENT_LAYOUT:
            parse_scenario(doc)  # valid layouts (and the equivalent ones) are valid scenarios
        else:
            with pytest.raises(SpecError):
                parse_scenario(doc)


def test_best_is_the_minimum_over_every_fitting_layout(small: dict[str, Any]) -> None:
    _, _, arrays, result = _all_valid(small)
    fits = result.memory.total + arrays.memory_headroom_bytes <= arrays.hbm_bytes
    outcome = sweep(parse_space(small), top_k=3)
    assert outcome.top_objective[0] == result.iteration_time_s[fits].min()
    assert outcome.evaluated == int(fits.sum())
    assert np.all(np.diff(outcome.top_objective) >= 0)


def test_pareto_front_is_exactly_the_non_dominated_set(small: dict[str, Any]) -> None:
    _, _, arrays, result = _all_valid(small)
    fits = result.memory.total + arrays.memory_headroom_bytes <= arrays.hbm_bytes
    t, m = result.iteration_time_s[fits], result.memory.total[fits]
    outcome = sweep(parse_space(small))
    ft = outcome.pareto_objective
    front_mem = memory_arrays(
        candidate_arrays(parse_space(small).subspaces[0].base_arrays, outcome.pareto),
        DefaultEfficiency(),
    ).total
    # no front member dominates another
    for i in range(len(ft)):
        others = np.arange(len(ft)) != i
        assert not np.any(
            (ft[others] <= ft[i])
            & (front_mem[others] <= front_mem[i])
            & ((ft[others] < ft[i]) | (front_mem[others] < front_mem[i]))
        )
    # every evaluated layout is matched or dominated by a front member
    covered = (ft[None, :] <= t[:, None]) & (front_mem[None, :] <= m[:, None])
    assert covered.any(axis=1).all()


def test_same_outcome_whatever_workers_and_chunk_size(small: dict[str, Any]) -> None:
    space = parse_space(small)
    a = sweep(space, top_k=7)
    b = sweep(space, top_k=7, workers=2, chunk_size=4096)
    assert a.evaluated == b.evaluated
    assert a.rejected == b.rejected
    np.testing.assert_array_equal(a.top_objective, b.top_objective)
    np.testing.assert_array_equal(a.pareto_objective, b.pareto_objective)
    np.testing.assert_array_equal(a.top.tensor_parallel, b.top.tensor_parallel)


def test_given_lists_restrict_the_knobs(small: dict[str, Any]) -> None:
    small["parallelism"].update(
        tensor_parallel=[2, 4], recompute="full", zero_stage=[1], sequence_parallel=True
    )
    result = explore(parse_space(small), top_k=20)
    for entry in result.top + result.pareto:
        p = entry.scenario.parallelism
        assert p.tensor_parallel in (2, 4)
        assert p.recompute is Recompute.FULL
        assert p.zero_stage == 1
        assert p.sequence_parallel


def test_data_parallel_list_filters_the_derived_degree(small: dict[str, Any]) -> None:
    small["parallelism"]["data_parallel"] = [4]
    outcome = sweep(parse_space(small), top_k=50)
    assert set(outcome.top.data_parallel.tolist()) == {4}
    assert outcome.rejected["data_parallel_not_allowed"] > 0


def test_gpu_count_list_and_tokens_per_gpu_objective(small: dict[str, Any]) -> None:
    small["hardware"]["num_gpus"] = [8, 16]
    space = parse_space(small)
    assert [s.num_gpus for s in space.subspaces] == [8, 16]
    result = explore(space, objective=Objective.TOKENS_PER_GPU, top_k=3)
    per_gpu = [e.prediction.tokens_per_s_per_gpu for e in result.top]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert result.pareto_criteria[0] == "tokens_per_s_per_gpu"
    body = explore_document(small, objective=Objective.TOKENS_PER_GPU, top_k=3)
    assert body["pareto_criteria"][0] == "tokens_per_s_per_gpu"


def test_cost_objective_reports_gpu_hours(small: dict[str, Any]) -> None:
    small["hardware"]["num_gpus"] = [8, 16]
    result = explore_document(small, objective=Objective.COST, top_k=2)
    top = result["top"][0]
    assert top["gpu_hours"] == pytest.approx(
        top["num_gpus"] * top["prediction"]["time_to_train_s"] / 3600.0
    )


def test_time_to_train_needs_a_token_budget(small: dict[str, Any]) -> None:
    del small["training"]
    with pytest.raises(SpecError, match=r"training\.total_tokens"):
        sweep(parse_space(small), objective=Objective.TIME_TO_TRAIN)


def test_moe_model_enumerates_expert_parallelism() -> None:
    doc = {
        "model": {
            "num_layers": 4,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "seq_length": 512,
            "vocab_size": 8000,
            "num_experts": 8,
            "moe_router_topk": 2,
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"global_batch_size": 32, "recompute": "none", "zero_stage": 1},
    }
    space = parse_space(doc)
    assert space.subspaces[0].values[3].tolist() == [1, 2, 4, 8]
    result = explore(space, top_k=50)
    assert {e.scenario.parallelism.expert_parallel for e in result.top} > {1}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"precision": ["bf16", "fp8"]}, "parallelism.precision"),
        ({"tensor_parallel": []}, "parallelism.tensor_parallel"),
        ({"zero_stage": [1, 5]}, "parallelism.zero_stage"),
        ({"recompute": ["some"]}, "parallelism.recompute"),
        ({"tensor_paralel": 2}, "parallelism.tensor_paralel"),
        ({"sequence_parallel": "yes"}, "parallelism.sequence_parallel"),
    ],
)
def test_bad_knobs_name_the_field(
    small: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    small["parallelism"].update(change)
    with pytest.raises(SpecError) as err:
        parse_space(small)
    assert err.value.field == field


def test_model_errors_come_from_the_scenario_parser(small: dict[str, Any]) -> None:
    small["hardware"]["gpu"] = "h100-nonexistent"
    result = explore_document(small)
    assert result["error"].startswith("hardware.gpu:")


def test_out_of_memory_everywhere_says_why_and_what_fixes_it(small: dict[str, Any]) -> None:
    small["model"] = {"preset": "gpt3-175b"}
    small["hardware"]["num_gpus"] = 8
    with pytest.raises(InfeasibleError, match=r"out of memory.*GiB per GPU.*Feasible with"):
        explore(parse_space(small))


def test_untileable_layout_says_so(small: dict[str, Any]) -> None:
    small["hardware"]["num_gpus"] = 3
    small["parallelism"].update(tensor_parallel=[2], pipeline_parallel=1, context_parallel=1)
    result = explore_document(small)
    assert result["error"].startswith("infeasible: no valid layout")
    assert "gpus_not_divisible_by_tp_pp_cp" in result["error"]


def test_a_sweep_of_documents_reports_each(small: dict[str, Any]) -> None:
    bad = {**small, "name": "bad", "parallelism": {"global_batch_size": 64, "zero_stage": 9}}
    results = list(explore_documents([small, bad], top_k=1))
    assert results[0]["name"] == "small"
    assert len(results[0]["top"]) == 1
    assert results[1] == {"name": "bad", "error": results[1]["error"]}
    assert results[1]["error"].startswith("parallelism.zero_stage:")


def test_rank_offset_pages_the_ranking(small: dict[str, Any]) -> None:
    space = parse_space(small)
    full = explore(space, top_k=6, with_pareto=False).top
    page = explore(space, top_k=3, rank_offset=3, with_pareto=False).top
    assert [e.rank for e in page] == [4, 5, 6]
    assert [e.scenario for e in page] == [e.scenario for e in full[3:]]


def test_huge_spaces_are_never_materialised(small: dict[str, Any]) -> None:
    small["parallelism"].update(
        tensor_parallel=list(range(1, 101)),
        pipeline_parallel=list(range(1, 101)),
        micro_batch_size=list(range(1, 65)),
    )
    space = parse_space(small)
    assert space.size > 10**8
    sub = space.subspaces[0]
    cols, reason = sub.decode(sub.size - 1000, sub.size)  # only the chunk asked for
    assert cols.n == 1000
    assert reason.shape == (1000,)
    assert len(REJECT_REASONS) - 1 == OUT_OF_MEMORY


def test_objective_by_name(small: dict[str, Any]) -> None:
    space = parse_space(small)
    assert explore(space, objective="tokens-per-gpu", top_k=1).objective is Objective.TOKENS_PER_GPU
    with pytest.raises(SpecError, match="unknown objective"):
        sweep(space, objective="speed")


@pytest.mark.parametrize(
    ("par", "named"),
    [
        ({"exp_avg_dtype": "bf16", "zero_stage": [0]}, "parallelism.main_params_dtype fp16"),
        ({"main_params_dtype": "bf16", "zero_stage": [0, 1, 2]}, "main_params_dtype bf16"),
    ],
)
def test_stages_refused_for_the_optimizer_dtypes_name_the_field(
    small: dict[str, Any], par: dict[str, Any], named: str
) -> None:
    """Every candidate that tiles the GPUs refused for the optimizer dtypes at the allowed ZeRO
    stages (Megatron-Core's optimizer): the error names the fields and the fixes (open
    zero_stage, megatron_fsdp), not the tiling; with megatron_fsdp the same space runs."""
    small["training"] = {"framework": "megatron"}
    small["parallelism"].update(par)
    result = explore_document(small)
    assert result["error"].startswith("infeasible: no valid layout")
    assert named in result["error"]
    assert "set megatron_fsdp to true" in result["error"]
    assert "tiles the GPU count" not in result["error"]
    small["parallelism"]["megatron_fsdp"] = True
    assert explore(parse_space(small), top_k=1).top
