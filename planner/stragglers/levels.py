"""Longest-path replay of a step's dependency graph, level by level (pure numpy).

A step's graph has ``num_nodes`` nodes: each has a predecessor on its worker (``node_pred``,
``num_nodes`` for the first node of a worker) and, for a communication node, one or more
synchronisation *keys* (a pipeline send/receive pair, a data-parallel collective, ...). The
replay (Lin et al., OSDI '25, ``analyzer/wia.py``) is

* a node *arrives* at ``end[pred] + gap``;
* a key is *released* at the latest arrival among the nodes holding it;
* a local node ends at ``arrival + duration``; a communication node at the latest release among
  its keys ``+ duration`` (it waits for its direct peers, not for its peers' other peers).

``Schedule`` sorts this once into *rounds* (Kahn's algorithm run on whole frontiers at a time):
the nodes and keys of a round depend only on earlier rounds, so a replay is one pass over the
rounds with a few numpy gathers and ``maximum.reduceat`` per round. Its cost is linear in the
number of nodes plus node-key pairs (a collective of ``n`` members costs ``n``, not ``n^2``
peer pairs), times the number of replayed columns; the number of rounds is the depth of the
graph (about the operations of one worker per step), not the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.errors import SpecError
from planner.specs.trace import FloatArray, IntArray


def ranges(starts: IntArray, counts: IntArray) -> IntArray:
    """Concatenation of ``arange(s, s + c)`` for each (s, c), vectorised."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    offsets = np.repeat(starts - (ends - counts), counts)
    result: IntArray = np.arange(total, dtype=np.int64) + offsets
    return result


def segment_max(values: FloatArray, starts: IntArray) -> FloatArray:
    """``np.maximum.reduceat(values, starts, axis=0)`` for short segments (fused nodes of one
    to four ops): a gather of each segment's first row, then a maximum per extra row."""
    counts = np.diff(np.r_[starts, values.shape[0]])
    result: FloatArray = values[starts]
    extra = 1
    longer = np.flatnonzero(counts > extra)
    while longer.size:
        result[longer] = np.maximum(result[longer], values[starts[longer] + extra])
        extra += 1
        longer = longer[counts[longer] > extra]
    return result


def _offsets(counts: IntArray) -> IntArray:
    """``reduceat`` offsets of consecutive segments of the given (positive) lengths."""
    result: IntArray = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    return result


@dataclass(frozen=True, slots=True)
class _SegmentMax:
    """The maximum over segments of gathered rows, with segments of one and two rows (most of
    them: a pipeline pair, a node with one key) done by plain gathers instead of ``reduceat``.

    ``out*`` are the segments' output rows; ``a*`` / ``b*`` index the first source array (e.g.
    predecessor ends) and the second (e.g. launch delays) for each row of a segment.
    """

    out1: IntArray
    a1: IntArray
    b1: IntArray
    out2: IntArray
    a2: IntArray  # (2, n): first and second row of each segment
    b2: IntArray
    outn: IntArray
    an: IntArray
    bn: IntArray
    offsets: IntArray

    @classmethod
    def build(cls, out: IntArray, counts: IntArray, a: IntArray, b: IntArray) -> _SegmentMax:
        """Segments ``out`` of ``counts`` rows each; ``a`` / ``b`` list the rows in order."""
        first = _offsets(counts) if counts.size else np.zeros(0, dtype=np.int64)
        one, two, many = counts == 1, counts == 2, counts > 2
        pick = first[two]
        rows = ranges(first[many], counts[many])
        return cls(
            out1=out[one],
            a1=a[first[one]],
            b1=b[first[one]],
            out2=out[two],
            a2=np.stack([a[pick], a[pick + 1]]),
            b2=np.stack([b[pick], b[pick + 1]]),
            outn=out[many],
            an=a[rows],
            bn=b[rows],
            offsets=_offsets(counts[many]),
        )

    def apply(
        self, target: FloatArray, source: FloatArray, add: FloatArray | None, *, by_b: bool
    ) -> None:
        """``target[out] = max over the segment of source[a] (+ add[b] when given)``; with
        ``by_b`` the maximum is taken first and ``add[out]`` added after it."""

        def rows(a: IntArray, b: IntArray) -> FloatArray:
            values: FloatArray = source[a]
            if add is not None and not by_b:
                values += add[b]
            return values

        for out, value in (
            (self.out1, lambda: rows(self.a1, self.b1)),
            (
                self.out2,
                lambda: np.maximum(rows(self.a2[0], self.b2[0]), rows(self.a2[1], self.b2[1])),
            ),
            (self.outn, lambda: np.maximum.reduceat(rows(self.an, self.bn), self.offsets, axis=0)),
        ):
            if out.size:
                result = value()
                if add is not None and by_b:
                    result += add[out]
                target[out] = result


