"""Budgets of one capacity review: its sizes checked before any simulation (pure).

A review's cost grows with its horizon, jobs, Monte Carlo samples, pools and what-if scenarios,
and its memory with products of them: the simulated futures are ``samples x jobs`` arrays per
scenario and the occupancy is ``samples x pools x 6-hour bins``. :class:`ReviewBudget` refuses a
review over any of its limits with a :class:`~planner.search.budget.BudgetExceededError`
(a ``SpecError`` whose field names the limit, e.g. ``limits.review_max_horizon_days``) before
anything is simulated; the time a review may run is the caller's
:class:`~planner.search.budget.SearchBudget` (the simulation calls ``checkpoint()`` between
samples and every ``planner.capacity.simulate.EVENTS_PER_CHECKPOINT`` event times of one
sample).

Memory estimate (:func:`estimated_bytes`), measured with ``resource.getrusage`` peak RSS over
reviews of 200 to 2,000 pending jobs, 50 to 1,600 samples, 90 to 3,650 days and 0 to 3 what-ifs
(local executor, no sizing; every run of a job kept, since runs stop at failures and time limits
and requeue): about 390 bytes per job and sample of the base scenario (the outcome arrays, the
runs, their quantiles and the per-job summaries), 240 more per job, sample and what-if (their
outcomes are held until every scenario is summarised), and about 70 per sample, pool and 6-hour
bin (occupancy and demand integrals). The constants below round those up, so the estimate is
above every measured peak (2,000 jobs x 200 samples: 155 MiB measured, 189 MiB estimated;
200 samples x 3,650 days: 211 MiB measured, 241 MiB estimated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.capacity.inputs import ReviewInputs
from planner.capacity.stats import DEFAULT_BIN_S
from planner.errors import SpecError
from planner.search.budget import BudgetExceededError

__all__ = ["ReviewBudget", "estimated_bytes"]

#: Peak bytes per job and sample of the base scenario.
BYTES_PER_JOB_SAMPLE = 480
#: Bytes per job, sample and what-if scenario held until every scenario is summarised.
BYTES_PER_WHAT_IF_JOB_SAMPLE = 300
#: Bytes per sample, pool and 6-hour occupancy bin.
BYTES_PER_OCCUPANCY_CELL = 80

_MIB = 2**20


def estimated_bytes(*, samples: int, jobs: int, what_ifs: int, pools: int, horizon_s: float) -> int:
    """Estimated peak memory of a review (bytes above the interpreter's own; module
    docstring): ``samples`` Monte Carlo samples, ``jobs`` in the base scenario, ``what_ifs``
    scenarios beside it, ``pools`` (the most of any scenario), over ``horizon_s`` seconds."""
    bins = max(1, math.ceil(horizon_s / DEFAULT_BIN_S))
    cells = samples * jobs
    return (
        BYTES_PER_JOB_SAMPLE * cells
        + BYTES_PER_WHAT_IF_JOB_SAMPLE * cells * what_ifs
        + BYTES_PER_OCCUPANCY_CELL * samples * pools * bins
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewBudget:
    """Limits of one review (None: no limit); errors name ``field_prefix`` + the field, e.g.
    ``limits.review_`` + ``max_horizon_days``.

    ``max_horizon_days``: the fleet's horizon; ``max_jobs``: running, pending and planned jobs
    of the base scenario; ``max_samples``: Monte Carlo samples (of the review and of the
    sizing search); ``max_pools``: the fleet's pools plus those what-ifs may add;
    ``max_what_ifs``: what-if scenarios; ``max_memory_bytes``: :func:`estimated_bytes`.
    """

    max_horizon_days: float | None = None
    max_jobs: int | None = None
    max_samples: int | None = None
    max_pools: int | None = None
    max_what_ifs: int | None = None
    max_memory_bytes: int | None = None
    field_prefix: str = ""

    def __post_init__(self) -> None:
        for name in (
            "max_horizon_days",
            "max_jobs",
            "max_samples",
            "max_pools",
            "max_what_ifs",
            "max_memory_bytes",
        ):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SpecError(self.field_prefix + name, f"must be > 0, got {value!r}")

    def _refuse(self, name: str, message: str) -> BudgetExceededError:
        return BudgetExceededError(self.field_prefix + name, message)

    def check_samples(self, samples: int, sizing_samples: int | None = None) -> None:
        """Refuse more Monte Carlo samples than ``max_samples`` (cheap: before any parsing)."""
        most = max(samples, sizing_samples or 0)
        if self.max_samples is not None and most > self.max_samples:
            raise self._refuse(
                "max_samples",
                f"{most:,} Monte Carlo samples asked for, over the budget of "
                f"{self.max_samples:,}; ask for fewer samples",
            )

    def check(
        self, inputs: ReviewInputs, *, samples: int, sizing_samples: int | None = None
    ) -> None:
        """Refuse a review of ``inputs`` over any limit, before it is simulated. Raises
        ``BudgetExceededError`` naming the limit, what the review asks for and what to do."""
        self.check_samples(samples, sizing_samples)
        fleet = inputs.fleet
        days = fleet.horizon_s / 86400.0
        if self.max_horizon_days is not None and days > self.max_horizon_days:
            raise self._refuse(
                "max_horizon_days",
                f"the fleet's horizon_days of {days:g} is over the budget of "
                f"{self.max_horizon_days:g} days; review a shorter horizon",
            )
        pools = len(fleet.pools) + max((len(w.capacity) for w in inputs.what_ifs), default=0)
        if self.max_pools is not None and pools > self.max_pools:
            raise self._refuse(
                "max_pools",
                f"{len(fleet.pools)} pools (and up to {pools - len(fleet.pools)} a what-if may "
                f"add) are over the budget of {self.max_pools}; review fewer pools",
            )
        if self.max_what_ifs is not None and len(inputs.what_ifs) > self.max_what_ifs:
            raise self._refuse(
                "max_what_ifs",
                f"{len(inputs.what_ifs)} what-if scenarios are over the budget of "
                f"{self.max_what_ifs}; send fewer",
            )
        jobs = len(inputs.planned) + (len(inputs.snapshot.jobs) if inputs.snapshot else 0)
        if self.max_jobs is not None and jobs > self.max_jobs:
            raise self._refuse(
                "max_jobs",
                f"{jobs:,} jobs (planned and today's queue) are over the budget of "
                f"{self.max_jobs:,}; plan fewer jobs or leave out the live queue",
            )
        need = estimated_bytes(
            samples=max(samples, sizing_samples or 0),
            jobs=jobs,
            what_ifs=len(inputs.what_ifs),
            pools=pools,
            horizon_s=fleet.horizon_s,
        )
        if self.max_memory_bytes is not None and need > self.max_memory_bytes:
            raise self._refuse(
                "max_memory_bytes",
                f"{samples:,} samples x {jobs:,} jobs x {1 + len(inputs.what_ifs)} scenarios "
                f"over {days:g} days need about {need / _MIB:,.0f} MiB, over the budget of "
                f"{self.max_memory_bytes / _MIB:,.0f} MiB; ask for fewer samples, jobs, "
                "what-ifs or days",
            )
