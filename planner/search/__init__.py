"""Design-space exploration over specs: candidate enumeration, vectorised evaluation, top-k,
Pareto fronts.

Public API: ``DesignSpace`` (a base ``Scenario``, GPU counts, global batch sizes and ``Knobs``,
the allowed values of the other knobs), ``sweep`` (array-level outcome), ``explore`` (typed
``ExploreResult`` with ``ExploreEntry`` values: scenario and prediction), ``Objective``,
``REJECT_REASONS``. Documents are parsed and results serialised at the edge,
``planner.scenario.plans``.
"""

from planner.search.explore import PLACEMENT_NOTE, ExploreEntry, ExploreResult, explore
from planner.search.objectives import OBJECTIVES, Objective, objective_values
from planner.search.space import KNOBS, REJECT_REASONS, DesignSpace, Knobs, SubSpace
from planner.search.sweep import SweepOutcome, sweep

__all__ = [
    "KNOBS",
    "OBJECTIVES",
    "PLACEMENT_NOTE",
    "REJECT_REASONS",
    "DesignSpace",
    "ExploreEntry",
    "ExploreResult",
    "Knobs",
    "Objective",
    "SubSpace",
    "SweepOutcome",
    "explore",
    "objective_values",
    "sweep",
]
