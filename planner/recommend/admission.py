"""Admission policy: what the planner says about a workload waiting for admission (Kueue
AdmissionCheck), and the hint values it annotates jobs with; pure, no I/O.

The rules (the scheduler stays in charge, ``docs/architecture.md``: key decisions):

* **Decision** (:func:`admission_decision`): no owning job, stale predictions or no prediction
  give ``Pending`` (the planner cannot decide); a prediction that does not fit in GPU memory
  gives ``Rejected``; otherwise ``Ready``. The message carries the predicted runtime, step time,
  MFU, memory per GPU and ETA.
* **Gating** (:func:`is_gated`, :func:`final_decision`): ``Retry``/``Rejected`` hold a workload
  only in queues that opted in (a LocalQueue as ``namespace/name`` or a ClusterQueue name);
  elsewhere they are written as ``Ready`` with the would-be decision in the message.
* **Never blocking**: an undecided (``Pending``) check stays so for at most the grace period
  after the scheduler set it, then becomes ``Ready`` with "no prediction" in the message.

The adapter (``adapters.kubernetes.admission``) only reads Workloads and writes their status.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum

from planner.recommend.outlook import JobOutlook


class CheckState(StrEnum):
    """States of an admission check (Kueue ``AdmissionCheckState.state`` values)."""

    PENDING = "Pending"
    READY = "Ready"
    RETRY = "Retry"
    REJECTED = "Rejected"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckDecision:
    """What the planner says about one workload: ``state``, a human ``message`` (predicted
    runtime, ETA, recommendation) and, with ``Retry``, ``requeue_after_s`` (seconds)."""

    state: CheckState
    message: str = ""
    requeue_after_s: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AdvisoryHints:
    """Hint values for a job object: ``predicted_runtime_s`` (s, start to end), ``eta_s`` (p50
    completion, epoch s), ``recommended_gpus`` (a count); None where unknown."""

    predicted_runtime_s: float | None = None
    eta_s: float | None = None
    recommended_gpus: int | None = None


MESSAGE_PREFIX = "llm-capacity-planner: "


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def straggler_term_message(job: JobOutlook) -> str | None:
    """The expected straggler slowdown of a queued job as its own term of the advisory text
    (``planner.stragglers.exposure``), None when the job has no term (running, or no history
    was consulted)."""
    factor = job.straggler_factor
    if factor is None:
        return None
    if factor <= 1.0 + 1e-9:
        return "expected straggler slowdown none (no slow node in the cluster's recent history)"
    text = f"expected straggler slowdown +{100 * (factor - 1):.1f}%"
    if job.straggler_probability is not None and job.straggler_slowdown is not None:
        text += (
            f" ({100 * job.straggler_probability:.0f}% chance of a slow node in its allocation, "
            f"{job.straggler_slowdown:.2f}x when slow)"
        )
    return text


def prediction_message(job: JobOutlook) -> str:
    """The advisory text of a job: predicted runtime, step time, MFU, memory and fit, ETA."""
    parts = []
    if job.predicted_runtime_s is not None:
        parts.append(f"predicted runtime {_hours(job.predicted_runtime_s)}")
    straggler = straggler_term_message(job)
    if straggler is not None:
        parts.append(straggler)
    if job.step_time_s is not None:
        parts.append(f"{job.step_time_s:.3f} s/iteration")
    if job.mfu_ratio is not None:
        parts.append(f"MFU {100 * job.mfu_ratio:.0f}%")
    if job.memory_per_gpu_bytes is not None:
        fits = "fits" if job.fits_in_memory else "does NOT fit"
        parts.append(f"{job.memory_per_gpu_bytes / 2**30:.1f} GiB/GPU ({fits})")
    if job.remaining_p50_s is not None:
        parts.append(f"ETA {_hours(job.remaining_p50_s)}")
    return MESSAGE_PREFIX + ", ".join(parts)


def admission_decision(job: JobOutlook | None, *, owner_known: bool, fresh: bool) -> CheckDecision:
    """The planner's decision for a workload whose owning job is ``job`` (None: not ingested
    yet); ``owner_known``: the workload names its owner; ``fresh``: every source answered
    within the staleness window."""
    if not owner_known:
        return CheckDecision(state=CheckState.PENDING, message="owner job unknown")
    if not fresh:
        return CheckDecision(state=CheckState.PENDING, message="predictions are stale")
    if job is None or not job.has_prediction:
        reason = job.description if job is not None else "job not ingested yet"
        return CheckDecision(state=CheckState.PENDING, message=f"no prediction: {reason}")
    message = prediction_message(job)
    if job.fits_in_memory is False:
        return CheckDecision(state=CheckState.REJECTED, message=message)
    return CheckDecision(state=CheckState.READY, message=message)


def is_gated(
    gating_queues: Collection[str], *, namespace: str, queue_name: str, cluster_queue: str
) -> bool:
    """Whether a workload's queue opted in to gating: its LocalQueue as ``namespace/name`` or
    its ClusterQueue is listed in ``gating_queues``."""
    return f"{namespace}/{queue_name}" in gating_queues or (
        bool(cluster_queue) and cluster_queue in gating_queues
    )


def final_decision(
    decision: CheckDecision,
    *,
    gated: bool,
    pending_since_s: float | None,
    now_s: float,
    grace_period_s: float,
) -> CheckDecision | None:
    """The decision to write, or None to leave the check ``Pending`` (grace period running).

    ``pending_since_s``: when the scheduler set the check pending (epoch s; None: unknown, the
    grace period is then over); ``gated``: :func:`is_gated` for the workload's queues.
    """
    if decision.state is CheckState.PENDING:
        if pending_since_s is not None and now_s - pending_since_s < grace_period_s:
            return None
        note = decision.message or "no prediction"
        return CheckDecision(
            state=CheckState.READY,
            message=f"{MESSAGE_PREFIX}{note}; admitted without a prediction after "
            f"{grace_period_s:g} s (planner never blocks admission)",
        )
    if decision.state in (CheckState.RETRY, CheckState.REJECTED) and not gated:
        return CheckDecision(
            state=CheckState.READY,
            message=f"advisory (gating off for this queue), would be {decision.state.value}: "
            f"{decision.message}",
        )
    return decision


def advisory_hints(job: JobOutlook) -> AdvisoryHints:
    """The hint values of a job: the model's runtime (with a queued job's expected straggler
    slowdown), the p50 completion, the GPUs it has."""
    return AdvisoryHints(
        predicted_runtime_s=job.predicted_runtime_with_stragglers_s,
        eta_s=job.completion_p50_s,
        recommended_gpus=job.num_gpus or None,
    )
