"""Pending jobs' starts on the scheduler's own nodes, each job placed where its request fits.

Slurm starts a job only when enough nodes each have the CPUs, memory and GPUs it asks for
free (``select/cons_tres``), the whole node when it is exclusive. Pooling a partition's GPUs
hides that: a job that needs two whole nodes looks startable while one CPU of one node is
taken. This simulation keeps every node's free CPUs, memory and GPUs
(``planner.specs.job.NodeState``, what the nodes report held now) and every job's request or
holding per node (``planner.specs.job.JobResources``), one Monte Carlo sample at a time:

- **Running jobs** release what they hold on each node when they end: at a draw from their
  remaining-runtime band (jobs of one ``draw_group`` at one quantile of theirs), at most their
  time limit. What the nodes report held beyond the known
  jobs' holdings (jobs the planner was not given) stays held.
- **Pending jobs** are taken in the given order (the scheduler's priority) and start while one
  fits: ``num_nodes`` usable nodes of their partitions (not down, drained or failed; all of
  ``required_nodes``, none of ``excluded_nodes``; GPUs of the requested type) each with the
  request free, or idle nodes for an exclusive job, taken in node order as Slurm takes nodes
  of equal weight. The first that does not fit is its partitions' *head*; later jobs of those
  partitions are backfilled as ``planner.capacity.simulate`` does for pools (EASY backfill,
  Lifka 1995; Slurm ``sched/backfill``): the head's reservation is the earliest time it fits
  **assuming the running jobs run to their time limits**, on the nodes it would get then; a
  later job starts now when it fits now and either its time limit ends before that time or it
  fits beside the head's reservation on those nodes. No time limit: no reservation around it.
  As Slurm's backfill, the comparison is on a grid of ``bf_resolution`` (60 s by default): the
  job's end rounded up, the reservation's start rounded down (the dev Slurm kept a one-minute
  job waiting 50 s before a reservation 110 s away: ``benchmarks/pending_replay.py``).
- Backfill runs in cycles ``bf_interval`` apart (``backfill_interval_s``; 0: at every event):
  a job behind its partitions' head starts only in one, as Slurm's main scheduler stops at a
  partition's first job that does not fit and leaves the rest to the backfill thread; a gap
  between two ends shorter than the interval is then mostly not backfilled.
- A job runs its sampled runtime, killed at its time limit (then it never completes).

QOS, reservation and account limits are not modelled (a job held by one waits past the
forecast); neither is sharing nodes among one user's jobs (``--exclusive=user`` counts as
exclusive).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.capacity.fleet import DEFAULT_HORIZON_S
from planner.capacity.pending import PendingForecast
from planner.capacity.runtime import RuntimeBand, band_arrays, draw_runtimes, share_draws
from planner.capacity.stats import quantiles
from planner.capacity.workload import BoolArray, FloatArray, IntArray
from planner.errors import SpecError
from planner.search.budget import checkpoint
from planner.specs.job import JobResources, JobState, JobStatus, NodeState

__all__ = ["PlacedJob", "forecast_on_nodes"]

#: Slurm's default ``bf_resolution`` (``slurm.conf`` SchedulerParameters), seconds: backfill
#: keeps job ends and reservations on a grid of this step.
BACKFILL_RESOLUTION_S = 60.0
#: Node states (words of ``NodeState.state``) in which a node takes no new job.
UNAVAILABLE = ("down", "drain", "fail", "maint", "unknown", "not_responding", "power", "reboot")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedJob:
    """One active job for the node simulation: the scheduler's view (``state``), its runtime
    band (remaining wall time of a running job from the forecast's time, the whole run of a
    pending one, seconds) and what it asks of or holds on each node (``resources``).
    ``draw_group``: jobs of one non-empty group (the same program on the same hardware) draw
    their runtimes at one quantile of their bands in each sample
    (``planner.capacity.runtime.share_draws``); empty: the job's own draw."""

    state: JobState
    runtime: RuntimeBand
    resources: JobResources
    draw_group: str = ""

    def __post_init__(self) -> None:
        if self.resources.job_id != self.state.job_id:
            raise SpecError(
                "resources.job_id",
                f"{self.resources.job_id!r} is not the job's id {self.state.job_id!r}",
            )

    @property
    def running(self) -> bool:
        """True when the job holds its nodes (running, completing or suspended)."""
        return self.state.status.is_active and self.state.status is not JobStatus.PENDING


