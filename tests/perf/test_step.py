"""Step-time model: invariants (hypothesis), tiny models, breakdown consistency."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import SpecError
from planner.perf import DefaultEfficiency, predict
from planner.perf.memory import activation_bytes_per_layer, layers_in_flight
from planner.scenario import parse_scenario
from planner.specs import Recompute, Scenario
from planner.specs.scenario import Framework


def _scenario(
    *,
    preset: str = "llama2-7b",
    gpu: str = "h100-sxm",
    tp: int = 1,
    pp: int = 1,
    vp: int = 1,
    cp: int = 1,
    dp: int = 1,
    mbs: int = 1,
    gbs: int = 64,
    recompute: str = "none",
    zero: int = 1,
    model: dict[str, Any] | None = None,
    **extra: Any,
) -> Scenario:
    par: dict[str, Any] = {
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "virtual_pipeline": vp,
        "context_parallel": cp,
        "micro_batch_size": mbs,
        "global_batch_size": gbs,
        "recompute": recompute,
        "zero_stage": zero,
        **extra,
    }
    doc = {
        "model": model if model is not None else {"preset": preset},
        "hardware": {"gpu": gpu, "num_gpus": tp * pp * cp * dp},
        "parallelism": par,
    }
    return parse_scenario(doc)


TINY = {
    "num_layers": 2,
    "hidden_size": 128,
    "num_attention_heads": 4,
    "vocab_size": 1024,
    "seq_length": 128,
}


def _finite_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def test_tiny_model_is_sane() -> None:
    p = predict(_scenario(model=TINY, gbs=1))
    assert _finite_positive(p.iteration_time_s)
    assert 1e-4 < p.iteration_time_s < 1.0  # launch-bound, not nanoseconds
    assert 0 < p.mfu < 0.1
    assert p.fits_in_memory
    tiny_parallel = _scenario(model=TINY, tp=2, pp=2, dp=2, gbs=4, vp=1)
    q = predict(tiny_parallel)
    assert all(math.isfinite(v) and v >= 0 for v in q.breakdown.as_dict().values())


def test_breakdown_sums_to_iteration_time() -> None:
    p = predict(_scenario(preset="llama3-70b", tp=8, pp=4, vp=5, dp=4, gbs=128))
    assert p.breakdown.total_s == pytest.approx(p.iteration_time_s)
    assert p.breakdown.pp_bubble_s > 0
    assert p.breakdown.tp_comm_exposed_s > 0
    assert p.tokens_per_s == pytest.approx(128 * 8192 / p.iteration_time_s)
    assert p.mfu == pytest.approx(p.model_tflops_per_gpu * 1e12 / 989.4e12)


def test_time_to_train() -> None:
    s = _scenario()
    doc_tokens = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 1},
        "parallelism": {"global_batch_size": 64},
        "training": {"total_tokens": 1e12, "train_iters": 5},
    }
    p = predict(parse_scenario(doc_tokens))
    assert p.time_to_train_s == pytest.approx(1e12 / p.tokens_per_s)
    assert predict(s).time_to_train_s is None


def test_recompute_trades_time_for_memory() -> None:
    none, sel, full = (
        predict(
            _scenario(
                preset="gpt3-175b", gpu="a100-80gb", tp=8, pp=8, recompute=r, flash_attention=False
            )
        )
        for r in ("none", "selective", "full")
    )
    assert none.iteration_time_s < sel.iteration_time_s < full.iteration_time_s
    assert (
        none.memory.activations_bytes > sel.memory.activations_bytes > full.memory.activations_bytes
    )
    assert full.hfu > full.mfu


def test_korthikanti_table2_activation_memory() -> None:
    """GPT-3 175B, t=8, SP + selective: 34·sbh/t bytes per layer (Korthikanti Table 2)."""
    s = _scenario(preset="gpt3-175b", gpu="a100-80gb", tp=8, pp=8, sequence_parallel=True)
    sbh = 2048 * 1 * 12288
    got = activation_bytes_per_layer(s, moe_layer=False, recompute=Recompute.SELECTIVE)
    assert got == pytest.approx(34 * sbh / 8)
    no_sp = _scenario(
        preset="gpt3-175b",
        gpu="a100-80gb",
        tp=8,
        pp=8,
        sequence_parallel=False,
        flash_attention=False,
    )
    a = 96
    expected = sbh * (10 + 24 / 8 + 5 * a * 2048 / (12288 * 8))
    assert activation_bytes_per_layer(
        no_sp, moe_layer=False, recompute=Recompute.NONE
    ) == pytest.approx(expected)
    assert layers_in_flight(s) == 96  # 1F1B: p microbatches x L/p layers on the first stage


def test_custom_efficiency_model_is_used() -> None:
    s = _scenario()
    base = DefaultEfficiency()
    slow = predict(s, DefaultEfficiency.from_constants({"gemm_peak_fraction_hopper": 0.3}))
    fast = predict(s, base)
    assert slow.breakdown.compute_s > 1.5 * fast.breakdown.compute_s


def test_moe_and_context_parallel_terms() -> None:
    moe = predict(_scenario(preset="mixtral-8x7b", tp=2, dp=8, gbs=64, expert_parallel=8))
    assert moe.breakdown.ep_comm_exposed_s > 0
    cp = predict(_scenario(preset="llama3-8b", cp=2, dp=4, gbs=32))
    assert cp.breakdown.cp_comm_exposed_s >= 0  # K,V ring steps hide behind attention on NVLink


def test_large_model_does_not_fit_one_gpu() -> None:
    assert not predict(_scenario(preset="llama3-70b", gbs=8)).fits_in_memory


@settings(max_examples=40, deadline=None)
@given(
    pp=st.sampled_from([2, 4, 8]),
    vp=st.sampled_from([1, 2]),
    m1=st.integers(min_value=1, max_value=64),
    extra=st.integers(min_value=1, max_value=64),
)
def test_bubble_fraction_falls_with_more_microbatches(
    pp: int, vp: int, m1: int, extra: int
) -> None:
    model = dict(TINY, num_layers=16, hidden_size=1024, num_attention_heads=8, seq_length=1024)

    # Megatron-Core's interleaved schedule refuses m % p != 0: a framework without
    # that rule ("other") keeps every micro-batch count, m < p included
    def run_any_m(gbs: int) -> Any:
        s = _scenario(model=model, pp=pp, vp=1, gbs=gbs)
        training = dataclasses.replace(s.training, framework=Framework.OTHER)
        par = dataclasses.replace(s.parallelism, virtual_pipeline=vp)
        return predict(dataclasses.replace(s, training=training, parallelism=par))

    few, many = run_any_m(m1), run_any_m(m1 + extra)
    frac = lambda p: p.breakdown.pp_bubble_s / p.iteration_time_s  # noqa: E731
    assert frac(many) < frac(few)


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 4, 8]),
    factor=st.sampled_from([2, 4]),
    zero=st.integers(min_value=0, max_value=3),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_more_gpus_never_need_more_memory_per_gpu(
    tp: int, pp: int, dp: int, factor: int, zero: int, recompute: str
) -> None:
    kwargs: dict[str, Any] = {
        "preset": "llama2-13b",
        "tp": tp,
        "pp": pp,
        "gbs": 256,
        "zero": zero,
        "recompute": recompute,
    }
    small = predict(_scenario(dp=dp, **kwargs))
    big = predict(_scenario(dp=dp * factor, **kwargs))
    assert big.memory_per_gpu_bytes <= small.memory_per_gpu_bytes


@settings(max_examples=60, deadline=None)
@given(
    preset=st.sampled_from(["llama3-8b", "gpt3-175b", "mixtral-8x7b", "qwen3-30b-a3b", "mpt-7b"]),
    gpu=st.sampled_from(["a100-40gb", "h100-sxm", "gh200", "gb200", "mi300x"]),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 16]),
    mbs=st.sampled_from([1, 2]),
    recompute=st.sampled_from(["none", "selective", "full"]),
    zero=st.integers(min_value=0, max_value=3),
)
def test_predictions_positive_and_finite(
    preset: str, gpu: str, tp: int, pp: int, dp: int, mbs: int, recompute: str, zero: int
) -> None:
    s = _scenario(
        preset=preset,
        gpu=gpu,
        tp=tp,
        pp=pp,
        dp=dp,
        mbs=mbs,
        gbs=dp * mbs * 4,
        recompute=recompute,
        zero=zero,
    )
    p = predict(s)
    for value in (
        p.iteration_time_s,
        p.tokens_per_s,
        p.mfu,
        p.memory_per_gpu_bytes,
        p.model_flops_per_iteration,
    ):
        assert _finite_positive(value)
    assert p.mfu < 1.0
    assert all(math.isfinite(v) and v >= 0 for v in p.breakdown.as_dict().values())


def test_a_schedule_per_accumulation_step_pays_each_fill_and_drain() -> None:
    """NeMo Automodel runs the pipeline schedule once per gradient-accumulation step: with
    ``pipeline_batch_size`` a quarter of the rank's batch the iteration has four bubbles of
    the 8-microbatch schedule and four warm-ups and flushes, the steady state unchanged."""
    model = dict(TINY, num_layers=16, hidden_size=1024, num_attention_heads=8, seq_length=1024)
    one = predict(_scenario(model=model, pp=4, vp=2, gbs=32))
    runs = predict(_scenario(model=model, pp=4, vp=2, gbs=32, pipeline_batch_size=8))
    eight = predict(_scenario(model=model, pp=4, vp=2, gbs=8))
    assert runs.breakdown.compute_s == pytest.approx(one.breakdown.compute_s)
    assert runs.breakdown.pp_bubble_s == pytest.approx(4 * eight.breakdown.pp_bubble_s)
    assert runs.breakdown.pp_bubble_s == pytest.approx(4 * one.breakdown.pp_bubble_s)
    assert runs.breakdown.pp_comm_exposed_s > one.breakdown.pp_comm_exposed_s
    same = predict(_scenario(model=model, pp=4, vp=2, gbs=32, pipeline_batch_size=32))
    assert same.iteration_time_s == pytest.approx(one.iteration_time_s)


@pytest.mark.parametrize("size", [3, 12, 64])
def test_a_pipeline_batch_that_does_not_split_the_rank_batch_is_refused(size: int) -> None:
    with pytest.raises(SpecError, match=r"parallelism\.pipeline_batch_size.*multiple"):
        _scenario(pp=4, mbs=2, gbs=32, pipeline_batch_size=size)
