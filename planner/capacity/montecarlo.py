"""Monte Carlo over the jobs' runtimes: draw the samples, simulate them (locally or on Ray).

Each sample draws one standard normal per job (shared by the job's options: the model's error
is the job's, not the pool's) and turns it into a work time per option (the two-piece
log-normal through the band's p10, p50 and p90: ``planner.capacity.runtime.draw_runtimes``);
the job's interruptions are a Poisson process on its own GPU-second clock (rate
``InterruptionModel.rate_per_gpu_hour / 3600`` per GPU-second), drawn up front per job from a
seed and the job's name; the simulator stops, checkpoints and requeues the runs
(``planner.capacity.simulate``). Samples are drawn up
front in the calling process and cut into chunks, so the outcome is the same whatever runs the
chunks (``LocalExecutor`` here, ``adapters.ray.RayExecutor`` past one machine: the same
``simulate_chunk`` function either way).

What-if scenarios use common random numbers: a job keeps its normal draw (by name) and the
interruption draws come from the same seed and the job's name, so differences between
scenarios come from the changes, not from sampling noise.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np

from planner.capacity.runtime import draw_runtimes
from planner.capacity.simulate import SampleOutcome, Simulator, completion
from planner.capacity.workload import BoolArray, FloatArray, IntArray, Workload
from planner.search.budget import checkpoint

__all__ = [
    "DEFAULT_CHUNK_SAMPLES",
    "Draws",
    "Executor",
    "LocalExecutor",
    "Outcomes",
    "draw_durations",
    "draw_normals",
    "simulate_chunk",
    "simulate_workloads",
]

DEFAULT_CHUNK_SAMPLES = 25
"""Samples per task: small enough to spread over workers, big enough to amortise a task."""

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn(shared, item)`` for every item, results in item order. ``shared`` is sent to
    workers once (Ray: one object in the object store)."""

    def map(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]``, possibly in parallel."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a cluster connection); idempotent."""
        ...


class LocalExecutor:
    """The in-process executor: a plain loop."""

    def map(self, fn: Callable[[S, T], R], shared: S, items: Sequence[T]) -> list[R]:
        """``[fn(shared, item) for item in items]``."""
        return [fn(shared, item) for item in items]

    def close(self) -> None:
        """Nothing to release."""


