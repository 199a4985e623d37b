"""Monte Carlo quantiles against closed forms, interruptions against their renewal-reward
mean, and the executor's independence from chunking."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from planner.capacity.build import build_workload
from planner.capacity.fleet import Fleet, Pool
from planner.capacity.montecarlo import draw_durations, draw_normals, simulate_workloads
from planner.capacity.runtime import (
    LLAMA3_INTERRUPTIONS_PER_GPU_HOUR,
    InterruptionModel,
    RuntimeBand,
)
from planner.capacity.snapshot import QueueSnapshot
from planner.capacity.stats import quantiles
from planner.errors import SpecError
from tests.capacity.helpers import J, queued, workload

SAMPLES = 4000


def _run(w, seed=0, samples=SAMPLES):
    rng = np.random.default_rng(seed)
    d = draw_durations(w, draw_normals(w.job_names, samples, rng), rng)
    return simulate_workloads([w], [d])[0]


def test_one_job_completion_quantiles_are_its_lognormal_quantiles():
    """A lone job on an idle pool completes at its runtime: the p10/p50/p90 of completion are
    the log-normal's ``exp(mu + z_q sigma)`` (4,000 samples: within 3%)."""
    band = RuntimeBand(p10_s=3600.0, p50_s=7200.0, p90_s=14400.0)
    w = workload([8], [J("a", 8, band.p50_s, sigma=band.sigma)])
    got = quantiles(_run(w).completion_s[:, 0])
    expected = [band.quantile_s(q) for q in (0.1, 0.5, 0.9)]
    np.testing.assert_allclose(got, expected, rtol=0.03)
    assert band.quantile_s(0.1) == pytest.approx(3600.0)
    assert band.quantile_s(0.9) == pytest.approx(14400.0)


def test_two_sequential_jobs_on_a_full_pool():
    """Two jobs that each need the whole pool: the second starts when the first ends, so its
    start quantiles are the first job's log-normal quantiles, and with a fixed runtime ``d`` its
    completion quantiles are those plus ``d``."""
    sigma = 0.4
    w = workload([8], [J("first", 8, 1000.0, sigma=sigma, priority=1), J("second", 8, 300.0)])
    out = _run(w, seed=1)
    z = [NormalDist().inv_cdf(q) for q in (0.1, 0.5, 0.9)]
    first = [1000.0 * math.exp(sigma * zq) for zq in z]
    np.testing.assert_allclose(quantiles(out.start_s[:, 1]), first, rtol=0.03)
    np.testing.assert_allclose(
        quantiles(out.completion_s[:, 1]), [f + 300.0 for f in first], rtol=0.03
    )


def test_deadline_miss_probability_is_the_lognormal_tail():
    """P(miss) of a lone job with deadline D is ``1 - Phi((ln D - mu) / sigma)``."""
    sigma, median, deadline = 0.3, 1000.0, 1200.0
    w = workload([8], [J("a", 8, median, sigma=sigma, deadline=deadline)])
    out = _run(w, seed=2)
    missed = float((out.completion_s[:, 0] > deadline).mean())
    expected = 1.0 - NormalDist().cdf(math.log(deadline / median) / sigma)
    assert missed == pytest.approx(expected, abs=0.02)


def test_interruptions_add_the_renewal_reward_mean():
    """A 100-hour run on 16,384 GPUs at Llama 3's rate, alone on its pool, requeued and resumed
    from its last hourly checkpoint after each interruption: the mean wall time is the
    renewal-reward ``W / (1 - r (R + c/2))`` (within 3 % over 400 samples), the interruptions
    per run are ``r`` times the wall time, and a zero rate changes nothing."""
    assert pytest.approx(1.973e-5, rel=1e-3) == LLAMA3_INTERRUPTIONS_PER_GPU_HOUR
    model = InterruptionModel()
    work = 100 * 3600.0
    w = workload([16384], [J("big", 16384, work)], interruptions=model, horizon_s=400 * 3600.0)
    out = _run(w, seed=3, samples=400)
    rate = 16384 * LLAMA3_INTERRUPTIONS_PER_GPU_HOUR / 3600.0
    expected = work / (1 - rate * (model.restart_overhead_s + 1800.0))
    wall = out.completion_s[:, 0]
    assert np.isfinite(wall).all()
    assert wall.mean() == pytest.approx(expected, rel=0.03)
    assert out.failures[:, 0].mean() == pytest.approx(rate * wall.mean(), rel=0.05)
    lost_s = out.lost_gpu_s[:, 0] / 16384
    np.testing.assert_allclose(wall, work + lost_s, rtol=1e-9)
    off = workload(
        [16384], [J("big", 16384, work)], interruptions=InterruptionModel(rate_per_gpu_hour=0.0)
    )
    np.testing.assert_allclose(_run(off, seed=3, samples=50).completion_s[:, 0], work)


def test_chunking_does_not_change_the_outcome():
    """The samples are drawn up front: cutting them into chunks of any size gives the same
    futures (what makes the Ray executor's results equal to the local ones)."""
    w = workload(
        [16],
        [J(f"j{i}", 4 * (1 + i % 3), 100.0 + 10 * i, sigma=0.3, priority=i % 3) for i in range(12)],
    )
    rng = np.random.default_rng(4)
    d = draw_durations(w, draw_normals(w.job_names, 40, rng), rng)
    one = simulate_workloads([w], [d], chunk_samples=40)[0]
    many = simulate_workloads([w], [d], chunk_samples=7)[0]
    np.testing.assert_array_equal(one.start_s, many.start_s)
    np.testing.assert_array_equal(one.release_s, many.release_s)


def test_common_random_numbers_by_job_name():
    """A job keeps its normal draws across scenarios (by name); new jobs get fresh ones."""
    rng = np.random.default_rng(5)
    base = draw_normals(("a", "b"), 10, rng)
    again = draw_normals(("b", "c"), 10, rng, {"a": base[:, 0], "b": base[:, 1]})
    np.testing.assert_array_equal(again[:, 0], base[:, 1])
    assert not np.array_equal(again[:, 1], base[:, 0])


def test_runtime_band_validation():
    with pytest.raises(SpecError, match="ordered"):
        RuntimeBand(p10_s=10.0, p50_s=5.0, p90_s=20.0)
    with pytest.raises(SpecError, match="positive"):
        RuntimeBand(p10_s=0.0, p50_s=5.0, p90_s=20.0)
    band = RuntimeBand.from_median(100.0, 0.3)
    assert band.sigma == pytest.approx(0.3)


def test_review_keeps_an_asymmetric_runtime_band():
    """A pending job of today's queue with a skewed band (p10 1 h, p50 5 h, p90 10.6 h, as a
    running job's remaining time is once it passes its own p10), alone on an idle pool: the
    review's completion p10/p50/p90 are the band's. One log-normal fitted to p10 and p90 would
    put the p90 at 16.3 h. (4,000 samples: the median of so wide a lower half is within 6 %.)"""
    band = RuntimeBand(p10_s=3600.0, p50_s=5 * 3600.0, p90_s=10.6 * 3600.0)
    fleet = Fleet(
        pools=(Pool(name="h100", gpu="h100-sxm", num_gpus=8, partitions=("h100",)),),
        interruptions=InterruptionModel(rate_per_gpu_hour=0.0),
    )
    job = queued("7", "h100", band)
    w = build_workload(fleet, (), QueueSnapshot(taken_at_s=0.0, jobs=(job,)), start_s=0.0)
    got = quantiles(_run(w).completion_s[:, 0])
    np.testing.assert_allclose(got, [band.p10_s, band.p50_s, band.p90_s], rtol=0.06)
