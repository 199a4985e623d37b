"""Capacity reviews over HTTP: ``POST /v1/reviews`` (run one), ``GET /v1/reviews`` (the stored
ones), ``GET /v1/reviews/latest`` (the newest scheduled review) and ``GET /v1/reviews/queue``
(today's queue in the jobs-snapshot format ``planner review --jobs`` reads).

``POST /v1/reviews`` takes the documents of ``planner review`` as JSON
(``review_models.ReviewRequest``), runs the review with the service's active jobs (their ETAs
as runtime bands) unless a jobs snapshot is given, and answers the review's JSON, or its
self-contained HTML page with ``Accept: text/html`` (Markdown with ``text/markdown``). The
work runs in a worker thread, off the event loop; a bad document is a 422 naming the document
and field (``fleet: pools[0].num_gpu: unknown field; did you mean 'num_gpus'?``).

Bounded like explore (``planner.service.api.work``): the review runs on the worker pool (429
when it is full), its sizes are checked against the ``limits.review_*`` budgets before anything
is simulated (``planner.capacity.budget``: horizon, jobs, samples, pools, what-ifs, estimated
memory; 422 naming the budget), it may use ``limits.review_time_budget_s`` CPU seconds, and it
stops between samples when the client leaves.

The router is self-contained: ``make_router(state)`` uses ``state.reviews`` (the composition
root's ``ReviewRunner``, with Ray) or makes a local one, and its lifespan starts and stops the
review schedule (``review.schedule``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from planner.capacity import review_markdown, snapshot_document
from planner.capacity.documents import Located, located
from planner.capacity.fields import read_timestamp_s
from planner.capacity.html import review_html
from planner.capacity.snapshot import parse_snapshot
from planner.search.budget import BudgetExceededError
from planner.service.api.access import Access, open_access
from planner.service.api.errors import error_responses
from planner.service.api.review_models import (
    LatestReview,
    QueueSnapshotView,
    ReviewRequest,
    ReviewResult,
    StoredReview,
    StoredReviews,
)
from planner.service.api.work import WorkerPool
from planner.service.auth import Role
from planner.service.models import ReviewRow
from planner.service.reviews import (
    ReviewOptions,
    ReviewRunner,
    over_time,
    review_budget,
    review_time_budget,
)
from planner.service.runtime import ServiceState

__all__ = ["make_router"]

_DOCUMENTS = {
    "text/html": "The review as one self-contained HTML page (charts, tables; no network)",
    "text/markdown": "The review's tables for a review document",
}


def _wants(request: Request) -> str:
    """The media type the client asks for: text/html, text/markdown, else JSON."""
    accept = request.headers.get("accept", "")
    for media in ("text/html", "text/markdown"):
        if media in accept and "application/json" not in accept.split(media)[0]:
            return media
    return "application/json"


def _document(media: str, html: str | None, markdown: str | None) -> Response | None:
    if media == "text/html" and html is not None:
        return HTMLResponse(html)
    if media == "text/markdown" and markdown is not None:
        return PlainTextResponse(markdown, media_type="text/markdown")
    return None


def _view(row: ReviewRow, view: type[BaseModel]) -> dict[str, object]:
    """The stored review ``row`` as the API shows it: its value of each field ``view`` (an API
    model, the public contract) declares, by name; FastAPI validates it against ``view``."""
    return {name: getattr(row, name) for name in view.model_fields}


def make_router(
    state: ServiceState, access: Access | None = None, pool: WorkerPool | None = None
) -> APIRouter:
    """The review routes over ``state`` (module docstring) for the callers ``access`` admits
    (default: all; role ``reader``), the review itself on ``pool`` (bounded, off the event
    loop)."""
    access = access or open_access()
    pool = pool or WorkerPool.default()
    runner: ReviewRunner = getattr(state, "reviews", None) or ReviewRunner(
        state.settings.review,
        state.store,
        state.clock,
        is_leader=lambda: state.is_leader,
        limits=state.settings.limits,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            runner.stop()

    router = APIRouter(
        tags=["reviews"],
        lifespan=lifespan,
        dependencies=[Depends(access.require(Role.READER))],
    )
    documents: dict[int | str, dict[str, object]] = {
        200: {
            "content": {
                m: {"schema": {"type": "string", "description": d}} for m, d in _DOCUMENTS.items()
            }
        }
    }

    limits = state.settings.limits
    budget = review_budget(limits)

    def review(body: ReviewRequest, media: str) -> Response:
        budget.check_samples(body.samples, body.sizing_samples)
        snapshot = None
        if body.jobs is not None:
            snapshot = parse_snapshot(located(body.jobs, "jobs"))
        elif body.live_jobs:
            snapshot = runner.live()
        start_s = None
        if body.start is not None:
            start_s = read_timestamp_s(Located("request", "start", 0, body.start))
        inputs = runner.inputs(
            located(body.fleet, "fleet"),
            located(body.plan, "plan") if body.plan is not None else None,
            [located(body.what_ifs, "what_ifs")] if body.what_ifs else [],
            snapshot,
            start_s,
        )
        budget.check(inputs, samples=body.samples, sizing_samples=body.sizing_samples)
        try:
            result, _ = runner.run(
                inputs, ReviewOptions.of(body, state.settings.review.ray_address)
            )
        except BudgetExceededError as exc:
            advice = "ask for fewer samples (or sizing: false), jobs, what-ifs or days"
            raise over_time(exc, limits, advice) from None
        if media == "text/html":
            return HTMLResponse(review_html(result))
        if media == "text/markdown":
            return PlainTextResponse(review_markdown(result), media_type="text/markdown")
        return JSONResponse(json.loads(json.dumps(result.to_dict(), allow_nan=False)))

    @router.post(
        "/v1/reviews",
        operation_id="run_review",
        summary="Run a capacity review (JSON, or the HTML report with Accept: text/html)",
        response_model=ReviewResult,
        responses={
            **documents,
            **error_responses(400, 401, 403, 413, 415, 422, 429, 500, 503),
        },
    )
    async def post_review(
        request: Request,
        body: Annotated[ReviewRequest, Body(description="Fleet, plan, what-ifs and options")],
    ) -> Response:
        return await pool.run(
            request, review, body, _wants(request), budget=review_time_budget(limits)
        )

    @router.get(
        "/v1/reviews",
        operation_id="list_reviews",
        summary="The reviews the service ran on its schedule, newest first",
        response_model=StoredReviews,
        responses=error_responses(401, 403, 422, 503),
    )
    def list_reviews(
        limit: Annotated[int, Query(ge=1, le=1000, description="At most this many")] = 20,
    ) -> dict[str, object]:
        rows = state.store.list_reviews(limit=limit)
        return {"reviews": [_view(r, StoredReview) for r in rows]}

    @router.get(
        "/v1/reviews/latest",
        operation_id="latest_review",
        summary="The newest scheduled review (JSON, or HTML / Markdown by Accept)",
        response_model=LatestReview,
        responses={**documents, **error_responses(401, 403, 404, 503)},
    )
    async def latest_review(request: Request) -> Any:
        media = _wants(request)
        row = await run_in_threadpool(
            state.store.latest_review,
            with_result=media == "application/json",
            with_documents=media != "application/json",
        )
        if row is None:
            raise HTTPException(
                404,
                "review: none stored yet; set review.schedule, review.fleet_file and "
                "review.plan_file (PLANNER_REVIEW__SCHEDULE=6h ...), or POST /v1/reviews",
            )
        shown = _document(media, row.html, row.markdown)
        if shown is not None:
            return shown
        return _view(row, LatestReview)

    @router.get(
        "/v1/reviews/queue",
        operation_id="review_queue",
        summary="Today's running and pending jobs with predicted runtimes (planner review --jobs)",
        response_model=QueueSnapshotView,
        responses=error_responses(401, 403, 503),
    )
    def queue() -> dict[str, object]:
        return snapshot_document(runner.live())

    return router
