"""Launches whose model code is known state whether it projects query/key/value and gate/up
with separate linears: Hugging Face ``transformers`` code by the config's ``model_type``
(HF Trainer, Axolotl, LLaMA-Factory, the plain FSDP script) and torchtune's builders."""

from __future__ import annotations

import pytest

from planner.catalog import model_preset_hf_ids, model_preset_hf_model_type, model_preset_keys
from planner.launch.data import load_data
from planner.launch.model_code import TORCHTUNE
from planner.launch.readers.axolotl import READER as AXOLOTL
from planner.launch.readers.fsdp_script import READER as FSDP_SCRIPT
from planner.launch.readers.hf import READER as HF
from planner.launch.readers.llamafactory import READER as LLAMAFACTORY
from planner.launch.readers.torchtune import READER as TORCHTUNE_READER
from planner.launch.types import Facts, Invocation, MemoryFiles
from planner.launch.values import mapping_of
from tests.launch import reader_support as support

QKV = "parallelism.separate_qkv_projections"
GATE_UP = "parallelism.separate_gate_up_projections"


def _hf(model: str) -> Facts:
    return support.read_program(
        HF, "hf", "/jobs/hf", "train.py", "--model_name_or_path", model, "--max_steps", "10"
    )


def _projections(facts: Facts) -> tuple[object, object]:
    return facts.get(QKV), facts.get(GATE_UP)


@pytest.mark.parametrize(
    ("model", "model_type"),
    [("models/mini-qwen", "qwen2"), ("meta-llama/Llama-3.1-8B", "llama")],
)
def test_hf_trainer_states_separate_projections_of_llama_style_code(
    model: str, model_type: str
) -> None:
    facts = _hf(model)
    assert facts.get("launch.hf_model_type") == model_type
    assert _projections(facts) == (True, True)
    source = facts.values[QKV].source
    assert source.startswith("derived: transformers model code")
    assert "q_proj/k_proj/v_proj" in source
    assert QKV not in facts.assumed


def test_hf_trainer_states_fused_projections_of_phi3() -> None:
    facts = _hf("models/mini-phi3")
    assert _projections(facts) == (False, False)
    assert "qkv_proj" in facts.values[QKV].source
    assert "gate_up_proj" in facts.values[GATE_UP].source


@pytest.mark.parametrize(
    ("model", "model_type", "qkv", "attention"),
    [
        ("models/mini-neox", "gpt_neox", False, "query_key_value"),
        ("openai-community/gpt2", "gpt2", False, "c_attn"),  # one Conv1D
        ("models/mini-starcoder", "starcoder2", True, "Starcoder2Attention"),
    ],
)
def test_an_ungated_family_states_only_its_attention(
    model: str, model_type: str, qkv: bool, attention: str
) -> None:
    facts = _hf(model)
    assert facts.get("launch.hf_model_type") == model_type
    assert facts.get(QKV) is qkv
    assert attention in facts.values[QKV].source
    assert not facts.has(GATE_UP)


def test_multi_latent_attention_leaves_qkv_unstated_and_says_why() -> None:
    facts = _hf("deepseek-ai/DeepSeek-V3")
    assert facts.get("launch.hf_model_type") == "deepseek_v3"
    assert not facts.has(QKV)
    assert facts.get(GATE_UP) is True
    assert "DeepseekV3MLP" in facts.values[GATE_UP].source
    assert any("'deepseek_v3'" in note and "multi-latent" in note for note in facts.notes)


def test_a_multimodal_config_states_the_code_of_its_text_config_family() -> None:
    facts = _hf("models/mini-gemma3")
    assert facts.get("launch.hf_model_type") == "gemma3_text"
    assert _projections(facts) == (True, True)
    assert "Gemma3Attention" in facts.values[QKV].source


def test_an_all_expert_family_states_only_its_attention() -> None:
    facts = _hf("mistralai/Mixtral-8x7B-v0.1")
    assert facts.get("launch.hf_model_type") == "mixtral"
    assert facts.get(QKV) is True
    assert not facts.has(GATE_UP)


