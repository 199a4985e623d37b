"""Hugging Face ``config.json`` mappings of each family read as scenario ``model:`` fields
(made-up shapes in each family's key names), and the errors of broken ones."""

from __future__ import annotations

import json

import pytest

from planner.errors import SpecError
from planner.launch.models import model_fields_from_hf_config, resolve_model
from planner.launch.types import Facts, MemoryFiles
from planner.scenario import parse_scenario

LLAMA_KEYS: dict[str, object] = {
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "intermediate_size": 1408,
    "vocab_size": 1000,
}


def parses(fields: dict[str, object]) -> None:
    """The fields make a valid scenario model."""
    model = {"seq_length": 1024, **fields}
    doc = {
        "model": model,
        "hardware": {"gpu": "h200", "num_gpus": 8},
        "parallelism": {"global_batch_size": 8},
    }
    parse_scenario(doc)


def test_llama_defaults() -> None:
    fields = model_fields_from_hf_config({"model_type": "llama", **LLAMA_KEYS})
    assert fields == {
        "num_layers": 4,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "num_query_groups": 8,
        "ffn_hidden_size": 1408,
        "vocab_size": 1000,
        "activation": "swiglu",
        "untie_embeddings": True,
    }
    parses(fields)


def test_gpt2_names_and_defaults() -> None:
    fields = model_fields_from_hf_config(
        {
            "model_type": "gpt2",
            "n_layer": 3,
            "n_embd": 384,
            "n_head": 6,
            "n_inner": None,
            "n_positions": 512,
            "vocab_size": 5000,
        }
    )
    assert fields["ffn_hidden_size"] == 4 * 384
    assert fields["num_query_groups"] == 6
    assert fields["activation"] == "gelu"
    assert fields["untie_embeddings"] is False
    assert fields["seq_length"] == 512
    parses(fields)


def test_gpt_bigcode_multi_query() -> None:
    config = {"model_type": "gpt_bigcode", "n_layer": 2, "n_embd": 256, "n_head": 4}
    fields = model_fields_from_hf_config({**config, "n_inner": 900, "vocab_size": 300})
    assert fields["num_query_groups"] == 1
    assert fields["ffn_hidden_size"] == 900


def test_mpt_names() -> None:
    fields = model_fields_from_hf_config(
        {
            "model_type": "mpt",
            "d_model": 640,
            "n_layers": 5,
            "n_heads": 10,
            "expansion_ratio": 3,
            "max_seq_len": 4096,
            "vocab_size": 7000,
            "attn_config": {"attn_type": "grouped_query_attention", "kv_n_heads": 2},
            "ffn_config": {"ffn_type": "mptglu"},
        }
    )
    assert fields["ffn_hidden_size"] == 1920
    assert fields["num_query_groups"] == 2
    assert fields["activation"] == "swiglu"
    assert fields["untie_embeddings"] is False
    assert fields["seq_length"] == 4096
    parses(fields)


def test_two_matrix_families() -> None:
    neox = model_fields_from_hf_config({"model_type": "gpt_neox", **LLAMA_KEYS})
    assert neox["activation"] == "gelu"
    assert neox["untie_embeddings"] is True
    squared = {"model_type": "nemotron", "hidden_act": "relu2", **LLAMA_KEYS}
    assert model_fields_from_hf_config(squared)["activation"] == "squared_relu"


def test_mixtral_expert_width_is_intermediate_size() -> None:
    fields = model_fields_from_hf_config(
        {
            "model_type": "mixtral",
            **LLAMA_KEYS,
            "num_key_value_heads": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "sliding_window": None,
        }
    )
    assert (fields["num_experts"], fields["moe_router_topk"]) == (4, 2)
    assert fields["moe_ffn_hidden_size"] == fields["ffn_hidden_size"] == 1408
    assert "window_size" not in fields
    parses(fields)


