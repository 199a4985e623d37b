"""A capacity-planning review: the base forecast, the what-if scenarios side by side, and the
sizing search. ``run_review`` is what ``planner review`` and the service call.

Every scenario is simulated with the same random numbers (``montecarlo``: common random
numbers), so their differences come from the changes. All the samples of all scenarios are
submitted to one executor (local loop, or Ray past one machine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired

import numpy as np
from typing_extensions import TypedDict

from planner.capacity.evaluate import Case, Evaluator
from planner.capacity.fleet import Fleet, Placement
from planner.capacity.montecarlo import Executor
from planner.capacity.plan import PlannedJob
from planner.capacity.runtime import (
    DEFAULT_CHECKPOINT_INTERVAL_S,
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    InterruptionModel,
)
from planner.capacity.sizing import (
    NotCapacity,
    NotCapacityJson,
    Sizing,
    SizingJson,
    not_capacity,
    size_fleet,
)
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.stats import ScenarioJson, ScenarioResult, Summary
from planner.capacity.whatif import WhatIf, apply_what_if

__all__ = [
    "BASE_SCENARIO",
    "DEFAULT_SAMPLES",
    "ComparisonRow",
    "Review",
    "ReviewJson",
    "run_review",
]

BASE_SCENARIO = "base"
"""The name of the scenario without changes."""

DEFAULT_SAMPLES = 200


class ComparisonRow(Summary):
    """One scenario of a review's comparison (JSON-ready): its name and change, its
    ``Summary``, utilisation (busy over capacity GPU-hours at the median, ratio), GPU-hours
    used and lost, goodput (ratio; None when nothing ran), the fleet's cost (reserved
    capacity used or not, plus on-demand use) and the teams' chargeback cost (None without
    prices), and whether it compares with the base (``not_comparable``: why not, "" when it
    does). The API's response models use this type as it is; the keys marked ``NotRequired``
    came after the first version, so a review stored by that version lacks them."""

    scenario: str
    description: str
    utilisation: float
    gpu_hours: float
    lost_gpu_hours: NotRequired[float]
    goodput: NotRequired[float | None]
    cost: float | None
    usage_cost: NotRequired[float | None]
    comparable: NotRequired[bool]
    not_comparable: NotRequired[str]


class ReviewJson(TypedDict):
    """``Review.to_dict`` (``docs/capacity-formats.md``, "Review output")."""

    start_s: float
    horizon_s: float
    num_samples: int
    seed: int | None
    comparison: list[ComparisonRow]
    scenarios: list[ScenarioJson]
    sizing: list[SizingJson]
    not_capacity: list[NotCapacityJson]
    model_note: str


@dataclass(frozen=True, slots=True)
class Review:
    """The base scenario and the what-ifs (``scenarios[0]`` is the base), and the sizing
    answers (one ``Sizing`` per GPU type) when asked for, with the base's missed deadlines
    that no capacity saves (``not_capacity``)."""

    start_s: float
    horizon_s: float
    num_samples: int
    seed: int | None
    scenarios: tuple[ScenarioResult, ...]
    descriptions: tuple[str, ...]
    sizing: tuple[Sizing, ...] = ()
    not_capacity: tuple[NotCapacity, ...] = ()
    model_note: str = ""

    def not_comparable(self, index: int) -> str:
        """Why scenario ``index`` cannot be compared with the base ("" when it can): the jobs
        it leaves out that the base runs (its totals would lack their GPU-hours, cost and
        misses), each with its reason and the fix."""
        if index == 0:
            return ""
        base = {name for name, _ in self.base.excluded}
        dropped = [
            f"{name} cannot run here ({reason})"
            for name, reason in self.scenarios[index].excluded
            if name not in base
        ]
        if not dropped:
            return ""
        return (
            "not comparable until fixed: "
            + "; ".join(dropped)
            + ". Fix the what-if, or let the plan pick a layout (layout: best)"
        )

    @property
    def base(self) -> ScenarioResult:
        """The scenario without changes."""
        return self.scenarios[0]

    def comparison(self) -> list[ComparisonRow]:
        """One row per scenario: its summary, utilisation, GPU-hours used and lost, goodput,
        the fleet's cost (reserved capacity whether used or not, on-demand pools as used), the
        jobs' chargeback cost, and whether it can be compared with the base (``comparable``,
        ``not_comparable``: why not)."""
        rows = []
        for index, (scenario, description) in enumerate(
            zip(self.scenarios, self.descriptions, strict=True)
        ):
            cap = sum(p.capacity_gpu_hours for p in scenario.pool_weeks)
            busy = sum(p.busy_gpu_hours[1] for p in scenario.pool_weeks)
            costs = [t.cost_mean for t in scenario.teams]
            why = self.not_comparable(index)
            rows.append(
                ComparisonRow(
                    scenario=scenario.name,
                    description=description,
                    **scenario.summary(),
                    utilisation=busy / cap if cap else 0.0,
                    gpu_hours=sum(t.gpu_hours_mean for t in scenario.teams),
                    lost_gpu_hours=scenario.lost_gpu_hours_mean,
                    goodput=scenario.goodput,
                    cost=scenario.fleet_cost_mean,
                    usage_cost=(
                        None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
                    ),
                    comparable=not why,
                    not_comparable=why,
                )
            )
        return rows

    def to_dict(self) -> ReviewJson:
        """The review as JSON (``docs/capacity-formats.md``, "Review output")."""
        return {
            "start_s": self.start_s,
            "horizon_s": self.horizon_s,
            "num_samples": self.num_samples,
            "seed": self.seed,
            "comparison": self.comparison(),
            "scenarios": [s.to_dict() for s in self.scenarios],
            "sizing": [s.to_dict() for s in self.sizing],
            "not_capacity": [n.to_dict() for n in self.not_capacity],
            "model_note": self.model_note,
        }


def run_review(
    fleet: Fleet,
    planned: Sequence[PlannedJob] = (),
    snapshot: QueueSnapshot | None = None,
    what_ifs: Sequence[WhatIf] = (),
    *,
    start_s: float,
    samples: int = DEFAULT_SAMPLES,
    rng: np.random.Generator,
    seed: int | None = None,
    executor: Executor | None = None,
    sizing: bool = True,
    sizing_samples: int | None = None,
) -> Review:
    """Forecast the fleet from ``start_s`` (epoch seconds) over ``fleet.horizon_s``.

    ``samples`` Monte Carlo samples per scenario (``rng`` draws them; ``seed`` is only echoed
    in the output). ``what_ifs`` are simulated beside the base; with ``sizing`` the smallest
    addition per GPU type that meets every deadline at p90 is searched
    (``planner.capacity.sizing``, ``sizing_samples`` per evaluation, default
    ``min(samples, 100)``). Raises ``SpecError`` for what-if edits a job cannot take.
    """
    if samples < 1:
        raise ValueError("samples must be >= 1")
    evaluator = Evaluator(start_s=start_s, samples=samples, rng=rng, executor=executor)
    cases = [Case(BASE_SCENARIO, fleet, tuple(planned), snapshot)]
    for what_if in what_ifs:
        cases.append(
            Case(what_if.name, *apply_what_if(what_if, fleet, planned, snapshot, start_s=start_s))
        )
    results = evaluator.evaluate(cases)
    answers: tuple[Sizing, ...] = ()
    unsaved = not_capacity(results[0])
    if sizing:
        small = Evaluator(
            start_s=start_s,
            samples=sizing_samples or min(samples, 100),
            rng=rng,
            executor=executor,
            cache=evaluator.cache,
        )
        answers = tuple(size_fleet(small, cases[0], frozenset(n.job for n in unsaved)))
    return Review(
        start_s=start_s,
        horizon_s=fleet.horizon_s,
        num_samples=samples,
        seed=seed,
        scenarios=tuple(results),
        descriptions=("as planned", *(w.description or _describe(w) for w in what_ifs)),
        sizing=answers,
        not_capacity=unsaved,
        model_note=model_note(
            fleet.interruptions,
            fleet.placement,
            tuple(
                (pool.name, pool.interruptions_per_gpu_hour)
                for pool in fleet.pools
                if pool.interruptions_per_gpu_hour is not None
            ),
        ),
    )


def model_note(
    model: InterruptionModel,
    placement: Placement = Placement.NODES,
    pool_rates: tuple[tuple[str, float], ...] = (),
) -> str:
    """The failure and restart model of a review, with its source, and how its Slurm pools
    place jobs, in two sentences; ``pool_rates`` the pools with their own interruption rate
    (name, per GPU-hour), named with theirs."""
    rate = model.rate_per_gpu_hour
    source = (
        "Llama 3, arXiv 2407.21783 sec. 3.3.4: 419 unexpected interruptions in 54 days on "
        "16,384 H100, 419 / (54 x 24 x 16,384 GPU-hours)"
        if math.isclose(rate, LLAMA3_INTERRUPTIONS_PER_GPU_HOUR, rel_tol=1e-2)
        else "the fleet's interruptions_per_gpu_hour"
    )
    own = "; ".join(f"{name} {value:.3g}" for name, value in pool_rates)
    if own:
        source += (
            f"; pools with their own rate (the pool's interruptions_per_gpu_hour in the fleet "
            f"file): {own}"
        )
    return (
        f"Failures: {rate:.3g} interruptions per GPU-hour ({source}); restart overhead "
        f"{model.restart_overhead_s / 60:.0f} min. A run stopped by a failure or its time limit "
        "requeues and resumes from its last checkpoint (default interval "
        f"{DEFAULT_CHECKPOINT_INTERVAL_S / 60:.0f} min when the plan gives none). "
        + (
            "Slurm pools place jobs on whole nodes: a job waits until enough nodes each have "
            "its share of GPUs free."
            if placement is Placement.NODES
            else "Slurm pools count GPUs only (placement: gpus): a fragmented pool starts jobs "
            "sooner here than on the cluster."
        )
    )


def _describe(what_if: WhatIf) -> str:
    parts = [f"{c.gpus:+d} GPUs in {c.pool}" for c in what_if.capacity]
    for edit in what_if.jobs:
        layout = None if edit.layout is None else "changed"
        fields: dict[str, object] = {"gpu": edit.gpu, "pool": edit.pool, "num_gpus": edit.num_gpus}
        fields |= {"priority": edit.priority, "layout": layout}
        changed = ", ".join(f"{k} {v}" for k, v in fields.items() if v is not None)
        parts.append(f"{edit.job}: {changed}")
    return "; ".join(parts) or "no change"