def test_an_moe_family_with_dense_layers_states_their_mlp() -> None:
    facts = _hf("Qwen/Qwen3-30B-A3B")
    assert facts.get("launch.hf_model_type") == "qwen3_moe"
    assert _projections(facts) == (True, True)
    assert "Qwen3MoeMLP" in facts.values[GATE_UP].source


def test_a_family_outside_the_table_states_nothing_and_says_so() -> None:
    facts = _hf("moonshotai/Kimi-K2-Instruct")  # remote code, not in transformers
    assert facts.get("launch.hf_model_type") == "kimi_k2"
    assert not facts.has(QKV)
    assert not facts.has(GATE_UP)
    assert any("'kimi_k2'" in note for note in facts.notes)


def test_an_unknown_model_states_nothing() -> None:
    facts = _hf("acme/secret-model-7b")
    assert not facts.has("launch.hf_model_type")
    assert not facts.has(QKV)
    assert not facts.has(GATE_UP)


def test_axolotl_states_them_unless_its_fused_qkv_patch_replaces_the_attention() -> None:
    plain = support.read_program(
        AXOLOTL, "axolotl", "/jobs/axolotl", "axolotl", "train", "configs/qlora.yaml"
    )
    assert _projections(plain) == (True, True)
    fused = support.read_program(
        AXOLOTL, "axolotl", "/jobs/axolotl", "axolotl", "train", "configs/fused_qkv.yaml"
    )
    assert not fused.has(QKV)
    assert fused.get(GATE_UP) is True
    assert any("flash_attn_fuse_qkv" in note for note in fused.notes)


def _llamafactory(*args: str, env: dict[str, str] | None = None) -> Facts:
    return support.read_program(
        LLAMAFACTORY,
        "llamafactory",
        "/jobs/lf",
        "llamafactory-cli",
        "train",
        *args,
        env=env,
        allocation=support.allocation(8, 1, 8),
    )


def test_llamafactory_states_them_for_transformers_code_only() -> None:
    assert _projections(_llamafactory("configs/full_zero2.yaml")) == (True, True)
    unsloth = _llamafactory("configs/full_zero2.yaml", "use_unsloth=true")
    assert not unsloth.has(QKV)
    assert not unsloth.has(GATE_UP)
    assert any("use_unsloth" in note for note in unsloth.notes)
    megatron = _llamafactory("configs/moe_megatron.yaml", env={"USE_MCA": "1"})
    assert megatron.get("training.framework") == "megatron"
    assert not megatron.has(QKV)
    assert not megatron.has(GATE_UP)


def test_torchtune_builders_state_separate_projections() -> None:
    facts = support.read_program(
        TORCHTUNE_READER,
        "torchtune",
        "/jobs/tune",
        "tune",
        *[
            "run",
            "--nproc_per_node",
            "4",
            "full_finetune_distributed",
            "--config",
            "llama3_1/8B_full",
        ],
        pattern="*.yaml",
    )
    assert _projections(facts) == (True, True)
    assert facts.values[QKV].source.startswith("derived: torchtune model code")
    assert "llama3_1/_component_builders.py" in facts.values[QKV].source


@pytest.mark.parametrize(
    ("model_type", "expected"), [("llama_v3", (True, True)), ("gpt_neox", (False, None))]
)
def test_fsdp_script_states_the_code_of_the_config_it_builds(
    model_type: str, expected: tuple[object, object]
) -> None:
    invocation = Invocation(
        program="/workspace/fsdp/train.py",
        args=(f"--model_type={model_type}", "--num_layers=4"),
        launcher="torchrun",
        launcher_args={"nnodes": "1", "nproc_per_node": "8"},
    )
    facts = support.finished(support.read(FSDP_SCRIPT, invocation, MemoryFiles()))
    assert _projections(facts) == expected


def test_every_catalog_preset_with_hub_ids_names_its_model_type() -> None:
    missing = [
        key
        for key in model_preset_keys()
        if model_preset_hf_ids(key) and not model_preset_hf_model_type(key)
    ]
    assert missing == []


def test_torchtune_table_covers_every_family_of_the_reader_catalog() -> None:
    models = mapping_of(load_data("torchtune.yaml").get("models"))
    families = {str(mapping_of(shape).get("path")).split("/")[2] for shape in models.values()}
    assert families <= set(TORCHTUNE)