def test_qwen2_moe_shared_expert_and_sparse_step() -> None:
    """Qwen2MoeConfig fills in the MoE shape a file leaves out (60 experts, top-4, 1408 wide,
    one 5632-wide shared expert)."""
    bare = model_fields_from_hf_config(
        {"model_type": "qwen2_moe", **LLAMA_KEYS, "num_key_value_heads": 8}
    )
    assert (bare["num_experts"], bare["moe_router_topk"], bare["moe_ffn_hidden_size"]) == (
        60,
        4,
        1408,
    )
    assert bare["moe_shared_expert_intermediate_size"] == 5632
    fields = model_fields_from_hf_config(
        {
            "model_type": "qwen2_moe",
            **LLAMA_KEYS,
            "num_key_value_heads": 4,
            "num_experts": 16,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 176,
            "shared_expert_intermediate_size": 704,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [],
        }
    )
    assert fields["num_shared_experts"] == 1
    assert fields["moe_shared_expert_intermediate_size"] == 704
    assert fields["moe_layer_freq"] == [0, 1, 0, 1]
    parses(fields)


def test_qwen3_and_gemma3_normalise_each_query_and_key_head() -> None:
    """transformers builds ``q_norm``/``k_norm`` over ``head_dim`` in Qwen3, Qwen3-MoE and
    Gemma 3 attention whatever the config says; OLMo-2 normalises whole projections."""
    qwen3_moe = {
        "model_type": "qwen3_moe",
        **LLAMA_KEYS,
        "head_dim": 128,
        "num_experts": 16,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 176,
    }
    qwen3 = {"model_type": "qwen3", **LLAMA_KEYS, "num_key_value_heads": 8}
    for config in (qwen3, qwen3_moe):
        fields = model_fields_from_hf_config(config)
        assert fields["qk_layernorm"] is True, config["model_type"]
        parses(fields)
    gemma3 = {"model_type": "gemma3_text", **LLAMA_KEYS, "head_dim": 256}
    assert model_fields_from_hf_config(gemma3)["qk_layernorm"] is True
    for family in ("qwen2", "olmo2", "llama"):
        config = {"model_type": family, **LLAMA_KEYS, "num_key_value_heads": 8}
        fields = model_fields_from_hf_config(config)
        assert "qk_layernorm" not in fields, family


def test_deepseek_v3_latent_attention() -> None:
    fields = model_fields_from_hf_config(
        {
            "model_type": "deepseek_v3",
            **LLAMA_KEYS,
            "num_key_value_heads": 8,
            "n_routed_experts": 32,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 128,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "moe_layer_freq": 1,
            "n_group": 4,
            "topk_group": 2,
            "q_lora_rank": 192,
            "kv_lora_rank": 64,
            "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16,
            "v_head_dim": 32,
            "num_nextn_predict_layers": 1,
        }
    )
    assert "num_query_groups" not in fields
    assert fields["multi_latent_attention"] is True
    assert (fields["q_lora_rank"], fields["kv_lora_rank"]) == (192, 64)
    assert (fields["qk_head_dim"], fields["qk_pos_emb_head_dim"], fields["v_head_dim"]) == (
        32,
        16,
        32,
    )
    assert (fields["num_shared_experts"], fields["num_dense_layers"]) == (1, 1)
    assert (fields["moe_router_num_groups"], fields["moe_router_group_topk"]) == (4, 2)
    assert fields["mtp_num_layers"] == 1
    assert "moe_layer_freq" not in fields
    parses(fields)


def test_deepseek_v2_latent_attention_by_default() -> None:
    """DeepseekV2Config: every model attends through latents (``kv_lora_rank`` 512,
    ``q_lora_rank`` 1536, head widths 128 / 64 / 128) whether the file says so or not."""
    deepseek = model_fields_from_hf_config({"model_type": "deepseek_v2", **LLAMA_KEYS})
    assert deepseek["multi_latent_attention"] is True
    assert (deepseek["q_lora_rank"], deepseek["kv_lora_rank"], deepseek["v_head_dim"]) == (
        1536,
        512,
        128,
    )
    assert (deepseek["qk_head_dim"], deepseek["qk_pos_emb_head_dim"]) == (128, 64)
    parses(deepseek)


