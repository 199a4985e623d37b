"""Design-space exploration: every valid layout of a job swept, the best ones predicted.

``explore(space, objective=...)`` sweeps the ``DesignSpace`` (``planner.search.sweep``), then
turns ranks ``rank_offset+1 .. rank_offset+top_k`` and the Pareto front into ``ExploreEntry``
values: each candidate's ``Scenario`` (``DesignSpace.scenario``: the base with that GPU count
and layout) and its ``Prediction`` from ``planner.perf.step.predict_batch``, so an entry is
exactly what ``planner predict`` says of that layout.

The Pareto front is over (objective, peak memory per GPU, GPU count): the layouts no other
layout beats on all three (with one GPU count: the fastest layout for each memory budget).

Distinct choices: layouts predicted within ``tolerance`` of each other (relative, on the
objective; ``DEFAULT_TOLERANCE`` = 0.5 %) are one choice. In ranking order, the best layout
opens a choice and every layout within the tolerance of it joins it as an equivalent; the
next layout beyond opens the next choice (``planner.search.fronts``). Every ranked layout fits
in memory with the same headroom (the sweep ranks no other), so their memory fit is equal;
memory per GPU is not compared further (a context-parallel / data-parallel swap trades
activation memory at the same speed, the near-duplicate this removes), and each equivalent
carries its own prediction. A ranked entry lists its best ``MAX_LISTED_EQUIVALENTS``
equivalents (``equivalents``) and how many there are (``num_equivalents``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from planner.errors import InfeasibleError, SpecError
from planner.perf.candidates import CandidateColumns
from planner.perf.efficiency import EfficiencyModel
from planner.perf.step import Prediction, predict_batch
from planner.search.objectives import OBJECTIVE_FIELD, Objective, as_objective
from planner.search.space import DesignSpace
from planner.search.sweep import DEFAULT_CHUNK_SIZE, SweepOutcome, sweep
from planner.specs.feasibility import Violation
from planner.specs.scenario import Scenario

__all__ = [
    "DEFAULT_TOLERANCE",
    "MAX_LISTED_EQUIVALENTS",
    "PLACEMENT_NOTE",
    "ExploreEntry",
    "ExploreResult",
    "explore",
]

DEFAULT_TOLERANCE = 0.005
"""Layouts whose objective is within this fraction (0.5 %) of a better one's are one choice:
below the model's own resolution (its held-out errors are several per cent, ``RESULTS.md``)."""

MAX_LISTED_EQUIVALENTS = 8
"""Equivalents an entry lists (its best ones); ``num_equivalents`` counts them all."""

