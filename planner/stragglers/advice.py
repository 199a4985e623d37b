"""What a live straggler report says and advises (pure): the diagnosis line, the action and the
advice for the flagged ranks and slow nodes of ``planner.stragglers.live``."""

from __future__ import annotations

from collections.abc import Sequence

from planner.stragglers.nodes import SlowNode
from planner.stragglers.online import RankFlag

#: Slowdown below which the job is reported as not straggling.
SIGNIFICANT_SLOWDOWN = 1.05


def diagnose(
    slowdown: float,
    flags: Sequence[RankFlag],
    nodes: dict[int, str],
    slow_nodes: Sequence[SlowNode] = (),
) -> tuple[str, str, str]:
    """(diagnosis, action, advice) for a live slowdown, the detector's flags and slow nodes."""
    if flags or slow_nodes:
        names = []
        for n in slow_nodes:
            names.append(
                f"slow node {n['node']} (all {len(n['ranks'])} of its ranks "
                f"{100 * (n['slowdown'] - 1):.0f}% slower than the other nodes' since iteration "
                f"{n['since_iteration']})"
            )
        for f in flags:
            node = nodes.get(f.rank)
            where = f" on node {node}" if node else ""
            against = "its peers" if f.kind == "peer" else "its own history"
            names.append(
                f"rank {f.rank}{where} ({100 * (f.slowdown - 1):.0f}% slower than {against} "
                f"since iteration {f.since_step})"
            )
        nodes_to_drain = sorted(
            {nodes[f.rank] for f in flags if f.rank in nodes} | {n["node"] for n in slow_nodes}
        )
        target = f"node(s) {', '.join(nodes_to_drain)}" if nodes_to_drain else "the node(s)"
        kind = "slow node" if slow_nodes and not flags else "individual slow worker"
        cause = (
            " (a host-wide slowdown: CPU or memory contention, a noisy neighbour or throttling)"
            if slow_nodes
            else ""
        )
        return (
            f"{kind}: {'; '.join(names)}; step slowdown {slowdown:.3f}x",
            "drain-node",
            f"Drain or replace {target} of the slow rank(s){cause} and restart from the last "
            f"checkpoint: the step would be {100 * (1 - 1 / slowdown):.0f}% shorter.",
        )
    if slowdown >= SIGNIFICANT_SLOWDOWN:
        return (
            f"uneven per-rank compute without a persistent slow rank (workload imbalance, "
            f"e.g. sequence lengths); step slowdown {slowdown:.3f}x",
            "rebalance",
            "Re-balance the work per rank (sequence-length packing or bucketing); a node swap "
            "would not help.",
        )
    return (f"no significant straggling (slowdown {slowdown:.3f}x)", "none", "Nothing to do.")
