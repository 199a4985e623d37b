"""Impact and advice from a what-if report."""

from __future__ import annotations

import pytest

from planner.errors import SpecError
from planner.stragglers import analyse, assess_impact
from tests.stragglers.conftest import load


def test_stage_imbalance_advises_repartition_not_a_node_swap() -> None:
    report = analyse(load("ST"))
    impact = assess_impact(report, 36_000.0)
    assert impact.action == "repartition-pipeline"
    assert "node swap will not help" in impact.advice
    assert impact.remaining_time_ideal_s == pytest.approx(36_000.0 / report.slowdown)
    assert impact.hours_lost == pytest.approx((36_000.0 - impact.remaining_time_ideal_s) / 3600)
    assert 0 <= impact.fix_gain_s <= 36_000.0 - impact.remaining_time_ideal_s + 1e-9


def test_bad_worker_names_the_node_to_drain() -> None:
    report = analyse(load("AR"))
    impact = assess_impact(report, 7200.0, worker_nodes={(0, 0): "gpu-017"})
    assert impact.action == "drain-node"
    assert "gpu-017" in impact.advice
    assert impact.fix_gain_s > 0.45 * 7200.0


def test_negative_remaining_time_is_rejected() -> None:
    with pytest.raises(SpecError):
        assess_impact(analyse(load("ST")), -1.0)
