"""GPU catalog, model presets and scheduler GPU-type mapping."""

from __future__ import annotations

import pytest

from planner.catalog import (
    get_gpu,
    gpu_catalog,
    gpu_key_for_gres_type,
    model_preset,
    model_preset_keys,
    model_preset_source,
)
from planner.errors import SpecError
from planner.perf.memory import total_params
from planner.scenario import parse_scenario
from planner.specs import Precision

GPU_KEYS = [
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-sxm-96gb",
    "h100-pcie",
    "h200",
    "gh200",
    "b200",
    "b300",
    "gb200",
    "gb300",
    "mi300x",
    "mi325x",
]
PRESETS = [
    "gpt3-175b",
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3.1-405b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "nemotron4-15b",
    "nemotron4-340b",
    "mpt-7b",
    "mpt-30b",
    "mpt-70b",
]
SOURCED = (
    "dense_peak_tflop_per_s",
    "hbm_gib",
    "architecture",
    "num_sms",
    "scale_up_latency_us",
    "scale_out_latency_us",
    "hbm_bandwidth_gb_per_s",
    "scale_up_bandwidth_gb_per_s",
    "nvlink_domain_size",
    "gpus_per_node",
    "scale_out_gbit_per_s",
)


@pytest.mark.parametrize("key", GPU_KEYS)
def test_every_gpu_has_values_and_sources(key: str) -> None:
    gpu = get_gpu(key)
    assert gpu.key == key
    assert dict(gpu.sources).keys() >= set(SOURCED)
    assert all(dict(gpu.sources)[k] for k in SOURCED)
    assert gpu.supports(Precision.BF16)
    assert gpu.supports(Precision.FP16)
    assert 100e12 < gpu.peak_flop_per_s(Precision.BF16) < 5e15
    assert 30e9 <= gpu.hbm_bytes <= 320e9
    assert gpu.hbm_bandwidth_bytes_per_s > 1e12
    assert gpu.scale_out_bandwidth_bytes_per_s >= 25e9


def test_si_conversion_of_h100() -> None:
    h100 = gpu_catalog()["h100-sxm"]
    assert h100.peak_flop_per_s(Precision.BF16) == pytest.approx(989.4e12)
    assert h100.peak_flop_per_s(Precision.FP8) == pytest.approx(1978.9e12)
    assert h100.hbm_bytes == pytest.approx(80 * 2**30)
    assert h100.hbm_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.scale_up_bandwidth_bytes_per_s == pytest.approx(450e9)
    assert h100.scale_out_bandwidth_bytes_per_s == pytest.approx(50e9)  # 400 Gbit/s


def test_h100_96gb_is_the_documented_500_w_part() -> None:
    # torchtitan's benchmark hosts (Meta Grand Teton): 96 GB HBM2e at 2.4 TB/s, 500 W, a peak
    # "between SXM and NVL" that is not published: the midpoint of the two datasheet peaks
    part = get_gpu("H100 96GB")
    assert part.key == "h100-sxm-96gb"
    assert part.hbm_bytes == pytest.approx(96 * 2**30)
    assert part.hbm_bandwidth_bytes_per_s == pytest.approx(2.4e12)
    nvl_bf16, sxm_bf16 = 835.5e12, get_gpu("h100-sxm").peak_flop_per_s(Precision.BF16)
    assert part.peak_flop_per_s(Precision.BF16) == pytest.approx((nvl_bf16 + sxm_bf16) / 2)
    nvl_fp8, sxm_fp8 = 1670.5e12, get_gpu("h100-sxm").peak_flop_per_s(Precision.FP8)
    assert part.peak_flop_per_s(Precision.FP8) == pytest.approx((nvl_fp8 + sxm_fp8) / 2)
    assert (part.num_sms, part.nvlink_domain_size, part.architecture) == (132, 8, "hopper")
    assert part.scale_out_bandwidth_bytes_per_s == pytest.approx(50e9)  # 400 Gbit/s per GPU


