"""What the shell-layer tests share: the launch scripts of ``tests/data/launch/shell/`` in
memory, and short ways to interpret a script or a command line."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from planner.launch.shell import LaunchPlan, plan_from_command, plan_from_launch
from planner.launch.types import Facts, Invocation, Launch, MemoryFiles

DATA = Path(__file__).resolve().parents[1] / "data" / "launch" / "shell"
JOBS = "/jobs"


def job_files(name: str) -> MemoryFiles:
    """The files of ``tests/data/launch/shell/<name>`` under ``/jobs/<name>``."""
    root = DATA / name
    return MemoryFiles(
        files={
            f"{JOBS}/{name}/{path.relative_to(root).as_posix()}": path.read_text(encoding="utf-8")
            for path in root.rglob("*")
            if path.is_file()
        }
    )


def run_job(name: str, **launch: object) -> LaunchPlan:
    files = job_files(name)
    script = files.files[f"{JOBS}/{name}/job.sbatch"]
    return plan_from_launch(
        Launch(batch_script=script, work_dir=f"{JOBS}/{name}", **launch),  # type: ignore[arg-type]
        files,
    )


def run_script(text: str, files: dict[str, str] | None = None, **launch: object) -> LaunchPlan:
    return plan_from_launch(
        Launch(batch_script=text, work_dir="/w", **launch),  # type: ignore[arg-type]
        MemoryFiles(files=dict(files or {})),
    )


def run_command(text: str, files: dict[str, str] | None = None, **env: str) -> LaunchPlan:
    return plan_from_command(
        text, source="cmd", env=env, cwd="/w", files=MemoryFiles(files=dict(files or {}))
    )


def only(plan: LaunchPlan) -> Invocation:
    assert len(plan.invocations) == 1, plan.invocations
    return plan.invocations[0]


def value(facts: Facts, name: str) -> tuple[object, str] | None:
    found = facts.values.get(name)
    return None if found is None else (found.value, found.source)


def timed(run: Callable[[], LaunchPlan]) -> tuple[LaunchPlan, float]:
    """The plan ``run`` makes and the CPU seconds it took (this process, all its threads): the
    work it did, whatever the load of the machine, where the wall clock would stretch with it."""
    start = time.process_time()
    plan = run()
    return plan, time.process_time() - start
