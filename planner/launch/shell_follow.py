"""What the interpreter does with a command that is not a shell builtin: peel its launchers
(:func:`~planner.launch.shell_launchers.peel`) and record the training program it runs as an
:class:`~planner.launch.types.Invocation` (with the launcher's world size into the
allocation), or follow the shell script it runs (a new shell with the exported variables, the
script's own ``#SBATCH`` lines filling what the batch script did not say), or interpret its
``bash -c`` string. Nothing is executed.
"""

from __future__ import annotations

from dataclasses import replace

from planner.launch.shell_expand import UNKNOWN, known
from planner.launch.shell_interpreter import Frame
from planner.launch.shell_launchers import Context, Peeled, peel
from planner.launch.shell_state import MAX_INVOCATIONS, SCRIPT_SUFFIXES, Stop
from planner.launch.types import Invocation, resolve_path

__all__ = ["run_command"]


def run_command(frame: Frame, words: list[str], prefix: dict[str, str], line: int) -> bool | None:
    """Look at the command ``words`` (with ``prefix`` assignments) at ``line``: record the
    program it runs, or follow the script / ``bash -c`` string it runs. Its exit status is
    not known (None)."""
    shared = frame.shared
    context = Context(
        gpus_per_node=shared.allocation.int("hardware.gpus_per_node"),
        is_script=frame.is_script,
        slurm_tasks=shared.request.tasks(shared.allocation) if shared.slurm else None,
        env=frame.environment(prefix),
        per_node_nodes=shared.per_node_nodes,
    )
    peeled = peel(words, wrapping=frame.wrapping, context=context)
    if peeled.kind == "program":
        record(frame, peeled, prefix, line)
        return None
    if peeled.kind == "script":
        follow(frame, peeled, prefix, line)
        return None
    if peeled.kind == "inline":
        inline(frame, peeled, prefix, line)
        return None
    if peeled.target.endswith(SCRIPT_SUFFIXES) and "/" in peeled.target:
        frame.note(f"{peeled.target} is not among the job's files; not followed")
    return None


def record(frame: Frame, peeled: Peeled, prefix: dict[str, str], line: int) -> None:
    """Add the program of ``peeled`` to the plan (values not known left out) and its
    launcher's process count as ``launch.world_size`` (the first launcher's wins)."""
    shared = frame.shared
    if len(shared.invocations) >= MAX_INVOCATIONS:
        shared.allocation.note(f"interpretation stopped after {MAX_INVOCATIONS} programs")
        raise Stop
    wrapping = peeled.wrapping
    env = frame.environment(prefix)
    env.update(wrapping.env)
    cwd = resolve_path(wrapping.chdir, frame.cwd) if wrapping.chdir else frame.cwd
    launcher = wrapping.launcher or ("python" if peeled.via == "python" else "")
    where = frame.where(line)
    shared.invocations.append(
        Invocation(
            program=known(peeled.target),
            args=tuple(known(arg) for arg in peeled.args),
            env={k: v for k, v in env.items() if UNKNOWN not in v},
            cwd=known(cwd) if cwd is not None else None,
            launcher=launcher,
            launcher_args={k: known(v) for k, v in wrapping.launcher_args.items()},
            where=where,
        )
    )
    if wrapping.world is not None and wrapping.world > 0:
        shared.world(wrapping.world, where)


def follow(frame: Frame, peeled: Peeled, prefix: dict[str, str], line: int) -> None:
    """Interpret the script ``peeled.target`` with its arguments (a new shell); a script whose
    ``#!`` line names Python is a program instead."""
    path, args, wrapping = peeled.target, list(peeled.args), peeled.wrapping
    if not frame.enter(path):
        return
    resolved = resolve_path(path, frame.cwd)
    text = frame.shared.read(resolved)
    if text is None:
        frame.note(f"{path} could not be read; not followed")
        return
    if text.startswith("#!") and "python" in text.partition("\n")[0]:
        record(frame, replace(peeled, kind="program", via="python"), prefix, line)
        return
    label = frame.label(resolved)
    if frame.shared.slurm:
        refresh_slurm(frame, text, label)
    child = frame.child(
        label, path, args, {**prefix, **wrapping.env}, wrapping=replace(wrapping, env={})
    )
    frame.shared.depth += 1
    try:
        child.run_text(text)
    finally:
        frame.shared.depth -= 1


def refresh_slurm(frame: Frame, text: str, label: str) -> None:
    """Read the ``#SBATCH`` lines of a followed script (``label``): options the batch script
    did not give complete the allocation and the ``SLURM_*`` variables."""
    shared = frame.shared
    before = dict(shared.request.options)
    shared.request.read(text, label, [])
    if shared.request.options == before:
        return
    allocation = shared.request.allocation(shared.launch)
    for name, found in allocation.values.items():
        if not shared.allocation.has(name):
            shared.allocation.set(name, found.value, found.source)
    env = shared.request.environment(shared.allocation, shared.launch.work_dir)
    for key, value in env.items():
        if key not in shared.launch.env:
            frame.vars[key] = value
            frame.exported.add(key)


def inline(frame: Frame, peeled: Peeled, prefix: dict[str, str], line: int) -> None:
    """Interpret a ``bash -c`` string (a new shell; its lines count from ``line``)."""
    if not frame.enter("bash -c"):
        return
    name, *args = peeled.args
    wrapping = peeled.wrapping
    child = frame.child(
        frame.source,
        name,
        args,
        {**prefix, **wrapping.env},
        wrapping=replace(wrapping, env={}),
        offset=frame.offset + line - 1,
    )
    frame.shared.depth += 1
    try:
        child.run_text(peeled.target)
    finally:
        frame.shared.depth -= 1
