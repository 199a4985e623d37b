"""Memory per GPU: the documented byte counts of each term, and invariants (hypothesis)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.perf import DefaultEfficiency, memory_per_gpu, predict_batch
from planner.perf.batch import ScenarioArrays
from planner.perf.memory import (
    activation_bytes_per_layer,
    loss_bytes_per_logit_arr,
    loss_peak_bytes_arr,
    total_params,
)
from planner.perf.optimizer import optimizer_times
from planner.perf.parameters import stage_params
from planner.scenario import parse_scenario
from planner.specs import Recompute, Scenario

# Llama 3 8B (catalog preset llama3-8b)
L, H, Q, KV, F, V = 32, 4096, 4096, 1024, 14336, 128256


def _scenario(
    framework: str = "torchtitan",
    preset: str = "llama3-8b",
    *,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    dp: int = 8,
    mbs: int = 2,
    seq: int | None = None,
    **par: Any,
) -> Scenario:
    model: dict[str, Any] = {"preset": preset}
    if seq is not None:
        model["seq_length"] = seq
    return parse_scenario(
        {
            "model": model,
            "hardware": {"gpu": "h100-sxm", "num_gpus": tp * pp * cp * dp},
            "parallelism": {
                "tensor_parallel": tp,
                "pipeline_parallel": pp,
                "context_parallel": cp,
                "micro_batch_size": mbs,
                "global_batch_size": dp * mbs * max(pp, 1),
                "sequence_parallel": tp > 1,
                **par,
            },
            "training": {"framework": framework},
        }
    )


def _arrays(*scenarios: Scenario) -> ScenarioArrays:
    return ScenarioArrays.from_scenarios(list(scenarios))


def test_eager_cross_entropy_peaks_in_its_backward() -> None:
    """Fused loss 4 bytes per logit; eager ``F.cross_entropy`` 12 (saved log-softmax, dense
    nll gradient, log-softmax gradient, fp32); DTensor ``loss_parallel`` under TP 16."""
    a = _arrays(_scenario(), _scenario(tp=8, dp=1), _scenario("megatron"))
    assert loss_bytes_per_logit_arr(a).tolist() == [12.0, 16.0, 4.0]


def _compiled_loss(scenario: Scenario) -> Scenario:
    return replace(scenario, training=replace(scenario.training, compiled_loss=True))


def test_compiled_cross_entropy_keeps_the_16_bit_logits() -> None:
    """``training.compiled_loss``: the min-cut partitioner keeps the 16-bit logits and the
    backward writes the 16-bit gradient, 4 bytes per logit, with or without TP; a stack whose
    loss is a fused kernel already keeps its own 4."""
    eager = [_scenario(), _scenario(tp=8, dp=1), _scenario("megatron")]
    compiled = [_compiled_loss(s) for s in eager]
    assert loss_bytes_per_logit_arr(_arrays(*compiled)).tolist() == [4.0, 4.0, 4.0]
    assert loss_bytes_per_logit_arr(_arrays(*eager)).tolist() == [12.0, 16.0, 4.0]
    tok = 2 * 8192
    saved = loss_peak_bytes_arr(_arrays(eager[0])) - loss_peak_bytes_arr(_arrays(compiled[0]))
    assert saved[0] == pytest.approx((12.0 - 4.0) * tok * V)


def test_automodel_cross_entropy_holds_16_bit_logit_tensors() -> None:
    """NeMo Automodel's benchmark recipes: ``MaskedCrossEntropy(fp32_upcast=False)``, eager
    ``F.cross_entropy`` on the 16-bit logits, whose backward holds the saved log-softmax, the
    dense nll gradient and the log-softmax gradient in 16 bits: 6 bytes per logit."""
    a = _arrays(_scenario("automodel"))
    assert loss_bytes_per_logit_arr(a).tolist() == [6.0]


def test_loss_peak_adds_final_norm_and_head_inputs() -> None:
    tok = 2 * 8192
    titan_tp, megatron_tp = _scenario(tp=8, dp=1), _scenario("megatron", tp=8, dp=1)
    got = loss_peak_bytes_arr(_arrays(titan_tp, megatron_tp))
    # DTensor ColwiseParallel head saves its all-gathered input; Megatron's SP head the shard
    assert got[0] == pytest.approx(16 * tok * V / 8 + 2 * tok * H + 2 * tok * H / 8)
    assert got[1] == pytest.approx(4 * tok * V / 8 + 2 * 2 * tok * H / 8)


def test_op_level_sac_keeps_block_input_odd_matmuls_and_attention_output() -> None:
    """torchtitan op SAC, eager, separate wq / wk / wv: block input, wq, wv, attention output,
    w1 and w2 outputs."""
    tok = 2 * 8192
    got = activation_bytes_per_layer(
        _scenario(separate_qkv_projections=True), moe_layer=False, recompute=Recompute.SELECTIVE
    )
    assert got == pytest.approx(2 * tok * (H + Q + KV + Q + F + H))


def test_op_level_sac_with_fused_qkv_keeps_the_key_too() -> None:
    """Current torchtitan's one ``wqkv`` is the first matmul: its whole output is kept (the
    query, key and value), ``wo`` and ``w3`` stay the recomputed ones."""
    tok = 2 * 8192
    got = activation_bytes_per_layer(_scenario(), moe_layer=False, recompute=Recompute.SELECTIVE)
    assert got == pytest.approx(2 * tok * (H + Q + 2 * KV + Q + F + H))


def test_op_level_sac_with_fused_gate_up_keeps_both_halves_and_recomputes_w2() -> None:
    """A fused gate/up GEMM is an odd matmul (kept whole, ``2f``); the down projection after
    it is the even one, recomputed, so its partial sum is not kept."""
    tok = 2 * 8192
    got = activation_bytes_per_layer(
        _scenario(separate_gate_up_projections=False),
        moe_layer=False,
        recompute=Recompute.SELECTIVE,
    )
    assert got == pytest.approx(2 * tok * (H + Q + 2 * KV + Q + 2 * F))


def test_op_level_sac_under_tp_keeps_partial_sum_and_reduce_scatter_outputs() -> None:
    tok = 2 * 8192
    got = activation_bytes_per_layer(
        _scenario(tp=8, dp=1, separate_qkv_projections=True),
        moe_layer=False,
        recompute=Recompute.SELECTIVE,
    )
    sharded = 2 * tok * (H + 2 * Q + KV + F + 2 * H) / 8  # input, wq/wv/attn/w1, 2 RS outputs
    assert got == pytest.approx(sharded + 2 * tok * H)  # w2's un-reduced output: full width


def test_fsdp_zero3_keeps_root_unit_gathered_and_no_16_bit_shard() -> None:
    s = _scenario(zero_stage=3)
    params = total_params(s.model)
    root = 2 * V * H + H  # untied embedding, LM head, final norm: FSDP's root unit
    block = (params - root) / L
    m = memory_per_gpu(s)
    # root and one block unsharded on the compute stream, the root's flat all-gather buffer
    # cached on FSDP2's all-gather stream
    assert m.weights_bytes == pytest.approx(2 * (root + block + root))
    assert m.gradients_bytes == pytest.approx(4 * params / 8)
    assert m.optimizer_bytes == pytest.approx(12 * params / 8)  # fp32 shard + Adam moments


def test_automodel_adam_keeps_bf16_moments_and_no_master_on_its_bf16_shards() -> None:
    """NeMo Automodel's recipes run ``torch.optim.Adam`` on the FSDP2 shards of a bf16 model:
    no fp32 master, both moments bf16 like the parameter (4 bytes per owned parameter); the
    bf16 shard the optimizer updates is held among the weights (2 bytes per owned parameter)."""
    automodel = _scenario("automodel", zero_stage=3)
    torchtitan = _scenario("torchtitan", zero_stage=3)
    params = total_params(automodel.model)
    assert memory_per_gpu(automodel).optimizer_bytes == pytest.approx(4 * params / 8)
    assert memory_per_gpu(torchtitan).optimizer_bytes == pytest.approx(12 * params / 8)
    assert memory_per_gpu(automodel).weights_bytes - memory_per_gpu(
        torchtitan
    ).weights_bytes == pytest.approx(2 * params / 8)
    # the step reads and writes the bf16 weight and moments in place: 12 + 2 * 4, against 34
    a = _arrays(automodel, torchtitan)
    hbm = optimizer_times(a, DefaultEfficiency(), stage_params(a).busiest()).hbm_bytes
    assert hbm[0] / hbm[1] == pytest.approx(20 / 34)


def test_foreach_adam_step_holds_one_second_moment_per_owned_parameter() -> None:
    """``_multi_tensor_adam`` allocates ``sqrt(exp_avg_sq)`` over every owned parameter after
    the activations are freed: 4 bytes per owned parameter under torchtitan's fp32 shards
    (stated: its default is fused), 2 under Automodel's bf16 ones (none at ``tensor_parallel``
    > 1, where it turns ``foreach`` off), none under Megatron's fused Adam. The peak counts the
    larger of those temporaries and the activations."""
    small = {"mbs": 1, "seq": 128, "recompute": "full", "zero_stage": 3}
    titan = memory_per_gpu(_scenario(optimizer_implementation="foreach", **small))
    params = total_params(_scenario().model)
    assert titan.optimizer_step_bytes == pytest.approx(4 * params / 8)
    assert titan.activations_bytes < titan.optimizer_step_bytes
    states = titan.weights_bytes + titan.gradients_bytes + titan.optimizer_bytes
    assert titan.total_bytes == pytest.approx(
        states + titan.optimizer_step_bytes + titan.overhead_bytes
    )
    automodel = memory_per_gpu(_scenario("automodel", **small))
    assert automodel.optimizer_step_bytes == pytest.approx(2 * params / 8)
    automodel_tp = memory_per_gpu(_scenario("automodel", tp=2, dp=4, **small))
    assert automodel_tp.optimizer_step_bytes == 0.0
    assert memory_per_gpu(_scenario("megatron", **small)).optimizer_step_bytes == 0.0
    assert memory_per_gpu(_scenario(**small)).optimizer_step_bytes == 0.0  # torchtitan's fused
    # long sequences: the activations outweigh the step's temporaries
    big = memory_per_gpu(_scenario(zero_stage=3, optimizer_implementation="foreach"))
    assert big.activations_bytes > big.optimizer_step_bytes > 0.0
    assert big.total_bytes == pytest.approx(
        big.weights_bytes
        + big.gradients_bytes
        + big.optimizer_bytes
        + big.activations_bytes
        + big.overhead_bytes
    )


def test_deepspeed_zero3_keeps_its_16_bit_partition() -> None:
    s = _scenario("deepspeed", zero_stage=3)
    params = total_params(s.model)
    m = memory_per_gpu(s)
    assert m.weights_bytes == pytest.approx(2 * params / 8 + 2 * 2 * params / L)


def test_loss_and_full_recompute_working_set_are_not_held_together() -> None:
    tok = 1 * 32768
    s = _scenario(mbs=1, seq=32768, recompute="full", zero_stage=3)
    slack = 1 + DefaultEfficiency().memory_fragmentation_fraction
    loss = float(loss_peak_bytes_arr(_arrays(s))[0])
    working = activation_bytes_per_layer(s, moe_layer=False, recompute=Recompute.SELECTIVE)
    assert working < loss
    expected = L * 2 * tok * H + loss  # each layer's input, then the loss alone
    assert memory_per_gpu(s).activations_bytes == pytest.approx(expected * slack)


def test_transformer_engine_fp8_copy_covers_transformer_linears_only() -> None:
    bf16 = memory_per_gpu(_scenario("megatron", zero_stage=1))
    fp8 = memory_per_gpu(_scenario("megatron", zero_stage=1, precision="fp8"))
    params = total_params(_scenario().model)
    assert fp8.weights_bytes - bf16.weights_bytes == pytest.approx(params - (2 * V * H + H))


def test_equal_local_tokens_under_context_parallel_need_equal_memory() -> None:
    """Sequence x c with c-way context parallelism: same activations, loss and states."""
    runs = [
        _scenario(mbs=1, seq=32768 * c, cp=c, dp=8 // c, recompute="full") for c in (1, 2, 4, 8)
    ]
    for s in runs:  # all eight GPUs shard the states (d·c = 8)
        assert s.parallelism.data_parallel * s.parallelism.context_parallel == 8
    mem = [p.memory_per_gpu_bytes for p in predict_batch(runs)]
    assert mem == pytest.approx([mem[0]] * 4)


_FRAMEWORKS = ("torchtitan", "fsdp", "deepspeed", "megatron")


@settings(max_examples=30, deadline=None)
@given(
    framework=st.sampled_from(_FRAMEWORKS),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 2]),
    dp=st.sampled_from([1, 2, 8]),
    precision=st.sampled_from(["bf16", "fp8"]),
)
def test_higher_zero_stage_never_raises_memory_in_any_zero3_design(
    framework: str, tp: int, pp: int, dp: int, precision: str
) -> None:
    runs = predict_batch(
        [
            _scenario(framework, tp=tp, pp=pp, dp=dp, zero_stage=z, precision=precision)
            for z in range(4)
        ]
    )
    mem = [r.memory_per_gpu_bytes for r in runs]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(mem))


@settings(max_examples=30, deadline=None)
@given(
    framework=st.sampled_from(_FRAMEWORKS),
    tp=st.sampled_from([1, 8]),
    dp=st.sampled_from([1, 2, 4]),
    factor=st.sampled_from([2, 4, 16]),
    zero=st.integers(min_value=0, max_value=3),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_more_data_parallel_gpus_never_need_more_memory(
    framework: str, tp: int, dp: int, factor: int, zero: int, recompute: str
) -> None:
    small, big = predict_batch(
        [
            _scenario(framework, tp=tp, dp=d, zero_stage=zero, recompute=recompute)
            for d in (dp, dp * factor)
        ]
    )
    assert big.memory_per_gpu_bytes <= small.memory_per_gpu_bytes


@settings(max_examples=30, deadline=None)
@given(
    framework=st.sampled_from(_FRAMEWORKS),
    preset=st.sampled_from(["llama3-8b", "llama2-13b", "mixtral-8x7b"]),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 2]),
    mbs=st.sampled_from([1, 4]),
)
def test_recompute_never_raises_activation_memory(
    framework: str, preset: str, tp: int, pp: int, mbs: int
) -> None:
    none, sel, full = predict_batch(
        [
            _scenario(framework, preset, tp=tp, pp=pp, dp=2, mbs=mbs, recompute=r)
            for r in ("none", "selective", "full")
        ]
    )
    acts = [r.memory.activations_bytes for r in (none, sel, full)]
    assert acts[0] >= acts[1] >= acts[2]
