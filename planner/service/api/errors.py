"""One error shape for the whole API: ``{"error": "...", "detail": "..."}``
(:class:`~planner.service.api.models.ErrorResponse`).

``PlannerError`` becomes 422 (``SpecError``: bad input), 503 (``StoreError``, with its public
message only: never connection details; ``SearchCancelledError``) or 500; request
validation failures 422 with every ``location: message``; ``HTTPException`` (404 unknown job,
409 ambiguous id, 422 bad upload) keeps its status.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from planner.errors import PlannerError, SpecError, StoreError
from planner.search.budget import SearchCancelledError
from planner.service.api.models import ErrorResponse


def error_response(message: str, status_code: int) -> JSONResponse:
    """The API's error body with ``status_code``."""
    body = ErrorResponse(error=message, detail=message)
    return JSONResponse(body.model_dump(), status_code=status_code)


def error_responses(*codes: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses`` entries documenting ``codes`` with the error shape."""
    text = {
        400: "Malformed request",
        401: "A bearer token is needed (or it is unknown)",
        403: "Not allowed: role too low, read-only mode, or a cross-origin write",
        404: "No such job",
        409: "The job id exists on several clusters: add ?scheduler=&cluster=",
        413: "The request body is over its limit (limits.*_body_bytes)",
        415: "Wrong content type (JSON routes take application/json, uploads multipart)",
        422: "Invalid input: the message names the field and the fix",
        429: "All workers are busy and the queue is full: retry after Retry-After seconds",
        500: "Internal error",
        503: "The store is unavailable, the service is stopping, or the request was cancelled",
    }
    return {c: {"model": ErrorResponse, "description": text.get(c, "Error")} for c in codes}


def openapi_operations(spec: Mapping[str, object]) -> Iterator[dict[str, object]]:
    """The operation objects of the OpenAPI document ``spec`` (each path item's methods), to
    amend in place."""
    paths = spec.get("paths")
    for item in paths.values() if isinstance(paths, dict) else ():
        if isinstance(item, dict):
            yield from (operation for operation in item.values() if isinstance(operation, dict))


def install_error_handlers(app: FastAPI) -> None:
    """Route every error of ``app`` to :func:`error_response`."""

    @app.exception_handler(PlannerError)
    async def planner_error(_: Request, exc: PlannerError) -> JSONResponse:
        status = 422 if isinstance(exc, SpecError) else 500
        if isinstance(exc, StoreError | SearchCancelledError):
            status = 503
        message = str(exc)
        if isinstance(exc, StoreError):
            message = exc.public_message  # never the database's connection details
        return error_response(message, status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
            for e in exc.errors()
        ]
        return error_response("; ".join(errors), 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 405:
            message = f"method: {request.method} is not allowed on {request.url.path}"
        response = error_response(message, exc.status_code)
        for key, value in (exc.headers or {}).items():
            response.headers[key] = value
        if exc.status_code == 405:  # every method of the path, not only the first route's
            response.headers["Allow"] = ", ".join(_allowed(request))
        return response


def _allowed(request: Request) -> list[str]:
    """Methods the app's routes serve at the request's path."""
    methods: set[str] = set()
    for route in request.app.routes:
        for method in getattr(route, "methods", None) or ():
            match, _ = route.matches({**request.scope, "method": method})
            if match == Match.FULL:
                methods.add(method)
    return sorted(methods)
