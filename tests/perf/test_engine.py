"""The vectorized engine: batch == single, invariants (hypothesis), operator and closed forms."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.catalog import gpu_catalog
from planner.errors import CalibrationError
from planner.perf import (
    DefaultEfficiency,
    default_constants,
    load_constants,
    predict,
    predict_batch,
    write_constants,
)
from planner.perf import collectives as coll
from planner.perf.batch import ScenarioArrays
from planner.perf.flops import (
    attention_linear_flops_per_token,
    lm_head_flops_per_token,
    mlp_flops_per_token,
)
from planner.perf.operators import OperatorTable, edge_ops, layer_ops
from planner.scenario import parse_scenario
from planner.scenario.documents import prediction_json
from planner.specs import Scenario
from planner.specs.scenario import Framework


def _scenario(
    preset: str = "llama2-7b",
    gpu: str = "h100-sxm",
    *,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    dp: int = 1,
    mbs: int = 1,
    gbs: int | None = None,
    model: dict[str, Any] | None = None,
    **par: Any,
) -> Scenario:
    doc = {
        "model": model if model is not None else {"preset": preset},
        "hardware": {"gpu": gpu, "num_gpus": tp * pp * cp * dp},
        "parallelism": {
            "tensor_parallel": tp,
            "pipeline_parallel": pp,
            "context_parallel": cp,
            "micro_batch_size": mbs,
            "global_batch_size": gbs if gbs is not None else dp * mbs * 8,
            **par,
        },
    }
    return parse_scenario(doc)


def test_batch_equals_single_exactly() -> None:
    scenarios = [
        _scenario("llama3-70b", tp=8, pp=4, dp=4, virtual_pipeline=5, gbs=128),
        _scenario("gpt3-175b", "a100-80gb", tp=8, pp=8, dp=2, recompute="full"),
        _scenario("mixtral-8x7b", tp=2, dp=8, expert_parallel=8, gbs=64),
        _scenario("llama3-8b", cp=2, dp=4, precision="fp8", gbs=128),
        _scenario("llama2-7b", "mi300x", dp=8, zero_stage=3),
    ]
    batch = predict_batch(scenarios)
    for scenario, together in zip(scenarios, batch, strict=True):
        alone = predict(scenario)
        assert alone == together


def test_breakdown_adds_up_and_contract_keys() -> None:
    for p in predict_batch([_scenario("llama3-70b", tp=8, pp=4, dp=2, gbs=64)]):
        assert sum(p.breakdown.as_dict().values()) == pytest.approx(p.iteration_time_s, rel=1e-12)
        assert set(prediction_json(p, "x")["breakdown_s"]) >= {
            "compute",
            "tp_comm_exposed",
            "pp_bubble",
            "dp_comm_exposed",
            "optimizer",
        }


def test_operator_flops_sum_to_layer_totals() -> None:
    """GEMM FLOPs registered per layer (forward) equal the closed forms of ``flops.py``."""
    s = _scenario("llama3-8b", tp=2, dp=1, gbs=8)
    a = ScenarioArrays.from_scenarios([s])
    ops = OperatorTable(a, DefaultEfficiency())
    layer_ops(ops, a, DefaultEfficiency(), moe=False)
    edge_ops(ops, a)
    fwd = float(ops.gemm_flops("dense_forward_s")[0])
    bwd = float(ops.gemm_flops("dense_backward_s")[0])
    head = float(ops.gemm_flops("lm_head_s")[0])
    tokens = 8192 / 2  # per tensor-parallel rank: FLOPs split over tp=2
    m = s.model
    linear = attention_linear_flops_per_token(m) + mlp_flops_per_token(m, moe_layer=False)
    assert fwd == pytest.approx(linear * tokens)
    assert bwd == pytest.approx(2 * linear * tokens)
    assert head == pytest.approx(3 * lm_head_flops_per_token(m) * tokens)


def test_korthikanti_model_flops_closed_form() -> None:
    s = _scenario("gpt3-175b", "a100-80gb", tp=8, pp=8, gbs=64, model=None, dp=1)
    p = predict(s)
    b, seq, n_layers, h, v = 64, 2048, 96, 12288, 50257
    closed = 72 * b * seq * n_layers * h**2 * (1 + seq / (6 * h) + v / (12 * h * n_layers))
    assert p.model_flops_per_iteration == pytest.approx(closed, rel=1e-12)


def _link(n: int = 1) -> coll.Link:
    return coll.Link(
        scale_up_bus_bandwidth_bytes_per_s=np.full(n, 400e9),
        scale_out_bus_bandwidth_bytes_per_s=np.full(n, 50e9),
        scale_up_latency_s=np.full(n, 1e-6),
        scale_out_latency_s=np.full(n, 4e-6),
        nvlink_domain_size=np.full(n, 8.0),
        base_latency_s=8e-6,
    )


def test_collectives_match_hand_computed_alpha_beta() -> None:
    """NCCL's cost model (tuning.cc): per algorithm and protocol base + per-hop latencies +
    bytes over the protocol's bandwidth, the fastest wins; the link's latencies are the
    reference ones (1 us NVLink, 4 us NIC), its base 8 us (tuning.cc's 8.4 us scaled)."""
    link = _link()
    one, size = np.ones(1), np.array([1e9])
    base = 8e-6 / 8.4  # per us of tuning.cc's baseLat
    # inside one NVLink domain (8 ranks, stride 1): ring all-reduce, Simple protocol
    ring = 8.4 * base + 2 * 7 * 3.4e-6 + 2 * 7 / 8 * 1e9 / 400e9
    tree = 8.4 * base + 2 * 7 * 4e-6 + 2 * 1e9 / (0.92 * 400e9)
    ll128 = 14.0 * base + 2 * 7 * 1.9e-6 + 2 * 7 / 8 * 1e9 / (0.92 * 400e9)
    assert ring < min(tree, ll128)
    assert coll.all_reduce_time_s(size, np.array([8.0]), one, link)[0] == pytest.approx(ring)
    # 64 ranks, stride 8: one member per domain, every step crosses the NIC at 50 GB/s
    ag = 8.4 * base + 63 * 14e-6 + 63 / 64 * 1e9 / 50e9
    got = coll.all_gather_time_s(size, np.array([64.0]), np.array([8.0]), link)[0]
    assert got == pytest.approx(ag)
    # 64 ranks, stride 1: 8 per domain share 8 NICs -> min(400, 8*50) GB/s; 8 of the 63 steps
    # cross between the 8 domains at the network's latency, 55 stay on NVLink
    ag8 = 8.4 * base + 55 * 3.4e-6 + 8 * 14e-6 + 63 / 64 * 1e9 / 400e9
    assert coll.all_gather_time_s(size, np.array([64.0]), one, link)[0] == pytest.approx(ag8)
    # a tiny all-reduce over 1024 ranks: the tree (2·log2(128) network hops) with LL
    small, n = np.array([1e3]), np.array([1024.0])
    tree_ll = 6.8 * base + 2 * (7 * 0.6e-6 + 7 * 5.0e-6) + 2 * 1e3 * 3.8 / 400e9
    assert coll.all_reduce_time_s(small, n, one, link)[0] == pytest.approx(tree_ll)
    p2p = coll.p2p_time_s(size, inside=np.array([False]), link=link)[0]
    assert p2p == pytest.approx(8e-6 + 4e-6 + 1e9 / 50e9)
    assert coll.all_reduce_time_s(size, one, one, link)[0] == 0.0


def test_collective_protocol_follows_the_message_size() -> None:
    """Small messages take LL (low latency, a quarter of the bandwidth), large ones Simple:
    the achieved bus bandwidth rises with the size, and the cost stays the lower envelope."""
    link = _link(5)
    sizes = np.array([1e2, 1e4, 1e6, 1e8, 1e10])
    n, stride = np.full(5, 64.0), np.ones(5)
    t = coll.all_gather_time_s(sizes, n, stride, link)
    busbw = 63 / 64 * sizes / t
    assert np.all(np.diff(busbw) > 0)
    assert busbw[-1] == pytest.approx(400e9, rel=0.02)
    base = 8e-6 / 8.4
    ll = 6.6 * base + 55 * 0.6e-6 + 8 * 2.7e-6 + 63 / 64 * 1e2 / (0.25 * 400e9)
    assert t[0] == pytest.approx(ll)


def test_constants_file_round_trip(tmp_path: Path) -> None:
    values = default_constants()
    assert values["gemm_peak_fraction_hopper"] > 0
    target = tmp_path / "c.json"
    write_constants(target, {"gemm_peak_fraction_hopper": 0.5}, provenance="test fit")
    doc = json.loads(target.read_text())
    assert doc["provenance"] == "test fit"
    loaded = load_constants(target)
    assert loaded["gemm_peak_fraction_hopper"] == 0.5
    assert set(loaded) == set(values)
    for entry in doc["constants"]:
        assert {"name", "value", "unit", "meaning", "provenance"} <= set(entry)
    with pytest.raises(CalibrationError):
        write_constants(target, {"no_such_constant": 1.0}, provenance="x")
    with pytest.raises(CalibrationError):
        DefaultEfficiency.from_constants({"no_such_constant": 1.0})
    eff = DefaultEfficiency.from_constants(loaded)
    assert eff.constants["gemm_peak_fraction_hopper"] == 0.5
    # a fit of a few constants on a subset of the rows keeps the file's top-level provenance
    write_constants(
        target, {"gemm_peak_fraction_blackwell": 0.6}, provenance="subset", file_provenance=False
    )
    doc = json.loads(target.read_text())
    assert doc["provenance"] == "test fit"
    entry = next(e for e in doc["constants"] if e["name"] == "gemm_peak_fraction_blackwell")
    assert (entry["value"], entry["provenance"]) == (0.6, "subset")
    assert load_constants(target)["gemm_peak_fraction_hopper"] == 0.5


def test_tiny_model_has_a_floor() -> None:
    tiny = {
        "num_layers": 2,
        "hidden_size": 128,
        "num_attention_heads": 4,
        "vocab_size": 1024,
        "seq_length": 128,
    }
    p = predict(_scenario(model=tiny, gbs=1))
    assert 1e-4 < p.iteration_time_s < 0.05


def test_llama3_8b_cp2_fp8_nemo_fits() -> None:
    """NeMo 24.07 ran this layout on 8 H100 80 GB (12,273 tokens/s/GPU)."""
    doc = {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"context_parallel": 2, "global_batch_size": 128, "precision": "fp8"},
        "training": {"framework": "nemo"},
    }
    p = predict(parse_scenario(doc))
    assert p.fits_in_memory
    cp1 = dict(doc, parallelism={"global_batch_size": 128, "precision": "fp8"})
    assert predict(parse_scenario(cp1)).memory.activations_bytes > p.memory.activations_bytes