def test_latent_attention_without_query_latent() -> None:
    config = {"model_type": "deepseek_v2", **LLAMA_KEYS, "q_lora_rank": None}
    fields = model_fields_from_hf_config({**config, "kv_lora_rank": 64})
    assert "q_lora_rank" not in fields
    assert fields["kv_lora_rank"] == 64


def test_llama4_text_config_interleaved() -> None:
    text = {
        "model_type": "llama4_text",
        **LLAMA_KEYS,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 256,
        "intermediate_size_mlp": 1024,
        "num_local_experts": 8,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 2,
    }
    config = {"model_type": "llama4", "tie_word_embeddings": False, "text_config": text}
    fields = model_fields_from_hf_config(config)
    assert fields["num_shared_experts"] == 1
    assert fields["moe_ffn_hidden_size"] == 256
    assert fields["ffn_hidden_size"] == 1024
    assert fields["moe_layer_freq"] == [0, 1, 0, 1]
    assert fields["untie_embeddings"] is True
    assert "kv_channels" not in fields  # 512 / 8 = 64 = head_dim
    parses(fields)


def test_windows() -> None:
    alternating = {
        "model_type": "gpt_oss",
        **LLAMA_KEYS,
        "num_local_experts": 8,
        "experts_per_token": 2,
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }
    fields = model_fields_from_hf_config(alternating)
    assert (fields["window_size"], fields["window_attn_skip_freq"]) == (64, 2)
    assert fields["moe_router_topk"] == 2
    parses(fields)
    # gpt-oss's biased experts, attention sinks, clamped activation and YaRN scaling
    assert fields["moe_expert_bias"] is True
    assert fields["softmax_type"] == "learnable"
    assert fields["activation_func_clamp_value"] == 7.0
    assert "rope_type" not in fields
    yarn = {**alternating, "swiglu_limit": 5.0, "rope_scaling": {"rope_type": "yarn", "factor": 32}}
    fields = model_fields_from_hf_config(yarn)
    assert (fields["activation_func_clamp_value"], fields["rope_type"]) == (5.0, "yarn")
    parses(fields)
    mistral_fields = model_fields_from_hf_config({"model_type": "mistral", **LLAMA_KEYS})
    assert "moe_expert_bias" not in mistral_fields
    mistral = {"model_type": "mistral", **LLAMA_KEYS, "sliding_window": 256}
    fields = model_fields_from_hf_config(mistral)
    assert (fields["window_size"], fields["window_attn_skip_freq"]) == (256, 0)
    qwen = {"model_type": "qwen2", **LLAMA_KEYS, "num_key_value_heads": 8, "sliding_window": 256}
    assert "window_size" not in model_fields_from_hf_config({**qwen, "use_sliding_window": False})
    full = {**alternating, "layer_types": ["full_attention"] * 4}
    assert "window_size" not in model_fields_from_hf_config(full)
    irregular = ["sliding_attention", "full_attention", "full_attention", "sliding_attention"]
    assert "window_size" not in model_fields_from_hf_config({**full, "layer_types": irregular})
    gemma2 = {"model_type": "gemma2", **LLAMA_KEYS, "sliding_window": 128}
    fields = model_fields_from_hf_config(gemma2)
    assert (fields["window_attn_skip_freq"], fields["untie_embeddings"]) == (2, False)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"num_hidden_layers": True}, "num_hidden_layers", "positive integer"),
        ({"hidden_size": 0}, "hidden_size", "got 0"),
        ({"vocab_size": 12.5}, "vocab_size", "positive integer"),
        ({"num_attention_heads": "8"}, "num_attention_heads", "positive integer"),
        ({"intermediate_size": None}, "intermediate_size", "is missing"),
        ({"num_key_value_heads": -2}, "num_key_value_heads", "got -2"),
    ],
)
def test_bad_values_name_the_key(change: dict[str, object], field: str, message: str) -> None:
    qwen3 = {"model_type": "qwen3", **LLAMA_KEYS, "num_key_value_heads": 2}
    with pytest.raises(SpecError, match=message) as caught:
        model_fields_from_hf_config({**qwen3, **change})
    assert caught.value.field == field


