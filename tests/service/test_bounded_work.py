"""Bounded work: the worker pool of CPU-heavy requests (queue, 429 with Retry-After,
503 when stopping), cancellation between chunks when the client leaves, and the search
budgets (planner.search.budget)."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from planner.search.budget import (
    BudgetExceededError,
    SearchBudget,
    SearchCancelledError,
    budget_scope,
    check_candidates,
    checkpoint,
)
from planner.service.api.work import PoolFull, WorkerPool


def pool(size: int = 1, queue: int = 0) -> WorkerPool:
    return WorkerPool(size=size, queue=queue, retry_after_s=7, budget=SearchBudget)


class LeavingClient:
    """A request whose client disconnects after ``after_s``."""

    def __init__(self, after_s: float) -> None:
        self.leaves_at = time.monotonic() + after_s
        self.method = "POST"

        class Url:
            path = "/v1/explore"

        self.url = Url()

    async def is_disconnected(self) -> bool:
        return time.monotonic() >= self.leaves_at


def test_a_full_pool_answers_429_with_retry_after() -> None:
    workers = pool(size=1, queue=1)
    release = threading.Event()

    def blocked() -> str:
        release.wait(10)
        return "done"

    async def main() -> list[object]:
        outcomes: list[object] = []

        async def one() -> None:
            try:
                outcomes.append(await workers.run(None, blocked))
            except PoolFull as exc:
                outcomes.append(exc)

        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(one)
            await anyio.sleep(0.3)
            assert workers.admitted == 2  # one running, one queued, the third refused
            release.set()
        return outcomes

    outcomes = anyio.run(main)
    refused = [o for o in outcomes if isinstance(o, PoolFull)]
    assert sorted(o for o in outcomes if isinstance(o, str)) == ["done", "done"]
    assert len(refused) == 1
    assert refused[0].status_code == 429
    assert refused[0].headers == {"Retry-After": "7"}
    assert "limits.workers" in str(refused[0].detail)
    workers.close()
    with pytest.raises(PoolFull) as stopping:
        anyio.run(workers.run, None, blocked)
    assert stopping.value.status_code == 503


def test_a_search_stops_between_chunks_when_its_client_leaves() -> None:
    # Probe: explore kept burning CPU after the client gave up.
    workers = pool()
    chunks = [0]
    stopped = threading.Event()

    def search() -> None:
        try:
            while chunks[0] < 10_000:  # ~100 s of "chunks" unless cancelled
                checkpoint()
                chunks[0] += 1
                time.sleep(0.01)
        finally:
            stopped.set()

    started = time.monotonic()
    with pytest.raises(SearchCancelledError):
        anyio.run(workers.run, LeavingClient(0.3), search)
    assert stopped.wait(5)
    assert time.monotonic() - started < 5
    assert chunks[0] < 500
    assert workers.admitted == 0


def test_budgets_outside_a_scope_do_nothing_and_inside_name_their_setting() -> None:
    checkpoint()
    check_candidates(10**18)  # the CLI and the library search without limits
    budget = SearchBudget(max_candidates=100, candidates_field="limits.explore_max_candidates")
    with budget_scope(budget), pytest.raises(BudgetExceededError) as err:
        check_candidates(101)
    assert err.value.field == "limits.explore_max_candidates"
    ticks = iter([0.0, 0.5, 2.0])
    timed = SearchBudget(time_budget_s=1.0, time_field="t", clock=lambda: next(ticks))
    with budget_scope(timed):
        checkpoint()
        with pytest.raises(BudgetExceededError, match="time budget of 1 s"):
            checkpoint()
