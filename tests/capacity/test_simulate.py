"""The scheduler simulation against cases with known answers: a FIFO pool, Slurm's EASY
backfill, time limits, capacity changes, running jobs, multi-pool jobs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.capacity.helpers import J, by_name, fixed_draws, run_fixed, workload


def test_single_fifo_pool_runs_jobs_back_to_back():
    """Four GPUs, three jobs that each need all four, in priority order: each starts when the
    previous one ends (0, 1, 3) and they finish at 1, 3, 6."""
    w = workload(
        [4], [J("a", 4, 1.0, priority=3), J("b", 4, 2.0, priority=2), J("c", 4, 3.0, priority=1)]
    )
    out = run_fixed(w)
    assert by_name(w, out.start_s[0]) == {"a": 0.0, "b": 1.0, "c": 3.0}
    assert by_name(w, out.completion_s[0]) == {"a": 1.0, "b": 3.0, "c": 6.0}


def test_fifo_packs_jobs_that_fit_side_by_side():
    """Eight GPUs: two 4-GPU jobs run together, the third 8-GPU job waits for both."""
    w = workload(
        [8], [J("a", 4, 5.0, priority=3), J("b", 4, 2.0, priority=2), J("c", 8, 1.0, priority=1)]
    )
    out = run_fixed(w)
    assert by_name(w, out.start_s[0]) == {"a": 0.0, "b": 0.0, "c": 5.0}


def test_backfill_short_job_runs_before_the_reservation():
    """Slurm's backfill documentation, in our words: a high-priority job that does not fit yet
    gets a reservation at the time the running jobs' *time limits* free enough nodes; a
    lower-priority job may start now if it fits in the idle nodes and its own time limit ends
    before that reservation, so it cannot delay the high-priority job.

    Pool of 4 GPUs; a running job holds 2 until its limit at t=100 (it really ends at 50);
    ``big`` (4 GPUs) waits and reserves t=100; ``short`` (2 GPUs, limit 60) is backfilled at 0;
    ``long`` (2 GPUs, limit 200) is not (it would still run at t=100 and delay ``big``)."""
    w = workload(
        [4],
        [
            J("running", 2, 50.0, limit=100.0, started=0.0),
            J("big", 4, 10.0, limit=20.0, priority=3),
            J("short", 2, 40.0, limit=60.0, priority=2),
            J("long", 2, 150.0, limit=200.0, priority=1),
        ],
    )
    out = run_fixed(w)
    starts = by_name(w, out.start_s[0])
    assert starts["short"] == 0.0
    # The running job really ends at 50 and short at 40: big starts at 50, before its
    # reservation at 100, and long only after big (60).
    assert starts["big"] == 50.0
    assert starts["long"] == 60.0


def test_backfill_uses_the_extra_nodes_at_the_reservation():
    """A lower-priority job whose time limit runs past the reservation is still backfilled when
    it fits in the GPUs the reserved job leaves over at the shadow time ("extra" nodes).

    Pool of 8; running job holds 6 until t=100; ``big`` needs 6 (reserves t=100, leaving 2
    extra); ``side`` needs 2 with a long limit: it fits in the extra GPUs, so it starts now;
    ``side2`` (2 more, long limit) does not: the extra GPUs are used up."""
    w = workload(
        [8],
        [
            J("running", 6, 100.0, limit=100.0, started=0.0),
            J("big", 6, 10.0, limit=10.0, priority=3),
            J("side", 2, 500.0, limit=1000.0, priority=2),
            J("side2", 2, 500.0, limit=1000.0, priority=1),
        ],
    )
    starts = by_name(w, run_fixed(w).start_s[0])
    assert starts["side"] == 0.0
    assert starts["big"] == 100.0
    assert starts["side2"] == 110.0


def test_reservations_come_from_time_limits_not_runtimes():
    """The scheduler reserves on the users' time limits, as Slurm does, although jobs end at
    their real runtimes: with a running job whose limit is far away, a long job is backfilled
    in front of the big one (its limit ends before the far reservation) and then delays the
    big job beyond the running job's real end."""
    w = workload(
        [4],
        [
            J("running", 2, 10.0, limit=1000.0, started=0.0),
            J("big", 4, 10.0, limit=10.0, priority=2),
            J("medium", 2, 300.0, limit=500.0, priority=1),
        ],
    )
    starts = by_name(w, run_fixed(w).start_s[0])
    assert starts["medium"] == 0.0
    assert starts["big"] == 300.0  # not 10: the backfilled job holds its GPUs


