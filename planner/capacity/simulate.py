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

**Kueue** (ClusterQueue quota with cohort borrowing; kueue.sigs.k8s.io "Cluster Queue"): see
``planner.capacity.kueue``.

A job that runs past its time limit is killed there (``timed_out``) and does not complete.
Interruptions lengthen runs (``planner.capacity.runtime.sample_durations``), they do not
requeue. Removing GPUs that are busy drains them: running jobs keep them until they end.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass

import numpy as np

from planner.capacity.fleet import SchedulerKind
from planner.capacity.kueue import KueueQueues
from planner.capacity.workload import BoolArray, FloatArray, IntArray, Workload
from planner.catalog import get_gpu
from planner.search.budget import checkpoint
from planner.specs.hardware import Precision

__all__ = ["SampleOutcome", "Simulator", "completion"]

_END, _CAPACITY, _ELIGIBLE = 0, 1, 2
#: Event times of one sample between two budget checkpoints (``planner.search.budget``).
EVENTS_PER_CHECKPOINT = 256


def completion(release_s: FloatArray, timed_out: BoolArray) -> FloatArray:
    """Completion times: the release time, inf where the time limit killed the job."""
    return np.where(timed_out, np.inf, release_s)


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """One simulated future, arrays of shape ``(J,)``: ``start_s`` (seconds from the review's
    start, inf when the job never starts), ``release_s`` (when it gave its GPUs back: its end,
    or its time limit when killed there; inf: never), ``option`` (the option it ran as, -1
    none) and ``timed_out`` (killed at its time limit, so it never completed)."""

    start_s: FloatArray
    release_s: FloatArray
    option: IntArray
    timed_out: BoolArray

    @property
    def completion_s(self) -> FloatArray:
        """When each job completed (inf: never started, still running, or killed)."""
        return completion(self.release_s, self.timed_out)


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
        self.kueue: KueueQueues | None = None
        if w.scheduler is SchedulerKind.KUEUE:
            self.kueue = KueueQueues(w, order)

    def run(self, duration_s: FloatArray) -> SampleOutcome:
        """Simulate one future where option ``k`` runs ``duration_s[k]`` seconds of wall time
        once started (shape ``(K,)``; for a running job: from the review's start)."""
        return _Run(self, duration_s).go()


