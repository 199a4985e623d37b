"""The service's queue forecast places pending jobs on the nodes when the source says what each
job asks of and holds on them: the real Slurm adapter replaying a queue recorded from the dev
Slurm (tests/data/slurm/placement/README.md), through one ingest cycle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.slurm.source import CommandResult, SlurmSource
from planner.service.loops.queue_forecast import NODES_FLEET

from .conftest import Clock
from .test_reviews_service import _client, _cycle

PLACEMENT = Path(__file__).parents[1] / "data" / "slurm" / "placement"


def test_a_whole_node_job_waits_for_the_cpu_job_on_its_node(db_url: str) -> None:
    """Job 79 (CPU only, one CPU of node1, 2-min limit, no progress reported) keeps job 80
    (both nodes, exclusive, 16 GPUs) waiting though every GPU is free: 80's forecast start is
    79's limit, not now; 81 and 82 wait for 80, which runs to its 5-min limit."""
    squeue = (PLACEMENT / "squeue_exclusive_pending.json").read_text()
    sinfo = (PLACEMENT / "sinfo_exclusive_pending.json").read_text()
    holder = next(j for j in json.loads(squeue)["jobs"] if j["job_id"] == 79)
    clock = Clock(float(holder["start_time"]) + 10.0)
    limit_end = float(holder["start_time"]) + 120.0

    def runner(argv: Any, timeout_s: float, env: Any) -> CommandResult:
        answer = {"squeue": squeue, "sinfo": sinfo}.get(argv[0].rsplit("/", 1)[-1])
        if answer is not None:
            return CommandResult(0, answer, "")
        return CommandResult(0, "", "job script retrieval failed: Job script not specified\n")

    source = SlurmSource(use_sacct=False, runner=runner, clock=clock)
    forecast = {"place_on_nodes": True}
    with _client(db_url, source, clock, queue_forecast=forecast) as client:  # type: ignore[arg-type]
        _cycle(client)
        made = {j: client.get(f"/v1/jobs/{j}").json()["queue_forecast"] for j in ("80", "81")}
    assert made["80"]["fleet"] == NODES_FLEET
    assert made["80"]["runtime_from"] == "time_limit"
    assert made["80"]["start_s"] == {"p10": limit_end, "p50": limit_end, "p90": limit_end}
    assert made["81"]["start_s"]["p50"] == limit_end + 300.0
