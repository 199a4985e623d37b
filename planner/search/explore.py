"""Design-space exploration: every valid layout of a job swept, the best ones predicted.

``explore(space, objective=...)`` sweeps the ``DesignSpace`` (``planner.search.sweep``), then
turns ranks ``rank_offset+1 .. rank_offset+top_k`` and the Pareto front into ``ExploreEntry``
values: each candidate's ``Scenario`` (``DesignSpace.scenario``: the base with that GPU count
and layout) and its ``Prediction`` from ``planner.perf.step.predict_batch``, so an entry is
exactly what ``planner predict`` says of that layout.

The Pareto front is over (objective, peak memory per GPU, GPU count): the layouts no other
layout beats on all three (with one GPU count: the fastest layout for each memory budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from planner.errors import InfeasibleError, SpecError
from planner.perf.candidates import CandidateColumns
from planner.perf.efficiency import EfficiencyModel
from planner.perf.step import Prediction, predict_batch
from planner.search.objectives import OBJECTIVE_FIELD, Objective, as_objective
from planner.search.space import DesignSpace
from planner.search.sweep import DEFAULT_CHUNK_SIZE, SweepOutcome, sweep
from planner.specs.scenario import Scenario

__all__ = ["PLACEMENT_NOTE", "ExploreEntry", "ExploreResult", "explore"]

PLACEMENT_NOTE = (
    "Megatron-Core rank order: tensor parallel fastest (inside the NVLink domain first), then "
    "context, data (experts inside data), pipeline slowest; follows from the degrees"
)
"""Where each parallel group sits (the engine's placement; not a knob of the search)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploreEntry:
    """One layout the search reports: its ``scenario`` (the job on ``num_gpus`` GPUs in this
    layout), ``planner predict``'s ``prediction`` of it, and its ``rank`` in the ranking
    (1 = best; None for a Pareto-front entry)."""

    scenario: Scenario
    prediction: Prediction
    rank: int | None = None

    @property
    def num_gpus(self) -> int:
        """GPUs of this layout."""
        return self.scenario.hardware.num_gpus

    @property
    def gpu_hours(self) -> float | None:
        """GPU time to train, GPU-hours (``num_gpus · time_to_train_s / 3600``); None when the
        scenario gives no token budget nor iteration count."""
        ttt = self.prediction.time_to_train_s
        return None if ttt is None else self.num_gpus * ttt / 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploreResult:
    """What ``explore`` found: the ``top`` entries (ranked) and the ``pareto`` front, the
    objective, and the sweep's ``outcome`` (counts: ``enumerated == evaluated +
    sum(rejected.values())``)."""

    name: str | None
    objective: Objective
    top: tuple[ExploreEntry, ...]
    pareto: tuple[ExploreEntry, ...]
    outcome: SweepOutcome = field(repr=False)

    @property
    def enumerated(self) -> int:
        """Candidates enumerated (the product of the per-knob value lists)."""
        return self.outcome.enumerated

    @property
    def evaluated(self) -> int:
        """Candidates that are valid layouts, fit in memory and were timed."""
        return self.outcome.evaluated

    @property
    def rejected(self) -> dict[str, int]:
        """Candidates not timed, per reason (``REJECT_REASONS``, in that order)."""
        return dict(self.outcome.rejected)

    @property
    def pareto_criteria(self) -> tuple[str, str, str]:
        """What the Pareto front trades off: the objective's quantity, peak memory per GPU
        and GPU count (prediction field names)."""
        return (OBJECTIVE_FIELD[self.objective], "memory_per_gpu_bytes", "num_gpus")


def _entries(
    space: DesignSpace,
    cols: CandidateColumns,
    efficiency: EfficiencyModel | None,
    first_rank: int | None,
) -> tuple[ExploreEntry, ...]:
    """The candidates ``cols`` as entries, predicted in one ``predict_batch`` call."""
    try:
        scenarios = [space.scenario(cols, i) for i in range(cols.n)]
    except SpecError as exc:  # an enumerated layout the scenario rules reject: a bug, say so
        raise InfeasibleError(
            f"internal: a candidate of the sweep is not a scenario: {exc}"
        ) from exc
    predictions = predict_batch(scenarios, efficiency)
    return tuple(
        ExploreEntry(
            scenario=scenario,
            prediction=prediction,
            rank=None if first_rank is None else first_rank + i,
        )
        for i, (scenario, prediction) in enumerate(zip(scenarios, predictions, strict=True))
    )


def _infeasible_message(outcome: SweepOutcome) -> str:
    rejected = {k: v for k, v in outcome.rejected.items() if v}
    parts = ", ".join(f"{v:,} {k}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
    what = f"no valid layout among {outcome.enumerated:,} candidates ({parts or 'none'})"
    if outcome.rejected["out_of_memory"] and math.isfinite(outcome.min_oom_memory_bytes):
        need = outcome.min_oom_memory_bytes / 2**30
        have = outcome.hbm_bytes / 2**30
        headroom = outcome.memory_headroom_bytes / 2**30
        return (
            f"{what}; every layout that tiles the GPUs is out of memory: the leanest needs "
            f"{need:.1f} GiB per GPU (plus {headroom:.1f} GiB of memory headroom, "
            f"hardware.memory_headroom_gib), the GPU has {have:.1f} GiB. Feasible with about "
            f"{math.ceil((need + headroom) / have)}x the GPUs (more pipeline/tensor sharding), "
            "a GPU with "
            f"more memory, or opening recompute (full) and zero_stage (3) if they were fixed"
        )
    return (
        f"{what}; no combination of the allowed values tiles the GPU count and global batch. "
        "Open more knobs (leave them out), or choose num_gpus and global_batch_size with "
        "common factors (powers of two) compatible with the model's heads and layers"
    )


def explore(
    space: DesignSpace,
    *,
    objective: Objective | str = Objective.TIME,
    top_k: int = 10,
    rank_offset: int = 0,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    workers: int = 1,
    efficiency: EfficiencyModel | None = None,
    with_pareto: bool = True,
) -> ExploreResult:
    """Sweep ``space`` and predict the entries of ranks ``rank_offset+1 ..
    rank_offset+top_k`` and (unless ``with_pareto`` is false) of the Pareto front.

    ``efficiency`` (default ``DefaultEfficiency()``) times the sweep and the entries alike.
    Raises ``InfeasibleError`` (saying why and what would make it feasible) when no candidate
    is valid and fits in memory; ``SpecError`` for a bad ``objective``, ``top_k``,
    ``rank_offset`` or a time-to-train objective without a token budget.
    """
    objective = as_objective(objective)
    if rank_offset < 0:
        raise SpecError("rank_offset", f"must be >= 0, got {rank_offset}")
    outcome = sweep(
        space,
        objective=objective,
        top_k=top_k + rank_offset,
        chunk_size=chunk_size,
        workers=workers,
        efficiency=efficiency,
    )
    if outcome.evaluated == 0:
        raise InfeasibleError(_infeasible_message(outcome))
    page = outcome.top.take(np.arange(rank_offset, outcome.top.n, dtype=np.int64))
    return ExploreResult(
        name=space.name,
        objective=objective,
        top=_entries(space, page, efficiency, first_rank=rank_offset + 1),
        pareto=_entries(space, outcome.pareto, efficiency, None) if with_pareto else (),
        outcome=outcome,
    )