@dataclass(frozen=True, slots=True)
class _Nodes:
    """Node arrays: ``cap``/``free0`` (N, 3) int64 of CPUs, memory bytes, GPUs; ``usable``."""

    index: dict[str, int]
    cap: IntArray
    free0: IntArray
    usable: BoolArray
    gpu_type: tuple[str, ...]
    partitions: tuple[frozenset[str], ...]
    masks: dict[object, BoolArray] = field(default_factory=dict)

    def mask(self, key: object, make: Callable[[], list[bool]]) -> BoolArray:
        """The nodes ``make`` selects (one bool per node), made once per ``key``."""
        found = self.masks.get(key)
        if found is None:
            found = self.masks[key] = np.array(make(), np.bool_)
        return found


def _nodes(nodes: Sequence[NodeState]) -> _Nodes:
    cap = np.array(
        [[n.num_cpus, int(n.memory_bytes), n.num_gpus] for n in nodes], np.int64
    ).reshape(-1, 3)
    held = np.array(
        [
            [n.num_cpus_allocated, int(n.memory_allocated_bytes), n.num_gpus_allocated]
            for n in nodes
        ],
        np.int64,
    ).reshape(-1, 3)
    usable = np.array(
        [not any(word in n.state.lower() for word in UNAVAILABLE) for n in nodes], np.bool_
    )
    return _Nodes(
        index={n.name: i for i, n in enumerate(nodes)},
        cap=cap,
        free0=np.clip(cap - held, 0, cap),
        usable=usable,
        gpu_type=tuple((n.gpu_type or "").lower() for n in nodes),
        partitions=tuple(frozenset(n.partitions) for n in nodes),
    )


@dataclass(frozen=True, slots=True)
class _Request:
    """A pending job's request: ``need`` (3,) per node, ``allowed`` (N,) nodes it may use,
    ``required`` node indices, ``shape`` an id shared by jobs asking the same."""

    need: IntArray
    num_nodes: int
    exclusive: bool
    allowed: BoolArray
    required: tuple[int, ...]
    partitions: frozenset[str]
    limit_s: float
    shape: int


def _request(job: PlacedJob, nodes: _Nodes, shapes: dict[tuple[object, ...], int]) -> _Request:
    r = job.resources
    want = frozenset(r.partitions)
    allowed = nodes.usable.copy()
    if want:
        allowed &= nodes.mask(
            ("partitions", want), lambda: [bool(p & want) for p in nodes.partitions]
        )
    for name in r.excluded_nodes:
        if name in nodes.index:
            allowed[nodes.index[name]] = False
    if r.gpus_per_node > 0 and r.gpu_type:
        gpu = r.gpu_type.lower()
        allowed &= nodes.mask(("gpu_type", gpu), lambda: [t == gpu for t in nodes.gpu_type])
    required = tuple(dict.fromkeys(nodes.index.get(name, -1) for name in r.required_nodes))
    if -1 in required:  # a node the scheduler did not report: it cannot start here
        allowed[:] = False
    need = np.array([r.cpus_per_node, int(r.memory_per_node_bytes), r.gpus_per_node], np.int64)
    limit = job.state.time_limit_s
    key = (tuple(need.tolist()), r.num_nodes, r.exclusive, allowed.tobytes(), required)
    return _Request(
        need=need,
        num_nodes=max(r.num_nodes, 1),
        exclusive=r.exclusive,
        allowed=allowed,
        required=required,
        partitions=want,
        limit_s=math.inf if limit is None else float(limit),
        shape=shapes.setdefault(key, len(shapes)),
    )


def _fits(req: _Request, free: IntArray, excl: IntArray, cap: IntArray) -> BoolArray:
    """The nodes where one node's share of ``req`` fits in ``free`` (N,)."""
    need = cap if req.exclusive else req.need[None, :]
    ok: BoolArray = req.allowed & (excl == 0)
    ok &= (free[:, 0] >= need[:, 0]) & (free[:, 1] >= need[:, 1]) & (free[:, 2] >= need[:, 2])
    return ok


