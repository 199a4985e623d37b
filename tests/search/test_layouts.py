"""The explorer on the layouts issue 13 opened: uneven splits, folded expert layouts, the
interleaved micro-batch rule, equivalent layouts counted once, the memory headroom."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from planner.perf.step import predict
from planner.scenario import parse_scenario, predict_documents
from planner.scenario.plans import explore_document, parse_space, scenario_document
from planner.search import explore, sweep
from planner.search.space import EQUIVALENT_LAYOUT

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
    # 14 layers split over 4, 8 or 16 ranks only with the embedding and loss slots
    assert set(p[both].tolist()) >= {4, 8, 16}
    assert not np.any((p > 2) & ~both)
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
    bare = explore(parse_space(copy.deepcopy(doc)), top_k=1000)
    hbm = bare.top[0].prediction.hbm_bytes
    free = [hbm - e.prediction.memory_per_gpu_bytes for e in bare.top]
    tight = min(free)
    assert tight >= 0
    headroom_gib = (tight + 1) / 2**30 + 0.5  # more than the tightest layout leaves free
    doc["hardware"]["memory_headroom_gib"] = headroom_gib
    safe = explore(parse_space(copy.deepcopy(doc)), top_k=1000)
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
    assert "explicit split" in explore_document(doc)["error"]
