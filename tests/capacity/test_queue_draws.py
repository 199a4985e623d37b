"""The pending-queue forecast's draws of the running jobs' ends: jobs of one program on the
same hardware share their quantile, and Slurm backfills only in its backfill cycles (the pooled
model, ``forecast_pending``, and jobs placed on nodes, ``forecast_on_nodes``).

The queue is the replayed dev Slurm's (``benchmarks/review_replay.py``): two copies of one
8-GPU training run hold a 16-GPU partition, a 16-GPU job waits for both, and a 4-GPU job with
a 3-minute limit waits behind it. The recording saw the two copies end within a second of each
other and Slurm start the 16-GPU job at once."""

from __future__ import annotations

import numpy as np
import pytest

from planner.capacity import (
    QueuedJob,
    QueueSnapshot,
    RuntimeBand,
    fleet_from_nodes,
    forecast_pending,
)
from planner.capacity.fleet import Fleet
from planner.capacity.pending import PendingForecast
from planner.capacity.placement import PlacedJob, forecast_on_nodes
from planner.capacity.runtime import share_draws
from planner.specs.job import JobResources, JobState, JobStatus, NodeShare, NodeState

NOW = 1_750_000_000.0


def _job(
    job_id: str,
    gpus: int,
    band: RuntimeBand,
    *,
    running: bool = False,
    limit_s: float | None = None,
    group: str = "",
) -> QueuedJob:
    return QueuedJob(
        state=JobState(
            scheduler="slurm",
            cluster="dev",
            job_id=job_id,
            partition="gpu",
            status=JobStatus.RUNNING if running else JobStatus.PENDING,
            num_gpus=gpus,
            gpu_type="h100",
            start_time_s=NOW - 60 if running else None,
            time_limit_s=limit_s,
        ),
        runtime=band,
        draw_group=group,
    )


def _queue(first: RuntimeBand, second: RuntimeBand, group: str = "") -> QueueSnapshot:
    return QueueSnapshot(
        taken_at_s=NOW,
        jobs=(
            _job("74", 8, first, running=True, group=group),
            _job("75", 8, second, running=True, limit_s=600.0, group=group),
            _job("76", 16, RuntimeBand(p10_s=60, p50_s=60, p90_s=60), limit_s=900.0),
            _job("77", 4, RuntimeBand(p10_s=120, p50_s=120, p90_s=120), limit_s=180.0),
        ),
    )


def _p50(forecast: PendingForecast) -> float:
    p50 = forecast.start_s[1]
    assert p50 is not None
    return p50


def _fleet() -> Fleet:
    return fleet_from_nodes(
        [
            NodeState(name=f"n{i}", state="mixed", num_gpus=8, gpu_type="h100", partitions=("gpu",))
            for i in range(2)
        ]
    )


def test_share_draws_gives_a_group_one_column_and_keeps_the_rest() -> None:
    normals = np.random.default_rng(0).standard_normal((50, 4))
    shared = share_draws(normals, ["a", "", "a", "b"])
    assert np.array_equal(shared[:, 2], normals[:, 0])
    assert np.array_equal(shared[:, [0, 1, 3]], normals[:, [0, 1, 3]])
    assert not np.array_equal(shared, normals)
    with pytest.raises(ValueError, match="3 draw groups for 4 columns"):
        share_draws(normals, ["a", "", "a"])


def test_copies_of_one_run_end_together_and_the_wide_job_goes_first() -> None:
    """Drawn apart, one copy often ends first and the 3-minute job is backfilled into the
    gap, so the 16-GPU job waits for it too; drawn together, both end at one time and the
    16-GPU job starts then, the 4-GPU one after it."""
    band = RuntimeBand(p10_s=80.0, p50_s=100.0, p90_s=125.0)
    rng = np.random.default_rng
    apart = forecast_pending(_fleet(), _queue(band, band), rng=rng(1), samples=200)
    together = forecast_pending(_fleet(), _queue(band, band, "same"), rng=rng(1), samples=200)
    assert _p50(apart["77"]) < _p50(apart["76"])  # backfilled into the gap
    wide, small = together["76"].start_s, together["77"].start_s
    assert wide[0] is not None
    assert wide[2] is not None
    assert small[0] is not None
    assert wide[1] is not None
    assert wide[1] - NOW == pytest.approx(100.0, abs=5.0)
    assert small[0] >= wide[2]  # never before the 16-GPU job


def test_a_gap_shorter_than_the_backfill_cycle_is_not_backfilled() -> None:
    """The copies end 2 s apart. Backfilling at every event starts the 3-minute job in the
    gap and the 16-GPU job waits until it ends (220 s); with Slurm's 30 s ``bf_interval`` a
    backfill cycle falls in those 2 s in one sample of 15, so the 16-GPU job starts at 102 s."""
    first = RuntimeBand(p10_s=100.0, p50_s=100.0, p90_s=100.0)
    second = RuntimeBand(p10_s=102.0, p50_s=102.0, p90_s=102.0)
    rng = np.random.default_rng
    every = forecast_pending(_fleet(), _queue(first, second), rng=rng(3), samples=300)
    cycles = forecast_pending(
        _fleet(), _queue(first, second), rng=rng(3), samples=300, backfill_interval_s=30.0
    )
    assert every["76"].start_s[1] == pytest.approx(NOW + 220.0, abs=1.0)
    assert cycles["76"].start_s[1] == pytest.approx(NOW + 102.0, abs=1.0)
    assert cycles["77"].start_s[1] == pytest.approx(NOW + 162.0, abs=1.0)
    # where a cycle fell in the gap the 4-GPU job started in it, at that cycle's time
    small = cycles["77"].start_s[0]
    assert small is not None
    assert NOW + 100.0 <= small <= NOW + 162.0


