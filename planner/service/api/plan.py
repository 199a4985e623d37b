"""HTTP routes for planning: ``POST /v1/explore`` and ``POST /v1/recommendations``.

Request bodies are :class:`ExploreDocument`/:class:`RecommendDocument` (the formats' top-level
fields; their parsers check the rest); answers are ``ExploreResult``, ``ExplorePage`` and
``RecommendResult``. ``make_router(workers=...)`` returns an ``APIRouter`` the app includes.
Both routes are CPU-bound: they run on the service's worker pool (``planner.service.api.work``:
429 when it is full), under its candidate and time budgets (422 naming the budget), and stop
between chunks when the client disconnects; ``workers`` is the number of threads one sweep
uses. Role ``reader``.

``POST /v1/explore`` takes one explore document (the ``planner explore --json`` contract comes
back: ``top``, ``pareto``, ``counts``) or a list of them (a sweep). A list is paged with
``offset``/``limit`` (only the documents of the page are explored) and answers
``{"results": [...], "total", "offset", "limit", "next_offset"}``, or, with ``stream=true``,
one JSON object per line (``application/x-ndjson``) as each document finishes. ``top_k`` and
``rank_offset`` page the ranking itself (ranks ``rank_offset+1 .. rank_offset+top_k``).
A document that is invalid or has no valid layout gets ``{"name", "error"}``; the status is
422 when any document of the answer has one (as ``POST /v1/predict``).

``POST /v1/recommendations`` takes one recommend document (``planner.recommend``) and answers
the ``planner recommend --json`` object; 422 with ``error`` for bad input, no valid layout, or
an unreachable deadline (the body then still carries the scaling curve).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from planner.scenario.documents import DocumentError
from planner.scenario.plans import (
    ExploreOptions,
    explore_document,
    explore_documents,
    recommend_document,
)
from planner.scenario.request import RecommendationJson
from planner.scenario.space import ExploreJson
from planner.search import Objective
from planner.service.api.access import Access, open_access
from planner.service.api.errors import error_responses
from planner.service.api.models import (
    ExplorePage,
    ExploreResult,
    Open,
    RecommendResult,
    ScenarioDocument,
    as_document,
    json_lines_content,
)
from planner.service.api.work import WorkerPool
from planner.service.auth import Role

__all__ = ["make_router"]

MAX_TOP_K = 1000
MAX_PAGE = 1000


class ExploreDocument(ScenarioDocument):
    """An explore document: a scenario whose knobs may be lists or left out (every value)."""

    # Lists where a scenario takes one value: the fields are the explore parser's to check.
    name: Any = None
    model: Any = None
    hardware: Any = None
    parallelism: Any = None
    training: Any = None


class RecommendDocument(Open):
    """A recommend document (``planner.recommend``): the job (a scenario), its token budget,
    an optional deadline, GPU pools, and for a running job its current layout."""


def make_router(
    access: Access | None = None, pool: WorkerPool | None = None, *, workers: int = 1
) -> APIRouter:
    """The planning routes on ``pool`` (default: one worker, no budget) for the callers
    ``access`` admits (default: all); ``workers`` threads per sweep (1 keeps one request on one
    core)."""
    access = access or open_access()
    pool = pool or WorkerPool.default()
    router = APIRouter(tags=["plan"], dependencies=[Depends(access.require(Role.READER))])

    @router.post(
        "/v1/explore",
        operation_id="explore",
        summary="Search every valid parallelism layout (the `planner explore --json` contract)",
        response_model=ExploreResult | ExplorePage,
        responses={
            200: {"content": json_lines_content("stream=true: one ExploreResult per line")},
            422: {
                "model": ExploreResult | ExplorePage,
                "description": "A document was invalid or has no valid layout (its error), or "
                "the request was malformed (the error shape)",
            },
            **error_responses(400, 401, 403, 413, 415, 429, 500, 503),
        },
    )
    async def explore(
        request: Request,
        body: Annotated[
            ExploreDocument | list[ExploreDocument],
            Body(description="An explore document (knobs as lists or left out) or a list"),
        ],
        *,
        objective: Annotated[Objective, Query(description="What the top-k ranks by")] = (
            Objective.TIME
        ),
        top_k: Annotated[int, Query(ge=1, le=MAX_TOP_K, description="Ranks per answer")] = 10,
        rank_offset: Annotated[int, Query(ge=0, description="Ranks to skip (paging)")] = 0,
        offset: Annotated[int, Query(ge=0, description="Documents of a list to skip")] = 0,
        limit: Annotated[
            int, Query(ge=1, le=MAX_PAGE, description="Documents of a list to explore")
        ] = 100,
        stream: Annotated[
            bool, Query(description="A list: stream one JSON object per line")
        ] = False,
    ) -> Any:
        options: ExploreOptions = {
            "objective": objective,
            "top_k": top_k,
            "rank_offset": rank_offset,
            "workers": workers,
        }
        if not isinstance(body, list):
            result = await pool.run(request, _explore_one, as_document(body), options)
            return JSONResponse(result, status_code=422 if "error" in result else 200)
        page = [as_document(d) for d in body[offset : offset + limit]]
        next_offset = offset + len(page) if offset + len(page) < len(body) else None
        if stream:

            async def lines() -> AsyncIterator[bytes]:
                for doc in page:
                    try:
                        result = await pool.run(request, _explore_one, doc, options)
                    except HTTPException as exc:  # the pool is full: say so on this line
                        result = {"name": doc.get("name"), "error": str(exc.detail)}
                    yield (json.dumps(result) + "\n").encode()

            return StreamingResponse(
                lines(),
                media_type="application/x-ndjson",
                headers={
                    "X-Total-Count": str(len(body)),
                    "X-Next-Offset": "" if next_offset is None else str(next_offset),
                },
            )
        results = await pool.run(request, _explore_all, page, options)
        content = {
            "results": results,
            "total": len(body),
            "offset": offset,
            "limit": limit,
            "next_offset": next_offset,
        }
        invalid = any("error" in r for r in results)
        return JSONResponse(content, status_code=422 if invalid else 200)

    @router.post(
        "/v1/recommendations",
        operation_id="recommend",
        summary="GPU count and type for a token budget and deadline; running-job restart advice",
        response_model=RecommendResult,
        responses={
            422: {
                "model": RecommendResult,
                "description": "Invalid request, no valid layout, or deadline unmet",
            },
            **error_responses(400, 401, 403, 413, 415, 429, 500, 503),
        },
    )
    async def recommendations(
        request: Request,
        body: Annotated[RecommendDocument, Body(description="A recommend document")],
    ) -> JSONResponse:
        result = await pool.run(request, _recommend, as_document(body), workers)
        return JSONResponse(result, status_code=422 if "error" in result else 200)

    return router


def _explore_one(doc: Mapping[str, object], options: ExploreOptions) -> ExploreJson | DocumentError:
    return explore_document(doc, **options)


def _explore_all(
    docs: list[Mapping[str, object]], options: ExploreOptions
) -> list[ExploreJson | DocumentError]:
    return list(explore_documents(docs, **options))


def _recommend(doc: Mapping[str, object], workers: int) -> RecommendationJson | DocumentError:
    return recommend_document(doc, workers=workers)
