"""Kueue admission: nominal quota, cohort borrowing and its limit, StrictFIFO vs BestEffortFIFO."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from planner.capacity import DocumentError, read_fleet
from planner.capacity.fleet import Preemption, PreemptionPolicy, SchedulerKind
from planner.capacity.stats import summarize
from planner.capacity.tables import team_table
from planner.capacity.workload import Workload
from planner.errors import SpecError
from tests.capacity.helpers import NO_INTERRUPTIONS, J, by_name, run_fixed, workload

KUEUE = SchedulerKind.KUEUE


@dataclass(frozen=True)
class Named:
    """One sample's per-job values by job name."""

    start: dict[str, float]
    release: dict[str, float]
    preemptions: dict[str, int]
    preempted_gpu_s: dict[str, float]
    lost_gpu_s: dict[str, float]


def named(w: Workload) -> Named:
    """Simulate one fixed sample of ``w`` (``run_fixed``) and key its values by job name."""
    out = run_fixed(w)
    return Named(
        start=by_name(w, out.start_s[0]),
        release=by_name(w, out.release_s[0]),
        preemptions={n: int(v) for n, v in by_name(w, out.preemptions[0]).items()},
        preempted_gpu_s=by_name(w, out.preempted_gpu_s[0]),
        lost_gpu_s=by_name(w, out.lost_gpu_s[0]),
    )


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


# Preemption (spec.preemption). Two queues of 4 GPUs each in one cohort of 8: a low-priority
# job of queue 1 borrows queue 0's idle quota; an hour later a high-priority job of queue 0
# asks for its nominal 4 GPUs back.
HOUR = 3600.0
RESTART_S = NO_INTERRUPTIONS.restart_overhead_s


def _reclaim(policy: PreemptionPolicy, *, borrower_priority: float = 1.0) -> Named:
    w = workload(
        [8],
        [
            J("borrower", 8, 100 * HOUR, queue=1, priority=borrower_priority, checkpoint=1000.0),
            J("owner", 4, 10 * HOUR, queue=0, priority=5, at=HOUR),
        ],
        scheduler=KUEUE,
        nominal=[[4], [4]],
        cohorts=[0, 0],
        preemption=[Preemption(reclaim_within_cohort=policy), Preemption()],
    )
    return named(w)


def test_reclaim_within_cohort_any_evicts_the_borrower_at_once():
    """reclaimWithinCohort Any: the owner starts the moment it arrives; the borrower loses
    the work since its last checkpoint (600 s of 3,600 at a 1,000 s interval) and the restart
    of its next run, requeues, and runs again when the owner is done."""
    out = _reclaim(PreemptionPolicy.ANY)
    assert out.start["owner"] == HOUR
    assert out.preemptions == {"borrower": 1, "owner": 0}
    lost = 8 * (600.0 + RESTART_S)
    assert out.preempted_gpu_s["borrower"] == pytest.approx(lost)
    assert out.lost_gpu_s["borrower"] == pytest.approx(lost)
    saved = 3000.0  # three whole checkpoints of its first hour
    assert out.release["borrower"] == pytest.approx(11 * HOUR + RESTART_S + 100 * HOUR - saved)


def test_reclaim_within_cohort_lower_priority_evicts_only_lower_priority():
    assert _reclaim(PreemptionPolicy.LOWER_PRIORITY).start["owner"] == HOUR
    same = _reclaim(PreemptionPolicy.LOWER_PRIORITY, borrower_priority=5)
    assert same.start["owner"] == 100 * HOUR  # waits for the equal-priority borrower
    assert same.preemptions["borrower"] == 0


def test_reclaim_within_cohort_never_waits_for_the_borrower():
    """Kueue's default: the owner waits until the borrower ends."""
    out = _reclaim(PreemptionPolicy.NEVER)
    assert out.start["owner"] == 100 * HOUR
    assert out.preemptions == {"borrower": 0, "owner": 0}