class _Run:
    """The mutable state of one sample."""

    def __init__(self, sim: Simulator, duration_s: FloatArray) -> None:
        w = sim.w
        self.sim, self.w, self.duration = sim, w, duration_s
        self.cap = w.pool_capacity.astype(np.int64).copy()
        self.used = np.zeros(w.num_pools, np.int64)
        self.pend = [np.zeros(o.size, np.bool_) for o in sim.pool_opts]
        self.running: list[dict[int, tuple[float, int]]] = [{} for _ in range(w.num_pools)]
        # the same (reservation end, GPUs) pairs kept sorted, for the shadow time
        self.reserved: list[list[tuple[float, int]]] = [[] for _ in range(w.num_pools)]
        self.start = np.full(w.num_jobs, np.inf)
        self.end = np.full(w.num_jobs, np.inf)
        self.option = np.full(w.num_jobs, -1, np.int64)
        self.timed_out = np.zeros(w.num_jobs, np.bool_)
        self.events: list[tuple[float, int, int]] = []
        self.dirty: set[int] = set()
        self.quota = sim.kueue.state() if sim.kueue is not None else None

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
        while events:
            times += 1
            if times % EVENTS_PER_CHECKPOINT == 0:
                checkpoint()  # a caller's budget or cancellation stops a long sample too
            t = events[0][0]
            while events and events[0][0] == t:
                _, kind, ident = heapq.heappop(events)
                if kind == _END:
                    self._finish(ident)
                elif kind == _ELIGIBLE:
                    for k in self.sim.job_opts[ident]:
                        self.pend[int(w.opt_pool[k])][self.sim.position[k]] = True
                        self.dirty.add(int(w.opt_pool[k]))
                else:
                    p = int(w.change_pool[ident])
                    self.cap[p] += int(w.change_delta[ident])
                    self.dirty.add(p)
            self._schedule(max(t, 0.0))
        return SampleOutcome(self.start, self.end, self.option, self.timed_out)

    def _schedule(self, t: float) -> None:
        if self.quota is not None:
            if self.dirty:
                self.dirty.clear()
                assert self.sim.kueue is not None
                self.sim.kueue.admit(self, t)
            return
        while self.dirty:
            p = min(self.dirty, key=self.sim.pass_rank.__getitem__)
            self.dirty.discard(p)
            self._backfill_pass(p, t)

    def _begin(self, k: int, t: float, *, reservation_end: float, elapsed: float = 0.0) -> None:
        """Start option ``k`` at ``t``; ``elapsed`` is how long it already ran before 0."""
        w, sim = self.w, self.sim
        j, p, g = int(w.opt_job[k]), int(w.opt_pool[k]), int(w.opt_gpus[k])
        for other in sim.job_opts[j]:
            q = int(w.opt_pool[other])
            if self.pend[q][sim.position[other]]:
                self.pend[q][sim.position[other]] = False
                if q != p:
                    self.dirty.add(q)
        self.used[p] += g
        if self.quota is not None:
            self.quota.charge(j, p, g)
        run = float(self.duration[k])
        limit = float(w.opt_limit_s[k]) - elapsed
        if run > limit:
            run, self.timed_out[j] = limit, True
        self.start[j] = t - elapsed
        self.option[j] = k
        end = t + max(run, 0.0)
        self.end[j] = end
        self.running[p][k] = (max(reservation_end, t), g)
        bisect.insort(self.reserved[p], self.running[p][k])
        if np.isfinite(end):
            heapq.heappush(self.events, (end, _END, k))

    def _finish(self, k: int) -> None:
        w = self.w
        p, g = int(w.opt_pool[k]), int(w.opt_gpus[k])
        self.used[p] -= g
        reserved = self.reserved[p]
        del reserved[bisect.bisect_left(reserved, self.running[p].pop(k))]
        if self.quota is not None:
            self.quota.release(int(w.opt_job[k]), p, g)
        self.dirty.add(p)

    def _start_at(self, p: int, pos: int, t: float) -> None:
        k = int(self.sim.pool_opts[p][pos])
        self._begin(k, t, reservation_end=t + float(self.w.opt_limit_s[k]))

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
        pend = self.pend[p]
        idx = np.flatnonzero(pend)
        if idx.size == 0:
            return
        free = int(self.cap[p] - self.used[p])
        gpus = self.sim.pool_gpus[p]
        if free <= 0 or int(gpus[idx].min()) > free:
            return
        i = 0
        while i < idx.size and int(gpus[idx[i]]) <= free:
            self._start_at(p, int(idx[i]), t)
            free -= int(gpus[idx[i]])
            i += 1
        if i >= idx.size - 1:
            return
        head_gpus = int(gpus[idx[i]])
        if head_gpus > self.cap[p]:
            shadow, extra = np.inf, free  # the head cannot start on today's capacity
        else:
            shadow, freed = self._shadow(p, head_gpus - free)
            extra = free + freed - head_gpus if np.isfinite(shadow) else free
        rest = idx[i + 1 :]
        rest = rest[pend[rest]]  # jobs started above in another pool's pass are gone
        g = gpus[rest]
        ends_in_time = t + self.sim.pool_limit[p][rest] <= shadow
        ok = (g <= free) & (ends_in_time | (g <= extra))
        while True:
            hits = np.flatnonzero(ok)
            if hits.size == 0:
                return
            m = int(hits[0])
            self._start_at(p, int(rest[m]), t)
            free -= int(g[m])
            if not ends_in_time[m]:
                extra -= int(g[m])
            ok[: m + 1] = False
            ok &= (g <= free) & (ends_in_time | (g <= extra))
