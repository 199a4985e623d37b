"""``GET /metrics``: Prometheus exposition of the planner's registry
(``planner.service.metrics``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from planner.service.api.errors import error_responses


def make_router(registry: CollectorRegistry) -> APIRouter:
    """The metrics route over ``registry``."""
    router = APIRouter(tags=["metrics"])

    @router.get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics",
        response_class=Response,
        responses={
            200: {
                "description": "The Prometheus text format, version 0.0.4",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            **error_responses(503),
        },
    )
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