@settings(max_examples=30, deadline=None)
@given(
    pp=st.sampled_from([2, 4, 8]),
    vp=st.sampled_from([1, 2]),
    m=st.integers(min_value=1, max_value=32),
    extra=st.integers(min_value=1, max_value=32),
)
def test_bubble_fraction_shrinks_with_more_microbatches(
    pp: int, vp: int, m: int, extra: int
) -> None:
    # Megatron-Core's interleaved schedule refuses m % p != 0: a framework without
    # that rule ("other") keeps every micro-batch count, m < p included
    def any_m(gbs: int) -> Scenario:
        s = _scenario("llama2-7b", pp=pp, gbs=gbs)
        training = dataclasses.replace(s.training, framework=Framework.OTHER)
        par = dataclasses.replace(s.parallelism, virtual_pipeline=vp)
        return dataclasses.replace(s, training=training, parallelism=par)

    few, many = predict_batch([any_m(g) for g in (m, m + extra)])
    assert many.breakdown.pp_bubble_s / many.iteration_time_s < (
        few.breakdown.pp_bubble_s / few.iteration_time_s
    )


@settings(max_examples=30, deadline=None)
@given(
    preset=st.sampled_from(["llama2-7b", "gpt3-175b", "mixtral-8x7b"]),
    tp=st.sampled_from([1, 2, 8]),
    sp=st.booleans(),
    flash=st.booleans(),
)
def test_recompute_trades_time_for_memory(preset: str, tp: int, sp: bool, flash: bool) -> None:
    kw: dict[str, Any] = {"tp": tp, "pp": 8 if preset == "gpt3-175b" else 1, "dp": 2}
    # Megatron-Core trains an MoE model with tensor parallelism only under sequence parallelism
    sp = sp or preset == "mixtral-8x7b"
    kw |= {"sequence_parallel": sp and tp > 1, "flash_attention": flash}
    none, sel, full = predict_batch(
        [_scenario(preset, recompute=r, **kw) for r in ("none", "selective", "full")]
    )
    assert none.breakdown.compute_s <= sel.breakdown.compute_s <= full.breakdown.compute_s
    a = (none.memory.activations_bytes, sel.memory.activations_bytes, full.memory.activations_bytes)
    assert a[0] >= a[1] >= a[2]