@dataclass(frozen=True, slots=True)
class _Round:
    """One frontier: local nodes, keys released and communication nodes that finish."""

    local: IntArray
    local_pred: IntArray
    release: _SegmentMax  # keys <- max over members of end[pred] + gap[member]
    finish: _SegmentMax  # comm nodes <- max over their keys of release, + duration


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """The rounds of a graph and its node-key incidence (see the module docstring).

    ``pair_node`` / ``pair_key`` (sorted by node) list each communication node's keys;
    ``key_member`` (sorted by key, ``key_offsets`` into it) each key's nodes.
    """

    num_nodes: int
    num_keys: int
    rounds: tuple[_Round, ...]
    pair_node: IntArray
    pair_key: IntArray
    key_member: IntArray
    key_offsets: IntArray

    @property
    def num_rounds(self) -> int:
        """Depth of the graph in rounds."""
        return len(self.rounds)

    def replay(self, durations_s: FloatArray, gaps_s: FloatArray | None = None) -> FloatArray:
        """Step times (C,) of a replay of node durations (nodes, C) and optional launch delays
        (nodes, C), seconds; every column is an independent step starting at 0."""
        columns = durations_s.shape[1]
        ends = np.zeros((self.num_nodes + 1, columns))
        released = np.empty((self.num_keys, columns))
        work = durations_s if gaps_s is None else durations_s + gaps_s
        for r in self.rounds:
            if r.local.size:
                ends[r.local] = ends[r.local_pred] + work[r.local]
            r.release.apply(released, ends, gaps_s, by_b=False)
            r.finish.apply(ends, released, durations_s, by_b=True)
        result: FloatArray = ends[: self.num_nodes].max(axis=0)
        return result

    def peer_max(self, values: FloatArray) -> FloatArray:
        """Per node, the largest value (nodes, C) among itself and its direct peers (the nodes
        sharing one of its keys); a local node keeps its own value."""
        result = np.array(values, dtype=np.float64, copy=True)
        if self.num_keys == 0:
            return result
        per_key = np.maximum.reduceat(values[self.key_member], self.key_offsets[:-1], axis=0)
        nodes, first = np.unique(self.pair_node, return_index=True)
        result[nodes] = np.maximum.reduceat(per_key[self.pair_key], first, axis=0)
        return result


def build_schedule(
    node_pred: IntArray, pair_node: IntArray, pair_key: IntArray, num_nodes: int
) -> Schedule:
    """Sort the graph into rounds; ``pair_node`` / ``pair_key`` give each communication node's
    keys (any order, duplicates allowed; keys numbered 0..K-1).

    Raises ``SpecError`` when the graph has a cycle (a worker waits for a peer that waits for
    it: the trace's order contradicts its communication).
    """
    order = np.lexsort((pair_key, pair_node))
    pn, pk = pair_node[order], pair_key[order]
    if pn.size:
        keep = np.r_[True, (np.diff(pn) != 0) | (np.diff(pk) != 0)]
        pn, pk = pn[keep], pk[keep]
    num_keys = int(pk.max()) + 1 if pk.size else 0
    node_first = np.searchsorted(pn, np.arange(num_nodes + 1))
    node_count = np.diff(node_first)
    by_key = np.argsort(pk, kind="stable")
    key_member = pn[by_key]
    key_first = np.searchsorted(pk[by_key], np.arange(num_keys + 1))
    key_count = np.diff(key_first)
    is_comm = node_count > 0
    key_left = key_count.copy()
    node_left = node_count.copy()
    succ = np.full(num_nodes, -1, dtype=np.int64)
    has_pred = node_pred < num_nodes
    succ[node_pred[has_pred]] = np.flatnonzero(has_pred)
    arrived = np.flatnonzero(~has_pred)
    rounds: list[_Round] = []
    finished_total = 0
    while arrived.size:
        local = arrived[~is_comm[arrived]]
        comm_arrived = arrived[is_comm[arrived]]
        keys, counts = np.unique(
            pk[ranges(node_first[comm_arrived], node_count[comm_arrived])], return_counts=True
        )
        key_left[keys] -= counts
        released = keys[key_left[keys] == 0]
        member = key_member[ranges(key_first[released], key_count[released])]
        nodes, counts = np.unique(member, return_counts=True)
        node_left[nodes] -= counts
        comm = nodes[node_left[nodes] == 0]
        comm_count = node_count[comm]
        rounds.append(
            _Round(
                local=local,
                local_pred=node_pred[local],
                release=_SegmentMax.build(released, key_count[released], node_pred[member], member),
                finish=_SegmentMax.build(
                    comm,
                    comm_count,
                    pk[ranges(node_first[comm], comm_count)],
                    np.zeros(int(comm_count.sum()), dtype=np.int64),
                ),
            )
        )
        finished = np.concatenate([local, comm])
        finished_total += finished.size
        following = succ[finished]
        arrived = following[following >= 0]
        if not finished.size and not arrived.size:
            break
    if finished_total < num_nodes:
        raise SpecError(
            "trace",
            "the operations' order deadlocks (a worker waits for a peer that waits for it); "
            "the trace's timestamps or sequence ids are inconsistent",
        )
    return Schedule(
        num_nodes=num_nodes,
        num_keys=num_keys,
        rounds=tuple(rounds),
        pair_node=pn,
        pair_key=pk,
        key_member=key_member,
        key_offsets=key_first.astype(np.int64),
    )
