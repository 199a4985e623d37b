"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness: first ingest cycle done and the
store usable; in a split service, the ingest process running and reporting, and which part is
unhealthy: ``store``, ``ingest``).

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
        responses={503: {"model": Readiness, "description": "Not ready (see store and ingest)"}},
    )
    async def readyz() -> JSONResponse:
        body = await anyio.to_thread.run_sync(_readiness, state, limiter=limiter)
        return JSONResponse(body.model_dump(), status_code=200 if body.ready else 503)

    return router


def _readiness(state: ServiceState) -> Readiness:
    """Readiness of ``state`` (reads the store: on a worker thread). In a split service's API
    process the sources, cycles and leadership are those the ingest process last reported."""
    problem = state.store_problem()
    ingest = state.ingest_problem()
    view = state.ingest_view
    if view is None:
        sources = [source_name(s) for s in state.ingestor.sources]
        cycles_ok, leader, processes = state.ingestor.cycles_ok, state.is_leader, "single"
    else:
        status = view.current()
        sources = list(status.sources) if status else []
        cycles_ok = status.cycles_ok if status else 0
        leader = bool(status and status.leader)
        processes = "split" if view.gates_readiness else "api"
    return Readiness(
        ready=state.ready and problem is None,
        sources=sources,
        cycles_ok=cycles_ok,
        leader=leader,
        store=problem or "ok",
        ingest=ingest or "ok",
        processes=processes,
    )
