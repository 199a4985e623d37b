"""Monte Carlo over the jobs' runtimes: draw the samples, simulate them (locally or on Ray).

Each sample draws one standard normal per job (shared by the job's options: the model's error
is the job's, not the pool's), turns it into a log-normal work time per option, adds sampled
interruptions (``runtime.sample_durations``) and runs the simulator. Samples are drawn up
front in the calling process and cut into chunks, so the outcome is the same whatever runs the
chunks (``LocalExecutor`` here, ``adapters.ray.RayExecutor`` past one machine: the same
``simulate_chunk`` function either way).

What-if scenarios use common random numbers: a job keeps its normal draw (by name) and the
interruption draws use the same seed, so differences between scenarios come from the changes,
not from sampling noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from planner.capacity.runtime import sample_durations
from planner.capacity.simulate import SampleOutcome, Simulator, completion
from planner.capacity.workload import BoolArray, FloatArray, IntArray, Workload
from planner.search.budget import checkpoint

__all__ = [
    "DEFAULT_CHUNK_SAMPLES",
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


@dataclass(frozen=True, slots=True)
class Outcomes:
    """Simulated futures, arrays of shape ``(S, J)`` (samples x jobs), as ``SampleOutcome``
    stacked: ``start_s``, ``release_s``, ``option``, ``timed_out``."""

    start_s: FloatArray
    release_s: FloatArray
    option: IntArray
    timed_out: BoolArray

    @property
    def completion_s(self) -> FloatArray:
        """When each job completed, ``(S, J)``; inf when it did not (killed or never ran)."""
        return completion(self.release_s, self.timed_out)

    @property
    def num_samples(self) -> int:
        """``S``."""
        return int(self.start_s.shape[0])

    @staticmethod
    def stack(parts: Sequence[SampleOutcome | Outcomes]) -> Outcomes:
        """Samples (``SampleOutcome``, ``(J,)`` arrays) or chunks (``Outcomes``) joined along
        the sample axis."""
        join = np.stack if parts and isinstance(parts[0], SampleOutcome) else np.concatenate
        return Outcomes(
            join([p.start_s for p in parts]),
            join([p.release_s for p in parts]),
            join([p.option for p in parts]),
            join([p.timed_out for p in parts]),
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


def draw_durations(w: Workload, normals: FloatArray, rng: np.random.Generator) -> FloatArray:
    """Wall times ``(S, K)`` of every option in every sample: log-normal work from the job's
    normal draw plus sampled interruptions."""
    work = np.exp(w.opt_log_work_mu + w.opt_log_work_sigma * normals[:, w.opt_job])
    return sample_durations(work, w.opt_gpus, w.opt_checkpoint_s, w.interruptions, rng)


def simulate_chunk(workloads: Sequence[Workload], item: tuple[int, FloatArray]) -> Outcomes:
    """Simulate the samples ``item = (scenario index, durations (s, K))`` of one scenario.

    The task function of every executor (a module-level function, so Ray ships it by
    reference). Between samples it stops when the caller's budget says so
    (``planner.search.budget.checkpoint``: nothing outside a budget scope, e.g. on Ray)."""
    index, durations = item
    sim = Simulator(workloads[index])
    outcomes = []
    for s in range(durations.shape[0]):
        checkpoint()
        outcomes.append(sim.run(durations[s]))
    return Outcomes.stack(outcomes)


def simulate_workloads(
    workloads: Sequence[Workload],
    durations: Sequence[FloatArray],
    executor: Executor | None = None,
    chunk_samples: int = DEFAULT_CHUNK_SAMPLES,
) -> list[Outcomes]:
    """Simulate every scenario's samples (``durations[i]`` of shape ``(S_i, K_i)``), all
    chunks of all scenarios submitted to ``executor`` at once; one ``Outcomes`` per scenario."""
    runner = executor if executor is not None else LocalExecutor()
    items: list[tuple[int, FloatArray]] = []
    owners: list[int] = []
    for index, d in enumerate(durations):
        for lo in range(0, d.shape[0], max(chunk_samples, 1)):
            items.append((index, d[lo : lo + chunk_samples]))
            owners.append(index)
    parts = runner.map(simulate_chunk, tuple(workloads), items)
    return [
        Outcomes.stack([p for p, o in zip(parts, owners, strict=True) if o == index])
        for index in range(len(workloads))
    ]