def test_nested_keys_are_named_and_cited() -> None:
    broken = {"model_type": "llama4", "text_config": {**LLAMA_KEYS, "hidden_size": -1}}
    with pytest.raises(SpecError) as caught:
        model_fields_from_hf_config(broken)
    assert caught.value.field == "text_config.hidden_size"
    text = {"model_type": "llama4_text", **LLAMA_KEYS, "num_local_experts": 4}
    config = {"model_type": "llama4", "text_config": {**text, "num_experts_per_tok": 1}}
    files = MemoryFiles({"/job/scout/config.json": json.dumps(config, indent=2)})
    facts = Facts()
    assert resolve_model("scout", facts=facts, files=files, cwd="/job", source="run.sh:4")
    line = json.dumps(config, indent=2).splitlines().index('    "num_hidden_layers": 4,') + 1
    assert facts.values["model.num_layers"].source == f"scout/config.json:{line}"


def test_falcon_new_decoder_without_kv_heads_keeps_every_head() -> None:
    """``FalconConfig``: ``num_kv_heads`` None means ``num_attention_heads``; ``multi_query``
    (one KV head) only counts without ``new_decoder_architecture``."""
    base = {"model_type": "falcon", **LLAMA_KEYS}
    new = model_fields_from_hf_config({**base, "new_decoder_architecture": True})
    assert new["num_query_groups"] == 8
    grouped = {**base, "new_decoder_architecture": True, "num_kv_heads": 2}
    assert model_fields_from_hf_config(grouped)["num_query_groups"] == 2
    assert model_fields_from_hf_config(base)["num_query_groups"] == 1
    fields = model_fields_from_hf_config({**base, "multi_query": False})
    assert fields["num_query_groups"] == 8
    assert fields["ffn_hidden_size"] == 4 * 512
    assert fields["untie_embeddings"] is False
    parses(new)


def test_cohere_qk_norm_and_tied_embeddings() -> None:
    plain = model_fields_from_hf_config({"model_type": "cohere", **LLAMA_KEYS})
    assert "qk_layernorm" not in plain
    assert plain["untie_embeddings"] is False
    fields = model_fields_from_hf_config(
        {"model_type": "cohere", **LLAMA_KEYS, "use_qk_norm": True, "num_key_value_heads": 2}
    )
    assert (fields["qk_layernorm"], fields["num_query_groups"]) == (True, 2)
    parses(fields)


