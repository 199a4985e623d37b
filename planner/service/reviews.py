"""Capacity reviews in the service: on request (``POST /v1/reviews``) and on a schedule
(``review.schedule``, APScheduler), the scheduled ones stored (``GET /v1/reviews/latest``, the
``planner_capacity_*`` metrics).

A review reads its fleet, plan and what-if documents (files named by the settings, or a
request's body), today's queue (the service's active jobs with their ETAs as runtime bands, or
a jobs snapshot document), and runs ``planner.capacity.run_review`` from the review's start
(``planner.capacity.inputs``: the later of the fleet's start and now, for the live queue) on
the local executor or Ray (``review.ray_address``). One review runs at a time per process
(they are CPU-bound; a request waits for a running one). Only the leader runs the schedule.

Every review runs under the same budget (:func:`review_budget`, :func:`review_time_budget`:
the ``limits.review_*`` settings): a request's or the schedule's review whose inputs are over a
limit (horizon, jobs, samples, pools, what-ifs, estimated memory) is refused before anything
is simulated, and one that runs past ``limits.review_time_budget_s`` CPU seconds stops. A
scheduled review that is refused, or stopped, is stored with the error naming the limit (and
logged), as any other failed scheduled review; stopping the service stops a running one.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from apscheduler.schedulers.background import BackgroundScheduler

from planner.capacity import QueuedJob, QueueSnapshot, Review, review_markdown, run_review
from planner.capacity.budget import ReviewBudget
from planner.capacity.documents import Located, load_document
from planner.capacity.html import review_html
from planner.capacity.inputs import ReviewInputs, review_inputs
from planner.capacity.montecarlo import Executor
from planner.errors import PlannerError, SpecError
from planner.search.budget import BudgetExceededError, SearchBudget, budget_scope, checkpoint
from planner.service.loops.queue_forecast import queue_order, runtime_band
from planner.service.models import JobRow, ReviewRow
from planner.service.security_settings import LimitSettings
from planner.service.settings import ReviewSettings, parse_schedule
from planner.service.store import Store
from planner.service.stored_job import stored_job_state

__all__ = [
    "ReviewOptions",
    "ReviewRunner",
    "live_snapshot",
    "read_document",
    "review_budget",
    "review_time_budget",
]

log = logging.getLogger("planner.service.reviews")

#: A job with neither an ETA nor a time limit holds its GPUs this long (past any horizon).
FOREVER_S = 10 * 365 * 86400.0
#: How often a review waiting for the running one looks at its budget, seconds.
LOCK_POLL_S = 0.1


def read_document(path: str, what: str) -> Located:
    """A fleet, plan or what-if file as a ``Located`` tree; raises ``SpecError`` naming the
    setting and the file when it cannot be read, ``DocumentError`` when it does not parse."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError(what, f"cannot read {path} ({reason}); check the path") from None
    return load_document(text, path)


def review_budget(limits: LimitSettings) -> ReviewBudget:
    """The sizes a review may have (``limits.review_max_*``); its errors name those settings."""
    return ReviewBudget(
        max_horizon_days=limits.review_max_horizon_days,
        max_jobs=limits.review_max_jobs,
        max_samples=limits.review_max_samples,
        max_pools=limits.review_max_pools,
        max_what_ifs=limits.review_max_what_ifs,
        max_memory_bytes=limits.review_max_memory_bytes,
        field_prefix="limits.review_",
    )


def review_time_budget(limits: LimitSettings) -> SearchBudget:
    """A fresh time budget of one review: ``limits.review_time_budget_s`` CPU seconds of the
    thread running it (waiting for another review costs nothing), and a what-if's layout
    search within ``limits.explore_max_candidates``."""
    return SearchBudget(
        time_budget_s=limits.review_time_budget_s,
        time_field="limits.review_time_budget_s",
        max_candidates=limits.explore_max_candidates,
        candidates_field="limits.explore_max_candidates",
        clock=time.thread_time,
    )


