"""Spec value objects: frozen, validated in __post_init__ with SpecError naming the field."""

from __future__ import annotations

import dataclasses

import pytest

from planner.catalog import get_gpu
from planner.errors import SpecError
from planner.specs import (
    Activation,
    HardwareSpec,
    ModelSpec,
    ParallelismSpec,
    Precision,
    Recompute,
    Scenario,
    TrainingSpec,
)


def _model(**overrides: object) -> ModelSpec:
    fields: dict[str, object] = {
        "num_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 8,
        "num_query_groups": 8,
        "ffn_hidden_size": 1024,
        "vocab_size": 1000,
        "seq_length": 256,
        "kv_channels": 32,
    }
    fields.update(overrides)
    return ModelSpec(**fields)  # type: ignore[arg-type]


def test_specs_are_frozen_and_hashable() -> None:
    m = _model()
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.num_layers = 3  # type: ignore[misc]
    assert hash(m) == hash(_model())
    assert not hasattr(m, "__dict__")  # slots


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"num_layers": 0}, "model.num_layers"),
        ({"hidden_size": 12.5}, "model.hidden_size"),
        ({"num_query_groups": 3}, "model.num_query_groups"),
        ({"num_experts": 1}, "model.num_experts"),
        (
            {"num_experts": 4, "moe_router_topk": 5, "moe_ffn_hidden_size": 64},
            "model.moe_router_topk",
        ),
        ({"num_experts": 4, "moe_router_topk": 2}, "model.moe_ffn_hidden_size"),
        (
            {
                "num_experts": 4,
                "moe_router_topk": 2,
                "moe_ffn_hidden_size": 8,
                "num_dense_layers": 4,
            },
            "model.num_dense_layers",
        ),
        ({"moe_router_topk": 2}, "model.moe_router_topk"),
        ({"activation": "relu"}, "model.activation"),
        ({"untie_embeddings": 1}, "model.untie_embeddings"),
    ],
)
def test_model_validation(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as info:
        _model(**overrides)
    assert info.value.field == field


def test_model_properties() -> None:
    moe = _model(num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=512, num_dense_layers=1)
    assert moe.is_moe
    assert moe.num_moe_layers == 3
    assert _model(activation=Activation.SWIGLU).activation.is_gated
    assert _model(num_query_groups=2).kv_width == 64


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tensor_parallel": 0}, "parallelism.tensor_parallel"),
        ({"zero_stage": -1}, "parallelism.zero_stage"),
        ({"sequence_parallel": True}, "parallelism.sequence_parallel"),
        ({"virtual_pipeline": 2}, "parallelism.virtual_pipeline"),
        ({"data_parallel": 3}, "parallelism.global_batch_size"),
        ({"recompute": "full"}, "parallelism.recompute"),
        ({"precision": "bf16"}, "parallelism.precision"),
    ],
)
def test_parallelism_validation(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(SpecError) as info:
        ParallelismSpec(global_batch_size=8, **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_parallelism_microbatches() -> None:
    par = ParallelismSpec(data_parallel=4, micro_batch_size=2, global_batch_size=64)
    assert par.num_microbatches == 8
    assert par.recompute is Recompute.NONE
    assert par.precision is Precision.BF16


def _hardware(num_gpus: int = 8) -> HardwareSpec:
    return HardwareSpec(
        gpu=get_gpu("h100-sxm"),
        num_gpus=num_gpus,
        gpus_per_node=8,
        nvlink_domain_size=8,
        inter_node_bandwidth_gbit_per_s=400.0,
    )


def test_hardware_bandwidths() -> None:
    hw = _hardware()
    assert hw.bandwidth_for_group_bytes_per_s(8) == pytest.approx(450e9)
    assert hw.bandwidth_for_group_bytes_per_s(16) == pytest.approx(50e9)
    with pytest.raises(SpecError, match=r"hardware\.num_gpus"):
        _hardware(0)


def test_training_validation() -> None:
    assert TrainingSpec().total_tokens is None
    with pytest.raises(SpecError, match=r"training\.train_iters"):
        TrainingSpec(train_iters=-1)
    with pytest.raises(SpecError, match=r"training\.total_tokens"):
        TrainingSpec(total_tokens=float("inf"))


def test_scenario_cross_checks() -> None:
    par = ParallelismSpec(tensor_parallel=2, data_parallel=2, global_batch_size=8)
    with pytest.raises(SpecError) as info:
        Scenario(model=_model(), hardware=_hardware(8), parallelism=par)
    assert info.value.field == "parallelism.data_parallel"
    assert "set data_parallel to 4" in info.value.message
    ok = Scenario(model=_model(), hardware=_hardware(4), parallelism=par)
    assert ok.tokens_per_iteration == 8 * 256
