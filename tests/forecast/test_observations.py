"""The one rule for step times from progress (planner.forecast.observations): wall-clock
progress, never the compute time a log prints; and that the service's ingest loop, the
replay and the benchmarks call that one implementation."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from planner.forecast import observations as rule
from planner.forecast.observations import (
    ProgressMark,
    Restart,
    observations_from_progress,
    read_progress,
    step_observations,
)
from planner.specs.job import ProgressRecord

T0 = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]


def test_the_service_the_replay_and_the_benchmarks_call_the_one_implementation() -> None:
    # the service and the replay follow a read through one function, which applies the rule
    tracking = importlib.import_module("planner.forecast.tracking")
    assert tracking.read_progress is rule.read_progress
    progress = importlib.import_module("planner.service.loops.progress")
    assert progress.follow is tracking.follow
    replay = importlib.import_module("planner.forecast.replay")
    assert replay.follow is tracking.follow
    for name in ("eta_band_coverage", "recalibration"):
        bench = importlib.import_module(f"benchmarks.{name}")
        assert bench.observations_from_progress is rule.observations_from_progress
    # the replay benchmark is built on `planner eta replay`, which is built on the replay
    eta_cli = importlib.import_module("planner.eta_cli")
    assert importlib.import_module("benchmarks.eta_replay").run_replay is eta_cli.run_replay
    # and nobody else computes a step time from two progress times
    for path in (ROOT / "planner" / "service").rglob("*.py"):
        assert "last_progress_s) /" not in path.read_text(), path


def test_the_step_time_is_wall_clock_not_the_printed_compute_time() -> None:
    # Megatron-LM prints 0.5 s per iteration, but 10 iterations took 8 s of wall clock: an
    # evaluation ran in between and its timer was stopped.
    records = [
        ProgressRecord(iteration=10, step_time_s=0.5, num_iterations=10, timestamp_s=T0),
        ProgressRecord(iteration=20, step_time_s=0.5, num_iterations=10, timestamp_s=T0 + 8.0),
    ]
    obs, mark = step_observations(records, read_time_s=T0 + 99)
    # before the clock measured anything, the printed time stands in (flagged: no pause in it)
    assert obs[0] is not None
    assert (obs[0].step_time_s, obs[0].logged_step_time_s) == (0.5, 0.5)
    assert obs[1] is not None
    assert (obs[1].step_time_s, obs[1].num_iterations, obs[1].time_s) == (0.8, 10, T0 + 8.0)
    assert obs[1].logged_step_time_s == 0.5
    assert mark is not None
    assert (mark.iteration, mark.time_s, mark.printed) == (20, T0 + 8.0, True)


def test_without_printed_times_read_times_are_used_across_reads() -> None:
    # Three lines read at once stand for the last of them at the read time; the next read
    # gives the pace between the two reads' last lines. Until then the printed times stand in.
    first, mark = step_observations(
        [ProgressRecord(iteration=i, step_time_s=0.1, num_iterations=10) for i in (10, 20, 30)],
        read_time_s=T0,
    )
    assert [(o.step_time_s, o.logged_step_time_s) for o in first if o] == [(0.1, 0.1)] * 3
    assert mark is not None
    assert (mark.iteration, mark.time_s, mark.printed) == (30, T0, False)
    second, mark_2 = step_observations(
        [ProgressRecord(iteration=i, step_time_s=0.1, num_iterations=10) for i in (40, 50)],
        read_time_s=T0 + 15,
        previous=mark,
    )
    assert second[0] is not None
    assert second[0].step_time_s == 0.1  # a stand-in still: the read clock measured nothing yet
    assert second[1] is not None
    assert (second[1].iteration, second[1].step_time_s, second[1].num_iterations) == (50, 0.75, 20)
    assert second[1].logged_step_time_s == pytest.approx(0.1)
    third, _ = step_observations(
        [ProgressRecord(iteration=60, step_time_s=0.1, num_iterations=10)],
        read_time_s=T0 + 30,
        previous=mark_2,
    )
    assert third[0] is not None
    assert (third[0].step_time_s, third[0].num_iterations) == (1.5, 10)


def test_whole_second_stamps_stand_for_the_first_line_that_printed_them() -> None:
    records = [
        ProgressRecord(iteration=i, timestamp_s=T0 + t, framework="torchtitan")
        for i, t in ((5, 0), (10, 0), (15, 0), (20, 1), (25, 1), (30, 2))
    ]
    obs = observations_from_progress(records, read_time_s=T0 + 10)
    assert [(o.iteration, o.num_iterations, o.step_time_s) for o in obs] == [
        (20, 15, 1 / 15),
        (30, 10, 0.1),
    ]
    # the lines without a printed step time leave no compute time to compare with
    assert all(o.logged_step_time_s is None for o in obs)


@pytest.mark.parametrize(
    ("previous", "record"),
    [
        # the two clocks are never mixed: a read time does not pair with a printed one
        (
            ProgressMark(iteration=0, time_s=T0, printed=False),
            ProgressRecord(iteration=10, timestamp_s=T0 + 30),
        ),
        (
            ProgressMark(iteration=0, time_s=T0, printed=True, timestamp_s=T0),
            ProgressRecord(iteration=10),
        ),
        # restart from a checkpoint: the iteration went back, it starts over
        (
            ProgressMark(iteration=50, time_s=T0, printed=True, timestamp_s=T0),
            ProgressRecord(iteration=40, timestamp_s=T0 + 9),
        ),
        # time did not advance
        (
            ProgressMark(iteration=0, time_s=T0, printed=True, timestamp_s=T0),
            ProgressRecord(iteration=10, timestamp_s=T0),
        ),
    ],
)
def test_no_step_time_without_two_times_of_one_clock(
    previous: ProgressMark, record: ProgressRecord
) -> None:
    assert observations_from_progress([record], read_time_s=T0 + 100, previous=previous) == []


def test_a_restart_is_reported_and_the_next_record_pairs_with_it() -> None:
    records = [
        ProgressRecord(iteration=50, timestamp_s=T0),
        ProgressRecord(iteration=40, timestamp_s=T0 + 100),
        ProgressRecord(iteration=45, timestamp_s=T0 + 110),
    ]
    obs, restarts, _ = read_progress(records, read_time_s=T0 + 200)
    assert restarts == [
        None,
        Restart(from_iteration=50, to_iteration=40, from_time_s=T0, time_s=T0 + 100),
        None,
    ]
    assert [(o.iteration, o.step_time_s, o.num_iterations) for o in obs if o] == [(45, 2.0, 5)]
