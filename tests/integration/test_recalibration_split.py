"""End to end on the dev Slurm: compute and network recalibrated apart from a real DDP job.

A real `planner serve` watches the dev Slurm stack while the tiny GPT (PyTorch DDP over gloo,
2 ranks, every rank printing `rank_step` lines) trains. Judged against the job's own measured
timings, which a busy machine does not disturb (its log is the truth the service read):

* the service learns a compute and a network factor for the cluster key;
* put back together on the job's own model breakdown, the two factors give the job's observed
  mean step (the ETA's) and its measured forward/backward window (the slowest rank's compute
  plus the wait for each iteration's slowest rank, from the job's `rank_step` lines);
* a queued 1-GPU job of the same shape (no communication) is predicted with the compute factor
  alone (`calibration.method: components`).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.logs import LogTailer
from planner.calibration.online_split import intervals_from_records, window_share
from planner.specs.job import RankStepRecord, TailCursor
from planner.stragglers.live import WINDOW
from tests.integration.test_end_to_end import (
    ROOT,
    TINY_GPT,
    Service,
    service_env,
    start_service,
    submit_tiny_gpt,
    wait_until,
)
from tests.slurm_stack import SlurmStack, SubmittedJobs

pytestmark = pytest.mark.integration

TRAIN_ITERS = 300


@pytest.fixture(scope="module")
def split_env(slurm_stack: SlurmStack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The service's environment: the stack's Slurm, its own SQLite store."""
    return service_env(slurm_stack, tmp_path_factory, "planner-split-state")


@pytest.fixture(scope="module")
def split_service(
    split_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    svc = start_service(split_env, tmp_path_factory.mktemp("planner-split-log") / "serve.log")
    try:
        yield svc
    finally:
        svc.stop()


def _groups(service: Service) -> dict[tuple[str, str], dict[str, Any]]:
    listing = service.get("/v1/calibrations").json()["online"]["groups"]
    return {(g["component"], g["level"]): g for g in listing}


def _measured_window_share(log: Path) -> float:
    """The window share of the job's last complete intervals, as the service's straggler
    tracker keeps them (its last 20; the first of those only marks where the next begins)."""
    records, _ = LogTailer(tz=UTC).read(TailCursor(path=str(log)))
    intervals = intervals_from_records(r for r in records if isinstance(r, RankStepRecord))
    share = window_share(intervals[-WINDOW + 1 :])
    assert share is not None
    return share


def test_compute_and_network_factors_are_learnt_from_a_real_ddp_job(
    split_service: Service, split_env: dict[str, str], slurm_jobs: SubmittedJobs, tmp_path: Path
) -> None:
    service = split_service
    wait_until("first ingest cycle", 60, lambda: service.get("/readyz").status_code == 200)
    tmp_path.chmod(0o777)
    job_id = slurm_jobs.add(submit_tiny_gpt(split_env, tmp_path, train_iters=TRAIN_ITERS))
    log = tmp_path / f"tiny-gpt-{job_id}.out"

    def learnt() -> dict[tuple[str, str], dict[str, Any]] | None:
        groups = _groups(service)
        return groups if ("network", "key") in groups and ("compute", "key") in groups else None

    wait_until("compute and network factors for the cluster key", 400, learnt, every_s=2)

    def finished() -> dict[str, Any] | None:
        job = service.job(job_id)
        return job if not job["active"] else None

    job = wait_until(f"job {job_id} to finish", 600, finished, every_s=2)
    # the last cycles saw the whole log: what the service learnt is from the job's own timings
    wait_until("a cycle after the job ended", 30, lambda: service.get("/readyz").status_code == 200)
    groups = _groups(service)
    f_c, f_n = groups[("compute", "key")]["factor"], groups[("network", "key")]["factor"]
    b = job["prediction"]["breakdown_s"]
    compute = b["compute"] + b["pp_bubble"] + b["optimizer"]
    network = sum(v for k, v in b.items() if k.endswith("_comm_exposed"))
    observed = job["eta"]["observed_step_time_s"]
    assert f_c * compute + f_n * network == pytest.approx(observed, rel=0.05)
    window = f_c * (b["compute"] + b["pp_bubble"])
    assert window / observed == pytest.approx(_measured_window_share(log), abs=0.02)
    assert 0 < window < observed

    # a queued job of the same shape on one GPU: the compute factor alone
    scenario = yaml.safe_load((TINY_GPT / "scenario.yaml").read_text())
    scenario["hardware"]["num_gpus"] = 1
    scenario["parallelism"].update(data_parallel=1, global_batch_size=4)
    path = tmp_path / "one-gpu.yaml"
    path.write_text(yaml.safe_dump(scenario))
    held = subprocess.run(
        [
            "sbatch", "--parsable", "--hold", "-n", "1", "--gres=gpu:h100:1",
            f"--comment=planner:scenario={path}", f"--chdir={ROOT}",
            f"--wrap={sys.executable} -c pass",
        ],
        env=split_env, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    queued = slurm_jobs.add(held.stdout.strip().split(";")[0])
    pred = wait_until(
        "the queued job's calibrated prediction",
        60,
        lambda: (service.job(queued).get("prediction") or {}).get("calibration"),
    )
    prediction = service.job(queued)["prediction"]
    assert pred["method"] == "components"
    assert prediction["calibrated_iteration_time_s"] == pytest.approx(
        pred["components"]["compute"]["factor"] * prediction["iteration_time_s"], rel=1e-6
    )
