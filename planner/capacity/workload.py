"""The simulator's input in array form: pools, capacity changes, jobs and their options.

A *job* is one running, pending or planned job; an *option* is one way it can run: a pool, a
GPU count, a time limit and a log-normal work time (seconds of training, before
interruptions). Jobs that may run on several GPU types (``gpu: any``) have one option per pool;
every other job has one. Times are seconds relative to the review's start (``start_s``, epoch).
Built by ``planner.capacity.build.build_workload``; read by the simulator and the reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from planner.capacity.fleet import Preemption, SchedulerKind
from planner.capacity.runtime import InterruptionModel

__all__ = ["FloatArray", "IntArray", "JobKind", "Workload"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


class JobKind:
    """Where a job comes from: ``running`` / ``pending`` (today's queue) or ``planned``."""

    RUNNING = "running"
    PENDING = "pending"
    PLANNED = "planned"


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """Arrays of one review scenario (shapes: ``P`` pools, ``C`` capacity changes, ``J`` jobs,
    ``K`` options, ``Q`` Kueue ClusterQueues).

    Pools: ``pool_names``, ``pool_gpu`` (catalog keys), ``pool_capacity`` (GPUs at the start,
    ``(P,)``), ``pool_cost_per_gpu_hour`` (``(P,)``, NaN when unknown), ``pool_gpus_per_node``.
    Changes: ``change_time_s``, ``change_pool``, ``change_delta`` (``(C,)``, time order).
    Jobs: ``job_names``, ``job_kind`` (``JobKind``), ``job_team`` (index into ``teams``),
    ``job_eligible_s`` (when it may start; 0 for today's queue), ``job_deadline_s`` (inf when
    none), ``job_rank`` (scheduling order: priority, then eligibility, then input order; 0
    first), ``job_priority``, ``job_queue`` (ClusterQueue index, -1 none), ``job_start_s``
    (running jobs: their start, <= 0; NaN otherwise). Options: ``opt_job``, ``opt_pool``,
    ``opt_gpus``, ``opt_limit_s`` (the time limit asked for; inf: none),
    ``opt_log_work_mu``/``opt_log_work_sigma`` (work time, remaining for a running job: the
    log of its median and the log-space sd above the median of its two-piece log-normal,
    ``planner.capacity.runtime``), ``opt_checkpoint_s``; ``opt_log_work_sigma_below`` the sd
    below the median (empty: the same as above). ``pool_nodes`` ``(P,)``: the pool's jobs are
    placed on whole nodes of ``pool_gpus_per_node`` GPUs (``planner.capacity.nodes``), else
    on its GPU count (empty: none is); ``opt_num_nodes`` ``(K,)`` the nodes an option asks
    for (0, or empty: as many as its GPUs fill). Kueue: ``queue_names``, ``queue_cohort``
    (index, -1 none), ``queue_nominal`` / ``queue_borrowing_limit`` (``(Q, P)``, inf: no
    limit), ``queue_strict``. ``excluded`` maps a job that cannot run anywhere to why
    (``excluded_deadline_s`` its deadline, inf when none); ``warnings`` are one-line notes for
    the report. ``job_requeue`` ``(J,)``: a time-limit kill requeues the job (empty: none
    does); ``opt_layout`` the layout of each option in words (``tp 8 · pp 4 · dp 8``);
    ``job_notes`` one line per job (how its layout or checkpoint interval was chosen);
    ``pool_on_demand`` ``(P,)``: the pool is paid per GPU-hour used (empty: all reserved);
    ``cohort_names`` the names of the cohorts ``queue_cohort`` indexes; ``pool_kueue``
    ``(P,)``: Kueue starts the pool's jobs, else Slurm (empty: ``scheduler`` for every pool);
    ``pool_cluster`` each pool's cluster ("" outside a fleet of clusters).
    ``pool_interruption_rate`` ``(P,)``: unexpected interruptions per GPU-hour of jobs in
    each pool (empty: ``interruptions.rate_per_gpu_hour`` in every pool).
    ``queue_preemption`` ``(Q,)``: each ClusterQueue's ``spec.preemption`` (empty: none
    preempts). ``backfill_interval_s``: Slurm's ``bf_interval``, seconds between two backfill
    cycles (``planner.capacity.simulate``; 0: backfill at every event).
    """

    start_s: float
    horizon_s: float
    scheduler: SchedulerKind
    interruptions: InterruptionModel
    pool_names: tuple[str, ...]
    pool_gpu: tuple[str, ...]
    pool_capacity: IntArray
    pool_cost_per_gpu_hour: FloatArray
    pool_gpus_per_node: IntArray
    change_time_s: FloatArray
    change_pool: IntArray
    change_delta: IntArray
    job_names: tuple[str, ...]
    job_kind: tuple[str, ...]
    job_team: IntArray
    teams: tuple[str, ...]
    job_eligible_s: FloatArray
    job_deadline_s: FloatArray
    job_rank: IntArray
    job_priority: FloatArray
    job_queue: IntArray
    job_start_s: FloatArray
    opt_job: IntArray
    opt_pool: IntArray
    opt_gpus: IntArray
    opt_limit_s: FloatArray
    opt_log_work_mu: FloatArray
    opt_log_work_sigma: FloatArray
    opt_checkpoint_s: FloatArray
    queue_names: tuple[str, ...] = ()
    queue_cohort: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    queue_nominal: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    queue_borrowing_limit: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    queue_strict: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    excluded: tuple[tuple[str, str], ...] = ()
    excluded_deadline_s: tuple[float, ...] = ()
    warnings: tuple[str, ...] = ()
    job_requeue: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    pool_on_demand: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    cohort_names: tuple[str, ...] = ()
    pool_kueue: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    pool_cluster: tuple[str, ...] = ()
    opt_layout: tuple[str, ...] = ()
    pool_interruption_rate: FloatArray = field(default_factory=lambda: np.zeros(0))
    job_notes: tuple[str, ...] = ()
    opt_log_work_sigma_below: FloatArray = field(default_factory=lambda: np.zeros(0))
    pool_nodes: BoolArray = field(default_factory=lambda: np.zeros(0, np.bool_))
    opt_num_nodes: IntArray = field(default_factory=lambda: np.zeros(0, np.int64))
    queue_preemption: tuple[Preemption, ...] = ()
    backfill_interval_s: float = 0.0

    @property
    def num_jobs(self) -> int:
        """``J``."""
        return len(self.job_names)

    @property
    def num_options(self) -> int:
        """``K``."""
        return int(self.opt_job.size)

    @property
    def kueue_pools(self) -> tuple[int, ...]:
        """The pools whose jobs Kueue starts."""
        if self.pool_kueue.size:
            return tuple(int(p) for p in np.flatnonzero(self.pool_kueue))
        return tuple(range(self.num_pools)) if self.scheduler is SchedulerKind.KUEUE else ()

    @property
    def failure_rate_per_gpu_hour(self) -> float:
        """The highest interruption rate of any pool, per GPU-hour: every job's interruptions
        are drawn at this rate on its own clock (``montecarlo.draw_failures``), which runs at
        ``failure_scale`` of the GPU-seconds of a run in each pool."""
        rates = self.pool_interruption_rate
        fleet = self.interruptions.rate_per_gpu_hour
        return max(fleet, float(rates.max())) if rates.size else fleet

    @property
    def failure_scale(self) -> FloatArray:
        """``(P,)``: each pool's interruption rate over ``failure_rate_per_gpu_hour`` (1 when
        every pool has the fleet's rate, or none has interruptions: then none are drawn, and
        interruptions given on a job's clock, as tests give them, apply as they are)."""
        top = self.failure_rate_per_gpu_hour
        rates = self.pool_interruption_rate
        if not rates.size:
            rates = np.full(self.num_pools, self.interruptions.rate_per_gpu_hour)
        if top <= 0:
            return np.ones(self.num_pools)
        scale: FloatArray = rates / top
        return scale

    @property
    def num_pools(self) -> int:
        """``P``."""
        return len(self.pool_names)

    def capacity_steps(self, pool: int) -> tuple[FloatArray, IntArray]:
        """Pool ``pool``'s capacity as a step function: change times (the first is ``-inf``)
        and the GPU count from each, both ``(1 + changes,)``."""
        sel = self.change_pool == pool
        times = np.concatenate(([-np.inf], self.change_time_s[sel]))
        counts = self.pool_capacity[pool] + np.concatenate(([0], np.cumsum(self.change_delta[sel])))
        return times, counts.astype(np.int64)

    def job_index(self, name: str) -> int:
        """Index of the job called ``name`` (``KeyError`` when absent)."""
        return self.job_names.index(name)