def _place(
    req: _Request, free: IntArray, excl: IntArray, cap: IntArray
) -> tuple[IntArray, IntArray] | None:
    """(node indices, use (k, 3)) where ``req`` fits in ``free``, or None."""
    ok = _fits(req, free, excl, cap)
    if req.required:
        required = np.array(req.required, np.int64)
        if not ok[required].all():
            return None
        ok[required] = False
        chosen = np.concatenate([required, ok.nonzero()[0]])[: req.num_nodes]
    else:
        chosen = ok.nonzero()[0][: req.num_nodes]
    if chosen.size < req.num_nodes:
        return None
    use = cap[chosen].copy() if req.exclusive else np.broadcast_to(req.need, (chosen.size, 3))
    return chosen, use


def _reserve(
    req: _Request,
    at_s: float,
    t: float,
    *,
    free: IntArray,
    excl: IntArray,
    cap: IntArray,
    reservations: Sequence[_Reservation],
) -> _Reservation | None:
    """The head's reservation from ``max(at_s, t)`` when it fits at ``at_s`` in ``free`` /
    ``excl`` less what the earlier ``reservations`` from then on hold, else None."""
    avail, avail_excl = free, excl
    for r in reservations:
        if r.start_s <= at_s:
            avail = np.minimum(avail, r.left)
            avail_excl = np.maximum(avail_excl, r.excl)
    placed = _place(req, avail, avail_excl, cap)
    if placed is None:
        return None
    nodes, use = placed
    avail, avail_excl = avail.copy(), avail_excl.copy()
    avail[nodes] -= use
    if req.exclusive:
        avail_excl[nodes] += 1
    return _Reservation(max(at_s, t), avail, avail_excl)


#: What a job holds: node indices (k,) and CPUs, memory bytes, GPUs on each (k, 3).
_Holding = tuple[IntArray, IntArray]


@dataclass(slots=True)
class _Reservation:
    """A head's reservation: from ``start_s`` its nodes hold ``left`` (N, 3) for others."""

    start_s: float
    left: IntArray
    excl: IntArray


@dataclass(frozen=True, slots=True)
class _Queue:
    """What every sample shares: the nodes, the running jobs (job index, holding per node,
    exclusive, time limit left from now), and the pending jobs in priority order with their
    requests, request shapes (``shapes[k]`` the request of shape ``k``), partition keys and
    groups (one shape and time limit); per shape, what one node must have free (S, N, 3: the
    whole node for an exclusive one), the nodes it may use and must use (S, N), and how many
    nodes it needs (S,)."""

    nodes: _Nodes
    running: list[tuple[int, _Holding, bool, float]]
    pending: list[tuple[int, _Request]]
    shapes: list[_Request]
    job_shape: IntArray
    job_key: IntArray
    job_group: IntArray
    shape_need: IntArray
    shape_allowed: BoolArray
    shape_required: BoolArray
    shape_nodes: IntArray
    slot_of: IntArray

    def node_fits(self, free: IntArray, excl: IntArray, nodes: IntArray | None = None) -> BoolArray:
        """Per shape and node: whether one node's share of a job of the shape fits there now
        (S, N), or on ``nodes`` only (S, k)."""
        if nodes is None:
            ok: BoolArray = self.shape_allowed & (excl == 0)[None, :]
            ok &= np.all(free[None, :, :] >= self.shape_need, axis=2)
            return ok
        ok = self.shape_allowed[:, nodes] & (excl[nodes] == 0)[None, :]
        ok &= np.all(free[nodes][None, :, :] >= self.shape_need[:, nodes], axis=2)
        return ok


class _ShapeFits:
    """Whether a job of each request shape fits now, kept up to date node by node as jobs
    start and end (a pass then reads it in O(shapes), not O(shapes x nodes)): per shape, the
    nodes its share fits on, how many, and how many of its required nodes it does not."""

    def __init__(self, queue: _Queue, free: IntArray, excl: IntArray) -> None:
        self.queue = queue
        self.ok = queue.node_fits(free, excl)
        self.count = self.ok.sum(axis=1)
        self.missing = (queue.shape_required & ~self.ok).sum(axis=1)

    def update(self, nodes: IntArray, free: IntArray, excl: IntArray) -> None:
        """``free``/``excl`` changed on ``nodes`` (distinct)."""
        if nodes.size == 0:
            return
        q = self.queue
        old, new = self.ok[:, nodes], q.node_fits(free, excl, nodes)
        self.ok[:, nodes] = new
        self.count += new.sum(axis=1) - old.sum(axis=1)
        required = q.shape_required[:, nodes]
        self.missing += (required & ~new).sum(axis=1) - (required & ~old).sum(axis=1)

    def fits(self) -> BoolArray:
        """Per shape: whether a job of it fits now (S,)."""
        enough: BoolArray = (self.count >= self.queue.shape_nodes) & (self.missing == 0)
        return enough


