"""Launchers, allocation and dispatch of the shell layer (planner.launch.shell): srun,
torchrun, accelerate, deepspeed, composer and console programs peeled off, ``#SBATCH`` lines,
the scheduler's allocation, on launch scripts written for these tests
(tests/data/launch/shell/)."""

from __future__ import annotations

import pytest

from planner.launch import shell
from planner.launch.shell import LaunchPlan, plan_from_command, plan_from_launch
from planner.launch.shell_slurm import SCHEDULER_SOURCE
from planner.launch.types import Facts, Launch, MemoryFiles
from tests.launch.shell_support import only, run_command, run_job, run_script, value

# --- launchers --------------------------------------------------------------------------------


def test_srun_bash_c_accelerate_with_positional_arguments() -> None:
    plan = run_job("handbook_style")
    call = only(plan)
    assert call.program == "train/run_sft.py"
    assert call.args == ("recipes/toy-3b/sft/bf16.yaml", "--seed", "7")
    assert call.launcher == "accelerate"
    assert call.launcher_args["config_file"] == "configs/zero2.yaml"
    assert call.launcher_args["num_machines"] == "2"
    assert call.launcher_args["num_processes"] == "8"
    assert call.launcher_args["machine_rank"] == "0"
    assert call.launcher_args["main_process_ip"] == ""
    assert call.where == "scripts/launch.slurm:18"
    assert value(plan.allocation, "launch.num_nodes") == (2, "job.sbatch:4")
    assert value(plan.allocation, "hardware.gpus_per_node") == (4, "scripts/launch.slurm:3")
    assert value(plan.allocation, "hardware.num_gpus")[0] == 8  # type: ignore[index]
    assert value(plan.allocation, "launch.world_size") == (8, "scripts/launch.slurm:18")


@pytest.mark.parametrize(
    ("command", "program", "launcher", "world"),
    [
        (
            "torchrun --nproc_per_node=4 --nnodes=2:3 -m pkg.train --a 1",
            "pkg.train",
            "torchrun",
            12,
        ),
        ("torchrun --nproc-per-node gpu --standalone train.py", "train.py", "torchrun", 8),
        ("python -m torch.distributed.run --nproc_per_node 2 t.py", "t.py", "torchrun", 2),
        ("python3 -u -m torch.distributed.launch --nproc_per_node=4 t.py", "t.py", "torchrun", 4),
        (
            "accelerate launch --multi_gpu --num_processes 16 --num_machines 2 -m pkg.sft x",
            "pkg.sft",
            "accelerate",
            16,
        ),
        ("accelerate launch --use_fsdp --config_file f.yaml t.py --b", "t.py", "accelerate", None),
        ("accelerate launch --some_new_flag -m pkg.mod", "pkg.mod", "accelerate", None),
        ("deepspeed --num_gpus 4 --num_nodes 2 pretrain.py --x", "pretrain.py", "deepspeed", 8),
        ("deepspeed --num_gpus 4 --module pkg.pretrain", "pkg.pretrain", "deepspeed", None),
        ("composer -n 4 train.py cfg.yaml", "train.py", "composer", 4),
        ("composer train.py cfg.yaml", "train.py", "composer", 8),
        ("WORLD_SIZE=32 composer -n 8 train.py", "train.py", "composer", 32),
        ("composer --world_size 64 --node_rank 0 train.py", "train.py", "composer", 64),
        ("torchrun --nnodes 2 train.py", "train.py", "torchrun", None),
        ("PET_NNODES=3 PET_NPROC_PER_NODE=4 torchrun t.py", "t.py", "torchrun", 12),
        ("mpirun -np 16 -x NCCL_DEBUG --mca btl tcp python train.py", "train.py", "mpirun", 16),
        ("uv run --no-sync python -m pkg.main", "pkg.main", "python", None),
        ("conda run -n env --no-capture-output python t.py", "t.py", "python", None),
        ("env A=1 nohup time python3.11 t.py", "t.py", "python", None),
        ("exec numactl --cpunodebind=0 python t.py", "t.py", "python", None),
        ("tune run --nnodes 2 --nproc_per_node 8 full_finetune --config c", "tune", "", 16),
        ("axolotl train c.yaml --launcher torchrun -- --nproc_per_node 4", "axolotl", "", 4),
        ("llamafactory-cli train c.yaml lr=1", "llamafactory-cli", "", None),
        ("nemo llm pretrain --factory small", "nemo", "", None),
    ],
)
def test_launchers_peeled(command: str, program: str, launcher: str, world: int | None) -> None:
    plan = run_script(f"#SBATCH --gpus-per-node=8\n{command} | tee log.txt &\n")
    call = only(plan)
    assert (call.program, call.launcher) == (program, launcher)
    found = value(plan.allocation, "launch.world_size")
    assert (found[0] if found else None) == world
    if world is not None:
        assert found == (world, "job.sbatch:2")


def test_srun_runs_python_once_per_task() -> None:
    plan = run_script("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\nsrun python -m pkg.train")
    assert only(plan).launcher == "srun"
    assert value(plan.allocation, "launch.world_size") == (16, "job.sbatch:3")
    explicit = run_script("#SBATCH --nodes=2\nsrun -n 4 --cpus-per-task 8 python t.py")
    assert value(explicit.allocation, "launch.world_size") == (4, "job.sbatch:2")