def test_gemma_head_width_and_kv_heads_default_to_the_config_class() -> None:
    """Gemma's classes default ``head_dim`` to 256 (not hidden / heads) and their own
    ``num_key_value_heads``; Gemma 2 and 3 a 4096-token window, Gemma 3 one full layer in 6."""
    null_width = {"model_type": "gemma", **LLAMA_KEYS, "head_dim": None}
    gemma = model_fields_from_hf_config({**null_width, "num_key_value_heads": 1})
    assert "kv_channels" not in gemma  # an explicit null keeps hidden / heads
    with pytest.raises(SpecError, match="gemma default 16 does not divide") as caught:
        model_fields_from_hf_config(null_width)  # 8 query heads, GemmaConfig's 16 KV heads
    assert caught.value.field == "num_key_value_heads"
    gemma = model_fields_from_hf_config(
        {"model_type": "gemma", **LLAMA_KEYS, "hidden_size": 3072, "num_attention_heads": 16}
    )
    assert (gemma["kv_channels"], gemma["num_query_groups"]) == (256, 16)
    parses(gemma)
    gemma2 = model_fields_from_hf_config({"model_type": "gemma2", **LLAMA_KEYS})
    assert (gemma2["kv_channels"], gemma2["num_query_groups"]) == (256, 4)
    assert (gemma2["window_size"], gemma2["window_attn_skip_freq"]) == (4096, 2)
    parses(gemma2)
    text = {**LLAMA_KEYS, "num_hidden_layers": 12}
    gemma3 = model_fields_from_hf_config({"model_type": "gemma3", "text_config": text})
    assert (gemma3["window_size"], gemma3["window_attn_skip_freq"]) == (4096, 6)
    assert (gemma3["kv_channels"], gemma3["num_query_groups"]) == (256, 4)
    parses(gemma3)


def test_starcoder2_window_on_every_layer_and_two_kv_heads() -> None:
    fields = model_fields_from_hf_config(
        {"model_type": "starcoder2", **LLAMA_KEYS, "sliding_window": 512}
    )
    assert (fields["window_size"], fields["window_attn_skip_freq"]) == (512, 0)
    assert fields["num_query_groups"] == 2
    assert fields["activation"] == "gelu"
    parses(fields)
    full = {"model_type": "starcoder2", **LLAMA_KEYS, "sliding_window": None}
    assert "window_size" not in model_fields_from_hf_config(full)


def test_phi3_window_on_every_layer() -> None:
    fields = model_fields_from_hf_config(
        {"model_type": "phi3", **LLAMA_KEYS, "sliding_window": 2047}
    )
    assert (fields["window_size"], fields["window_attn_skip_freq"]) == (2047, 0)
    parses(fields)


def test_llama4_moe_layers_list_wins_over_the_step() -> None:
    text = {
        "model_type": "llama4_text",
        **LLAMA_KEYS,
        "intermediate_size_mlp": 1024,
        "interleave_moe_layer_step": 1,
        "moe_layers": [0, 3],
    }
    fields = model_fields_from_hf_config(text)
    assert fields["moe_layer_freq"] == [1, 0, 0, 1]
    assert fields["ffn_hidden_size"] == 1024
    assert (fields["num_experts"], fields["moe_router_topk"]) == (16, 1)
    with pytest.raises(SpecError) as caught:
        model_fields_from_hf_config({**text, "moe_layers": ["1"]})
    assert caught.value.field == "moe_layers"


WIDE_KEYS: dict[str, object] = {**LLAMA_KEYS, "hidden_size": 1024, "num_attention_heads": 64}
"""64 query heads of width 16, so a class's KV-head default is not the head count."""


def test_mistral_and_mixtral_kv_heads_window_and_experts_default_to_the_config_class() -> None:
    """``MistralConfig`` / ``MixtralConfig``: 8 KV heads when the key is absent (an explicit
    null means every head); Mistral's 4096-token window on every layer; Mixtral's 8 experts,
    top-2, no window."""
    mistral = model_fields_from_hf_config({"model_type": "mistral", **WIDE_KEYS})
    assert mistral["num_query_groups"] == 8
    assert (mistral["window_size"], mistral["window_attn_skip_freq"]) == (4096, 0)
    parses(mistral)
    null = {"model_type": "mistral", **WIDE_KEYS, "num_key_value_heads": None}
    fields = model_fields_from_hf_config({**null, "sliding_window": None})
    assert fields["num_query_groups"] == 64
    assert "window_size" not in fields
    mixtral = model_fields_from_hf_config({"model_type": "mixtral", **WIDE_KEYS})
    assert mixtral["num_query_groups"] == 8
    assert (mixtral["num_experts"], mixtral["moe_router_topk"]) == (8, 2)
    assert mixtral["moe_ffn_hidden_size"] == 1408
    assert "window_size" not in mixtral
    parses(mixtral)


