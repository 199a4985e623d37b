"""Model features and MoE costs: MLA, MTP, MoE layer frequency, shared experts,
sliding windows, dispatchers, grouped GEMMs, routing imbalance and the 1F1B exchange overlap."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf import DefaultEfficiency, predict, predict_batch
from planner.perf.batch import ScenarioArrays
from planner.perf.expert import unmerged_share
from planner.perf.flops import attention_linear_flops_per_token, iteration_flops
from planner.perf.frameworks import profile_of
from planner.perf.moe_mlp import distinct_share, moe_mlp_ops, quantize_kernels
from planner.perf.operators import operator_times
from planner.perf.optable import LayerGroups, OperatorTable
from planner.perf.parameters import total_params
from planner.scenario import parse_scenario
from planner.specs import Scenario
from planner.specs.parallelism import Recompute


def _scenario(model: dict[str, Any], num_gpus: int = 8, **par: Any) -> Scenario:
    parallelism = {"global_batch_size": 64, **par}
    return parse_scenario(
        {
            "model": model,
            "hardware": {"gpu": "h100-sxm", "num_gpus": num_gpus},
            "parallelism": parallelism,
        }
    )


def _time(model: dict[str, Any], num_gpus: int = 8, **par: Any) -> float:
    return predict(_scenario(model, num_gpus, **par)).iteration_time_s


# ---- multi-latent attention ---------------------------------------------------------------


def test_mla_projection_flops_are_megatrons() -> None:
    """Megatron-LM ``num_floating_point_operations`` (MLA branch), without its norm terms:
    q: r_q·(h + heads·(d_qk + d_rope)); kv: r_kv·(h + heads·(d_qk + d_v)) + h·d_rope; out:
    heads·d_v·h; times 2 per token forward."""
    model = _scenario({"preset": "deepseek-v3"}, expert_parallel=8).model
    h, heads = 7168, 128
    q = 1536 * (h + heads * (128 + 64))
    kv = 512 * (h + heads * (128 + 128)) + h * 64
    out = heads * 128 * h
    assert attention_linear_flops_per_token(model) == 2.0 * (q + kv + out)


def test_deepseek_v3_has_671b_parameters_plus_its_mtp_module() -> None:
    model = _scenario({"preset": "deepseek-v3"}, expert_parallel=8).model
    main = total_params(_scenario({"preset": "deepseek-v3", "mtp_num_layers": 0}).model)
    assert main == pytest.approx(671e9, rel=0.005)  # DeepSeek-V3 report: 671B
    assert total_params(model) - main == pytest.approx(11.7e9, rel=0.02)  # one MoE layer + eh


def test_mla_needs_its_widths_and_has_no_query_groups() -> None:
    base = {"preset": "deepseek-v3"}
    with pytest.raises(SpecError, match=r"model\.num_query_groups"):
        _scenario({**base, "num_query_groups": 8})
    with pytest.raises(SpecError, match=r"model\.q_lora_rank"):
        _scenario({"preset": "llama3-8b", "q_lora_rank": 64})
    # Megatron's argument defaults fill what is left out
    model = _scenario(
        {"preset": "llama3-8b", "multi_latent_attention": True, "num_query_groups": 32}
    ).model
    assert (model.kv_lora_rank, model.qk_head_dim, model.v_head_dim) == (32, 128, 128)


def test_mla_without_query_latent_projects_queries_from_the_hidden_state() -> None:
    with_latent = _scenario({"preset": "deepseek-v3"}).model
    without = _scenario({"preset": "deepseek-v3", "q_lora_rank": 0}).model
    assert with_latent.attention_in_width == 0
    assert without.attention_in_width == 128 * 192
    assert without.attention_gemm_params > with_latent.attention_gemm_params


# ---- MoE layer frequency, shared experts, MTP -----------------------------------------------


def test_moe_layer_freq_int_list_and_leading_dense_layers_agree() -> None:
    every_other = _scenario({"preset": "mixtral-8x7b", "moe_layer_freq": 2}).model
    assert every_other.num_moe_layers == 16
    assert every_other.moe_layer_pattern[:3] == (True, False, True)
    listed = _scenario({"preset": "deepseek-v3", "moe_layer_freq": [0] * 3 + [1] * 58}).model
    leading = _scenario({"preset": "deepseek-v3"}).model
    assert listed.num_moe_layers == leading.num_moe_layers == 58
    assert total_params(listed) == total_params(leading)
    with pytest.raises(SpecError, match=r"model\.moe_layer_freq"):
        _scenario({"preset": "mixtral-8x7b", "moe_layer_freq": [1, 0]})


def test_moe_layer_freq_swaps_moe_for_dense_mlps_in_the_flops() -> None:
    all_moe = _scenario({"preset": "qwen3-30b-a3b"}).model
    half = _scenario({"preset": "qwen3-30b-a3b", "moe_layer_freq": 2}).model
    flops = [iteration_flops(m, num_sequences=1, recompute=Recompute.NONE) for m in (all_moe, half)]
    # 24 layers swap 8 routed experts of 768 and a 128-expert router for a 6144-wide MLP
    h = 2048
    per_layer = 2 * 3 * h * 8 * 768 + 2 * h * 128 - 2 * 3 * h * 6144
    assert flops[0].linear_per_token - flops[1].linear_per_token == 24 * per_layer


def test_shared_expert_intermediate_size_sets_the_shared_width() -> None:
    base = {"preset": "qwen3-30b-a3b"}
    plain = _scenario(base).model
    shared = _scenario({**base, "moe_shared_expert_intermediate_size": 4096}).model
    per_token = [
        iteration_flops(m, num_sequences=1, recompute=Recompute.NONE) for m in (plain, shared)
    ]
    extra = per_token[1].linear_per_token - per_token[0].linear_per_token
    assert extra == 48 * 2 * 3 * 2048 * 4096  # 48 MoE layers, SwiGLU: 3 matrices
    assert shared.shared_expert_ffn_hidden_size == 4096
    with pytest.raises(SpecError, match=r"model\.moe_shared_expert_intermediate_size"):
        _scenario({"preset": "llama3-8b", "moe_shared_expert_intermediate_size": 1024})


def test_mtp_adds_a_layer_and_an_lm_head_on_the_last_stage() -> None:
    base = {"preset": "deepseek-v3", "num_layers": 16, "moe_layer_freq": 1, "num_dense_layers": 0}
    layout = {"pipeline_parallel": 4, "expert_parallel": 16}
    without = _scenario({**base, "mtp_num_layers": 0}, 64, **layout)
    with_mtp = _scenario({**base, "mtp_num_layers": 1}, 64, **layout)
    flops = [
        iteration_flops(s.model, num_sequences=1, recompute=Recompute.NONE)
        for s in (without, with_mtp)
    ]
    assert flops[1].lm_head_per_token == 2 * flops[0].lm_head_per_token
    assert flops[1].model_total > flops[0].model_total * (17 / 16)
    slower = predict(with_mtp).breakdown
    faster = predict(without).breakdown
    assert slower.compute_s > faster.compute_s  # the last stage now sets the pace
    assert slower.ep_comm_exposed_s > faster.ep_comm_exposed_s  # its MoE layer's exchange


# ---- sliding windows --------------------------------------------------------------------------


def test_sliding_window_layers_attend_over_the_window() -> None:
    oss = {"preset": "gpt-oss-120b", "seq_length": 8192}
    full = {**oss, "window_size": 0, "window_attn_skip_freq": 0}
    windowed = iteration_flops(_scenario(oss).model, num_sequences=1, recompute=Recompute.NONE)
    dense = iteration_flops(_scenario(full).model, num_sequences=1, recompute=Recompute.NONE)
    # half the layers attend over 128 keys instead of 8192
    ratio = windowed.attention_core_per_token / dense.attention_core_per_token
    assert ratio == pytest.approx((8192 + 128) / 2 / 8192)
    assert _time(oss, expert_parallel=8) < _time(full, expert_parallel=8)
    with pytest.raises(SpecError, match=r"model\.window_attn_skip_freq"):
        _scenario({"preset": "llama3-8b", "window_attn_skip_freq": 2})


def _gpt_oss_moe_s(
    framework: str, preset: str = "gpt-oss-120b", **model: Any
) -> tuple[float, float]:
    """The MoE layer's forward and backward seconds (GPU only) of GPT-OSS ``preset`` on 8
    H100s, expert parallel 8, 4,096 tokens per microbatch, force-balanced, grouped GEMMs,
    under ``framework``."""
    document = {
        "model": {
            "preset": preset,
            "moe_grouped_gemm": True,
            "moe_router_force_load_balancing": True,
            **model,
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"expert_parallel": 8, "micro_batch_size": 1, "global_batch_size": 8},
        "training": {"framework": framework},
    }
    times = operator_times(
        _gpu_only(ScenarioArrays.from_scenarios([parse_scenario(document)])), DefaultEfficiency()
    )
    return float(times.moe_forward_s[0]), float(times.moe_backward_s[0])


def test_gpt_oss_attention_has_a_learnt_sink_per_head() -> None:
    assert _scenario({"preset": "gpt-oss-120b"}).model.softmax_type == "learnable"
    off_by_one = {"preset": "gpt-oss-20b", "softmax_type": "off-by-one"}
    assert _scenario(off_by_one).model.has_attention_sink
    assert not _scenario(_moe()).model.has_attention_sink
    with pytest.raises(SpecError, match=r"model\.softmax_type"):
        _scenario({"preset": "gpt-oss-20b", "softmax_type": "sink"})


def test_automodel_runs_sink_attention_in_flex_attention() -> None:
    """Automodel's GPT-OSS attention is FlexAttention (85 % / 76 % of the fused kernel) with
    the sink and the layout copies in eager PyTorch; Megatron-Core hands the sink to cuDNN's
    fused kernel: the softmax type changes nothing there."""
    flex = _gpt_oss_moe_s("automodel", "gpt-oss-20b")
    plain = _gpt_oss_moe_s("automodel", "gpt-oss-20b", softmax_type="vanilla")
    assert flex[0] > plain[0]
    assert flex[1] > plain[1]
    assert profile_of(_scenario(_moe()).training.framework).flex_attention_for_sinks is False
    assert _gpt_oss_moe_s("megatron") == _gpt_oss_moe_s("megatron", softmax_type="vanilla")


# ---- MoE cost -------------------------------------------------------------------------------


_MOE_GROUPS = LayerGroups(
    forward="moe_forward_s",
    backward="moe_backward_s",
    recompute="moe_recompute_s",
    module_recompute="moe_module_recompute_s",
)


def _moe(**model: Any) -> dict[str, Any]:
    return {"preset": "qwen3-30b-a3b", **model}


def test_forced_balance_capacity_factor_and_imbalance_order_the_time() -> None:
    layout = {"expert_parallel": 8}
    balanced = _time(_moe(moe_router_force_load_balancing=True), **layout)
    default = _time(_moe(), **layout)
    worse = _time(_moe(moe_imbalance_factor=1.5), **layout)
    capped = _time(_moe(moe_imbalance_factor=1.5, moe_expert_capacity_factor=1.0), **layout)
    assert balanced < default < worse
    assert capped == pytest.approx(balanced)
    with pytest.raises(SpecError, match=r"model\.moe_imbalance_factor"):
        _scenario(_moe(moe_imbalance_factor=0.9))


def test_imbalance_moves_no_work_without_expert_parallelism() -> None:
    assert _time(_moe(moe_imbalance_factor=2.0)) == _time(
        _moe(moe_router_force_load_balancing=True)
    )


def _moe_forward_s(arrays: ScenarioArrays) -> float:
    return float(np.asarray(operator_times(arrays, DefaultEfficiency()).moe_forward_s)[0])


def _gpu_only(arrays: ScenarioArrays) -> ScenarioArrays:
    """``arrays`` without the host's issue time (``moe_host_exposed_s``): the GPU's time."""
    zero = np.zeros(arrays.num_scenarios)
    return replace(arrays, moe_host_forward_s=zero, moe_host_expert_forward_s=zero)


def test_grouped_gemm_fills_the_gpu_with_small_experts() -> None:
    # 64 experts per GPU of ~ 64 tokens each at micro-batch 1 without expert parallelism
    layout = {"micro_batch_size": 1, "global_batch_size": 8}
    sequential, grouped = (
        _moe_forward_s(_gpu_only(ScenarioArrays.from_scenarios([_scenario(model, **layout)])))
        for model in (_moe(moe_grouped_gemm=False), _moe(moe_grouped_gemm=True))
    )
    assert grouped < 0.8 * sequential


def _qwen3_30b_b200(
    micro_batch_size: int,
    framework: str = "megatron",
    cuda_graphs: str = "none",
    **routing: Any,
) -> ScenarioArrays:
    """Qwen3-30B-A3B as Megatron-Bridge's B200 rows run it: 8 GPUs, expert parallel 8 (16
    local experts), force-balanced routing (or ``routing``), MXFP8, ``cuda_graphs``."""
    model = _moe(moe_grouped_gemm=True, **(routing or {"moe_router_force_load_balancing": True}))
    scenario = parse_scenario(
        {
            "model": model,
            "hardware": {"gpu": "b200", "num_gpus": 8},
            "parallelism": {
                "expert_parallel": 8,
                "micro_batch_size": micro_batch_size,
                "global_batch_size": 8 * micro_batch_size,
                "precision": "mxfp8",
            },
            "training": {"framework": framework, "cuda_graphs": cuda_graphs},
        }
    )
    return ScenarioArrays.from_scenarios([scenario])


def test_a_short_moe_forward_waits_for_the_host() -> None:
    """Megatron-Core reads each MoE layer's token counts on the host and TE launches one GEMM
    per local expert: when that issue time exceeds the layer forward's GPU time (micro-batch
    1, measured on an H200: ``benchmarks/results/moe_layer_h200.json``), the forward takes the
    host's time; at micro-batch 8 the GPU's work hides it."""
    small = _qwen3_30b_b200(1)
    profile = profile_of(_scenario(_moe()).training.framework)
    host = profile.moe_host_forward_s + 16 * profile.moe_host_expert_forward_s
    assert _moe_forward_s(_gpu_only(small)) < host
    assert _moe_forward_s(small) == pytest.approx(host)
    large = _qwen3_30b_b200(8)
    assert _moe_forward_s(_gpu_only(large)) > host
    assert _moe_forward_s(large) == _moe_forward_s(_gpu_only(large))


def test_drop_and_pad_has_no_host_floor() -> None:
    """Drop-and-pad knows every expert's token count from the capacity, so Megatron-Core's
    dispatcher reads nothing back and the host runs ahead (``moe_host_exposed_s``); dropping
    without padding still reads the counts."""
    padded = _qwen3_30b_b200(
        1, moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True
    )
    assert _moe_forward_s(padded) == _moe_forward_s(_gpu_only(padded))
    dropped = _qwen3_30b_b200(1, moe_expert_capacity_factor=1.0)
    assert _moe_forward_s(dropped) > _moe_forward_s(_gpu_only(dropped))


def test_drop_and_pad_runs_every_expert_at_its_capacity() -> None:
    """Padded experts compute their whole capacity (``capacity_factor`` x the even share)
    whatever the routing; unpadded ones at most that."""
    capped, padded, busiest = (
        _moe_forward_s(_gpu_only(ScenarioArrays.from_scenarios([_scenario(m, expert_parallel=8)])))
        for m in (
            _moe(moe_expert_capacity_factor=1.5),
            _moe(moe_expert_capacity_factor=1.5, moe_pad_expert_input_to_capacity=True),
            _moe(moe_imbalance_factor=1.5),
        )
    )
    assert capped < padded == pytest.approx(busiest)
    with pytest.raises(SpecError, match=r"model\.moe_pad_expert_input_to_capacity"):
        _scenario(_moe(moe_pad_expert_input_to_capacity=True))


def test_a_full_iteration_cuda_graph_has_no_host_floor() -> None:
    """One CUDA graph of the whole forward and backward (``training.cuda_graphs:
    full_iteration``) issues nothing from the host inside it, so the short dropless forward
    takes its GPU time; per-layer graphs keep the per-layer read of the counts, and the
    floor."""
    graphed = _qwen3_30b_b200(1, cuda_graphs="full_iteration")
    assert _moe_forward_s(graphed) == _moe_forward_s(_gpu_only(graphed))
    per_layer = _qwen3_30b_b200(1, cuda_graphs="per_layer")
    assert _moe_forward_s(per_layer) > _moe_forward_s(_gpu_only(per_layer))
    assert _moe_forward_s(per_layer) == _moe_forward_s(_qwen3_30b_b200(1))


def test_a_full_iteration_cuda_graph_is_as_fast_in_one_scenario_and_a_batch() -> None:
    documents = [
        {
            "model": _moe(moe_grouped_gemm=True, moe_router_force_load_balancing=True),
            "hardware": {"gpu": "b200", "num_gpus": 8},
            "parallelism": {"expert_parallel": 8, "micro_batch_size": 1, "global_batch_size": 8},
            "training": {"cuda_graphs": graphs},
        }
        for graphs in ("none", "full_iteration", "per_layer")
    ]
    scenarios = [parse_scenario(d) for d in documents]
    batch = predict_batch(scenarios)
    alone = [predict(s).iteration_time_s for s in scenarios]
    assert [p.iteration_time_s for p in batch] == pytest.approx(alone, rel=1e-12)
    assert alone[1] < alone[0] == pytest.approx(alone[2])


def test_an_unknown_cuda_graph_capture_names_the_field() -> None:
    document = {
        "model": _moe(),
        "hardware": {"gpu": "b200", "num_gpus": 8},
        "parallelism": {"expert_parallel": 8, "micro_batch_size": 1, "global_batch_size": 8},
        "training": {"cuda_graphs": "full"},
    }
    with pytest.raises(SpecError, match=r"training\.cuda_graphs.*full_iteration"):
        parse_scenario(document)


def test_stacks_without_the_host_read_have_no_host_floor() -> None:
    arrays = _qwen3_30b_b200(1, framework="torchtitan")
    assert _moe_forward_s(arrays) == _moe_forward_s(_gpu_only(arrays))


@pytest.mark.parametrize(("expert_parallel", "slower"), [(1, True), (32, False)])
def test_te_grouped_gemm_fills_the_sms_four_experts_at_a_time(
    expert_parallel: int, slower: bool
) -> None:
    """Transformer Engine's ``GroupedLinear`` (Megatron's ``--moe-grouped-gemm``) launches one
    cuBLAS GEMM per expert on 4 streams: with 128 local experts of ~256 tokens each, a wave
    holds the tiles of 4 experts, not of all 128 as one grouped kernel's would; with 4 local
    experts (expert parallel 32) the two are the same."""
    scenario = _scenario(
        _moe(moe_grouped_gemm=True),
        32,
        expert_parallel=expert_parallel,
        micro_batch_size=1,
        global_batch_size=32,
    )
    assert profile_of(scenario.training.framework).grouped_gemm_streams == 4.0
    te = _gpu_only(ScenarioArrays.from_scenarios([scenario]))
    one_kernel = replace(te, grouped_gemm_streams=np.zeros(1))
    if slower:
        assert _moe_forward_s(te) > 1.05 * _moe_forward_s(one_kernel)
    else:
        assert _moe_forward_s(te) == pytest.approx(_moe_forward_s(one_kernel))


@pytest.mark.parametrize(("dispatcher", "kernels"), [("alltoall", 31.0), ("flex", 17.0)])
def test_megatron_router_forward_pays_its_published_kernel_count(
    dispatcher: str, kernels: float
) -> None:
    """Megatron-Core's fused router launches 31 kernels a forward, 17 with DeepEP's fused
    preprocessing (NVIDIA/Megatron-LM's DeepSeek-V3 on GB200 article); at micro-batch 1 each
    takes the kernel floor, so the forward grows by the kernels over the 3 other stacks
    launch, and the backward does not move."""
    scenario = _scenario(
        _moe(moe_token_dispatcher_type=dispatcher), 8, expert_parallel=8, micro_batch_size=1
    )
    te = _gpu_only(ScenarioArrays.from_scenarios([scenario]))
    three = replace(
        te,
        moe_router_forward_kernels=np.full(1, 3.0),
        moe_flex_router_forward_kernels=np.full(1, 3.0),
    )
    eff = DefaultEfficiency()
    with_count, without = operator_times(te, eff), operator_times(three, eff)
    gap = float(np.asarray(with_count.moe_forward_s - without.moe_forward_s)[0])
    assert gap == pytest.approx((kernels - 3.0) * eff.kernel_min_time_s, rel=1e-6)
    assert float(np.asarray(with_count.moe_backward_s)[0]) == pytest.approx(
        float(np.asarray(without.moe_backward_s)[0])
    )


def _padded_b200(recipe: str, micro_batch_size: int = 1, gpu: str = "b200") -> ScenarioArrays:
    """Qwen3-30B-A3B on 8 B200s (or ``gpu``), expert parallel 8 (16 local experts),
    drop-and-pad at capacity 1.0 (no host floor), FP8 under ``recipe``."""
    scenario = parse_scenario(
        {
            "model": _moe(
                moe_grouped_gemm=True,
                moe_expert_capacity_factor=1.0,
                moe_pad_expert_input_to_capacity=True,
            ),
            "hardware": {"gpu": gpu, "num_gpus": 8},
            "parallelism": {
                "expert_parallel": 8,
                "micro_batch_size": micro_batch_size,
                "global_batch_size": 8 * micro_batch_size,
                "precision": "fp8",
                "fp8_recipe": recipe,
            },
        }
    )
    return ScenarioArrays.from_scenarios([scenario])


def test_grouped_linear_quantises_each_local_experts_slice_on_its_own() -> None:
    """Transformer Engine's ``GroupedLinear`` fuses the casts of every expert's slice only
    under delayed scaling with a transposed copy (Hopper); current scaling quantises each of
    the 16 local experts' slices with an amax, a scale and a cast kernel, two operands a
    direction. At micro-batch 1 (2,048 tokens per expert) those 96 kernels' launch floor, not
    their bytes, sets the time."""
    arrays = _padded_b200("delayed", gpu="h100-sxm")
    assert quantize_kernels(arrays, 16.0) == pytest.approx([1.0])  # one fused cast-transpose
    # Blackwell: no transposed copy, so no fused multi-tensor kernel: one cast a slice
    assert quantize_kernels(_padded_b200("delayed"), 16.0) == pytest.approx([16.0])
    kernels = {
        recipe: float(np.asarray(quantize_kernels(_padded_b200(recipe), 16.0))[0])
        for recipe in ("tensorwise", "blockwise", "mxfp8")
    }
    assert kernels == {"tensorwise": 48.0, "blockwise": 16.0, "mxfp8": 16.0}
    per_expert = replace(arrays, moe_grouped_gemm=np.zeros(1, dtype=bool))
    assert quantize_kernels(per_expert, 16.0) == pytest.approx([16.0])  # SequentialMLP
    floor = 2 * (48 - 16) * DefaultEfficiency().kernel_min_time_s  # the kernels beyond MXFP8's
    single, current = (_moe_forward_s(_padded_b200(r)) for r in ("mxfp8", "tensorwise"))
    assert current - single > 0.75 * floor


def test_a_moe_layer_without_shared_experts_casts_only_the_routed_operands() -> None:
    """The FP8 casts of a MoE layer move 5 bytes (current scaling on a B200: no transposed
    copy) per element of the routed experts' two operands a direction and nothing for shared
    experts it does not have."""
    eff = DefaultEfficiency()

    def cast_bytes(arrays: ScenarioArrays) -> float:
        table = OperatorTable(arrays, eff)
        moe_mlp_ops(table, arrays, eff, _MOE_GROUPS)
        return sum(
            float(np.asarray(b).sum())
            for g, b in zip(table.mem_groups, table.mem_bytes, strict=True)
            if g == "moe_forward_s"
        )

    fp8 = _padded_b200("tensorwise")
    bf16 = replace(fp8, fp8_recipe=np.zeros(1, dtype=np.int64))
    routed = 4096 * 8 * (2048 + 768)  # tokens x top-k (capacity 1.0) x (FC1 + FC2 inputs)
    assert cast_bytes(fp8) - cast_bytes(bf16) == pytest.approx(5.0 * routed)


def test_gpt_oss_experts_carry_biases() -> None:
    assert _scenario({"preset": "gpt-oss-120b"}).model.moe_expert_bias is True
    assert _scenario({"preset": "gpt-oss-20b"}).model.moe_expert_bias is True
    assert _scenario(_moe()).model.moe_expert_bias is False
    with pytest.raises(SpecError, match=r"model\.moe_expert_bias"):
        _scenario({"preset": "gpt-oss-20b", "moe_expert_bias": "yes"})


def test_expert_biases_are_added_per_expert_after_the_grouped_gemms() -> None:
    """Megatron-Core's ``TEGroupedMLP`` adds the down projection's bias ``t + b·p`` in eager
    PyTorch per local expert (its up projection's bias inside Transformer Engine's grouped
    GEMM); Automodel's ``GroupedExpertsDeepEP`` adds both that way: 12 and 8 bytes per
    element forward over the routed rows, 4096 tokens x top-4 here."""
    eff, gpu = DefaultEfficiency(), ScenarioArrays.from_scenario(_scenario(_moe())).device
    rows = 4096 * 4.0
    down, up = rows * 2880, rows * 2 * 2880
    for framework, eager in (("megatron", [12.0 * down]), ("automodel", [12.0 * down, 8.0 * up])):
        with_bias = _gpt_oss_moe_s(framework)
        without = _gpt_oss_moe_s(framework, moe_expert_bias=False)
        expected = sum(b / float(eff.memory_bytes_per_s(b, gpu)) for b in eager)
        assert with_bias[0] - without[0] == pytest.approx(expected, rel=1e-9)
        assert with_bias[1] > without[1]
    # per-expert GEMMs (Megatron's SequentialMLP) add their biases themselves
    assert _gpt_oss_moe_s("megatron", moe_grouped_gemm=False) == _gpt_oss_moe_s(
        "megatron", moe_grouped_gemm=False, moe_expert_bias=False
    )


def test_megatron_bridge_leaves_yarn_rope_unfused() -> None:
    """Megatron-Bridge refuses RoPE fusion for GPT-OSS's YaRN embedding: Megatron-Core's eager
    rotary path moves 24 bytes per rotated element forward where a fused kernel moves 4, over
    the 4,096 query and 512 key widths of 4,096 tokens."""
    eff, gpu = DefaultEfficiency(), ScenarioArrays.from_scenario(_scenario(_moe())).device
    rotated = 4096.0 * (64 * 64 + 8 * 64)

    def seconds(num_bytes: float) -> float:
        return num_bytes / float(eff.memory_bytes_per_s(num_bytes, gpu))

    added = _gpt_oss_moe_s("nemo")[0] - _gpt_oss_moe_s("nemo", rope_type="rope")[0]
    assert added == pytest.approx(seconds(24.0 * rotated) - seconds(4.0 * rotated))
    assert _gpt_oss_moe_s("megatron") == _gpt_oss_moe_s("megatron", rope_type="rope")
    assert _scenario({"preset": "gpt-oss-120b"}).model.yarn_rotary
    assert not _scenario({"preset": "deepseek-v3", "rope_type": "yarn"}).model.yarn_rotary
    with pytest.raises(SpecError, match=r"model\.rope_type"):
        _scenario({"preset": "gpt-oss-20b", "rope_type": "ntk"})


def test_megatron_clamps_gpt_oss_activation_outside_its_fused_kernel() -> None:
    """Megatron-Core clamps the quick-GeGLU's input with ``chunk``, ``clamp`` and ``cat``
    before its compiled kernel: 8 bytes per element of the routed up-projection output
    forward; Automodel clamps inside its compiled activation."""
    eff, gpu = DefaultEfficiency(), ScenarioArrays.from_scenario(_scenario(_moe())).device
    clamped = 8.0 * 4096 * 4 * 2 * 2880
    added = (
        _gpt_oss_moe_s("megatron")[0] - _gpt_oss_moe_s("megatron", activation_func_clamp_value=0)[0]
    )
    assert added == pytest.approx(clamped / float(eff.memory_bytes_per_s(clamped, gpu)))
    assert _gpt_oss_moe_s("automodel") == _gpt_oss_moe_s("automodel", activation_func_clamp_value=0)
    assert _scenario({"preset": "gpt-oss-20b"}).model.activation_func_clamp_value == 7.0
    with pytest.raises(SpecError, match=r"model\.activation_func_clamp_value"):
        _scenario({"preset": "gpt-oss-20b", "activation_func_clamp_value": -1})


def test_dispatchers_across_nodes() -> None:
    # 64-way expert parallel over 8 nodes, top-8 of 128: DeepEP sends one copy per node
    # (~4.6 of 7 remote nodes) where all-to-all sends all 7 remote of the 8 copies
    layout = {"expert_parallel": 64, "global_batch_size": 512}
    times = {
        d: predict(_scenario(_moe(moe_token_dispatcher_type=d), 64, **layout)).breakdown
        for d in ("alltoall", "allgather", "flex")
    }
    ep = {d: b.ep_comm_exposed_s for d, b in times.items()}
    assert ep["flex"] < ep["alltoall"] < ep["allgather"]


def test_one_f_one_b_overlap_hides_the_exchange() -> None:
    layout = {"expert_parallel": 64, "global_batch_size": 512}
    plain = predict(_scenario(_moe(moe_token_dispatcher_type="flex"), 64, **layout))
    overlap = predict(
        _scenario(
            _moe(moe_token_dispatcher_type="flex", overlap_moe_expert_parallel_comm=True),
            64,
            **layout,
        )
    )
    assert overlap.breakdown.ep_comm_exposed_s < 0.5 * plain.breakdown.ep_comm_exposed_s


def test_one_f_one_b_overlap_leaves_the_warm_up_exposed() -> None:
    """Megatron-Core's combined 1F1B merges only steady-state steps: rank 0 of PP 8 x VP 4
    runs 2·7 + 3·8 + 1 = 39 of its 128·4 chunk forwards (and backwards) alone; without
    pipelining the first forward and the last backward."""
    interleaved = _scenario(
        _moe(overlap_moe_expert_parallel_comm=True, num_layers=32),
        256,
        pipeline_parallel=8,
        virtual_pipeline=4,
        global_batch_size=128 * 32,
        expert_parallel=8,
    )
    share = unmerged_share(ScenarioArrays.from_scenarios([interleaved]))
    assert float(np.asarray(share)[0]) == pytest.approx(39 / 512)
    flat = _scenario(
        _moe(overlap_moe_expert_parallel_comm=True), 64, expert_parallel=64, global_batch_size=512
    )
    share = unmerged_share(ScenarioArrays.from_scenarios([flat]))
    assert float(np.asarray(share)[0]) == pytest.approx(1 / 8)  # 512 / 64 ranks


def _deepseek_round_robin(**extra: Any) -> dict[str, Any]:
    return {
        "preset": "deepseek-v3",
        "moe_token_dispatcher_type": "flex",
        "moe_router_num_groups": 0,
        "moe_router_group_topk": 0,
        **extra,
    }


def test_a_round_robin_gate_sends_each_token_to_consecutive_experts() -> None:
    """Automodel's fake balanced gate on DeepSeek-V3, EP 64 over 8 nodes (4 experts a rank):
    token ``t``'s 8 experts ``8t ... 8t+7`` sit on 2 ranks of 1 node; on Kimi K2 at EP 32 (12
    experts a rank) the run starts at offsets 0, 4, 8 of a rank and covers 1, 1, 2 ranks."""
    learned = ScenarioArrays.from_scenario(
        _scenario(_deepseek_round_robin(), 64, expert_parallel=64)
    )
    gate = ScenarioArrays.from_scenario(
        _scenario(_deepseek_round_robin(moe_router_round_robin=True), 64, expert_parallel=64)
    )
    assert distinct_share(gate, 64.0) * 64 == pytest.approx(2.0)
    assert distinct_share(gate, 8.0) * 8 == pytest.approx(1.0)
    assert distinct_share(learned, 8.0) * 7 == pytest.approx(4.6, abs=0.1)  # unrestricted
    kimi = {"preset": "kimi-k2", "moe_router_round_robin": True}
    k2 = ScenarioArrays.from_scenario(_scenario(kimi, 32, expert_parallel=32))
    assert distinct_share(k2, 32.0) * 32 == pytest.approx(4.0 / 3.0)
    assert distinct_share(k2, 4.0) * 4 == pytest.approx(1.0)


def test_a_round_robin_gate_cuts_deepeps_exchange_and_balances_the_experts() -> None:
    layout = {"expert_parallel": 64, "global_batch_size": 512}
    learned = predict(_scenario(_deepseek_round_robin(), 64, **layout)).breakdown
    gate = predict(
        _scenario(_deepseek_round_robin(moe_router_round_robin=True), 64, **layout)
    ).breakdown
    assert gate.ep_comm_exposed_s < 0.5 * learned.ep_comm_exposed_s
    balanced = ScenarioArrays.from_scenario(
        _scenario(_deepseek_round_robin(moe_router_round_robin=True), 64, **layout)
    )
    assert balanced.moe_imbalance == 1.0
    # all-to-all sends every (token, expert) pair: the placement moves no bytes
    a2a = {"moe_token_dispatcher_type": "alltoall"}
    plain = predict(_scenario(_deepseek_round_robin(**a2a), 64, **layout)).breakdown
    rr = predict(
        _scenario(_deepseek_round_robin(moe_router_round_robin=True, **a2a), 64, **layout)
    ).breakdown
    forced = predict(
        _scenario(_deepseek_round_robin(moe_router_force_load_balancing=True, **a2a), 64, **layout)
    ).breakdown
    assert rr.ep_comm_exposed_s == pytest.approx(forced.ep_comm_exposed_s)
    assert rr.ep_comm_exposed_s < plain.ep_comm_exposed_s  # balanced: rho 1
    # and no router to run: no gate GEMM, scores, top-k or auxiliary loss
    assert rr.compute_s < forced.compute_s


def test_a_round_robin_gate_with_expert_groups_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"model\.moe_router_round_robin"):
        _scenario({"preset": "deepseek-v3", "moe_router_round_robin": True})


def test_unknown_dispatcher_names_the_field() -> None:
    with pytest.raises(SpecError, match=r"model\.moe_token_dispatcher_type"):
        _scenario(_moe(moe_token_dispatcher_type="deepep"))


# ---- both forms ---------------------------------------------------------------------------


def _varied() -> list[Scenario]:
    rng = np.random.default_rng(13)
    out: list[Scenario] = []
    presets = ("deepseek-v3", "kimi-k2", "gpt-oss-20b", "qwen3-30b-a3b", "mixtral-8x7b")
    while len(out) < 40:
        preset = presets[len(out) % len(presets)]
        model: dict[str, Any] = {"preset": preset}
        if preset in ("deepseek-v3", "kimi-k2"):
            model.update(num_layers=8, num_dense_layers=1)
        model["moe_token_dispatcher_type"] = str(rng.choice(["alltoall", "allgather", "flex"]))
        model["moe_grouped_gemm"] = bool(rng.integers(0, 2))
        model["overlap_moe_expert_parallel_comm"] = bool(rng.integers(0, 2))
        if rng.integers(0, 2):
            model["moe_router_force_load_balancing"] = True
        elif rng.integers(0, 3) == 0:
            model.update(moe_router_round_robin=True, moe_router_num_groups=0)
            model["moe_router_group_topk"] = 0
        elif rng.integers(0, 2):
            model["moe_expert_capacity_factor"] = 1.25
        pp = int(rng.choice([1, 2]))
        dp = int(rng.choice([8, 16]))
        try:
            out.append(
                _scenario(
                    model,
                    pp * dp,
                    pipeline_parallel=pp,
                    expert_parallel=int(rng.choice([1, 4, 8])),
                    micro_batch_size=1,
                    global_batch_size=dp * 4,
                    recompute=str(rng.choice(["none", "selective", "full"])),
                    zero_stage=int(rng.integers(0, 4)),
                )
            )
        except SpecError:
            continue
    return out


def test_one_scenario_and_batch_forms_agree_on_the_new_features() -> None:
    scenarios = _varied()
    batch = predict_batch(scenarios)
    for scenario, together in zip(scenarios, batch, strict=True):
        alone = predict(scenario)
        assert alone.iteration_time_s == pytest.approx(together.iteration_time_s, rel=1e-12)
        assert alone.memory_per_gpu_bytes == pytest.approx(together.memory_per_gpu_bytes, rel=1e-12)
        assert math.isfinite(alone.iteration_time_s)
        assert alone.iteration_time_s > 0


def test_new_fields_reach_the_engine_by_name() -> None:
    a = ScenarioArrays.from_scenario(_scenario({"preset": "deepseek-v3"}, expert_parallel=8))
    assert a.multi_latent_attention is True
    assert a.attention_down_width == 1536 + 512 + 64
    assert a.shared_expert_ffn_hidden_size == 2048
    assert a.num_mtp_moe_layers == 1
    assert math.isnan(a.moe_imbalance)
