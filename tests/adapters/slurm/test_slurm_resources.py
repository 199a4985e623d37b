"""What active jobs ask of and hold on each node, and what nodes hold, from outputs recorded
from Slurm 22.05.8 (tests/data/slurm/placement/README.md says which command printed each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.slurm.sinfo import parse_sinfo_json
from adapters.slurm.source import CommandResult, SlurmSource
from adapters.slurm.squeue import parse_squeue_records
from planner.errors import SourcePermanentError
from planner.specs.job import JobResources, NodeShare

DATA = Path(__file__).parents[2] / "data" / "slurm"
PLACEMENT = DATA / "placement"
MIB = 1024**2
GIB = 1024**3


def resources(name: str) -> dict[str, JobResources]:
    records = parse_squeue_records((PLACEMENT / name).read_text())
    return {r.job.job_id: r.resources for r in records if r.resources is not None}


def test_a_pending_jobs_request_per_node() -> None:
    found = resources("squeue_exclusive_pending.json")
    assert set(found) == {"79", "80", "81", "82"}  # the active jobs only
    # -N2 --exclusive --gres=gpu:h100:8: two whole nodes with 8 H100 each
    assert found["80"] == JobResources(
        job_id="80",
        num_nodes=2,
        cpus_per_node=1,
        memory_per_node_bytes=1.0 * GIB,  # memory_per_cpu 1024 MiB x 1 CPU
        gpus_per_node=8,
        gpu_type="h100",
        exclusive=True,
        partitions=("debug",),
    )
    # --mem=100G -c 4 --gpus-per-node=2
    mem = found["81"]
    assert (mem.cpus_per_node, mem.memory_per_node_bytes, mem.gpus_per_node) == (4, 100 * GIB, 2)
    assert not mem.exclusive
    assert mem.gpu_type is None
    # --gpus=3 -x node2 --mem-per-cpu=2G -n 2: per-job GPUs on one node, node2 excluded
    per_job = found["82"]
    assert (per_job.cpus_per_node, per_job.memory_per_node_bytes, per_job.gpus_per_node) == (
        2,
        4 * GIB,
        3,
    )
    assert per_job.excluded_nodes == ("node2",)
    assert per_job.required_nodes == ()


def test_a_running_jobs_holding_per_node() -> None:
    held = resources("squeue_exclusive_pending.json")["79"]
    assert held.required_nodes == ("node1",)  # -w node1
    assert held.held == (NodeShare(node="node1", num_cpus=1, memory_bytes=1.0 * GIB),)
    whole = resources("squeue_exclusive_running.json")["80"]
    assert whole.exclusive
    assert whole.held == tuple(
        NodeShare(node=n, num_cpus=64, memory_bytes=64.0 * GIB, num_gpus=8)
        for n in ("node1", "node2")
    )


def test_nodes_report_what_jobs_hold_of_them() -> None:
    nodes = {
        n.name: n
        for n in parse_sinfo_json((PLACEMENT / "sinfo_exclusive_pending.json").read_text())
    }
    assert (nodes["node1"].num_cpus_allocated, nodes["node1"].memory_allocated_bytes) == (1, GIB)
    assert (nodes["node1"].num_gpus_allocated, nodes["node2"].num_cpus_allocated) == (0, 0)
    running = parse_sinfo_json((PLACEMENT / "sinfo_exclusive_running.json").read_text())
    assert [(n.num_cpus_allocated, n.num_gpus_allocated) for n in running] == [(64, 8), (64, 8)]
    assert running[0].memory_allocated_bytes == 65536 * MIB


def test_the_snapshot_carries_the_active_jobs_resources() -> None:
    answers = {
        "squeue": (PLACEMENT / "squeue_exclusive_pending.json").read_text(),
        "sinfo": (PLACEMENT / "sinfo_exclusive_pending.json").read_text(),
    }

    def runner(argv: Any, timeout_s: float, env: Any) -> CommandResult:
        name = argv[0].rsplit("/", 1)[-1]
        if name in answers:
            return CommandResult(0, answers[name], "")
        return CommandResult(0, "", "job script retrieval failed: Job script not specified\n")

    snapshot = SlurmSource(use_sacct=False, runner=runner).snapshot()
    assert sorted(r.job_id for r in snapshot.resources) == ["79", "80", "81", "82"]
    assert {j.job_id for j in snapshot.jobs if j.status.is_active} == {"79", "80", "81", "82"}


def _job(name: str, job_id: int) -> dict[str, Any]:
    doc = json.loads((PLACEMENT / name).read_text())
    return next(j for j in doc["jobs"] if j["job_id"] == job_id)


@pytest.mark.parametrize(
    ("job_id", "change", "field"),
    [
        (80, {"shared": 3}, "jobs[0].shared"),
        (80, {"memory_per_cpu": "lots"}, "jobs[0].memory_per_cpu"),
        (80, {"tres_per_node": "gres:gpu:h100:x"}, "jobs[0].tres_per_node"),
        (80, {"required_nodes": "node[1-"}, "jobs[0].required_nodes"),
        (81, {"memory_per_node": None, "tres_req_str": "cpu=4,mem=lotsG"}, "jobs[0].tres_req_str"),
        (
            79,
            {"job_resources": {"allocated_nodes": [7]}},
            "jobs[0].job_resources.allocated_nodes[0]",
        ),
        (
            79,
            {"job_resources": {"allocated_nodes": [{"nodename": "node1", "sockets": {"0": 1}}]}},
            "jobs[0].job_resources.allocated_nodes[0].sockets.0",
        ),
        (79, {"tres_alloc_str": "cpu=one"}, "jobs[0].tres_alloc_str"),
    ],
)
def test_a_garbled_field_is_named(job_id: int, change: dict[str, Any], field: str) -> None:
    raw = {**_job("squeue_exclusive_pending.json", job_id), **change}
    with pytest.raises(SourcePermanentError) as caught:
        parse_squeue_records(json.dumps({"jobs": [raw]}))
    assert field in str(caught.value)
