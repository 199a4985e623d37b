"""The one rule for step times from progress (planner.forecast.observations), and that the
service's ingest loop and the benchmarks call that one implementation."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from planner.forecast import observations as rule
from planner.forecast.observations import (
    ProgressMark,
    observations_from_progress,
    step_observations,
)
from planner.specs.job import ProgressRecord

T0 = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]


def test_the_service_and_the_benchmarks_call_the_one_implementation() -> None:
    progress = importlib.import_module("planner.service.loops.progress")
    assert progress.step_observations is rule.step_observations
    for name in ("eta_band_coverage", "recalibration"):
        bench = importlib.import_module(f"benchmarks.{name}")
        assert bench.observations_from_progress is rule.observations_from_progress
    # and nobody else computes a step time from two progress times
    for path in (ROOT / "planner" / "service").rglob("*.py"):
        assert "last_progress_s) /" not in path.read_text(), path


def test_printed_step_times_at_printed_or_read_time() -> None:
    records = [
        ProgressRecord(iteration=10, step_time_s=0.5, num_iterations=10, timestamp_s=T0),
        ProgressRecord(iteration=20, step_time_s=0.6, num_iterations=10),
    ]
    obs, mark = step_observations(records, read_time_s=T0 + 99)
    assert [(o.step_time_s, o.num_iterations, o.time_s) for o in obs if o] == [
        (0.5, 10, T0),
        (0.6, 10, T0 + 99),
    ]
    assert mark == ProgressMark(iteration=20, timestamp_s=None)


def test_a_rate_spans_two_reads_through_the_mark() -> None:
    first, mark = step_observations(
        [ProgressRecord(iteration=0, timestamp_s=T0, framework="torchtitan")], read_time_s=T0 + 5
    )
    assert first == [None]
    second, _ = step_observations(
        [ProgressRecord(iteration=10, timestamp_s=T0 + 30.0, framework="torchtitan")],
        read_time_s=T0 + 40,
        previous=mark,
    )
    assert second[0] is not None
    assert (second[0].step_time_s, second[0].num_iterations) == (3.0, 10)


@pytest.mark.parametrize(
    ("previous", "record"),
    [
        # read times are never differenced: no printed time on either side gives no step time
        (ProgressMark(iteration=0, timestamp_s=None), ProgressRecord(iteration=10, timestamp_s=T0)),
        (ProgressMark(iteration=0, timestamp_s=T0), ProgressRecord(iteration=10)),
        # restart from a checkpoint: the iteration went back, it starts over
        (
            ProgressMark(iteration=50, timestamp_s=T0),
            ProgressRecord(iteration=40, timestamp_s=T0 + 9),
        ),
        # time did not advance
        (ProgressMark(iteration=0, timestamp_s=T0), ProgressRecord(iteration=10, timestamp_s=T0)),
    ],
)
def test_no_step_time_without_two_printed_times(
    previous: ProgressMark, record: ProgressRecord
) -> None:
    assert observations_from_progress([record], read_time_s=T0 + 100, previous=previous) == []


def test_after_a_restart_the_next_record_pairs_with_the_restart() -> None:
    records = [
        ProgressRecord(iteration=50, timestamp_s=T0),
        ProgressRecord(iteration=40, timestamp_s=T0 + 100),
        ProgressRecord(iteration=45, timestamp_s=T0 + 110),
    ]
    obs = observations_from_progress(records, read_time_s=T0 + 200)
    assert [(o.iteration, o.step_time_s, o.num_iterations) for o in obs] == [(45, 2.0, 5)]
