"""Calibrated ETA bands: conformal offsets per progress bucket from finished
jobs, the model's band as the prior, and the coverage they reach."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.forecast.bands import BandCalibration, BandOffsets, BandPoint, bucket_of
from planner.forecast.values import Quantiles


def job_points(rng: np.random.Generator, *, spread: float) -> list[BandPoint]:
    """A finished job whose model band says +-10 % but whose real remaining time strays by
    ``spread`` (log-sd) from the p50."""
    out = []
    for progress in np.linspace(0.05, 0.95, 19):
        p50 = 1000.0 * (1.0 - progress)
        raw = Quantiles(p10=p50 / 1.1, p50=p50, p90=p50 * 1.1)
        out.append(
            BandPoint(
                progress=float(progress),
                raw=raw,
                actual_s=p50 * math.exp(rng.normal(0.0, spread)),
            )
        )
    return out


def test_buckets() -> None:
    assert [bucket_of(p) for p in (0.0, 0.09, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5)] == [
        0,
        0,
        1,
        2,
        3,
        4,
        4,
        4,
    ]


def test_without_history_the_band_is_the_models() -> None:
    calibration = BandCalibration()
    band = Quantiles(p10=90.0, p50=100.0, p90=120.0)
    assert calibration.table().adjust(0.3, band) == band
    assert calibration.coverage() is None
    assert BandOffsets.from_json({"bad": "doc"}).adjust(0.3, band) == band


def test_history_widens_a_band_too_narrow_to_nominal_coverage() -> None:
    rng = np.random.default_rng(7)
    calibration = BandCalibration()
    for k in range(40):  # the cluster's finished jobs stray by 20 %: the model's 10 % is narrow
        calibration.add_job(f"job{k}", float(k), job_points(rng, spread=0.2))
    table = calibration.table()
    q_lo, q_hi, jobs = table.by_bucket[2]
    assert jobs == 40
    assert q_lo > 0
    assert q_hi > 0
    held = []
    for _ in range(200):  # new jobs like them
        for point in job_points(rng, spread=0.2):
            band = table.adjust(point.progress, point.raw)
            held.append(band.p10 <= point.actual_s <= band.p90)
            assert band.p50 == point.raw.p50
    assert 0.75 <= float(np.mean(held)) <= 0.85


def test_history_narrows_a_band_too_wide_and_reports_coverage() -> None:
    rng = np.random.default_rng(3)
    calibration = BandCalibration()
    for k in range(30):  # they stray by 2 %: the model's 10 % is too wide
        calibration.add_job(f"job{k}", float(k), job_points(rng, spread=0.02))
    q_lo, q_hi, _ = calibration.table().by_bucket[3]
    assert q_lo < 0
    assert q_hi < 0
    assert calibration.coverage() == pytest.approx(1.0)  # their published (model) bands held
    again = BandCalibration.from_json(calibration.to_json())
    assert again.table() == calibration.table()
    assert len(calibration.summary()) == 5


def test_one_odd_job_does_not_swing_the_band_and_the_newest_jobs_are_kept() -> None:
    rng = np.random.default_rng(1)
    calibration = BandCalibration()
    calibration.add_job("odd", 0.0, job_points(rng, spread=2.0))
    _, q_hi, jobs = calibration.table().by_bucket[2]
    assert jobs == 1
    assert q_hi < 2.0  # the prior's pseudo-jobs hold it
    for k in range(250):
        calibration.add_job(f"job{k}", float(k + 1), job_points(rng, spread=0.1))
    assert len(calibration.jobs) == 200
    assert "odd" not in {j.job for j in calibration.jobs}