_SAMPLE_FIELDS = (
    "start_s", "release_s", "option", "timed_out", "finished", "wait_s", "failures",
    "limit_kills", "lost_gpu_s", "work_s", "preemptions", "preempted_gpu_s",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Simulated futures: the ``SampleOutcome`` arrays stacked, ``(S, J)`` (``delay_s``:
    ``(S, 3, J)``), and every run of every sample as ``(N,)`` arrays (``run_sample``,
    ``run_job``, ``run_option``, ``run_start_s``, ``run_end_s``); ``preemptions`` and
    ``preempted_gpu_s`` as in ``SampleOutcome``."""

    start_s: FloatArray
    release_s: FloatArray
    option: IntArray
    timed_out: BoolArray
    finished: BoolArray
    wait_s: FloatArray
    failures: IntArray
    limit_kills: IntArray
    lost_gpu_s: FloatArray
    work_s: FloatArray
    delay_s: FloatArray
    run_sample: IntArray
    run_job: IntArray
    run_option: IntArray
    run_start_s: FloatArray
    run_end_s: FloatArray
    preemptions: IntArray
    preempted_gpu_s: FloatArray

    @property
    def completion_s(self) -> FloatArray:
        """When each job completed, ``(S, J)``; inf when it did not (killed or never ran)."""
        return completion(self.release_s, self.finished)

    @property
    def num_samples(self) -> int:
        """``S``."""
        return int(self.start_s.shape[0])

    @staticmethod
    def stack(parts: Sequence[SampleOutcome | Outcomes]) -> Outcomes:
        """Samples (``SampleOutcome``) or chunks (``Outcomes``) joined along the sample
        axis (run sample indices renumbered)."""
        if parts and isinstance(parts[0], SampleOutcome):
            samples = [p for p in parts if isinstance(p, SampleOutcome)]
            arrays = {f: np.stack([getattr(p, f) for p in samples]) for f in _SAMPLE_FIELDS}
            run_sample = np.concatenate(
                [np.full(p.run_job.size, i, np.int64) for i, p in enumerate(samples)]
                or [np.zeros(0, np.int64)]
            )
            return Outcomes(
                **arrays,
                delay_s=np.stack([p.delay_s for p in samples]),
                run_sample=run_sample,
                run_job=np.concatenate([p.run_job for p in samples]),
                run_option=np.concatenate([p.run_option for p in samples]),
                run_start_s=np.concatenate([p.run_start_s for p in samples]),
                run_end_s=np.concatenate([p.run_end_s for p in samples]),
            )
        chunks = [p for p in parts if isinstance(p, Outcomes)]
        offsets = np.cumsum([0] + [c.num_samples for c in chunks])
        return Outcomes(
            **{f: np.concatenate([getattr(c, f) for c in chunks]) for f in _SAMPLE_FIELDS},
            delay_s=np.concatenate([c.delay_s for c in chunks]),
            run_sample=np.concatenate(
                [c.run_sample + o for c, o in zip(chunks, offsets[:-1], strict=True)]
            ),
            run_job=np.concatenate([c.run_job for c in chunks]),
            run_option=np.concatenate([c.run_option for c in chunks]),
            run_start_s=np.concatenate([c.run_start_s for c in chunks]),
            run_end_s=np.concatenate([c.run_end_s for c in chunks]),
        )


@dataclass(frozen=True, slots=True)
class Draws:
    """The random inputs of ``S`` samples of one scenario: ``work_s`` ``(S, K)`` (seconds of
    training of each option), ``fail_counts`` ``(S, J)`` (interruptions drawn per job) and
    ``fail_gpu_s`` (their times on each job's GPU-second clock, flat: sample by sample, job by
    job, ascending); ``backfill_phase_s`` ``(S,)``: each sample's first backfill cycle, seconds
    from the start (empty: at 0; ``Workload.backfill_interval_s``)."""

    work_s: FloatArray
    fail_counts: IntArray
    fail_gpu_s: FloatArray
    backfill_phase_s: FloatArray = field(default_factory=lambda: np.zeros(0))

    @property
    def num_samples(self) -> int:
        """``S``."""
        return int(self.work_s.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """``(S, K)``, the work times' shape."""
        return tuple(self.work_s.shape)

    def chunk(self, lo: int, hi: int) -> Draws:
        """Samples ``lo`` to ``hi`` (exclusive)."""
        per_sample = self.fail_counts.sum(axis=1)
        a, b = int(per_sample[:lo].sum()), int(per_sample[:hi].sum())
        return Draws(
            self.work_s[lo:hi],
            self.fail_counts[lo:hi],
            self.fail_gpu_s[a:b],
            self.backfill_phase_s[lo:hi],
        )


def draw_normals(
    job_names: Sequence[str],
    num_samples: int,
    rng: np.random.Generator,
    known: Mapping[str, FloatArray] | None = None,
) -> FloatArray:
    """Standard normals ``(S, J)``, one column per job; a job in ``known`` (name -> ``(S,)``)
    reuses its column (common random numbers across scenarios)."""
    out = rng.standard_normal((num_samples, len(job_names)))
    if known:
        for j, name in enumerate(job_names):
            if name in known:
                out[:, j] = known[name]
    return out


def draw_failures(w: Workload, num_samples: int, seed: int) -> tuple[IntArray, FloatArray]:
    """Interruption times of every job in every sample on the job's own GPU-second clock:
    a Poisson process of rate ``w.failure_rate_per_gpu_hour / 3600`` per GPU-second (the
    highest pool's rate; a run in a pool of a lower rate advances the clock by
    ``w.failure_scale`` of its GPU-seconds, in the simulator) up to the
    GPU-seconds its largest option could run in the horizon plus its longest plausible work
    time (p99.9 of the log-normal), so none is missing while the job runs. Each job's draws
    come from ``seed`` and its name (common random numbers across scenarios). Returns
    ``(counts (S, J), times)`` with times flat by sample, job, ascending."""
    rate = w.failure_rate_per_gpu_hour / 3600.0
    num_jobs = w.num_jobs
    counts = np.zeros((num_samples, num_jobs), np.int64)
    if rate == 0 or num_jobs == 0:
        return counts, np.zeros(0)
    max_gpus = np.zeros(num_jobs)
    np.maximum.at(max_gpus, w.opt_job, w.opt_gpus.astype(np.float64))
    longest = np.zeros(num_jobs)
    np.maximum.at(longest, w.opt_job, np.exp(w.opt_log_work_mu + 3.1 * w.opt_log_work_sigma))
    span_gpu_s = max_gpus * (w.horizon_s + longest)
    per_job: list[FloatArray] = []
    per_job_sample: list[IntArray] = []
    samples = np.arange(num_samples, dtype=np.min_scalar_type(max(num_samples - 1, 0)))
    for j, name in enumerate(w.job_names):
        if j % 64 == 0:
            checkpoint()  # a caller's budget or cancellation stops the draws of many jobs too
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        counts[:, j] = rng.poisson(rate * span_gpu_s[j], num_samples)
        times_j = rng.random(int(counts[:, j].sum())) * span_gpu_s[j]
        sample_j = np.repeat(samples, counts[:, j])
        within = np.lexsort((times_j, sample_j))  # by sample, ascending within each
        per_job.append(times_j[within])
        per_job_sample.append(sample_j)  # already in sample order
    # job by job, each by sample and time: a stable sort by sample gives sample, job, time
    sample = np.concatenate(per_job_sample)
    order = np.argsort(sample, kind="stable")
    return counts, np.concatenate(per_job)[order]


def draw_durations(
    w: Workload, normals: FloatArray, rng: np.random.Generator, failure_seed: int | None = None
) -> Draws:
    """The random inputs of ``S = len(normals)`` samples: work ``(S, K)`` from each job's
    normal draw (``runtime.draw_runtimes``: the two-piece log-normal of each option's band),
    and each job's interruptions (``draw_failures``, from ``failure_seed``, else a seed drawn
    from ``rng``), and with a ``Workload.backfill_interval_s`` each sample's first backfill
    cycle (uniform over one interval, from ``rng`` after the seed)."""
    below = w.opt_log_work_sigma_below if w.opt_log_work_sigma_below.size else w.opt_log_work_sigma
    work = draw_runtimes(
        np.exp(w.opt_log_work_mu), below, w.opt_log_work_sigma, normals[:, w.opt_job]
    )
    seed = failure_seed if failure_seed is not None else int(rng.integers(2**62))
    counts, times = draw_failures(w, normals.shape[0], seed)
    phase: FloatArray = np.zeros(0)
    if w.backfill_interval_s > 0:  # when in its cycle the scheduler is now: unknown, uniform
        phase = np.asarray(rng.random(normals.shape[0]), np.float64) * w.backfill_interval_s
    return Draws(work, counts, times, phase)


def simulate_chunk(workloads: Sequence[Workload], item: tuple[int, Draws]) -> Outcomes:
    """Simulate the samples ``item = (scenario index, draws of s samples)`` of one scenario.

    The task function of every executor (a module-level function, so Ray ships it by
    reference). Between samples it stops when the caller's budget says so
    (``planner.search.budget.checkpoint``: nothing outside a budget scope, e.g. on Ray)."""
    index, draws = item
    sim = Simulator(workloads[index])
    outcomes = []
    ends = np.cumsum(draws.fail_counts.sum(axis=1))
    for s in range(draws.num_samples):
        checkpoint()
        lo = int(ends[s - 1]) if s else 0
        phases = draws.backfill_phase_s
        outcomes.append(
            sim.run(
                draws.work_s[s],
                draws.fail_counts[s],
                draws.fail_gpu_s[lo : int(ends[s])],
                backfill_phase_s=float(phases[s]) if phases.size else 0.0,
            )
        )
    return Outcomes.stack(outcomes)


def simulate_workloads(
    workloads: Sequence[Workload],
    durations: Sequence[Draws],
    executor: Executor | None = None,
    chunk_samples: int = DEFAULT_CHUNK_SAMPLES,
) -> list[Outcomes]:
    """Simulate every scenario's samples (``durations[i]``: the draws of scenario ``i``),
    all chunks of all scenarios submitted to ``executor`` at once; one ``Outcomes`` per
    scenario."""
    runner = executor if executor is not None else LocalExecutor()
    items: list[tuple[int, Draws]] = []
    owners: list[int] = []
    step = max(chunk_samples, 1)
    for index, d in enumerate(durations):
        for lo in range(0, d.num_samples, step):
            items.append((index, d.chunk(lo, min(lo + step, d.num_samples))))
            owners.append(index)
    parts = runner.map(simulate_chunk, tuple(workloads), items)
    return [
        Outcomes.stack([p for p, o in zip(parts, owners, strict=True) if o == index])
        for index in range(len(workloads))
    ]