def _starts(values: IntArray) -> BoolArray:
    """Where a run of equal values begins (``(n,)``, true at 0)."""
    out = np.empty(values.size, np.bool_)
    out[:1] = True
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


@dataclass(frozen=True, slots=True)
class _Releases:
    """The running jobs' holdings that end at a finite time limit, ``(E,)`` sorted by node
    and then end time: ``node``, ``end_s``, and the CPUs/memory/GPUs (``(E, 3)``) and
    exclusive holdings each node gets back up to and including that holding."""

    node: IntArray
    end_s: FloatArray
    freed: IntArray
    unexcl: IntArray
    use: IntArray
    excl: BoolArray

    @staticmethod
    def of(node: IntArray, use: IntArray, excl: BoolArray, end_s: FloatArray) -> _Releases:
        """From flat holding slots (``end_s`` inf: nothing to release)."""
        live = np.flatnonzero(np.isfinite(end_s))
        order = live[np.argsort(end_s[live])]
        # then by node, stably: a radix sort when node indices fit in 16 bits
        keys = node[order]
        order = order[
            np.argsort(
                keys.astype(np.uint16) if keys.size and keys.max() < 1 << 16 else keys,
                kind="stable",
            )
        ]
        nodes, uses, excls = node[order], use[order], excl[order].astype(np.int64)
        freed, unexcl = np.cumsum(uses, axis=0), np.cumsum(excls)
        if order.size:  # cumulative sums restarted at each node
            group = np.cumsum(_starts(nodes)) - 1
            first = np.flatnonzero(_starts(nodes))
            freed -= (freed[first] - uses[first])[group]
            unexcl -= (unexcl[first] - excls[first])[group]
        return _Releases(nodes, end_s[order], freed, unexcl, uses, excl[order])

    def fit_from(
        self, free: IntArray, excl: IntArray, cap: IntArray, need: IntArray, now: BoolArray
    ) -> FloatArray:
        """Per node ``(N,)``: the first end time from which one node's share ``need`` (``(1,
        3)``, or ``(N, 3)`` per node) fits there, -inf where it fits now (``now``), inf
        where it never does or the request may not use the node (``now`` already says so
        for the nodes it fits on; the caller masks the rest)."""
        out = np.where(now, -math.inf, math.inf)
        if self.node.size == 0:
            return out
        n = self.node
        room = np.minimum(free[n] + self.freed, cap[n])
        want = need[n] if need.shape[0] > 1 else need
        ok = np.all(room >= want, axis=1) & (excl[n] == self.unexcl)
        hits = np.flatnonzero(ok)
        if hits.size:  # the first hit of each node (distinct nodes)
            first = hits[_starts(n[hits])]
            out[n[first]] = np.minimum(out[n[first]], self.end_s[first])
        return out

    def released_by(
        self, at_s: float, free: IntArray, excl: IntArray, cap: IntArray
    ) -> tuple[IntArray, IntArray]:
        """``free``/``excl`` once every holding ending at or before ``at_s`` is back."""
        gone = self.end_s <= at_s
        free, excl = free.copy(), excl.copy()
        np.add.at(free, self.node[gone], self.use[gone])
        np.subtract.at(excl, self.node[gone & self.excl], 1)
        return np.minimum(free, cap), excl


