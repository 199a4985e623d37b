"""Impact of stragglers on a job's ETA, and what to do about them (pure).

``assess_impact(report, remaining_time_s)`` turns a what-if ``StragglerReport`` and the job's
predicted remaining wall time (with the stragglers, as observed) into the ETA without them, the
hours lost and a recommended action. The service serves it at ``/v1/jobs/{id}/stragglers`` and
exports ``planner_job_straggler_slowdown_ratio`` / ``planner_job_straggler_hours_lost``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import SpecError
from planner.stragglers.whatif import Diagnosis, StragglerReport


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerImpact:
    """ETA with and without the stragglers (seconds), the time lost and the advice.

    ``remaining_time_s`` is the job's remaining time at its current (straggling) speed;
    ``remaining_time_ideal_s`` = remaining / slowdown; ``hours_lost`` their difference in hours;
    ``fix_gain_s`` the time the recommended action is expected to save (for a bad worker: the
    share of the slowdown it explains). ``action`` is ``"none"``, ``"drain-node"``,
    ``"repartition-pipeline"``, ``"rebalance-sequences"`` or ``"investigate-network"``.
    """

    slowdown: float
    remaining_time_s: float
    remaining_time_ideal_s: float
    hours_lost: float
    fix_gain_s: float
    action: str
    advice: str


def assess_impact(
    report: StragglerReport,
    remaining_time_s: float,
    *,
    worker_nodes: dict[tuple[int, int], str] | None = None,
) -> StragglerImpact:
    """Impact of ``report``'s slowdown over ``remaining_time_s`` seconds of remaining work.

    ``worker_nodes`` maps ``(dp_rank, stage)`` to the node running it, to name the node to
    drain. Raises ``SpecError`` on a negative or non-finite remaining time.
    """
    if not remaining_time_s >= 0 or remaining_time_s == float("inf"):
        raise SpecError("remaining_time_s", f"must be finite and >= 0, got {remaining_time_s}")
    s = max(report.slowdown, 1.0)
    ideal = remaining_time_s / s
    lost = remaining_time_s - ideal
    diagnosis = report.diagnosis
    if diagnosis is Diagnosis.NONE:
        return StragglerImpact(
            slowdown=s,
            remaining_time_s=remaining_time_s,
            remaining_time_ideal_s=ideal,
            hours_lost=lost / 3600,
            fix_gain_s=0.0,
            action="none",
            advice=f"No significant straggling (slowdown {s:.3f}x); nothing to do.",
        )
    if diagnosis is Diagnosis.INDIVIDUAL_WORKER and report.stragglers:
        explained = min(max(sum(w.explained_ratio for w in report.stragglers), 0.0), 1.0)
        # Removing the worker(s) leaves the unexplained part of the slowdown.
        s_after = 1.0 + (s - 1.0) * (1.0 - explained)
        gain = remaining_time_s - remaining_time_s * s_after / s
        names = []
        for w in report.stragglers:
            node = (worker_nodes or {}).get((w.dp_rank, w.stage))
            where = f" on node {node}" if node else ""
            names.append(f"dp_rank {w.dp_rank}, stage {w.stage}{where}")
        advice = (
            f"Drain or replace the node(s) of {'; '.join(names)} and restart from the last "
            f"checkpoint: expected step-time gain {100 * (1 - s_after / s):.0f}% "
            f"({gain / 3600:.1f} h of the remaining run)."
        )
        action = "drain-node"
    elif diagnosis is Diagnosis.STAGE_IMBALANCE:
        gain = lost * max(min(report.shares.get("stage", 1.0), 1.0), 0.0)
        stages = ", ".join(str(st) for st in report.slow_stages) or "the slowest stage"
        advice = (
            f"Pipeline-stage imbalance (stage {stages} carries too much): re-partition the "
            "layers across stages (fewer layers on the loss/embedding stage) or use more "
            "virtual stages; a node swap will not help. Expected gain up to "
            f"{gain / 3600:.1f} h."
        )
        action = "repartition-pipeline"
    elif diagnosis is Diagnosis.WORKLOAD_IMBALANCE:
        gain = lost * max(min(report.shares.get("workload", 1.0), 1.0), 0.0)
        advice = (
            "Sequence-length imbalance: re-balance sequence lengths across data-parallel ranks "
            "and micro-batches (length bucketing, packing to equal token counts); a node swap "
            f"will not help. Expected gain up to {gain / 3600:.1f} h."
        )
        action = "rebalance-sequences"
    else:
        gain = lost * max(min(report.shares.get("communication", 1.0), 1.0), 0.0)
        advice = (
            "Communication above its median: check the network (NCCL tests within and across "
            f"nodes, RDMA counters) before touching the job. Expected gain up to "
            f"{gain / 3600:.1f} h."
        )
        action = "investigate-network"
    return StragglerImpact(
        slowdown=s,
        remaining_time_s=remaining_time_s,
        remaining_time_ideal_s=ideal,
        hours_lost=lost / 3600,
        fix_gain_s=gain,
        action=action,
        advice=advice,
    )
