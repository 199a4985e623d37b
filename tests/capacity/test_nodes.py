"""Reviews place jobs on whole nodes: a job waits while the pool has the GPUs it asks for but
no node has its share free (fragmentation, nodes held by CPU-only jobs), where the pooled
model starts it at once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.capacity import read_fleet
from planner.capacity.build import build_workload
from planner.capacity.documents import DocumentError
from planner.capacity.fleet import Fleet, Placement, Pool
from planner.capacity.montecarlo import draw_durations, draw_normals, simulate_workloads
from planner.capacity.nodes import request
from planner.capacity.runtime import InterruptionModel, RuntimeBand
from planner.capacity.snapshot import QueuedJob, QueueSnapshot
from planner.capacity.workload import Workload
from planner.specs.job import JobStatus
from tests.capacity.helpers import J, queued, run_fixed, workload

HOUR = 3600.0


def _job(
    job_id: str, status: JobStatus, num_gpus: int, run_s: float, *, num_nodes: int = 0
) -> QueuedJob:
    band = RuntimeBand(p10_s=run_s, p50_s=run_s, p90_s=run_s)
    return queued(
        job_id, "gpu", band, num_gpus=num_gpus, time_limit_s=2 * run_s, status=status,
        num_nodes=num_nodes,
    )  # fmt: skip


def _starts(jobs: tuple[QueuedJob, ...], placement: Placement, num_gpus: int = 16) -> Workload:
    fleet = Fleet(
        pools=(Pool(name="h100", gpu="h100-sxm", num_gpus=num_gpus, partitions=("gpu",)),),
        interruptions=InterruptionModel(rate_per_gpu_hour=0.0),
        placement=placement,
    )
    return build_workload(fleet, (), QueueSnapshot(taken_at_s=0.0, jobs=jobs), start_s=0.0)


def _start_s(w: Workload, name: str) -> float:
    rng = np.random.default_rng(0)
    draws = draw_durations(w, draw_normals(w.job_names, 4, rng), rng)
    out = simulate_workloads([w], [draws])[0]
    starts = out.start_s[:, w.job_index(name)]
    assert np.all(starts == starts[0])  # fixed runtimes: every sample alike
    return float(starts[0])


def test_fragmented_nodes_make_a_job_wait():
    """Two nodes of 8 H100; a running job holds 4 GPUs on each (8 GPUs on 2 nodes). A pending
    job of 8 GPUs needs one whole node: the pool has 8 GPUs free, no node has 8, so it waits
    for the running job to end at 5 h. The pooled model starts it at once."""
    jobs = (
        _job("1", JobStatus.RUNNING, 8, 5 * HOUR, num_nodes=2),
        _job("2", JobStatus.PENDING, 8, HOUR),
    )
    assert _start_s(_starts(jobs, Placement.NODES), "2") == pytest.approx(5 * HOUR)
    assert _start_s(_starts(jobs, Placement.GPUS), "2") == 0.0


def test_a_cpu_only_job_holds_its_node():
    """A CPU-only job (no GPUs, one node) runs on the GPU partition for 3 h: a pending job of
    all 16 GPUs waits for it, though no GPU is in use; a job of 8 starts on the other node."""
    jobs = (
        _job("cpu", JobStatus.RUNNING, 0, 3 * HOUR, num_nodes=1),
        _job("all", JobStatus.PENDING, 16, HOUR),
        _job("half", JobStatus.PENDING, 8, HOUR),
    )
    w = _starts(jobs, Placement.NODES)
    assert _start_s(w, "all") == pytest.approx(3 * HOUR)
    assert _start_s(w, "half") == 0.0
    assert _start_s(_starts(jobs, Placement.GPUS), "all") == 0.0


def test_small_jobs_are_packed_to_keep_whole_nodes_free():
    """Best fit. Two nodes of 8, full: one job of 8 GPUs ends at 1 h (node 0), on node 1 one
    of 6 GPUs runs to 5 h and one of 2 ends at 1 h. At 1 h a 2-GPU job takes the 2 GPUs left
    on node 1, so the 8-GPU job behind it gets node 0 at once; taken in node order, the small
    job would split node 0 and the 8-GPU job would wait for it (until 2 h)."""
    jobs = (
        _job("r8", JobStatus.RUNNING, 8, HOUR),
        _job("r6", JobStatus.RUNNING, 6, 5 * HOUR),
        _job("r2", JobStatus.RUNNING, 2, HOUR),
        _job("small", JobStatus.PENDING, 2, HOUR),
        _job("whole", JobStatus.PENDING, 8, HOUR),
    )
    w = _starts(jobs, Placement.NODES)
    assert _start_s(w, "small") == pytest.approx(HOUR)
    assert _start_s(w, "whole") == pytest.approx(HOUR)


def test_backfill_on_nodes_keeps_the_head_reservation():
    """Three nodes of 8. A running job holds 4 GPUs on each of two nodes until 4 h (its limit:
    8 h). The head needs all three nodes: its reservation is at 8 h on every node. A later
    8-GPU job whose limit (10 h) runs past the reservation would delay it and waits; one whose
    limit ends before it (1 h) is backfilled on the whole node at once. The head starts when
    the running job really ends, the long job after the head."""
    jobs = (
        _job("run", JobStatus.RUNNING, 8, 4 * HOUR, num_nodes=2),
        _job("head", JobStatus.PENDING, 24, HOUR),
        _job("long", JobStatus.PENDING, 8, 5 * HOUR),
        _job("short", JobStatus.PENDING, 8, 0.5 * HOUR),
    )
    w = _starts(jobs, Placement.NODES, num_gpus=24)
    assert _start_s(w, "short") == 0.0
    assert _start_s(w, "head") == pytest.approx(4 * HOUR)
    assert _start_s(w, "long") == pytest.approx(5 * HOUR)


def test_request_shapes():
    assert request(16, 8) == (2, 8)
    assert request(4, 8) == (1, 4)
    assert request(8, 8, num_nodes=2) == (2, 4)
    assert request(12, 8) == (2, 6)
    assert request(0, 8, num_nodes=1) == (1, 8)


def test_fleet_placement_field():
    fleet = read_fleet("pools: [{name: a, gpu: h100-sxm, num_gpus: 8}]\n", "fleet.yaml")
    assert fleet.placement is Placement.NODES
    pooled = read_fleet(
        "placement: gpus\npools: [{name: a, gpu: h100-sxm, num_gpus: 8}]\n", "fleet.yaml"
    )
    assert pooled.placement is Placement.GPUS
    with pytest.raises(DocumentError, match=r"f.yaml:1: placement: must be nodes"):
        read_fleet("placement: node\npools: [{name: a, gpu: h100-sxm, num_gpus: 8}]\n", "f.yaml")


def test_a_cpu_only_job_off_the_gpu_partitions_is_left_out_quietly():
    """A CPU-only job on a partition no pool takes is no part of the review (not a job that
    "cannot run"), while a GPU job there is reported as left out."""
    band = RuntimeBand(p10_s=HOUR, p50_s=HOUR, p90_s=HOUR)
    cpu = queued("9", "cpu", band, num_gpus=0, num_nodes=4, status=JobStatus.RUNNING)
    gpu = queued("10", "cpu", band)
    w = _starts((cpu, gpu), Placement.NODES)
    assert w.num_jobs == 0
    assert [name for name, _ in w.excluded] == ["10"]


def test_whole_node_jobs_start_as_in_the_pooled_model():
    """When every job takes whole nodes and capacity changes by whole nodes, a pool's free
    GPUs are all on idle nodes, so the node model starts every job exactly when the pooled
    model does (random queues: sizes, limits, arrivals, capacity changes, requeues after
    time-limit kills, two pools and jobs that may use either; today's running jobs, one node
    each, within the pools)."""
    rng = np.random.default_rng(11)
    for _ in range(25):
        jobs = []
        for i in range(int(rng.integers(5, 30))):
            run = float(rng.uniform(1, 50))
            limit = run * float(rng.choice([0.7, 1.5, 3.0])) if rng.random() < 0.8 else np.inf
            running = i < 3
            jobs.append(
                J(
                    f"j{i}",
                    8 if running else 8 * int(rng.integers(1, 5)),
                    run,
                    limit=limit,
                    at=0.0 if running else float(rng.uniform(0, 40)),
                    priority=float(rng.integers(0, 4)),
                    pool=i % 2 if running or rng.random() > 0.2 else [0, 1],
                    started=-float(rng.uniform(0, 5)) if running else None,
                    requeue=bool(rng.random() < 0.5),
                    checkpoint=5.0,
                )
            )
        pooled = workload([32, 24], jobs, changes=[(20.0, 0, 16), (30.0, 1, -8)])
        on_nodes = dataclasses.replace(pooled, pool_nodes=np.ones(2, np.bool_))
        a, b = run_fixed(pooled), run_fixed(on_nodes)
        np.testing.assert_array_equal(a.start_s, b.start_s)
        np.testing.assert_array_equal(a.completion_s, b.completion_s)
