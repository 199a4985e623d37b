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


@pytest.fixture(scope="module")
def waiting() -> dict[str, dict[float, float | None]]:
    """The p50 start the forecast gave 74-77 at each poll while they waited."""
    polls = replay(DATA)["polls"]
    return {job: {t: p50 for t, p50, *_ in polls[job]} for job in ("74", "75", "76", "77")}


def _wide_job_first(waiting: dict[str, dict[float, float | None]], polls: list[float]) -> None:
    """At each of ``polls`` the 16-GPU job 76 is forecast to start no later than the 4-GPU
    job 77 (Slurm started 76 first, 77 after it)."""
    assert len(polls) >= 20
    for t in polls:
        wide, small = waiting["76"][t], waiting["77"][t]
        assert wide is not None
        assert small is not None
        assert small >= wide, t


@pytest.mark.timeout(40)
def test_two_waiting_copies_of_one_run_end_together_in_the_forecast(
    waiting: dict[str, dict[float, float | None]],
) -> None:
    """74 and 75 run one scenario on the same hardware, described 9 s apart (74 before the
    online calibration had learnt from 73, 75 after: whole-run bands 160 s and 119 s at the
    p50). While both wait, the forecast lets them end together, so the 4-GPU job 77 is never
    backfilled into a gap between their ends ahead of the 16-GPU job 76."""
    _wide_job_first(
        waiting, [t for t in waiting["77"] if t in waiting["74"] and t in waiting["75"]]
    )


@pytest.mark.timeout(40)
def test_two_running_copies_of_one_run_end_together_in_the_forecast(
    waiting: dict[str, dict[float, float | None]],
) -> None:
    """Once 74 and 75 run (started in one second), their ETAs still start from their two
    predictions until their own steps outweigh them. They have one runtime: the forecast gives
    both the narrower whole-run band, so 77 is never backfilled into a gap between their ends
    ahead of 76 either."""
    ran = max(*waiting["74"], *waiting["75"])
    _wide_job_first(waiting, [t for t in waiting["77"] if t in waiting["76"] and t > ran])