@settings(max_examples=30, deadline=None)
@given(
    preset=st.sampled_from(["llama2-13b", "mixtral-8x7b"]),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2]),
    dp=st.sampled_from([1, 2, 8]),
)
def test_higher_zero_stage_never_raises_memory(preset: str, tp: int, pp: int, dp: int) -> None:
    runs = predict_batch([_scenario(preset, tp=tp, pp=pp, dp=dp, zero_stage=z) for z in range(4)])
    mem = [r.memory_per_gpu_bytes for r in runs]
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(mem))


@settings(max_examples=30, deadline=None)
@given(
    preset=st.sampled_from(["llama2-7b", "llama3-70b", "mixtral-8x7b"]),
    tp=st.sampled_from([1, 8]),
    dp=st.sampled_from([1, 2, 4]),
    factor=st.sampled_from([2, 4, 16]),
    zero=st.integers(min_value=0, max_value=1),
)
def test_more_replicas_never_lower_throughput(
    preset: str, tp: int, dp: int, factor: int, zero: int
) -> None:
    """Fixed per-replica batch (8 microbatches): more data-parallel replicas, more tokens/s.

    ZeRO-3/FSDP is left out on purpose: it re-gathers parameters every microbatch, so going
    from one replica (no communication) to two across nodes can really cost more than it adds.
    So is ZeRO-2: it reduce-scatters every microbatch's gradients (it keeps only
    their shard), the same per-microbatch communication.
    """
    small, big = predict_batch(
        [_scenario(preset, tp=tp, dp=d, gbs=d * 8, zero_stage=zero) for d in (dp, dp * factor)]
    )
    assert big.tokens_per_s >= small.tokens_per_s


