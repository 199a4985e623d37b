"""Simulating review cases with common random numbers (shared by the review and the sizing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.capacity.build import PredictionCache, build_workload
from planner.capacity.fleet import Fleet
from planner.capacity.montecarlo import (
    Draws,
    Executor,
    draw_durations,
    draw_normals,
    simulate_workloads,
)
from planner.capacity.plan import PlannedJob
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.stats import ScenarioResult, summarize
from planner.capacity.workload import FloatArray, Workload
from planner.search.budget import checkpoint

__all__ = ["Case", "Evaluator"]


@dataclass(frozen=True, slots=True)
class Case:
    """One scenario's inputs: the fleet, the planned jobs and today's queue."""

    name: str
    fleet: Fleet
    planned: tuple[PlannedJob, ...]
    snapshot: QueueSnapshot | None


@dataclass
class Evaluator:
    """Simulates cases with common random numbers: each job's normal draws are fixed by name
    the first time it is seen, its interruption draws come from one seed and its name."""

    start_s: float
    samples: int
    rng: np.random.Generator
    executor: Executor | None = None
    cache: PredictionCache = field(default_factory=PredictionCache)
    normals: dict[str, FloatArray] = field(default_factory=dict)
    failure_seed: int | None = None
    evaluations: int = 0

    def workload(self, case: Case) -> Workload:
        """The case's ``Workload`` (predictions cached across cases)."""
        return build_workload(
            case.fleet, case.planned, case.snapshot, start_s=self.start_s, cache=self.cache
        )

    def _durations(self, w: Workload) -> Draws:
        z = draw_normals(w.job_names, self.samples, self.rng, self.normals)
        for j, name in enumerate(w.job_names):
            self.normals.setdefault(name, z[:, j])
        if self.failure_seed is None:
            self.failure_seed = int(self.rng.integers(2**62))
        return draw_durations(w, z, self.rng, self.failure_seed)

    def evaluate(self, cases: Sequence[Case]) -> list[ScenarioResult]:
        """Simulate every case (one executor submission) and summarise each."""
        workloads = [self.workload(c) for c in cases]
        durations = [self._durations(w) for w in workloads]
        outcomes = simulate_workloads(workloads, durations, self.executor)
        self.evaluations += len(cases)
        results = []
        for w, o, c in zip(workloads, outcomes, cases, strict=True):
            checkpoint()
            results.append(summarize(w, o, c.name))
        return results
