"""The HF Trainer / TRL / accelerate reader: defaults < config file < command line, the
accelerate world size and backends (DeepSpeed, FSDP, DDP, parallelism_config meshes), the TRL
command line and its built-in accelerate configs, LoRA and precision."""

from __future__ import annotations

import functools

import pytest

from planner.errors import PlannerError
from planner.launch.readers.hf import READER
from planner.launch.readers.hf_args import flag_args
from planner.launch.readers.hf_parallel import fsdp_zero_stage, launcher_world
from planner.launch.types import Invocation
from planner.launch.values import as_bool
from tests.launch import reader_support as support

JOB = "/jobs/hf"
SCRIPT_ARGS = (
    "--model_name_or_path",
    "models/mini-qwen",
    "--per_device_train_batch_size",
    "2",
    "--gradient_accumulation_steps",
    "8",
)


_read = functools.partial(
    support.read_program,
    READER,
    "hf",
    JOB,
    allocation=support.allocation(8, 1, 8),
    where="job.sh:3",
    gpus_from_allocation=True,
)
"""``_read(program, *args, launcher=, launcher_args=, allocation=)``: the finished facts."""


def test_recognises_trl_commands_scripts_with_hf_arguments_and_handbook_recipes() -> None:
    assert READER.recognises(Invocation(program="trl", args=("sft", "--config", "a.yaml")))
    assert READER.recognises(Invocation(program="trl.scripts.dpo", args=()))
    assert READER.recognises(Invocation(program="train.py", args=("--model_name_or_path=x",)))
    assert READER.recognises(Invocation(program="scripts/run_orpo.py", args=("r/config.yaml",)))
    assert READER.recognises(Invocation(program="sft.py", args=("--config", "r/c.yaml")))
    assert not READER.recognises(Invocation(program="trl", args=("env",)))
    assert not READER.recognises(Invocation(program="train.py", args=("cfg.yaml",)))
    assert not READER.recognises(Invocation(program="tune", args=("run", "full_finetune")))


def test_accelerate_command_line_beats_its_config_file_and_zero2_comes_from_the_plugin() -> None:
    facts = _read(
        "train.py",
        *SCRIPT_ARGS,
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/ds_zero2.yaml", "num_processes": "4"},
        allocation=support.allocation(4, 1, 4),
    )
    assert facts.get("hardware.num_gpus") == 4
    assert facts.values["hardware.num_gpus"].source.startswith("launch: accelerate")
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.values["parallelism.zero_stage"].source == "ds_zero2.yaml:7"
    assert facts.get("training.framework") == "deepspeed"
    assert facts.get("parallelism.global_batch_size") == 2 * 8 * 4
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("launch.num_nodes") == 1
    assert facts.get("hardware.gpus_per_node") == 4


def test_plain_trainer_defaults_are_assumed_and_cited() -> None:
    facts = _read("run_clm.py", "--model_name_or_path", "models/mini-qwen")
    assert facts.get("parallelism.micro_batch_size") == 8
    assert "parallelism.micro_batch_size" in facts.assumed
    assert "transformers" in facts.values["parallelism.micro_batch_size"].source
    assert facts.get("model.num_layers") == 12
    assert facts.get("training.mode") == "sft"
    assert not facts.has("training.train_iters")
    assert facts.get("parallelism.global_batch_size") == 8 * 1 * 8
    assert any("fp32" in note for note in facts.notes)


def test_handbook_recipe_positional_yaml_with_overrides() -> None:
    facts = _read(
        "scripts/run_sft.py",
        "recipes/sft_full.yaml",
        "--per_device_train_batch_size=1",
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/ds_file.yaml"},
    )
    assert facts.get("parallelism.micro_batch_size") == 1
    assert facts.values["parallelism.micro_batch_size"].source.startswith("override:")
    assert facts.get("launch.gradient_accumulation") == 2
    assert facts.values["launch.gradient_accumulation"].source == "sft_full.yaml:6"
    assert facts.get("model.seq_length") == 3072
    assert facts.get("training.train_iters") == 500
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.values["parallelism.zero_stage"].source == "stage3_auto.json:4"
    assert facts.get("parallelism.precision") == "bf16"
    assert facts.get("parallelism.recompute") == "full"
    assert facts.get("hardware.num_gpus") == 8


def test_trl_cli_config_builtin_accelerate_config_and_lora() -> None:
    facts = _read(
        "trl",
        "dpo",
        "--config",
        "recipes/dpo_lora.yaml",
        "--accelerate_config",
        "zero1",
        allocation=support.allocation(4, 1, 4),
    )
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 64
    assert facts.get("training.lora_targets") == [
        "linear_qkv",
        "linear_proj",
        "linear_fc1",
        "linear_fc2",
    ]
    assert facts.get("parallelism.zero_stage") == 1
    assert facts.values["parallelism.zero_stage"].source.startswith("catalog:zero1 (")
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("model.seq_length") == 2048
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 4


