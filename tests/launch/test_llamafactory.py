"""The LLaMA-Factory reader: yaml + key=value overrides, the launcher's own torchrun world size,
DeepSpeed and FSDP sharding, LoRA defaults and the USE_MCA Megatron backend."""

from __future__ import annotations

import pytest

from planner.errors import PlannerError
from planner.launch.readers.llamafactory import READER
from planner.launch.types import Facts, Invocation
from tests.launch import reader_support as support

JOB = "/jobs/lf"


def _read(
    *args: str,
    env: dict[str, str] | None = None,
    allocation: Facts | None = None,
    program: str = "llamafactory-cli",
    launcher: str = "",
) -> Facts:
    given = allocation if allocation is not None else support.allocation(8, 1, 8)
    return support.read_program(
        READER, "llamafactory", JOB, program, *args, env=env, launcher=launcher, allocation=given
    )


def test_recognises_the_train_command_and_the_script() -> None:
    assert READER.recognises(Invocation(program="lmf", args=("train", "a.yaml")))
    assert READER.recognises(Invocation(program="llamafactory.cli", args=("train", "a.yaml")))
    assert READER.recognises(Invocation(program="src/train.py", args=("cfg/a.yml",)))
    assert not READER.recognises(Invocation(program="llamafactory-cli", args=("export", "a.yaml")))
    assert not READER.recognises(Invocation(program="train.py", args=("a.yaml",)))
    flags = ("--stage", "sft", "--model_name_or_path", "x")
    assert READER.recognises(Invocation(program="LLaMA-Factory/src/train.py", args=flags))
    assert not READER.recognises(Invocation(program="src/train.py", args=("--lr", "1")))
    assert not READER.recognises(Invocation(program="tune", args=("run", "x")))


def test_full_finetune_with_zero2_offload_and_a_local_model() -> None:
    facts = _read("train", "configs/full_zero2.yaml", env={"FORCE_TORCHRUN": "1"})
    assert facts.get("model.num_layers") == 6
    assert facts.get("model.num_query_groups") == 2
    assert facts.get("model.seq_length") == 3072
    assert facts.values["model.seq_length"].source == "full_zero2.yaml:9"
    assert facts.get("training.mode") == "sft"
    assert facts.get("training.train_iters") == 1200
    assert facts.get("parallelism.precision") == "fp16"
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.values["parallelism.zero_stage"].source == "zero2_offload.json:5"
    assert facts.get("launch.optimizer_offload") == "cpu"
    assert facts.get("training.framework") == "deepspeed"
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 8


def test_key_value_overrides_beat_the_yaml() -> None:
    facts = _read(
        "train",
        "configs/full_zero2.yaml",
        "cutoff_len=512",
        "per_device_train_batch_size=1",
        env={"FORCE_TORCHRUN": "1"},
    )
    assert facts.get("model.seq_length") == 512
    assert facts.values["model.seq_length"].source == "override: cutoff_len=512"
    assert facts.get("parallelism.global_batch_size") == 1 * 4 * 8


def test_lora_takes_the_documented_defaults() -> None:
    facts = _read("train", "configs/lora_defaults.yaml", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 8
    assert "hiyouga/LLaMA-Factory" in facts.values["training.lora_rank"].source
    assert facts.get("training.lora_targets") == ["linear_qkv", "linear_fc2"]
    assert facts.get("model.seq_length") == 2048
    assert "model.seq_length" in facts.assumed
    assert facts.get("parallelism.micro_batch_size") == 8
    assert "huggingface/transformers" in facts.values["parallelism.micro_batch_size"].source
    assert not facts.has("training.train_iters")
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("hardware.gpus_per_node") == 4
    assert facts.get("parallelism.global_batch_size") == 8 * 1 * 4
    assert facts.get("parallelism.zero_stage") == 0
    assert facts.get("model.num_layers") == 32


def test_one_visible_device_runs_one_process() -> None:
    facts = _read("train", "configs/lora_defaults.yaml", env={"CUDA_VISIBLE_DEVICES": "3"})
    assert facts.get("hardware.num_gpus") == 1
    assert facts.get("parallelism.global_batch_size") == 8


def test_nnodes_and_nproc_per_node_set_the_world() -> None:
    env = {"FORCE_TORCHRUN": "1", "NNODES": "4", "NODE_RANK": "1", "NPROC_PER_NODE": "4"}
    facts = _read(
        "train", "configs/full_zero2.yaml", env=env, allocation=support.allocation(32, 4, 8)
    )
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("hardware.gpus_per_node") == 4
    assert facts.get("launch.num_nodes") == 4
    assert facts.get("parallelism.data_parallel") == 16


def test_use_mca_reads_the_megatron_layout() -> None:
    env = {"USE_MCA": "1", "NNODES": "2"}
    facts = _read(
        "train", "configs/moe_megatron.yaml", env=env, allocation=support.allocation(16, 2, 8)
    )
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.pipeline_parallel") == 2
    assert facts.get("parallelism.expert_parallel") == 4
    assert facts.get("parallelism.context_parallel") == 1
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 4
    assert facts.get("parallelism.sequence_parallel") is True
    assert facts.get("parallelism.recompute") == "selective"
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.get("training.framework") == "megatron"
    assert facts.get("model.num_experts") == 128


def test_pretraining_with_fp8_and_fsdp_flags() -> None:
    facts = _read(
        "configs/pretrain_fp8.yaml",
        program="src/train.py",
        launcher="torchrun",
        allocation=support.allocation(8, 1, 8),
    )
    assert facts.get("training.mode") == "pretrain"
    assert facts.get("parallelism.precision") == "fp8"
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("training.framework") == "fsdp"
    assert not facts.has("hardware.num_gpus")


def test_hf_style_flags_without_a_config_file() -> None:
    facts = _read(
        "train",
        "--model_name_or_path",
        "models/tiny-llama",
        "--stage",
        "sft",
        "--finetuning_type",
        "full",
        "--cutoff_len=4096",
        "--bf16",
        "--per_device_train_batch_size",
        "2",
    )
    assert facts.get("model.seq_length") == 4096
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.values["parallelism.precision"].source == "override: --bf16"
    assert facts.get("parallelism.micro_batch_size") == 2


def test_a_missing_config_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match=r"missing\.yaml"):
        _read("train", "configs/missing.yaml")
