"""SlurmSource against a real Slurm 22.05 cluster started by deploy/dev/slurm-up.sh."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm.source import SlurmSource
from planner.errors import SourceTemporaryError
from planner.specs.job import ClusterSnapshot, JobState, JobStatus

pytestmark = pytest.mark.integration

TIMEOUT_S = 5.0


def wait_for_job(
    source: SlurmSource, job_id: str, status: JobStatus, deadline_s: float = 30.0
) -> tuple[ClusterSnapshot, JobState]:
    end = time.monotonic() + deadline_s
    while True:
        snap = source.snapshot()
        job = next((j for j in snap.jobs if j.job_id == job_id), None)
        if job is not None and job.status is status:
            return snap, job
        if time.monotonic() > end:
            raise AssertionError(f"job {job_id} not {status} within {deadline_s}s: {job}")
        time.sleep(0.5)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)
    return tmp_path


@pytest.fixture
def gpu_job(slurm_stack: Any, workdir: Path) -> Iterator[str]:
    script = workdir / "train.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=itest-gpt\n"
        "#SBATCH --gres=gpu:h100:2\n"
        "#SBATCH --output=logs/%x-%j.out\n"
        f"#SBATCH --comment=planner:scenario={workdir}/scenario.yaml\n"
        "echo pretrain_gpt.py --tensor-model-parallel-size 2\n"
        "sleep 300\n"
    )
    (workdir / "logs").mkdir()
    job_id: str = slurm_stack.sbatch(f"--chdir={workdir}", str(script))
    yield job_id
    slurm_stack.scancel(job_id)


def test_snapshot_sees_a_running_gpu_job(slurm_stack: Any, gpu_job: str, workdir: Path) -> None:
    source = SlurmSource(timeout_s=TIMEOUT_S, env=slurm_stack.env)
    snap, job = wait_for_job(source, gpu_job, JobStatus.RUNNING)
    assert snap.cluster == slurm_stack.cluster
    assert (job.num_gpus, job.gpu_type, job.gpus_allocated) == (2, "h100", True)
    assert job.comment == f"planner:scenario={workdir}/scenario.yaml"
    assert job.command == str(workdir / "train.sbatch")
    assert job.batch_script is not None
    assert "--tensor-model-parallel-size 2" in job.batch_script
    assert job.stdout_path == str(workdir / "logs" / f"itest-gpt-{gpu_job}.out")
    deadline = time.monotonic() + 10
    while not Path(job.stdout_path).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "pretrain_gpt.py" in Path(job.stdout_path).read_text()
    nodes = {n.name: n for n in snap.nodes}
    assert set(nodes) == {"node1", "node2"}
    assert all(n.num_gpus == 8 and n.gpu_type == "h100" for n in nodes.values())
    assert sum(n.num_gpus_allocated for n in nodes.values()) >= 2


def test_pending_and_ended_jobs(slurm_stack: Any, workdir: Path) -> None:
    source = SlurmSource(timeout_s=TIMEOUT_S, env=slurm_stack.env)
    later = slurm_stack.sbatch(
        f"--chdir={workdir}", "--begin=now+1hour", "-N2", "--gpus-per-node=8", "--wrap=sleep 1"
    )
    done = slurm_stack.sbatch(
        f"--chdir={workdir}", "-t", "1", "--gpus=1", "--comment=planner:x", "--wrap=true"
    )
    try:
        _, pending = wait_for_job(source, later, JobStatus.PENDING)
        assert (pending.num_gpus, pending.gpus_allocated, pending.num_nodes) == (16, False, 2)
        assert pending.state_reason == "BeginTime"
        snap, ended = wait_for_job(source, done, JobStatus.COMPLETED)
        assert ended.end_time_s is not None
        assert (ended.num_gpus, ended.gpus_allocated) == (1, True)
        assert ended.stdout_path == str(workdir / f"slurm-{done}.out")
        assert not any("accounting" in w for w in snap.warnings)
    finally:
        slurm_stack.scancel(later)


def test_controller_down_is_temporary_then_recovers(slurm_stack: Any, gpu_job: str) -> None:
    source = SlurmSource(timeout_s=TIMEOUT_S, env=slurm_stack.env)
    wait_for_job(source, gpu_job, JobStatus.RUNNING)
    slurm_stack.stop_slurmctld()
    try:
        start = time.monotonic()
        with pytest.raises(SourceTemporaryError):
            source.snapshot()
        assert time.monotonic() - start < TIMEOUT_S + 3.0
    finally:
        slurm_stack.start_slurmctld()
    _, job = wait_for_job(source, gpu_job, JobStatus.RUNNING)
    assert job.num_gpus == 2
