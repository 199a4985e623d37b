"""Dependency model of a traced training step, and its batched replay (pure, numpy).

The model follows the what-if analysis of Lin et al. (OSDI '25, ``analyzer/wia.py`` of the
``ByteDance-Seed/StragglerAnalysis`` artifact):

* **Intra-worker order**: each worker runs its operations one after the other in the traced order
  (which is its 1F1B or interleaved 1F1B schedule); an operation is *launched* ``gap`` seconds
  after its predecessor ends (the launch delay, CPU-side).
* **Communication waits for its peers**: a pipeline send and its matching receive (the k-th
  forward send of stage s pairs with the k-th forward receive of stage (s+1) mod P, backward
  mirrored; the modulo covers the interleaved schedule's last-to-first chunk hop), a
  data-parallel collective (``grads-reduce-scatter``, ``params-all-gather``: all dp ranks of a
  stage), the embedding all-reduce (first and last stage of a replica) and the gradient-clipping
  all-reduce (every worker) finish ``transfer`` seconds after the last member has arrived.
  ``layernorm-grads-all-reduce`` runs inside the (untraced) tensor-parallel group, so it waits for
  nobody here. Sends and receives issued together (same worker, same start: Megatron's batched
  ``send_forward_recv_backward``, or the interleaved schedule's four-way
  ``send_forward_backward_recv_forward_backward``) are fused into one node, which finishes
  ``transfer`` after the last of itself and its *direct* peers (the nodes holding the other end
  of one of its operations) has arrived. Peers are not transitive: a batch that talks to both
  neighbours of an interleaved pipeline waits for those two, not for the neighbours' other
  peers (merging batches into one group chains every stage of a replica together and
  over-estimates interleaved steps by several percent).
* **Compute** (forward, backward, optimizer, gc) takes its duration.

A step's observed transfer time of a communication node is ``end - max(start of itself and its
direct peers)``; with the observed durations, transfers and launch delays the replay reproduces
the observed timestamps, which ``JobGraph.reproduction_error`` checks. The dependency model is
checked against an independent discrete-event simulation of Megatron's 1F1B and interleaved
schedules in ``tests/stragglers/test_simulated.py``.

All steps of a trace share one template (the sequence of operations of every worker); steps
whose operations differ from it (missing or extra operations) are dropped and counted. The
replay then runs every step and every what-if scenario at once: arrays are (nodes, columns) with
one column per (scenario, step), and one pass over the template's topological order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from planner.errors import SpecError
from planner.specs.trace import OP_TYPES, FloatArray, IntArray, OpTrace, OpType
from planner.stragglers.levels import Schedule, build_schedule, segment_max

BoolArray = npt.NDArray[np.bool_]

_FUSE_TOLERANCE_S = 1e-6
_CODE = {op: i for i, op in enumerate(OP_TYPES)}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobGraph:
    """The template dependency graph of a trace and its per-step observed timings.

    Per operation of the template (``num_ops``): ``op_worker``, ``op_dp``, ``op_stage``,
    ``op_type`` (index into ``OP_TYPES``), ``op_chunk``, ``op_node`` (node it belongs to).
    Per node (``num_nodes``, nodes of one worker are contiguous and in order): ``node_worker``,
    ``node_pred`` (previous node of the worker, ``num_nodes`` for none: a sentinel row that holds
    0), ``node_is_comm``. Observed per (op, step): ``op_duration_s`` (compute: duration; comm:
    transfer after the last peer arrived), per (node, step): ``node_gap_s`` launch delays.
    ``step_time_s`` (steps) is the observed step time, last end minus first start.
    """

    layout_workers: int
    steps: IntArray
    num_skipped_steps: int
    op_worker: IntArray
    op_dp: IntArray
    op_stage: IntArray
    op_type: IntArray
    op_chunk: IntArray
    op_node: IntArray
    node_worker: IntArray
    node_pred: IntArray
    node_is_comm: BoolArray
    op_duration_s: FloatArray
    node_gap_s: FloatArray
    step_time_s: FloatArray
    op_seq: IntArray
    op_key: IntArray
    schedule: Schedule

    @property
    def num_ops(self) -> int:
        """Operations per step in the template."""
        return int(self.op_type.size)

    @property
    def num_nodes(self) -> int:
        """Nodes per step (operations with batched sends/receives fused)."""
        return int(self.node_worker.size)

    @property
    def num_steps(self) -> int:
        """Steps kept."""
        return int(self.steps.size)

    def node_durations(self, op_durations_s: FloatArray) -> FloatArray:
        """Node durations (nodes, C) from op durations (ops, C): the longest op of each node."""
        starts = np.flatnonzero(np.r_[True, np.diff(self.op_node) != 0])
        return segment_max(np.asarray(op_durations_s, dtype=np.float64), starts)

    def replay(
        self, node_durations_s: FloatArray, node_gaps_s: FloatArray | None = None
    ) -> FloatArray:
        """Step times (C,) of a replay with the given node durations (nodes, C), seconds.

        ``node_gaps_s`` (nodes, C) are the launch delays; None replays without them. Each column
        is one independent step (steps start at 0).
        """
        durations = np.asarray(node_durations_s, dtype=np.float64)
        gaps = None if node_gaps_s is None else np.asarray(node_gaps_s, dtype=np.float64)
        return self.schedule.replay(durations, gaps)

    def reproduction_error(self) -> FloatArray:
        """Relative error (steps,) of replaying the observed durations and launch delays."""
        observed = self.node_durations(self.op_duration_s)
        replayed = self.replay(observed, self.node_gap_s)
        result: FloatArray = replayed / self.step_time_s - 1.0
        return result


def _group_keys(
    trace_type: IntArray, dp: IntArray, stage: IntArray, seq: IntArray, pp: int
) -> IntArray:
    """A synchronisation-group key per op (-1 for local ops); equal keys wait for each other."""
    n = trace_type.size
    keys = np.full(n, -1, dtype=np.int64)
    big = 1 << 20

    def encode(kind: int, a: IntArray, b: IntArray, c: IntArray) -> IntArray:
        result: IntArray = ((kind * big + a) * big + b) * big + c
        return result

    def mask(op: OpType) -> BoolArray:
        result: BoolArray = trace_type == _CODE[op]
        return result

    # Forward: the sender's stage identifies the link; a receive on stage s came from s-1.
    m = mask(OpType.FORWARD_SEND)
    keys[m] = encode(1, dp[m], stage[m], seq[m])
    m = mask(OpType.FORWARD_RECV)
    keys[m] = encode(1, dp[m], (stage[m] - 1) % pp, seq[m])
    m = mask(OpType.BACKWARD_SEND)
    keys[m] = encode(2, dp[m], stage[m], seq[m])
    m = mask(OpType.BACKWARD_RECV)
    keys[m] = encode(2, dp[m], (stage[m] + 1) % pp, seq[m])
    zeros = np.zeros(n, dtype=np.int64)
    for kind, op in ((3, OpType.GRADS_REDUCE_SCATTER), (4, OpType.PARAMS_ALL_GATHER)):
        m = mask(op)
        keys[m] = encode(kind, zeros[m], stage[m], seq[m])
    m = mask(OpType.EMBEDDING_GRADS_ALL_REDUCE)
    keys[m] = encode(5, dp[m], zeros[m], seq[m])
    m = mask(OpType.OPTIMIZER_CLIP_MAIN_GRAD)
    keys[m] = encode(6, zeros[m], zeros[m], seq[m])
    m = mask(OpType.LAYERNORM_GRADS_ALL_REDUCE)
    keys[m] = encode(7, dp[m] * pp + stage[m], zeros[m], seq[m])
    return keys


def _dense(values: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """``np.unique(values, return_index, return_inverse, return_counts)`` less the values, by
    one stable sort (first index = first occurrence)."""
    order = np.argsort(values, kind="stable")
    new = np.r_[True, np.diff(values[order]) != 0]
    inverse = np.empty(values.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    return order[starts], inverse, np.diff(np.r_[starts, values.size])


def build_graph(trace: OpTrace) -> JobGraph:
    """The dependency graph of ``trace`` (see the module docstring).

    Raises ``SpecError`` when no two steps share a template, when a send has no matching receive
    (or a collective misses members) in the template, or when the template cannot be scheduled
    (a dependency cycle: the trace's op order contradicts its communication).
    """
    layout = trace.layout
    pp = layout.pipeline_parallel
    worker = trace.worker
    start = trace.start_s
    end = trace.end_s
    order = np.lexsort((trace.optype, end, start, worker, trace.step))
    step_sorted = trace.step[order]
    bounds = np.flatnonzero(np.r_[True, np.diff(step_sorted) != 0, True])
    key = (worker[order] * 64 + trace.optype[order]) * (1 << 24) + trace.seq_id[order]
    segments = [(int(a), int(b)) for a, b in pairwise(bounds)]
    # A step matches the template when it has the same operations (worker, type, seq id); ties
    # of zero-length markers (gc) with async sends make the traced order differ across steps, so
    # ops are matched by key and the template's order (the most common one) is used for all.
    by_key = [np.sort(key[a:b]) for a, b in segments]
    key_sets = [k.tobytes() for k in by_key]
    template_set, _ = Counter(key_sets).most_common(1)[0]
    kept = [i for i, sig in enumerate(key_sets) if sig == template_set]
    if len(kept) < max(1, len(segments) // 2):
        raise SpecError(
            "trace",
            f"only {len(kept)} of {len(segments)} steps share the same operations; the trace "
            "has gaps (missing ranks or operations) in most steps",
        )
    template_order, _ = Counter(
        key[segments[i][0] : segments[i][1]].tobytes() for i in kept
    ).most_common(1)[0]
    first = next(
        segments[i]
        for i in kept
        if key[segments[i][0] : segments[i][1]].tobytes() == template_order
    )
    t_idx = order[first[0] : first[1]]
    template_keys = key[first[0] : first[1]]
    key_order = np.argsort(template_keys, kind="stable")
    repeated = np.flatnonzero(np.diff(template_keys[key_order]) == 0)
    if repeated.size:
        dup = template_keys[key_order[repeated[0]]]
        raise SpecError(
            "trace.seq_id",
            f"duplicate operation (worker {dup >> 30}, type {OP_TYPES[(dup >> 24) % 64]}, "
            f"seq id {dup % (1 << 24)}) in a step; each op must appear once",
        )
    rank_in_key_order = np.empty_like(key_order)
    rank_in_key_order[key_order] = np.arange(key_order.size)
    columns = []
    for i in kept:
        a, b = segments[i]
        step_rows = order[a:b]
        columns.append(step_rows[np.argsort(key[a:b], kind="stable")][rank_in_key_order])
    rows = np.stack(columns, axis=1)  # ops x steps
    num_ops = t_idx.size
    del num_ops

    op_worker = worker[t_idx]
    op_dp = trace.dp_rank[t_idx]
    op_stage = trace.stage[t_idx]
    op_type = trace.optype[t_idx]
    op_seq = trace.seq_id[t_idx]
    op_chunk = trace.chunk[t_idx]
    op_start = start[rows]
    op_end = end[rows]
    step_origin = op_start.min(axis=0)

    # Fuse batched p2p: same worker, both p2p, same start in most steps.
    is_p2p = np.isin(op_type, [_CODE[op] for op in OP_TYPES if op.is_p2p])
    same_start = np.abs(np.diff(op_start, axis=0)) <= _FUSE_TOLERANCE_S
    fused = np.r_[
        False,
        (op_worker[1:] == op_worker[:-1])
        & is_p2p[1:]
        & is_p2p[:-1]
        & (same_start.mean(axis=1) >= 0.5),
    ]
    op_node = np.cumsum(~fused) - 1
    num_nodes = int(op_node[-1]) + 1
    node_first = np.flatnonzero(~fused)
    node_worker = op_worker[node_first]

    # Synchronisation keys (equal keys wait for each other), numbered 0..K-1 (-1: local op).
    raw_keys = _group_keys(op_type, op_dp, op_stage, op_seq, pp)
    is_comm = raw_keys >= 0
    key_first, key_index, key_count = _dense(raw_keys[is_comm])
    _check_groups(op_type[is_comm][key_first], key_count, layout.data_parallel)
    op_key = np.full(op_type.size, -1, dtype=np.int64)
    op_key[is_comm] = key_index.reshape(-1)

    # Nodes: start/end, predecessor and launch delay.
    node_start = np.minimum.reduceat(op_start, node_first, axis=0)
    node_end = np.maximum.reduceat(op_end, node_first, axis=0)
    first_of_worker = np.r_[True, node_worker[1:] != node_worker[:-1]]
    node_pred = np.arange(num_nodes) - 1
    node_pred[first_of_worker] = num_nodes
    prev_end = np.vstack([node_end, step_origin[None, :]])[node_pred]
    node_gap = node_start - prev_end
    schedule = build_schedule(node_pred, op_node[is_comm], op_key[is_comm], num_nodes)

    # Observed transfer of comm ops: node end - release (latest start among its peers).
    op_duration = trace.duration_s[rows].copy()
    node_is_comm = np.zeros(num_nodes, dtype=bool)
    node_is_comm[op_node[is_comm]] = True
    release = schedule.peer_max(node_start)
    transfer = np.maximum(node_end - release, 0.0)
    op_duration[is_comm] = transfer[op_node[is_comm]]

    step_time = op_end.max(axis=0) - step_origin
    return JobGraph(
        layout_workers=layout.num_workers,
        steps=trace.step[rows[0]],
        num_skipped_steps=len(segments) - len(kept),
        op_worker=op_worker,
        op_dp=op_dp,
        op_stage=op_stage,
        op_type=op_type,
        op_chunk=op_chunk,
        op_node=op_node,
        node_worker=node_worker,
        node_pred=node_pred,
        node_is_comm=node_is_comm,
        op_duration_s=op_duration,
        node_gap_s=node_gap,
        step_time_s=step_time,
        op_seq=op_seq,
        op_key=op_key,
        schedule=schedule,
    )


def _check_groups(key_type: IntArray, key_count: IntArray, dp: int) -> None:
    """Raise ``SpecError`` when a send lacks its receive or a collective lacks members
    (``key_type`` / ``key_count``: each synchronisation key's op type and member count)."""
    expected = np.full(len(OP_TYPES), -1, dtype=np.int64)
    expected[_CODE[OpType.GRADS_REDUCE_SCATTER]] = dp
    expected[_CODE[OpType.PARAMS_ALL_GATHER]] = dp
    expected[_CODE[OpType.LAYERNORM_GRADS_ALL_REDUCE]] = 1
    for op in OP_TYPES:
        if op.is_p2p:
            expected[_CODE[op]] = 2
    want = expected[key_type]
    bad = np.flatnonzero((want >= 0) & (key_count != want))
    if bad.size:
        i = int(bad[0])
        op = OP_TYPES[int(key_type[i])]
        raise SpecError(
            "trace.optype",
            f"a {op} group has {key_count[i]} members instead of {want[i]} (a send without its "
            "receive or a collective missing ranks); the trace is incomplete",
        )
