"""Budgets of one search: a candidate count, a deadline and a cancellation flag.

A caller that must bound a sweep (the HTTP API: a request may not run for minutes, nor keep
burning CPU after its client left) runs it inside :func:`budget_scope`; the sweep calls
:func:`check_candidates` before it starts and :func:`checkpoint` between chunks. Outside a
scope both do nothing, so the CLI and the library search without limits.

Errors: :class:`BudgetExceededError` (a ``SpecError`` whose field names the budget, e.g.
``limits.explore_time_budget_s``: the API answers 422 with it) and :class:`SearchCancelledError`
(the caller gave up; nobody is waiting for an answer).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from planner.errors import PlannerError, SpecError

__all__ = [
    "BudgetExceededError",
    "SearchBudget",
    "SearchCancelledError",
    "budget_scope",
    "check_candidates",
    "checkpoint",
]


class BudgetExceededError(SpecError):
    """A search would exceed its budget; ``field`` names the budget's setting."""


class SearchCancelledError(PlannerError):
    """The search was cancelled by its caller (e.g. the HTTP client disconnected)."""


@dataclass(kw_only=True, eq=False)
class SearchBudget:
    """Limits of one search.

    ``time_budget_s``: wall-clock seconds from :meth:`start` (None: none);
    ``max_candidates``: the largest design space a sweep may enumerate (None: none);
    ``time_field`` / ``candidates_field``: the setting names errors cite;
    ``clock``: monotonic seconds (tests may pass their own).
    """

    time_budget_s: float | None = None
    max_candidates: int | None = None
    time_field: str = "time_budget_s"
    candidates_field: str = "max_candidates"
    clock: Callable[[], float] = time.monotonic
    cancelled: threading.Event = field(default_factory=threading.Event)
    started_s: float | None = None

    def start(self) -> None:
        """Start the clock of the time budget (first call only)."""
        if self.started_s is None:
            self.started_s = self.clock()

    def cancel(self) -> None:
        """Ask the search to stop at its next checkpoint (thread-safe)."""
        self.cancelled.set()

    def check(self) -> None:
        """Raise when cancelled or past the deadline."""
        if self.cancelled.is_set():
            raise SearchCancelledError("the search was cancelled")
        if self.time_budget_s is not None and self.started_s is not None:
            elapsed = self.clock() - self.started_s
            if elapsed > self.time_budget_s:
                raise BudgetExceededError(
                    self.time_field,
                    f"the search ran past its time budget of {self.time_budget_s:g} s; "
                    "narrow it: fix more knobs (tensor_parallel, pipeline_parallel, "
                    "micro_batch_size, ...) or list fewer values",
                )


_CURRENT: contextvars.ContextVar[SearchBudget | None] = contextvars.ContextVar(
    "planner_search_budget", default=None
)


@contextlib.contextmanager
def budget_scope(budget: SearchBudget) -> Iterator[SearchBudget]:
    """Run the searches of this thread/context under ``budget`` (its clock starts now)."""
    budget.start()
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def checkpoint() -> None:
    """Raise ``SearchCancelledError`` / ``BudgetExceededError`` when the budget says stop."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.check()


def check_candidates(count: int) -> None:
    """Raise ``BudgetExceededError`` when a design space of ``count`` candidates is over the
    current budget (then also check the time and cancellation)."""
    budget = _CURRENT.get()
    if budget is None:
        return
    if budget.max_candidates is not None and count > budget.max_candidates:
        raise BudgetExceededError(
            budget.candidates_field,
            f"the design space has {count:,} candidates, over the budget of "
            f"{budget.max_candidates:,}; fix more knobs or list fewer values",
        )
    budget.check()
