"""Expected straggler slowdown of a job that has not started yet, from the cluster's history of
slow nodes (pure, no I/O).

The service keeps, per node, the episodes in which a running job had a rank flagged on that node
or the node itself flagged as slow (``planner.stragglers.live``): when it started and was last
seen, the ranks flagged and the job's what-if slowdown meanwhile. A node that is drained or
cordoned leaves the history (it comes back repaired).

Model (stationary, over the last ``window_s`` of history):

* ``p`` = the share of node-time that nodes spent slow: the episodes' summed durations (each
  clipped to the window) over ``cluster_nodes x window_s``;
* the chance that an allocation of ``n`` nodes includes a slow node at a given time is
  ``P = 1 - (1 - p)^n``;
* ``S`` = the slowdown such episodes caused: their duration-weighted mean what-if slowdown;
* the expected factor on the job's step time, and so on its runtime, is ``1 + P (S - 1)``.

Without history (or without knowing the cluster's size) the factor is 1 and the term says so.
The factor is its own term (``StragglerTerm``): the prediction shows it beside the model's step
time, the admission message names it, the time-limit hint and the pending ETA multiply it in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

from planner.errors import SpecError

#: History looked at by default: the last 7 days.
WINDOW_S = 7 * 86400.0
#: Node states (substrings, lower case) that take a node out of the history.
DRAINED_STATES = ("drain", "drng", "cordon")


@dataclass(frozen=True, slots=True, kw_only=True)
class SlowEpisode:
    """A node slow for one job: ``node``, ``job_id``, ``started_s`` / ``last_seen_s`` (epoch
    s), ``ranks`` flagged on it, ``slowdown`` the job's what-if slowdown (ratio >= 1)."""

    node: str
    job_id: str
    started_s: float
    last_seen_s: float
    ranks: int
    slowdown: float

    @property
    def duration_s(self) -> float:
        """How long the episode lasted so far, seconds."""
        return max(0.0, self.last_seen_s - self.started_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class StragglerTerm:
    """The expected straggler slowdown of a job of ``job_nodes`` nodes (see the module
    docstring): ``factor`` (>= 1) multiplies its step time and runtime; ``probability`` is
    ``P``, ``slow_node_share`` is ``p``, ``slowdown_when_slow`` is ``S``; ``episodes`` /
    ``nodes`` count the history used, ``window_s`` its span."""

    factor: float
    probability: float
    slow_node_share: float
    slowdown_when_slow: float
    job_nodes: int
    cluster_nodes: int
    episodes: int
    nodes: int
    window_s: float
    basis: str

    def to_dict(self) -> dict[str, float | int | str]:
        """JSON-ready dict (the ``expected_straggler`` entry of a pending job's prediction):
        every field by its name, same units; ``StragglerTerm(**term.to_dict()) == term``."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def is_drained(state: str) -> bool:
    """Whether a scheduler node state (``idle+drain``, ``ready+cordoned``, ...) takes the node
    out of service."""
    lowered = state.lower()
    return any(token in lowered for token in DRAINED_STATES)


def expected_straggler_term(
    episodes: Sequence[SlowEpisode],
    *,
    job_nodes: int,
    cluster_nodes: int,
    now_s: float,
    window_s: float = WINDOW_S,
) -> StragglerTerm:
    """The term of a job of ``job_nodes`` nodes on a cluster of ``cluster_nodes`` nodes from
    the ``episodes`` of the last ``window_s`` seconds before ``now_s``.

    Raises ``SpecError`` for a negative node count or a window that is not positive.
    """
    if job_nodes < 0 or cluster_nodes < 0:
        raise SpecError("nodes", f"counts must be >= 0, got {job_nodes} and {cluster_nodes}")
    if not window_s > 0 or not math.isfinite(window_s):
        raise SpecError("window_s", f"must be finite and > 0, got {window_s}")
    start = now_s - window_s
    kept = [e for e in episodes if e.last_seen_s >= start and e.slowdown > 0]
    clipped = [max(0.0, e.last_seen_s - max(e.started_s, start)) for e in kept]
    slow_time = sum(clipped)

    def neutral(basis: str) -> StragglerTerm:
        return StragglerTerm(
            factor=1.0,
            probability=0.0,
            slow_node_share=0.0,
            slowdown_when_slow=1.0,
            job_nodes=job_nodes,
            cluster_nodes=cluster_nodes,
            episodes=len(kept),
            nodes=len({e.node for e in kept}),
            window_s=window_s,
            basis=basis,
        )

    if cluster_nodes == 0 or job_nodes == 0:
        return neutral("cluster or job size unknown: no straggler term")
    if not kept or slow_time <= 0:
        return neutral(f"no slow node seen in the last {window_s / 86400:.3g} days")
    share = min(1.0, slow_time / (cluster_nodes * window_s))
    slowdown = max(1.0, sum(c * e.slowdown for c, e in zip(clipped, kept, strict=True)) / slow_time)
    probability = 1.0 - (1.0 - share) ** min(job_nodes, cluster_nodes)
    return StragglerTerm(
        factor=1.0 + probability * (slowdown - 1.0),
        probability=probability,
        slow_node_share=share,
        slowdown_when_slow=slowdown,
        job_nodes=job_nodes,
        cluster_nodes=cluster_nodes,
        episodes=len(kept),
        nodes=len({e.node for e in kept}),
        window_s=window_s,
        basis=(
            f"{len(kept)} slow-node episodes on {len({e.node for e in kept})} of "
            f"{cluster_nodes} nodes in the last {window_s / 86400:.3g} days: nodes slow "
            f"{100 * share:.2g}% of the time, {slowdown:.2f}x when slow"
        ),
    )
