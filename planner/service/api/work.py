"""Bounded work for the API: request body limits and the worker pool of CPU-heavy requests.

* :class:`BodyLimitMiddleware` (pure ASGI): each POST route has a kind (``json`` or ``upload``)
  and a byte limit; a larger body answers **413** (the error shape, naming the setting) before
  or while it is read, never buffering more than the limit; a body of the wrong media type
  answers **415** (JSON routes take ``application/json`` only, so a browser's cross-origin
  form post cannot reach them). Other requests with a body get a small default limit.
* :class:`WorkerPool`: CPU-heavy requests (predict, explore, recommend, calibration fits,
  trace analyses) run on ``size`` threads, off the event loop, so ``/healthz`` and reads stay
  fast; at most ``queue`` more wait; past that **429** with ``Retry-After``, and **503** once
  the service is shutting down. Each job runs inside a :mod:`planner.search.budget` scope: the
  search stops between chunks when its time budget runs out (422 naming the budget) or when the
  client disconnects (the request is cancelled and the worker freed).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.search.budget import SearchBudget, SearchCancelledError, budget_scope
from planner.service.api.errors import error_response

log = logging.getLogger(__name__)

T = TypeVar("T")
BodyKind = Literal["json", "upload"]

#: Body limit of requests that expect none (GET, or a POST route not listed), bytes.
DEFAULT_BODY_BYTES = 64 * 1024
#: How often a running job looks for its client having left, seconds.
DISCONNECT_POLL_S = 0.25


class _BodyTooLarge(HTTPException):
    """Raised from ``receive`` when the body passes its limit (FastAPI re-raises it)."""

    def __init__(self, limit: int, setting: str) -> None:
        super().__init__(
            413,
            f"{setting}: the request body is larger than {limit:,} bytes; send less "
            f"(or raise {setting})",
        )


def _media_ok(kind: BodyKind, content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    if kind == "json":
        return media == "application/json" or (
            media.startswith("application/") and media.endswith("+json")
        )
    return media == "multipart/form-data"


class BodyLimitMiddleware:
    """Limits request bodies per route (see the module docstring).

    ``routes``: ``{path: (kind, limit_bytes, setting_name)}`` for POST routes.
    """

    def __init__(self, app: ASGIApp, routes: Mapping[str, tuple[BodyKind, int, str]]) -> None:
        self.app = app
        self.routes = dict(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        rule = self.routes.get(scope["path"]) if scope["method"] == "POST" else None
        if rule is None:
            kind: BodyKind | None = None
            limit, setting = DEFAULT_BODY_BYTES, "request body"
        else:
            kind, limit, setting = rule
            content_type = headers.get("content-type", "")
            if not _media_ok(kind, content_type):
                wanted = "application/json" if kind == "json" else "multipart/form-data"
                message = (
                    f"content-type: {content_type or 'none'} is not accepted here; send {wanted}"
                )
                await error_response(message, 415)(scope, receive, send)
                return
        length = headers.get("content-length")
        if length is not None and not length.isdigit():
            await error_response("content-length: not a byte count", 400)(scope, receive, send)
            return
        if length is not None and int(length) > limit:
            await self._too_large(scope, receive, send, limit, setting)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge(limit, setting)
            return message

        await self.app(scope, limited, send)

    @staticmethod
    async def _too_large(
        scope: Scope, receive: Receive, send: Send, limit: int, setting: str
    ) -> None:
        exc = _BodyTooLarge(limit, setting)
        response = error_response(str(exc.detail), 413)
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


class PoolFull(HTTPException):
    """429 (queue full) or 503 (shutting down), with ``Retry-After``."""

    def __init__(self, status: int, message: str, retry_after_s: int) -> None:
        super().__init__(status, message, headers={"Retry-After": str(retry_after_s)})


class WorkerPool:
    """Runs CPU-heavy calls on ``size`` threads with at most ``queue`` waiting (see the module
    docstring). ``budget`` makes the :class:`SearchBudget` of each job."""

    def __init__(
        self,
        *,
        size: int,
        queue: int,
        retry_after_s: int,
        budget: Callable[[], SearchBudget],
    ) -> None:
        self.size = size
        self.queue = queue
        self.retry_after_s = retry_after_s
        self._budget = budget
        self._limiter = anyio.CapacityLimiter(size)
        self._admitted = 0
        self._lock = threading.Lock()
        self._running: set[SearchBudget] = set()
        self.closed = False

    @classmethod
    def default(cls) -> WorkerPool:
        """One worker, a long queue, no budget (a router built without the app's settings)."""
        return cls(size=1, queue=1024, retry_after_s=5, budget=SearchBudget)

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    def close(self) -> None:
        """Refuse new jobs (503) and cancel the running ones at their next checkpoint."""
        self.closed = True
        with self._lock:
            for budget in self._running:
                budget.cancel()

    async def run(
        self,
        request: Request | None,
        fn: Callable[..., T],
        *args: Any,
        budget: SearchBudget | None = None,
    ) -> T:
        """``fn(*args)`` on a worker thread under ``budget`` (default: a fresh one of the
        pool's; a route with budgets of its own, e.g. reviews, passes one); cancelled when
        ``request``'s client disconnects. Raises :class:`PoolFull` when the pool and its queue
        are full or the service is stopping, ``SearchCancelledError`` when the client left."""
        if self.closed:
            raise PoolFull(503, "the planner is shutting down; retry", self.retry_after_s)
        with self._lock:
            if self._admitted >= self.size + self.queue:
                full = True
            else:
                full = False
                self._admitted += 1
        if full:
            raise PoolFull(
                429,
                f"limits.workers: all {self.size} workers are busy and {self.queue} requests "
                "wait (limits.queue); retry later",
                self.retry_after_s,
            )
        budget = budget if budget is not None else self._budget()
        try:
            return await self._run(request, budget, fn, args)
        finally:
            with self._lock:
                self._admitted -= 1
                self._running.discard(budget)

    async def _run(
        self, request: Request | None, budget: SearchBudget, fn: Callable[..., T], args: Any
    ) -> T:
        def work() -> T:
            with budget_scope(budget):
                budget.check()  # cancelled or out of time while queued
                return fn(*args)

        with self._lock:
            self._running.add(budget)
        if self.closed:
            budget.cancel()
        outcome: list[tuple[bool, Any]] = []

        async def call() -> None:
            try:
                value = await anyio.to_thread.run_sync(
                    functools.partial(work), limiter=self._limiter, abandon_on_cancel=True
                )
                outcome.append((True, value))
            except Exception as exc:  # raised below, outside the task group
                outcome.append((False, exc))
            finally:
                group.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                if request is not None:
                    group.start_soon(_watch_disconnect, request, budget)
                group.start_soon(call)
        except anyio.get_cancelled_exc_class():
            budget.cancel()  # the server gave up on the request: stop at the next chunk
            raise
        if not outcome:  # cancelled by the client's disconnect before the job ended
            budget.cancel()
            raise SearchCancelledError("the client disconnected")
        ok, value = outcome[0]
        if not ok:
            raise value
        result: T = value
        return result


async def _watch_disconnect(request: Request, budget: SearchBudget) -> None:
    while not budget.cancelled.is_set():
        if await request.is_disconnected():
            log.info("%s %s: client left, cancelling its search", request.method, request.url.path)
            budget.cancel()
            return
        await anyio.sleep(DISCONNECT_POLL_S)


__all__ = ["BodyLimitMiddleware", "PoolFull", "SearchCancelledError", "WorkerPool"]
