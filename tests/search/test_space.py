"""The typed design space: counts per rejection reason, knobs, candidates as scenarios."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf.step import predict
from planner.scenario import parse_scenario
from planner.scenario.plans import parse_space
from planner.search import REJECT_REASONS, DesignSpace, Knobs, explore, sweep
from planner.specs.parallelism import Recompute

MIXED: dict[str, Any] = {
    "model": {
        "num_layers": 6,
        "hidden_size": 768,
        "num_attention_heads": 12,
        "num_query_groups": 4,
        "ffn_hidden_size": 3000,
        "seq_length": 1000,
        "vocab_size": 32000,
        "num_experts": 4,
        "moe_router_topk": 2,
        "moe_ffn_hidden_size": 1000,
    },
    "hardware": {"gpu": "h100-sxm", "num_gpus": [16, 24]},
    "parallelism": {
        "global_batch_size": [48, 96],
        "tensor_parallel": [1, 2, 3, 4, 8],
        "pipeline_parallel": [1, 2, 3, 4],
        "context_parallel": [1, 2, 3, 4, 5],
        "expert_parallel": [1, 2, 3, 4],
        "virtual_pipeline": [1, 2, 3],
        "micro_batch_size": [1, 2, 3],
        "data_parallel": [1, 2, 3, 4, 6, 8],
        "recompute": ["none"],
        "zero_stage": [1],
    },
}
"""A space that breaks every layout rule somewhere (an MoE model whose widths tensor parallel
3 or 8 do not divide, a sequence 2·3 does not divide, a data-parallel filter)."""


def test_counts_per_reason_are_pinned() -> None:
    """The counts of the rules before they moved to planner.specs.feasibility (recorded with
    the search's own copy of them): the one module rejects the same candidates.

    The search then opened the expert tensor-parallel degree (MoE parallel folding: 1 and
    the listed tensor-parallel degrees dividing the expert FFN, 4 values here) and the
    account_for_embedding/loss split options (joining the listed pipeline and virtual degrees
    where they split the layers), and added the interleaved schedule's micro-batch rule:
    28,800 candidates became 153,600 and 1,294 timed layouts 6,648 (a brute-force check of
    every 3rd candidate against ``first_violation`` agreed on each reason).

    Then the uneven first / last ranks joined the listed pipeline degrees (Megatron-Core's
    decoder_first/last_pipeline_num_layers: 6 layers over 4 ranks as 2 + 1 + 1 + 2; the
    other splits with at most 2 layers a rank are the account_for ones), 163,200 candidates,
    and Megatron-Core's rule that an MoE layer with tensor parallelism needs sequence
    parallelism refuses 6,144 of them: 4,302 timed (every 3rd candidate checked again against
    ``first_violation``: no disagreement). Megatron-Core's refusal of biased experts split by
    expert tensor parallelism rejects none of them: these experts carry no biases."""
    outcome = sweep(parse_space(copy.deepcopy(MIXED)))
    assert outcome.enumerated == 163200 == outcome.evaluated + sum(outcome.rejected.values())
    assert outcome.evaluated == 4302
    assert outcome.rejected == {
        "gpus_not_divisible_by_tp_pp_cp": 107328,
        "data_parallel_not_allowed": 3264,
        "tensor_parallel_does_not_divide_model": 10752,
        "layers_not_divisible_by_pp_vp": 10944,
        "virtual_pipeline_needs_pipeline_parallel": 6144,
        "context_parallel_does_not_divide_sequence": 4032,
        "sequence_parallel_needs_tensor_parallel": 4224,
        "sequence_not_divisible_by_tensor_parallel": 96,
        "moe_tensor_parallel_needs_sequence_parallel": 6144,
        "async_tensor_parallel_needs_sequence_parallel": 0,
        "moe_async_tensor_parallel_not_supported_by_framework": 0,
        "moe_sequence_parallel_not_supported_by_framework": 0,
        "expert_parallel_invalid": 5418,
        "experts_not_split_by_framework": 0,
        "biased_experts_need_expert_tensor_parallel_1": 0,
        "fp8_param_gather_needs_sharded_optimizer": 0,
        "precision_aware_optimizer_needs_distributed_optimizer": 0,
        "bf16_main_params_not_supported_by_framework": 0,
        "global_batch_not_divisible_by_dp_micro_batch": 384,
        "microbatches_invalid_for_interleaved_schedule": 168,
        "equivalent_layout": 0,
        "out_of_memory": 0,
    }
    assert list(outcome.rejected) == list(REJECT_REASONS)


def test_every_valid_candidate_is_a_scenario() -> None:
    space = parse_space(copy.deepcopy(MIXED))
    for sub in space.subspaces:
        cols, reason = sub.decode(0, sub.size)
        valid = np.flatnonzero(reason < 0)
        for i in valid[:: max(1, valid.size // 50)]:
            scenario = space.scenario(cols, int(i))
            assert scenario.hardware.num_gpus == sub.num_gpus
            assert scenario.parallelism.global_batch_size == sub.global_batch_size
            assert scenario.model == space.base.model


def test_a_space_built_from_specs_explores_like_its_document(small: dict[str, Any]) -> None:
    """The typed core needs no document: a base scenario, counts and knobs."""
    doc = small | {
        "name": "typed",
        "parallelism": {"global_batch_size": 64, "recompute": ["none", "full"], "zero_stage": 1},
    }
    base = parse_scenario(doc | {"parallelism": {"global_batch_size": 64}})
    space = DesignSpace(
        base=base,
        num_gpus=(16,),
        global_batch_size=(64,),
        knobs=Knobs(recompute=(Recompute.NONE, Recompute.FULL), zero_stage=(1,)),
    )
    typed = explore(space, top_k=3)
    from_document = explore(parse_space(doc), top_k=3)
    assert [e.scenario for e in typed.top] == [e.scenario for e in from_document.top]
    assert [e.prediction for e in typed.top] == [predict(e.scenario) for e in typed.top]
    assert typed.name == "typed"


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({"tensor_parallel": ()}, "parallelism.tensor_parallel"),
        ({"pipeline_parallel": (2, 0)}, "parallelism.pipeline_parallel[1]"),
        ({"zero_stage": (4,)}, "parallelism.zero_stage"),
        ({"recompute": ("full",)}, "parallelism.recompute"),
        ({"sequence_parallel": (1,)}, "parallelism.sequence_parallel"),
        ({"data_parallel": (1.5,)}, "parallelism.data_parallel"),
    ],
)
def test_knobs_are_validated(knobs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        Knobs(**knobs)
    assert err.value.field == field


def test_counts_are_validated() -> None:
    base = parse_space(copy.deepcopy(MIXED)).base
    with pytest.raises(SpecError, match=r"hardware\.num_gpus"):
        DesignSpace(base=base, num_gpus=(), global_batch_size=(8,))
    with pytest.raises(SpecError, match=r"parallelism\.global_batch_size"):
        DesignSpace(base=base, num_gpus=(8,), global_batch_size=(0,))


GPT_OSS: dict[str, Any] = {
    "name": "gpt-oss",
    "model": {"preset": "gpt-oss-20b"},
    "hardware": {"gpu": "h100-sxm", "num_gpus": 32},
    "parallelism": {"global_batch_size": 128, "micro_batch_size": [1], "tensor_parallel": [2, 4]},
}
"""GPT-OSS 20B (biased experts) on 32 H100 with tensor parallelism: the expert tensor-parallel
degree open (1 and the tensor-parallel degrees)."""


@pytest.mark.parametrize("framework", ["megatron", "nemo", "torchtitan"])
def test_biased_experts_are_searched_with_expert_tensor_parallel_1_under_megatron_core(
    framework: str,
) -> None:
    """Megatron-Core refuses biased experts split by expert tensor parallelism: under Megatron-LM
    and NeMo no such candidate is valid, and the sweep (which counts coarse classes without
    decoding them) counts under the reason exactly the candidates a full decode rejects for it;
    torchtitan shards biased experts and keeps them, as does any framework for unbiased ones."""
    reason_index = REJECT_REASONS.index("biased_experts_need_expert_tensor_parallel_1")
    refused_here = framework in ("megatron", "nemo")
    for biased in (True, False):
        doc = copy.deepcopy(GPT_OSS)
        doc["model"]["moe_expert_bias"] = biased
        doc["training"] = {"framework": framework}
        (sub,) = parse_space(copy.deepcopy(doc)).subspaces
        cols, reason = sub.decode(0, sub.size)
        split = np.asarray(cols.expert_tensor_parallel) > 1
        counted = reason == reason_index
        outcome = sweep(parse_space(copy.deepcopy(doc)))
        assert outcome.rejected["biased_experts_need_expert_tensor_parallel_1"] == counted.sum()
        if biased and refused_here:
            assert not (split & (reason < 0)).any()
            assert counted.any()
            assert split[counted].all()
            # the rule reads no micro-batch, recompute or ZeRO digit: its classes are counted
            # from the coarse table without being decoded
            assert sub.coarse_reasons is not None
            assert (sub.coarse_reasons == reason_index).any()
            top = explore(parse_space(copy.deepcopy(doc)), top_k=3).top
            entries = [*top, *(e for ranked in top for e in ranked.equivalents)]
            assert entries
            assert all(e.scenario.parallelism.expert_tensor_parallel in (None, 1) for e in entries)
        else:
            assert (split & (reason < 0)).any()
            assert not counted.any()


def test_automodel_spaces_keep_the_experts_whole() -> None:
    """Under NeMo Automodel the open expert tensor-parallel degree is 1 only (its MoE plan may
    not split the routed experts), so no candidate splits them; a listed degree above 1 is
    counted under ``experts_not_split_by_framework``, as a full decode rejects it."""
    doc = copy.deepcopy(GPT_OSS)
    doc["training"] = {"framework": "automodel"}
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    cols, reason = sub.decode(0, sub.size)
    assert set(np.asarray(cols.expert_tensor_parallel).tolist()) == {1}
    assert (np.asarray(cols.tensor_parallel)[reason < 0] > 1).any()
    top = explore(parse_space(copy.deepcopy(doc)), top_k=3).top
    assert top
    assert all(e.scenario.parallelism.expert_tensor_parallel == 1 for e in top)
    doc["parallelism"]["expert_tensor_parallel"] = [1, 2]
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    cols, reason = sub.decode(0, sub.size)
    counted = reason == REJECT_REASONS.index("experts_not_split_by_framework")
    split = np.asarray(cols.expert_tensor_parallel) > 1
    assert counted.any()
    assert not (split & (reason < 0)).any()
    outcome = sweep(parse_space(copy.deepcopy(doc)))
    assert outcome.rejected["experts_not_split_by_framework"] == counted.sum()


def test_automodel_moe_spaces_run_tensor_parallelism_without_sequence_parallelism() -> None:
    """NeMo Automodel raises for sequence parallelism in an MoE model with tensor parallelism
    (``_resolve_moe_tp_plan``): every such candidate is counted under
    ``moe_sequence_parallel_not_supported_by_framework`` (the sweep, which counts coarse
    classes without decoding them, agrees with a full decode), none is timed, and the best
    layouts run tensor parallelism without it; Megatron-LM refuses the converse."""
    reason_index = REJECT_REASONS.index("moe_sequence_parallel_not_supported_by_framework")
    for framework in ("automodel", "megatron"):
        doc = copy.deepcopy(GPT_OSS)
        doc["parallelism"]["expert_tensor_parallel"] = [1]
        doc["training"] = {"framework": framework}
        (sub,) = parse_space(copy.deepcopy(doc)).subspaces
        cols, reason = sub.decode(0, sub.size)
        sequenced = np.asarray(cols.sequence_parallel) & (np.asarray(cols.tensor_parallel) > 1)
        counted = reason == reason_index
        outcome = sweep(parse_space(copy.deepcopy(doc)))
        assert outcome.rejected["moe_sequence_parallel_not_supported_by_framework"] == counted.sum()
        top = explore(parse_space(copy.deepcopy(doc)), top_k=3).top
        assert top
        if framework == "automodel":
            assert counted.any()
            assert sequenced[counted].all()
            assert not (sequenced & (reason < 0)).any()
            assert (~sequenced & (reason < 0)).any()
            assert not any(e.scenario.parallelism.sequence_parallel for e in top)
        else:
            assert not counted.any()
            assert all(e.scenario.parallelism.sequence_parallel for e in top)


def llama2_7b_space(**parallelism: Any) -> dict[str, Any]:
    """An explore document over Llama-2 7B on 8 or 16 H100s, global batch 64, no recompute,
    micro-batch 1 or 2 and every ZeRO stage open, with ``parallelism`` fields added."""
    return {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": [8, 16]},
        "parallelism": {
            "global_batch_size": 64,
            "recompute": ["none"],
            "micro_batch_size": [1, 2],
            **parallelism,
        },
    }


FP8_WEIGHTS = llama2_7b_space(precision="fp8", fp8_recipe="tensorwise", fp8_param_gather=True)
"""Llama-2 7B with FP8 weights, every ZeRO stage open: stage 0 has no sharded optimizer."""


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_fp8_weights_need_a_sharded_optimizer_under_megatron_lm(framework: str) -> None:
    """Megatron-LM asserts the distributed optimizer or FSDP for ``--fp8-param-gather``
    (``FP8_PARAM_GATHER_SOURCE``): under it every ZeRO-0 candidate is counted under
    ``fp8_param_gather_needs_sharded_optimizer`` (sweep and full decode agree), and a layout
    with one data-parallel rank keeps stage 1 (not stage 0) among its equivalent stages. NeMo 2
    asserts no such thing, and keeps stage 0."""
    doc = copy.deepcopy(FP8_WEIGHTS)
    doc["training"] = {"framework": framework}
    reason_index = REJECT_REASONS.index("fp8_param_gather_needs_sharded_optimizer")
    space = parse_space(copy.deepcopy(doc))
    counted_total = 0
    for sub in space.subspaces:
        cols, reason = sub.decode(0, sub.size)
        zero = np.asarray(cols.zero_stage) == 0
        counted = reason == reason_index
        counted_total += int(counted.sum())
        alone = (np.asarray(cols.data_parallel) * np.asarray(cols.context_parallel)) == 1
        if framework == "megatron":
            assert counted.any()
            assert zero[counted].all()
            assert not (zero & (reason < 0)).any()
            # one data-parallel rank: stage 1 is the one timed, stage 2 its equivalent
            assert ((np.asarray(cols.zero_stage) == 1) & alone & (reason < 0)).any()
        else:
            assert not counted.any()
            assert (zero & (reason < 0)).any()
    outcome = sweep(parse_space(copy.deepcopy(doc)))
    assert outcome.rejected["fp8_param_gather_needs_sharded_optimizer"] == counted_total
    top = explore(parse_space(copy.deepcopy(doc)), top_k=5, tolerance=None).top
    assert top
    if framework == "megatron":
        assert all(e.scenario.parallelism.zero_stage != 0 for e in top)


def test_fp8_weights_under_megatron_fsdp_keep_stage_0() -> None:
    """``--use-megatron-fsdp`` passes Megatron-LM's ``--fp8-param-gather`` assertion at every
    sharding strategy (``FP8_PARAM_GATHER_SOURCE``): with ``megatron_fsdp`` no candidate is
    counted under ``fp8_param_gather_needs_sharded_optimizer`` (sweep and full decode), ZeRO-0
    layouts are timed, and one data-parallel rank keeps stage 0 among its equivalents."""
    doc = copy.deepcopy(FP8_WEIGHTS)
    doc["training"] = {"framework": "megatron"}
    doc["parallelism"]["megatron_fsdp"] = True
    reason_index = REJECT_REASONS.index("fp8_param_gather_needs_sharded_optimizer")
    for sub in parse_space(copy.deepcopy(doc)).subspaces:
        cols, reason = sub.decode(0, sub.size)
        zero = np.asarray(cols.zero_stage) == 0
        alone = (np.asarray(cols.data_parallel) * np.asarray(cols.context_parallel)) == 1
        assert not (reason == reason_index).any()
        assert (zero & alone & (reason < 0)).any()
        assert not ((np.asarray(cols.zero_stage) == 1) & alone & (reason < 0)).any()
    assert (
        sweep(parse_space(copy.deepcopy(doc))).rejected["fp8_param_gather_needs_sharded_optimizer"]
        == 0
    )
    top = explore(parse_space(copy.deepcopy(doc)), top_k=5, tolerance=None).top
    assert top
    assert all(e.scenario.parallelism.megatron_fsdp for e in top)


@pytest.mark.parametrize("framework", ["automodel", "megatron"])
def test_automodel_moe_spaces_refuse_async_tensor_parallelism(framework: str) -> None:
    """NeMo Automodel's MoE parallelizer raises for async tensor parallelism with a
    tensor-parallel mesh larger than 1 (``ASYNC_TENSOR_PARALLEL_SOURCE``): with the job's
    ``tp_comm_overlap: true`` every candidate with ``tensor_parallel`` > 1 that passes the
    rules before it is counted under ``moe_async_tensor_parallel_not_supported_by_framework``
    (the sweep, which counts coarse classes without decoding them, agrees with a full decode)
    and the layouts timed run tensor parallelism 1; Megatron-LM runs it."""
    reason_index = REJECT_REASONS.index("moe_async_tensor_parallel_not_supported_by_framework")
    doc = copy.deepcopy(GPT_OSS)
    doc["parallelism"]["tensor_parallel"] = [1, 2, 4]
    doc["parallelism"]["expert_tensor_parallel"] = [1]
    doc["parallelism"]["tp_comm_overlap"] = True
    doc["training"] = {"framework": framework}
    (sub,) = parse_space(copy.deepcopy(doc)).subspaces
    assert sub.coarse_reasons is not None  # the sweep takes the count-without-decoding path
    cols, reason = sub.decode(0, sub.size)
    tensor = np.asarray(cols.tensor_parallel) > 1
    counted = reason == reason_index
    outcome = sweep(parse_space(copy.deepcopy(doc)))
    assert outcome.rejected["moe_async_tensor_parallel_not_supported_by_framework"] == (
        counted.sum()
    )
    top = explore(parse_space(copy.deepcopy(doc)), top_k=3).top
    assert top
    if framework == "automodel":
        assert counted.any()
        assert tensor[counted].all()
        assert not (tensor & (reason < 0)).any()
        assert all(e.scenario.parallelism.tensor_parallel == 1 for e in top)
    else:
        assert not counted.any()
        assert (tensor & (reason < 0)).any()


def _dense_overlap_space(framework: str) -> dict[str, Any]:
    """Llama-2 7B on 16 H100 under ``framework``, tensor parallelism 1, 2 or 4, the job
    stating ``tp_comm_overlap: true``."""
    return {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {
            "global_batch_size": 64,
            "tensor_parallel": [1, 2, 4],
            "micro_batch_size": [1],
            "tp_comm_overlap": True,
        },
        "training": {"framework": framework},
    }


def test_automodel_dense_spaces_run_async_tensor_parallelism_with_sequence_parallelism() -> None:
    """NeMo Automodel's dense parallelizer needs sequence parallelism for async tensor
    parallelism (``ASYNC_TENSOR_PARALLEL_SOURCE``): with the job's ``tp_comm_overlap: true``
    the candidates with ``tensor_parallel`` > 1 and no sequence parallelism are counted under
    ``async_tensor_parallel_needs_sequence_parallel`` (sweep and full decode agree), those with
    it are timed; without ``tp_comm_overlap`` none is counted."""
    reason_index = REJECT_REASONS.index("async_tensor_parallel_needs_sequence_parallel")
    doc = _dense_overlap_space("automodel")
    for overlap in (True, False):
        doc["parallelism"]["tp_comm_overlap"] = overlap
        (sub,) = parse_space(copy.deepcopy(doc)).subspaces
        cols, reason = sub.decode(0, sub.size)
        tensor = np.asarray(cols.tensor_parallel) > 1
        sequenced = np.asarray(cols.sequence_parallel)
        counted = reason == reason_index
        outcome = sweep(parse_space(copy.deepcopy(doc)))
        assert outcome.rejected["async_tensor_parallel_needs_sequence_parallel"] == counted.sum()
        assert (tensor & sequenced & (reason < 0)).any()
        if overlap:
            assert counted.any()
            assert (tensor & ~sequenced)[counted].all()
            assert not (tensor & ~sequenced & (reason < 0)).any()
        else:
            assert not counted.any()
            assert (tensor & ~sequenced & (reason < 0)).any()


@pytest.mark.parametrize("framework", ["megatron", "nemo"])
def test_megatron_lm_spaces_run_tp_comm_overlap_with_sequence_parallelism(framework: str) -> None:
    """Megatron-LM refuses ``--tp-comm-overlap`` without sequence parallelism, which it turns
    off at tensor parallelism 1 (``TP_COMM_OVERLAP_SEQUENCE_SOURCE``): with the job's
    ``tp_comm_overlap: true`` the space still parses (its pure data-parallel base leaves the
    overlap out and the space carries it), every candidate with tensor parallelism 1 or no
    sequence parallelism is counted under ``async_tensor_parallel_needs_sequence_parallel``
    (sweep and full decode agree), and the layouts timed state the overlap and run tensor and
    sequence parallelism; without the field none is counted. NeMo drops the overlap instead
    of refusing and counts none."""
    reason_index = REJECT_REASONS.index("async_tensor_parallel_needs_sequence_parallel")
    doc = _dense_overlap_space(framework)
    for overlap in (True, None):
        if overlap is None:
            del doc["parallelism"]["tp_comm_overlap"]
        (sub,) = parse_space(copy.deepcopy(doc)).subspaces
        assert sub.coarse_reasons is not None  # the sweep counts without decoding
        cols, reason = sub.decode(0, sub.size)
        without = (np.asarray(cols.tensor_parallel) == 1) | ~np.asarray(cols.sequence_parallel)
        counted = reason == reason_index
        outcome = sweep(parse_space(copy.deepcopy(doc)))
        assert outcome.rejected["async_tensor_parallel_needs_sequence_parallel"] == counted.sum()
        top = explore(parse_space(copy.deepcopy(doc)), top_k=3).top
        assert top
        assert all(e.scenario.parallelism.tp_comm_overlap is overlap for e in top)
        if overlap and framework == "megatron":
            assert counted.any()
            assert without[counted].all()
            assert not (without & (reason < 0)).any()
            assert all(e.scenario.parallelism.sequence_parallel for e in top)
            assert all(e.scenario.parallelism.tensor_parallel > 1 for e in top)
        else:
            assert not counted.any()
            assert (without & (reason < 0)).any()


PRECISION_AWARE = llama2_7b_space(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")
"""Llama-2 7B with bf16 Adam moments, every ZeRO stage open."""


@pytest.mark.parametrize(
    ("framework", "par", "reason", "refused_stages"),
    [
        ("megatron", {}, "precision_aware_optimizer_needs_distributed_optimizer", {0}),
        ("nemo", {}, "precision_aware_optimizer_needs_distributed_optimizer", {0}),
        (
            "megatron",
            {"main_params_dtype": "bf16", "exp_avg_dtype": None, "exp_avg_sq_dtype": None},
            "bf16_main_params_not_supported_by_framework",
            {0, 1, 2},
        ),
        ("torchtitan", {}, "precision_aware_optimizer_needs_distributed_optimizer", set()),
        (
            "megatron",
            {"megatron_fsdp": True},
            "precision_aware_optimizer_needs_distributed_optimizer",
            set(),
        ),
        (
            "nemo",
            {
                "megatron_fsdp": True,
                "main_params_dtype": "bf16",
                "exp_avg_dtype": None,
                "exp_avg_sq_dtype": None,
            },
            "bf16_main_params_not_supported_by_framework",
            set(),
        ),
    ],
)
def test_optimizer_dtypes_refuse_stages_under_megatron_core(
    framework: str, par: dict[str, Any], reason: str, refused_stages: set[int]
) -> None:
    """Megatron-Core's optimizer refuses the precision-aware dtypes without its distributed
    optimizer (ZeRO-0) and a bf16 master below Megatron-FSDP (``optimizer_dtype_rule``):
    those candidates, and only those, count under the rule, in a full decode and in the
    sweep's counts (which count coarse classes without decoding them); a layout with one
    data-parallel rank keeps the lowest stage accepted among its equivalent ones; the top
    layouts run at an accepted stage. torchtitan has no such rule, and Megatron-FSDP (on the
    distributed optimizer, with its own main-weight buffer) takes the dtypes at every stage."""
    doc = copy.deepcopy(PRECISION_AWARE)
    doc["training"] = {"framework": framework}
    for name, value in par.items():
        if value is None:
            doc["parallelism"].pop(name)
        else:
            doc["parallelism"][name] = value
    reason_index = REJECT_REASONS.index(reason)
    space = parse_space(copy.deepcopy(doc))
    counted_total = 0
    for sub in space.subspaces:
        cols, reasons = sub.decode(0, sub.size)
        zero = np.asarray(cols.zero_stage)
        refused = np.isin(zero, sorted(refused_stages))
        counted = reasons == reason_index
        counted_total += int(counted.sum())
        assert refused[counted].all()
        assert not (refused & (reasons < 0)).any()
        alone = (np.asarray(cols.data_parallel) * np.asarray(cols.context_parallel)) == 1
        kept = min({0, 1, 2} - refused_stages, default=None)
        if kept is not None:
            assert ((zero == kept) & alone & (reasons < 0)).any()
        if refused_stages:
            assert counted.any()
        else:
            assert not counted.any()
    outcome = sweep(parse_space(copy.deepcopy(doc)))
    assert outcome.rejected[reason] == counted_total
    top = explore(parse_space(copy.deepcopy(doc)), top_k=5, tolerance=None).top
    assert top
    assert all(e.scenario.parallelism.zero_stage not in refused_stages for e in top)
