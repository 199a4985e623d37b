"""A real planner process (FastAPI app + ingest loop + /metrics under uvicorn) fed by a scripted
scheduler source, for the dashboard and alert tests: ``python -m tests.deploy.planner_feed
--port P --workdir DIR``.

The source reports what a Slurm cluster would: a running job with a scenario, a log with
progress and per-rank timings (rank 2 slow) and a time limit shorter than its predicted run; a
pending job that fits; a pending job predicted to run out of memory; two nodes of 8 H100s.
The service also runs the capacity review of deploy/examples (fleet, plan, what-ifs) once at
start, with those jobs in it. Everything else is the planner's own code path (description,
prediction, ETA, queue forecast, live stragglers, capacity review, metrics collector).
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import time
from pathlib import Path

import uvicorn

from planner.errors import SourcePermanentError
from planner.service.main import create_app
from planner.service.settings import Settings
from planner.specs.job import ClusterSnapshot, JobState, JobStatus, NodeState

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "examples"
TINY_GPT = REPO / "deploy" / "dev" / "tiny_gpt" / "scenario.yaml"
CLUSTER = "feedcluster"
RUNNING_JOB, FITS_JOB, OOM_JOB = "101", "102", "103"
WORLD_SIZE, SLOW_RANK = 4, 2

OOM_SCENARIO = """\
name: llama3-8b-one-gpu
model: {preset: llama3-8b}
hardware: {gpu: h100-sxm, num_gpus: 1}
parallelism: {tensor_parallel: 1, pipeline_parallel: 1, micro_batch_size: 4,
              global_batch_size: 64, precision: bf16}
training: {train_iters: 1000}
"""


def write_log(path: Path, now: float) -> None:
    """Progress lines (JSON ``step`` events) and ``rank_step`` lines of 40 intervals ending now,
    10 iterations each at ~0.06 s; rank 2 computes 1.5x slower from interval 10 on, and the
    job's wall clock with it (every rank waits for it: a phase the straggler explains)."""
    lines = []
    intervals = 40

    def wall(k: int) -> float:  # seconds from the first interval's end to interval k's
        return 0.6 * (min(k, 10) - 1) + 0.9 * max(0, k - 10)

    for k in range(1, intervals + 1):
        t = now - (wall(intervals) - wall(k))
        iteration = 10 * k
        compute = [0.040 + 0.0005 * ((k * 7 + r * 3) % 5) for r in range(WORLD_SIZE)]
        if k >= 10:
            compute[SLOW_RANK] *= 1.5
        step = max(compute) + 0.006
        lines.append(
            json.dumps(
                {
                    "event": "step",
                    "iteration": iteration,
                    "train_iters": 100_000,
                    "step_time_s": step,
                    "num_iterations": 10,
                    "time_s": t,
                    "loss": 7.0 - k * 0.01,
                }
            )
        )
        for r in range(WORLD_SIZE):
            lines.append(
                json.dumps(
                    {
                        "event": "rank_step",
                        "iteration": iteration,
                        "rank": r,
                        "world_size": WORLD_SIZE,
                        "compute_time_s": compute[r],
                        "step_time_s": step,
                        "num_iterations": 10,
                        "node": f"node{r // 2 + 1}",
                        "time_s": t,
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n")


class FeedSource:
    """A ``SchedulerSource`` answering a fixed cluster state (times relative to its start)."""

    scheduler = "slurm"
    name = "slurm"

    def __init__(self, workdir: Path) -> None:
        self.started = time.time()
        self.log = workdir / "train-101.out"
        write_log(self.log, self.started)
        oom = workdir / "oom.yaml"
        oom.write_text(OOM_SCENARIO)
        common = {"scheduler": "slurm", "cluster": CLUSTER, "partition": "gpu", "gpu_type": "h100"}
        self.jobs = (
            JobState(
                **common,
                job_id=RUNNING_JOB,
                name="tiny-gpt",
                # the host user running the feed, in its work directory: the planner reads a
                # job's log as its user may see it, under its working directory
                user=getpass.getuser(),
                work_dir=str(workdir),
                status=JobStatus.RUNNING,
                node_list=("node1", "node2"),
                num_nodes=2,
                num_gpus=2,
                gpus_allocated=True,
                submit_time_s=self.started - 500,
                start_time_s=self.started - 400,
                time_limit_s=600.0,
                stdout_path=str(self.log),
                comment=f"planner:scenario={TINY_GPT}",
            ),
            JobState(
                **common,
                job_id=FITS_JOB,
                name="tiny-gpt-next",
                user="bob",
                status=JobStatus.PENDING,
                num_gpus=2,
                submit_time_s=self.started - 100,
                expected_start_time_s=self.started + 3600,
                comment=f"planner:scenario={TINY_GPT}",
            ),
            JobState(
                **common,
                job_id=OOM_JOB,
                name="llama3-8b-one-gpu",
                user="carol",
                status=JobStatus.PENDING,
                num_gpus=1,
                submit_time_s=self.started - 50,
                comment=f"planner:scenario={oom}",
            ),
        )

    def snapshot(self) -> ClusterSnapshot:
        nodes = tuple(
            NodeState(
                name=f"node{i}",
                state="mixed" if i == 1 else "idle",
                num_gpus=8,
                num_gpus_allocated=2 if i == 1 else 0,
                gpu_type="h100",
                partitions=("gpu",),
            )
            for i in (1, 2)
        )
        return ClusterSnapshot(
            scheduler="slurm", cluster=CLUSTER, taken_at_s=time.time(), jobs=self.jobs, nodes=nodes
        )

    def read_text_file(
        self, path: str, max_bytes: int, *, job: object = None, head: bool = False
    ) -> str:
        try:
            return Path(path).read_bytes()[:max_bytes].decode()
        except OSError as exc:
            raise SourcePermanentError("file", f"{path}: {exc.strerror}") from None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    args.workdir.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        database_url=f"sqlite:///{args.workdir / 'planner.db'}",
        ingest_interval_s=1.0,
        host="127.0.0.1",
        port=args.port,
        review={
            "schedule": "1d",
            "fleet_file": str(EXAMPLES / "fleet.yaml"),
            "plan_file": str(EXAMPLES / "plan.yaml"),
            "what_if_files": [str(EXAMPLES / "what-if-more-h100.yaml")],
            "samples": 20,
            "sizing_samples": 10,
        },
    )
    app = create_app(settings, sources=[FeedSource(args.workdir)])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="info")


if __name__ == "__main__":
    main()