def test_qwen_dense_kv_heads_default_to_the_config_class() -> None:
    """``Qwen2Config`` / ``Qwen3Config`` default ``num_key_value_heads`` to 32 (their default
    head count), not to the file's heads; where 32 does not divide the heads it is an error
    naming the key."""
    for family in ("qwen2", "qwen3"):
        fields = model_fields_from_hf_config({"model_type": family, **WIDE_KEYS})
        assert fields["num_query_groups"] == 32, family
        parses(fields)
        null = {"model_type": family, **WIDE_KEYS, "num_key_value_heads": None}
        assert model_fields_from_hf_config(null)["num_query_groups"] == 64, family
        with pytest.raises(SpecError, match=f"{family} default 32 does not divide") as caught:
            model_fields_from_hf_config({"model_type": family, **LLAMA_KEYS})  # 8 heads
        assert caught.value.field == "num_key_value_heads"


def test_gpt_oss_and_olmoe_shapes_default_to_the_config_class() -> None:
    """``GptOssConfig``: 8 KV heads of width 64, 128 experts top-4, a 128-token window on
    alternate layers; a top-k the file names in another key wins over the default.
    ``OlmoeConfig``: 64 experts, top-8."""
    gpt_oss = model_fields_from_hf_config({"model_type": "gpt_oss", **WIDE_KEYS})
    assert (gpt_oss["num_query_groups"], gpt_oss["kv_channels"]) == (8, 64)
    assert (gpt_oss["num_experts"], gpt_oss["moe_router_topk"]) == (128, 4)
    assert (gpt_oss["window_size"], gpt_oss["window_attn_skip_freq"]) == (128, 2)
    parses(gpt_oss)
    named = {"model_type": "gpt_oss", **WIDE_KEYS, "experts_per_token": 2}
    assert model_fields_from_hf_config(named)["moe_router_topk"] == 2
    olmoe = model_fields_from_hf_config({"model_type": "olmoe", **LLAMA_KEYS})
    assert (olmoe["num_experts"], olmoe["moe_router_topk"]) == (64, 8)
    parses(olmoe)


