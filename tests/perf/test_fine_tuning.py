"""Fine-tuning modes: full SFT on packed sequences and LoRA on a frozen base."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import predict
from planner.perf.batch import ScenarioArrays
from planner.perf.efficiency import DefaultEfficiency
from planner.perf.engine import evaluate
from planner.perf.lora import adapter_params_per_gpu
from planner.scenario import parse_scenario
from planner.specs import Scenario
from planner.specs.scenario import LORA_DEFAULT_RANK, LoraTarget


def _scenario(training: dict[str, Any] | None = None, **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama2-7b"},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {"global_batch_size": 32, **par},
            "training": training or {},
        }
    )


def test_lora_defaults_are_nemos() -> None:
    training = _scenario({"mode": "lora"}).training
    assert training.adapter_rank == LORA_DEFAULT_RANK == 32
    assert all(training.adapts(t) for t in LoraTarget)
    narrow = _scenario({"mode": "lora", "lora_targets": ["linear_qkv"]}).training
    assert narrow.adapts(LoraTarget.LINEAR_QKV)
    assert not narrow.adapts(LoraTarget.LINEAR_FC1)


def test_lora_fields_need_lora_mode() -> None:
    with pytest.raises(SpecError, match=r"training\.lora_rank"):
        _scenario({"mode": "sft", "lora_rank": 16})
    with pytest.raises(SpecError, match=r"training\.lora_targets"):
        _scenario({"mode": "lora", "lora_targets": ["attention"]})
    with pytest.raises(SpecError, match=r"training\.mode"):
        _scenario({"mode": "rlhf"})
    with pytest.raises(SpecError, match=r"training\.packed_sample_length"):
        _scenario({"mode": "sft", "packed_sample_length": 8192})


def test_lora_drops_the_base_weight_gradients_and_optimizer() -> None:
    full = predict(_scenario({"mode": "sft"}))
    lora = predict(_scenario({"mode": "lora"}))
    # no weight-gradient GEMMs (a third of the base GEMM work); the rank-32 adapters on all
    # four linear layers, memory-bound, give some of it back
    assert 0.6 < lora.breakdown.compute_s / full.breakdown.compute_s < 0.9
    assert lora.breakdown.optimizer_s < 0.02 * full.breakdown.optimizer_s
    assert lora.memory.optimizer_bytes < 0.01 * full.memory.optimizer_bytes
    assert lora.memory.gradients_bytes < 0.01 * full.memory.gradients_bytes
    # model FLOPs without the base's weight gradients: 2/3 of the weights' work, the attention
    # core and the adapters still train in full
    ratio = lora.model_flops_per_iteration / full.model_flops_per_iteration
    assert 2 / 3 < ratio < 0.8


def test_adapter_parameters_follow_the_tensor_parallel_split() -> None:
    # rank 32 on qkv (4096 -> 12288, column-parallel) at tp 1 and tp 4
    one = ScenarioArrays.from_scenario(
        _scenario({"mode": "lora", "lora_targets": ["linear_qkv"]}, tensor_parallel=1)
    )
    four = ScenarioArrays.from_scenario(
        _scenario({"mode": "lora", "lora_targets": ["linear_qkv"]}, tensor_parallel=4)
    )
    assert adapter_params_per_gpu(one) == 32 * 32 * (4096 + 12288)
    assert adapter_params_per_gpu(four) == 32 * 32 * (4096 + 12288 / 4)


def test_packed_samples_shorten_the_attention() -> None:
    eff = DefaultEfficiency()
    whole = evaluate(ScenarioArrays.from_scenario(_scenario({"mode": "sft"})), eff)
    packed = evaluate(
        ScenarioArrays.from_scenario(_scenario({"mode": "sft", "packed_sample_length": 256})), eff
    )
    assert packed.iteration_time_s < whole.iteration_time_s
    assert packed.model_flops < whole.model_flops


def test_pretrain_is_the_default_and_unchanged() -> None:
    assert (
        predict(_scenario()).iteration_time_s
        == predict(_scenario({"mode": "pretrain"})).iteration_time_s
    )


def test_nemo_keeps_only_the_master_weights_remainder() -> None:
    """NeMo's distributed Adam stores the fp32 master as a 16-bit remainder below the bf16
    parameter: 10 instead of 12 optimizer bytes per parameter."""

    def optimizer_bytes(framework: str) -> float:
        scenario = parse_scenario(
            {
                "model": {"preset": "llama2-7b"},
                "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
                "parallelism": {"global_batch_size": 32, "zero_stage": 0},
                "training": {"framework": framework},
            }
        )
        return predict(scenario).memory.optimizer_bytes

    assert optimizer_bytes("nemo") == pytest.approx(10 / 12 * optimizer_bytes("megatron"))
