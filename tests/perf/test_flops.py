"""FLOP counts against closed forms (Narayanan et al. SC'21; Korthikanti et al. 2022; 6N·D)."""

from __future__ import annotations

import inspect

import pytest

from planner.perf import DefaultEfficiency, engine, flops
from planner.perf.batch import ScenarioArrays
from planner.perf.flops import iteration_flops, model_flops_per_iteration
from planner.perf.frameworks import profile_of
from planner.perf.memory import total_params
from planner.scenario import parse_scenario
from planner.specs import ModelSpec, Recompute
from planner.specs.parallelism import RecomputeModule
from tests.perf.test_forms import SCENARIOS


def _model(preset: str, **overrides: object) -> ModelSpec:
    doc = {
        "model": {"preset": preset, **overrides},
        "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
        "parallelism": {"global_batch_size": 8},
    }
    return parse_scenario(doc).model


def test_gpt3_175b_matches_megatron_closed_form() -> None:
    m = _model("gpt3-175b", vocab_size=51200)
    b, s, n_layers, h, v = 1536, 2048, 96, 12288, 51200
    closed = 72 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (12 * h * n_layers))
    assert model_flops_per_iteration(m, num_sequences=b) == pytest.approx(closed, rel=1e-12)
    # Narayanan et al. SC'21 eq. 3 counts a full-recompute forward pass too (96 instead of 72).
    full = iteration_flops(m, num_sequences=b, recompute=Recompute.FULL)
    narayanan = 96 * b * s * n_layers * h**2 * (1 + s / (6 * h) + v / (16 * n_layers * h))
    assert full.hardware_total == pytest.approx(narayanan, rel=1e-12)


def test_gpt3_175b_close_to_six_n_d() -> None:
    m = _model("gpt3-175b")
    tokens = 1536 * 2048
    six_nd = 6 * total_params(m) * tokens
    ratio = model_flops_per_iteration(m, num_sequences=1536) / six_nd
    assert 1.0 < ratio < 1.15  # attention s² term (s/6h = 2.8 %) and untied LM head on top of 6N


def test_selective_recompute_adds_attention_core_forward() -> None:
    m = _model("gpt3-175b")
    sel = iteration_flops(m, num_sequences=4, recompute=Recompute.SELECTIVE)
    assert sel.recompute_attention_core == pytest.approx(sel.attention_core / 3)
    assert sel.recompute_gemm == 0
    # a selective recompute that keeps the cores (recompute_modules without core_attn,
    # torchtitan's op-level policy) re-runs none of their FLOPs
    kept = iteration_flops(
        m, num_sequences=4, recompute=Recompute.SELECTIVE, selective_core_share=0.0
    )
    assert kept.recompute_attention_core == 0
    assert kept.hardware_total == kept.model_total


def test_gqa_swiglu_and_moe_flops() -> None:
    dense = _model("llama3-8b")
    per_token = model_flops_per_iteration(dense, num_sequences=1) / dense.seq_length
    h, f, n_layers, s, v, kv = 4096, 14336, 32, 8192, 128256, 1024
    fwd = n_layers * (2 * h * (h + 2 * kv) + 2 * h * h + 6 * h * f + 4 * s * h) + 2 * h * v
    assert per_token == pytest.approx(3 * fwd)
    moe = _model("mixtral-8x7b")
    moe_tok = model_flops_per_iteration(moe, num_sequences=1) / moe.seq_length
    dense_equiv = _model("mixtral-8x7b", num_experts=0, moe_router_topk=0)
    dense_tok = model_flops_per_iteration(dense_equiv, num_sequences=1) / moe.seq_length
    # top-2 of 8 experts: the MLP work doubles, plus the router
    mlp = 3 * 32 * 6 * 4096 * 14336
    assert moe_tok - dense_tok == pytest.approx(mlp + 3 * 32 * 2 * 4096 * 8)


def test_the_engine_counts_flops_with_this_module_only() -> None:
    """One implementation: the engine imports ``iteration_flops`` from here, defines no FLOP
    formula of its own, and its model/hardware FLOPs equal this module's for ``ModelSpec``
    values, in both forms (arrays for a batch, Python floats for one scenario)."""
    assert engine.iteration_flops is flops.iteration_flops
    own = [
        name
        for name, value in vars(engine).items()
        if "flop" in name.lower()
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == engine.__name__
    ]
    assert not own, own
    eff = DefaultEfficiency()
    result = engine.evaluate(ScenarioArrays.from_scenarios(SCENARIOS), eff)
    for i, s in enumerate(SCENARIOS):
        par = s.parallelism
        # selective recompute re-runs the attention cores unless the modules leave core_attn
        # out or the stack's policy is op-level (torchtitan's keeps the attention kernel)
        core = par.recompute_modules is None or RecomputeModule.CORE_ATTN in par.recompute_modules
        op_level = profile_of(s.training.framework).op_level_selective_recompute
        expected = iteration_flops(
            s.model,
            num_sequences=par.global_batch_size,
            recompute=par.recompute,
            selective_core_share=1.0 if core and not op_level else 0.0,
        )
        one = engine.evaluate(ScenarioArrays.from_scenario(s), eff)
        assert result.model_flops[i] == one.model_flops == expected.model_total
        assert result.hardware_flops[i] == one.hardware_flops == expected.hardware_total


def test_flops_on_arrays_equal_flops_per_model() -> None:
    arrays = ScenarioArrays.from_scenarios(SCENARIOS)
    codes = arrays.recompute
    batch = iteration_flops(arrays, num_sequences=arrays.global_batch_size, recompute=codes)
    for i, s in enumerate(SCENARIOS):
        par = s.parallelism
        one = iteration_flops(s.model, num_sequences=par.global_batch_size, recompute=par.recompute)
        for name in ("gemm", "attention_core", "lm_head", "recompute_gemm"):
            assert getattr(batch, name)[i] == getattr(one, name), name
        assert batch.recompute_attention_core[i] == one.recompute_attention_core
        assert one.model_total == pytest.approx(one.gemm + one.attention_core + one.lm_head)
        recomputed = one.recompute_gemm + one.recompute_attention_core
        assert one.hardware_total == pytest.approx(one.model_total + recomputed)
