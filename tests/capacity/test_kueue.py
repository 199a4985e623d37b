"""Kueue admission: nominal quota, cohort borrowing and its limit, StrictFIFO vs BestEffortFIFO."""

from __future__ import annotations

import math

from planner.capacity.fleet import SchedulerKind
from tests.capacity.helpers import J, by_name, run_fixed, workload

KUEUE = SchedulerKind.KUEUE


def test_nominal_quota_limits_a_queue_without_cohort():
    """Queue 0 has 4 of the 8 GPUs: its second 4-GPU job waits for the first although 4 GPUs
    are idle (no cohort to borrow from)."""
    w = workload(
        [8],
        [J("a", 4, 10.0, queue=0, priority=2), J("b", 4, 10.0, queue=0, priority=1)],
        scheduler=KUEUE,
        nominal=[[4], [4]],
    )
    starts = by_name(w, run_fixed(w).start_s[0])
    assert starts == {"a": 0.0, "b": 10.0}


def test_cohort_borrowing_uses_idle_quota():
    """In a cohort the queue borrows the other queue's unused 4 GPUs."""
    w = workload(
        [8],
        [J("a", 4, 10.0, queue=0, priority=2), J("b", 4, 10.0, queue=0, priority=1)],
        scheduler=KUEUE,
        nominal=[[4], [4]],
        cohorts=[0, 0],
    )
    assert by_name(w, run_fixed(w).start_s[0]) == {"a": 0.0, "b": 0.0}


def test_borrowing_limit_caps_borrowing():
    """borrowingLimit 2: a 4-GPU job above the nominal quota cannot borrow 4."""
    w = workload(
        [8],
        [J("a", 4, 10.0, queue=0, priority=2), J("b", 4, 10.0, queue=0, priority=1)],
        scheduler=KUEUE,
        nominal=[[4], [4]],
        cohorts=[0, 0],
        borrowing=[[2], [math.inf]],
    )
    assert by_name(w, run_fixed(w).start_s[0]) == {"a": 0.0, "b": 10.0}


def test_workloads_within_nominal_quota_go_before_borrowers():
    """Queue 1's job fits its own quota; queue 0's (higher priority) would have to borrow the
    same GPUs: the non-borrowing workload is admitted first, as Kueue orders them."""
    w = workload(
        [8],
        [
            J("q0-first", 4, 10.0, queue=0, priority=9),
            J("q0-borrow", 4, 10.0, queue=0, priority=5),
            J("q1-own", 4, 10.0, queue=1, priority=1),
        ],
        scheduler=KUEUE,
        nominal=[[4], [4]],
        cohorts=[0, 0],
    )
    starts = by_name(w, run_fixed(w).start_s[0])
    assert starts == {"q0-first": 0.0, "q1-own": 0.0, "q0-borrow": 10.0}


def test_strict_fifo_head_blocks_its_queue():
    """StrictFIFO: the head (8 GPUs, over quota) blocks the small job behind it; with
    BestEffortFIFO the small job goes first."""
    jobs = [J("big", 8, 10.0, queue=0, priority=2), J("small", 2, 5.0, queue=0, priority=1)]
    strict = workload([8], jobs, scheduler=KUEUE, nominal=[[4]], strict=[True])
    assert math.isinf(run_fixed(strict).start_s[0, 1])
    best = workload([8], jobs, scheduler=KUEUE, nominal=[[4]], strict=[False])
    assert run_fixed(best).start_s[0, 1] == 0.0


def test_job_without_queue_uses_physical_capacity_only():
    w = workload([8], [J("a", 8, 10.0, queue=-1)], scheduler=KUEUE, nominal=[[0]])
    assert run_fixed(w).start_s[0, 0] == 0.0