def test_the_backfill_cycle_delays_a_backfilled_start_by_at_most_one_interval() -> None:
    """A 2-GPU job that fits beside a running job starts behind a blocked head only in a
    backfill cycle: at a phase drawn uniformly over the interval, never later."""
    hold = RuntimeBand(p10_s=1000.0, p50_s=1000.0, p90_s=1000.0)
    jobs = (
        _job("1", 12, hold, running=True),
        _job("2", 16, RuntimeBand(p10_s=60, p50_s=60, p90_s=60)),
        _job("3", 2, RuntimeBand(p10_s=60, p50_s=60, p90_s=60), limit_s=120.0),
    )
    snapshot = QueueSnapshot(taken_at_s=NOW, jobs=jobs)
    out = forecast_pending(
        _fleet(), snapshot, rng=np.random.default_rng(5), samples=400, backfill_interval_s=30.0
    )["3"].start_s
    assert out[0] is not None
    assert out[1] is not None
    assert out[2] is not None
    assert NOW < out[0] < out[1] < out[2] < NOW + 30.0
    assert out[1] == pytest.approx(NOW + 15.0, abs=3.0)


def _node(name: str, gpus_held: int) -> NodeState:
    return NodeState(
        name=name,
        state="mixed",
        num_gpus=8,
        num_gpus_allocated=gpus_held,
        gpu_type="h100",
        num_cpus=64,
        memory_bytes=512.0 * 1024**3,
        partitions=("gpu",),
        num_cpus_allocated=1 if gpus_held else 0,
        memory_allocated_bytes=0.0,
    )


def _placed(job: QueuedJob, node_ids: tuple[str, ...], *, held: bool) -> PlacedJob:
    gpus = job.state.num_gpus // max(len(node_ids), 1)
    resources = (
        JobResources(
            job_id=job.state.job_id,
            num_nodes=len(node_ids),
            held=tuple(
                NodeShare(node=n, num_cpus=1, memory_bytes=0.0, num_gpus=gpus) for n in node_ids
            ),
        )
        if held
        else JobResources(
            job_id=job.state.job_id,
            num_nodes=len(node_ids),
            gpus_per_node=gpus,
            gpu_type="h100",
            partitions=("gpu",),
        )
    )
    return PlacedJob(
        state=job.state, runtime=job.runtime, resources=resources, draw_group=job.draw_group
    )


def _on_nodes(snapshot: QueueSnapshot) -> list[PlacedJob]:
    where = {"74": ("n1",), "75": ("n2",), "76": ("n1", "n2"), "77": ("n1",)}
    return [_placed(q, where[q.state.job_id], held=q.running) for q in snapshot.jobs]


def test_on_nodes_copies_end_together_and_short_gaps_are_not_backfilled() -> None:
    """The same queue with each job placed on the two 8-GPU nodes: drawn together, the two
    copies free both nodes at once and the 16-GPU job starts first; ends 2 s apart are
    backfilled at every event but, with a 30 s backfill cycle, mostly not."""
    nodes = [_node("n1", 8), _node("n2", 8)]
    band = RuntimeBand(p10_s=80.0, p50_s=100.0, p90_s=125.0)
    rng = np.random.default_rng

    def forecast(snapshot: QueueSnapshot, interval_s: float = 0.0) -> dict[str, PendingForecast]:
        return forecast_on_nodes(
            nodes,
            _on_nodes(snapshot),
            taken_at_s=NOW,
            rng=rng(1),
            samples=200,
            backfill_resolution_s=0.0,
            backfill_interval_s=interval_s,
        )

    apart, together = forecast(_queue(band, band)), forecast(_queue(band, band, "same"))
    assert _p50(apart["77"]) < _p50(apart["76"])
    small, wide = together["77"].start_s[0], together["76"].start_s[2]
    assert small is not None
    assert wide is not None
    assert small >= wide
    first, second = RuntimeBand(p10_s=100, p50_s=100, p90_s=100), fixed_band(102.0)
    assert forecast(_queue(first, second))["76"].start_s[1] == pytest.approx(NOW + 220.0, abs=1.0)
    cycles = forecast(_queue(first, second), 30.0)
    assert cycles["76"].start_s[1] == pytest.approx(NOW + 102.0, abs=1.0)
    assert cycles["77"].start_s[1] == pytest.approx(NOW + 162.0, abs=1.0)


def fixed_band(seconds: float) -> RuntimeBand:
    return RuntimeBand(p10_s=seconds, p50_s=seconds, p90_s=seconds)
