"""Megatron-LM arguments from command lines and sbatch scripts -> scenario documents."""

from __future__ import annotations

from typing import Any

import pytest

from planner.errors import SpecError
from planner.scenario import parse_scenario, predict_documents
from planner.scenario.megatron_args import scenario_document_from_megatron_args

SBATCH = r"""#!/bin/bash
#SBATCH --job-name=llama3-70b
#SBATCH --nodes=128
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=8

export CUDA_DEVICE_MAX_CONNECTIONS=1
NUM_LAYERS=80
TP=8
SEQ=8192

GPT_ARGS="--num-layers ${NUM_LAYERS} --hidden-size 8192 \
    --ffn-hidden-size 28672 --num-attention-heads 64"

MODEL_ARGS=(
    --group-query-attention --num-query-groups 8
    --seq-length $SEQ --max-position-embeddings 8192
    --swiglu
    --untie-embeddings-and-output-weights   # Llama 3 unties
    --tokenizer-type HuggingFaceTokenizer --tokenizer-model meta-llama/Meta-Llama-3-70B
)

srun python pretrain_gpt.py \
    $GPT_ARGS "${MODEL_ARGS[@]}" \
    --tensor-model-parallel-size=$TP \
    --pipeline-model-parallel-size 4 \
    --num-layers-per-virtual-pipeline-stage 5 \
    --sequence-parallel \
    --use-distributed-optimizer --overlap-grad-reduce \
    --recompute-granularity selective \
    --micro-batch-size 1 --global-batch-size 512 \
    --bf16 \
    --train-iters 250000 \
    --lr 3e-4 --save /ckpt --log-interval 10
"""


def test_sbatch_script_extraction() -> None:
    doc = scenario_document_from_megatron_args(SBATCH, num_gpus=1024, gpu="h100", name="job-1")
    assert doc is not None
    model, par, hw = doc["model"], doc["parallelism"], doc["hardware"]
    assert doc["name"] == "job-1"
    assert model == {
        "num_layers": 80,
        "hidden_size": 8192,
        "num_attention_heads": 64,
        "vocab_size": 129024,  # Llama-3 tokenizer 128256 padded to a multiple of 128 * tp
        "activation": "swiglu",
        "untie_embeddings": True,
        "seq_length": 8192,
        "ffn_hidden_size": 28672,
        "num_query_groups": 8,
    }
    assert par == {
        "tensor_parallel": 8,
        "pipeline_parallel": 4,
        "context_parallel": 1,
        "expert_parallel": 1,
        "sequence_parallel": True,
        "micro_batch_size": 1,
        "precision": "bf16",
        "zero_stage": 1,
        "virtual_pipeline": 4,
        "recompute": "selective",
        "data_parallel": 32,
        "global_batch_size": 512,
        "overlap_grad_reduce": True,
        "overlap_param_gather": False,
        "tp_comm_overlap": False,
    }
    assert hw == {"gpu": "h100-sxm", "num_gpus": 1024}
    assert doc["training"] == {"framework": "megatron", "train_iters": 250000}
    scenario = parse_scenario(doc)
    assert scenario.parallelism.data_parallel == 32
    (out,) = predict_documents([doc])
    assert out["time_to_train_s"] == pytest.approx(250000 * out["iteration_time_s"])


def test_command_line_megatron_defaults_and_vocab_padding() -> None:
    cmd = (
        "torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
        "--num-attention-heads 16 --seq-length 2048 --num-query-groups 4 "
        "--tensor-model-parallel-size 2 --sequence-parallel --fp8-format hybrid "
        "--micro-batch-size 4 --recompute-granularity full --train-samples 1000"
    )
    doc = scenario_document_from_megatron_args(cmd, num_gpus=8, gpu="h100-sxm")
    assert doc is not None
    assert "name" not in doc
    model, par = doc["model"], doc["parallelism"]
    assert model["vocab_size"] == 50432  # GPT-2 50257 padded to a multiple of 128 * tp
    assert model["untie_embeddings"] is False  # Megatron ties by default
    assert model["activation"] == "gelu"
    assert "num_query_groups" not in model  # ignored without --group-query-attention
    assert par["zero_stage"] == 0
    assert par["precision"] == "fp8"
    assert par["recompute"] == "full"
    assert par["global_batch_size"] == 4 * 4  # Megatron default: micro-batch x dp
    assert "grad_reduce_in_fp32" not in par  # left to the framework default
    assert par["overlap_grad_reduce"] is False  # Megatron-LM's default without the flag
    assert par["overlap_param_gather"] is False
    assert par["tp_comm_overlap"] is False  # --tp-comm-overlap is off unless given
    assert doc["training"]["total_tokens"] == 1000 * 2048
    parse_scenario(doc)


