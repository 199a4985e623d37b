"""The recorded real Slurm queue (tests/data/slurm/replay: six tiny GPT jobs on the dev stack,
every squeue/sinfo/sacct output of 129 polls, with the job logs) replayed through the ingest
loop, as ``benchmarks/review_replay.py`` does: the forecast of each waiting job's start must
come from the running jobs' own progress, not the horizon that a job with no ETA holds."""

from __future__ import annotations

import pytest

from benchmarks.review_replay import DATA, replay

#: Every job waited 100-262 s; a forecast that read no log and no scenario says 180 days.
HOUR_S = 3600.0


@pytest.mark.timeout(40)
def test_the_recorded_queue_is_forecast_within_minutes() -> None:
    figures = replay(DATA)
    summary = figures["summary"]
    assert summary["jobs_that_waited"] == 5
    assert summary["median_abs_first_planner_s"] < 300.0
    assert summary["median_mean_abs_planner_s"] < 300.0
    for row in figures["jobs"]:
        if row.get("waited_s", 0) > 3.0:
            assert row["mean_abs_planner_s"] < HOUR_S, row