class _Sample:
    """One simulated future of the queue (module docstring)."""

    def __init__(
        self,
        queue: _Queue,
        run_s: FloatArray,
        horizon_s: float,
        *,
        origin_s: float = 0.0,
        resolution_s: float = 0.0,
        backfill_interval_s: float = 0.0,
        backfill_phase_s: float = 0.0,
    ) -> None:
        self.queue = queue
        self.bf_interval = backfill_interval_s
        self.bf_phase = backfill_phase_s
        self.bf_now = False  # this event time is a backfill cycle
        self.bf_due: float | None = None  # the next backfill cycle, once asked for
        self.cap = queue.nodes.cap
        self.free = queue.nodes.free0.copy()
        self.excl = np.zeros(len(queue.nodes.index), np.int64)
        self.waiting = np.ones(len(queue.pending), np.bool_)
        self.run_s = run_s
        self.horizon_s = horizon_s
        self.origin_s = origin_s
        self.resolution_s = resolution_s
        self.start = np.full(run_s.size, np.inf)
        self.end = np.full(run_s.size, np.inf)
        self.timed_out = np.zeros(run_s.size, np.bool_)
        self.holding: dict[int, tuple[_Holding, bool]] = {}
        self.reserved_end: dict[int, float] = {}
        self.events: list[tuple[float, int]] = []
        # Every holding per node as flat slots (``_Queue.slot_of``), for the heads'
        # reservations: node, CPUs/memory/GPUs held, exclusive, and the holder's time-limit end
        # (inf: free slot, or a holder without a limit); ``job_end`` the same per job.
        slots = int(queue.slot_of[-1]) if queue.slot_of.size else 0
        self.slot_node = np.zeros(slots, np.int64)
        self.slot_use = np.zeros((slots, 3), np.int64)
        self.slot_excl = np.zeros(slots, np.bool_)
        self.slot_end = np.full(slots, np.inf)
        self.job_end = np.full(run_s.size, np.inf)
        self._table: _Releases | None = None
        for j, held, exclusive, limit_left in queue.running:
            run = float(run_s[j])
            if run > limit_left:
                run, self.timed_out[j] = max(limit_left, 0.0), True
            self._hold(j, held, exclusive, end_s=run, reserved_end_s=max(limit_left, 0.0))
        self.shape_fits = _ShapeFits(queue, self.free, self.excl)

    def _hold(
        self,
        j: int,
        held: _Holding,
        exclusive: bool,
        *,
        end_s: float,
        reserved_end_s: float,
    ) -> None:
        self.holding[j] = (held, exclusive)
        if exclusive:
            self.excl[held[0]] += 1
        self.end[j] = end_s
        self.reserved_end[j] = reserved_end_s
        at, n = int(self.queue.slot_of[j]), held[0].size
        self.slot_node[at : at + n] = held[0]
        self.slot_use[at : at + n] = held[1]
        self.slot_excl[at : at + n] = exclusive
        self.slot_end[at : at + n] = reserved_end_s
        self.job_end[j] = reserved_end_s
        self._table = None
        if math.isfinite(end_s):
            heapq.heappush(self.events, (end_s, j))

    def _release(self, j: int, free: IntArray, excl: IntArray) -> None:
        (nodes, use), exclusive = self.holding[j]
        free[nodes] = np.minimum(free[nodes] + use, self.cap[nodes])
        if exclusive:
            excl[nodes] -= 1

    def go(self) -> None:
        self._pass(0.0)
        while self.events and self.waiting.any():
            t = self.events[0][0]
            if t > self.horizon_s:
                break
            while self.events and self.events[0][0] == t:
                _, j = heapq.heappop(self.events)
                if j < 0:  # a backfill cycle
                    self.bf_now, self.bf_due = True, None
                    continue
                self._release(j, self.free, self.excl)
                self.shape_fits.update(self.holding[j][0][0], self.free, self.excl)
                at = int(self.queue.slot_of[j])
                self.slot_end[at : at + self.holding[j][0][0].size] = np.inf
                self.job_end[j] = np.inf
                self._table = None
                del self.holding[j], self.reserved_end[j]
            self._pass(t)
            self.bf_now = False

    def _backfill_cycle(self, t: float) -> bool:
        """Whether jobs behind a blocked head may start at ``t``: always when backfill runs at
        every event (``bf_interval`` 0), else only in a backfill cycle; otherwise the next
        cycle is asked for (an event that runs the pass again)."""
        if self.bf_interval <= 0 or self.bf_now:
            return True
        if self.bf_due is None:
            cycles = math.floor((t - self.bf_phase) / self.bf_interval) + 1
            self.bf_due = self.bf_phase + cycles * self.bf_interval
            heapq.heappush(self.events, (self.bf_due, -1))
        return False

    def _start(self, j: int, req: _Request, nodes: IntArray, use: IntArray, t: float) -> None:
        self.free[nodes] -= use
        run = float(self.run_s[j])
        if run > req.limit_s:
            run, self.timed_out[j] = req.limit_s, True
        self.start[j] = t
        self._hold(
            j, (nodes, np.array(use)), req.exclusive, end_s=t + run, reserved_end_s=t + req.limit_s
        )
        self.shape_fits.update(nodes, self.free, self.excl)

    def _shadow(self, req: _Request, t: float, reservations: list[_Reservation]) -> _Reservation:
        """The head's reservation: the earliest time it fits as the running jobs end at their
        time limits (earlier heads holding their reservations), on the nodes it gets then.

        The candidate times are the running jobs' time-limit ends. Releases only add to a
        node's free resources, so each node has a first end time from which the head's share
        fits on it (``_Releases.fit_from``); between two starts of earlier reservations the
        set of nodes they leave to it is fixed, so the head fits from the ``num_nodes``-th
        earliest of those times. This finds the time the walk over every end finds, without
        placing the head after each end."""
        cap = self.cap
        table = self._releases()
        need = cap if req.exclusive else req.need[None, :]
        now = _fits(req, self.free, self.excl, cap)
        fit_from = np.where(
            req.allowed, table.fit_from(self.free, self.excl, cap, need, now), math.inf
        )
        ends = self.job_end[np.isfinite(self.job_end)]
        starts = sorted({r.start_s for r in reservations if math.isfinite(r.start_s)})
        bounds = [-math.inf, *starts, math.inf]
        left_ok = np.ones(cap.shape[0], np.bool_)
        required = np.array(req.required, np.int64)
        for lo, hi in itertools.pairwise(bounds):
            for r in reservations:
                if r.start_s == lo:  # it holds its nodes from here on
                    left_ok &= (r.excl == 0) & np.all(r.left >= need, axis=1)
            times = np.where(left_ok, fit_from, math.inf)
            if times.size < req.num_nodes:
                continue
            ready = float(np.partition(times, req.num_nodes - 1)[req.num_nodes - 1])
            if required.size:
                ready = max(ready, float(times[required].max()))
            later = ends[ends >= max(ready, lo)]
            if later.size == 0:
                break  # no end time is left to try
            at = float(later.min())
            if at >= hi:
                continue
            free, excl = table.released_by(at, self.free, self.excl, cap)
            reservation = _reserve(
                req, at, t, free=free, excl=excl, cap=cap, reservations=reservations
            )
            if reservation is not None:
                return reservation
        return _Reservation(math.inf, self.free.copy(), self.excl.copy())

    def _releases(self) -> _Releases:
        """The holdings by node and time-limit end now (cached until a job starts or ends)."""
        if self._table is None:
            self._table = _Releases.of(self.slot_node, self.slot_use, self.slot_excl, self.slot_end)
        return self._table

    def _pass(self, t: float) -> None:
        """Start what fits at ``t``: in priority order while jobs fit, then backfill around
        the reservation of each partition key's first job that does not (its head).

        Jobs are looked at in groups of one request shape and time limit: a group whose next
        job does not fit is done for this pass (within a pass free resources only shrink and
        reservations only grow, so its later jobs do not fit either), and a shape that fits
        nowhere now is passed over without a look. A head's reservation is worked out only
        when a later job fits now."""
        q = self.queue
        fits = self.shape_fits.fits()[q.job_shape] & self.waiting
        candidates = fits.nonzero()[0]
        if candidates.size == 0:
            return
        not_fitting = (self.waiting & ~fits).nonzero()[0]
        _, first = np.unique(q.job_key[not_fitting], return_index=True)
        # (position, group or -1 for a head that fits nowhere now)
        todo: list[tuple[int, int]] = [(int(i), -1) for i in not_fitting[first]]
        groups = q.job_group[candidates]
        by_group = np.argsort(groups, kind="stable")
        bounds = np.flatnonzero(np.diff(groups[by_group])) + 1
        members = [candidates[part].tolist() for part in np.split(by_group, bounds)]
        todo += [(m[0], g) for g, m in enumerate(members)]
        heapq.heapify(todo)
        nexts = [1] * len(members)
        blocked: set[int] = set()
        held_back: list[tuple[_Request, _Reservation | None]] = []
        reservations: list[_Reservation] = []
        while todo:
            i, g = heapq.heappop(todo)
            j, req = q.pending[i]
            key = int(q.job_key[i])
            if g < 0:
                if key not in blocked:
                    blocked.add(key)
                    held_back.append((req, None))
                continue
            if key in blocked and not self._backfill_cycle(t):
                continue  # behind its partitions' head: only a backfill cycle starts it
            if len(reservations) < len(held_back):
                reservations = self._reservations(held_back, t)
            binding = [r for r in reservations if self._overlaps(t + req.limit_s, r.start_s)]
            free, excl = self.free, self.excl
            for r in binding:
                free = np.minimum(free, r.left)
                excl = np.maximum(excl, r.excl)
            placed = _place(req, free, excl, self.cap)
            if placed is None:  # the group is done; its job holds back its partitions
                if key not in blocked:
                    blocked.add(key)
                    held_back.append((req, None))
                continue
            nodes, use = placed
            self._start(j, req, nodes, use, t)
            self.waiting[i] = False
            for r in binding:
                r.left[nodes] -= use
                if req.exclusive:
                    r.excl[nodes] += 1
            if nexts[g] < len(members[g]):
                heapq.heappush(todo, (members[g][nexts[g]], g))
                nexts[g] += 1

    def _overlaps(self, end_s: float, reserved_s: float) -> bool:
        """Whether a job ending at ``end_s`` runs into a reservation from ``reserved_s`` (both
        from the origin), on Slurm's backfill grid: the end rounded up and the reservation
        rounded down to ``resolution_s`` of epoch time (``bf_resolution``)."""
        if not math.isfinite(reserved_s):
            return False
        if self.resolution_s <= 0 or not math.isfinite(end_s):
            return end_s > reserved_s
        grid = self.resolution_s
        end = math.ceil((self.origin_s + end_s) / grid) * grid
        return end > math.floor((self.origin_s + reserved_s) / grid) * grid

    def _reservations(
        self, held_back: list[tuple[_Request, _Reservation | None]], t: float
    ) -> list[_Reservation]:
        """The heads' reservations so far, working out the ones not yet known in order."""
        done: list[_Reservation] = []
        for k, (req, known) in enumerate(held_back):
            reservation = known if known is not None else self._shadow(req, t, done)
            held_back[k] = (req, reservation)
            done.append(reservation)
        return done