def test_running_job_without_time_limit_blocks_no_backfill():
    """No time limit on the running job: Slurm cannot reserve (the shadow time is infinite),
    so every lower-priority job that fits starts."""
    w = workload(
        [4],
        [
            J("running", 2, 120.0, started=-600.0),
            J("big", 4, 10.0, limit=10.0, priority=2),
            J("small", 2, 1e4, priority=1),
        ],
    )
    starts = by_name(w, run_fixed(w).start_s[0])
    assert starts["running"] == -600.0
    assert starts["small"] == 0.0
    assert starts["big"] == 1e4


def test_time_limit_kills_the_job():
    """A job that needs 10 s with a 5 s limit is killed at 5: it never completes, and the next
    job starts when it gave its GPUs back."""
    w = workload([4], [J("a", 4, 10.0, limit=5.0, priority=2), J("b", 4, 1.0, priority=1)])
    out = run_fixed(w)
    assert out.timed_out[0].tolist() == [True, False]
    assert math.isinf(out.completion_s[0, 0])
    assert out.release_s[0, 0] == 5.0
    assert out.start_s[0, 1] == 5.0


def test_running_job_limit_counts_from_its_start():
    """A running job that started 8 s ago with a 10 s limit and 5 s to go is killed at 2."""
    w = workload([4], [J("a", 4, 5.0, limit=10.0, started=-8.0)])
    out = run_fixed(w)
    assert out.timed_out[0, 0]
    assert out.release_s[0, 0] == pytest.approx(2.0)


def test_capacity_added_later_starts_the_big_job_then():
    """Two GPUs now, two more at t=50: a 4-GPU job starts at 50."""
    w = workload([2], [J("a", 4, 10.0)], changes=[(50.0, 0, 2)])
    assert run_fixed(w).start_s[0, 0] == 50.0


def test_removed_capacity_drains():
    """Removing busy GPUs drains them: the running job keeps its 4 GPUs; the pool then has 2,
    so the next 4-GPU job never starts."""
    w = workload(
        [4], [J("a", 4, 10.0, priority=2), J("b", 4, 1.0, priority=1)], changes=[(5.0, 0, -2)]
    )
    out = run_fixed(w)
    assert out.completion_s[0, 0] == 10.0
    assert math.isinf(out.start_s[0, 1])


def test_job_waits_for_its_earliest_start():
    """A job eligible at 30 on an idle pool starts at 30."""
    w = workload([8], [J("later", 8, 5.0, at=30.0)])
    assert run_fixed(w).start_s[0, 0] == 30.0


def test_any_gpu_job_starts_on_the_fastest_free_pool():
    """A job eligible on an A100 and an H100 pool, both idle, starts on the H100 pool (faster
    GPU first); when the H100 pool is full it takes the A100 pool."""
    gpus = ("a100-80gb", "h100-sxm")
    w = workload([8, 8], [J("any", 8, 10.0, pool=(0, 1), runs=(20.0, 10.0))], gpus=gpus)
    out = run_fixed(w)
    assert out.option[0, 0] == 1
    assert out.completion_s[0, 0] == 10.0
    busy = workload(
        [8, 8],
        [J("h", 8, 100.0, pool=1, started=0.0), J("any", 8, 10.0, pool=(0, 1), runs=(20.0, 10.0))],
        gpus=gpus,
    )
    out = run_fixed(busy)
    assert out.option[0, 1] == 1  # option index 1 of the workload = the A100 option of "any"
    assert out.completion_s[0, 1] == 20.0


def test_same_input_same_outcome():
    """The simulation is a pure function of the workload and the durations."""
    w = workload(
        [16],
        [J(f"j{i}", 4 + 4 * (i % 3), 10.0 + i, limit=30.0 + i, priority=i % 4) for i in range(30)],
    )
    d = fixed_draws(w)
    from planner.capacity.montecarlo import simulate_workloads

    a = simulate_workloads([w], [d])[0]
    b = simulate_workloads([w], [d])[0]
    np.testing.assert_array_equal(a.start_s, b.start_s)
    assert np.all(a.start_s[0] < np.inf)
