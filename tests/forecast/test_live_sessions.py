"""The recorded live sessions of ``tests/data/live`` judged as ``benchmarks/live_session.py``
judges them (its RESULTS.md section, "Live ETA on a noisy host"): the targets they meet stay
met. Each evaluation's real length comes from rank 0's millisecond stamps around it; the p50
error target (5 % of the duration from 10 % on) is not met yet and is not asserted here."""

from __future__ import annotations

import pytest

from benchmarks.live_session import LIVE, SESSIONS, judge


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_evaluation_is_counted_within_a_fifth_and_the_band_covers_70_to_90(
    name: str,
) -> None:
    figures = judge(LIVE / name)
    for planner, v in figures["variants"].items():
        evaluations = v["evaluations"]
        # the nine after iterations 90-810; the one after the last iteration is in no interval
        assert len(evaluations) == 9, (planner, evaluations)
        for iteration, e in evaluations.items():
            assert abs(e["counted_s"] - e["real_s"]) <= 0.2 * e["real_s"], (planner, iteration, e)
        coverage = v["summary"]["p10_p90_coverage_ratio"]
        assert 0.7 <= coverage <= 0.9, (planner, coverage)