def test_moe_and_explicit_vocab() -> None:
    cmd = (
        "python pretrain_gpt.py --num-layers=32 --hidden-size=4096 --num-attention-heads=32 "
        "--seq-length=4096 --num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
        "--padded-vocab-size 32000 --global-batch-size 256 --swiglu --ffn-hidden-size 14336 "
        "--group-query-attention --num-query-groups 8"
    )
    doc = scenario_document_from_megatron_args(cmd, num_gpus=64, gpu="H100_80GB")
    assert doc is not None
    assert doc["model"]["num_experts"] == 8
    assert doc["model"]["moe_router_topk"] == 2
    assert doc["model"]["vocab_size"] == 32000
    assert doc["parallelism"]["expert_parallel"] == 8
    assert parse_scenario(doc).model.is_moe


def _small_bf16_gpt(flags: str) -> dict[str, Any]:
    """The document of a small bf16 GPT launch on 8 H100s with ``flags`` added."""
    cmd = (
        "pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 "
        f"--seq-length 512 --bf16 {flags}"
    )
    doc = scenario_document_from_megatron_args(cmd, num_gpus=8, gpu="h100-sxm")
    assert doc is not None
    return doc


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--grad-reduce-in-bf16", False),
        ("--accumulate-allreduce-grads-in-fp32", True),
        ("--main-grads-dtype bf16", False),  # no fp32 accumulation set for bf16 main grads
    ],
)
def test_gradient_reduction_precision_flags(flag: str, expected: bool) -> None:
    doc = _small_bf16_gpt(flag)
    assert doc["parallelism"]["grad_reduce_in_fp32"] is expected
    assert parse_scenario(doc).parallelism.grad_reduce_in_fp32 is expected


def test_tp_comm_overlap_flag() -> None:
    """``--tp-comm-overlap`` is stated; Megatron-LM's ``validate_args`` asserts sequence
    parallelism with it, which it turns off at tensor parallelism 1
    (``TP_COMM_OVERLAP_SEQUENCE_SOURCE``): the flag alone, or at tensor parallelism 2 without
    ``--sequence-parallel``, is refused naming the field to change."""
    doc = _small_bf16_gpt("--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap")
    assert doc["parallelism"]["tp_comm_overlap"] is True
    assert parse_scenario(doc).parallelism.tp_comm_overlap is True
    for flags, field in (
        ("--tp-comm-overlap", "parallelism.tp_comm_overlap"),
        (
            "--tensor-model-parallel-size 1 --sequence-parallel --tp-comm-overlap",
            "parallelism.tp_comm_overlap",
        ),
        ("--tensor-model-parallel-size 2 --tp-comm-overlap", "parallelism.sequence_parallel"),
    ):
        refused = _small_bf16_gpt(flags)
        assert refused["parallelism"]["tp_comm_overlap"] is True
        with pytest.raises(SpecError) as error:
            parse_scenario(refused)
        assert error.value.field == field
        assert "can happen only when sequence parallelism is enabled" in error.value.message


def test_fp8_param_gather_flag_under_fp8_only() -> None:
    fp8 = _small_bf16_gpt(
        "--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather --use-distributed-optimizer"
    )
    assert fp8["parallelism"]["fp8_param_gather"] is True
    assert parse_scenario(fp8).parallelism.fp8_param_gather is True
    # Megatron-FSDP and torch FSDP2 shard the optimizer too: ZeRO 3, as the launch reader reads
    # it; under FSDP2 validate_args turns FP8 weights off (Transformer Engine 2.0 on)
    flags = "--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather"
    for fsdp, gather in (("--use-megatron-fsdp", True), ("--use-torch-fsdp2", False)):
        sharded = _small_bf16_gpt(f"{flags} {fsdp}")
        assert sharded["parallelism"]["zero_stage"] == 3
        assert parse_scenario(sharded).parallelism.fp8_param_gather is gather
    assert "fp8_param_gather" not in _small_bf16_gpt("--fp8-param-gather")["parallelism"]