def test_precision_support() -> None:
    assert not get_gpu("a100-80gb").supports(Precision.FP8)
    assert get_gpu("b200").supports(Precision.NVFP4)
    assert get_gpu("gb300").supports(Precision.MXFP8)
    assert not get_gpu("h100-sxm").supports(Precision.MXFP8)
    with pytest.raises(SpecError, match="use one of bf16, fp16"):
        get_gpu("a100-40gb").peak_flop_per_s(Precision.FP8)
    assert get_gpu("gb200").nvlink_domain_size == 72


def test_unknown_gpu_is_a_spec_error_with_hint() -> None:
    with pytest.raises(SpecError) as info:
        get_gpu("h100-sx")
    assert info.value.field == "hardware.gpu"
    assert "did you mean 'h100-sxm'" in info.value.message
    assert get_gpu("H100-SXM").key == "h100-sxm"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("h100", "h100-sxm"),
        ("H100", "h100-sxm"),
        ("h100_80gb", "h100-sxm"),
        ("NVIDIA-H100-80GB-HBM3", "h100-sxm"),
        ("nvidia_h100_80gb_hbm3", "h100-sxm"),
        ("NVIDIA-H100-PCIe", "h100-pcie"),
        ("h100_96gb", "h100-sxm-96gb"),
        ("NVIDIA-H100-96GB-HBM2e", "h100-sxm-96gb"),
        ("H100 NVL", "h100-pcie"),
        ("a100", "a100-80gb"),
        ("a100-sxm4-80gb", "a100-80gb"),
        ("NVIDIA-A100-SXM4-40GB", "a100-40gb"),
        ("a100_40g", "a100-40gb"),
        ("h200", "h200"),
        ("NVIDIA-H200", "h200"),
        ("NVIDIA-GH200-480GB", "gh200"),
        ("gh200", "gh200"),
        ("b200", "b200"),
        ("NVIDIA-B200", "b200"),
        ("gb200", "gb200"),
        ("NVIDIA-GB200", "gb200"),
        ("b300", "b300"),
        ("gb300", "gb300"),
        ("mi300x", "mi300x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("mi325x", "mi325x"),
        ("v100", None),
        ("tesla-t4", None),
        ("", None),
        ("gpu", None),
    ],
)
def test_gres_type_mapping(name: str, key: str | None) -> None:
    assert gpu_key_for_gres_type(name) == key


def test_all_presets_present_with_sources() -> None:
    assert set(PRESETS) <= set(model_preset_keys())
    for key in PRESETS:
        assert len(model_preset_source(key)) > 20
        assert "source" not in model_preset(key)


@pytest.mark.parametrize("key", PRESETS)
def test_presets_parse(key: str) -> None:
    doc = {
        "model": {"preset": key},
        "hardware": {"gpu": "h200", "num_gpus": 8},
        "parallelism": {"global_batch_size": 8},
    }
    scenario = parse_scenario(doc)
    assert scenario.model.preset == key


def test_preset_parameter_counts_match_names() -> None:
    def params(key: str) -> float:
        doc = {
            "model": {"preset": key},
            "hardware": {"gpu": "h200", "num_gpus": 8},
            "parallelism": {"global_batch_size": 8},
        }
        return total_params(parse_scenario(doc).model)

    assert params("gpt3-175b") == pytest.approx(175e9, rel=0.02)
    assert params("llama3-70b") == pytest.approx(70.6e9, rel=0.02)
    assert params("llama3.1-405b") == pytest.approx(405.8e9, rel=0.02)
    assert params("llama2-7b") == pytest.approx(6.74e9, rel=0.02)
    assert params("mixtral-8x7b") == pytest.approx(46.7e9, rel=0.02)
    assert params("qwen3-235b-a22b") == pytest.approx(235e9, rel=0.02)
    assert params("qwen3-30b-a3b") == pytest.approx(30.5e9, rel=0.02)
    assert params("nemotron4-340b") == pytest.approx(341e9, rel=0.03)


def test_unknown_preset() -> None:
    with pytest.raises(SpecError, match="did you mean 'llama3-8b'"):
        model_preset("llama3-8")
