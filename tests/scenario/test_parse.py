"""parse_scenario: defaults, presets + overrides, and every documented error path."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.scenario import parse_scenario
from planner.specs import Activation, Framework, Precision, Recompute


def _error(doc: object) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_scenario(doc)
    return info.value


def test_defaults_are_filled(base_doc: dict[str, Any]) -> None:
    s = parse_scenario(base_doc)
    par, hw, m = s.parallelism, s.hardware, s.model
    assert par.data_parallel == 1024 // (8 * 4)
    assert par.sequence_parallel is True
    assert par.micro_batch_size == 1
    assert par.recompute is Recompute.NONE
    assert par.zero_stage == 1
    assert par.precision is Precision.BF16
    assert par.context_parallel == par.expert_parallel == par.virtual_pipeline == 1
    assert hw.gpus_per_node == 8
    assert hw.nvlink_domain_size == 8
    assert hw.inter_node_bandwidth_gbit_per_s == pytest.approx(400)
    assert s.training.framework is Framework.MEGATRON
    assert s.training.total_tokens == 1.5e13
    assert m.num_query_groups == 8
    assert m.activation is Activation.SWIGLU


def test_model_defaults_without_preset() -> None:
    s = parse_scenario(
        {
            "model": {
                "num_layers": 2,
                "hidden_size": 128,
                "num_attention_heads": 4,
                "vocab_size": 1024,
                "seq_length": 128,
            },
            "hardware": {"gpu": "a100-80gb", "num_gpus": 1},
            "parallelism": {"global_batch_size": 4},
        }
    )
    m = s.model
    assert m.activation is Activation.GELU
    assert m.untie_embeddings is True
    assert m.num_query_groups == 4
    assert m.ffn_hidden_size == 512
    assert m.kv_channels == 32
    assert s.parallelism.sequence_parallel is False
    assert s.name is None


def test_preset_fields_are_overridden(base_doc: dict[str, Any]) -> None:
    base_doc["model"].update(seq_length=4096, num_layers=40)
    s = parse_scenario(base_doc)
    assert s.model.seq_length == 4096
    assert s.model.num_layers == 40
    assert s.model.hidden_size == 8192  # from the preset
    assert s.model.preset == "llama3-70b"


def test_hardware_overrides_and_explicit_values(base_doc: dict[str, Any]) -> None:
    base_doc["hardware"].update(
        gpus_per_node=4, nvlink_domain_size=4, inter_node_bandwidth_gbit_per_s=200
    )
    base_doc["parallelism"].update(
        tensor_parallel=4,
        data_parallel=64,
        sequence_parallel=False,
        recompute="selective",
        precision="fp8",
        zero_stage=0,
        micro_batch_size=2,
        virtual_pipeline=5,
    )
    s = parse_scenario(base_doc)
    assert s.hardware.inter_node_bandwidth_bytes_per_s == pytest.approx(25e9)
    assert s.parallelism.precision is Precision.FP8
    assert s.parallelism.num_microbatches == 512 // (64 * 2)


def test_scientific_numbers_and_integral_floats(base_doc: dict[str, Any]) -> None:
    base_doc["parallelism"]["global_batch_size"] = 512.0
    base_doc["training"] = {"train_iters": 1e3}
    s = parse_scenario(base_doc)
    assert s.parallelism.global_batch_size == 512
    assert s.training.train_iters == 1000


def test_the_framework_version_is_text_kept_as_given(base_doc: dict[str, Any]) -> None:
    """The release is text with its trailing zeros ('25.10' is not '25.1'), blanks stripped;
    a scenario without one (every scenario before the field) states none."""
    assert parse_scenario(base_doc).training.framework_version is None
    base_doc["training"] = {"framework": "nemo", "framework_version": " 25.10 "}
    assert parse_scenario(base_doc).training.framework_version == "25.10"


def test_the_compiled_loss_is_stated_or_eager(base_doc: dict[str, Any]) -> None:
    assert parse_scenario(base_doc).training.compiled_loss is False
    base_doc["training"] = {"framework": "torchtitan", "compiled_loss": True}
    assert parse_scenario(base_doc).training.compiled_loss is True


def _set(doc: dict[str, Any], path: str, value: object) -> None:
    section, _, key = path.partition(".")
    if key:
        doc.setdefault(section, {})[key] = value
    else:
        doc[section] = value


@pytest.mark.parametrize(
    ("path", "value", "field", "fragment"),
    [
        ("hardware.gpu", "h100-sxn", "hardware.gpu", "did you mean 'h100-sxm'"),
        ("hardware.gpu", 7, "hardware.gpu", "catalog key"),
        ("hardware.num_gpus", 1000, "parallelism.pipeline_parallel", "divides 1000"),
        ("hardware.num_gpus", 0, "hardware.num_gpus", "positive"),
        ("hardware.num_gpus", "many", "hardware.num_gpus", "integer"),
        ("hardware.nvlink_domain_size", -8, "hardware.nvlink_domain_size", "positive"),
        (
            "hardware.inter_node_bandwidth_gbit_per_s",
            0,
            "hardware.inter_node_bandwidth_gbit_per_s",
            "positive",
        ),
        ("parallelism.data_parallel", 16, "parallelism.data_parallel", "set data_parallel to 32"),
        ("parallelism.tensor_parallel", 3, "parallelism.tensor_parallel", "divides 1024"),
        ("parallelism.global_batch_size", 500, "parallelism.global_batch_size", "divisible"),
        ("parallelism.global_batch_size", 1.5, "parallelism.global_batch_size", "integer"),
        ("parallelism.micro_batch_size", 0, "parallelism.micro_batch_size", "positive"),
        ("parallelism.recompute", "partial", "parallelism.recompute", "none, selective, full"),
        ("parallelism.precision", "fp4", "parallelism.precision", "bf16"),
        ("parallelism.zero_stage", 4, "parallelism.zero_stage", "0, 1, 2 or 3"),
        ("parallelism.sequence_parallel", "yes", "parallelism.sequence_parallel", "true or false"),
        ("parallelism.virtual_pipeline", 3, "parallelism.virtual_pipeline", "not divisible"),
        ("parallelism.pipeline_parallel", 3, "parallelism.pipeline_parallel", "= 24 GPUs"),
        ("parallelism.expert_parallel", 2, "parallelism.expert_parallel", "MoE"),
        (
            "parallelism.tensor_palallel",
            8,
            "parallelism.tensor_palallel",
            "did you mean 'tensor_parallel'",
        ),
        ("model.num_layerz", 80, "model.num_layerz", "did you mean 'num_layers'"),
        ("model.preset", "llama4-70b", "model.preset", "did you mean"),
        ("model.num_layers", -1, "model.num_layers", "positive"),
        ("model.hidden_size", True, "model.hidden_size", "integer"),
        ("model.activation", "relu2", "model.activation", "swiglu"),
        ("model.num_query_groups", 3, "model.num_query_groups", "divide"),
        ("model.num_query_groups", 4, "model.num_query_groups", "tensor_parallel"),
        ("model.untie_embeddings", "no", "model.untie_embeddings", "true or false"),
        ("training.total_tokens", -5, "training.total_tokens", "positive"),
        ("training.train_iters", 0, "training.train_iters", "positive"),
        ("training.framework", "jax", "training.framework", "megatron"),
        ("training.framework_version", 25.1, "training.framework_version", "quote it"),
        ("training.framework_version", " ", "training.framework_version", "1-64 printable"),
        ("training.framework_version", "a\nb", "training.framework_version", "printable"),
        ("training.compiled_loss", "yes", "training.compiled_loss", "true or false"),
        ("training.epochs", 3, "training.epochs", "unknown field"),
        ("hardware", [1, 2], "hardware", "mapping"),
        ("extra", 1, "extra", "unknown top-level field"),
    ],
)
def test_invalid_documents_name_the_field(
    base_doc: dict[str, Any], path: str, value: object, field: str, fragment: str
) -> None:
    _set(base_doc, path, value)
    err = _error(base_doc)
    assert err.field == field
    assert fragment in err.message
    assert str(err).startswith(f"{field}: ")


def test_heads_not_divisible_by_tp() -> None:
    doc = {
        "model": {"preset": "gpt3-175b", "num_attention_heads": 96, "num_query_groups": 96},
        "hardware": {"gpu": "a100-80gb", "num_gpus": 64},
        "parallelism": {"tensor_parallel": 64, "global_batch_size": 64},
    }
    err = _error(doc)
    assert err.field == "parallelism.tensor_parallel"
    assert "num_attention_heads=96" in err.message


def test_layers_not_divisible_by_pp() -> None:
    doc = {
        "model": {"preset": "llama3-8b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 24},
        "parallelism": {"pipeline_parallel": 3, "tensor_parallel": 8, "global_batch_size": 8},
    }
    doc["model"]["num_layers"] = 32
    err = _error(doc)
    assert err.field == "parallelism.pipeline_parallel"


def test_required_fields_and_sections() -> None:
    assert _error({"hardware": {}, "parallelism": {}}).field == "model"
    doc: dict[str, Any] = {
        "model": {"hidden_size": 128},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"global_batch_size": 8},
    }
    err = _error(doc)
    assert err.field == "model.num_layers"
    assert "preset" in err.message
    doc["model"] = {"preset": "llama3-8b"}
    del doc["parallelism"]["global_batch_size"]
    assert _error(doc).field == "parallelism.global_batch_size"
    doc["parallelism"]["global_batch_size"] = 8
    del doc["hardware"]["gpu"]
    assert _error(doc).field == "hardware.gpu"
    assert _error([1, 2]).field == ""


def test_precision_the_gpu_lacks() -> None:
    doc = {
        "model": {"preset": "llama2-7b"},
        "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
        "parallelism": {"global_batch_size": 8, "precision": "fp8"},
    }
    err = _error(doc)
    assert err.field == "parallelism.precision"
    assert "a100-80gb has no fp8" in err.message


def test_moe_checks() -> None:
    doc: dict[str, Any] = {
        "model": {"preset": "mixtral-8x7b"},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 16},
        "parallelism": {"tensor_parallel": 2, "expert_parallel": 3, "global_batch_size": 16},
    }
    assert _error(doc).field == "parallelism.expert_parallel"
    doc["parallelism"]["expert_parallel"] = 8
    s = parse_scenario(doc)
    assert s.model.is_moe
    assert s.model.num_experts == 8
    doc["model"]["moe_router_topk"] = 9
    assert _error(doc).field == "model.moe_router_topk"


def test_context_parallel_sequence_divisibility() -> None:
    doc = {
        "model": {"preset": "llama3-8b", "seq_length": 8190},
        "hardware": {"gpu": "h100-sxm", "num_gpus": 8},
        "parallelism": {"context_parallel": 4, "global_batch_size": 8},
    }
    assert _error(doc).field == "parallelism.context_parallel"


def test_hidden_not_divisible_by_heads_needs_kv_channels() -> None:
    doc: dict[str, Any] = {
        "model": {
            "num_layers": 2,
            "hidden_size": 100,
            "num_attention_heads": 3,
            "vocab_size": 64,
            "seq_length": 16,
        },
        "hardware": {"gpu": "h100-sxm", "num_gpus": 1},
        "parallelism": {"global_batch_size": 1, "micro_batch_size": 1},
    }
    assert _error(doc).field == "model.hidden_size"
    doc["model"]["kv_channels"] = 32
    doc["model"]["ffn_hidden_size"] = 256
    assert parse_scenario(doc).model.query_width == 96


def test_spec_error_is_passed_through() -> None:
    bad = SpecError("x.jsonl:3", "invalid JSON")
    assert _error(bad) is bad
