"""Discrete-event simulation of the scheduler over the review horizon, one sample at a time.

Events: a job ends (at its sampled wall time, or killed at its time limit), a job becomes
eligible (its earliest start), a pool's capacity changes. After each event time the scheduler
runs a pass over the pools that changed:

**Slurm** (``sched/backfill`` with one reservation per partition, "EASY" backfill; Lifka 1995,
Mu'alem and Feitelson 2001, and Slurm's ``sched_config`` documentation): pending jobs of a pool
are taken in priority order and started while they fit; the first that does not fit is the
*head*. Its reservation (*shadow time*) is the earliest moment enough GPUs free up **assuming
every running job runs to its time limit**, as Slurm assumes; the GPUs still spare then are the
*extra* GPUs. A lower-priority job is then backfilled when it fits now and either its own time
limit ends before the shadow time or it fits in the extra GPUs (which it then uses up). Jobs
really end at their sampled runtimes, usually long before their limits, so reservations are
pessimistic exactly as on a real cluster. A job without a limit can be backfilled only when the
shadow time is infinite (the head cannot start while the running jobs hold their GPUs). Capacity
not yet installed is not known to the scheduler. A job eligible in several pools (``gpu: any``)
is in every pool's queue and starts in the first pool, in fleet order, that starts it; it may
hold a reservation in several pools. Pools are visited fastest GPU first (dense BF16 peak,
then fleet order), so such a job starts on the fastest GPU type that takes it at that moment.

**Nodes**: in a pool placed on whole nodes (``Workload.pool_nodes``, a Slurm pool of a fleet
with ``placement: nodes``; ``planner.capacity.nodes``) "fits" means enough nodes each with the
job's GPUs per node free, the head's reservation is on nodes free at the shadow time (those
busiest now first: ``NodeState.shadow``), and a backfilled job that does not end before it
must fit beside it on those nodes. With only whole-node jobs this starts every job when the
pooled model does; the pool's GPU count stays a bound either way.

**Kueue** (ClusterQueue quota with cohort borrowing and preemption; kueue.sigs.k8s.io
"Cluster Queue"): see ``planner.capacity.kueue``. A fleet of several clusters mixes both:
each pool is started by its cluster's scheduler (``Workload.pool_kueue``), in the same event
loop.

**Checkpoints, failures and requeues** (``planner.capacity.runtime``): a run ends when its
work is done, when its time limit is reached, or at the next unexpected interruption (a Poisson
process in the job's own GPU-seconds, drawn up front: ``montecarlo.draw_durations``). A stopped
run keeps the work up to its last checkpoint (``floor(useful / c) · c`` of the useful time of
that run, ``c`` the job's checkpoint interval) and goes back to the queue with its priority
(Slurm ``--requeue``, Kueue re-admission); the next run first pays the restart overhead ``R``
(re-scheduling, process start, checkpoint load). A failure always requeues (Slurm's default
``JobRequeue=1`` requeues the batch jobs of a failed node; Kueue re-admits an evicted
workload); a time-limit kill requeues unless the job says ``requeue: false``, in which case it
ends unfinished (``timed_out``), as does a job whose runs cannot save one checkpoint before
their limit. A job stopped after the horizon is not requeued (it stays unfinished). Removing
GPUs that are busy drains them: running jobs keep them until they end.

**Preemption** (Kueue only): an evicted workload's run stops at once like an interrupted one
(it keeps the work up to its last checkpoint, loses the rest, requeues with its priority and
pays the restart overhead on its next run); its lost time and the requeue wait count as
delay from capacity (another job took its GPUs). ``preempted_gpu_s`` is its share of
``lost_gpu_s``: the unsaved work of preempted runs plus the restart overhead of the runs after
them.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

import numpy as np

from planner.capacity.kueue import KueueQueues
from planner.capacity.nodes import NodePool, NodeState, request
from planner.capacity.workload import BoolArray, FloatArray, IntArray, Workload
from planner.catalog import get_gpu
from planner.search.budget import checkpoint
from planner.specs.hardware import Precision

__all__ = ["DONE", "FAILED", "LIMIT", "PREEMPTED", "SampleOutcome", "Simulator", "completion"]

_END, _CAPACITY, _ELIGIBLE, _BACKFILL = 0, 1, 2, 3
DONE, FAILED, LIMIT, PREEMPTED = 0, 1, 2, 3
"""How a run ends: its work done, an interruption, its time limit, evicted by Kueue."""
#: Event times of one sample between two budget checkpoints (``planner.search.budget``).
EVENTS_PER_CHECKPOINT = 256


def completion(release_s: FloatArray, finished: BoolArray) -> FloatArray:
    """Completion times: the release time where the job finished, inf elsewhere."""
    return np.where(finished, release_s, np.inf)


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """One simulated future, arrays of shape ``(J,)`` (seconds from the review's start):

    ``start_s`` first start (inf: never started), ``release_s`` when its last run gave its
    GPUs back (inf: never), ``option`` the option of its last run (-1: none), ``timed_out``
    (a time-limit kill ended it unfinished), ``finished`` (its work completed), ``wait_s``
    total time queued (eligible to first start, plus every requeue's wait; inf: never
    started), ``failures`` and ``limit_kills`` (runs stopped by each), ``lost_gpu_s``
    (GPU-seconds of lost work and restart overhead), ``delay_s`` ``(3, J)``: the delay from
    capacity (first wait), time-limit kills and failures (their lost wall time plus the
    requeue waits after them), ``work_s`` the work time of its last option, ``preemptions``
    (runs evicted by Kueue preemption) and ``preempted_gpu_s`` (the GPU-seconds of
    ``lost_gpu_s`` they caused). Runs as ``(N,)`` arrays: ``run_job``, ``run_option``,
    ``run_start_s``, ``run_end_s``."""

    start_s: FloatArray
    release_s: FloatArray
    option: IntArray
    timed_out: BoolArray
    finished: BoolArray
    wait_s: FloatArray
    failures: IntArray
    limit_kills: IntArray
    lost_gpu_s: FloatArray
    delay_s: FloatArray
    work_s: FloatArray
    run_job: IntArray
    run_option: IntArray
    run_start_s: FloatArray
    run_end_s: FloatArray
    preemptions: IntArray
    preempted_gpu_s: FloatArray

    @property
    def completion_s(self) -> FloatArray:
        """When each job completed (inf: never started, unfinished, or killed)."""
        return completion(self.release_s, self.finished)


class Simulator:
    """The static part of the simulation of one ``Workload`` (per-pool queues in priority
    order), reused for every sample: ``run(duration_s)`` simulates one future."""

    def __init__(self, workload: Workload) -> None:
        w = workload
        self.w = w
        order = np.lexsort((np.arange(w.num_options), w.job_rank[w.opt_job]))
        self.pool_opts: list[IntArray] = [order[w.opt_pool[order] == p] for p in range(w.num_pools)]
        self.pool_gpus = [w.opt_gpus[o] for o in self.pool_opts]
        self.pool_limit = [w.opt_limit_s[o] for o in self.pool_opts]
        self.position = np.zeros(w.num_options, np.int64)
        for opts in self.pool_opts:
            self.position[opts] = np.arange(opts.size)
        self.job_opts: list[list[int]] = [[] for _ in range(w.num_jobs)]
        for k in order.tolist():
            self.job_opts[int(w.opt_job[k])].append(k)
        speed = [get_gpu(gpu).peak_flop_per_s(Precision.BF16) for gpu in w.pool_gpu]
        self.pass_rank = {
            p: r for r, p in enumerate(sorted(range(w.num_pools), key=lambda p: (-speed[p], p)))
        }
        self.running0 = [j for j in range(w.num_jobs) if np.isfinite(w.job_start_s[j])]
        self.eligible = sorted(
            (float(w.job_eligible_s[j]), j)
            for j in range(w.num_jobs)
            if not np.isfinite(w.job_start_s[j])
        )
        self.kueue_pools = frozenset(w.kueue_pools)
        self.kueue: KueueQueues | None = None
        if self.kueue_pools:
            self.kueue = KueueQueues(w, order, self.kueue_pools)
        self.job_list: list[int] = w.opt_job.tolist()
        self.pool_list: list[int] = w.opt_pool.tolist()
        self.position_list: list[int] = self.position.tolist()
        self.limit_list = w.opt_limit_s.tolist()
        self.ckpt_list = w.opt_checkpoint_s.tolist()
        self.gpus_list = w.opt_gpus.tolist()
        self.eligible_list = w.job_eligible_s.tolist()
        self.requeue = w.job_requeue.tolist() if w.job_requeue.size else [False] * w.num_jobs
        self.restart_s = float(w.interruptions.restart_overhead_s)
        # how fast a run in each pool advances a job's failure clock (GPU-seconds at the
        # rate the interruptions are drawn at: montecarlo.draw_failures)
        self.fail_scale: list[float] = w.failure_scale.tolist()
        # whole-node placement (planner.capacity.nodes) in the pools that have it
        self.node_pools: dict[int, NodePool] = {}
        for p in np.flatnonzero(w.pool_nodes).tolist() if w.pool_nodes.size else []:
            sel = np.flatnonzero(w.change_pool == p)
            self.node_pools[p] = NodePool.build(
                int(w.pool_capacity[p]), int(w.pool_gpus_per_node[p]), sel, w.change_delta[sel]
            )
        asked = w.opt_num_nodes if w.opt_num_nodes.size else np.zeros(w.num_options, np.int64)
        gpn = w.pool_gpus_per_node
        shape = np.array(
            [
                request(int(g), int(gpn[p]) if gpn.size else 1, int(n))
                for g, p, n in zip(w.opt_gpus, w.opt_pool, asked, strict=True)
            ],
            np.int64,
        ).reshape(-1, 2)
        self.nodes_list: list[int] = shape[:, 0].tolist()
        self.per_node_list: list[int] = shape[:, 1].tolist()
        self.pool_nodes_needed = [shape[o, 0] for o in self.pool_opts]
        self.pool_per_node = [shape[o, 1] for o in self.pool_opts]
        # the same per pool as lists, for the event loop's one-at-a-time reads
        self.pool_opts_list: list[list[int]] = [o.tolist() for o in self.pool_opts]
        self.pool_nodes_list: list[list[int]] = [n.tolist() for n in self.pool_nodes_needed]
        self.pool_per_node_list: list[list[int]] = [q.tolist() for q in self.pool_per_node]

    def run(
        self,
        work_s: FloatArray,
        fail_counts: IntArray | None = None,
        fail_gpu_s: FloatArray | None = None,
        backfill_phase_s: float = 0.0,
    ) -> SampleOutcome:
        """Simulate one future where option ``k`` needs ``work_s[k]`` seconds of training
        (shape ``(K,)``; a running job: from the review's start). ``fail_counts`` ``(J,)``
        and ``fail_gpu_s`` (their concatenation, job by job, ascending within each) are the
        interruptions of each job on its own GPU-second clock; None: no interruptions.
        ``backfill_phase_s``: the first backfill cycle's time, seconds from the start (cycles
        every ``Workload.backfill_interval_s`` from there; module docstring)."""
        return _Run(self, work_s, fail_counts, fail_gpu_s, backfill_phase_s).go()


class _Run:
    """The mutable state of one sample."""

    def __init__(
        self,
        sim: Simulator,
        work_s: FloatArray,
        fail_counts: IntArray | None,
        fail_gpu_s: FloatArray | None,
        backfill_phase_s: float = 0.0,
    ) -> None:
        w = sim.w
        self.sim, self.w = sim, w
        self.bf_interval = float(w.backfill_interval_s)
        self.bf_phase = float(backfill_phase_s)
        self.bf_due: dict[int, float] = {}  # pool -> its next backfill cycle, once asked for
        self.bf_now: set[int] = set()  # pools whose backfill cycle is at this event time
        self.work = work_s.tolist()
        num = w.num_jobs
        if fail_counts is None or fail_gpu_s is None:
            self.fail_next = [0] * num
            self.fail_end = [0] * num
            self.fail_times: list[float] = []
        else:
            ends = np.cumsum(fail_counts)
            self.fail_next = (ends - fail_counts).tolist()
            self.fail_end = ends.tolist()
            self.fail_times = fail_gpu_s.tolist()
        self.cap: list[int] = w.pool_capacity.astype(np.int64).tolist()
        self.used = [0] * w.num_pools
        self.pend = [np.zeros(o.size, np.bool_) for o in sim.pool_opts]
        self.num_pend = [0] * w.num_pools  # pending options per pool (True in ``pend``)
        self.running: list[dict[int, tuple[float, int]]] = [{} for _ in range(w.num_pools)]
        # the same (reservation end, GPUs) pairs kept sorted, for the shadow time
        self.reserved: list[list[tuple[float, int]]] = [[] for _ in range(w.num_pools)]
        self.start = [math.inf] * num
        self.end = [math.inf] * num
        self.option = [-1] * num
        self.timed_out = [False] * num
        self.finished = [False] * num
        self.active = [False] * num
        self.progress = [0.0] * num  # share of the work saved in checkpoints
        self.gpu_clock = [0.0] * num  # failure clock: GPU-seconds run, at their pools' scale
        self.runs = [0] * num
        self.queued_at = list(sim.eligible_list)
        self.last_stop = [DONE] * num
        # how the current run ends, its length, its restart overhead and when it began
        self.ending: list[tuple[int, float, float, float]] = [(DONE, 0.0, 0.0, 0.0)] * num
        self.wait = [0.0] * num
        self.delay = [[0.0] * num for _ in range(3)]
        self.failures = [0] * num
        self.limit_kills = [0] * num
        self.lost_gpu_s = [0.0] * num
        self.preemptions = [0] * num
        self.preempted_gpu_s = [0.0] * num
        self.after_preempt = [False] * num  # the current run restarts a preempted one
        self.run_rows: list[tuple[int, int, float, float]] = []
        self.run_row = [-1] * num  # the row of each job's current run
        self.cancelled: set[tuple[float, int]] = set()  # end events of preempted runs
        self.events: list[tuple[float, int, int]] = []
        self.dirty: set[int] = set()
        self.quota = sim.kueue.state() if sim.kueue is not None else None
        self.nodes = {p: NodeState(pool) for p, pool in sim.node_pools.items()}
        # per running option of a node pool: its nodes, GPUs on each, whole nodes or not,
        # GPUs in all
        self.held: dict[int, tuple[IntArray, IntArray, bool, int]] = {}
        self.node_reserved: dict[int, list[tuple[float, int]]] = {p: [] for p in self.nodes}

    def go(self) -> SampleOutcome:
        w, events = self.w, self.events
        for j in self.sim.running0:
            k = self.sim.job_opts[j][0]
            started = float(w.job_start_s[j])
            self._begin(k, 0.0, reservation_end=started + float(w.opt_limit_s[k]), elapsed=-started)
        for t, j in self.sim.eligible:
            events.append((t, _ELIGIBLE, j))
        for i in range(w.change_time_s.size):
            events.append((float(w.change_time_s[i]), _CAPACITY, i))
        heapq.heapify(events)
        times = 0
        finish, enqueue, schedule, pop = self._finish, self._enqueue, self._schedule, heapq.heappop
        while events:
            times += 1
            if times % EVENTS_PER_CHECKPOINT == 0:
                checkpoint()  # a caller's budget or cancellation stops a long sample too
            t = events[0][0]
            while events and events[0][0] == t:
                _, kind, ident = pop(events)
                if kind == _END:
                    finish(ident, t)
                elif kind == _ELIGIBLE:
                    enqueue(ident)
                elif kind == _BACKFILL:
                    self.bf_now.add(ident)
                    self.dirty.add(ident)
                    self.bf_due.pop(ident, None)
                else:
                    p = int(w.change_pool[ident])
                    self.cap[p] += int(w.change_delta[ident])
                    if p in self.nodes:
                        self.nodes[p].change(ident)
                    self.dirty.add(p)
            if self.dirty:
                schedule(max(t, 0.0))
            self.bf_now.clear()
        return self._outcome()

    def _outcome(self) -> SampleOutcome:
        num = self.w.num_jobs
        start = np.array(self.start, np.float64)
        started = np.isfinite(start)
        rows = np.array(self.run_rows, np.float64).reshape(-1, 4)
        work = np.array(self.work)
        option = np.array(self.option, np.int64)
        last = np.where(option >= 0, option, 0)
        return SampleOutcome(
            start_s=start,
            release_s=np.array(self.end, np.float64),
            option=option,
            timed_out=np.array(self.timed_out, np.bool_),
            finished=np.array(self.finished, np.bool_),
            wait_s=np.where(started, np.array(self.wait), np.inf),
            failures=np.array(self.failures, np.int64),
            limit_kills=np.array(self.limit_kills, np.int64),
            lost_gpu_s=np.array(self.lost_gpu_s),
            delay_s=np.array(self.delay).reshape(3, num),
            work_s=np.where(option >= 0, work[last] if work.size else 0.0, np.nan),
            run_job=rows[:, 0].astype(np.int64),
            run_option=rows[:, 1].astype(np.int64),
            run_start_s=rows[:, 2].copy(),
            run_end_s=rows[:, 3].copy(),
            preemptions=np.array(self.preemptions, np.int64),
            preempted_gpu_s=np.array(self.preempted_gpu_s),
        )

    def _enqueue(self, j: int) -> None:
        """Job ``j`` joins the queue of every pool it may use."""
        sim = self.sim
        for k in sim.job_opts[j]:
            p = sim.pool_list[k]
            pend = self.pend[p]
            pos = sim.position_list[k]
            if not pend[pos]:
                pend[pos] = True
                self.num_pend[p] += 1
            self.dirty.add(p)

    def _schedule(self, t: float) -> None:
        kueue = self.sim.kueue_pools
        while self.dirty:
            if kueue and not self.dirty.isdisjoint(kueue):
                self.dirty -= kueue
                assert self.sim.kueue is not None
                self.sim.kueue.admit(self, t)
                continue
            if len(self.dirty) == 1:
                p = self.dirty.pop()
            else:
                p = min(self.dirty, key=self.sim.pass_rank.__getitem__)
                self.dirty.discard(p)
            if p in self.nodes:
                self._node_pass(p, t)
            else:
                self._backfill_pass(p, t)

    def _begin(
        self,
        k: int,
        t: float,
        *,
        reservation_end: float,
        elapsed: float = 0.0,
        room: IntArray | None = None,
    ) -> None:
        """Start a run of option ``k`` at ``t``; ``elapsed`` is how long it already ran
        before 0 (a job running at the review's start). In a pool placed on nodes the run
        takes nodes where ``room`` (free GPUs per node; default: those free now) fits it."""
        sim = self.sim
        j, p, g = sim.job_list[k], sim.pool_list[k], sim.gpus_list[k]
        reserved_until = max(reservation_end, t)
        on_nodes = p in self.nodes
        if on_nodes:
            self._take_nodes(k, p, room, reserved_until)
        pend_of, pool_of, position_of = self.pend, sim.pool_list, sim.position_list
        for other in sim.job_opts[j]:
            q = pool_of[other]
            pend = pend_of[q]
            pos = position_of[other]
            if pend[pos]:
                pend[pos] = False
                self.num_pend[q] -= 1
                if q != p:
                    self.dirty.add(q)
        self.used[p] += g
        if self.quota is not None:
            self.quota.charge(k, t - elapsed)
        waited = max(t - self.queued_at[j], 0.0)
        if self.runs[j] == 0:
            self.start[j] = t - elapsed
            self.delay[0][j] += waited
            restart = 0.0
        else:
            self.delay[self.last_stop[j]][j] += waited
            restart = sim.restart_s
        self.wait[j] += waited
        self.runs[j] += 1
        self.active[j] = True
        need = restart + (1.0 - self.progress[j]) * self.work[k]
        limit = sim.limit_list[k] - elapsed
        nxt = self.fail_next[j]
        clock_rate = g * sim.fail_scale[p]  # failure-clock seconds per second of this run
        to_failure = (
            (self.fail_times[nxt] - self.gpu_clock[j]) / clock_rate
            if nxt < self.fail_end[j] and clock_rate > 0
            else math.inf
        )
        if need <= limit and need <= to_failure:
            run, how = need, DONE
        elif to_failure < limit:
            run, how = max(to_failure, 0.0), FAILED
        else:
            run, how = max(limit, 0.0), LIMIT
        self.ending[j] = (how, run, restart, t)
        self.option[j] = k
        end = t + run
        self.end[j] = end
        self.run_row[j] = len(self.run_rows)
        self.run_rows.append((j, k, t, end))
        running = self.running[p][k] = (reserved_until, g)
        if not on_nodes:  # a node pool keeps its reservations in ``node_reserved``
            bisect.insort(self.reserved[p], running)
        if math.isfinite(end):
            heapq.heappush(self.events, (end, _END, k))

    def _take_nodes(self, k: int, p: int, room: IntArray | None, reservation_end: float) -> None:
        """Option ``k`` takes its nodes of pool ``p``; a job running at the review's start
        that does not fit as a request is spread over the freest nodes (``NodeState.spread``)."""
        state, sim = self.nodes[p], self.sim
        nodes, per_node = sim.nodes_list[k], sim.per_node_list[k]
        chosen = state.choose(nodes, per_node, room)
        if chosen is None:
            chosen, amounts = state.spread(sim.gpus_list[k], nodes)
            whole, gpus = False, int(amounts.sum())
        else:
            amounts = state.filled(per_node, nodes)
            whole, gpus = per_node == state.pool.gpus_per_node, nodes * per_node
        state.take(chosen, amounts, whole)
        self.held[k] = (chosen, amounts, whole, gpus)
        bisect.insort(self.node_reserved[p], (reservation_end, k))

    def _finish(self, k: int, t: float) -> None:
        """Option ``k``'s run ends at ``t`` as ``_begin`` planned (unless it was preempted)."""
        if self.cancelled and (t, k) in self.cancelled:
            self.cancelled.discard((t, k))
            return
        how, run, restart, _ = self.ending[self.sim.job_list[k]]
        self._stop(k, t, how, run, restart)

    def preempt(self, k: int, t: float) -> None:
        """Kueue evicts the running option ``k`` at ``t``: its run stops there (its planned
        end event is dropped) and it requeues (``planner.capacity.kueue``)."""
        j = self.sim.job_list[k]
        _, _, restart, began = self.ending[j]
        if math.isfinite(self.end[j]):
            self.cancelled.add((self.end[j], k))
        self.end[j] = t
        row = self.run_row[j]
        self.run_rows[row] = (*self.run_rows[row][:3], t)
        self._stop(k, t, PREEMPTED, t - began, restart)

    def _stop(self, k: int, t: float, how: int, run: float, restart: float) -> None:
        """Account a run of option ``k`` that ended at ``t`` after ``run`` seconds (the first
        ``restart`` of them restarting), and requeue the job where it goes on."""
        w, sim = self.w, self.sim
        j, p, g = sim.job_list[k], sim.pool_list[k], sim.gpus_list[k]
        self.used[p] -= g
        if p in self.nodes:
            nodes, amounts, whole, _ = self.held.pop(k)
            self.nodes[p].give(nodes, amounts, whole)
            ends = self.node_reserved[p]
            del ends[bisect.bisect_left(ends, (self.running[p].pop(k)[0], k))]
        else:
            reserved = self.reserved[p]
            del reserved[bisect.bisect_left(reserved, self.running[p].pop(k))]
        if self.quota is not None:
            self.quota.release(k)
        self.dirty.add(p)
        self.active[j] = False
        if self.after_preempt[j]:  # this run's restart was the preemption's cost
            self.after_preempt[j] = False
            self.preempted_gpu_s[j] += g * min(run, restart)
        if how == DONE:
            self.finished[j] = True
            self.lost_gpu_s[j] += g * restart  # the last run's restart made no progress either
            self.delay[self.last_stop[j]][j] += restart
            return
        useful = max(run - restart, 0.0)
        interval = sim.ckpt_list[k]
        saved = math.floor(useful / interval) * interval if interval > 0 else useful
        work = self.work[k]
        if work > 0:
            self.progress[j] = min(self.progress[j] + saved / work, 1.0)
        self.gpu_clock[j] += g * sim.fail_scale[p] * run
        self.lost_gpu_s[j] += g * (run - saved)
        cause = 0 if how == PREEMPTED else how  # a preemption delays as capacity does
        self.delay[cause][j] += run - saved
        if how == PREEMPTED:
            self.preemptions[j] += 1
            self.preempted_gpu_s[j] += g * (useful - saved)
            self.after_preempt[j] = True
        elif how == FAILED:
            self.failures[j] += 1
            self.fail_next[j] += 1
        else:
            self.limit_kills[j] += 1
            if not sim.requeue[j] or saved <= 0.0:
                self.timed_out[j] = True  # ends unfinished: no requeue, or no progress possible
                return
        if t >= w.horizon_s:
            return  # stopped after the horizon: not simulated further
        self.last_stop[j] = cause
        self.queued_at[j] = t
        self._enqueue(j)

    def _start_at(self, p: int, pos: int, t: float, room: IntArray | None = None) -> int:
        k = self.sim.pool_opts_list[p][pos]
        self._begin(k, t, reservation_end=t + self.sim.limit_list[k], room=room)
        return k

    def _node_pass(self, p: int, t: float) -> None:
        """The Slurm pass of a pool placed on whole nodes: ``_backfill_pass`` with "fits"
        meaning enough nodes each with the GPUs a job asks per node, and the head's
        reservation on the nodes it would get when the running jobs reach their time limits;
        a later job that does not end before it must fit beside it on those nodes."""
        free = self.cap[p] - self.used[p]
        if not self.num_pend[p] or free <= 0:
            return  # nothing queued, or no GPU free
        pend, state, sim = self.pend[p], self.nodes[p], self.sim
        idx = pend.nonzero()[0]
        if int(sim.pool_gpus[p][idx].min()) > free:
            return  # not even the pool's GPU count fits any of them
        need_n, need_q = sim.pool_nodes_needed[p], sim.pool_per_node[p]
        nodes_list, per_node_list = sim.pool_nodes_list[p], sim.pool_per_node_list[p]
        i = 0
        while i < idx.size and state.fits(nodes_list[pos := int(idx[i])], per_node_list[pos]):
            self._start_at(p, pos, t)
            i += 1
        if i >= idx.size - 1 or not self._backfill_cycle(p, t):
            return
        head = int(idx[i])
        rest = idx[i + 1 :]
        if i:
            rest = rest[pend[rest]]  # jobs started above in another pool's pass are gone
        candidates = rest[state.fit_mask(need_n[rest], need_q[rest])]
        if not candidates.size:
            return  # nothing after the head fits now
        held = self.held
        shadow, left = state.shadow(
            nodes_list[head],
            per_node_list[head],
            ((end, *held[k]) for end, k in self.node_reserved[p]),
            sim.gpus_list[sim.pool_opts_list[p][head]],
        )
        # In priority order, a job that fits now starts when it ends before the shadow time
        # or fits beside the head's reservation (``room``: the nodes' free GPUs now and at
        # the shadow time). Within a pass free GPUs only shrink, so one look at each job in
        # turn is enough; as nothing changes between two starts, the next job to start is
        # the first candidate after the last start that qualifies, found for all of them at
        # once (a pass costs array operations per start, not Python steps per waiting job).
        cand_n, cand_q = need_n[candidates], need_q[candidates]
        on_time = t + sim.pool_limit[p][candidates] <= shadow
        any_late = not bool(on_time.all())
        first = 0
        while first < candidates.size:
            n, q = cand_n[first:], cand_q[first:]
            ok = state.fit_mask(n, q) & (q <= state.pool.gpus_per_node)
            room: IntArray | None = None
            if any_late:
                room = np.minimum(state.free, left)
                # nodes of ``room`` with at least q GPUs free, for every candidate's q
                at_least = room.size - np.searchsorted(np.sort(room), q, side="left")
                ok &= on_time[first:] | (at_least >= n)
            hits = ok.nonzero()[0]
            if not hits.size:
                return
            m = first + int(hits[0])
            late = not bool(on_time[m])
            k = self._start_at(p, int(candidates[m]), t, room if late else None)
            if late:
                where, amounts, _, _ = held[k]
                left[where] -= amounts
            first = m + 1

    def _backfill_cycle(self, p: int, t: float) -> bool:
        """Whether pool ``p``'s jobs behind its head may be backfilled at ``t``: always when
        backfill runs at every event (``backfill_interval_s`` 0), else only in a backfill
        cycle; otherwise the next cycle is asked for (an event that runs the pass again)."""
        if self.bf_interval <= 0 or p in self.bf_now:
            return True
        if p not in self.bf_due:
            cycles = math.floor((t - self.bf_phase) / self.bf_interval) + 1
            due = self.bf_phase + cycles * self.bf_interval
            self.bf_due[p] = due
            heapq.heappush(self.events, (due, _BACKFILL, p))
        return False

    def _shadow(self, p: int, need: int) -> tuple[float, int]:
        """(shadow time, GPUs freed by then) for ``need`` more GPUs, from the reservations."""
        ends = self.reserved[p]
        freed = 0
        for i, (res_end, g) in enumerate(ends):
            freed += g
            if freed >= need and (i + 1 == len(ends) or ends[i + 1][0] > res_end):
                return res_end, freed
        return np.inf, 0

    def _backfill_pass(self, p: int, t: float) -> None:
        if not self.num_pend[p]:
            return
        pend = self.pend[p]
        idx = pend.nonzero()[0]
        free = int(self.cap[p] - self.used[p])
        gpus = self.sim.pool_gpus[p]
        if free <= 0 or int(gpus[idx].min()) > free:
            return
        i = 0
        while i < idx.size and int(gpus[idx[i]]) <= free:
            self._start_at(p, int(idx[i]), t)
            free -= int(gpus[idx[i]])
            i += 1
        if i >= idx.size - 1 or not self._backfill_cycle(p, t):
            return
        head_gpus = int(gpus[idx[i]])
        if head_gpus > self.cap[p]:
            shadow, extra = np.inf, free  # the head cannot start on today's capacity
        else:
            shadow, freed = self._shadow(p, head_gpus - free)
            extra = free + freed - head_gpus if np.isfinite(shadow) else free
        rest = idx[i + 1 :]
        if i:
            rest = rest[pend[rest]]  # jobs started above in another pool's pass are gone
        g = gpus[rest]
        ends_in_time = t + self.sim.pool_limit[p][rest] <= shadow
        ok = (g <= free) & (ends_in_time | (g <= extra))
        while True:
            hits = ok.nonzero()[0]
            if hits.size == 0:
                return
            m = int(hits[0])
            self._start_at(p, int(rest[m]), t)
            free -= int(g[m])
            if not ends_in_time[m]:
                extra -= int(g[m])
            ok[: m + 1] = False
            ok &= (g <= free) & (ends_in_time | (g <= extra))