def _held(job: PlacedJob, nodes: _Nodes) -> _Holding:
    """A running job's holding on the nodes the scheduler reported (a node twice: summed)."""
    total: dict[int, list[int]] = {}
    for share in job.resources.held:
        if share.node in nodes.index:
            row = total.setdefault(nodes.index[share.node], [0, 0, 0])
            row[0] += share.num_cpus
            row[1] += int(share.memory_bytes)
            row[2] += share.num_gpus
    return (
        np.array(list(total), np.int64),
        np.maximum(np.array(list(total.values()), np.int64).reshape(-1, 3), 0),
    )


def _queue(nodes: Sequence[NodeState], jobs: Sequence[PlacedJob], taken_at_s: float) -> _Queue:
    table = _nodes(nodes)
    shape_ids: dict[tuple[object, ...], int] = {}
    shapes: list[_Request] = []
    keys: dict[frozenset[str], int] = {}
    groups: dict[tuple[int, float], int] = {}
    running: list[tuple[int, _Holding, bool, float]] = []
    pending: list[tuple[int, _Request]] = []
    slots = np.zeros(len(jobs) + 1, np.int64)  # per job: nodes it holds, or asks for
    for j, job in enumerate(jobs):
        if job.running:
            limit = job.state.time_limit_s
            started = job.state.start_time_s if job.state.start_time_s is not None else taken_at_s
            left = math.inf if limit is None else started + limit - taken_at_s
            held = _held(job, table)
            running.append((j, held, job.resources.exclusive, left))
            slots[j + 1] = held[0].size
            continue
        req = _request(job, table, shape_ids)
        if req.shape == len(shapes):
            shapes.append(req)
        pending.append((j, req))
        slots[j + 1] = req.num_nodes
    cap = table.cap
    num_nodes = len(table.index)
    required = np.zeros((len(shapes), num_nodes), np.bool_)
    for k, req in enumerate(shapes):
        required[k, list(req.required)] = True
    return _Queue(
        shape_need=np.array(
            [cap if req.exclusive else np.broadcast_to(req.need, cap.shape) for req in shapes],
            np.int64,
        ).reshape(len(shapes), num_nodes, 3),
        shape_allowed=np.array([req.allowed for req in shapes], np.bool_).reshape(
            len(shapes), num_nodes
        ),
        shape_required=required,
        shape_nodes=np.array([req.num_nodes for req in shapes], np.int64),
        nodes=table,
        running=running,
        pending=pending,
        shapes=shapes,
        job_shape=np.array([req.shape for _, req in pending], np.int64),
        job_key=np.array(
            [keys.setdefault(req.partitions, len(keys)) for _, req in pending], np.int64
        ),
        job_group=np.array(
            [groups.setdefault((req.shape, req.limit_s), len(groups)) for _, req in pending],
            np.int64,
        ),
        slot_of=np.cumsum(slots),
    )


