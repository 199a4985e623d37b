"""The Axolotl reader: schema defaults < YAML < ``--key value``, the launcher options after
``--``, Axolotl's device mesh (only the data dimensions take samples; EP ranks take their own),
adapters, DeepSpeed and FSDP."""

from __future__ import annotations

import functools

import pytest

from planner.errors import PlannerError
from planner.launch.readers.axolotl import READER
from planner.launch.types import Invocation
from tests.launch import reader_support as support

JOB = "/jobs/axolotl"


_read = functools.partial(
    support.read_program,
    READER,
    "axolotl",
    JOB,
    allocation=support.allocation(8, 1, 8),
    where="job.sh:4",
    gpus_from_allocation=True,
)
"""``_read(program, *args, launcher=, launcher_args=, allocation=)``: the finished facts."""


def test_recognises_the_train_command_and_module() -> None:
    assert READER.recognises(Invocation(program="axolotl", args=("train", "c.yaml")))
    assert READER.recognises(Invocation(program="axolotl.cli.train", args=("c.yaml",)))
    assert READER.recognises(Invocation(program="src/axolotl/cli/train.py", args=("c.yaml",)))
    assert not READER.recognises(Invocation(program="axolotl", args=("preprocess", "c.yaml")))
    assert not READER.recognises(Invocation(program="train.py", args=("c.yaml",)))


def test_tp_cp_fsdp_mesh_only_dp_shard_takes_samples() -> None:
    facts = _read("axolotl", "train", "configs/mesh.yaml")
    assert facts.get("parallelism.tensor_parallel") == 2
    assert facts.get("parallelism.context_parallel") == 2
    assert facts.get("parallelism.data_parallel") == 2
    assert facts.get("launch.fsdp_shard") == 2
    assert facts.get("parallelism.global_batch_size") == 2 * 3 * 2
    assert facts.get("training.train_iters") == 100
    assert facts.get("model.seq_length") == 4096
    assert facts.values["model.seq_length"].source == "mesh.yaml:9"
    assert facts.get("model.num_layers") == 10
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.get("training.framework") == "fsdp"


def test_torchrun_options_after_the_separator_set_the_world() -> None:
    facts = _read(
        "axolotl",
        "train",
        "configs/hsdp.yaml",
        "--launcher",
        "torchrun",
        "--",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "4",
        "--rdzv_endpoint",
        "head:29400",
        allocation=support.allocation(8, 2, 4),
    )
    assert facts.get("hardware.num_gpus") == 8
    assert facts.get("launch.num_nodes") == 2
    assert facts.get("hardware.gpus_per_node") == 4
    assert facts.get("parallelism.data_parallel") == 4
    assert facts.get("launch.fsdp_shard") == 2
    assert facts.get("parallelism.global_batch_size") == 1 * 2 * 4


def test_expert_parallel_ranks_each_take_a_micro_batch() -> None:
    facts = _read("axolotl", "train", "configs/experts.yaml")
    assert facts.get("parallelism.expert_parallel") == 2
    assert facts.get("launch.fsdp_shard") == 4
    assert facts.get("parallelism.data_parallel") == 8
    assert facts.get("parallelism.global_batch_size") == 16
    assert facts.get("parallelism.precision") == "fp16"


def test_qlora_with_accelerate_options_and_cli_overrides() -> None:
    facts = _read(
        "axolotl",
        "train",
        "configs/qlora.yaml",
        "--micro-batch-size",
        "4",
        "--sequence_len=1536",
        "--launcher",
        "accelerate",
        "--",
        "--num_processes=4",
        allocation=support.allocation(4, 1, 4),
    )
    assert facts.get("training.mode") == "lora"
    assert facts.get("training.lora_rank") == 16
    assert facts.get("training.lora_targets") == [
        "linear_qkv",
        "linear_proj",
        "linear_fc1",
        "linear_fc2",
    ]
    assert facts.get("parallelism.micro_batch_size") == 4
    assert facts.values["parallelism.micro_batch_size"].source == "override: --micro-batch-size 4"
    assert facts.get("model.seq_length") == 1536
    assert facts.get("hardware.num_gpus") == 4
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.get("launch.fsdp_shard") == 4
    assert facts.get("parallelism.precision") == "bf16"
    assert "parallelism.precision" in facts.assumed
    assert facts.get("parallelism.recompute") == "full"
    assert not facts.has("training.train_iters")


def test_module_form_deepspeed_batch_size_and_defaults() -> None:
    facts = _read(
        "axolotl.cli.train",
        "configs/ds.yaml",
        launcher="accelerate",
        launcher_args={"num_processes": "6", "num_machines": "1"},
        allocation=support.allocation(8, 1, 8),
    )
    assert facts.get("hardware.num_gpus") == 6
    assert facts.get("launch.gradient_accumulation") == 4
    assert facts.get("parallelism.global_batch_size") == 2 * 4 * 6
    assert facts.get("parallelism.zero_stage") == 2
    assert facts.get("model.seq_length") == 512
    assert "model.seq_length" in facts.assumed
    assert facts.get("training.mode") == "sft"


def test_deepspeed_file_outside_the_job_is_noted() -> None:
    facts = _read("axolotl.cli.train", "configs/ds_elsewhere.yaml", launcher="python")
    assert facts.get("hardware.num_gpus") == 1
    assert facts.get("parallelism.zero_stage") == 3
    assert facts.values["parallelism.zero_stage"].source.startswith("derived: the file name")
    assert any("not in the job's files" in note for note in facts.notes)


def test_broken_yaml_is_a_planner_error() -> None:
    with pytest.raises(PlannerError, match=r"broken\.yaml"):
        _read("axolotl", "train", "configs/broken.yaml")
