"""The FastAPI app: routers, error handlers, and the API docs served from this process.

``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) load their scripts and styles from
``/static-docs``, the assets the ``fastapi-offline`` package installs, so the docs work on a
cluster without Internet access.

Every route declares who may call it (``planner.service.api.access``), request
bodies are limited per route and CPU-heavy work runs on a bounded worker pool with budgets
(``planner.service.api.work``); CORS is off unless ``auth.cors_origins`` lists origins; every
request's ``Host`` must be one of ``allowed_hosts`` (``planner.service.api.hosts``: 421).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CollectorRegistry

from planner import __version__
from planner.ports import TraceSource
from planner.search.budget import SearchBudget
from planner.service.api import (
    audit_routes,
    calibrations,
    health,
    jobs,
    metrics,
    plan,
    predict,
    reviews,
    simulate,
    stragglers,
)
from planner.service.api.access import Access, document_access
from planner.service.api.errors import install_error_handlers
from planner.service.api.hosts import AllowedHostsMiddleware, document_hosts
from planner.service.api.work import BodyKind, BodyLimitMiddleware, WorkerPool
from planner.service.audit import AuditLog
from planner.service.auth import Authorizer, OpenAuthorizer, TokenAuthorizer
from planner.service.learning import LearntCalibrations
from planner.service.runtime import ServiceState
from planner.service.security_settings import is_loopback
from planner.service.settings import Settings

#: Where the docs' assets are served from.
STATIC_DOCS = "/static-docs"
#: The Swagger UI and ReDoc assets shipped by ``fastapi-offline``.
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"

TITLE = "LLM capacity planner"


class _PlannerApi(FastAPI):
    """The app: its OpenAPI document also states who may call each operation
    (``document_access``) and the answers of the host check (``document_hosts``)."""

    def openapi(self) -> dict[str, object]:
        if self.openapi_schema is not None:
            return self.openapi_schema
        spec = super().openapi()  # kept as ``openapi_schema``: amended once, in place
        document_access(spec)
        document_hosts(spec)
        return spec


def _add_docs(app: FastAPI) -> None:
    app.mount(STATIC_DOCS, StaticFiles(directory=DOCS_ASSETS), name="static-docs")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{TITLE} - Swagger UI",
            swagger_js_url=f"{STATIC_DOCS}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_DOCS}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_DOCS}/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title=f"{TITLE} - ReDoc",
            redoc_js_url=f"{STATIC_DOCS}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC_DOCS}/favicon.png",
            with_google_fonts=False,
        )


def _access(settings: Settings, authorizer: Authorizer | None) -> Access:
    auth = settings.auth
    if authorizer is None:  # tests and embedders; the composition root passes its own
        authorizer = OpenAuthorizer() if auth.mode == "none" else TokenAuthorizer([])
    anonymous = auth.anonymous_read
    return Access(
        authorizer,
        anonymous_read=is_loopback(settings.host) if anonymous is None else anonymous,
        read_only=settings.read_only,
        cors_origins=auth.cors_origins,
    )


def _pool(settings: Settings) -> WorkerPool:
    limits = settings.limits

    def budget() -> SearchBudget:
        return SearchBudget(
            time_budget_s=limits.explore_time_budget_s,
            max_candidates=limits.explore_max_candidates,
            time_field="limits.explore_time_budget_s",
            candidates_field="limits.explore_max_candidates",
        )

    return WorkerPool(
        size=limits.workers, queue=limits.queue, retry_after_s=limits.retry_after_s, budget=budget
    )


def _body_limits(settings: Settings) -> dict[str, tuple[BodyKind, int, str]]:
    limits = settings.limits
    json_rule: tuple[BodyKind, int, str] = (
        "json",
        limits.json_body_bytes,
        "limits.json_body_bytes",
    )
    upload_rule: tuple[BodyKind, int, str] = (
        "upload",
        limits.upload_body_bytes,
        "limits.upload_body_bytes",
    )
    return {
        "/v1/predict": json_rule,
        "/v1/explore": json_rule,
        "/v1/recommendations": json_rule,
        "/v1/reviews": json_rule,
        "/v1/simulate": json_rule,
        "/v1/calibrations": upload_rule,
        "/v1/stragglers": upload_rule,
    }


def build_app(
    state: ServiceState,
    registry: CollectorRegistry,
    *,
    traces: TraceSource,
    start_loops: bool = True,
    plan_workers: int = 1,
    authorizer: Authorizer | None = None,
    audit: AuditLog | None = None,
) -> FastAPI:
    """The app over ``state``: the store is migrated and the loops start with the app
    (``start_loops=False``: cycles are driven by hand, e.g. in tests). ``authorizer`` checks
    bearer tokens (default: none accepted, or everyone with ``auth.mode: none``); ``audit``
    records accepted uploads."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start(start_loops=start_loops)
        try:
            yield
        finally:
            state.stop()

    life: Callable[[FastAPI], AbstractAsyncContextManager[None]] = lifespan
    app = _PlannerApi(
        title=TITLE,
        version=__version__,
        description="Predicts iteration time, memory, MFU and ETA of LLM training jobs.",
        lifespan=life,
        docs_url=None,
        redoc_url=None,
    )
    settings = state.settings
    access = _access(settings, authorizer)
    pool = _pool(settings)
    state.on_stop.append(pool.close)
    audit = audit or AuditLog(state.store, state.clock)
    app.state.planner = state
    app.state.pool = pool
    install_error_handlers(app)
    _add_docs(app)
    app.include_router(health.make_router(state))
    app.include_router(jobs.make_router(state, access))
    app.include_router(stragglers.make_router(traces, access, pool))
    learnt = LearntCalibrations(state.store, clock=state.clock)  # POST /v1/predict?cluster=
    app.include_router(
        predict.make_router(access, pool, (lambda: learnt) if settings.learning.apply else None)
    )
    app.include_router(plan.make_router(access, pool, workers=plan_workers))
    app.include_router(
        calibrations.make_router(
            state.store,
            state.clock,
            access,
            pool,
            audit,
            limits=settings.limits,
            max_runs=settings.learning.max_runs,
        )
    )
    app.include_router(audit_routes.make_router(state.store, access))
    app.include_router(metrics.make_router(registry))
    app.add_middleware(BodyLimitMiddleware, routes=_body_limits(settings))
    access.install(app)
    app.include_router(reviews.make_router(state, access, pool))
    app.include_router(
        simulate.make_router(
            state, access, pool, (lambda: learnt) if settings.learning.apply else None
        )
    )
    # outermost: a request under a host name not allowed reaches nothing (DNS rebinding)
    app.add_middleware(AllowedHostsMiddleware, allowed_hosts=settings.allowed_hosts)
    return app