def _within(policy: PreemptionPolicy, *, low_priority: float = 1.0) -> Named:
    w = workload(
        [8],
        [
            J("low", 8, 100 * HOUR, queue=0, priority=low_priority),
            J("high", 8, 10 * HOUR, queue=0, priority=5, at=HOUR),
        ],
        scheduler=KUEUE,
        nominal=[[8]],
        preemption=[Preemption(within_cluster_queue=policy)],
    )
    return named(w)


def test_within_cluster_queue_lower_priority_evicts_a_lower_priority_job_of_the_queue():
    out = _within(PreemptionPolicy.LOWER_PRIORITY)
    assert out.start["high"] == HOUR
    assert out.preemptions == {"low": 1, "high": 0}
    never = _within(PreemptionPolicy.NEVER)
    assert never.start["high"] == 100 * HOUR


def test_within_cluster_queue_spares_equal_priority_unless_newer():
    """LowerPriority spares an equal-priority job; LowerOrNewerEqualPriority spares it too
    when it was created before the pending job (here: it was)."""
    for policy in (PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY):
        out = _within(policy, low_priority=5)
        assert out.start["high"] == 100 * HOUR


def test_lower_or_newer_equal_priority_evicts_a_newer_job_of_equal_priority():
    """ "old" (12 GPUs, created at 0) waits behind a higher-priority blocker; "new" (equal
    priority, created an hour later) fits beside the blocker and starts. When the blocker
    ends, "old" still does not fit: LowerOrNewerEqualPriority evicts "new", LowerPriority
    waits for it."""

    def start(policy: PreemptionPolicy) -> float:
        w = workload(
            [12],
            [
                J("blocker", 8, 2 * HOUR, queue=0, priority=9),
                J("old", 12, 10 * HOUR, queue=0, priority=5),
                J("new", 4, 100 * HOUR, queue=0, priority=5, at=HOUR),
            ],
            scheduler=KUEUE,
            nominal=[[12]],
            preemption=[Preemption(within_cluster_queue=policy)],
        )
        return named(w).start["old"]

    assert start(PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY) == 2 * HOUR
    assert start(PreemptionPolicy.LOWER_PRIORITY) == 101 * HOUR


def test_borrow_within_cohort_lets_a_borrowing_job_preempt():
    """Queue 0 has no quota of its own: its job must borrow. reclaimWithinCohort alone does
    not let it evict queue 1's borrower; borrowWithinCohort LowerPriority does, unless the
    borrower's priority is above maxPriorityThreshold."""

    def start(preemption: Preemption) -> float:
        w = workload(
            [8],
            [
                J("borrower", 8, 100 * HOUR, queue=1, priority=1),
                J("high", 4, 10 * HOUR, queue=0, priority=5, at=HOUR),
            ],
            scheduler=KUEUE,
            nominal=[[0], [4], [4]],
            cohorts=[0, 0, 0],
            preemption=[preemption, Preemption(), Preemption()],
        )
        return named(w).start["high"]

    lower = PreemptionPolicy.LOWER_PRIORITY
    assert start(Preemption(reclaim_within_cohort=lower)) == 100 * HOUR
    assert start(Preemption(reclaim_within_cohort=lower, borrow_within_cohort=lower)) == HOUR
    capped = Preemption(
        reclaim_within_cohort=lower, borrow_within_cohort=lower, max_priority_threshold=0
    )
    assert start(capped) == 100 * HOUR


def test_preemption_evicts_the_fewest_lowest_priority_jobs():
    """Three 4-GPU jobs of priorities 1, 2, 3 fill the queue's 12 GPUs; an 8-GPU job of
    priority 9 evicts the two lowest, not the third."""
    w = workload(
        [12],
        [
            J("p1", 4, 100 * HOUR, queue=0, priority=1),
            J("p2", 4, 100 * HOUR, queue=0, priority=2),
            J("p3", 4, 100 * HOUR, queue=0, priority=3),
            J("p9", 8, 10 * HOUR, queue=0, priority=9, at=HOUR),
        ],
        scheduler=KUEUE,
        nominal=[[12]],
        preemption=[Preemption(within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)],
    )
    out = named(w)
    assert out.start["p9"] == HOUR
    assert out.preemptions == {"p1": 1, "p2": 1, "p3": 0, "p9": 0}


