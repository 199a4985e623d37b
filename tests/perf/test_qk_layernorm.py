"""Per-head query/key norms (Qwen3's QK-norm, Megatron ``--qk-layernorm``): their memory-bound
time, the activations they keep and their weights."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from planner.errors import SpecError
from planner.perf import DefaultEfficiency
from planner.perf.batch import ScenarioArrays
from planner.perf.memory import activation_bytes_arr
from planner.perf.operators import operator_times
from planner.perf.parameters import total_params
from planner.scenario import parse_scenario
from planner.specs import Scenario

TOKENS = 4096.0
QWEN3_30B_QK_WIDTH = 32 * 128 + 4 * 128  # 32 query heads, 4 key groups, 128 channels each


def _scenario(
    framework: str = "megatron", layout: dict[str, Any] | None = None, **model: Any
) -> Scenario:
    """Qwen3-30B-A3B on 8 H100s, one 4,096-token microbatch, expert parallel 8 unless
    ``layout`` says otherwise."""
    parallelism = {"expert_parallel": 8, "micro_batch_size": 1, "global_batch_size": 8}
    return parse_scenario(
        {
            "model": {"preset": "qwen3-30b-a3b", "moe_grouped_gemm": True, **model},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {**parallelism, **(layout or {})},
            "training": {"framework": framework},
        }
    )


def _gpu_arrays(scenario: Scenario) -> ScenarioArrays:
    """``scenario``'s arrays without the host's MoE issue time, which would hide the GPU's."""
    arrays = ScenarioArrays.from_scenarios([scenario])
    zero = np.zeros(1)
    return replace(arrays, moe_host_forward_s=zero, moe_host_expert_forward_s=zero)


def _layer_s(framework: str = "megatron", **model: Any) -> tuple[float, float]:
    """Forward and backward GPU seconds of one Qwen3-30B-A3B MoE layer."""
    times = operator_times(_gpu_arrays(_scenario(framework, **model)), DefaultEfficiency())
    return float(times.moe_forward_s[0]), float(times.moe_backward_s[0])


def test_qwen3_presets_normalise_each_query_and_key_head() -> None:
    for preset in ("qwen3-0.6b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b"):
        model = parse_scenario(
            {
                "model": {"preset": preset},
                "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
                "parallelism": {"global_batch_size": 8},
            }
        ).model
        assert model.per_head_qk_norm, preset
    assert not _scenario(qk_layernorm=False).model.per_head_qk_norm
    # MLA models carry their latent norms whatever the flag says
    deepseek = parse_scenario(
        {
            "model": {"preset": "deepseek-v3", "qk_layernorm": True},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
            "parallelism": {"global_batch_size": 8, "expert_parallel": 8},
        }
    ).model
    assert not deepseek.per_head_qk_norm
    with pytest.raises(SpecError, match=r"model\.qk_layernorm"):
        _scenario(qk_layernorm="sometimes")


def test_qk_norms_move_a_norms_bytes_over_the_query_and_key_heads() -> None:
    """A fused stack (Megatron-Core's TE RMSNorm): 4 bytes per query/key element forward (read
    x, write y), 6 backward (read dy and x, write dx), over 4,096 tokens and the 4,608 query and
    key channels of Qwen3-30B-A3B without tensor parallelism."""
    eff = DefaultEfficiency()
    gpu = ScenarioArrays.from_scenario(_scenario()).device

    def seconds(num_bytes: float) -> float:
        return num_bytes / float(eff.memory_bytes_per_s(num_bytes, gpu))

    with_norm, without = _layer_s(), _layer_s(qk_layernorm=False)
    elements = TOKENS * QWEN3_30B_QK_WIDTH
    assert with_norm[0] - without[0] == pytest.approx(seconds(4.0 * elements))
    assert with_norm[1] - without[1] == pytest.approx(seconds(6.0 * elements))
    # tensor parallelism splits the heads, and sequence parallelism does not shard them
    split = {"tensor_parallel": 2, "sequence_parallel": True, "expert_parallel": 4}
    tp2, tp2_off = (
        operator_times(_gpu_arrays(_scenario(layout=split, **model)), eff).moe_forward_s[0]
        for model in ({}, {"qk_layernorm": False})
    )
    added = float(tp2) - float(tp2_off)
    assert added == pytest.approx(seconds(4.0 * elements / 2))


def _qk_norm_forward_s(framework: str) -> float:
    return _layer_s(framework)[0] - _layer_s(framework, qk_layernorm=False)[0]


def test_eager_stacks_move_more_bytes_for_the_qk_norms() -> None:
    assert _qk_norm_forward_s("fsdp") > _qk_norm_forward_s("megatron") > 0.0


def test_automodel_norms_are_transformer_engine_kernels() -> None:
    """Automodel's benchmark recipes build every RMSNorm from TE (``rms_norm: te``) while the
    rest of its element-wise work stays eager: its QK-norms cost what Megatron-Core's do."""
    assert _qk_norm_forward_s("automodel") == pytest.approx(_qk_norm_forward_s("megatron"))


def test_qk_norms_keep_their_inputs_and_add_their_weights() -> None:
    """Each norm keeps its 16-bit input for the backward: 2 bytes per query and key element;
    its weight is one ``kv_channels`` scale (128) per norm per layer, 48 layers."""
    on = ScenarioArrays.from_scenario(_scenario())
    off = ScenarioArrays.from_scenario(_scenario(qk_layernorm=False))
    kept = [
        float(activation_bytes_arr(a, moe_layer=True, recompute=0, op_level=False))
        for a in (on, off)
    ]
    assert kept[0] - kept[1] == pytest.approx(2.0 * TOKENS * QWEN3_30B_QK_WIDTH)
    assert (
        total_params(_scenario().model) - total_params(_scenario(qk_layernorm=False).model)
        == 48 * 2 * 128
    )
