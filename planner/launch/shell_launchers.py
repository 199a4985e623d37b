"""Launchers peeled off an expanded command line, down to the training program.

:func:`peel` takes one command's words and unwraps, in any nesting: ``srun``, ``mpirun`` /
``mpiexec``, ``torchrun`` / ``python -m torch.distributed.run|launch``, ``accelerate launch``,
``deepspeed``, ``composer``, ``python[X.Y]``, ``uv run``, ``conda|mamba|micromamba run``,
``poetry|pixi|pipenv run``, ``singularity|apptainer exec``, ``env A=B``, ``exec``, ``time``,
``nohup``, ``nice``, ``numactl``, ``taskset``, ``stdbuf``, ``timeout``. It says whether the
command runs a program (a Python script or module, or a console program: ``tune``, ``nemo``,
``llamafactory-cli``, ``lmf``, ``axolotl``, ``trl``), a shell script to follow, a ``bash -c``
string to interpret, or nothing of interest; with the launcher around the program, its options
and the processes it starts (:mod:`planner.launch.shell_options` has the option tables and
process counts, with their sources).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from planner.launch.readers.automodel_config import parse_run
from planner.launch.shell_options import (
    ACCELERATE_FLAGS,
    COMPOSER_FLAGS,
    CONDA_VALUES,
    DEEPSPEED_FLAGS,
    MPI_TWO_VALUES,
    MPI_VALUES,
    PYTHON_VALUES,
    SRUN_NAMES,
    SRUN_VALUES,
    TORCHRUN_FLAGS,
    UV_VALUES,
    integer,
    options,
    world_of_composer,
    world_of_deepspeed,
    world_of_torchrun,
)
from planner.launch.types import Invocation

__all__ = ["CONSOLE_PROGRAMS", "Context", "Peeled", "Wrapping", "peel"]

CONSOLE_PROGRAMS = frozenset(
    {"tune", "nemo", "llamafactory-cli", "lmf", "axolotl", "trl", "automodel", "am"}
)
"""Console programs kept as the program (their readers read their own arguments)."""

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
_NOT_PROGRAMS = frozenset({
    "pip", "venv", "ensurepip", "json", "http", "site", "timeit", "compileall", "pytest",
    "huggingface_hub", "wandb", "zipfile", "tarfile", "nvitop", "uv", "pdb", "cProfile",
})  # fmt: skip
_TORCHRUN_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
_TRANSPARENT = frozenset({"exec", "time", "nohup", "command", "builtin", "stdbuf", "ionice"})
_WRAPPERS = frozenset({"nice", "timeout", "taskset", "numactl", "sudo", "xargs"})


@dataclass(frozen=True, slots=True)
class Wrapping:
    """What a command sits inside: ``launcher`` (the innermost distributed launcher, else
    ``srun`` / ``mpirun``) with its options, ``tasks`` (processes srun / mpirun start),
    ``env`` (``env A=B``, ``srun --export``), ``chdir`` (``srun --chdir``) and ``world``
    (processes the launcher starts in all, when its options say)."""

    launcher: str = ""
    launcher_args: Mapping[str, str] = field(default_factory=dict)
    tasks: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    chdir: str | None = None
    world: int | None = None


@dataclass(frozen=True, slots=True)
class Peeled:
    """What a command runs. ``kind``: ``program`` (``target`` is the program as the launch
    names it), ``script`` (``target`` is a shell script's path as written), ``inline``
    (``target`` is a ``bash -c`` string; ``args[0]`` is its ``$0``) or ``none``; ``via``:
    ``python`` when an interpreter runs it."""

    kind: str
    target: str = ""
    args: tuple[str, ...] = ()
    wrapping: Wrapping = field(default_factory=Wrapping)
    via: str = ""


@dataclass(frozen=True, slots=True)
class Context:
    """What peeling needs from the interpreter: ``gpus_per_node`` of the allocation (for
    ``--nproc_per_node gpu``, composer's default), ``is_script(path)`` (a shell script of the
    job's tree), ``slurm_tasks`` (what a ``srun`` without task options starts in a batch job),
    ``env`` (the command's environment: ``PET_*``, ``WORLD_SIZE``) and ``per_node_nodes`` (the
    nodes a command runs on once each: a Kubernetes pod's container; None elsewhere)."""

    gpus_per_node: int | None
    is_script: Callable[[str], bool]
    slurm_tasks: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    per_node_nodes: int | None = None


def peel(words: Sequence[str], *, wrapping: Wrapping, context: Context) -> Peeled:
    """Unwrap ``words`` (an expanded command line) down to what it runs (module docstring).
    ``wrapping``: the launchers around it already (a ``srun bash -c`` string's commands)."""
    words = list(words)
    while words:
        head, rest = words[0], words[1:]
        base = posixpath.basename(head)
        if base in _TRANSPARENT:
            words = rest[1:] if base == "time" and rest[:1] == ["-p"] else rest
        elif base == "env":
            wrapping, words = _env(rest, wrapping)
        elif base in _WRAPPERS:
            _, index = options(rest, 0, values=frozenset({"-n", "-s", "-k", "-c", "-u"}))
            if base in {"timeout", "taskset"} and index < len(rest):
                index += 1  # the duration / the CPU list
            words = rest[index:]
        elif base == "srun":
            given, index = options(rest, 0, values=SRUN_VALUES, names=SRUN_NAMES)
            wrapping = _srun(wrapping, given, context.slurm_tasks)
            words = rest[index:]
        elif base in {"mpirun", "mpiexec", "orterun"}:
            given, index = options(rest, 0, values=MPI_VALUES, two_values=MPI_TWO_VALUES)
            tasks = integer(given.get("np") or given.get("n"))
            wrapping = replace(
                wrapping, launcher="mpirun", launcher_args=given, tasks=tasks, world=tasks
            )
            words = rest[index:]
        elif base in {"uv", "poetry", "pixi", "pipenv"} and rest[:1] == ["run"]:
            words = rest[options(rest, 1, values=UV_VALUES)[1] :]
        elif base in {"conda", "mamba", "micromamba"} and rest[:1] == ["run"]:
            words = rest[options(rest, 1, values=CONDA_VALUES)[1] :]
        elif base in {"singularity", "apptainer"} and rest[:1] in (["exec"], ["run"]):
            _, index = options(rest, 1, values=frozenset({"-B", "--bind", "--env", "-W"}))
            words = rest[index + 1 :]  # after the image
        else:
            return _program(head, base, rest, wrapping, context)
    return Peeled("none")


def _program(head: str, base: str, rest: list[str], wrapping: Wrapping, context: Context) -> Peeled:
    """What ``head rest...`` runs once the wrappers are off."""
    if base == "torchrun":
        return _torchrun(rest, wrapping, context)
    if _PYTHON.match(base):
        return _python(rest, wrapping, context)
    if base == "accelerate":
        if rest[:1] != ["launch"]:
            return Peeled("none", head)
        given, index = options(rest, 1, flags=ACCELERATE_FLAGS)
        module = given.pop("m", None) or given.pop("module", None)
        world = integer(given.get("num_processes"))
        wrapped = replace(
            wrapping, launcher="accelerate", launcher_args=given, tasks=None, world=world
        )
        return _script_or_module(rest[index:], wrapped, module is not None, context)
    if base == "deepspeed":
        given, index = options(rest, 0, flags=DEEPSPEED_FLAGS)
        wrapped = replace(
            wrapping,
            launcher="deepspeed",
            launcher_args=given,
            tasks=None,
            world=world_of_deepspeed(given),
        )
        return _script_or_module(rest[index:], wrapped, "module" in given, context)
    if base == "composer":
        given, index = options(rest, 0, flags=COMPOSER_FLAGS)
        if "n" in given:
            given["nproc"] = given.pop("n")
        env = {**context.env, **wrapping.env}
        world = world_of_composer(given, context.gpus_per_node, env)
        wrapped = replace(
            wrapping, launcher="composer", launcher_args=given, tasks=None, world=world
        )
        as_module = "m" in given or "module_mode" in given
        return _script_or_module(rest[index:], wrapped, as_module, context)
    if base in _SHELLS:
        return _shell(rest, wrapping)
    if base in CONSOLE_PROGRAMS:
        return Peeled("program", base, tuple(rest), _console(base, rest, wrapping, context))
    if head.endswith(".py"):
        return Peeled("program", head, tuple(rest), _direct(wrapping))
    if context.is_script(head):
        return Peeled("script", head, tuple(rest), wrapping)
    return Peeled("none", head)


def _env(rest: list[str], wrapping: Wrapping) -> tuple[Wrapping, list[str]]:
    """``env [-u NAME] [A=B ...] command``: the assignments into the command's env."""
    extra = dict(wrapping.env)
    index = 0
    while index < len(rest) and (rest[index].startswith("-") or "=" in rest[index]):
        if rest[index] in {"-u", "--unset", "-C", "--chdir", "-S"}:
            index += 1
        elif "=" in rest[index] and not rest[index].startswith("-"):
            key, _, value = rest[index].partition("=")
            extra[key] = value
        index += 1
    return replace(wrapping, env=extra), rest[index:]


def _srun(wrapping: Wrapping, given: dict[str, str], slurm_tasks: int | None) -> Wrapping:
    """``srun`` options: ``--export`` values into the env, ``--chdir``, and the tasks it
    starts (``-n``, else ``--ntasks-per-node`` x ``-N``, else the job's tasks)."""
    env = dict(wrapping.env)
    for item in given.get("export", "").split(","):
        key, equals, value = item.partition("=")
        if equals and key:
            env[key] = value
    tasks = integer(given.get("ntasks"))
    per_node = integer(given.get("ntasks_per_node"))
    nodes = integer(given.get("nodes", "").partition("-")[0])
    if tasks is None and per_node is not None and nodes is not None:
        tasks = per_node * nodes
    if tasks is None and per_node is None and nodes is None:
        tasks = slurm_tasks
    outer = wrapping.launcher or "srun"
    return replace(
        wrapping,
        launcher=outer,
        launcher_args=given if outer == "srun" else wrapping.launcher_args,
        tasks=tasks if outer == "srun" else None,
        env=env,
        chdir=given.get("chdir") or wrapping.chdir,
    )


def _direct(wrapping: Wrapping) -> Wrapping:
    """A Python program srun / mpirun starts itself: one process per task."""
    if wrapping.launcher in {"srun", "mpirun"} and wrapping.world is None:
        return replace(wrapping, world=wrapping.tasks)
    return wrapping


def _console(base: str, rest: Sequence[str], wrapping: Wrapping, context: Context) -> Wrapping:
    """``tune run [torchrun options] recipe``: torchrun's process count; ``axolotl ...
    --launcher torchrun|accelerate -- OPTIONS``: that launcher's, when the options give it;
    ``automodel <config.yaml> [--nproc-per-node N]``: the torchrun it starts (without N, one
    process per GPU of the node)."""
    if base in {"automodel", "am"}:
        run = parse_run(Invocation(program=base, args=tuple(rest)))
        given = {"nproc_per_node": run.nproc_per_node or "gpu"}
        if run.nnodes:
            given["nnodes"] = run.nnodes
        env = {**context.env, **wrapping.env}
        world = world_of_torchrun(given, context.gpus_per_node, env, context.per_node_nodes)
        return replace(wrapping, world=world)
    if base == "tune" and rest[:1] == ["run"]:
        given, _ = options(rest, 1, flags=TORCHRUN_FLAGS)
        world = world_of_torchrun(given, context.gpus_per_node, context.env, context.per_node_nodes)
        return replace(wrapping, world=world)
    if base == "axolotl" and "--" in rest:
        tail = list(rest[rest.index("--") + 1 :])
        launcher = ""
        for index, word in enumerate(rest):
            if word.startswith("--launcher"):
                following = rest[index + 1] if index + 1 < len(rest) else ""
                launcher = word.partition("=")[2] or following
        if launcher == "torchrun":
            given, _ = options(tail, 0, flags=TORCHRUN_FLAGS)
            if "nproc_per_node" in given:
                world = world_of_torchrun(given, context.gpus_per_node, {}, context.per_node_nodes)
                return replace(wrapping, world=world)
        if launcher == "accelerate":
            given, _ = options(tail, 0, flags=ACCELERATE_FLAGS)
            return replace(wrapping, world=integer(given.get("num_processes")))
    return wrapping


def _torchrun(rest: Sequence[str], wrapping: Wrapping, context: Context) -> Peeled:
    given, index = options(rest, 0, flags=TORCHRUN_FLAGS)
    module = given.pop("m", None) or given.pop("module", None)
    env = {**context.env, **wrapping.env}
    world = world_of_torchrun(given, context.gpus_per_node, env, context.per_node_nodes)
    wrapped = replace(wrapping, launcher="torchrun", launcher_args=given, tasks=None, world=world)
    if "no_python" in given:
        return peel(rest[index:], wrapping=wrapped, context=context)
    return _script_or_module(rest[index:], wrapped, module is not None, context)


def _script_or_module(
    rest: Sequence[str], wrapping: Wrapping, module: bool, context: Context
) -> Peeled:
    """The program a launcher runs: a module (``-m`` given), a shell script of the tree, or a
    Python script."""
    if not rest:
        return Peeled("none")
    if module:
        return Peeled("program", rest[0], tuple(rest[1:]), wrapping, via="python")
    if rest[0] in {"-m", "--module"} and len(rest) > 1:
        return Peeled("program", rest[1], tuple(rest[2:]), wrapping, via="python")
    if not rest[0].endswith(".py") and context.is_script(rest[0]):
        return Peeled("script", rest[0], tuple(rest[1:]), wrapping)
    return Peeled("program", rest[0], tuple(rest[1:]), wrapping, via="python")


def _python(rest: Sequence[str], wrapping: Wrapping, context: Context) -> Peeled:
    """``python [options] (-m module | script.py | -c text) args``."""
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-c", "-"}:
            return Peeled("none", f"python {word}")
        if word.startswith("-m"):
            module = word[2:] or (rest[index + 1] if index + 1 < len(rest) else "")
            after = list(rest[index + (1 if len(word) > 2 else 2) :])
            if module in _TORCHRUN_MODULES:
                return _torchrun(after, wrapping, context)
            if module == "accelerate.commands.launch":
                return peel(["accelerate", "launch", *after], wrapping=wrapping, context=context)
            if module == "deepspeed.launcher.runner":
                return peel(["deepspeed", *after], wrapping=wrapping, context=context)
            if not module or module.split(".")[0] in _NOT_PROGRAMS or module.startswith("torch."):
                return Peeled("none", module)
            return Peeled("program", module, tuple(after), _direct(wrapping), "python")
        if word in PYTHON_VALUES:
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return Peeled("program", word, tuple(rest[index + 1 :]), _direct(wrapping), "python")
    return Peeled("none", "python")


def _shell(rest: Sequence[str], wrapping: Wrapping) -> Peeled:
    """``bash [options] script args`` or ``bash [options] -c text [$0 args]``."""
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}:
            index += 2
        elif word == "--":
            index += 1
        elif word.startswith(("-", "+")) and word != "-":
            if "c" in word[1:] and not word.startswith("--"):
                if index + 1 >= len(rest):
                    return Peeled("none", "sh -c")
                name_and_args = tuple(rest[index + 2 :]) or ("bash",)
                return Peeled("inline", rest[index + 1], name_and_args, wrapping)
            index += 1
        else:
            return Peeled("script", word, tuple(rest[index + 1 :]), wrapping)
    return Peeled("none", "sh")
