"""Low-precision recipes: GEMM formats, quantisation traffic, memory, and which GPUs run them."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import predict
from planner.perf.batch import ScenarioArrays, with_fields
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate
from planner.perf.frameworks import profile_of
from planner.perf.operators import operator_times
from planner.perf.optable import OperatorTable
from planner.perf.precision import (
    NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT,
    NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT,
    QUANTIZE_BYTES_PER_ELEMENT,
    QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT,
    SAVED_INPUT_BYTES,
    SCALE_SWIZZLE_BYTES_PER_ELEMENT,
    WEIGHT_COPY_BYTES,
    norm_output_quantize_bytes,
    quantize_bytes,
    scale_swizzle_bytes,
)
from planner.scenario import parse_scenario
from planner.scenario.megatron_args import scenario_document_from_megatron_args
from planner.specs import Scenario
from planner.specs.parallelism import Fp8Recipe
from planner.specs.scenario import Framework


def _scenario(gpu: str = "h100-sxm", **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-70b"},
            "hardware": {"gpu": gpu, "num_gpus": 64},
            "parallelism": {
                "tensor_parallel": 4,
                "pipeline_parallel": 4,
                "global_batch_size": 128,
                **par,
            },
        }
    )


def test_every_recipe_has_its_table_entries() -> None:
    tables = (
        QUANTIZE_BYTES_PER_ELEMENT,
        QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT,
        NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT,
        NORM_FUSED_QUANTIZE_BYTES_PER_ELEMENT_ANY_LAYOUT,
    )
    for table in (*tables, WEIGHT_COPY_BYTES, SAVED_INPUT_BYTES, SCALE_SWIZZLE_BYTES_PER_ELEMENT):
        assert len(table) == len(Fp8Recipe) + 1  # code 0 is 16-bit training


def test_the_precision_gives_the_default_recipe() -> None:
    assert _scenario(precision="fp8").parallelism.low_precision_recipe is Fp8Recipe.DELAYED
    assert _scenario(precision="bf16").parallelism.low_precision_recipe is None
    blackwell = _scenario("b200", precision="nvfp4").parallelism
    assert blackwell.low_precision_recipe is Fp8Recipe.NVFP4


def test_recipes_that_do_not_fit_the_precision_or_the_gpu_are_refused() -> None:
    with pytest.raises(SpecError, match=r"parallelism\.fp8_recipe.*set parallelism\.precision"):
        _scenario(precision="bf16", fp8_recipe="delayed")
    with pytest.raises(SpecError, match=r"parallelism\.fp8_recipe.*use one of mxfp8"):
        _scenario("b200", precision="mxfp8", fp8_recipe="delayed")
    with pytest.raises(SpecError, match=r"parallelism\.fp8_recipe.*Blackwell"):
        _scenario(precision="fp8", fp8_recipe="mxfp8")  # Hopper has no MX tensor cores
    with pytest.raises(SpecError, match=r"parallelism\.precision.*Blackwell.*use one of"):
        _scenario(precision="nvfp4")
    with pytest.raises(SpecError, match=r"FP8 tensor cores arrived with Hopper"):
        _scenario("a100-80gb", precision="fp8")


def test_current_scaling_and_block_scales_cost_time_not_memory() -> None:
    delayed = predict(_scenario(precision="fp8", fp8_recipe="delayed"))
    tensorwise = predict(_scenario(precision="fp8", fp8_recipe="tensorwise"))
    blockwise = predict(_scenario(precision="fp8", fp8_recipe="blockwise"))
    assert delayed.iteration_time_s < tensorwise.iteration_time_s  # one more amax pass
    assert delayed.iteration_time_s < blockwise.iteration_time_s  # scale promotion in the GEMM
    assert delayed.memory_per_gpu_bytes == tensorwise.memory_per_gpu_bytes


def test_blackwell_formats_order_time_and_memory() -> None:
    runs = {p: predict(_scenario("b200", precision=p)) for p in ("bf16", "mxfp8", "nvfp4")}
    assert runs["nvfp4"].iteration_time_s < runs["mxfp8"].iteration_time_s
    assert runs["mxfp8"].iteration_time_s < runs["bf16"].iteration_time_s
    acts = {p: r.memory.activations_bytes for p, r in runs.items()}
    assert acts["nvfp4"] < acts["mxfp8"] < acts["bf16"]


def test_the_lm_head_stays_16_bit() -> None:
    eff = DefaultEfficiency()
    heads = [
        operator_times(ScenarioArrays.from_scenario(_scenario(precision=p)), eff).lm_head_s
        for p in ("bf16", "fp8")
    ]
    assert heads[0] == heads[1]
    fp8 = evaluate(ScenarioArrays.from_scenario(_scenario(precision="fp8")), eff)
    assert fp8.iteration_time_s > 0


def test_megatron_recipe_flags() -> None:
    base = (
        "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
        "--global-batch-size 64 "
    )
    doc = scenario_document_from_megatron_args(
        base + "--fp8-format hybrid --fp8-recipe blockwise", num_gpus=8, gpu="h100"
    )
    assert doc is not None
    par = parse_scenario(doc).parallelism
    assert (str(par.precision), par.fp8_recipe) == ("fp8", Fp8Recipe.BLOCKWISE)
    doc = scenario_document_from_megatron_args(
        base + "--fp4-format e2m1 --fp4-recipe nvfp4", num_gpus=8, gpu="b200"
    )
    assert doc is not None
    assert parse_scenario(doc).parallelism.low_precision_recipe is Fp8Recipe.NVFP4


def _layer_s(gpu: str, recipe: str, *, fused: bool) -> tuple[float, float]:
    """Forward and backward seconds of one dense layer, the norm-fused cast on or off."""
    precision = recipe if recipe in ("mxfp8", "nvfp4") else "fp8"
    a = ScenarioArrays.from_scenario(_scenario(gpu, precision=precision, fp8_recipe=recipe))
    times = operator_times(with_fields(a, {"fp8_norm_fused_cast": fused}), DefaultEfficiency())
    return float(times.dense_forward_s), float(times.dense_backward_s)


def test_te_norms_quantise_the_qkv_and_fc1_inputs_by_recipe() -> None:
    """Megatron-Core's QKV and dense FC1 are TE ``LayerNormLinear`` modules: under delayed
    scaling the norm writes the FP8 operand itself (only the transposed copy is extra), under
    current scaling it writes the amax with its output (the cast skips the amax pass), MXFP8
    norms run unfused; the backward's output gradients are cast as before."""
    saved = {}
    for gpu, recipe in (("h100-sxm", "delayed"), ("h100-sxm", "tensorwise"), ("b200", "mxfp8")):
        fused, unfused = _layer_s(gpu, recipe, fused=True), _layer_s(gpu, recipe, fused=False)
        assert fused[1] == unfused[1]
        saved[recipe] = unfused[0] - fused[0]
    assert saved["delayed"] > saved["tensorwise"] > 0.0
    assert saved["mxfp8"] == 0.0
    # 3 of the 4 bytes per element saved under delayed scaling, 2 of 6 under current scaling
    assert saved["delayed"] / saved["tensorwise"] == pytest.approx(1.5, rel=0.05)
    stacks = {f for f in Framework if profile_of(f).fp8_norm_fused_cast}
    assert stacks == {Framework.MEGATRON, Framework.NEMO}


