"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness: first ingest cycle done)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from planner.service.api.models import Health, Readiness
from planner.service.loops import source_name
from planner.service.runtime import ServiceState


def make_router(state: ServiceState) -> APIRouter:
    """The health routes of ``state``."""
    router = APIRouter(tags=["health"])

    @router.get(
        "/healthz",
        operation_id="healthz",
        summary="Liveness: the process serves requests",
        response_model=Health,
    )
    def healthz() -> Health:
        return Health(status="ok")

    @router.get(
        "/readyz",
        operation_id="readyz",
        summary="Readiness: first ingest done",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Not ready yet"}},
    )
    def readyz() -> JSONResponse:
        body = Readiness(
            ready=state.ready,
            sources=[source_name(s) for s in state.ingestor.sources],
            cycles_ok=state.ingestor.cycles_ok,
            leader=state.is_leader,
        )
        return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)

    return router
