"""A review's inputs read together: the fleet, the plan, today's queue and the what-ifs, with the
review's start that anchors their relative dates (``+19d``).

``planner review`` (files) and the service (``POST /v1/reviews``, the scheduled review) both
read their documents through ``review_inputs``, so the start rule is one rule:

- the start given (``--start``, the request's ``start``); else
- the later of the fleet's ``start`` and the time the queue snapshot was taken (a review cannot
  start before the queue it knows of), whichever of them exists; else
- now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.capacity.documents import Located
from planner.capacity.fleet import Fleet, fleet_start_s, parse_fleet
from planner.capacity.plan import PlannedJob, parse_plan
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.whatif import WhatIf, parse_what_ifs

__all__ = ["ReviewInputs", "review_inputs", "review_start_s"]


@dataclass(frozen=True, slots=True)
class ReviewInputs:
    """What ``run_review`` takes: fleet, planned jobs, today's queue (None: none), what-ifs,
    and the start (epoch seconds)."""

    fleet: Fleet
    planned: tuple[PlannedJob, ...]
    snapshot: QueueSnapshot | None
    what_ifs: tuple[WhatIf, ...]
    start_s: float


def review_start_s(
    given_s: float | None, fleet_start: float | None, taken_at_s: float | None, now_s: float
) -> float:
    """The review's start by the module's rule (epoch seconds)."""
    if given_s is not None:
        return given_s
    known = [s for s in (fleet_start, taken_at_s) if s is not None]
    return max(known) if known else now_s


def review_inputs(
    fleet: Located,
    plan: Located | None,
    what_ifs: Sequence[Located] = (),
    snapshot: QueueSnapshot | None = None,
    *,
    start_s: float | None = None,
    now_s: float,
) -> ReviewInputs:
    """Parse a review's documents (``Located`` roots of files or request bodies; ``plan``
    None: no planned jobs). Raises ``DocumentError`` naming the document, line and field."""
    start = review_start_s(
        start_s, fleet_start_s(fleet), snapshot.taken_at_s if snapshot else None, now_s
    )
    fleet_spec = parse_fleet(fleet, start_s=start)
    planned = parse_plan(plan, fleet_spec, start_s=start) if plan is not None else ()
    scenarios = tuple(
        s
        for doc in what_ifs
        for s in parse_what_ifs(doc, fleet_spec, planned, snapshot, start_s=start)
    )
    return ReviewInputs(fleet_spec, planned, snapshot, scenarios, start)
