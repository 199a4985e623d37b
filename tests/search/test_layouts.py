"""The explorer on uneven splits, folded expert layouts, the interleaved micro-batch rule,
equivalent layouts counted once, the memory headroom."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf.step import predict
from planner.scenario import parse_scenario, predict_documents
from planner.scenario.plans import explore_document, parse_space, scenario_document
from planner.search import explore, sweep
from planner.search.space import EQUIVALENT_LAYOUT
from tests.search.test_space import FP8_WEIGHTS

QWEN_LIKE: dict[str, Any] = {
    "name": "qwen-like",
    "model": {
        "num_layers": 14,  # 14 + 2 = 16: the account_for options split it over 2, 4, 8, 16
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_query_groups": 4,
        "seq_length": 2048,
        "vocab_size": 32000,
        "activation": "swiglu",
        "num_experts": 32,
        "moe_router_topk": 4,
        "moe_ffn_hidden_size": 512,
    },
    "hardware": {"gpu": "h100-sxm", "num_gpus": 32},
    "parallelism": {"global_batch_size": 128, "recompute": ["none"], "context_parallel": 1},
}


def test_the_explorer_searches_uneven_splits_and_folded_expert_layouts() -> None:
    space = parse_space(copy.deepcopy(QWEN_LIKE))
    (sub,) = space.subspaces
    cols, reason = sub.decode(0, sub.size)
    ok = reason < 0
    p = cols.pipeline_parallel[ok]
    both = (
        cols.flag("account_for_embedding_in_pipeline_split")[ok]
        & cols.flag("account_for_loss_in_pipeline_split")[ok]
    )
    first, last = cols.decoder_first_pipeline_num_layers, cols.decoder_last_pipeline_num_layers
    assert first is not None  # the search's candidates have every column
    assert last is not None
    uneven = ((first > 0) | (last > 0))[ok]
    # 14 layers split over 4, 8 or 16 ranks only with the embedding and loss slots, or with
    # uneven first / last ranks (4 ranks: 2 + 4 + 4 + 4 and 4 + 4 + 4 + 2)
    assert set(p[both].tolist()) >= {4, 8, 16}
    assert not np.any((p > 2) & ~both & ~uneven)
    assert set(p[uneven].tolist()) == {4}
    # expert groups wider than data x context: only with folding (etp < tp)
    tp, etp, ep, dp = (
        getattr(cols, name)[ok]
        for name in (
            "tensor_parallel",
            "expert_tensor_parallel",
            "expert_parallel",
            "data_parallel",
        )
    )
    folded = ep > dp
    assert np.any(folded)
    assert np.all((tp * dp) % (etp * ep) == 0)
    assert np.all(etp[folded] < tp[folded])
    # every valid candidate is a scenario planner predict accepts and predicts alike
    result = explore(space, top_k=20)
    for entry in result.top:
        assert predict(entry.scenario) == entry.prediction
    top = explore_document(copy.deepcopy(QWEN_LIKE), top_k=20)["top"]
    docs = [scenario_document(QWEN_LIKE, e["parallelism"], e["num_gpus"]) for e in top]
    assert predict_documents(docs) == [e["prediction"] for e in top]
    assert all("expert_tensor_parallel" in e["parallelism"] for e in top)


def test_the_torchtitan_explorer_uses_torchtitans_default_split() -> None:
    doc = copy.deepcopy(QWEN_LIKE)
    doc["model"] = {"preset": "llama3-8b", "num_layers": 30}
    doc["training"] = {"framework": "torchtitan"}
    doc["parallelism"] |= {
        "pipeline_parallel": [4],
        "virtual_pipeline": [1, 2],
        "account_for_embedding_in_pipeline_split": [False],
        "account_for_loss_in_pipeline_split": [False],
        "decoder_first_pipeline_num_layers": [None],
        "decoder_last_pipeline_num_layers": [None],
        "tensor_parallel": [1],
    }
    outcome = sweep(parse_space(doc))
    # 30 layers over 4 ranks: Megatron-Core would refuse, torchtitan splits (8, 8, 8, 6) -
    # 32 effective layers of 8, the first and last stage one lighter
    assert outcome.evaluated > 0
    megatron = copy.deepcopy(doc)
    megatron["training"] = {"framework": "megatron"}
    refused = sweep(parse_space(megatron))
    assert refused.evaluated == 0
    assert refused.rejected["layers_not_divisible_by_pp_vp"] > 0
    # with the uneven first / last ranks open, Megatron-Core splits them with at most 8 layers
    # on a rank: 6 + 8 + 8 + 8, 7 + 8 + 8 + 7, 8 + 8 + 8 + 6 or 8 + 7 + 7 + 8
    for name in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"):
        del megatron["parallelism"][name]
    uneven = explore(parse_space(megatron), top_k=50, tolerance=None)
    splits = {
        (e.scenario.parallelism.decoder_first_pipeline_num_layers or 0,
         e.scenario.parallelism.decoder_last_pipeline_num_layers or 0)
        for e in uneven.top
    }  # fmt: skip
    assert splits <= {(6, 8), (8, 6), (7, 7), (8, 8)}
    assert len(splits) >= 2


def test_interleaved_candidates_follow_the_frameworks_microbatch_rule() -> None:
    doc = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {
            "global_batch_size": 6,
            "tensor_parallel": [1],
            "pipeline_parallel": [4],
            "virtual_pipeline": [2],
            "recompute": ["full"],
        },
    }
    megatron = sweep(parse_space(doc))
    # 6 sequences over 2 replicas: 3 (or fewer) micro-batches, never a multiple of 4
    assert megatron.evaluated == 0
    assert megatron.rejected["microbatches_invalid_for_interleaved_schedule"] > 0
    error = explore_document(copy.deepcopy(doc))["error"]
    assert error.startswith("infeasible: ")
    titan = copy.deepcopy(doc) | {"training": {"framework": "torchtitan"}}
    assert sweep(parse_space(titan)).evaluated > 0  # torch runs m < p in one round


def test_equivalent_layouts_are_listed_once() -> None:
    """ZeRO stages 0, 1 and 2 over a data-parallel group of one rank are one layout: the
    top-k lists it once (as the lowest allowed stage) and counts the others as equivalent."""
    doc = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"global_batch_size": 16, "tensor_parallel": [8], "recompute": ["none"]},
    }
    result = explore(parse_space(copy.deepcopy(doc)), top_k=50)
    assert result.rejected["equivalent_layout"] > 0
    keys = []
    for entry in result.top:
        par = entry.scenario.parallelism
        assert not (par.data_parallel == 1 and par.zero_stage in (1, 2))
        keys.append((par.pipeline_parallel, par.virtual_pipeline, par.micro_batch_size,
                     par.sequence_parallel, par.zero_stage))  # fmt: skip
    assert len(keys) == len(set(keys))
    # equivalent candidates are valid scenarios predicted the same as the one kept
    space = parse_space(copy.deepcopy(doc))
    (sub,) = space.subspaces
    cols, reason = sub.decode(0, sub.size)
    same = np.flatnonzero(reason == EQUIVALENT_LAYOUT)[:20]
    for i in same:
        kept = space.scenario(cols, int(i))
        zero0 = predict(parse_scenario(
            {"model": doc["model"], "hardware": doc["hardware"],
             "parallelism": {**_layout(kept), "zero_stage": 0}}
        ))  # fmt: skip
        assert predict(kept).iteration_time_s == pytest.approx(zero0.iteration_time_s, rel=1e-12)
    # with stages 1 and 2 allowed, stage 1 is the one kept
    doc["parallelism"]["zero_stage"] = [1, 2]
    top = explore(parse_space(doc), top_k=10).top
    assert {
        e.scenario.parallelism.zero_stage for e in top if e.scenario.parallelism.data_parallel == 1
    } <= {1}


def _layout(s: Any) -> dict[str, Any]:
    par = s.parallelism
    return {
        "tensor_parallel": par.tensor_parallel,
        "pipeline_parallel": par.pipeline_parallel,
        "data_parallel": par.data_parallel,
        "virtual_pipeline": par.virtual_pipeline,
        "sequence_parallel": par.sequence_parallel,
        "micro_batch_size": par.micro_batch_size,
        "global_batch_size": par.global_batch_size,
        "recompute": par.recompute.value,
    }


def test_the_memory_headroom_is_what_fits_means() -> None:
    """predict's fits_in_memory and the explorer's pruning use the same headroom."""
    doc = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8, "memory_headroom_gib": 0},
        "parallelism": {"global_batch_size": 64, "tensor_parallel": [1, 2], "recompute": ["none"]},
    }
    bare = explore(parse_space(copy.deepcopy(doc)), top_k=1000, tolerance=None)
    hbm = bare.top[0].prediction.hbm_bytes
    free = [hbm - e.prediction.memory_per_gpu_bytes for e in bare.top]
    tight = min(free)
    assert tight >= 0
    headroom_gib = (tight + 1) / 2**30 + 0.5  # more than the tightest layout leaves free
    doc["hardware"]["memory_headroom_gib"] = headroom_gib
    safe = explore(parse_space(copy.deepcopy(doc)), top_k=1000, tolerance=None)
    assert safe.evaluated < bare.evaluated
    for entry in safe.top:
        assert hbm - entry.prediction.memory_per_gpu_bytes >= headroom_gib * 2**30
        assert entry.prediction.fits_in_memory
    tight_entry = bare.top[int(np.argmin(free))]
    assert not predict(
        parse_scenario(
            {"model": doc["model"], "hardware": doc["hardware"],
             "parallelism": {**_layout(tight_entry.scenario),
                             "zero_stage": tight_entry.scenario.parallelism.zero_stage}}
        )
    ).fits_in_memory  # fmt: skip
    # the default headroom is 1 GiB
    default = parse_scenario({**doc, "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
                              "parallelism": {"global_batch_size": 64}})  # fmt: skip
    p = predict(default)
    assert p.fits_in_memory == (p.memory_per_gpu_bytes + 2**30 <= p.hbm_bytes)


def test_explicit_splits_are_for_predict() -> None:
    doc = copy.deepcopy(QWEN_LIKE)
    doc["parallelism"]["pipeline_layout"] = "Ett|tL"
    assert "explicit layout" in explore_document(doc)["error"]


def test_open_tensor_parallel_stays_inside_the_nvlink_domain() -> None:
    """Open tensor-parallel degrees divide hardware.nvlink_domain_size (8 on H100 SXM); a
    space that lists a wider degree gets it (tensor parallelism across domains on request)."""
    doc: dict[str, Any] = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 64},
        "parallelism": {"global_batch_size": 64, "recompute": ["full"], "zero_stage": [1]},
    }
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    assert sub.values[0].tolist() == [1, 2, 4, 8]
    listed = copy.deepcopy(doc)
    listed["parallelism"]["tensor_parallel"] = [8, 16, 32]
    (sub,) = parse_space(listed).subspaces
    assert sub.values[0].tolist() == [8, 16, 32]
    wide = copy.deepcopy(doc)
    wide["hardware"]["nvlink_domain_size"] = 32
    (sub,) = parse_space(wide).subspaces
    assert sub.values[0].tolist() == [1, 2, 4, 8, 16, 32]
    # nothing fits: the answer says that wider tensor parallelism has to be listed
    tiny = copy.deepcopy(doc)
    tiny["model"] = {"preset": "llama3-70b"}
    tiny["hardware"]["num_gpus"] = 8
    tiny["parallelism"] = {"global_batch_size": 8, "pipeline_parallel": [1], "zero_stage": [0]}
    error = explore_document(tiny)["error"]
    assert "nvlink_domain_size = 8" in error
    assert "list parallelism.tensor_parallel" in error


def test_uneven_first_last_ranks_are_knobs_of_an_explore_document() -> None:
    """Open: Megatron-Core's splits whose busiest rank holds ⌈L/p⌉ layers; a list crosses the
    listed counts (null: unset); [null] for both searches none."""
    doc = copy.deepcopy(QWEN_LIKE)
    doc["model"]["num_layers"] = 13  # 13 over 4 ranks: 4 + 3 + 3 + 3 and the like
    doc["parallelism"] |= {"pipeline_parallel": [4], "virtual_pipeline": [1]}
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    rows = {(int(r[4]), int(r[5])) for r in sub.pipelines}
    # 2·m + f + l = 13 with every rank at most 4: (1, 4), (4, 1), (2, 3), (3, 2) over middle
    # ranks of 4; (3, 4), (4, 3) over middle ranks of 3 ((4, 4) leaves 5 layers to 2 ranks)
    assert rows - {(0, 0)} == {(1, 4), (2, 3), (3, 2), (4, 1), (3, 4), (4, 3)}
    none = copy.deepcopy(doc)
    none["parallelism"] |= {
        "decoder_first_pipeline_num_layers": [None],
        "decoder_last_pipeline_num_layers": [None],
    }
    (sub,) = parse_space(none).subspaces
    assert {(int(r[4]), int(r[5])) for r in sub.pipelines} <= {(0, 0)}
    listed = copy.deepcopy(doc)
    listed["parallelism"] |= {
        "decoder_first_pipeline_num_layers": [1, None],
        "decoder_last_pipeline_num_layers": [None],
    }
    (sub,) = parse_space(listed).subspaces
    assert {(int(r[4]), int(r[5])) for r in sub.pipelines} - {(0, 0)} == {(1, 0)}
    result = explore(parse_space(listed), top_k=3)
    for entry in result.top:
        par = entry.scenario.parallelism
        assert par.decoder_last_pipeline_num_layers is None
        assert par.decoder_first_pipeline_num_layers in (1, None)
        assert predict(entry.scenario) == entry.prediction
    for bad in ([0], ["x"], []):
        wrong = copy.deepcopy(doc)
        wrong["parallelism"]["decoder_first_pipeline_num_layers"] = bad
        assert explore_document(wrong)["error"].startswith(
            "parallelism.decoder_first_pipeline_num_layers"
        )


def test_explore_refuses_a_pipeline_batch_it_cannot_carry_to_every_candidate() -> None:
    doc = copy.deepcopy(QWEN_LIKE)
    doc["parallelism"]["pipeline_batch_size"] = 8
    with pytest.raises(SpecError, match=r"parallelism\.pipeline_batch_size.*divide each candidate"):
        parse_space(doc)


def test_fp8_weights_are_carried_into_every_candidate() -> None:
    """``fp8_param_gather`` is one value per explore document: every candidate keeps its
    weights in FP8, the vectorized sweep times them as ``predict`` does, and every entry
    states the field, so it predicts as it stands."""
    doc = copy.deepcopy(FP8_WEIGHTS)
    doc["hardware"]["num_gpus"] = 16
    doc["parallelism"]["zero_stage"] = [1, 3]
    del doc["parallelism"]["micro_batch_size"]
    fp8_weights = explore(parse_space(copy.deepcopy(doc)), top_k=20, tolerance=None)
    assert fp8_weights.top
    for entry in fp8_weights.top:
        assert entry.scenario.parallelism.fp8_param_gather is True
        assert predict(entry.scenario) == entry.prediction
    sixteen_bit = copy.deepcopy(doc)
    sixteen_bit["parallelism"]["fp8_param_gather"] = False
    bf16_weights = explore(parse_space(sixteen_bit), top_k=20, tolerance=None)
    layout = _layout(fp8_weights.top[0].scenario)
    twin = next(e for e in bf16_weights.top if _layout(e.scenario) == layout
                and e.scenario.parallelism.zero_stage
                == fp8_weights.top[0].scenario.parallelism.zero_stage)  # fmt: skip
    # the data-parallel parameter gathers move one byte per weight instead of two
    assert fp8_weights.top[0].prediction.iteration_time_s < twin.prediction.iteration_time_s
    out = explore_document(copy.deepcopy(doc), top_k=1)
    (best,) = out["top"]
    assert best["parallelism"]["fp8_param_gather"] is True
    again = predict_documents([scenario_document(doc, best["parallelism"], best["num_gpus"])])[0]
    assert again["iteration_time_s"] == best["prediction"]["iteration_time_s"]
