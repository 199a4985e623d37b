"""Allocation and parallelism recommendations (scaling curve, knee, deadline, restart advice).

Public API: ``parse_request(doc)`` (a recommend document -> ``RecommendRequest``),
``recommend(request)`` (JSON-ready result), ``recommend_document(doc)`` (errors as
``{"name", "error"}``), ``RestartAssumptions``, ``Pool``, ``RunningJob``.
"""

from planner.recommend.allocation import (
    DEFAULT_RESTART,
    CurvePoint,
    Pool,
    RecommendRequest,
    RestartAssumptions,
    RunningJob,
    parse_request,
    recommend,
    recommend_document,
)

__all__ = [
    "DEFAULT_RESTART",
    "CurvePoint",
    "Pool",
    "RecommendRequest",
    "RestartAssumptions",
    "RunningJob",
    "parse_request",
    "recommend",
    "recommend_document",
]
