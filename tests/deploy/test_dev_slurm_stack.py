"""deploy/dev/slurm-up.sh after a stack died without slurm-down.sh (a killed test run).

slurmctld recovers the dead stack's jobs from its StateSaveLocation as still running: they
would hold their GPUs for minutes, until Slurm notices their processes are gone, then be
requeued and run again, so a job that needs the whole cluster (tests/integration/
test_capacity_on_slurm.py) would wait for them. A cold start cancels them. The stack here is
a private one (its own STACK_ROOT, ports and munged, no slurmdbd), so the shared dev cluster
is never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.slurm_stack import DEPLOY, missing_binaries

pytestmark = pytest.mark.integration


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(*offsets: int) -> int:
    """A port ``p`` with ``p + offset`` free for every offset."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + max(offsets) < 65536 and all(_free(port + o) for o in offsets):
            return port
    raise RuntimeError("no free ports on 127.0.0.1")


def _wait(what: str, probe: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if result := probe():
            return result
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


class PrivateStack:
    """A two-node dev cluster of deploy/dev in its own directory and ports."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.script_env = {
            **os.environ,
            "STACK_ROOT": str(root),
            "WITH_SLURMDBD": "0",
            "SLURM_CLUSTER": "coldstart",
            "SLURMCTLD_PORT": str(_free_ports(0)),
            "SLURMD_BASE_PORT": str(_free_ports(0, 10)),
        }
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm" / "etc" / "slurm.conf")}

    def script(self, name: str, *, check: bool = True, **env: str) -> str:
        """Run deploy/dev/NAME on this stack; its log (stderr)."""
        proc = subprocess.run(
            ["bash", str(DEPLOY / name)],
            env={**self.script_env, **env},
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert proc.returncode == 0 or not check, f"{name} failed:\n{proc.stderr[-3000:]}"
        return proc.stderr

    def slurm(self, *argv: str) -> str:
        return subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()

    def state(self, job_id: str) -> str:
        return self.slurm("squeue", "-h", "--states=all", "-j", job_id, "-o", "%T")

    def pid(self, name: str) -> int:
        return int((self.root / "run" / f"{name}.pid").read_text())


@pytest.fixture
def private_stack() -> Iterator[PrivateStack]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm not installed ({', '.join(missing)}): run deploy/dev/install-deps.sh")
    if os.geteuid() != 0:
        pytest.skip("the dev Slurm stack must be started as root (munged/slurmd switch users)")
    # munged needs every parent of its socket traversable by the munge user: not pytest's tmp
    root = Path(tempfile.mkdtemp(prefix="planner-coldstart-", dir="/tmp"))
    root.chmod(0o755)
    stack = PrivateStack(root)
    try:
        yield stack
    finally:
        stack.script("slurm-down.sh", check=False, PURGE="1")
        shutil.rmtree(root, ignore_errors=True)


def test_a_cold_start_cancels_the_jobs_of_a_stack_that_died(private_stack: PrivateStack) -> None:
    stack = private_stack
    stack.script("slurm-up.sh")
    work = stack.root / "work"
    work.mkdir()
    work.chmod(0o755)
    pids = work / "pids"
    running = stack.slurm(
        "sbatch", "--parsable", f"--chdir={work}", "-n", "1", "--gres=gpu:h100:4",
        "--wrap=echo $$ $PPID > pids; exec sleep 900",
    )  # fmt: skip
    later = stack.slurm(
        "sbatch", "--parsable", f"--chdir={work}", "--begin=now+1hour", "-N", "2",
        "--gpus-per-node=8", "--wrap=true",
    )  # fmt: skip
    _wait(f"job {running} to run", lambda: pids.exists() and pids.read_text().strip())
    started = pids.stat().st_mtime
    job_state = stack.root / "slurm" / "state" / "job_state"
    _wait(
        "slurmctld to save the running job's state",
        lambda: job_state.exists() and job_state.stat().st_mtime > started,
    )

    # everything dies at once, as when a test run is killed: no slurm-down.sh
    victims = [stack.pid("slurmctld"), stack.pid("slurmd-node1"), stack.pid("slurmd-node2")]
    victims += [int(p) for p in pids.read_text().split()]  # the job and its slurmstepd
    for pid in victims:
        os.kill(pid, signal.SIGKILL)

    log = stack.script("slurm-up.sh")
    assert "cancelling the jobs of a stack stopped without slurm-down.sh" in log, log
    listed = re.findall(r"^\s*(\d+)\s+root\s", log, re.MULTILINE)
    assert sorted(listed) == sorted([running, later]), log
    assert stack.slurm("squeue", "-h", "-o", "%i") == ""
    assert set(stack.slurm("sinfo", "-h", "-N", "-o", "%T").split()) == {"idle"}

    # the whole cluster is free at once (before the fix: pending on Resources for minutes)
    whole = stack.slurm(
        "sbatch", "--parsable", f"--chdir={work}", "-N", "2", "--ntasks-per-node=1",
        "--gres=gpu:h100:8", "--wrap=true",
    )  # fmt: skip
    _wait(
        f"job {whole} (all 16 GPUs) to start",
        lambda: stack.state(whole) in ("RUNNING", "COMPLETING", "COMPLETED"),
        timeout_s=30,
    )
