"""The queue forecast's runtime bands of a draw group (jobs running one program of one length
on the same hardware): one whole run, the narrowest whole-run band of the group, a running
job's being the time it has run plus its remaining band (``queue_forecast._group_bands``)."""

from __future__ import annotations

import pytest

from planner.capacity import RuntimeBand
from planner.forecast.history import ProgressHistory, RunOrigin
from planner.forecast.observations import Restart
from planner.service.loops.queue_forecast import _group_bands, _resumed
from planner.service.models import JobRow
from planner.specs.job import JobState, JobStatus

NOW = 1_750_000_000.0


def _job(job_id: str, *, ran_s: float | None = None) -> JobState:
    """A pending job, or one that has run ``ran_s`` seconds."""
    return JobState(
        scheduler="slurm",
        cluster="dev",
        job_id=job_id,
        partition="gpu",
        status=JobStatus.PENDING if ran_s is None else JobStatus.RUNNING,
        num_gpus=8,
        gpu_type="h100",
        start_time_s=None if ran_s is None else NOW - ran_s,
    )


def _bands(
    jobs: list[JobState], bands: dict[str, RuntimeBand], resumed: frozenset[str] = frozenset()
) -> dict[str, RuntimeBand]:
    return {
        **bands,
        **_group_bands(
            jobs,
            bands,
            dict.fromkeys(bands, "g"),
            dict.fromkeys(bands, "eta"),
            now_s=NOW,
            resumed=resumed,
        ),
    }


def _b(p10: float, p50: float, p90: float) -> RuntimeBand:
    return RuntimeBand(p10_s=p10, p50_s=p50, p90_s=p90)


def _close(band: RuntimeBand, p10: float, p50: float, p90: float) -> None:
    assert (band.p10_s, band.p50_s, band.p90_s) == pytest.approx((p10, p50, p90))


def test_copies_started_together_take_the_narrower_remaining_band() -> None:
    # 74 and 75 of the recorded queue 3 s after they started: one runtime, two priors
    jobs = [_job("74", ran_s=3.0), _job("75", ran_s=3.0)]
    wide, narrow = _b(98, 159, 193), _b(74, 119, 142)
    out = _bands(jobs, {"74": wide, "75": narrow})
    _close(out["74"], 74, 119, 142)
    assert out["75"] == narrow


def test_a_waiting_copy_takes_the_whole_run_of_a_copy_that_has_run() -> None:
    # the running copy's whole run: 600 s run + 100/120/150 s left, narrower than the prior
    jobs = [_job("1", ran_s=600.0), _job("2")]
    out = _bands(jobs, {"1": _b(100, 120, 150), "2": _b(300, 500, 800)})
    _close(out["2"], 700, 720, 750)
    _close(out["1"], 100, 120, 150)


def test_a_copy_started_later_ends_later_by_the_difference() -> None:
    # the first copy's whole run is the narrower; the second, 200 s behind, ends 200 s later
    jobs = [_job("1", ran_s=500.0), _job("2", ran_s=300.0)]
    out = _bands(jobs, {"1": _b(90, 100, 115), "2": _b(200, 400, 700)})
    _close(out["2"], 290, 300, 315)


def test_a_resumed_run_and_a_copy_past_the_bands_p10_keep_their_own() -> None:
    first = _b(100, 120, 150)  # whole run 700/720/750 s
    resumed, behind = _b(20, 60, 200), _b(5, 30, 90)
    jobs = [_job("1", ran_s=600.0), _job("2", ran_s=50.0), _job("3", ran_s=710.0)]
    out = _bands(jobs, {"1": first, "2": resumed, "3": behind}, resumed=frozenset({"2"}))
    assert out["2"] == resumed  # restarted from a checkpoint: less than the whole run left
    assert out["3"] == behind  # has run longer than the group's p10: not that band shifted


def test_waiting_copies_alone_take_the_narrowest_in_queue_order_on_a_tie() -> None:
    jobs = [_job("1"), _job("2"), _job("3")]
    same = _b(80, 100, 125)
    out = _bands(jobs, {"1": _b(50, 100, 200), "2": same, "3": _b(160, 200, 250)})
    assert out["1"] == out["2"] == same
    _close(out["3"], 80, 100, 125)


def test_a_run_is_resumed_when_it_ran_before_this_start() -> None:
    fresh = ProgressHistory(first_iteration=10, first_time_s=NOW - 590.0).to_json()
    before = ProgressHistory(first_iteration=10, first_time_s=NOW - 5000.0).to_json()
    followed = ProgressHistory(first_iteration=500, first_time_s=NOW - 590.0, continues="7")
    running = _job("1", ran_s=600.0)
    assert not _resumed(JobRow(progress_history=None), running)
    assert not _resumed(JobRow(progress_history=dict(fresh)), running)
    assert _resumed(JobRow(progress_history=dict(before)), running)  # requeued, not yet logged
    assert _resumed(JobRow(progress_history=dict(followed.to_json())), running)
    assert not _resumed(JobRow(progress_history=None), _job("2"))
    assert _resumed(JobRow(progress_history=dict(fresh)), _job("2"))  # requeued, waits again


def test_a_history_that_does_not_read_is_a_fresh_run() -> None:
    # a stored history from another version: its first point, or a restart, does not read
    # (ProgressHistory.from_json reads both as an empty history, as the ETA does): a pending
    # job's ETA is then a whole run from the prior, so it is not resumed and shares its group's
    stored = ProgressHistory(first_iteration=10, first_time_s=NOW - 5000.0).to_json()
    unreadable = [
        {**stored, "first_iteration": "ten"},
        {**stored, "first_time_s": [NOW]},
        {**stored, "restarts": [{"from_iteration": 900}]},
        {**stored, "continues": 7},
    ]
    for doc in unreadable:
        assert ProgressHistory.from_json(doc) == ProgressHistory()
        assert not _resumed(JobRow(progress_history=doc), _job("2"))
        assert not _resumed(JobRow(progress_history=doc), _job("1", ran_s=600.0))


def test_a_readable_history_says_how_the_run_began() -> None:
    restarted = ProgressHistory(first_iteration=10, first_time_s=NOW - 590.0)
    restarted.restart(
        Restart(from_iteration=900, to_iteration=500, from_time_s=None, time_s=NOW - 100.0)
    )
    doc = restarted.to_json()
    origin = RunOrigin.from_json(doc)
    whole = ProgressHistory.from_json(doc)
    assert (origin.first_iteration, origin.first_time_s, list(origin.restarts)) == (
        whole.first_iteration,
        whole.first_time_s,
        whole.restarts,
    )
    assert _resumed(JobRow(progress_history=doc), _job("1", ran_s=600.0))  # a restart
    assert _resumed(JobRow(progress_history=doc), _job("2"))  # has run: the rest of its run
    empty = ProgressHistory().to_json()  # no first point: its ETA is a whole run
    assert not _resumed(JobRow(progress_history=empty), _job("2"))
