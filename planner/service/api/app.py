"""The FastAPI app: routers, error handlers, and the API docs served from this process.

``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) load their scripts and styles from
``/static-docs``, the assets the ``fastapi-offline`` package installs, so the docs work on a
cluster without Internet access.
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
from planner.service.api import (
    calibrations,
    health,
    jobs,
    metrics,
    plan,
    predict,
    reviews,
    stragglers,
)
from planner.service.api.errors import install_error_handlers
from planner.service.runtime import ServiceState

#: Where the docs' assets are served from.
STATIC_DOCS = "/static-docs"
#: The Swagger UI and ReDoc assets shipped by ``fastapi-offline``.
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"

TITLE = "LLM capacity planner"


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


def build_app(
    state: ServiceState,
    registry: CollectorRegistry,
    *,
    traces: TraceSource,
    start_loops: bool = True,
    plan_workers: int = 1,
) -> FastAPI:
    """The app over ``state``: the store is migrated and the loops start with the app
    (``start_loops=False``: cycles are driven by hand, e.g. in tests)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.start(start_loops=start_loops)
        try:
            yield
        finally:
            state.stop()

    life: Callable[[FastAPI], AbstractAsyncContextManager[None]] = lifespan
    app = FastAPI(
        title=TITLE,
        version=__version__,
        description="Predicts iteration time, memory, MFU and ETA of LLM training jobs.",
        lifespan=life,
        docs_url=None,
        redoc_url=None,
    )
    app.state.planner = state
    install_error_handlers(app)
    _add_docs(app)
    app.include_router(health.make_router(state))
    app.include_router(jobs.make_router(state))
    app.include_router(stragglers.make_router(traces))
    app.include_router(predict.make_router())
    app.include_router(plan.make_router(workers=plan_workers))
    app.include_router(calibrations.make_router(state.store, state.clock))
    app.include_router(metrics.make_router(registry))
    app.include_router(reviews.make_router(state))
    return app
