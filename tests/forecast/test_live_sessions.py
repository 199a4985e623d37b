"""The recorded live sessions of ``tests/data/live`` judged as ``benchmarks/live_session.py``
judges them (its RESULTS.md section, "Live ETA on a noisy host"): the targets they meet stay
met. Each evaluation's real length comes from rank 0's millisecond stamps around it. The p50
error target (5 % of the duration from 10 % on) and the phase reported within 10 % of its
start hold on the sessions recorded with the seeded noise schedule alone on the machine
(``scheduled_noise_*``); on the first two, recorded while other test suites loaded the same
machine, the p50 misses it (6.3-7.1 %) and is not asserted."""

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


@pytest.mark.parametrize("name", [n for n in sorted(SESSIONS) if n.startswith("scheduled_noise")])
def test_on_a_host_swung_by_the_noise_schedule_alone_the_p50_is_within_5_percent(
    name: str,
) -> None:
    figures = judge(LIVE / name)
    for planner, v in figures["variants"].items():
        error = v["summary"]["median_abs_p50_error_ratio"]["from_10pct"]
        assert error <= 0.05, (planner, error)


def test_a_slower_phase_that_lasts_to_the_end_is_reported_within_a_tenth_of_its_start() -> None:
    name = "scheduled_noise_slowphase_900it"
    start = SESSIONS[name][0]
    figures = judge(LIVE / name)
    for planner, v in figures["variants"].items():
        slower = [p for p in v["phases"] if p["ratio"] > 1.2]
        assert slower, (planner, v["phases"])
        assert abs(slower[0]["start_iteration"] - start) <= 0.1 * start, (planner, slower)