KUEUE_FLEET = """\
name: k
scheduler: kueue
pools:
  - {name: a100, gpu: a100-sxm-80gb, num_gpus: 64}
queues:
  - name: research
    cohort: teams
    nominal_gpus: {a100: 32}
    preemption:
      withinClusterQueue: LowerPriority
      reclaimWithinCohort: Any
      borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  - {name: applied, cohort: teams, nominal_gpus: {a100: 32}}
"""


def test_fleet_preemption_block_uses_kueue_names_and_defaults():
    fleet = read_fleet(KUEUE_FLEET, "fleet.yaml")
    research, applied = fleet.queues
    assert research.preemption == Preemption(
        within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
        reclaim_within_cohort=PreemptionPolicy.ANY,
        borrow_within_cohort=PreemptionPolicy.LOWER_PRIORITY,
        max_priority_threshold=100.0,
    )
    assert applied.preemption == Preemption()  # Kueue's defaults: Never, Never
    assert not applied.preemption.enabled


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "withinClusterQueue: LowerPriority",
            "withinClusterQueue: Any",
            "fleet.yaml:10: queues[0].preemption.withinClusterQueue: must be one of Never, "
            "LowerPriority, LowerOrNewerEqualPriority, got 'Any'",
        ),
        (
            "reclaimWithinCohort: Any",
            "reclaimWithinCohort: always",
            "fleet.yaml:11: queues[0].preemption.reclaimWithinCohort: must be one of Never, "
            "LowerPriority, Any, got 'always'",
        ),
        (
            "reclaimWithinCohort: Any",
            "reclaimWithinCohort: Never",
            "fleet.yaml:12: queues[0].preemption.borrowWithinCohort.policy: a policy other "
            "than Never needs reclaimWithinCohort LowerPriority or Any",
        ),
        (
            "withinClusterQueue:",
            "withinClusterQueues:",
            "fleet.yaml:10: queues[0].preemption.withinClusterQueues: unknown field; did you "
            "mean 'withinClusterQueue'?",
        ),
        (
            "maxPriorityThreshold: 100",
            "maxPriorityThreshold: high",
            "fleet.yaml:12: queues[0].preemption.borrowWithinCohort.maxPriorityThreshold: "
            "must be an integer",
        ),
    ],
)
def test_fleet_preemption_errors_name_the_field_and_the_allowed_values(old, new, expected):
    with pytest.raises(DocumentError) as info:
        read_fleet(KUEUE_FLEET.replace(old, new), "fleet.yaml")
    assert expected in str(info.value)


def test_preemption_spec_rejects_values_kueue_does_not_accept_there():
    with pytest.raises(SpecError, match=r"preemption\.reclaimWithinCohort: must be one of"):
        Preemption(reclaim_within_cohort=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)


def test_the_review_counts_preemptions_per_job_and_team_and_their_gpu_hours():
    w = workload(
        [8],
        [
            J("borrower", 8, 100 * HOUR, queue=1, priority=1, checkpoint=1000.0),
            J("owner", 4, 10 * HOUR, queue=0, priority=5, at=HOUR),
        ],
        scheduler=KUEUE,
        nominal=[[4], [4]],
        cohorts=[0, 0],
        preemption=[Preemption(reclaim_within_cohort=PreemptionPolicy.ANY), Preemption()],
    )
    result = summarize(w, run_fixed(w), "base")
    jobs = {j.name: j for j in result.jobs}
    lost_h = 8 * (600.0 + RESTART_S) / 3600.0
    assert jobs["borrower"].preemptions_mean == 1.0
    assert jobs["borrower"].preempted_gpu_hours_mean == pytest.approx(lost_h)
    assert jobs["owner"].to_dict()["preemptions_mean"] == 0.0
    (team,) = result.teams
    assert team.preemptions_mean == 1.0
    assert team.preempted_gpu_hours_mean == pytest.approx(lost_h)
    header, rows = team_table(result)
    assert header[-2:] == ["preemptions (mean)", "preempted GPU-h"]
    assert rows[0][-2:] == ["1.0", "3"]
