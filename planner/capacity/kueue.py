"""Kueue admission: ClusterQueue quotas per pool (ResourceFlavor) with cohort borrowing.

Follows Kueue's ClusterQueue semantics (kueue.sigs.k8s.io, "Cluster Queue" and "Cohort"):
a workload is admitted when its GPUs fit its ClusterQueue's nominal quota of the flavor, or,
in a cohort, when the cohort's total nominal quota of that flavor still has room and the
queue's borrowing (usage above its nominal quota) stays within its ``borrowingLimit``.
Workloads that fit without borrowing are admitted first, then those that borrow (Kueue
orders the heads it admits by "not borrowing first", then priority, then creation time).
Within a queue: priority, then creation (eligibility) time. ``StrictFIFO`` queues admit only
their head; ``BestEffortFIFO`` queues let later workloads in when the head does not fit.
Flavors of a multi-flavor workload are tried in fleet order. The GPUs must also be physically
free (pods of an admitted workload that does not fit the nodes would stay pending). Not
modelled: preemption (``reclaimWithinCohort``, ``withinClusterQueue``), fair sharing, lending
limits. Jobs with no ClusterQueue use physical capacity only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from planner.capacity.workload import IntArray, Workload

if TYPE_CHECKING:  # the simulator imports this module; the sample state is only a type here
    from planner.capacity.simulate import _Run

__all__ = ["KueueQueues", "QuotaState"]


class QuotaState:
    """GPUs in use per (ClusterQueue, pool) and per (cohort, pool) in one sample."""

    def __init__(self, queues: KueueQueues) -> None:
        self.q = queues
        w = queues.w
        self.use = np.zeros((len(w.queue_names), w.num_pools), np.int64)
        self.cohort_use = np.zeros((queues.num_cohorts, w.num_pools), np.int64)

    def charge(self, job: int, pool: int, gpus: int) -> None:
        """Count ``gpus`` of ``pool`` against the job's queue and cohort."""
        queue = int(self.q.w.job_queue[job])
        if queue >= 0:
            self.use[queue, pool] += gpus
            cohort = int(self.q.w.queue_cohort[queue])
            if cohort >= 0:
                self.cohort_use[cohort, pool] += gpus

    def release(self, job: int, pool: int, gpus: int) -> None:
        """Give back what ``charge`` counted."""
        self.charge(job, pool, -gpus)

    def fits(self, queue: int, pool: int, gpus: int, *, borrow: bool) -> bool:
        """Whether the quota admits ``gpus`` more of ``pool`` for ``queue``."""
        if queue < 0:
            return True
        w = self.q.w
        used = self.use[queue, pool] + gpus
        cohort = int(w.queue_cohort[queue])
        room = bool(
            cohort < 0
            or self.cohort_use[cohort, pool] + gpus <= self.q.cohort_nominal[cohort, pool]
        )
        if used <= w.queue_nominal[queue, pool]:
            return room
        if not borrow or cohort < 0:
            return False
        borrowed = used - w.queue_nominal[queue, pool]
        return room and bool(borrowed <= w.queue_borrowing_limit[queue, pool])


class KueueQueues:
    """Static Kueue data of a workload: cohort totals and the global admission order of the
    pools Kueue starts (``pools``; default: all)."""

    def __init__(self, w: Workload, order: IntArray, pools: frozenset[int] | None = None) -> None:
        self.w = w
        self.pools = pools if pools is not None else frozenset(range(w.num_pools))
        self.num_cohorts = int(w.queue_cohort.max()) + 1 if w.queue_cohort.size else 0
        self.cohort_nominal = np.zeros((self.num_cohorts, w.num_pools))
        for queue in range(len(w.queue_names)):
            cohort = int(w.queue_cohort[queue])
            if cohort >= 0:
                self.cohort_nominal[cohort] += w.queue_nominal[queue]
        self.rank = np.empty(w.num_options, np.int64)
        self.rank[order] = np.arange(order.size)
        self.strict = bool(w.queue_strict.any())

    def state(self) -> QuotaState:
        """Fresh quota usage for one sample."""
        return QuotaState(self)

    def _pending(self, run: _Run) -> IntArray:
        parts = [
            opts[pend]
            for p, (opts, pend) in enumerate(zip(run.sim.pool_opts, run.pend, strict=True))
            if p in self.pools
        ]
        flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return flat[np.argsort(self.rank[flat], kind="stable")]

    def admit(self, run: _Run, t: float) -> None:
        """Admit every workload the quotas and free GPUs allow at time ``t``."""
        w = self.w
        quota = run.quota
        assert quota is not None
        while True:
            pending = self._pending(run)
            if pending.size == 0:
                return
            free = np.subtract(run.cap, run.used)
            heads: dict[int, int] = {}
            if self.strict:
                queues = w.job_queue[w.opt_job[pending]]
                first_queue, first_at = np.unique(queues, return_index=True)
                heads = {
                    int(q): int(w.opt_job[pending[i]])
                    for q, i in zip(first_queue, first_at, strict=True)
                    if q >= 0 and w.queue_strict[q]
                }
            candidates = pending[w.opt_gpus[pending] <= free[w.opt_pool[pending]]]
            admitted = False
            for borrow in (False, True):
                for k in candidates.tolist():
                    j, p, g = int(w.opt_job[k]), int(w.opt_pool[k]), int(w.opt_gpus[k])
                    queue = int(w.job_queue[j])
                    if run.active[j] or heads.get(queue, j) != j:
                        continue
                    if g <= run.cap[p] - run.used[p] and quota.fits(queue, p, g, borrow=borrow):
                        run._begin(k, t, reservation_end=t + float(w.opt_limit_s[k]))
                        admitted = True
                if admitted and self.strict:
                    break  # new heads: recompute them before admitting more
            if not admitted or not self.strict:
                return  # admitting only uses quota up: nothing else fits until an event
