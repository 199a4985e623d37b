"""Checkpoints, failures and requeues in the scheduler simulation, against hand-computed runs:
a run stopped by an interruption or its time limit keeps the work up to its last checkpoint,
goes back to the queue, and pays the restart overhead when it runs again."""

from __future__ import annotations

import math

import pytest

from planner.capacity.runtime import InterruptionModel
from planner.capacity.stats import summarize
from tests.capacity.helpers import J, by_name, run_fixed, workload

H = 3600.0
RESTART = InterruptionModel(rate_per_gpu_hour=0.0, restart_overhead_s=600.0)


def test_a_failed_run_resumes_from_its_last_checkpoint():
    """10 h of work on 4 GPUs, hourly checkpoints, interrupted 2.5 h in (at 10 GPU-hours of
    its own clock): 2 h saved, 0.5 h lost; it requeues at once (the pool is free), pays the
    10-minute restart and trains the 8 h left: done at 2.5 h + 10 min + 8 h."""
    w = workload([4], [J("a", 4, 10 * H)], interruptions=RESTART)
    out = run_fixed(w, failures=[[4 * 2.5 * H]])
    assert out.finished[0, 0]
    assert out.completion_s[0, 0] == pytest.approx(2.5 * H + 600 + 8 * H)
    assert out.failures[0, 0] == 1
    assert out.lost_gpu_s[0, 0] == pytest.approx(4 * (0.5 * H + 600))
    assert out.run_start_s.tolist() == pytest.approx([0.0, 2.5 * H])


def test_a_time_limit_kill_requeues_and_the_job_finishes():
    """10 h of work, a 4 h limit, hourly checkpoints, requeue on: runs of 4 h (4 h saved), then
    10 min restart + 3 h 50 min (3 h saved), then 10 min + 3 h: done at 11 h 10 min after two
    kills, where a job that is not requeued never finishes."""
    w = workload([4], [J("a", 4, 10 * H, limit=4 * H, requeue=True)], interruptions=RESTART)
    out = run_fixed(w)
    assert out.finished[0, 0]
    assert not out.timed_out[0, 0]
    assert out.limit_kills[0, 0] == 2
    assert out.completion_s[0, 0] == pytest.approx(11 * H + 600)
    once = workload([4], [J("a", 4, 10 * H, limit=4 * H)], interruptions=RESTART)
    killed = run_fixed(once)
    assert killed.timed_out[0, 0]
    assert math.isinf(killed.completion_s[0, 0])


def test_a_requeued_job_waits_behind_higher_priority_work():
    """The pool has 4 GPUs; ``a`` (priority 2) is interrupted at 1 h while ``b`` (priority 1,
    2 h) waits: ``a`` requeues with its priority, so it restarts first; ``b`` runs after."""
    w = workload(
        [4],
        [J("a", 4, 3 * H, priority=2), J("b", 4, 2 * H, priority=1)],
        interruptions=RESTART,
    )
    out = run_fixed(w, failures=[[4 * 1.0 * H]])
    starts = by_name(w, out.start_s[0])
    assert starts == {"a": 0.0, "b": pytest.approx(1 * H + 600 + 2 * H)}
    assert out.wait_s[0, 1] == pytest.approx(3 * H + 600)


def test_a_limit_too_short_to_checkpoint_ends_the_job():
    """A 30-minute limit with hourly checkpoints can never save progress: the job is killed
    once and not requeued forever."""
    w = workload([4], [J("a", 4, 10 * H, limit=0.5 * H, requeue=True)], interruptions=RESTART)
    out = run_fixed(w)
    assert out.timed_out[0, 0]
    assert out.limit_kills[0, 0] == 1


def test_goodput_lost_hours_and_the_cause_of_a_miss():
    """The summary of the time-limit case: 2 kills lose 2 x 10 min of restart on 4 GPUs plus
    50 min of unsaved work; the 11 h 10 min job misses a 10 h deadline because of the limit."""
    w = workload(
        [4], [J("a", 4, 10 * H, limit=4 * H, requeue=True, deadline=10 * H)], interruptions=RESTART
    )
    result = summarize(w, run_fixed(w), "base")
    (job,) = result.jobs
    assert job.miss_probability == 1.0
    assert job.miss_cause == "time limit"
    assert job.limit_kills_mean == 2
    lost_h = 4 * (50 * 60 + 600 + 600) / H  # 3 h 50 min run saved 3 h; two restarts
    assert result.lost_gpu_hours_mean == pytest.approx(lost_h)
    assert result.held_gpu_hours_mean == pytest.approx(4 * (11 * H + 600) / H)
    assert result.goodput == pytest.approx(1 - lost_h / result.held_gpu_hours_mean)
    assert job.runtime_p90_s == pytest.approx(10 * H)