PLACEMENT_NOTE = (
    "Megatron-Core rank order: tensor parallel fastest (inside the NVLink domain first), then "
    "context, data (experts inside data), pipeline slowest; follows from the degrees"
)
"""Where each parallel group sits (the engine's placement; not a knob of the search)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploreEntry:
    """One layout the search reports: its ``scenario`` (the job on ``num_gpus`` GPUs in this
    layout), ``planner predict``'s ``prediction`` of it, and its ``rank`` in the ranking
    (1 = best; None for a Pareto-front entry or an equivalent). A ranked entry also holds its
    ``equivalents`` (at most ``MAX_LISTED_EQUIVALENTS`` of the ``num_equivalents`` layouts
    within the tolerance of it, best first; module docstring)."""

    scenario: Scenario
    prediction: Prediction
    rank: int | None = None
    equivalents: tuple[ExploreEntry, ...] = ()
    num_equivalents: int = 0

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


def _with_equivalents(
    space: DesignSpace,
    ranked: tuple[ExploreEntry, ...],
    outcome: SweepOutcome,
    rank_offset: int,
    efficiency: EfficiencyModel | None,
) -> tuple[ExploreEntry, ...]:
    """The ranked entries with their equivalents (``outcome.equivalents`` of rows
    ``rank_offset..``), the listed ones predicted in one ``predict_batch`` call."""
    if outcome.equivalent_of.size == 0:
        return ranked
    of = outcome.equivalent_of
    listed: list[int] = []
    for row in range(rank_offset, rank_offset + len(ranked)):
        listed.extend(np.flatnonzero(of == row)[:MAX_LISTED_EQUIVALENTS].tolist())
    chosen = np.asarray(listed, dtype=np.int64)
    entries = _entries(space, outcome.equivalents.take(chosen), efficiency, first_rank=None)
    out: list[ExploreEntry] = []
    for i, entry in enumerate(ranked):
        row = rank_offset + i
        mine = tuple(e for e, r in zip(entries, of[chosen], strict=True) if r == row)
        count = int(np.count_nonzero(of == row))
        out.append(replace(entry, equivalents=mine, num_equivalents=count))
    return tuple(out)


def _tensor_note(space: DesignSpace) -> str:
    """What an open tensor-parallel knob left out (``planner.search.values``), if anything."""
    if space.knobs.tensor_parallel is not None:
        return ""
    domain = space.base.hardware.nvlink_domain_size
    return (
        f"; open tensor_parallel takes only degrees inside one NVLink domain "
        f"(hardware.nvlink_domain_size = {domain}): list parallelism.tensor_parallel to search "
        "larger ones across domains"
    )


_ZERO_STAGE_FIXES: dict[str, str] = {
    Violation.FP8_PARAM_GATHER_NEEDS_SHARDED_OPTIMIZER.value: (
        "parallelism.fp8_param_gather needs zero_stage 1 or more under Megatron-LM: allow "
        "zero_stage 1-3, set megatron_fsdp to true, or fp8_param_gather to false"
    ),
    Violation.PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER.value: (
        "the optimizer dtypes (parallelism.main_params_dtype fp16, exp_avg_dtype / "
        "exp_avg_sq_dtype other than fp32, store_param_remainders) need Megatron-Core's "
        "distributed optimizer: allow zero_stage 1-3, set megatron_fsdp to true, or leave "
        "them out"
    ),
    Violation.BF16_MAIN_PARAMS_NOT_SUPPORTED_BY_FRAMEWORK.value: (
        "parallelism.main_params_dtype bf16 is refused by Megatron-Core's optimizer below "
        "zero_stage 3: allow zero_stage 3, set megatron_fsdp to true, or main_params_dtype to "
        "fp32 or fp16"
    ),
}
"""What to change where a rule that refuses ZeRO stages for a one-value field
(``planner.specs.feasibility``) refused candidates that tile the GPUs."""


def _infeasible_message(outcome: SweepOutcome, space: DesignSpace) -> str:
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
            + _tensor_note(space)
        )
    fixes = [fix for reason, fix in _ZERO_STAGE_FIXES.items() if rejected.get(reason)]
    if fixes:
        return f"{what}; " + "; ".join(fixes)
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
    tolerance: float | None = DEFAULT_TOLERANCE,
) -> ExploreResult:
    """Sweep ``space`` and predict the entries of ranks ``rank_offset+1 ..
    rank_offset+top_k`` and (unless ``with_pareto`` is false) of the Pareto front.

    ``tolerance``: layouts within this fraction of a better one's objective are one ranked
    choice, listed as its equivalents (module docstring); None ranks every layout on its own.
    ``efficiency`` (default ``DefaultEfficiency()``) times the sweep and the entries alike.
    Raises ``InfeasibleError`` (saying why and what would make it feasible) when no candidate
    is valid and fits in memory; ``SpecError`` for a bad ``objective``, ``top_k``,
    ``rank_offset``, ``tolerance`` or a time-to-train objective without a token budget.
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
        tolerance=tolerance,
    )
    if outcome.evaluated == 0:
        raise InfeasibleError(_infeasible_message(outcome, space))
    page = outcome.top.take(np.arange(rank_offset, outcome.top.n, dtype=np.int64))
    ranked = _entries(space, page, efficiency, first_rank=rank_offset + 1)
    return ExploreResult(
        name=space.name,
        objective=objective,
        top=_with_equivalents(space, ranked, outcome, rank_offset, efficiency),
        pareto=_entries(space, outcome.pareto, efficiency, None) if with_pareto else (),
        outcome=outcome,
    )
