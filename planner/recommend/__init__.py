"""Allocation and parallelism recommendations over specs (scaling curve, knee, deadline,
restart advice). Documents are parsed and results serialised at the edge
(``planner.scenario.plans``).

Public API: ``RecommendRequest`` (``Pool``, ``RunningJob``, ``RestartAssumptions``),
``recommend(request)`` -> ``Recommendation`` (``CurvePoint``, ``RunningAdvice``,
``RestartCost``), ``default_gpu_counts``.
"""

from planner.recommend.allocation import (
    CurvePoint,
    Pool,
    Recommendation,
    RecommendRequest,
    best_layout,
    default_gpu_counts,
    recommend,
    scaling_curve,
)
from planner.recommend.restart import (
    DEFAULT_RESTART,
    RestartAssumptions,
    RestartCost,
    RunningAdvice,
    RunningJob,
)

__all__ = [
    "DEFAULT_RESTART",
    "CurvePoint",
    "Pool",
    "RecommendRequest",
    "Recommendation",
    "RestartAssumptions",
    "RestartCost",
    "RunningAdvice",
    "RunningJob",
    "best_layout",
    "default_gpu_counts",
    "recommend",
    "scaling_curve",
]
