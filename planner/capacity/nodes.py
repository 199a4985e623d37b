"""Whole-node placement for the review's Slurm pools: which nodes a job's GPUs are on.

A pool of ``G`` GPUs of a catalog GPU with ``g`` GPUs per node is ``G // g`` nodes of ``g``
GPUs (and one node of ``G mod g`` when ``g`` does not divide ``G``); capacity changes add or
remove whole nodes. A job of ``N`` GPUs asks for ``ceil(N / g)`` nodes with ``ceil(N / nodes)``
free GPUs each (its own ``num_nodes`` when the scheduler reported one): a job of 16 GPUs waits
while the pool's 16 free GPUs are two on each of eight nodes, as Slurm's ``select/cons_tres``
makes it wait. A job of no GPUs that holds nodes (a CPU-only job on a GPU partition) holds them
whole: the fleet file gives no CPUs or memory per node, so the review cannot tell what else fits
beside it. Nodes are taken best fit (the fullest nodes that still fit, then node order), as
``select/cons_tres`` packs small jobs to keep whole nodes free.

``NodePool`` is the static layout of one pool; ``NodeState`` the free GPUs of its nodes in one
sample, with a histogram of free GPUs per node so that "does a job of ``n`` nodes of ``q`` GPUs
fit" is ``count(free >= q) >= n`` without a pass over the nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from planner.capacity.workload import BoolArray, IntArray

__all__ = ["ABSENT", "NodePool", "NodeState", "request"]

ABSENT = -(1 << 40)
"""Free GPUs of a node not installed (yet, or any more): no request fits it."""


def request(num_gpus: int, gpus_per_node: int, num_nodes: int = 0) -> tuple[int, int]:
    """``(nodes, GPUs per node)`` a job of ``num_gpus`` asks for on nodes of ``gpus_per_node``
    GPUs (``num_nodes``: the scheduler's own count, 0 when unknown): whole nodes when it
    spans several, one node's share when it is smaller; a job of no GPUs holds its nodes
    whole."""
    per_node = max(gpus_per_node, 1)
    least = max(math.ceil(num_gpus / per_node), 1)
    nodes = max(num_nodes, least)
    if num_gpus <= 0:
        return nodes, per_node
    return nodes, math.ceil(num_gpus / nodes)


@dataclass(frozen=True, slots=True)
class NodePool:
    """The nodes of one pool over the horizon: ``capacity`` GPUs of each node slot (``(M,)``,
    every node the pool ever has), ``initial`` the slots installed at the start, and per
    capacity change of the pool (``(C,)`` in time order) the slots it installs (``added``:
    ``lo, hi``) or the nodes it removes (``removed``)."""

    gpus_per_node: int
    capacity: IntArray
    initial: int
    added: dict[int, tuple[int, int]]
    removed: dict[int, int]

    @staticmethod
    def build(
        gpus: int, gpus_per_node: int, change_index: IntArray, change_delta: IntArray
    ) -> NodePool:
        """The layout of a pool of ``gpus`` GPUs at the start whose capacity changes are
        ``change_delta`` (GPUs; indices ``change_index`` in the workload's changes)."""
        q = max(gpus_per_node, 1)

        def nodes_of(count: int) -> list[int]:
            return [q] * (count // q) + ([count % q] if count % q else [])

        caps = nodes_of(gpus)
        initial = len(caps)
        added: dict[int, tuple[int, int]] = {}
        removed: dict[int, int] = {}
        for i, delta in zip(change_index.tolist(), change_delta.tolist(), strict=True):
            if delta > 0:
                lo = len(caps)
                caps += nodes_of(delta)
                added[i] = (lo, len(caps))
            elif delta < 0:
                removed[i] = max(round(-delta / q), 1)
        return NodePool(q, np.array(caps, np.int64), initial, added, removed)


class NodeState:
    """Free GPUs per node of one pool in one sample (``free``, ``ABSENT`` for a node not
    installed) and their histogram (``hist[f]``: installed nodes with ``f`` GPUs free)."""

    def __init__(self, pool: NodePool) -> None:
        self.pool = pool
        self.free = np.full(pool.capacity.size, ABSENT, np.int64)
        self.free[: pool.initial] = pool.capacity[: pool.initial]
        self.hist: list[int] = np.bincount(
            pool.capacity[: pool.initial], minlength=pool.gpus_per_node + 1
        ).tolist()
        self.draining = 0
        self._filled: dict[int, IntArray] = {}
        self._at_least: IntArray | None = None
        self._at_least_list: list[int] | None = None

    def fits(self, nodes: int, per_node: int) -> bool:
        """Whether ``nodes`` nodes each have ``per_node`` GPUs free now."""
        if self._at_least_list is None:
            self._at_least_list = self._counts(self.hist)
        return per_node <= self.pool.gpus_per_node and self._at_least_list[per_node] >= nodes

    def fit_mask(self, nodes: IntArray, per_node: IntArray) -> BoolArray:
        """``fits`` for many requests at once (``(R,)`` each)."""
        if self._at_least is None:
            if self._at_least_list is None:
                self._at_least_list = self._counts(self.hist)
            self._at_least = np.array(self._at_least_list, np.int64)
        ok: BoolArray = self._at_least[np.minimum(per_node, self.pool.gpus_per_node + 1)] >= nodes
        return ok

    def _counts(self, hist: list[int]) -> list[int]:
        """``at_least[q]``: nodes with ``q`` or more GPUs free (``q`` up to one past a node's
        GPUs, where it is 0)."""
        counts = hist + [0] * (self.pool.gpus_per_node + 2 - len(hist))
        return list(accumulate(reversed(counts)))[::-1]

    def choose(self, nodes: int, per_node: int, free: IntArray | None = None) -> IntArray | None:
        """The nodes a request takes in ``free`` (default: the free GPUs now), best fit:
        the fewest free GPUs that still fit, then node order; None when it does not fit."""
        room = self.free if free is None else free
        found = (room >= per_node).nonzero()[0]
        if found.size < nodes:
            return None
        if per_node < self.pool.gpus_per_node:
            found = found[np.argsort(room[found], kind="stable")]
        chosen: IntArray = found[:nodes]
        return chosen

    def filled(self, per_node: int, nodes: int) -> IntArray:
        """``per_node`` GPUs on each of ``nodes`` nodes, ``(nodes,)``: a read-only view of one
        array per value, so that a start does not allocate one."""
        full = self._filled.get(per_node)
        if full is None:
            full = np.full(self.pool.capacity.size, per_node, np.int64)
            full.flags.writeable = False
            self._filled[per_node] = full
        return full[:nodes]

    def spread(self, num_gpus: int, nodes: int) -> tuple[IntArray, IntArray]:
        """Where a job already running is, when it does not fit as a request (the review does
        not know its nodes): its GPUs on the ``nodes`` nodes with the most free GPUs, as many
        as each has."""
        order = np.argsort(-self.free, kind="stable")[:nodes]
        order = order[self.free[order] > 0]
        take = np.minimum(self.free[order], max(math.ceil(num_gpus / max(nodes, 1)), 1))
        return order, take

    def take(self, nodes: IntArray, amounts: IntArray, whole: bool = False) -> None:
        """A job takes ``amounts`` GPUs of each of ``nodes`` (distinct); ``whole``: every
        GPU of each (nodes all free, ``amounts`` their GPUs per node), kept track of without
        reading the nodes' free GPUs."""
        if whole:
            self._whole(nodes, -1)
        else:
            self._move(nodes, -amounts)

    def give(self, nodes: IntArray, amounts: IntArray, whole: bool = False) -> None:
        """A job gives them back (``whole``: as it took them); a node waiting to be removed
        goes once it is idle."""
        if whole:
            self._whole(nodes, 1)
        else:
            self._move(nodes, amounts)
        if self.draining:
            idle = nodes[self.free[nodes] == self.pool.capacity[nodes]]
            self._remove(idle[: self.draining])

    def _whole(self, nodes: IntArray, sign: int) -> None:
        """Whole nodes taken (``sign`` -1: from all free to none) or given back (+1): while a
        job holds a whole node nothing else fits on it, so its free GPUs go from the node's
        GPUs per node to 0 and back."""
        self._at_least = self._at_least_list = None
        q, count = self.pool.gpus_per_node, int(nodes.size) * sign
        self.free[nodes] = q if sign > 0 else 0
        self.hist[q] += count
        self.hist[0] -= count

    def _move(self, nodes: IntArray, delta: IntArray) -> None:
        self._at_least = self._at_least_list = None
        free, hist = self.free, self.hist
        old = free[nodes]
        new = old + delta
        free[nodes] = new
        for f in old.tolist():
            hist[f] -= 1
        for f in new.tolist():
            hist[f] += 1

    def _remove(self, nodes: IntArray) -> None:
        if nodes.size:
            self._at_least = self._at_least_list = None
            for f in self.free[nodes].tolist():
                self.hist[f] -= 1
            self.free[nodes] = ABSENT
            self.draining -= int(nodes.size)

    def change(self, index: int) -> None:
        """Apply the pool's capacity change ``index``: install its nodes, or remove nodes,
        idle ones first (the highest-numbered), the rest as they become idle (drained)."""
        if index in self.pool.added:
            lo, hi = self.pool.added[index]
            self._at_least = self._at_least_list = None
            self.free[lo:hi] = self.pool.capacity[lo:hi]
            for f in self.pool.capacity[lo:hi].tolist():
                self.hist[f] += 1
            return
        count = self.pool.removed.get(index, 0)
        self.draining += count
        idle = np.flatnonzero(self.free == self.pool.capacity)[::-1]
        self._remove(idle[:count])

    def shadow(
        self,
        nodes: int,
        per_node: int,
        releases: Iterable[tuple[float, IntArray, IntArray, bool, int]],
        at_least_gpus: int,
    ) -> tuple[float, IntArray]:
        """When a request first fits if the running jobs give back their nodes at ``releases``
        (``(time, nodes, GPUs on each, whole nodes or not, GPUs in all)`` in time order: their
        time limits), and the free GPUs per node then less the request's (what is left for
        others: ``(M,)``), all releases of one time counted together; the request takes the
        nodes busiest now first (``_fit_after``). ``(inf, free now)`` when it never fits.
        ``at_least_gpus``: before the pool has that many GPUs free nothing is placed, the
        releases are only added up.

        The nodes with ``per_node`` GPUs free are counted as releases come (a whole node goes
        from none free to all), so the nodes are placed once, at the time the count first
        reaches ``nodes``; whole-node releases are added to the free GPUs only then."""
        free = self.free.copy()
        hist = self.hist
        total = sum(f * count for f, count in enumerate(hist))
        ready = sum(hist[max(per_node, 0) :])  # nodes the request's share fits on
        whole_adds = 0 < per_node <= self.pool.gpus_per_node
        batch: list[IntArray] = []  # whole nodes released, not yet added to ``free``
        at = -math.inf
        for end, where, amounts, whole, gpus in releases:
            if end > at and total >= at_least_gpus and ready >= nodes:
                break  # everything ending at ``at`` is back, and the request fits
            at = end
            if whole:
                batch.append(where)
                ready += int(where.size) if whole_adds else 0
            else:
                before = free[where]
                after = before + amounts
                free[where] = after
                ready += int(np.count_nonzero((before < per_node) & (after >= per_node)))
            total += gpus
        else:
            if not (math.isfinite(at) and total >= at_least_gpus and ready >= nodes):
                return math.inf, self.free.copy()
        if batch:
            free[np.concatenate(batch)] = self.pool.gpus_per_node
        left = self._fit_after(nodes, per_node, free)
        if left is None:  # not reached: ``ready`` counts the nodes it needs
            return math.inf, self.free.copy()
        return at, left

    def _fit_after(self, nodes: int, per_node: int, free: IntArray) -> IntArray | None:
        """``free`` (the free GPUs per node at a reservation's time) less a request placed in
        it, or None when it does not fit there. The reservation takes the nodes busiest now
        first (after best fit), leaving the nodes free now to jobs backfilled before it: with
        whole-node jobs it then leaves exactly the GPUs the pooled model's "extra" counts."""
        found = (free >= per_node).nonzero()[0]
        if found.size < nodes:
            return None
        now = self.free[found]
        if per_node < self.pool.gpus_per_node:
            order = np.lexsort((now, free[found]))
        else:
            order = np.argsort(now, kind="stable")
        chosen = found[order[:nodes]]
        left = free.copy()
        left[chosen] -= per_node
        return left
