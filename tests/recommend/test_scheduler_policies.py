"""Admission and time-limit policy (planner.recommend.admission, planner.recommend.time_limit):
pure decisions from a job's outlook, and the adapters use these very functions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from planner.errors import SpecError
from planner.recommend.admission import (
    CheckDecision,
    CheckState,
    admission_decision,
    advisory_hints,
    final_decision,
    is_gated,
)
from planner.recommend.outlook import JobOutlook
from planner.recommend.time_limit import (
    QUANTUM_S,
    RuntimeHint,
    TimeLimitPolicy,
    propose_time_limit_min,
    runtime_hint,
)
from planner.specs.job import JobStatus

NOW = 1_800_000_000.0
PREDICTED = JobOutlook(
    job_id="ns/pytorchjob/gpt",
    status=JobStatus.PENDING,
    num_gpus=16,
    train_iters=1000,
    has_prediction=True,
    step_time_s=3.6,
    mfu_ratio=0.41,
    memory_per_gpu_bytes=60 * 2**30,
    fits_in_memory=True,
    remaining_p50_s=3700.0,
    remaining_p90_s=4000.0,
)


def test_the_adapters_use_the_policy_modules() -> None:
    from adapters.kubernetes import admission as kube
    from adapters.slurm import hints as slurm

    assert kube.CheckState is CheckState
    assert kube.final_decision is final_decision
    assert slurm.SlurmHint is RuntimeHint
    assert slurm.propose_time_limit_min is propose_time_limit_min


def test_admission_ready_with_the_prediction_in_the_message() -> None:
    decision = admission_decision(PREDICTED, owner_known=True, fresh=True)
    assert decision.state is CheckState.READY
    assert decision.message == (
        "llm-capacity-planner: predicted runtime 1.0 h, 3.600 s/iteration, MFU 41%, "
        "60.0 GiB/GPU (fits), ETA 1.0 h"
    )


@pytest.mark.parametrize(
    ("job", "owner", "fresh", "state", "text"),
    [
        (PREDICTED, False, True, CheckState.PENDING, "owner job unknown"),
        (PREDICTED, True, False, CheckState.PENDING, "predictions are stale"),
        (None, True, True, CheckState.PENDING, "no prediction: job not ingested yet"),
        (
            JobOutlook(job_id="x", description="no scenario"),
            True,
            True,
            CheckState.PENDING,
            "no prediction: no scenario",
        ),
        (
            JobOutlook(job_id="x", has_prediction=True, fits_in_memory=False),
            True,
            True,
            CheckState.REJECTED,
            "llm-capacity-planner: ",
        ),
    ],
)
def test_admission_cases(
    job: JobOutlook | None, owner: bool, fresh: bool, state: CheckState, text: str
) -> None:
    decision = admission_decision(job, owner_known=owner, fresh=fresh)
    assert decision.state is state
    assert decision.message.startswith(text)


def test_gating_only_in_opted_in_queues_and_never_blocking_past_the_grace() -> None:
    assert is_gated({"team-a/q"}, namespace="team-a", queue_name="q", cluster_queue="cq")
    assert is_gated({"cq"}, namespace="team-a", queue_name="other", cluster_queue="cq")
    assert not is_gated({"cq"}, namespace="team-a", queue_name="q", cluster_queue="")
    rejected = CheckDecision(state=CheckState.REJECTED, message="OOM")
    kw = {"pending_since_s": NOW - 10, "now_s": NOW, "grace_period_s": 120.0}
    assert final_decision(rejected, gated=True, **kw) == rejected
    advisory = final_decision(rejected, gated=False, **kw)
    assert advisory is not None
    assert advisory.state is CheckState.READY
    assert "would be Rejected: OOM" in advisory.message
    pending = CheckDecision(state=CheckState.PENDING, message="no prediction: x")
    assert final_decision(pending, gated=True, **kw) is None  # grace period running
    late = final_decision(
        pending, gated=True, pending_since_s=NOW - 121, now_s=NOW, grace_period_s=120.0
    )
    assert late is not None
    assert late.state is CheckState.READY
    assert "planner never blocks admission" in late.message


def test_advisory_hints() -> None:
    hints = advisory_hints(PREDICTED)
    assert hints.predicted_runtime_s == pytest.approx(3600.0)
    assert hints.recommended_gpus == 16
    assert hints.eta_s is None  # pending: no completion time


def test_runtime_hint_of_a_pending_and_a_running_job_rounded_up() -> None:
    hint = runtime_hint(PREDICTED)
    assert hint == RuntimeHint(
        predicted_runtime_s=3900.0, runtime_p90_s=4200.0, recommended_gpus=16
    )
    running = JobOutlook(
        job_id="7",
        status=JobStatus.RUNNING,
        start_time_s=NOW,
        completion_p50_s=NOW + 601.0,
        completion_p90_s=NOW + 650.0,
        remaining_p50_s=601.0,
        # the model: 0.5 s/iteration at MFU 0.4 (peak bound 0.2 s), 1000 iterations
        has_prediction=True,
        step_time_s=0.5,
        mfu_ratio=0.4,
        train_iters=1000,
        iteration=10,
    )
    hint = runtime_hint(running)
    assert hint is not None
    assert hint.predicted_runtime_s == 900.0
    assert hint.runtime_p90_s == 900.0
    assert hint.eta_s % QUANTUM_S == 0  # type: ignore[operator]
    assert runtime_hint(JobOutlook(job_id="8", status=JobStatus.RUNNING)) is None
    # the same ETA without a model prediction is a user-written number alone: no hint
    no_model = replace(running, has_prediction=False, step_time_s=None, mfu_ratio=None)
    assert runtime_hint(no_model) is None


def test_runtime_hint_is_never_faster_than_the_peak_compute_bound() -> None:
    # A log claiming 1 ms/iteration where the model says 50 s got a 28-minute
    # limit. The ETA may say so; the hint may not: 1000 iterations at the peak bound
    # (50 s x MFU 0.4 = 20 s) take at least 20,000 s.
    claimed = JobOutlook(
        job_id="9",
        status=JobStatus.RUNNING,
        start_time_s=NOW,
        completion_p50_s=NOW + 60.0 + 1.0,
        completion_p90_s=NOW + 60.0 + 2.0,
        remaining_p50_s=1.0,
        has_prediction=True,
        step_time_s=50.0,
        mfu_ratio=0.4,
        train_iters=1000,
        iteration=60_000,  # the log also claims more iterations than could have run
    )
    hint = runtime_hint(claimed)
    assert hint is not None
    # 60 s elapsed allow 3 iterations at the peak rate: 997 remain, >= 19,940 s from now
    assert hint.predicted_runtime_s >= 60.0 + 997 * 20.0
    assert "clipped" in hint.basis
    limit = propose_time_limit_min(hint, current_limit_s=48 * 3600, elapsed_s=60.0)
    assert limit is not None
    assert limit * 60 >= 20_000 * 1.2
    pending = replace(
        claimed,
        status=JobStatus.PENDING,
        start_time_s=None,
        completion_p50_s=None,
        completion_p90_s=None,
        remaining_p50_s=1.0,
        remaining_p90_s=2.0,
    )
    pending_hint = runtime_hint(pending)
    assert pending_hint is not None
    assert pending_hint.predicted_runtime_s >= 1000 * 20.0


def test_time_limit_policy() -> None:
    hint = RuntimeHint(predicted_runtime_s=3000.0, runtime_p90_s=3600.0)
    # 3600 x 1.2 + 600 = 4920 s -> 82 min, lowering a 3 h limit
    assert propose_time_limit_min(hint, current_limit_s=3 * 3600, elapsed_s=0) == 82
    assert propose_time_limit_min(hint, current_limit_s=84 * 60, elapsed_s=0) is None
    assert propose_time_limit_min(hint, current_limit_s=None, elapsed_s=3700) is None
    with pytest.raises(SpecError, match="runtime_factor"):
        TimeLimitPolicy(runtime_factor=0.9)
