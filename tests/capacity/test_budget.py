"""Budgets of a review (``planner.capacity.budget``) and the simulation's checkpoints: a review
over a limit is refused before it is simulated, naming the limit; a caller's budget stops the
simulation between samples and inside a long sample."""

from __future__ import annotations

import numpy as np
import pytest

from planner.capacity.budget import ReviewBudget, estimated_bytes
from planner.capacity.documents import located
from planner.capacity.inputs import ReviewInputs, review_inputs
from planner.capacity.montecarlo import Draws, simulate_chunk
from planner.capacity.simulate import EVENTS_PER_CHECKPOINT, Simulator
from planner.errors import SpecError
from planner.search.budget import (
    BudgetExceededError,
    SearchBudget,
    SearchCancelledError,
    budget_scope,
)

from .helpers import J, workload

DAY = 86400.0


def _inputs(horizon_days: float = 90, pools: int = 1, what_ifs: int = 0) -> ReviewInputs:
    fleet = {
        "name": "f",
        "start": "2025-07-01",
        "horizon_days": horizon_days,
        "pools": [{"name": f"p{i}", "gpu": "h100-sxm", "num_gpus": 64} for i in range(pools)],
    }
    scenarios = [
        {"name": f"w{i}", "capacity": [{"pool": "p0", "gpus": 8}]} for i in range(what_ifs)
    ]
    docs = [located(scenarios, "what_ifs")] if scenarios else []
    return review_inputs(located(fleet, "fleet"), None, docs, None, now_s=0.0)


def test_each_limit_refuses_with_its_name_and_the_fix() -> None:
    budget = ReviewBudget(
        max_horizon_days=366,
        max_jobs=10,
        max_samples=100,
        max_pools=2,
        max_what_ifs=1,
        max_memory_bytes=2**30,
        field_prefix="limits.review_",
    )
    budget.check(_inputs(), samples=100)
    cases = [
        (_inputs(horizon_days=1e6), 10, "limits.review_max_horizon_days", "shorter horizon"),
        (_inputs(), 101, "limits.review_max_samples", "fewer samples"),
        (_inputs(pools=3), 10, "limits.review_max_pools", "fewer pools"),
        (_inputs(pools=2, what_ifs=1), 10, "limits.review_max_pools", "fewer pools"),
        (_inputs(what_ifs=2), 10, "limits.review_max_what_ifs", "send fewer"),
    ]
    for inputs, samples, field, fix in cases:
        with pytest.raises(BudgetExceededError) as err:
            budget.check(inputs, samples=samples)
        assert err.value.field == field
        assert fix in err.value.message
    with pytest.raises(BudgetExceededError, match=r"limits\.review_max_samples"):
        budget.check(_inputs(), samples=10, sizing_samples=500)
    tight = ReviewBudget(max_memory_bytes=64 * 2**20, field_prefix="limits.review_")
    with pytest.raises(BudgetExceededError, match=r"limits.review_max_memory_bytes: .*MiB"):
        tight.check(_inputs(horizon_days=365), samples=2000)
    with pytest.raises(SpecError, match="max_jobs: must be > 0"):
        ReviewBudget(max_jobs=0)


def test_the_memory_estimate_covers_what_was_measured() -> None:
    """Peak RSS measured over reviews of pending jobs (module docstring): the estimate is above
    each."""
    measured_mib = [  # (samples, jobs, what-ifs, pools, days, MiB), runs requeued
        (50, 200, 0, 1, 3650, 54),
        (200, 200, 0, 1, 3650, 211),
        (200, 2000, 0, 1, 90, 155),
        (100, 2000, 3, 1, 90, 232),
        (1600, 500, 0, 1, 90, 341),
    ]
    for samples, jobs, what_ifs, pools, days, mib in measured_mib:
        need = estimated_bytes(
            samples=samples, jobs=jobs, what_ifs=what_ifs, pools=pools, horizon_s=days * DAY
        )
        assert mib * 2**20 < need < 1.6 * mib * 2**20


def test_a_cancelled_budget_stops_the_simulation_between_and_inside_samples() -> None:
    w = workload([8], [J(f"j{i}", 8, 3600.0) for i in range(4 * EVENTS_PER_CHECKPOINT)])
    durations = Draws(
        np.full((3, w.num_options), 3600.0), np.zeros((3, w.num_jobs), np.int64), np.zeros(0)
    )
    budget = SearchBudget()
    budget.cancel()
    with budget_scope(budget), pytest.raises(SearchCancelledError):
        simulate_chunk([w], (0, durations))
    sim = Simulator(w)
    budget = SearchBudget()
    budget.cancel()
    with budget_scope(budget), pytest.raises(SearchCancelledError):
        sim.run(durations.work_s[0])  # one sample of 1,024 event times: checked inside it
    # outside a budget scope nothing stops (the CLI and the library)
    assert np.isfinite(simulate_chunk([w], (0, durations)).start_s).all()
