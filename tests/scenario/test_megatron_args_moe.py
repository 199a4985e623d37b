"""The Megatron-LM argument reader learns the model flags of MLA, MTP and the MoE options."""

from __future__ import annotations

from planner.scenario import parse_scenario
from planner.scenario.megatron_args import (
    arguments_from_yaml,
    scenario_document_from_megatron_args,
)

DEEPSEEK = """
pretrain_gpt.py --num-layers 61 --hidden-size 7168 --num-attention-heads 128 \\
    --ffn-hidden-size 18432 --swiglu --seq-length 4096 --vocab-size 129280 \\
    --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 \\
    --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 \\
    --num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 \\
    --moe-shared-expert-intermediate-size 2048 --moe-layer-freq "([0]*3+[1]*58)" \\
    --mtp-num-layers 1 --moe-token-dispatcher-type flex --moe-enable-deepep \\
    --moe-grouped-gemm --moe-router-force-load-balancing --overlap-moe-expert-parallel-comm \\
    --expert-model-parallel-size 8 --pipeline-model-parallel-size 1 --global-batch-size 64
"""


def test_deepseek_v3_arguments_become_its_architecture() -> None:
    doc = scenario_document_from_megatron_args(DEEPSEEK, num_gpus=64, gpu="h100")
    assert doc is not None
    model = parse_scenario(doc).model
    assert model.multi_latent_attention
    assert (model.q_lora_rank, model.kv_lora_rank) == (1536, 512)
    assert (model.qk_head_dim, model.qk_pos_emb_head_dim, model.v_head_dim) == (128, 64, 128)
    assert model.num_moe_layers == 58
    assert model.shared_expert_ffn_hidden_size == 2048
    assert model.mtp_num_layers == 1
    assert model.moe_token_dispatcher_type == "flex"
    assert model.moe_grouped_gemm
    assert model.moe_router_force_load_balancing
    assert model.overlap_moe_expert_parallel_comm


def test_moe_defaults_are_megatrons() -> None:
    text = (
        "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
        "--num-experts 8 --global-batch-size 64"
    )
    doc = scenario_document_from_megatron_args(text, num_gpus=8, gpu="h100")
    assert doc is not None
    model = parse_scenario(doc).model
    assert model.moe_token_dispatcher_type == "allgather"  # Megatron-LM's default
    assert not model.moe_grouped_gemm
    assert model.moe_expert_capacity_factor is None  # dropless


def test_capacity_factor_window_and_integer_layer_frequency() -> None:
    text = (
        "--num-layers 24 --hidden-size 2880 --num-attention-heads 64 --kv-channels 64 "
        "--group-query-attention --num-query-groups 8 --seq-length 4096 --num-experts 32 "
        "--moe-router-topk 4 --moe-expert-capacity-factor 1.25 --moe-layer-freq 2 "
        "--moe-pad-expert-input-to-capacity "
        "--window-size (128,0) --window-attn-skip-freq 2 --global-batch-size 64"
    )
    doc = scenario_document_from_megatron_args(text, num_gpus=8, gpu="h100")
    assert doc is not None
    model = parse_scenario(doc).model
    assert model.moe_expert_capacity_factor == 1.25
    assert model.moe_pad_expert_input_to_capacity
    assert model.num_moe_layers == 12
    assert (model.window_size, model.window_attn_skip_freq) == (128, 2)


def test_recompute_modules_take_every_listed_value() -> None:
    text = (
        "--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --seq-length 4096 "
        "--num-experts 128 --moe-router-topk 8 --recompute-granularity selective "
        "--recompute-modules layernorm moe_act --global-batch-size 64"
    )
    doc = scenario_document_from_megatron_args(text, num_gpus=8, gpu="h100")
    assert doc is not None
    par = parse_scenario(doc).parallelism
    assert [str(m) for m in par.recompute_modules or ()] == ["layernorm", "moe_act"]


def test_experts_carry_biases_unless_the_launch_disables_linear_biases() -> None:
    # Megatron-Core's add_bias_linear defaults to true; --disable-bias-linear clears it
    moe = (
        "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
        "--num-experts 8 --moe-grouped-gemm --global-batch-size 32"
    )
    biased = scenario_document_from_megatron_args(moe, num_gpus=8, gpu="h100")
    plain = scenario_document_from_megatron_args(
        moe + " --disable-bias-linear --swiglu", num_gpus=8, gpu="h100"
    )
    assert biased is not None
    assert plain is not None
    assert parse_scenario(biased).model.moe_expert_bias is True
    assert parse_scenario(plain).model.moe_expert_bias is False
    # the switch takes no value: the flag after it is still read
    assert parse_scenario(plain).model.activation == "swiglu"


def test_a_yaml_cfg_add_bias_linear_false_reads_as_the_disable_switch() -> None:
    args, keys = arguments_from_yaml({"language_model": {"add_bias_linear": False}})
    assert args == {"disable-bias-linear": True}
    assert keys == {"disable-bias-linear": "language_model.add_bias_linear"}
    assert arguments_from_yaml({"language_model": {"add_bias_linear": True}}) == ({}, {})
