"""What-ifs of single workers and data-parallel ranks without one full replay each (pure).

The attribution of Lin et al. (OSDI '25) replays the *ideal* run (every op at its type's mean
or median) with one group's real durations restored: one worker, one data-parallel rank. Done
naively that is one full replay per group, so the cost grows with workers x trace rows.

In the ideal run every data-parallel replica (the ``pp`` workers of one ``dp_rank``) has the
same durations. When the replicas also have the same operations (the same op types, sequence
ids and fused batches on every stage, which is what a synchronous data-parallel job runs), a
scenario that changes one replica ``d`` leaves every other replica identical to the others:
they see the same inputs (the releases of the collectives they share with ``d``) and run the
same ops. So the whole job replays exactly as **two replicas**: ``d`` with its restored
durations and one representative of the rest, sharing the keys that span replicas
(data-parallel collectives, the gradient-clipping all-reduce) and each keeping its own
pipeline sends/receives. Step time = the later of the two. That makes every worker's and every
dp rank's what-if a column of one batched replay over ``2 / dp`` of the graph: the cost is
linear in trace rows.

Jobs whose replicas differ (a trace with ragged ranks, or dp = 1) fall back to full replays in
column batches (same results, quadratic cost).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from planner.specs.trace import FloatArray, IntArray
from planner.stragglers.graph import JobGraph
from planner.stragglers.levels import Schedule, build_schedule, ranges, segment_max

#: Working memory of one batch of replayed columns (scenarios x steps are batched up to it).
CHUNK_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaPair:
    """Replicas 0 and 1 of a symmetric graph: ``ops_per_replica`` template ops each (replica d
    holds template ops ``[d R, (d + 1) R)``), their nodes' ``schedule`` and the reduceat
    offsets from ops to nodes."""

    ops_per_replica: int
    node_starts: IntArray
    schedule: Schedule

    def node_durations(self, op_durations_s: FloatArray) -> FloatArray:
        """Node durations (nodes, C) of op durations (2 R, C): the longest op of each node."""
        return segment_max(op_durations_s, self.node_starts)


def replica_pair(graph: JobGraph, dp: int) -> ReplicaPair | None:
    """The two-replica graph of ``graph``, or None when its replicas are not interchangeable
    (different ops, fusion or worker order) or there is a single replica."""
    ops = graph.num_ops
    if dp < 2 or ops % dp or np.any(np.diff(graph.op_dp) < 0):
        return None
    r = ops // dp
    if graph.op_dp[0] != 0 or np.any(graph.op_dp.reshape(dp, r) != np.arange(dp)[:, None]):
        return None
    fused = np.r_[False, graph.op_node[1:] == graph.op_node[:-1]]
    local = graph.op_key < 0
    for values in (graph.op_stage, graph.op_type, graph.op_seq, graph.op_chunk, fused, local):
        block = values.reshape(dp, r)
        if np.any(block != block[0]):
            return None
    first_nodes = int(graph.op_node[2 * r - 1]) + 1
    pred = graph.node_pred[:first_nodes].copy()
    pred[pred >= first_nodes] = first_nodes
    comm = np.flatnonzero(~local[: 2 * r])
    _, keys = np.unique(graph.op_key[comm], return_inverse=True)
    schedule = build_schedule(pred, graph.op_node[comm], keys.reshape(-1), first_nodes)
    starts = np.flatnonzero(np.r_[True, np.diff(graph.op_node[: 2 * r]) != 0])
    return ReplicaPair(ops_per_replica=r, node_starts=starts, schedule=schedule)


def _worker_bounds(graph: JobGraph, workers: int) -> tuple[IntArray, IntArray]:
    """First op and op count of each worker 0..workers-1 in the template (ops are grouped by
    worker); a worker without ops gets count 0."""
    first = np.searchsorted(graph.op_worker, np.arange(workers))
    last = np.searchsorted(graph.op_worker, np.arange(workers), side="right")
    return first.astype(np.int64), (last - first).astype(np.int64)


def group_whatifs(
    graph: JobGraph, real: FloatArray, ideal: FloatArray, *, workers: int, dp: int
) -> tuple[FloatArray, FloatArray]:
    """Mean no-delay step time (s) of the ideal run with the real durations of one worker
    restored (``workers``,) and of one data-parallel rank restored (``dp``,).

    ``real`` and ``ideal`` are op durations (ops, steps). Uses the two-replica replay when the
    graph allows it, else full replays.
    """
    first, count = _worker_bounds(graph, workers)
    pair = replica_pair(graph, dp)
    if pair is None:
        return _full_whatifs(graph, real, ideal, first=first, count=count, dp=dp)
    r = pair.ops_per_replica
    steps = graph.num_steps
    # Scenarios: workers, then dp ranks, as (source op range in the full template, length).
    rank_first = np.arange(dp, dtype=np.int64) * r
    src_first = np.r_[first, rank_first]
    src_count = np.r_[count, np.full(dp, r, dtype=np.int64)]
    replica = src_first // r
    scenarios = src_first.size
    per_column = 8 * (2 * 2 * r + 2 * pair.schedule.num_nodes + pair.schedule.num_keys)
    per_chunk = max(1, CHUNK_BYTES // (per_column * steps))
    base = ideal[: 2 * r]
    means = np.empty(scenarios)
    for lo in range(0, scenarios, per_chunk):
        hi = min(lo + per_chunk, scenarios)
        n = hi - lo
        durations = np.broadcast_to(base[:, None, :], (2 * r, n, steps)).copy()
        counts = src_count[lo:hi]
        src = ranges(src_first[lo:hi], counts)
        column = np.repeat(np.arange(n), counts)
        durations[src - np.repeat(replica[lo:hi] * r, counts), column] = real[src]
        flat = durations.reshape(2 * r, n * steps)
        times = pair.schedule.replay(pair.node_durations(flat))
        means[lo:hi] = times.reshape(n, steps).mean(axis=1)
    return means[:workers], means[workers:]


def _full_whatifs(
    graph: JobGraph,
    real: FloatArray,
    ideal: FloatArray,
    *,
    first: IntArray,
    count: IntArray,
    dp: int,
) -> tuple[FloatArray, FloatArray]:
    """The same what-ifs as full replays (for graphs whose replicas differ)."""
    masks: list[Callable[[], FloatArray]] = []
    real_n, ideal_n = graph.node_durations(real), graph.node_durations(ideal)
    node_dp = graph.op_dp[np.flatnonzero(np.r_[True, np.diff(graph.op_node) != 0])]

    def restore(mask: np.ndarray) -> Callable[[], FloatArray]:
        # Fused nodes hold ops of one worker: a worker or dp-rank mask is one per node.
        def make() -> FloatArray:
            result: FloatArray = np.where(mask[:, None], real_n, ideal_n)
            return result

        return make

    for a, c in zip(first.tolist(), count.tolist(), strict=True):
        mask = np.zeros(graph.num_ops, dtype=bool)
        mask[a : a + c] = True
        masks.append(restore(mask[np.flatnonzero(np.r_[True, np.diff(graph.op_node) != 0])]))
    for d in range(dp):
        masks.append(restore(node_dp == d))
    means = run_scenarios(graph, masks)
    return means[: first.size], means[first.size :]


def run_scenarios(graph: JobGraph, scenarios: list[Callable[[], FloatArray]]) -> FloatArray:
    """Mean no-delay step time of each scenario (a maker of node durations, nodes x steps:
    ``graph.node_durations`` of op durations), replayed in column batches of at most
    ``CHUNK_BYTES`` of working arrays."""
    steps = graph.num_steps
    schedule = graph.schedule
    per_column = 8 * (graph.num_ops + 2 * schedule.num_nodes + schedule.num_keys)
    per_chunk = max(1, CHUNK_BYTES // (per_column * steps))
    means = np.empty(len(scenarios))
    for lo in range(0, len(scenarios), per_chunk):
        batch = scenarios[lo : lo + per_chunk]
        durations = np.concatenate([make() for make in batch], axis=1)
        times = graph.replay(durations).reshape(len(batch), steps)
        means[lo : lo + len(batch)] = times.mean(axis=1)
    return means