def test_use_peft_without_lora_r_takes_trl_default_and_sft_max_length() -> None:
    facts = _read("trl/scripts/sft.py", *SCRIPT_ARGS, "--use_peft", "--packing")
    assert facts.get("training.lora_rank") == 16
    assert "training.lora_rank" in facts.assumed
    assert facts.get("model.seq_length") == 1024
    assert "model.seq_length" in facts.assumed
    assert "sft_config.py" in facts.values["model.seq_length"].source
    assert facts.get("parallelism.precision") == "bf16"
    assert "parallelism.precision" in facts.assumed


def test_hybrid_sharding_shards_within_a_node() -> None:
    facts = _read(
        "train.py",
        *SCRIPT_ARGS,
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/fsdp_hybrid.yaml"},
        allocation=support.allocation(16, 2, 8),
    )
    assert facts.get("hardware.num_gpus") == 16
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("hardware.gpus_per_node") == 8
    assert facts.get("launch.fsdp_shard") == 8
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("parallelism.data_parallel") == 16


def test_parallelism_config_mesh_only_data_dims_take_samples() -> None:
    facts = _read(
        "train.py",
        *SCRIPT_ARGS,
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/fsdp2_mesh.yaml"},
    )
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.context_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("launch.fsdp_shard") == 2
    assert facts.get("parallelism.global_batch_size") == 2 * 8 * 2


def test_deepspeed_argument_json_sets_precision_and_notes_a_batch_mismatch() -> None:
    facts = _read(
        "train.py",
        *SCRIPT_ARGS,
        "--deepspeed",
        "ds/stage2_fixed.json",
        launcher="torchrun",
        launcher_args={"nproc_per_node": "4", "nnodes": "2"},
        allocation=support.allocation(8, 2, 4),
    )
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.get("parallelism.precision") == "fp16"
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("hardware.gpus_per_node") == 4
    assert facts.get("launch.num_nodes") == 2
    assert any("mismatch" in note for note in facts.notes)


def test_trl_default_bf16_overrides_accelerate_fp16_and_ddp_shards_nothing() -> None:
    facts = _read(
        "sft.py",
        *SCRIPT_ARGS,
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/ddp_fp16.yaml"},
        allocation=support.allocation(4, 1, 4),
    )
    assert facts.get("parallelism.precision") == "bf16"
    assert any("overrides accelerate fp16" in note for note in facts.notes)
    assert facts.get("parallelism.zero_stage") == 0
    assert facts.get("training.framework") == "other"
    plain = _read(
        "train.py",
        *SCRIPT_ARGS,
        launcher="accelerate",
        launcher_args={"config_file": "accelerate/ddp_fp16.yaml"},
    )
    assert plain.get("parallelism.precision") == "fp16"


def test_max_steps_and_explicit_false_flags() -> None:
    facts = _read(
        "trl/scripts/sft.py",
        *SCRIPT_ARGS,
        "--max_steps",
        "1200",
        "--gradient_checkpointing",
        "False",
    )
    assert facts.get("training.train_iters") == 1200
    assert facts.get("parallelism.recompute") == "none"


def test_missing_config_file_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match=r"no-such\.yaml"):
        _read("scripts/run_sft.py", "recipes/no-such.yaml")


def test_flag_args_reads_bare_flags_values_and_negations() -> None:
    flags = flag_args(
        ["cfg.yaml", "--packing", "--lr=2e-5", "--bf16", "false", "--no_packing", "--n", "3"],
        bool_keys=frozenset({"packing", "bf16"}),
    )
    assert flags.positionals == ("cfg.yaml",)
    assert flags.get("packing") == (False, "--no_packing")
    assert flags.get("bf16") == (False, "--bf16 false")
    assert flags.get("lr") == (2e-5, "--lr=2e-5")
    assert flags.get("n") == (3, "--n 3")
    assert as_bool("yes") is True


def test_launcher_world_and_fsdp_stages() -> None:
    world = launcher_world("torchrun", {"nproc_per_node": "8", "nnodes": "4"})
    assert world is not None
    assert world.processes == 32
    assert world.nodes == 4
    assert launcher_world("torchrun", {"nproc_per_node": "gpu"}) is None
    assert fsdp_zero_stage("SHARD_GRAD_OP") == 2
    assert fsdp_zero_stage(False) == 2
    assert fsdp_zero_stage("NO_SHARD") == 0
    assert fsdp_zero_stage(1) == 3
