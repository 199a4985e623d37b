"""describe_launch: which count of GPUs wins, what the allocation adds, what an unknown launch
gives."""

from __future__ import annotations

from planner.launch.describe import describe_launch
from planner.launch.types import Launch, MemoryFiles

TORCHRUN = (
    "torchrun --nproc-per-node=8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 "
    "--num-attention-heads 16 --seq-length 2048 --tensor-model-parallel-size 8 "
    "--pipeline-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64 --bf16"
)


def test_a_pod_command_without_a_node_count_spans_every_pod() -> None:
    """torchrun without --nnodes in each of 2 pods: one job of 16 processes, not 8."""
    per_pod = describe_launch(
        Launch(command=TORCHRUN, num_gpus=16, num_nodes=2, per_node=True), MemoryFiles()
    )
    assert per_pod.scenario["hardware"]["num_gpus"] == 16
    assert per_pod.scenario["parallelism"]["data_parallel"] == 1
    once = describe_launch(Launch(command=TORCHRUN, num_gpus=16, num_nodes=2), MemoryFiles())
    assert once.scenario["hardware"]["num_gpus"] == 8  # one torchrun on one node starts 8


def test_the_allocation_fills_nodes_when_the_reader_counted_the_gpus() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
        "srun torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --num-layers 8 "
        "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
        "--micro-batch-size 1 --global-batch-size 64\n"
    )
    described = describe_launch(Launch(batch_script=script, script_name="train.sh"), MemoryFiles())
    assert described.scenario["hardware"]["gpus_per_node"] == 8
    assert described.launch["num_nodes"] == 2
    assert described.provenance["model.num_layers"].startswith("train.sh:")


def test_notes_of_the_launch_reach_the_description() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --gpus=8\nHOST=$(hostname)\n"
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 "
        "--num-attention-heads 16 --seq-length 2048 --global-batch-size 64\n"
    )
    described = describe_launch(Launch(batch_script=script), MemoryFiles())
    assert described.recognised
    assert any("hostname" in note for note in described.notes)


def test_a_launch_no_reader_knows_is_described_by_none() -> None:
    described = describe_launch(
        Launch(batch_script="#!/bin/bash\nsrun ./my_binary --steps 10\n"), MemoryFiles()
    )
    assert described.described_by == "none"
    assert "no reader recognises" in described.detail
    assert described.to_json()["prediction"] == {"error": "not predicted"}
