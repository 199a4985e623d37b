"""Design-space exploration: candidate enumeration, vectorized evaluation, top-k, Pareto fronts.

Public API: ``parse_space(doc)`` (an explore document -> ``DesignSpace``), ``sweep`` (array-level
outcome), ``explore`` (the contract's entries), ``explore_document`` / ``explore_documents``
(JSON-ready dicts, errors as ``{"name", "error"}``), ``Objective``, ``REJECT_REASONS``.
"""

from planner.search.explore import (
    OBJECTIVES,
    ExploreResult,
    Objective,
    SweepOutcome,
    explore,
    explore_document,
    explore_documents,
    objective_values,
    sweep,
)
from planner.search.space import KNOBS, REJECT_REASONS, DesignSpace, SubSpace, parse_space

__all__ = [
    "KNOBS",
    "OBJECTIVES",
    "REJECT_REASONS",
    "DesignSpace",
    "ExploreResult",
    "Objective",
    "SubSpace",
    "SweepOutcome",
    "explore",
    "explore_document",
    "explore_documents",
    "objective_values",
    "parse_space",
    "sweep",
]
