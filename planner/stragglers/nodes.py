"""Host-wide slowdowns: every rank of one node slower than the ranks of the other nodes (pure).

A node whose CPUs are contended (a noisy neighbour, a CPU hog, thermal throttling, a failing
memory channel) slows all of its ranks together. Flagging each of them as a straggler would
name the symptom several times and hide the cause, so the live tracker reports such a node as
one **slow node** instead:

* per logging interval, a node's compute time is the median of its ranks' own measured compute
  times (``rank_step`` ``compute_time_s``, never a wall-clock assumption);
* a second :class:`~planner.stragglers.online.StragglerDetector` runs on those node series
  (peers = the other nodes when there are at least three; else each node's own history), with
  the same CUSUM and 10 % minimum effect as the rank detector;
* a flagged node counts when, over the recent intervals, its median is slower than the median
  of the ranks on the *other* nodes by at least 90 % of the minimum effect and by
  ``NODE_SIGNIFICANCE`` standard errors of that median, and at least three quarters of its ranks
  (both of two) are slower than them by at least half the node's shift (the whole host slowed
  alike, not one slow rank dragging the node's median with two ranks a node).

A rank on a host-wide slow node is not reported as a straggler (it is not slower than its
node-mates). Single-node jobs have no other node to compare with: a host-wide slowdown there
is a job-wide one, which the rank detector already ignores (no rank is slower than its peers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

import numpy as np

from planner.specs.trace import FloatArray


class SlowNode(TypedDict):
    """A node whose ranks are all slower than the other nodes' (JSON-ready): its ``ranks``,
    the ``kind`` of flag that found it, its ``slowdown`` against the other nodes (ratio) and
    the iteration the slowdown started (``since_iteration``)."""

    node: str
    ranks: list[int]
    kind: str
    slowdown: float
    since_iteration: int


#: Share of the minimum effect the node's median and every one of its ranks must show against
#: the other nodes.
NODE_SHARE = 0.9
#: A rank's shift counts only this many standard errors (of the window's median) above zero.
SIGNIFICANCE = 3.0
#: A node's shift likewise; lower, since the node is flagged by its own CUSUM first and its
#: series carries the host's shared noise (a 1.5x host under the recorded CPU-hog noise is
#: about 3 standard errors over 20 intervals).
NODE_SIGNIFICANCE = 2.0
#: A slow node's ranks are slowed alike: at least ``ALIKE_RANKS`` of them by at least
#: ``ALIKE_SHARE`` of the node's shift (a host-wide slowdown slows its ranks alike; one slow rank
#: among fast node-mates does not, even when with two ranks a node it drags the node's median).
ALIKE_SHARE = 0.5
ALIKE_RANKS = 0.75


def node_layout(nodes: dict[int, str], world_size: int) -> tuple[str, ...] | None:
    """Per rank, its node name, or None while a rank's node is unknown or when the job runs
    on a single node or on one rank per node (nothing host-wide to tell apart)."""
    if len(nodes) < world_size:
        return None
    names = tuple(nodes[r] for r in range(world_size))
    distinct = set(names)
    if len(distinct) < 2 or len(distinct) == world_size:
        return None
    return names


def node_medians(compute_s: FloatArray, names: Sequence[str], order: Sequence[str]) -> FloatArray:
    """Median compute time (s) of each node in ``order`` for one interval's per-rank times."""
    labels = np.array(names)
    return np.array([float(np.median(compute_s[labels == n])) for n in order])


def shift_and_error(series: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per column of ``series`` (intervals, columns: log ratios), the median and its standard
    error (1.2533 x 1.4826 x MAD / sqrt(n), the normal-theory error of a median)."""
    shift = np.median(series, axis=0)
    mad = np.median(np.abs(series - shift), axis=0)
    error = 1.2533 * 1.4826 * mad / math.sqrt(max(series.shape[0], 1))
    return shift, error


def relative_to_other_nodes(
    history: Sequence[Sequence[float]], names: Sequence[str]
) -> tuple[dict[str, tuple[float, float]], dict[int, float]]:
    """Median over the intervals of ``log(x / median of the ranks on the other nodes)``, for
    each node's median (first dict: with its standard error, ``shift_and_error``) and for each
    rank (second dict); the median for the reason given in
    ``LiveStragglers.relative_compute``."""
    logs = np.log(np.asarray(history, dtype=np.float64))
    labels = np.array(names)
    per_node: dict[str, tuple[float, float]] = {}
    per_rank: dict[int, float] = {}
    for node in dict.fromkeys(names):
        mine = labels == node
        others = np.median(logs[:, ~mine], axis=1)
        shift, error = shift_and_error((np.median(logs[:, mine], axis=1) - others)[:, None])
        per_node[node] = (float(shift[0]), float(error[0]))
        # one median per rank of the node, column-wise in one call
        ranks = np.median(logs[:, mine] - others[:, None], axis=0)
        for r, value in zip(np.flatnonzero(mine), ranks, strict=True):
            per_rank[int(r)] = float(value)
    return per_node, per_rank


def host_wide_nodes(
    history: Sequence[Sequence[float]], names: Sequence[str], min_effect_ratio: float
) -> dict[str, float]:
    """Nodes of two or more ranks all slower than the other nodes' ranks (see the module
    docstring), with their slowdown against them (ratio)."""
    if not history:
        return {}
    per_node, per_rank = relative_to_other_nodes(history, names)
    effect = math.log1p(min_effect_ratio)
    result = {}
    for node, (value, error) in per_node.items():
        ranks = [r for r, n in enumerate(names) if n == node]
        if len(ranks) < 2 or value < max(NODE_SHARE * effect, NODE_SIGNIFICANCE * error):
            continue
        alike = sum(per_rank[r] >= ALIKE_SHARE * value for r in ranks)
        if alike >= math.ceil(ALIKE_RANKS * len(ranks)):
            result[node] = math.exp(value)
    return result


def median_of_others(values: FloatArray) -> FloatArray:
    """Per row and column of ``values`` (rows, N >= 2), the median of the row's other N - 1
    values, by one sort per row (not one median per column)."""
    rows, n = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ranked = np.take_along_axis(values, order, axis=1)
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(n)[None, :].repeat(rows, axis=0), axis=1)

    def kth(k: int) -> FloatArray:
        # The k-th smallest of the others: skip the column's own place when it is at or below.
        index = np.where(position <= k, k + 1, k)
        result: FloatArray = np.take_along_axis(ranked, index, axis=1)
        return result

    m = n - 1
    if m % 2:
        return kth(m // 2)
    return 0.5 * (kth(m // 2 - 1) + kth(m // 2))
