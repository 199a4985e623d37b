"""The command-line options of the launchers a launch script runs, and how many processes each
starts (used by :mod:`planner.launch.shell_launchers`).

Option tables, from each launcher's argument parser:

* torchrun / ``python -m torch.distributed.run``: pytorch/pytorch
  ``torch/distributed/run.py`` @ 010929fd3f40 (``get_args_parser``): store-true options
  ``--standalone --module/-m --no-python --run-path``; ``--nnodes`` default ``"1:1"``,
  ``--nproc-per-node`` default ``"1"`` (``gpu`` / ``auto``: the node's devices), each also
  read from ``PET_NNODES`` / ``PET_NPROC_PER_NODE`` (``torch/distributed/argparse_util.py``
  ``env`` action).
* accelerate ``launch``: huggingface/accelerate ``src/accelerate/commands/launch.py``
  (store-true options below; ``--num_processes`` is the total process count).
* deepspeed: deepspeedai/DeepSpeed ``deepspeed/launcher/runner.py`` @ 2d991ba352b7
  (``parse_args``): ``--num_gpus`` per node and ``--num_nodes`` default -1 (all of the
  hostfile, default ``/job/hostfile``).
* composer: mosaicml/composer ``composer/cli/launcher.py`` @ 006ea7ac6e7a (``_parse_args``):
  ``--world_size`` > ``WORLD_SIZE`` > ``nproc``; ``-n/--nproc`` > ``LOCAL_WORLD_SIZE`` > the
  node's GPUs.
* srun(1) (Slurm 23.x) and Open MPI ``mpirun(1)``: the options that take a value.

An option not in a table takes no value, except for torchrun, accelerate, deepspeed and
composer, whose options take one unless they are known flags, written ``--x=v``, or followed
by an option or a ``.py`` script.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = [
    "ACCELERATE_FLAGS",
    "COMPOSER_FLAGS",
    "CONDA_VALUES",
    "DEEPSPEED_FLAGS",
    "MPI_TWO_VALUES",
    "MPI_VALUES",
    "PYTHON_VALUES",
    "SRUN_NAMES",
    "SRUN_VALUES",
    "TORCHRUN_FLAGS",
    "UV_VALUES",
    "integer",
    "options",
    "world_of_composer",
    "world_of_deepspeed",
    "world_of_torchrun",
]

TORCHRUN_FLAGS = frozenset({
    "--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
    "--use-env", "--use_env",
})  # fmt: skip
ACCELERATE_FLAGS = frozenset({
    "--cpu", "--multi_gpu", "--tpu", "--ipex", "--use_xpu", "--use_deepspeed", "--use_fsdp",
    "--use_parallelism_config", "--use_megatron_lm", "-m", "--module", "--no_python", "--debug",
    "-q", "--quiet", "--mps", "--dynamo_use_fullgraph", "--dynamo_use_dynamic",
    "--dynamo_use_regional_compilation", "--same_network", "--tpu_use_cluster",
    "--tpu_use_sudo", "--downcast_bf16", "--enable_cpu_affinity", "-h", "--help",
})  # fmt: skip
DEEPSPEED_FLAGS = frozenset({
    "--no_python", "--module", "--no_local_rank", "--force_multi", "--elastic_training",
    "--bind_cores_to_rank", "--no_ssh_check", "--no_ssh", "--save_pid",
})  # fmt: skip
COMPOSER_FLAGS = frozenset({"-v", "--verbose", "-m", "--module_mode", "-c", "--command_mode"})
SRUN_VALUES = frozenset({
    "-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "-c", "--cpus-per-task", "-G",
    "--gpus", "--gpus-per-node", "--gpus-per-task", "--gres", "--jobid", "-w", "--nodelist",
    "-x", "--exclude", "-p", "--partition", "-A", "--account", "-t", "--time", "-J",
    "--job-name", "-o", "--output", "-e", "--error", "-i", "--input", "--mpi", "--export",
    "--container-image", "--container-mounts", "--container-workdir", "--container-name",
    "--container-env", "--cpu-bind", "--mem", "--mem-per-cpu", "--mem-per-gpu", "-m",
    "--distribution", "-W", "--wait", "--ntasks-per-gpu", "--gpu-bind", "--het-group",
    "--cpus-per-gpu", "--threads-per-core", "-r", "--relative", "-D", "--chdir", "-q", "--qos",
    "--reservation", "--constraint", "-C", "--dependency", "-d", "--signal", "--comment",
    "--network", "--mem-bind", "--open-mode", "--ntasks-per-socket", "--ntasks-per-core",
})  # fmt: skip
SRUN_NAMES = {"-N": "nodes", "-n": "ntasks", "-c": "cpus_per_task", "-G": "gpus",
              "-w": "nodelist", "-D": "chdir", "-J": "job_name", "-p": "partition"}  # fmt: skip
MPI_VALUES = frozenset({
    "-np", "-n", "-c", "-N", "-npernode", "--npernode", "-H", "--host", "-host", "-hostfile",
    "--hostfile", "-machinefile", "--machinefile", "-x", "--map-by", "-map-by", "--bind-to",
    "-bind-to", "--rank-by", "--prefix", "-wdir", "--wdir", "-output-filename",
    "--output-filename", "-ppn", "-hosts",
})  # fmt: skip
MPI_TWO_VALUES = frozenset({"-mca", "--mca", "-gmca", "--gmca", "-genv"})
PYTHON_VALUES = frozenset({"-W", "-X", "--check-hash-based-pycs"})
UV_VALUES = frozenset({
    "--with", "--with-requirements", "--with-editable", "--python", "-p", "--project",
    "--directory", "--package", "--extra", "--group", "--env-file", "--index", "--index-url",
    "--extra-index-url", "--find-links", "-f", "--cache-dir", "--config-file", "--only-group",
    "--no-group",
})  # fmt: skip
CONDA_VALUES = frozenset({"-n", "--name", "-p", "--prefix", "--cwd"})
_NUMBER = re.compile(r"-\d+(\.\d+)?")


def _name(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def options(
    words: Sequence[str],
    start: int,
    *,
    flags: frozenset[str] = frozenset(),
    values: frozenset[str] | None = None,
    two_values: frozenset[str] = frozenset(),
    names: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], int]:
    """Options from ``words[start:]`` up to the first word that is not one (or past ``--``):
    ``name -> value`` (names without dashes, ``-`` as ``_``; ``names`` renames short options;
    flags: ``"true"``) and the index of the first word after them. With ``values``, only
    those options take a value; else every option outside ``flags`` does (module
    docstring)."""
    found: dict[str, str] = {}
    index = start
    while index < len(words):
        word = words[index]
        if word == "--":
            return found, index + 1
        if not word.startswith("-") or word == "-":
            break
        option, equals, value = word.partition("=")
        name = (names or {}).get(option) or _name(option)
        index += 1
        if equals:
            found[name] = value
            continue
        if option in two_values:
            found[name] = " ".join(words[index : index + 2])
            index += 2
            continue
        takes = option in values if values is not None else option not in flags
        following = words[index] if index < len(words) else None
        if (
            takes
            and values is None
            and (
                following is None
                or (following.startswith("-") and not _NUMBER.fullmatch(following))
                or following.endswith(".py")
            )
        ):
            takes = False
        if takes and following is not None:
            found[name] = following
            index += 1
        else:
            found[name] = "true"
    return found, index


def integer(text: str | None) -> int | None:
    """``text`` as a non-negative integer, else None."""
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isdigit() and len(text) < 12 else None


def world_of_torchrun(
    given: Mapping[str, str],
    gpus_per_node: int | None,
    env: Mapping[str, str],
    per_node_nodes: int | None = None,
) -> int | None:
    """Processes torchrun starts: ``nproc_per_node`` (option, else ``PET_NPROC_PER_NODE``;
    ``gpu`` / ``cuda`` / ``auto``: the node's GPUs) times the largest ``nnodes`` (``N`` or
    ``MIN:MAX``; option, else ``PET_NNODES``, else ``per_node_nodes`` when the command runs
    once on every node of the allocation (a Kubernetes pod's container: the pods rendezvous
    as one job), else 1). None when ``nproc_per_node`` is given
    nowhere (torchrun's default of 1 is not assumed: a controller or wrapper often sets it
    where the launch does not show) or a value is not a known number."""
    nproc_text = given.get("nproc_per_node", env.get("PET_NPROC_PER_NODE"))
    if nproc_text is None:
        return None
    nproc = integer(nproc_text)
    if nproc is None and nproc_text in {"gpu", "cuda", "auto"}:
        nproc = gpus_per_node
    fallback = str(per_node_nodes) if per_node_nodes else "1"
    nnodes = integer(given.get("nnodes", env.get("PET_NNODES", fallback)).rpartition(":")[2])
    if nproc is None or nnodes is None:
        return None
    return nproc * nnodes


def world_of_deepspeed(given: Mapping[str, str]) -> int | None:
    """Processes the deepspeed launcher starts: ``--num_gpus`` x ``--num_nodes`` when both are
    given (either one alone depends on the hostfile); None otherwise."""
    gpus, nodes = integer(given.get("num_gpus")), integer(given.get("num_nodes"))
    return gpus * nodes if gpus is not None and nodes is not None else None


def world_of_composer(
    given: Mapping[str, str], gpus_per_node: int | None, env: Mapping[str, str]
) -> int | None:
    """Processes the composer launcher starts in all: ``--world_size``, else ``WORLD_SIZE``,
    else this node's ``nproc`` (``-n``, else ``LOCAL_WORLD_SIZE``, else the node's GPUs)."""
    world = integer(given.get("world_size")) or integer(env.get("WORLD_SIZE"))
    if world is not None:
        return world
    return integer(given.get("nproc")) or integer(env.get("LOCAL_WORLD_SIZE")) or gpus_per_node
