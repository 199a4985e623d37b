"""The backfill cycle the queue forecast simulates: the setting when set, else the scheduler's
own (read by the source), else Slurm's default."""

from __future__ import annotations

from planner.service.loops.queue_forecast import SLURM_BF_INTERVAL_S, backfill_interval
from planner.service.settings import Settings
from planner.specs.job import ClusterSnapshot


def _snapshot(backfill_interval_s: float | None) -> ClusterSnapshot:
    return ClusterSnapshot(
        scheduler="slurm",
        cluster="dev",
        taken_at_s=0.0,
        backfill_interval_s=backfill_interval_s,
    )


def test_the_setting_wins_then_the_schedulers_own_then_slurms_default() -> None:
    assert backfill_interval(12.0, _snapshot(5.0)) == 12.0
    assert backfill_interval(0.0, _snapshot(5.0)) == 0.0  # 0: backfill at every job end
    assert backfill_interval(None, _snapshot(5.0)) == 5.0
    assert backfill_interval(None, _snapshot(None)) == SLURM_BF_INTERVAL_S == 30.0


def test_the_setting_is_unset_by_default() -> None:
    assert Settings().queue_forecast.backfill_interval_s is None
    assert (
        Settings(queue_forecast={"backfill_interval_s": 5}).queue_forecast.backfill_interval_s == 5
    )