@pytest.mark.parametrize(
    ("flags", "stage"),
    [
        ("--use-megatron-fsdp --data-parallel-sharding-strategy no_shard", 0),
        ("--use-megatron-fsdp --data-parallel-sharding-strategy optim", 1),
        ("--use-megatron-fsdp --data-parallel-sharding-strategy=optim_grads", 2),
        ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", 3),
        (
            "--use-distributed-optimizer --use-megatron-fsdp "
            "--data-parallel-sharding-strategy optim",
            1,
        ),
        ("--use-megatron-fsdp", 3),  # the newest default, optim_grads_params
        ("--use-custom-fsdp --use-distributed-optimizer", 0),  # core 0.12-0.13: no_shard
        ("--data-parallel-sharding-strategy optim_grads_params", 0),  # no FSDP: no sharding
        ("--use-torch-fsdp2", 3),
    ],
)
def test_megatron_fsdp_zero_stage_is_its_sharding_strategys(flags: str, stage: int) -> None:
    doc = _small_bf16_gpt(flags)
    assert doc["parallelism"]["zero_stage"] == stage
    assert parse_scenario(doc).parallelism.zero_stage == stage


def test_fp8_param_gather_without_distributed_optimizer_is_refused() -> None:
    """Megatron-LM asserts a sharded optimizer for ``--fp8-param-gather``
    (``FP8_PARAM_GATHER_SOURCE``): the launch without ``--use-distributed-optimizer`` reads as
    ZeRO 0 and is refused naming ``parallelism.zero_stage`` and the fix."""
    doc = _small_bf16_gpt("--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather")
    assert doc["parallelism"]["zero_stage"] == 0
    with pytest.raises(SpecError) as refused:
        parse_scenario(doc)
    assert refused.value.field == "parallelism.zero_stage"
    assert "--use-distributed-optimizer" in refused.value.message


def test_fp8_param_gather_under_megatron_fsdp_is_taken_at_every_sharding_strategy() -> None:
    """The assertion passes with ``--use-megatron-fsdp`` whatever it shards
    (``FP8_PARAM_GATHER_SOURCE``): ``no_shard`` is ZeRO 0 with FP8 weights, and accepted."""
    flags = "--fp8-format hybrid --fp8-recipe tensorwise --fp8-param-gather --use-megatron-fsdp"
    for strategy, stage in (("no_shard", 0), ("optim", 1), ("optim_grads_params", 3)):
        doc = _small_bf16_gpt(f"{flags} --data-parallel-sharding-strategy {strategy}")
        assert doc["parallelism"]["megatron_fsdp"] is True
        parallelism = parse_scenario(doc).parallelism
        assert (parallelism.zero_stage, parallelism.fp8_param_gather) == (stage, True)
    plain = _small_bf16_gpt("--use-distributed-optimizer")
    assert "megatron_fsdp" not in plain["parallelism"]
    torch_fsdp = _small_bf16_gpt("--use-torch-fsdp2 --use-megatron-fsdp")  # FSDP2 wraps
    assert "megatron_fsdp" not in torch_fsdp["parallelism"]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ("--cuda-graph-impl full_iteration", "full_iteration"),
        ("--cuda-graph-impl local --cuda-graph-scope full_iteration", "full_iteration"),
        ("--enable-cuda-graph --cuda-graph-scope full_iteration", "full_iteration"),
        ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router", "per_layer"),
        ("--external-cuda-graph", "per_layer"),
        ("--enable-cuda-graph", "per_layer"),
        ("--cuda-graph-impl none", "none"),
        ("--cuda-graph-scope full_iteration", "none"),  # a scope alone graphs nothing
        ("", "none"),
    ],
)
def test_cuda_graph_flags(flags: str, expected: str) -> None:
    assert parse_scenario(_small_bf16_gpt(flags)).training.cuda_graphs == expected


