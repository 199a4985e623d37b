"""Aggregation: exact interval integrals, occupancy, utilisation per week, team GPU-hours."""

from __future__ import annotations

import numpy as np
import pytest

from planner.capacity.stats import interval_integrals, summarize
from tests.capacity.helpers import J, run_fixed, workload


def test_interval_integrals_match_brute_force():
    rng = np.random.default_rng(0)
    start = rng.uniform(-10, 100, 300)
    end = start + rng.uniform(0, 50, 300)
    weight = rng.integers(1, 9, 300).astype(np.float64)
    group = rng.integers(0, 4, 300)
    edges = np.linspace(0, 120, 13)
    got = interval_integrals((start, end, weight, group), 4, edges)
    want = np.zeros((4, 12))
    for s, e, w, g in zip(start, end, weight, group, strict=True):
        for b in range(12):
            want[g, b] += w * max(0.0, min(e, edges[b + 1]) - max(s, edges[b]))
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_weekly_utilisation_and_team_hours_of_a_known_job():
    """One 8-GPU job for the first 3.5 days on a 16-GPU pool: week 1 is 25% busy, later weeks
    idle; the team used 8 x 84 = 672 GPU-hours costing 672 (1 per GPU-hour)."""
    day = 86400.0
    w = workload([16], [J("a", 8, 3.5 * day)], horizon_s=21 * day)
    result = summarize(w, run_fixed(w), "base")
    weeks = [p for p in result.pool_weeks if p.pool == "pool0"]
    assert [round(p.utilisation, 6) for p in weeks] == [0.25, 0.0, 0.0]
    assert weeks[0].capacity_gpu_hours == pytest.approx(16 * 168)
    assert weeks[0].idle_gpu_hours == pytest.approx(16 * 168 - 672)
    assert result.teams[0].gpu_hours_mean == pytest.approx(672)
    assert result.teams[0].cost_mean == pytest.approx(672)
    occ = result.occupancy[0]
    assert occ.occupied[1][0] == pytest.approx(8.0)
    assert occ.capacity[0] == 16


def test_deadline_summary():
    w = workload([8], [J("late", 8, 100.0, deadline=50.0), J("free", 8, 10.0)])
    result = summarize(w, run_fixed(w), "base")
    late = result.jobs[0]
    assert late.miss_probability == 1.0
    assert result.misses_at_p90 == ("late",)
    assert result.summary()["jobs_with_deadline"] == 1
    assert result.jobs[1].miss_probability is None