def over_time(exc: BudgetExceededError, limits: LimitSettings, advice: str) -> SpecError:
    """``exc`` with what to do when it is the review's time budget (``advice``: which inputs
    to shrink); any other budget's error as it is."""
    if exc.field != "limits.review_time_budget_s":
        return exc
    return BudgetExceededError(
        exc.field,
        f"the review ran past its budget of {limits.review_time_budget_s:g} CPU seconds; " + advice,
    )


def live_snapshot(rows: Sequence[JobRow], now_s: float) -> QueueSnapshot:
    """Today's queue from the store's active jobs (those holding or asking for GPUs or nodes:
    a CPU-only job on a GPU partition holds nodes a review places GPU jobs on), in the
    scheduler's order: each job's runtime band from its ETA, else its time limit, else it
    holds its GPUs past any horizon (``planner.service.loops.queue_forecast.runtime_band``)."""
    states = {}
    for row in rows:
        state = stored_job_state(row) if row.active else None
        if state is None or not state.status.is_active:
            continue
        if state.num_gpus > 0 or state.num_nodes > 0:  # CPU-only jobs hold nodes of GPU pools
            states[(state.scheduler, state.cluster, state.job_id)] = (state, row)
    jobs = []
    for state in queue_order([s for s, _ in states.values()]):
        row = states[(state.scheduler, state.cluster, state.job_id)][1]
        band, _ = runtime_band(row.eta, state, now_s=now_s, horizon_s=FOREVER_S / 2)
        jobs.append(
            QueuedJob(state=state, runtime=band, team=state.account or state.user or "default")
        )
    return QueueSnapshot(taken_at_s=now_s, jobs=tuple(jobs))


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewOptions:
    """How to run one review: Monte Carlo samples, seed, sizing search (and its samples), a
    Ray address (None: this process)."""

    samples: int = 200
    seed: int = 0
    sizing: bool = True
    sizing_samples: int | None = None
    ray_address: str | None = None

    @classmethod
    def of(cls, asked: _Asked, ray_address: str | None) -> ReviewOptions:
        """The options a request or the review settings ask for."""
        return cls(
            samples=asked.samples,
            seed=asked.seed,
            sizing=asked.sizing,
            sizing_samples=asked.sizing_samples,
            ray_address=ray_address,
        )


class _Asked(Protocol):
    samples: int
    seed: int
    sizing: bool
    sizing_samples: int | None


