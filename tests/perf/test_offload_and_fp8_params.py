"""Activation offloading (``parallelism.activation_offload_layers``) and FP8 parameters
(``parallelism.fp8_param_gather``): the bytes ``planner.perf.memory`` and ``planner.perf.data``
document, and the combinations Megatron-Core refuses."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.perf import DefaultEfficiency, memory_per_gpu, predict
from planner.perf.batch import ScenarioArrays
from planner.perf.data import param_gather_bytes
from planner.perf.memory import activation_bytes_per_layer, loss_peak_bytes_arr, total_params
from planner.perf.optimizer import ADAM_HBM_BYTES_PER_PARAM, optimizer_times
from planner.perf.parameters import stage_params
from planner.perf.precision import weight_copy_bytes
from planner.scenario import parse_scenario
from planner.specs import Recompute, Scenario

# Llama 3 8B (catalog preset llama3-8b)
L, H, V = 32, 4096, 128256
ROOT = 2 * V * H + H  # untied embedding, LM head, final norm: not Transformer Engine modules


def _scenario(gpu: str = "h100-sxm", *, pp: int = 1, dp: int = 8, **par: Any) -> Scenario:
    return parse_scenario(
        {
            "model": {"preset": "llama3-8b"},
            "hardware": {"gpu": gpu, "num_gpus": pp * dp},
            "parallelism": {
                "pipeline_parallel": pp,
                "micro_batch_size": 2,
                "global_batch_size": 2 * dp * pp,
                **par,
            },
            "training": {"framework": "nemo"},
        }
    )


def test_offloaded_layers_leave_the_gpu_and_one_comes_back_for_the_last_backward() -> None:
    """``L - N`` layers with the loss, or ``L - N + 1`` in the last layer's backward."""
    slack = 1 + DefaultEfficiency().memory_fragmentation_fraction
    kept = _scenario()
    per_layer = activation_bytes_per_layer(kept, moe_layer=False, recompute=Recompute.NONE)
    loss = float(loss_peak_bytes_arr(ScenarioArrays.from_scenario(kept)))
    assert memory_per_gpu(kept).activations_bytes == pytest.approx((L * per_layer + loss) * slack)
    for offloaded in (8, 31):
        got = memory_per_gpu(_scenario(activation_offload_layers=offloaded)).activations_bytes
        held = (L - offloaded) * per_layer + max(loss, per_layer)
        assert got == pytest.approx(held * slack)
    # the model states do not move
    states = memory_per_gpu(_scenario(activation_offload_layers=8))
    assert states.weights_bytes == memory_per_gpu(kept).weights_bytes
    assert states.optimizer_bytes == memory_per_gpu(kept).optimizer_bytes


@pytest.mark.parametrize(
    ("par", "says"),
    [
        ({"pp": 2, "activation_offload_layers": 4}, "pipeline parallelism"),
        ({"activation_offload_layers": 4, "recompute": "full"}, "recompute"),
        ({"activation_offload_layers": L}, "model.num_layers=32"),
        ({"activation_offload_layers": -1}, ">= 0"),
        ({"fp8_param_gather": True}, "fp8 or mxfp8"),
    ],
)
def test_megatron_core_refuses_these_combinations(par: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says) as info:
        _scenario(**par)
    field = "fp8_param_gather" if "fp8_param_gather" in par else "activation_offload_layers"
    assert info.value.field == f"parallelism.{field}"


def test_fp8_parameters_replace_the_16_bit_weight_and_the_cached_copy() -> None:
    """Distributed optimizer: 16-bit weights and TE's 1-byte copy (3 bytes per transformer
    weight) become the 1-byte FP8 parameter; the embedding and the head stay 16-bit."""
    params = total_params(_scenario().model)
    linear = params - ROOT
    cached = memory_per_gpu(_scenario(precision="fp8", fp8_recipe="tensorwise"))
    fp8 = memory_per_gpu(_scenario(precision="fp8", fp8_recipe="tensorwise", fp8_param_gather=True))
    assert cached.weights_bytes == pytest.approx(2 * params + linear)
    assert fp8.weights_bytes == pytest.approx(2 * ROOT + linear)
    assert fp8.optimizer_bytes == cached.optimizer_bytes  # the master stays