def test_deepseek_v3_latents_and_experts_default_to_the_config_class() -> None:
    """``DeepseekV3Config``: latent ranks 1536/512, head widths 128 + 64 and 128, 256 routed
    experts (top-8 of 8 groups, 4 groups per token), one shared expert 2048 wide, three
    leading dense layers; ``num_key_value_heads`` (128) is not applied under latent
    attention."""
    config = {"model_type": "deepseek_v3", **LLAMA_KEYS, "num_hidden_layers": 6}
    fields = model_fields_from_hf_config(config)
    assert "num_query_groups" not in fields
    latents = ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim")
    assert [fields[name] for name in latents] == [1536, 512, 128, 64, 128]
    assert (fields["num_experts"], fields["moe_router_topk"]) == (256, 8)
    assert (fields["moe_router_num_groups"], fields["moe_router_group_topk"]) == (8, 4)
    assert (fields["num_shared_experts"], fields["moe_ffn_hidden_size"]) == (1, 2048)
    assert fields["num_dense_layers"] == 3
    assert "mtp_num_layers" not in fields
    parses(fields)
    no_query_latent = model_fields_from_hf_config({**config, "q_lora_rank": None})
    assert "q_lora_rank" not in no_query_latent


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            {"model_type": "llama", "attention_bias": True},
            "attention_bias: the query, key, value and output projections carry bias",
        ),
        ({"model_type": "llama", "mlp_bias": True}, "mlp_bias: the MLP's gate, up and down"),
        ({"model_type": "granite", "mlp_bias": True}, "mlp_bias: the MLP's gate"),
        ({"model_type": "qwen3", "attention_bias": True}, "attention_bias: the query, key"),
        ({"model_type": "qwen3_moe", "attention_bias": True}, "attention_bias: the query, key"),
        ({"model_type": "olmo", "attention_bias": True}, "attention_bias: the query, key"),
        ({"model_type": "qwen2"}, "model_type qwen2: the query, key and value projections"),
        ({"model_type": "qwen2_moe"}, "qkv_bias: the query, key and value projections"),
        ({"model_type": "gpt_oss"}, "attention_bias: the query, key, value and output"),
        ({"model_type": "deepseek_v3", "attention_bias": True}, "attention_bias: the latent"),
        ({"model_type": "gpt_neox"}, "attention_bias: the query, key, value and output"),
        ({"model_type": "gpt_neox"}, "model_type gpt_neox: the MLP's up and down projections"),
    ],
)
def test_biased_linears_are_noted(config: dict[str, object], words: str) -> None:
    """Bias switches the scenario has no field for: a launch note naming the key."""
    document = json.dumps({**LLAMA_KEYS, "num_key_value_heads": 8, **config}, indent=2)
    files = MemoryFiles({"/job/model/config.json": document})
    facts = Facts()
    assert resolve_model("model", facts=facts, files=files, cwd="/job", source="run.sh:4")
    noted = [note for note in facts.notes if words in note]
    assert noted
    assert noted[0].startswith("model/config.json: ")
    assert noted[0].endswith("no field for dense biases, so they are left out")


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "llama", "attention_bias": False, "mlp_bias": False},
        {"model_type": "mistral", "attention_bias": True, "mlp_bias": True},
        {"model_type": "mixtral", "attention_bias": True},
        {"model_type": "qwen2_moe", "qkv_bias": False},
        {"model_type": "gpt_oss", "attention_bias": False},
        {"model_type": "qwen3_moe"},
        {"model_type": "olmo", "mlp_bias": True},
    ],
)
def test_unbiased_linears_are_not_noted(config: dict[str, object]) -> None:
    """Switches off, or a family whose linears take no bias whatever the file says."""
    document = json.dumps({**LLAMA_KEYS, "num_key_value_heads": 8, **config})
    files = MemoryFiles({"/job/model/config.json": document})
    facts = Facts()
    assert resolve_model("model", facts=facts, files=files, cwd="/job", source="run.sh:4")
    assert not any("bias" in note for note in facts.notes)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"model_type": "falcon"}, "parallel_attn: attention and MLP"),
        ({"model_type": "falcon", "new_decoder_architecture": True}, "new_decoder_architecture"),
        ({"model_type": "cohere"}, "model_type cohere: attention and MLP"),
        ({"model_type": "phi"}, "model_type phi: attention and MLP"),
        ({"model_type": "phi"}, "model_type phi: every linear layer carries a bias"),
        ({"model_type": "gpt_neox"}, "use_parallel_residual: attention and MLP"),
        ({"model_type": "starcoder2"}, "use_bias: every linear layer carries a bias"),
        ({"model_type": "llama4_text"}, "chunks of 8192 tokens"),
        ({"model_type": "olmo2"}, "whole projections"),
    ],
)
def test_unmodelled_features_are_noted(config: dict[str, object], words: str) -> None:
    document = json.dumps({**config, **LLAMA_KEYS}, indent=2)
    files = MemoryFiles({"/job/model/config.json": document})
    facts = Facts()
    assert resolve_model("model", facts=facts, files=files, cwd="/job", source="run.sh:4")
    assert any(note.startswith("model/config.json: ") and words in note for note in facts.notes)
    quiet = MemoryFiles(
        {"/job/model/config.json": json.dumps({"model_type": "llama", **LLAMA_KEYS})}
    )
    facts = Facts()
    assert resolve_model("model", facts=facts, files=quiet, cwd="/job", source="run.sh:4")
    assert not any("config.json: " in note for note in facts.notes)
