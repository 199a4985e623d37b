"""Start and stop the dev Slurm stack (deploy/dev/slurm-up.sh) for integration tests.

A plain module so any test package can reuse it: import ``slurm_stack`` (the fixture) into a
conftest, or call :func:`start_stack` / :func:`stop_stack` directly. The stack is started once
per process; it is stopped at the end of the session only if this process started it.
Tests skip with a clear reason only when the Slurm/munge binaries are not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy" / "dev"
REQUIRED_BINARIES = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "sbatch")
UP_TIMEOUT_S = 240.0


@dataclass(frozen=True, slots=True)
class SlurmStack:
    """A running dev Slurm cluster: ``env`` holds SLURM_CONF (layer it over os.environ)."""

    stack_root: Path
    slurm_conf: Path
    cluster: str
    with_slurmdbd: bool
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self, *argv: str, timeout_s: float = 30.0, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster (raises on non-zero exit when
        ``check``)."""
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **self.env},
            check=check,
        )

    def sbatch(self, *args: str) -> str:
        """Submit with ``sbatch --parsable ARGS``; returns the job id."""
        out = self.run("sbatch", "--parsable", *args).stdout.strip()
        match = re.match(r"^(\d+)", out)
        if match is None:
            raise RuntimeError(f"sbatch printed no job id: {out!r}")
        return match.group(1)

    def scancel(self, *job_ids: str) -> None:
        self.run("scancel", *job_ids)

    def queued(self) -> list[str]:
        """The jobs Slurm still lists (pending, running, completing...), one line each: id,
        name, state, nodes (or why it waits), GRES and working directory."""
        out = self.run("squeue", "-h", "-o", "%i %j %T %R %b %Z").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def busy_nodes(self) -> list[str]:
        """The nodes that are not idle, one line each: name, state and Slurm's reason."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T %E").stdout
        lines = [line.split(maxsplit=2) for line in out.splitlines() if line.strip()]
        return [" ".join(f) for f in lines if len(f) < 2 or f[1] != "idle"]

    def wait_until_idle(self, why: str, timeout_s: float = 120.0) -> None:
        """Wait until no job is queued and every node is idle, for a test that needs the whole
        cluster (``why``); fails naming the jobs and nodes that still hold it."""
        deadline = time.monotonic() + timeout_s
        while True:
            jobs, nodes = self.queued(), self.busy_nodes()
            if not jobs and not nodes:
                return
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the dev cluster is not idle after {timeout_s:.0f} s, {why}; left by an "
                    "earlier test or run:\n  jobs (id name state nodes/reason gres workdir): "
                    + ("\n    ".join(["", *jobs]) if jobs else "none")
                    + "\n  nodes not idle (name state reason): "
                    + ("\n    ".join(["", *nodes]) if nodes else "none")
                )
            time.sleep(1.0)

    def stop_slurmctld(self) -> None:
        """Stop only slurmctld (fault injection); :meth:`start_slurmctld` brings it back."""
        _script("slurmctld-stop.sh", self._script_env())

    def start_slurmctld(self) -> None:
        _script("slurmctld-start.sh", self._script_env())

    def _script_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "STACK_ROOT": str(self.stack_root),
            "WITH_SLURMDBD": "1" if self.with_slurmdbd else "0",
        }


@dataclass(slots=True)
class SubmittedJobs:
    """The jobs one test submitted (:meth:`add` each id); the ``slurm_jobs`` fixture cancels
    them when the test ends, passed or failed, so none holds GPUs in a later test."""

    stack: SlurmStack
    ids: list[str] = field(default_factory=list)

    def add(self, job_id: str) -> str:
        self.ids.append(job_id)
        return job_id

    def cancel(self) -> None:
        """scancel every job added (ended ones are ignored by Slurm)."""
        if self.ids:
            self.stack.run("scancel", *self.ids, check=False)


def missing_binaries() -> list[str]:
    """The Slurm/munge programs this machine lacks (empty when the stack can run)."""
    return [b for b in REQUIRED_BINARIES if not (os.path.exists(b) or shutil.which(b))]


def _script(name: str, env: dict[str, str], timeout_s: float = UP_TIMEOUT_S) -> str:
    proc = subprocess.run(
        ["bash", str(DEPLOY / name)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stderr


def _controller_up(env: dict[str, str]) -> bool:
    try:
        proc = subprocess.run(
            ["scontrol", "ping"], capture_output=True, text=True, timeout=15, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "is UP" in proc.stdout


_started: dict[str, SlurmStack] = {}
_owned: set[str] = set()


def start_stack(*, stack_root: str | None = None, with_slurmdbd: bool = True) -> SlurmStack:
    """Start the stack (idempotent) and return it; raises RuntimeError when it fails to start.

    ``stack_root`` defaults to $STACK_ROOT or /tmp/planner-dev-stack.
    """
    root = Path(stack_root or os.environ.get("STACK_ROOT") or "/tmp/planner-dev-stack")
    key = str(root)
    if key in _started:
        return _started[key]
    conf = root / "slurm" / "etc" / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    already_up = conf.exists() and _controller_up(env)
    script_env = {**os.environ, "STACK_ROOT": key, "WITH_SLURMDBD": "1" if with_slurmdbd else "0"}
    _script("slurm-up.sh", script_env)
    if not already_up:
        _owned.add(key)
    match = re.search(r"^ClusterName=(\S+)", conf.read_text(), re.MULTILINE)
    stack = SlurmStack(
        stack_root=root,
        slurm_conf=conf,
        cluster=match.group(1) if match else "",
        with_slurmdbd=with_slurmdbd,
        env={"SLURM_CONF": str(conf)},
    )
    _started[key] = stack
    return stack


def stop_stack(stack: SlurmStack, *, purge: bool = False) -> None:
    """Stop the stack (``slurm-down.sh``; ``purge`` wipes its state)."""
    env = {**stack._script_env(), "PURGE": "1" if purge else "0"}
    _script("slurm-down.sh", env)
    _started.pop(str(stack.stack_root), None)
    _owned.discard(str(stack.stack_root))


@pytest.fixture(scope="session")
def slurm_stack() -> Iterator[SlurmStack]:
    """Session fixture: a running dev Slurm cluster with accounting (slurmdbd).

    Skips when the Slurm/munge binaries are not installed (``deploy/dev/install-deps.sh``) or
    the tests do not run as root; fails when they are present but the stack does not start.
    """
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"Slurm not installed ({', '.join(missing)} missing): run deploy/dev/install-deps.sh"
        )
    if os.geteuid() != 0:
        pytest.skip("the dev Slurm stack must be started as root (munged/slurmd switch users)")
    stack = start_stack()
    owned = str(stack.stack_root) in _owned
    yield stack
    if owned:
        stop_stack(stack)


@pytest.fixture
def slurm_jobs(slurm_stack: SlurmStack) -> Iterator[SubmittedJobs]:
    """The jobs a test submits to the dev cluster (``slurm_jobs.add(job_id)``), cancelled when
    the test ends."""
    jobs = SubmittedJobs(slurm_stack)
    try:
        yield jobs
    finally:
        jobs.cancel()