def test_under_zero3_only_hopper_keeps_a_whole_model_of_fp8_transposes() -> None:
    """Megatron-FSDP: no whole-model copy on Blackwell (no transpose there); on Hopper the
    parameters' transposes, kept across the step (``keep_fp8_transpose_cache``), one byte per
    transformer weight."""
    linear = total_params(_scenario().model) - ROOT
    for gpu, kept in (("gb200", 0.0), ("h100-sxm", linear)):
        bf16 = memory_per_gpu(_scenario(gpu, zero_stage=3))
        quantised = _scenario(gpu, zero_stage=3, precision="fp8", fp8_param_gather=True)
        fp8 = memory_per_gpu(quantised)
        # the rank's shard of the model weights: FP8 parameters instead of 16-bit ones
        shard = linear / 8 * (float(weight_copy_bytes(ScenarioArrays.from_scenario(quantised))) - 2)
        assert fp8.weights_bytes - bf16.weights_bytes == pytest.approx(kept + shard)
        cached = memory_per_gpu(_scenario(gpu, zero_stage=3, precision="fp8"))
        assert cached.weights_bytes - bf16.weights_bytes == pytest.approx(linear)


def test_fp8_parameters_are_gathered_in_one_byte() -> None:
    scenarios = [
        _scenario(precision="fp8", fp8_param_gather=True),
        _scenario(precision="fp8"),
        _scenario(),
        _scenario("gb200", precision="mxfp8", fp8_param_gather=True),
    ]
    got = param_gather_bytes(ScenarioArrays.from_scenarios(scenarios))
    assert got.tolist() == [1.0, 2.0, 2.0, 1.0]
    # an exposed gather (not overlapped) is shorter with half the bytes
    exposed = [
        predict(
            _scenario(precision="fp8", overlap_param_gather=False, **flag)
        ).breakdown.dp_comm_exposed_s
        for flag in ({"fp8_param_gather": True}, {})
    ]
    assert exposed[0] < exposed[1]


def test_fp8_parameters_are_requantised_from_the_owned_master_shard() -> None:
    """Each rank casts its fp32 master shard into its FP8 parameter shard (amax pass + cast:
    read 8, write 1 per owned parameter) and Adam writes no 16-bit copy; without FP8
    parameters every local weight is cast to its cached copy (read 2, write 1)."""
    fp8 = _scenario("gb200", zero_stage=3, precision="fp8", fp8_param_gather=True)
    cached = _scenario("gb200", zero_stage=3, precision="fp8")
    a = ScenarioArrays.from_scenarios([fp8, cached])
    params = stage_params(a).busiest()
    hbm = optimizer_times(a, DefaultEfficiency(), params).hbm_bytes
    local = float(params.dense[1] + params.expert[1])
    owned = local / 8
    adam = ADAM_HBM_BYTES_PER_PARAM  # Megatron-FSDP keeps the whole fp32 master
    assert hbm[1] == pytest.approx(adam * owned + 3.0 * local)
    assert hbm[0] == pytest.approx((adam - 2.0) * owned + 9.0 * owned)


def test_megatron_fsdp_keeps_a_model_weight_shard_and_the_whole_fp32_master() -> None:
    """``nemo`` under ZeRO-3 (Megatron-FSDP, ``optim_grads_params``): per owned parameter the
    16-bit model-weight shard (2 bytes) and the whole fp32 master (4, not the distributed
    Adam's 2-byte remainder) beside the two fp32 moments; PyTorch FSDP2 (``fsdp``) holds no
    16-bit shard (its fp32 shard is the parameter)."""
    owned = total_params(_scenario().model) / 8
    zero1 = memory_per_gpu(_scenario(zero_stage=1))
    zero3 = memory_per_gpu(_scenario(zero_stage=3))
    assert zero1.optimizer_bytes == pytest.approx((2 + 8) * owned)
    assert zero3.optimizer_bytes == pytest.approx((4 + 8) * owned)
    doc = {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"micro_batch_size": 2, "global_batch_size": 16, "zero_stage": 3},
    }
    torch_fsdp = memory_per_gpu(parse_scenario({**doc, "training": {"framework": "fsdp"}}))
    megatron_fsdp = memory_per_gpu(parse_scenario({**doc, "training": {"framework": "nemo"}}))
    assert megatron_fsdp.weights_bytes - torch_fsdp.weights_bytes == pytest.approx(2 * owned)
