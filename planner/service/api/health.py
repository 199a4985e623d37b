"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness: first ingest cycle done and the
store usable).

Both are ``async`` and never queue behind the worker pool or FastAPI's thread pool, so a busy
planner still answers its probes; ``/readyz`` checks the store (a ``SELECT 1``, and for SQLite
that its file is still the one opened) on a thread of its own.
"""

from __future__ import annotations

import anyio
import anyio.to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from planner.service.api.models import Health, Readiness
from planner.service.loops import source_name
from planner.service.runtime import ServiceState

#: Threads that may check the store for /readyz at once.
STORE_CHECKS = 2


def make_router(state: ServiceState) -> APIRouter:
    """The health routes of ``state``."""
    router = APIRouter(tags=["health"])
    limiter = anyio.CapacityLimiter(STORE_CHECKS)

    @router.get(
        "/healthz",
        operation_id="healthz",
        summary="Liveness: the process serves requests",
        response_model=Health,
    )
    async def healthz() -> Health:
        return Health(status="ok")

    @router.get(
        "/readyz",
        operation_id="readyz",
        summary="Readiness: first ingest done and the store usable",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Not ready (see store)"}},
    )
    async def readyz() -> JSONResponse:
        problem = await anyio.to_thread.run_sync(state.store_problem, limiter=limiter)
        body = Readiness(
            ready=state.ready and problem is None,
            sources=[source_name(s) for s in state.ingestor.sources],
            cycles_ok=state.ingestor.cycles_ok,
            leader=state.is_leader,
            store=problem or "ok",
        )
        return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)

    return router