def test_no_model_arguments_returns_none() -> None:
    assert (
        scenario_document_from_megatron_args("python train.py --lr 1e-4", num_gpus=8, gpu=None)
        is None
    )
    assert (
        scenario_document_from_megatron_args(
            "--num-layers 2 --hidden-size 64", num_gpus=None, gpu=None
        )
        is None
    )


def test_unknown_gpu_and_indivisible_gpus_are_left_for_parse() -> None:
    cmd = (
        "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 "
        "--tensor-model-parallel-size 4"
    )
    doc = scenario_document_from_megatron_args(cmd, num_gpus=6, gpu="tesla-k80")
    assert doc is not None
    assert "data_parallel" not in doc["parallelism"]
    (out,) = predict_documents([doc])
    assert out["error"].startswith("hardware.gpu: unknown GPU 'tesla-k80'")


def test_unbalanced_quotes_fall_back() -> None:
    text = 'echo "oops\n--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64'
    doc = scenario_document_from_megatron_args(text, num_gpus=1, gpu="a100-80gb")
    assert doc is not None
    assert doc["model"]["num_layers"] == 2


UNEVEN = r"""
srun python pretrain_gpt.py --num-layers 94 --hidden-size 4096 --num-attention-heads 64 \
    --group-query-attention --num-query-groups 4 --kv-channels 128 --ffn-hidden-size 12288 \
    --num-experts 128 --moe-router-topk 8 --moe-ffn-hidden-size 1536 --swiglu \
    --seq-length 4096 --vocab-size 151936 --untie-embeddings-and-output-weights \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 8 \
    --expert-model-parallel-size 32 --expert-tensor-parallel-size 1 --sequence-parallel \
    --num-layers-per-virtual-pipeline-stage 3 \
    --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split \
    --micro-batch-size 1 --global-batch-size 2048 --bf16 --use-distributed-optimizer
"""


def test_uneven_stages_and_folding_arguments() -> None:
    """Megatron-MoE-ModelZoo's Qwen3-235B-A22B: 94 layers + embedding + loss slots over
    pipeline 8, 3 layers per virtual stage (so virtual pipeline 96 / (8·3) = 4), expert
    tensor parallel 1 with expert parallel 32 folded into tp 2 x dp 16."""
    doc = scenario_document_from_megatron_args(UNEVEN, num_gpus=256, gpu="h100")
    assert doc is not None
    par = doc["parallelism"]
    assert isinstance(par, dict)
    assert par["virtual_pipeline"] == 4
    assert par["expert_tensor_parallel"] == 1
    assert par["account_for_embedding_in_pipeline_split"] is True
    assert par["account_for_loss_in_pipeline_split"] is True
    scenario = parse_scenario(doc)
    assert scenario.parallelism.expert_tensor_parallel == 1
    assert predict_documents([doc])[0]["iteration_time_s"] > 0


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            '--pipeline-model-parallel-layout "Et*3|(tt|)*29,m|L"',
            {"pipeline_layout": "Et*3|(tt|)*29,m|L"},
        ),
        (
            "--decoder-first-pipeline-num-layers 15 --decoder-last-pipeline-num-layers 15",
            {"decoder_first_pipeline_num_layers": 15, "decoder_last_pipeline_num_layers": 15},
        ),
    ],
)
def test_explicit_split_arguments(flags: str, expected: dict[str, object]) -> None:
    model = "--num-layers 126 --hidden-size 1024 --num-attention-heads 8"
    text = f"python pretrain_gpt.py {model} {flags}"
    doc = scenario_document_from_megatron_args(text, num_gpus=8, gpu="h100")
    assert doc is not None
    par = doc["parallelism"]
    assert isinstance(par, dict)
    assert expected.items() <= par.items()


@pytest.mark.parametrize(("method", "expected"), [("block", 1), ("uniform", None)])
def test_block_recompute_states_its_first_layers(method: str, expected: int | None) -> None:
    """``--recompute-method block --recompute-num-layers N``: the first N layers of each
    pipeline model chunk; ``uniform`` recomputes every layer."""
    doc = _small_bf16_gpt(
        f"--recompute-granularity full --recompute-method {method} --recompute-num-layers 1"
    )
    assert parse_scenario(doc).parallelism.recompute_num_layers == expected