def test_per_tensor_fp8_writes_no_transposed_copy_where_gemms_take_any_layout() -> None:
    """Transformer Engine writes the transposed FP8 copy only for TN-only FP8 GEMMs (Hopper);
    on Blackwell one row-wise copy serves both GEMMs, a byte less per element; blockwise
    scaling's column-wise copy is its own quantisation on both."""
    per_gpu = {}
    for gpu in ("h100-sxm", "b200"):
        for recipe in ("delayed", "tensorwise", "blockwise"):
            a = ScenarioArrays.from_scenario(_scenario(gpu, precision="fp8", fp8_recipe=recipe))
            per_gpu[gpu, recipe] = (float(quantize_bytes(a)), float(norm_output_quantize_bytes(a)))
    assert per_gpu["h100-sxm", "delayed"] == (4.0, 1.0)
    assert per_gpu["b200", "delayed"] == (3.0, 0.0)
    assert per_gpu["h100-sxm", "tensorwise"] == (6.0, 4.0)
    assert per_gpu["b200", "tensorwise"] == (5.0, 3.0)
    assert per_gpu["b200", "blockwise"] == per_gpu["h100-sxm", "blockwise"]


def test_block_scaled_gemms_pay_a_scale_swizzle_kernel_per_operand_and_call() -> None:
    """Transformer Engine swizzles both operands' block scales in a kernel each before every
    MXFP8 and NVFP4 GEMM call (a grouped GEMM call: one per operand list, however many
    launches); per-tensor scales need none.
    Small scale tensors: each swizzle takes the kernel floor."""
    eff = DefaultEfficiency()
    arrays = {
        p: ScenarioArrays.from_scenario(_scenario("b200", precision=p, fp8_recipe=r))
        for p, r in (("fp8", "tensorwise"), ("mxfp8", "mxfp8"), ("nvfp4", "nvfp4"))
    }
    assert [float(scale_swizzle_bytes(a)) for a in arrays.values()] == [0.0, 1 / 32, 1 / 16]
    hopper = ScenarioArrays.from_scenario(_scenario(precision="fp8", fp8_recipe="blockwise"))
    assert float(scale_swizzle_bytes(hopper)) == 0.0

    def linear_s(
        a: ScenarioArrays, *, lp: bool = True, per_launch: float = 1.0, calls: float | None = None
    ) -> float:
        table = OperatorTable(a, eff)
        table.gemm(
            "g", 256, 256, 256, count=4, lp=lp, backward=True, per_launch=per_launch, calls=calls
        )
        return float(table.totals()["g"])

    # same FP8 tensor-core rate: the difference is the swizzles, 2 dgrad+wgrad products x 4
    # launches x 2 operands at the floor
    floor = eff.kernel_min_time_s
    per_tensor, mx = linear_s(arrays["fp8"]), linear_s(arrays["mxfp8"])
    assert mx - per_tensor == pytest.approx(2 * 4 * 2 * floor)
    grouped = linear_s(arrays["mxfp8"], per_launch=4.0) - linear_s(arrays["fp8"], per_launch=4.0)
    assert grouped == pytest.approx(2 * 1 * 2 * floor)
    # a grouped GEMM call over two launches (experts on two streams) swizzles once an operand
    two_waves = {p: linear_s(arrays[p], per_launch=2.0, calls=1.0) for p in ("fp8", "mxfp8")}
    assert two_waves["mxfp8"] - two_waves["fp8"] == pytest.approx(2 * 1 * 2 * floor)
    assert linear_s(arrays["mxfp8"], lp=False) == linear_s(arrays["fp8"], lp=False)