@settings(max_examples=30, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 8]),
    factor=st.sampled_from([2, 4]),
    zero=st.integers(min_value=0, max_value=3),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_more_gpus_never_need_more_memory(
    tp: int, pp: int, dp: int, factor: int, zero: int, recompute: str
) -> None:
    kw: dict[str, Any] = {
        "tp": tp,
        "pp": pp,
        "gbs": 256,
        "zero_stage": zero,
        "recompute": recompute,
    }
    small, big = predict_batch([_scenario("llama2-13b", dp=d, **kw) for d in (dp, dp * factor)])
    assert big.memory_per_gpu_bytes <= small.memory_per_gpu_bytes


@pytest.mark.parametrize("gpu", sorted(gpu_catalog()))
def test_dense_and_moe_on_every_gpu_are_finite_positive(gpu: str) -> None:
    runs = predict_batch(
        [
            _scenario("llama3-8b", gpu, tp=2, dp=4),
            _scenario("qwen3-30b-a3b", gpu, tp=1, dp=8, expert_parallel=8),
            _scenario("mixtral-8x7b", gpu, tp=2, pp=2, dp=2, expert_parallel=2),
        ]
    )
    for p in runs:
        for value in (p.iteration_time_s, p.tokens_per_s, p.mfu, p.memory_per_gpu_bytes):
            assert math.isfinite(value)
            assert value > 0
        assert p.mfu < 1
        assert all(math.isfinite(v) and v >= 0 for v in p.breakdown.as_dict().values())