def forecast_on_nodes(
    nodes: Sequence[NodeState],
    jobs: Sequence[PlacedJob],
    *,
    taken_at_s: float,
    rng: np.random.Generator,
    samples: int = 100,
    horizon_s: float = DEFAULT_HORIZON_S,
    backfill_resolution_s: float = BACKFILL_RESOLUTION_S,
    backfill_interval_s: float = 0.0,
) -> dict[str, PendingForecast]:
    """Predicted start and completion (p10/p50/p90, epoch seconds; None: not within
    ``horizon_s`` or killed at its limit) of every pending job of ``jobs``, keyed by job id,
    from ``taken_at_s``, simulated ``samples`` times on ``nodes`` (module docstring).
    ``jobs`` are in the scheduler's priority order (running ones anywhere); a running job's
    ``runtime`` is its remaining wall time from ``taken_at_s``. ``backfill_resolution_s`` is
    Slurm's ``bf_resolution`` (0: exact times); ``backfill_interval_s`` its ``bf_interval``
    (0: backfill at every event; else a job behind its partitions' head starts only in a
    backfill cycle, the first at a phase drawn per sample after the runtimes). Raises
    ``SpecError`` for ``samples`` < 1."""
    if samples < 1:
        raise SpecError("samples", f"must be >= 1, got {samples}")
    if not any(not job.running for job in jobs):
        return {}
    queue = _queue(nodes, jobs, taken_at_s)
    normals = rng.standard_normal((samples, len(jobs)))
    if any(job.draw_group for job in jobs):
        normals = share_draws(normals, [job.draw_group for job in jobs])
    run_s = draw_runtimes(*band_arrays([job.runtime for job in jobs]), normals)
    phases = np.zeros(samples)
    if backfill_interval_s > 0:  # when in its cycle the scheduler is now: unknown, uniform
        phases = backfill_interval_s * np.asarray(rng.random(samples), np.float64)
    start = np.empty((samples, len(jobs)))
    done = np.empty((samples, len(jobs)))
    for s in range(samples):
        checkpoint()  # a caller's budget or cancellation stops a long forecast
        sample = _Sample(
            queue,
            run_s[s],
            horizon_s,
            origin_s=taken_at_s,
            resolution_s=backfill_resolution_s,
            backfill_interval_s=backfill_interval_s,
            backfill_phase_s=float(phases[s]),
        )
        sample.go()
        start[s] = sample.start
        done[s] = np.where(sample.timed_out | ~np.isfinite(sample.start), np.inf, sample.end)
    start_q, done_q = quantiles(start), quantiles(done)

    def epoch(values: FloatArray) -> tuple[float | None, float | None, float | None]:
        p10, p50, p90 = (
            None if not math.isfinite(v) or v > horizon_s else float(v) + taken_at_s
            for v in values.tolist()
        )
        return p10, p50, p90

    return {
        jobs[j].state.job_id: PendingForecast(
            job_id=jobs[j].state.job_id,
            start_s=epoch(start_q[:, j]),
            completion_s=epoch(done_q[:, j]),
            scheduler_start_s=jobs[j].state.expected_start_time_s,
        )
        for j, _ in queue.pending
    }
