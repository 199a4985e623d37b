"""Batch scripts and command lines -> the training programs they run, and the allocation.

A launch's shell text is interpreted, never run, as bash would read it (a bounded subset:
:mod:`planner.launch.shell_syntax` parses it, :mod:`planner.launch.shell_interpreter` walks it
with :mod:`planner.launch.shell_expand` and :mod:`planner.launch.shell_builtins`, and
:mod:`planner.launch.shell_launchers` peels ``srun`` / ``torchrun`` / ``accelerate`` /
``deepspeed`` / ``composer`` / ``python`` off each command). Wrapper scripts of the job's tree,
``source``d files and ``bash -c`` strings are followed; files the script writes (a heredoc
``cat > ds.json <<EOF``) are kept so readers can read them. The allocation comes from the
scheduler (:class:`~planner.launch.types.Launch`'s counts) and, where it lacks them, the
``#SBATCH`` lines (:mod:`planner.launch.shell_slurm`); the launcher's own process count is
``launch.world_size``.

What cannot be known without running the job (``$(scontrol ...)``, an undecidable ``if``) is
noted in ``LaunchPlan.allocation.notes``; a hostile script ends at the interpreter's bounds with
a note. Nothing here raises for a bad script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.launch.shell_interpreter import Frame, run_guarded
from planner.launch.shell_slurm import SlurmRequest
from planner.launch.shell_state import Shared
from planner.launch.types import Facts, Invocation, Launch, LaunchFiles, MemoryFiles

__all__ = [
    "BATCH_SCRIPT_SOURCE",
    "MANIFEST_SOURCE",
    "LaunchPlan",
    "plan_from_command",
    "plan_from_launch",
    "plan_from_script",
]

BATCH_SCRIPT_SOURCE = "job.sbatch"
"""How the batch script is cited in sources (``job.sbatch:7``)."""
MANIFEST_SOURCE = "job.yaml"
"""How a Kubernetes manifest is cited."""
_UNKNOWN_SLURM = ("SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID", "SLURM_JOBID",
                  "SLURMD_NODENAME", "SLURM_STEP_NODELIST")  # fmt: skip
_UNKNOWN_HOST = ("HOME", "USER", "HOSTNAME", "LOGNAME")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    """What a launch runs.

    ``invocations``: the training programs, in the order the launch runs them (a sweep's
    layouts one after the other); ``allocation``: ``hardware.num_gpus``,
    ``hardware.gpus_per_node``, ``launch.num_nodes`` (the scheduler's values, else the
    ``#SBATCH`` lines) and ``launch.world_size`` (processes the first launcher starts), each
    with its source (``job.sbatch:5``, ``run_train.sh:9``), plus notes on what the
    interpreter could not decide; ``files``: files the script wrote itself, over the job's
    files.
    """

    invocations: tuple[Invocation, ...] = ()
    allocation: Facts = field(default_factory=Facts)
    files: MemoryFiles = field(default_factory=MemoryFiles)


def _top_frame(shared: Shared, source: str, env: Mapping[str, str], cwd: str | None,
               unknown: tuple[str, ...]) -> Frame:  # fmt: skip
    frame = Frame(shared, source, source, cwd=cwd)
    for name, value in env.items():
        frame.vars[name] = value
        frame.exported.add(name)
    for name in unknown:
        if name not in env:
            frame.unknown.add(name)
    return frame


def _plan(shared: Shared) -> LaunchPlan:
    return LaunchPlan(
        invocations=tuple(shared.invocations),
        allocation=shared.allocation,
        files=MemoryFiles(files=dict(shared.written), fallback=shared.files),
    )


def plan_from_script(text: str, *, source: str, launch: Launch, files: LaunchFiles) -> LaunchPlan:
    """Interpret a batch script: ``#SBATCH`` allocation (over which the scheduler's counts in
    ``launch`` win), ``SLURM_*`` variables of node 0 / task 0, ``launch.env`` and
    ``launch.work_dir`` as the starting environment and directory. ``source`` names the
    script in sources."""
    request = SlurmRequest()
    notes: list[str] = []
    request.read(text, source, notes)
    allocation = request.allocation(launch)
    for note in notes:
        allocation.note(note)
    shared = Shared(launch, files, allocation, request, slurm=True)
    env = {**request.environment(allocation, launch.work_dir), **launch.env}
    frame = _top_frame(shared, source, env, launch.work_dir, _UNKNOWN_SLURM + _UNKNOWN_HOST)
    run_guarded(frame, text)
    return _plan(shared)


def plan_from_command(
    text: str,
    *,
    source: str,
    env: Mapping[str, str],
    cwd: str | None,
    files: LaunchFiles,
    allocation: Facts | None = None,
    per_node: bool = False,
) -> LaunchPlan:
    """Interpret a command line (or a container's command and args joined, quoted as a shell
    would need) as a one-line script with ``env`` and ``cwd``. ``allocation``: what the caller
    knows of GPUs and nodes (a Kubernetes job's replicas and resources), kept and completed
    with the launcher's ``launch.world_size``. ``per_node``: the command runs once on every node
    of the allocation (a pod's container), so a launcher naming no node count spans them."""
    facts = Facts()
    if allocation is not None:
        facts.values.update(allocation.values)
        facts.assumed.update(allocation.assumed)
        facts.notes.extend(allocation.notes)
    launch = Launch(command=text, env=dict(env), work_dir=cwd)
    shared = Shared(launch, files, facts, SlurmRequest(), slurm=False)
    if per_node:
        shared.per_node_nodes = facts.int("launch.num_nodes")
    frame = _top_frame(shared, source, env, cwd, _UNKNOWN_HOST)
    run_guarded(frame, text)
    return _plan(shared)


def plan_from_launch(launch: Launch, files: LaunchFiles) -> LaunchPlan:
    """The plan of ``launch``: its batch script, else its command line, else its Kubernetes
    manifest (:func:`planner.launch.kubernetes.plan_from_manifest`); an empty plan (with the
    scheduler's allocation) when it has none."""
    if launch.batch_script is not None:
        return plan_from_script(
            launch.batch_script,
            source=launch.script_name or BATCH_SCRIPT_SOURCE,
            launch=launch,
            files=files,
        )
    if launch.command is not None:
        allocation = SlurmRequest().allocation(launch)
        return plan_from_command(
            launch.command,
            source="command",
            env=launch.env,
            cwd=launch.work_dir,
            files=files,
            allocation=allocation,
            per_node=launch.per_node,
        )
    if launch.manifest:
        from planner.launch.kubernetes import plan_from_manifest  # noqa: PLC0415 (optional)

        return plan_from_manifest(
            launch.manifest, source=MANIFEST_SOURCE, launch=launch, files=files
        )
    return LaunchPlan(
        allocation=SlurmRequest().allocation(launch), files=MemoryFiles(fallback=files)
    )
