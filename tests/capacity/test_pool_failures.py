"""A pool's own interruption rate: a fleet pool may give ``interruptions_per_gpu_hour`` (GPUs or
nodes that fail more or less often than the fleet's default); its jobs are interrupted at that
rate, and the review names the pool and where the rate came from."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from planner.capacity import read_fleet
from planner.capacity.build import build_workload
from planner.capacity.documents import DocumentError
from planner.capacity.montecarlo import draw_durations, draw_normals, simulate_workloads
from planner.capacity.review import run_review
from planner.capacity.runtime import InterruptionModel, RuntimeBand
from planner.capacity.snapshot import QueueSnapshot
from tests.capacity.helpers import J, queued, run_fixed, workload

H = 3600.0
FLEET = """
interruptions_per_gpu_hour: 0.001
pools:
  - {name: steady, gpu: h100-sxm, num_gpus: 8}
  - {name: flaky, gpu: h100-sxm, num_gpus: 8, interruptions_per_gpu_hour: 0.002}
"""


def test_a_run_in_a_pool_of_half_the_rate_fails_half_as_often() -> None:
    """Two pools of 4 GPUs, the first at twice the second's rate (failures are drawn at the
    highest rate, on each job's own clock). Each job is interrupted at 9 GPU-hours of that
    clock, 10 h of work, hourly checkpoints: ``a`` (first pool) at 2.25 h, keeping 2 h; ``b``
    (second pool, its clock at half speed) at 4.5 h, keeping 4 h. Each pays the 10-minute
    restart and trains what is left."""
    base = workload(
        [4, 4],
        [J("a", 4, 10 * H, pool=0), J("b", 4, 10 * H, pool=1)],
        interruptions=InterruptionModel(rate_per_gpu_hour=1e-3, restart_overhead_s=600.0),
    )
    w = dataclasses.replace(base, pool_interruption_rate=np.array([2e-3, 1e-3]))
    assert w.failure_rate_per_gpu_hour == 2e-3
    assert w.failure_scale.tolist() == [1.0, 0.5]
    out = run_fixed(w, failures=[[9 * H], [9 * H]])
    assert out.failures[0].tolist() == [1, 1]
    assert out.completion_s[0].tolist() == pytest.approx(
        [2.25 * H + 600 + 8 * H, 4.5 * H + 600 + 6 * H]
    )
    assert out.lost_gpu_s[0].tolist() == pytest.approx([4 * (0.25 * H + 600), 4 * (0.5 * H + 600)])


def test_a_pool_of_no_interruptions_never_fails() -> None:
    """A pool at rate 0 beside one at the fleet's rate: the same drawn interruption stops the
    job in the other pool only."""
    base = workload(
        [4, 4],
        [J("a", 4, 10 * H, pool=0), J("b", 4, 10 * H, pool=1)],
        interruptions=InterruptionModel(rate_per_gpu_hour=1e-3, restart_overhead_s=600.0),
    )
    w = dataclasses.replace(base, pool_interruption_rate=np.array([1e-3, 0.0]))
    out = run_fixed(w, failures=[[9 * H], [9 * H]])
    assert out.failures[0].tolist() == [1, 0]
    assert out.completion_s[0, 1] == pytest.approx(10 * H)


def test_the_fleet_file_gives_a_pool_its_rate_and_the_review_names_it() -> None:
    fleet = read_fleet(FLEET, "fleet.yaml")
    assert [p.interruptions_per_gpu_hour for p in fleet.pools] == [None, 0.002]
    w = build_workload(fleet, (), None, start_s=0.0)
    assert w.pool_interruption_rate.tolist() == [0.001, 0.002]
    review = run_review(fleet, start_s=0.0, samples=1, rng=np.random.default_rng(0), sizing=False)
    assert "pools with their own rate (the pool's interruptions_per_gpu_hour in the fleet " in (
        review.model_note
    )
    assert "file): flaky 0.002" in review.model_note


def test_a_negative_pool_rate_is_reported_with_its_field() -> None:
    with pytest.raises(DocumentError, match=r"interruptions_per_gpu_hour: must be >= 0"):
        read_fleet(FLEET.replace("0.002", "-1"), "fleet.yaml")


def test_only_the_jobs_of_a_pool_with_interruptions_are_interrupted() -> None:
    """The fleet turns interruptions off; one pool has its own rate of one per 100 GPU-hours.
    A 100-hour job of 8 GPUs there is interrupted in every one of 20 samples (8 expected per
    run), the same job in the other pool never."""
    fleet = read_fleet(
        FLEET.replace("interruptions_per_gpu_hour: 0.001", "interruptions_per_gpu_hour: 0").replace(
            "0.002", "0.01"
        ),
        "fleet.yaml",
    )
    band = RuntimeBand(p10_s=100 * H, p50_s=100 * H, p90_s=100 * H)
    jobs = (queued("1", "steady", band), queued("2", "flaky", band))
    w = build_workload(fleet, (), QueueSnapshot(taken_at_s=0.0, jobs=jobs), start_s=0.0)
    rng = np.random.default_rng(0)
    draws = draw_durations(w, draw_normals(w.job_names, 20, rng), rng)
    out = simulate_workloads([w], [draws])[0]
    assert (out.failures[:, w.job_index("1")] == 0).all()
    assert (out.failures[:, w.job_index("2")] > 0).all()
