"""The HTTP API: one router per resource, pydantic request/response models, one error shape,
and Swagger UI / ReDoc served from an installed package (no CDN).

``build_app(state, registry, ...)`` assembles the FastAPI app the composition root
(``planner.service.main``) serves.
"""

from planner.service.api.app import build_app

__all__ = ["build_app"]
