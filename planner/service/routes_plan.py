"""HTTP routes for planning: ``POST /v1/explore`` and ``POST /v1/recommendations``.

``make_router(workers=...)`` returns an ``APIRouter`` the composition root includes. Both
routes are CPU-bound and synchronous (FastAPI runs them in its thread pool); ``workers`` is the
number of threads one sweep uses.

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
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse, StreamingResponse

from planner.scenario.plans import explore_document, explore_documents, recommend_document
from planner.search import Objective

__all__ = ["make_router"]

MAX_TOP_K = 1000
MAX_PAGE = 1000


def make_router(*, workers: int = 1) -> APIRouter:
    """The planning routes; ``workers`` threads per sweep (1 keeps one request on one core)."""
    router = APIRouter(tags=["plan"])

    @router.post(
        "/v1/explore",
        summary="Search every valid parallelism layout (the `planner explore --json` contract)",
        responses={422: {"description": "A document was invalid or has no valid layout"}},
    )
    def explore(
        body: Annotated[
            dict[str, Any] | list[Any],
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
        options: dict[str, Any] = {
            "objective": objective,
            "top_k": top_k,
            "rank_offset": rank_offset,
            "workers": workers,
        }
        if isinstance(body, dict):
            result = explore_document(body, **options)
            return JSONResponse(result, status_code=422 if "error" in result else 200)
        page = body[offset : offset + limit]
        next_offset = offset + len(page) if offset + len(page) < len(body) else None
        if stream:

            def lines() -> Iterator[bytes]:
                for result in explore_documents(page, **options):
                    yield (json.dumps(result) + "\n").encode()

            return StreamingResponse(
                lines(),
                media_type="application/x-ndjson",
                headers={
                    "X-Total-Count": str(len(body)),
                    "X-Next-Offset": "" if next_offset is None else str(next_offset),
                },
            )
        results = list(explore_documents(page, **options))
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
        summary="GPU count and type for a token budget and deadline; running-job restart advice",
        responses={422: {"description": "Invalid request, no valid layout, or deadline unmet"}},
    )
    def recommendations(
        body: Annotated[dict[str, Any], Body(description="A recommend document")],
    ) -> JSONResponse:
        result = recommend_document(body, workers=workers)
        return JSONResponse(result, status_code=422 if "error" in result else 200)

    return router