def test_what_is_not_a_training_program() -> None:
    plan = run_job("plain")
    assert plan.invocations == ()
    assert value(plan.allocation, "hardware.num_gpus") == (
        8,
        "derived: nodes x GPUs per node (job.sbatch:2, job.sbatch:3)",
    )
    utilities = run_command(
        "python -m pip install x; python -c 'print(1)'; git pull; accelerate env"
    )
    assert utilities.invocations == ()


# --- #SBATCH allocation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "nodes", "per_node", "total"),
    [
        (["--nodes=2", "--gpus-per-node=h100:8"], 2, 8, 16),
        (["-N 4", "--gres=gpu:a100:4,nvme:1"], 4, 4, 16),
        (["-N3", "--gpus=12"], 3, 4, 12),
        (["-G h100:6"], None, 6, 6),
        (["--ntasks=4", "--gpus-per-task=2", "--nodes=2"], 2, 4, 8),
        (["--nodes 2", "--ntasks-per-node=4", "--gpus-per-task=1"], 2, 4, 8),
        (["--gres=gpu"], None, 1, 1),
        (["--nodes=2-4", "--gpus-per-node=8"], 2, 8, 16),
    ],
)
def test_sbatch_allocation_forms(
    lines: list[str], nodes: int | None, per_node: int, total: int
) -> None:
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "hostname\n"
    allocation = run_script(script).allocation
    assert allocation.int("launch.num_nodes") == nodes
    assert allocation.int("hardware.gpus_per_node") == per_node
    assert allocation.int("hardware.num_gpus") == total


def test_sbatch_first_value_wins_and_stops_at_the_first_command() -> None:
    script = (
        "#!/bin/bash\n# comment\n#SBATCH --nodes=2\n#SBATCH --nodes=5  # later\n"
        "#SBATCH --gpus-per-node=4\necho start\n#SBATCH --gpus-per-node=8\n"
        'python t.py "$SLURM_NNODES" "$SLURM_GPUS_ON_NODE" "$SLURM_NTASKS" "$SLURM_PROCID"'
    )
    plan = run_script(script)
    assert value(plan.allocation, "launch.num_nodes") == (2, "job.sbatch:3")
    assert value(plan.allocation, "hardware.gpus_per_node") == (4, "job.sbatch:5")
    assert only(plan).args == ("2", "4", "2", "0")


def test_scheduler_allocation_wins_over_sbatch_lines() -> None:
    plan = run_script(
        "#SBATCH --nodes=2\n#SBATCH --gpus-per-node=4\npython t.py $SLURM_NNODES",
        num_nodes=3,
        gpus_per_node=8,
        num_gpus=24,
        env={"SLURM_JOB_ID": "77"},
    )
    assert value(plan.allocation, "launch.num_nodes") == (3, SCHEDULER_SOURCE)
    assert plan.allocation.int("hardware.num_gpus") == 24
    assert only(plan).args == ("3",)


def test_gpu_count_idioms_answer_from_the_allocation() -> None:
    text = (
        "#SBATCH -N 2\n#SBATCH --gres=gpu:4\nG=$(nvidia-smi -L | wc -l)\n"
        'P=$(python -c "import torch; print(torch.cuda.device_count())")\n'
        "N=$(scontrol show hostnames $SLURM_JOB_NODELIST | wc -l)\n"
        "torchrun --nproc_per_node $G --nnodes $N t.py $P"
    )
    plan = run_script(text)
    assert only(plan).args == ("4",)
    assert value(plan.allocation, "launch.world_size") == (8, "job.sbatch:6")


# --- plan_from_launch dispatch ----------------------------------------------------------------


def test_plan_from_launch_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    command = plan_from_launch(
        Launch(command="python t.py $X", env={"X": "1"}, work_dir="/w", num_gpus=2),
        MemoryFiles(),
    )
    assert only(command).args == ("1",)
    assert command.allocation.int("hardware.num_gpus") == 2
    empty = plan_from_launch(Launch(), MemoryFiles())
    assert empty.invocations == ()

    seen: list[str] = []

    def fake(manifest: object, *, source: str, launch: Launch, files: object) -> LaunchPlan:
        seen.append(source)
        return LaunchPlan()

    import planner.launch.kubernetes as kubernetes

    monkeypatch.setattr(kubernetes, "plan_from_manifest", fake)
    plan_from_launch(Launch(manifest=({"kind": "PyTorchJob"},)), MemoryFiles())
    assert seen == [shell.MANIFEST_SOURCE]


def test_command_keeps_the_given_allocation() -> None:
    given = Facts()
    given.set("hardware.num_gpus", 16, "job.yaml: replicas")
    plan = plan_from_command(
        'set -- --steps 9\ntorchrun --nproc_per_node=8 --nnodes=2 train.py "$@"',
        source="job.yaml",
        env={"PET_NNODES": "2"},
        cwd="/app",
        files=MemoryFiles(),
        allocation=given,
    )
    call = only(plan)
    assert call.args == ("--steps", "9")
    assert call.cwd == "/app"
    assert call.env == {"PET_NNODES": "2"}
    assert value(plan.allocation, "hardware.num_gpus") == (16, "job.yaml: replicas")
    assert value(plan.allocation, "launch.world_size") == (16, "job.yaml:2")
