"""Kueue admission: ClusterQueue quotas per pool (ResourceFlavor) with cohort borrowing and
preemption.

Follows Kueue's ClusterQueue semantics (kueue.sigs.k8s.io, "Cluster Queue" and "Cohort"):
a workload is admitted when its GPUs fit its ClusterQueue's nominal quota of the flavor, or,
in a cohort, when the cohort's total nominal quota of that flavor still has room and the
queue's borrowing (usage above its nominal quota) stays within its ``borrowingLimit``.
Workloads that fit without borrowing are admitted first, then those that borrow (Kueue
orders the heads it admits by "not borrowing first", then priority, then creation time).
Within a queue: priority, then creation (eligibility) time. ``StrictFIFO`` queues admit only
their head; ``BestEffortFIFO`` queues let later workloads in when the head does not fit.
Flavors of a multi-flavor workload are tried in fleet order. The GPUs must also be physically
free (pods of an admitted workload that does not fit the nodes would stay pending).

**Preemption** (``spec.preemption``, classical, not fair sharing). Facts from
kubernetes-sigs/kueue: the policies and their defaults (``Never``) from
``apis/kueue/v1beta1/clusterqueue_types.go`` at 00b014c140a64380a3e5d79999026cb44ace4fd7; the
candidates, their order and the minimal-set heuristic from
``pkg/scheduler/preemption/preemption.go`` at 47689ed27ddb18ee89328d6417f8b9b339ae8e51 and
``pkg/scheduler/preemption/classical/hierarchical_preemption.go`` and
``classical/candidate_generator.go`` at cd6c1d08a30a9cd585597cda8ce83e76dc394920; "within
nominal" and "fits in quota" from ``pkg/cache/resource_node.go`` at
034454cc512affdceb1f250d51f65c3d81525590 (``QuantitiesFitInQuota``,
``IsWithinNominalInResources``). A pending workload that fits no flavor's quota, even
borrowing, looks for workloads to evict in the flavor it asks for:

- *its own ClusterQueue* (``withinClusterQueue``): running workloads of lower priority
  (``LowerPriority``), or also of equal priority and created later
  (``LowerOrNewerEqualPriority``; created = eligible here);
- *other ClusterQueues of its cohort that use more than their nominal quota of the flavor*
  (``reclaimWithinCohort``): of lower priority (``LowerPriority``) or any (``Any``). When the
  workload fits its own nominal quota the cohort's borrowers are reclaimed outright; when it
  would itself borrow, only with ``borrowWithinCohort.policy: LowerPriority``, for
  candidates of lower priority and at most ``maxPriorityThreshold`` (others only if the
  workload ends up not borrowing).

Candidates go other queues first, then its own; each lower priority first, then the most
recently admitted first. They are removed in that order (a cohort candidate only while its
queue still borrows) until the workload fits, then added back in reverse order where it
still fits: the smallest set the heuristic finds. Tried with and without borrowing in the
order Kueue tries them. The evicted workloads stop at once, lose the work since their last
checkpoint and requeue with their priority and creation time (``simulate._Run.preempt``);
the preemptor starts at once (Kueue admits it one scheduling cycle later, seconds). A
workload preempts in the first pass, in admission order, before borrowers are admitted, and
only when its GPUs are then also physically free. A workload admitted at the same instant is
not a candidate (Kueue could evict it only a scheduling cycle later); this also keeps the
preemptions of one instant finite, where ``Any`` and ``borrowWithinCohort`` of two queues
would otherwise evict each other's workloads back and forth. A multi-flavor workload
preempts only when no flavor fits (Kueue's default ``whenCanPreempt: TryNextFlavor``). Not
modelled: fair sharing, lending limits, hierarchical cohorts. Jobs with no ClusterQueue use physical
capacity only and are never preempted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from planner.capacity.fleet import Preemption, PreemptionPolicy
from planner.capacity.workload import IntArray, Workload

if TYPE_CHECKING:  # the simulator imports this module; the sample state is only a type here
    from planner.capacity.simulate import _Run

__all__ = ["KueueQueues", "QuotaState"]

# How a candidate may be preempted (Kueue's classical preemption variants)
_SAME_QUEUE, _RECLAIM, _WITHOUT_BORROWING, _WHILE_BORROWING = 0, 1, 2, 3


class QuotaState:
    """GPUs in use per (ClusterQueue, pool) and per (cohort, pool) in one sample, and (when a
    queue preempts) the running options of each (queue, pool) with their admission times."""

    def __init__(self, queues: KueueQueues) -> None:
        self.q = queues
        w = queues.w
        self.use = np.zeros((len(w.queue_names), w.num_pools), np.int64)
        self.cohort_use = np.zeros((queues.num_cohorts, w.num_pools), np.int64)
        # (queue * P + pool) -> {running option: admission time, seconds}
        self.admitted: dict[int, dict[int, float]] = {}
        # options admitted at the instant ``fresh_s``: not preempted at it
        self.fresh: set[int] = set()
        self.fresh_s = -math.inf

    def _add(self, queue: int, pool: int, gpus: int) -> None:
        self.use[queue, pool] += gpus
        cohort = self.q.cohort_of[queue]
        if cohort >= 0:
            self.cohort_use[cohort, pool] += gpus

    def charge(self, k: int, admitted_s: float) -> None:
        """Count option ``k``'s GPUs against its job's queue and cohort from ``admitted_s``."""
        queue = self.q.queue_of[k]
        if queue >= 0:
            pool = self.q.pool_of[k]
            self._add(queue, pool, self.q.gpus_of[k])
            if self.q.preempting:
                self.admitted.setdefault(queue * self.q.w.num_pools + pool, {})[k] = admitted_s

    def release(self, k: int) -> None:
        """Give back what ``charge`` counted."""
        queue = self.q.queue_of[k]
        if queue >= 0:
            pool = self.q.pool_of[k]
            self._add(queue, pool, -self.q.gpus_of[k])
            if self.q.preempting:
                self.admitted[queue * self.q.w.num_pools + pool].pop(k, None)

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

    def borrowing(self, queue: int, pool: int) -> bool:
        """Whether ``queue`` uses more than its nominal quota of ``pool``."""
        return bool(self.use[queue, pool] > self.q.w.queue_nominal[queue, pool])


def _allowed(policy: PreemptionPolicy, newer: bool, priority: float, other: float) -> bool:
    """Whether ``policy`` lets a workload of ``priority`` preempt one of priority ``other``
    (``newer``: the other was created after it)."""
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return other < priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return other < priority or (other == priority and newer)
    return policy is PreemptionPolicy.ANY


class KueueQueues:
    """Static Kueue data of a workload: cohort totals and the global admission order of the
    pools Kueue starts (``pools``; default: all)."""

    def __init__(self, w: Workload, order: IntArray, pools: frozenset[int] | None = None) -> None:
        self.w = w
        self.pools = pools if pools is not None else frozenset(range(w.num_pools))
        self.num_cohorts = int(w.queue_cohort.max()) + 1 if w.queue_cohort.size else 0
        self.cohort_nominal = np.zeros((self.num_cohorts, w.num_pools))
        self.cohort_queues: list[list[int]] = [[] for _ in range(self.num_cohorts)]
        for queue in range(len(w.queue_names)):
            cohort = int(w.queue_cohort[queue])
            if cohort >= 0:
                self.cohort_nominal[cohort] += w.queue_nominal[queue]
                self.cohort_queues[cohort].append(queue)
        self.rank = np.empty(w.num_options, np.int64)
        self.rank[order] = np.arange(order.size)
        self.strict = bool(w.queue_strict.any())
        self.cohort_of: list[int] = w.queue_cohort.tolist()
        self.queue_of: list[int] = w.job_queue[w.opt_job].tolist() if w.num_options else []
        self.pool_of: list[int] = w.opt_pool.tolist()
        self.job_of: list[int] = w.opt_job.tolist()
        self.gpus_of: list[int] = w.opt_gpus.tolist()
        self.policies: tuple[Preemption, ...] = w.queue_preemption or tuple(
            Preemption() for _ in w.queue_names
        )
        self.preempts = [p.enabled for p in self.policies]
        self.preempting = any(self.preempts)
        # per option: its queue may preempt (it is a candidate even while its GPUs are busy)
        self.may_preempt = np.array(
            [q >= 0 and self.preempts[q] for q in self.queue_of], np.bool_
        ).reshape(-1)
        self.priority: list[float] = w.job_priority.tolist()
        self.created: list[float] = w.job_eligible_s.tolist()

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
        """Admit every workload the quotas and free GPUs allow at time ``t``, preempting
        where the queues' ``spec.preemption`` allows it (see the module docstring)."""
        w = self.w
        quota = run.quota
        assert quota is not None
        if quota.fresh_s != t:
            quota.fresh.clear()
            quota.fresh_s = t
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
            fit = w.opt_gpus[pending] <= free[w.opt_pool[pending]]
            if self.preempting:  # a preempting workload may need GPUs that are busy now
                fit |= self.may_preempt[pending]
            candidates = pending[fit].tolist()
            admitted = preempted = False
            # (queue, pool) -> the fewest GPUs that found nothing to preempt in this pass:
            # later workloads (lower priority, or equal and newer) asking as many or more
            # have at most the same candidates and need more room, so they find none either
            no_targets: dict[tuple[int, int], int] = {}
            job_of, pool_of, gpus_of, queue_of = (
                self.job_of,
                self.pool_of,
                self.gpus_of,
                self.queue_of,
            )
            for borrow in (False, True):
                for k in candidates:
                    j, p, g, queue = job_of[k], pool_of[k], gpus_of[k], queue_of[k]
                    if run.active[j] or heads.get(queue, j) != j:
                        continue
                    if g <= run.cap[p] - run.used[p] and quota.fits(queue, p, g, borrow=borrow):
                        run._begin(k, t, reservation_end=t + run.sim.limit_list[k])
                        quota.fresh.add(k)
                        admitted = True
                    elif (
                        not borrow
                        and queue >= 0
                        and self.preempts[queue]
                        and g < no_targets.get((queue, p), g + 1)
                    ):
                        found = self._preempt_for(run, k, t)
                        if found is None:
                            no_targets[queue, p] = g
                        elif found:
                            admitted = preempted = True
                            no_targets.clear()  # the state changed
                if admitted and self.strict:
                    break  # new heads: recompute them before admitting more
            if not admitted or not (self.strict or preempted):
                return  # admitting only uses quota up: nothing else fits until an event

    def _fits_quota(self, quota: QuotaState, options: list[int]) -> bool:
        """Whether one of ``options`` fits its queue's quota, borrowing (Kueue then admits
        it without preempting; free GPUs are not Kueue's concern)."""
        return any(
            quota.fits(self.queue_of[k], self.pool_of[k], self.gpus_of[k], borrow=True)
            for k in options
        )

    def _preempt_for(self, run: _Run, k: int, t: float) -> bool | None:
        """Evict the workloads Kueue would evict for option ``k`` and start it at ``t``
        (True); None when no set of them makes it fit its quota, False (nothing changed) when
        it needs no preemption or its GPUs would stay busy."""
        quota = run.quota
        assert quota is not None
        if self._fits_quota(quota, run.sim.job_opts[self.job_of[k]]):
            return False  # it fits (borrowing, or in another flavor): no preemption
        targets = self.targets(quota, k)
        if not targets:
            return None
        p, g = self.pool_of[k], self.gpus_of[k]
        if g > run.cap[p] - run.used[p] + sum(self.gpus_of[c] for c in targets):
            return False  # quota would fit but the GPUs would still be busy
        for c in targets:
            run.preempt(c, t)
        run._begin(k, t, reservation_end=t + run.sim.limit_list[k])
        quota.fresh.add(k)
        return True

    def targets(self, quota: QuotaState, k: int) -> list[int]:
        """The running options Kueue's classical preemption evicts so that option ``k`` fits
        its ClusterQueue's quota (empty: none does); ``quota`` is left as it was."""
        w = self.w
        j = self.job_of[k]
        queue, p, g = self.queue_of[k], self.pool_of[k], self.gpus_of[k]
        policy = self.policies[queue]
        priority, created = self.priority[j], self.created[j]
        num_pools = w.num_pools
        ordered: list[tuple[tuple[int, float, float, int], int, int]] = []  # (key, option, how)

        def collect(q: int, rule: PreemptionPolicy, how: int, group: int) -> None:
            for c, admitted_s in quota.admitted.get(q * num_pools + p, {}).items():
                if c in quota.fresh:
                    continue  # admitted at this instant: Kueue could evict it a cycle later
                jc = self.job_of[c]
                other = self.priority[jc]
                if not _allowed(rule, self.created[jc] > created, priority, other):
                    continue
                kind = how
                if how == _WHILE_BORROWING and (
                    policy.borrow_within_cohort is PreemptionPolicy.NEVER
                    or other >= priority
                    or (
                        policy.max_priority_threshold is not None
                        and other > policy.max_priority_threshold
                    )
                ):
                    kind = _WITHOUT_BORROWING
                ordered.append(((group, other, -admitted_s, -c), c, kind))

        cohort = self.cohort_of[queue]
        if cohort >= 0 and policy.reclaim_within_cohort is not PreemptionPolicy.NEVER:
            # fits its own nominal quota: reclaim outright, else the borrowWithinCohort rules
            advantage = quota.use[queue, p] + g <= w.queue_nominal[queue, p]
            for other_queue in self.cohort_queues[cohort]:
                if other_queue != queue and quota.borrowing(other_queue, p):
                    how = _RECLAIM if advantage else _WHILE_BORROWING
                    collect(other_queue, policy.reclaim_within_cohort, how, 0 if advantage else 1)
        from_others = bool(ordered)
        hierarchical = any(kind == _RECLAIM for _, _, kind in ordered)
        if policy.within_cluster_queue is not PreemptionPolicy.NEVER:
            collect(queue, policy.within_cluster_queue, _SAME_QUEUE, 2)
        if not ordered:
            return []
        ordered.sort()
        forbidden = policy.borrow_within_cohort is PreemptionPolicy.NEVER
        at_nominal = quota.use[queue, p] >= w.queue_nominal[queue, p]
        if not from_others or (forbidden and at_nominal):
            attempts: tuple[bool, ...] = (True,)
        elif forbidden and not hierarchical:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrow in attempts:
            removed: list[int] = []
            for _, c, kind in ordered:
                cq = self.queue_of[c]
                if kind != _SAME_QUEUE and (
                    (borrow and kind == _WITHOUT_BORROWING) or not quota.borrowing(cq, p)
                ):
                    continue  # only reclaimable while its queue borrows
                quota._add(cq, p, -self.gpus_of[c])
                removed.append(c)
                if quota.fits(queue, p, g, borrow=borrow):
                    targets = self._fill_back(quota, removed, k, borrow=borrow)
                    for c2 in targets:
                        quota._add(self.queue_of[c2], p, self.gpus_of[c2])
                    return targets
            for c in removed:
                quota._add(self.queue_of[c], p, self.gpus_of[c])
        return []

    def _fill_back(
        self, quota: QuotaState, removed: list[int], k: int, *, borrow: bool
    ) -> list[int]:
        """Add the removed candidates back, last removed first (the last one excepted), where
        option ``k`` still fits: Kueue's minimal-set step. Returns those still removed."""
        queue, p, g = self.queue_of[k], self.pool_of[k], self.gpus_of[k]
        keep = [True] * len(removed)
        for i in range(len(removed) - 2, -1, -1):
            c = removed[i]
            quota._add(self.queue_of[c], p, self.gpus_of[c])
            if quota.fits(queue, p, g, borrow=borrow):
                keep[i] = False
            else:
                quota._add(self.queue_of[c], p, -self.gpus_of[c])
        return [c for c, kept in zip(removed, keep, strict=True) if kept]