class ReviewRunner:
    """Runs reviews for one service process (module docstring). ``executor_for(address)``
    makes the Ray executor (the composition root's ``ray_executor``); ``is_leader`` says
    whether this replica runs the schedule; ``limits``: the budgets of every review (default:
    the defaults of ``LimitSettings``)."""

    def __init__(
        self,
        settings: ReviewSettings,
        store: Store,
        clock: Callable[[], float],
        *,
        executor_for: Callable[[str], Executor] | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        limits: LimitSettings | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.executor_for = executor_for
        self.is_leader = is_leader
        self.limits = limits if limits is not None else LimitSettings()
        self.budget = review_budget(self.limits)
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None
        self._scheduled_budget: SearchBudget | None = None

    def inputs(
        self,
        fleet: Located,
        plan: Located | None,
        what_ifs: Sequence[Located],
        snapshot: QueueSnapshot | None,
        start_s: float | None,
    ) -> ReviewInputs:
        """The parsed inputs; raises ``DocumentError`` naming the document and field."""
        return review_inputs(fleet, plan, what_ifs, snapshot, start_s=start_s, now_s=self.clock())

    def live(self) -> QueueSnapshot:
        """The service's queue now (``live_snapshot``)."""
        return live_snapshot(self.store.list_jobs(active_only=True), self.clock())

    def run(self, inputs: ReviewInputs, options: ReviewOptions) -> tuple[Review, float]:
        """Run the review (one at a time); returns it and the seconds it took. Raises
        ``SpecError`` for what-if edits a job cannot take, ``SourceError`` when Ray fails;
        under a caller's budget (``planner.search.budget``) ``SearchCancelledError`` /
        ``BudgetExceededError`` when it says stop, also while waiting for another review."""
        while not self._lock.acquire(timeout=LOCK_POLL_S):
            checkpoint()  # a request whose client left stops waiting for the running review
        try:
            began = time.perf_counter()
            executor = None
            if options.ray_address:
                if self.executor_for is None:
                    raise SpecError("ray_address", "this service cannot reach Ray")
                executor = self.executor_for(options.ray_address)
            try:
                review = run_review(
                    inputs.fleet, inputs.planned, inputs.snapshot, inputs.what_ifs,
                    start_s=inputs.start_s, samples=options.samples,
                    rng=np.random.default_rng(options.seed), seed=options.seed,
                    executor=executor, sizing=options.sizing,
                    sizing_samples=options.sizing_samples,
                )  # fmt: skip
            finally:
                if executor is not None:
                    executor.close()
            return review, time.perf_counter() - began
        finally:
            self._lock.release()

    def run_scheduled(self) -> ReviewRow | None:
        """The scheduled review: read the settings' files, check them against the review
        budget, run within its time budget, store (an error, a refusal naming the budget, is
        stored and logged too). None on a replica that is not the leader."""
        if not self.is_leader():
            return None
        cfg = self.settings
        now = self.clock()
        row = ReviewRow(made_at_s=now, trigger="schedule", fleet=cfg.fleet_file or "")
        try:
            if not cfg.fleet_file or not cfg.plan_file:
                raise SpecError("review.fleet_file", "a scheduled review needs a fleet and plan")
            self.budget.check_samples(cfg.samples, cfg.sizing_samples)
            inputs = self.inputs(
                read_document(cfg.fleet_file, "review.fleet_file"),
                read_document(cfg.plan_file, "review.plan_file"),
                [read_document(p, "review.what_if_files") for p in cfg.what_if_files],
                self.live() if cfg.live_jobs else None,
                None,
            )
            self.budget.check(inputs, samples=cfg.samples, sizing_samples=cfg.sizing_samples)
            budget = self._scheduled_budget = review_time_budget(self.limits)
            with budget_scope(budget):
                review, row.elapsed_s = self.run(inputs, ReviewOptions.of(cfg, cfg.ray_address))
        except BudgetExceededError as exc:
            advice = "set fewer review.samples (or review.sizing: false) or a smaller plan"
            row.error = f"scheduled review refused: {over_time(exc, self.limits, advice)}"
            log.error("%s", row.error)
        except PlannerError as exc:
            row.error = str(exc)
            log.error("scheduled review failed: %s", exc)
        else:
            data = json.loads(json.dumps(review.to_dict(), allow_nan=False))
            row.fleet = inputs.fleet.name or row.fleet
            row.summary, row.result = data["comparison"], data
            row.html, row.markdown = review_html(review), review_markdown(review)
            log.info(
                "scheduled review: %d jobs, %d scenarios in %.1f s",
                len(review.base.jobs),
                len(review.scenarios),
                row.elapsed_s,
            )
        self.store.add_review(row, keep=cfg.keep)
        return row

    def _run_logged(self) -> None:
        try:
            self.run_scheduled()
        except Exception:  # the schedule must survive anything; the traceback goes to the log
            log.exception("scheduled review failed")

    def start(self) -> None:
        """Schedule the review (``review.schedule``; once at start with ``run_on_start``)."""
        if self.settings.schedule is None or self._scheduler is not None:
            return
        kind, args = parse_schedule(self.settings.schedule)
        scheduler = BackgroundScheduler(timezone="UTC")
        if self.settings.run_on_start:
            scheduler.add_job(self._run_logged, "date", id="review-now")
        scheduler.add_job(
            self._run_logged, kind, **args, id="review", max_instances=1, coalesce=True
        )
        scheduler.start()
        self._scheduler = scheduler
        log.info("capacity review scheduled: %s", self.settings.schedule)

    def stop(self) -> None:
        """Stop the schedule; a running scheduled review stops at its next checkpoint."""
        if self._scheduled_budget is not None:
            self._scheduled_budget.cancel()
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
