"""ETA forecast: properties (hypothesis), edge cases, and a replay of the recorded tiny GPT run."""

from __future__ import annotations

import math
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters.logs.tail import LogTailer
from planner.errors import SpecError
from planner.forecast.eta import (
    EtaEstimate,
    EtaMethod,
    Quantiles,
    StepObservation,
    estimate_pending,
    estimate_running,
    t_quantile_90,
)
from planner.forecast.observations import observations_from_progress
from planner.specs.job import ProgressRecord, TailCursor

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
T0 = 1.7e9


def _obs(step_s: float, count: int, *, every: int = 10, start: int = 0) -> list[StepObservation]:
    """``count`` observations of ``every`` iterations each, after a warm-up-free start."""
    return [
        StepObservation(
            iteration=start + every * (k + 1),
            step_time_s=step_s,
            num_iterations=every,
            time_s=T0 + step_s * every * (k + 1),
        )
        for k in range(count)
    ]


def _run(
    obs: list[StepObservation],
    prior: float | None = 1.0,
    *,
    iteration: int | None = None,
    train_iters: int = 10_000,
    half_life_s: float = 1800.0,
) -> EtaEstimate:
    return estimate_running(
        prior_step_time_s=prior,
        prior_log_sd=0.3,
        observations=obs,
        iteration=max((o.iteration for o in obs), default=0) if iteration is None else iteration,
        train_iters=train_iters,
        last_progress_time_s=T0,
        now_s=T0,
        half_life_s=half_life_s,
    )


def _width(q: Quantiles) -> float:
    return math.log(q.p90 / q.p10)


steps = st.floats(min_value=1e-3, max_value=100.0)
sds = st.floats(min_value=0.01, max_value=2.0)


@given(
    prior=st.one_of(st.none(), steps),
    sd=sds,
    times=st.lists(st.floats(min_value=1e-3, max_value=100.0), max_size=30),
    iteration=st.integers(0, 5000),
    train_iters=st.integers(1, 10_000),
    now_offset=st.floats(min_value=0.0, max_value=1e6),
)
@settings(max_examples=150, deadline=None)
def test_bands_are_ordered(
    prior: float | None,
    sd: float,
    times: list[float],
    iteration: int,
    train_iters: int,
    now_offset: float,
) -> None:
    obs = [
        StepObservation(iteration=5 * (k + 1), step_time_s=t, num_iterations=5, time_s=T0 + k)
        for k, t in enumerate(times)
    ]
    if prior is None and not obs:
        with pytest.raises(SpecError):
            estimate_running(
                prior_step_time_s=None,
                prior_log_sd=sd,
                observations=obs,
                iteration=iteration,
                train_iters=train_iters,
                last_progress_time_s=T0,
                now_s=T0 + now_offset,
            )
        return
    est = estimate_running(
        prior_step_time_s=prior,
        prior_log_sd=sd,
        observations=obs,
        iteration=iteration,
        train_iters=train_iters,
        last_progress_time_s=T0,
        now_s=T0 + now_offset,
    )
    for q in (est.step_time_s, est.remaining_s, est.completion_time_s):
        assert q is not None
        assert q.p10 <= q.p50 <= q.p90
    assert est.remaining_s.p10 >= 0
    assert est.completion_time_s is not None
    assert est.completion_time_s.p10 >= T0 + now_offset or est.method is EtaMethod.DONE


@given(step=steps, few=st.integers(1, 50), extra=st.integers(1, 40))
# Found by hypothesis on unfixed seeds: the 8th steady observation brought the long-run noise's
# first batches, and the band's degrees of freedom fell from the 7 observations' 10 to the 4
# batches' 7 (a wider t quantile); 16 steady observations made 4 batches where 15 made 5, and
# 49 made 7 where 48 made 8 (batches of floor(sqrt(m)) observations).
@example(step=100.0, few=7, extra=2)
@example(step=100.0, few=8, extra=1)
@example(step=1.0, few=16, extra=1)
@example(step=0.1, few=49, extra=1)
@settings(max_examples=60, deadline=None)
def test_more_observations_narrow_the_band(step: float, few: int, extra: int) -> None:
    """At one steady pace, more observations never widen the band of the step time nor of the
    remaining time: whatever rule a new observation brings in (the long-run noise's batches,
    more of them), it only adds evidence. The first observation is warm-up."""
    a = _run(_obs(step, few, start=20), prior=None, iteration=2000, train_iters=4000)
    b = _run(_obs(step, few + extra, start=20), prior=None, iteration=2000, train_iters=4000)
    assert _width(b.remaining_s) <= _width(a.remaining_s) + 1e-12
    assert _width(b.step_time_s) <= _width(a.step_time_s) + 1e-12


def test_observations_narrow_the_prior_band() -> None:
    prior_only = _run([], prior=1.0, iteration=100, train_iters=4000)
    blended = _run(_obs(1.1, 20, start=20), prior=1.0, iteration=220, train_iters=4000)
    assert prior_only.method is EtaMethod.PRIOR
    assert blended.method is EtaMethod.BLEND
    assert _width(blended.step_time_s) < _width(prior_only.step_time_s) / 5


@given(prior=steps, sd=sds, iteration=st.integers(0, 50), extra=st.integers(0, 50))
def test_done_means_zero_remaining(prior: float, sd: float, iteration: int, extra: int) -> None:
    est = estimate_running(
        prior_step_time_s=prior,
        prior_log_sd=sd,
        observations=[],
        iteration=iteration + extra + 1,
        train_iters=iteration + 1,
        last_progress_time_s=T0,
        now_s=T0 + 100,
    )
    assert est.method is EtaMethod.DONE
    assert est.remaining_s == Quantiles(p10=0.0, p50=0.0, p90=0.0)
    assert est.completion_time_s == Quantiles(p10=T0, p50=T0, p90=T0)
    assert est.progress_ratio == 1.0


@given(observed=st.floats(min_value=0.5, max_value=2.0))
@settings(max_examples=40, deadline=None)
def test_converges_to_observed_step_time(observed: float) -> None:
    est = _run(_obs(observed, 200, start=20), prior=1.0, iteration=2020, train_iters=5000)
    assert est.method is EtaMethod.BLEND
    assert est.step_time_s.p50 == pytest.approx(observed, rel=0.01)
    assert est.remaining_s.p50 == pytest.approx(observed * 2980, rel=0.01)


def test_prior_conflict_drops_the_prior() -> None:
    # The model assumed H100s (5 ms per step); the job runs on CPUs at 500 ms.
    est = _run(_obs(0.5, 5, start=20), prior=0.005, iteration=70, train_iters=1070)
    assert est.method is EtaMethod.PRIOR_CONFLICT
    assert est.conflict_z is not None
    assert est.conflict_z > 3
    assert est.step_time_s.p50 == pytest.approx(0.5, rel=0.01)
    assert est.prior_step_time_s == 0.005


def test_mild_disagreement_blends() -> None:
    est = _run(_obs(1.3, 3, start=20), prior=1.0)
    assert est.method is EtaMethod.BLEND
    assert 1.0 < est.step_time_s.p50 < 1.3


def test_warmup_is_discarded_and_outliers_resisted() -> None:
    warm = [StepObservation(iteration=10, step_time_s=30.0, num_iterations=10, time_s=T0)]
    steady = _obs(1.0, 30, start=10)
    spike = [StepObservation(iteration=205, step_time_s=50.0, num_iterations=5, time_s=T0 + 1)]
    est = _run(warm + steady + spike, prior=None, iteration=310, train_iters=1310)
    # the spike (245 s beyond the pace, between two intervals at the pace) is a pause: it is
    # left out of the pace (30 steady observations) and projected at its rate per iteration
    assert est.num_observations == 30
    assert est.step_time_s.p50 == pytest.approx(1.0, rel=0.05)
    assert est.pauses_s is not None
    assert est.pauses_s > 0


def test_warmup_only_can_still_flag_a_gross_conflict() -> None:
    warm = [StepObservation(iteration=5, step_time_s=2.0, num_iterations=5, time_s=T0)]
    assert _run(warm, prior=1.0).method is EtaMethod.BLEND
    assert _run(warm, prior=0.005).method is EtaMethod.PRIOR_CONFLICT


def test_follows_a_slowdown() -> None:
    fast = _obs(1.0, 100, start=20)
    slow = [
        StepObservation(
            iteration=1020 + 10 * k,
            step_time_s=2.0,
            num_iterations=10,
            time_s=T0 + 1000 + 7200 + 20 * k,
        )
        for k in range(1, 200)
    ]
    est = _run(fast + slow, prior=None, iteration=3010, train_iters=6000)
    assert est.step_time_s.p50 == pytest.approx(2.0, rel=0.05)


def test_no_prior_no_observations_raises() -> None:
    with pytest.raises(SpecError, match="prior_step_time_s"):
        _run([], prior=None)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"prior": -1.0}, "prior_step_time_s"),
        ({"train_iters": 0}, "train_iters"),
        ({"iteration": -1}, "iteration"),
        ({"half_life_s": 0.0}, "half_life_s"),
    ],
)
def test_invalid_arguments(kwargs: dict[str, float], field: str) -> None:
    args: dict[str, float] = {"prior": 1.0, "iteration": 30, "train_iters": 100, "half_life_s": 1.0}
    args.update(kwargs)
    with pytest.raises(SpecError, match=field):
        _run(
            _obs(1.0, 3),
            prior=args["prior"],
            iteration=int(args["iteration"]),
            train_iters=int(args["train_iters"]),
            half_life_s=args["half_life_s"],
        )


def test_invalid_observation() -> None:
    with pytest.raises(SpecError, match="step_time_s"):
        StepObservation(iteration=1, step_time_s=math.nan, time_s=T0)


def test_stalled_job_completion_is_now() -> None:
    est = estimate_running(
        prior_step_time_s=1.0,
        prior_log_sd=0.1,
        observations=[],
        iteration=90,
        train_iters=100,
        last_progress_time_s=T0,
        now_s=T0 + 1e5,
    )
    assert est.completion_time_s == Quantiles(p10=T0 + 1e5, p50=T0 + 1e5, p90=T0 + 1e5)
    assert est.remaining_s.p90 == 0.0


def test_pending() -> None:
    est = estimate_pending(
        prior_step_time_s=2.0, prior_log_sd=0.2, train_iters=1000, expected_start_time_s=T0
    )
    assert est.method is EtaMethod.PRIOR
    assert est.remaining_s.p50 == pytest.approx(2000.0)
    assert est.remaining_s.p10 < 2000.0 < est.remaining_s.p90
    assert est.completion_time_s is not None
    assert est.completion_time_s.p50 == pytest.approx(T0 + 2000.0)
    unknown = estimate_pending(
        prior_step_time_s=2.0, prior_log_sd=0.2, train_iters=1000, expected_start_time_s=None
    )
    assert unknown.completion_time_s is None
    assert unknown.progress_ratio is None


def test_longer_horizon_wider_relative_band() -> None:
    short = estimate_pending(
        prior_step_time_s=5.0, prior_log_sd=0.1, train_iters=100, expected_start_time_s=None
    )
    long = estimate_pending(
        prior_step_time_s=5.0, prior_log_sd=0.1, train_iters=1_000_000, expected_start_time_s=None
    )
    assert _width(long.remaining_s) > _width(short.remaining_s)


@pytest.mark.parametrize(("dof", "table"), [(3, 1.638), (4, 1.533), (10, 1.372), (30, 1.310)])
def test_t_quantile_against_table(dof: int, table: float) -> None:
    assert t_quantile_90(dof) == pytest.approx(table, abs=2e-3)


def test_observations_are_wall_clock_between_printed_times() -> None:
    records = [
        ProgressRecord(iteration=0, train_iters=100, timestamp_s=T0, framework="torchtitan"),
        ProgressRecord(iteration=10, timestamp_s=T0 + 30.0, framework="torchtitan"),
        ProgressRecord(iteration=20, timestamp_s=T0 + 40.0, framework="torchtitan"),
        ProgressRecord(iteration=30, framework="torchtitan"),  # read time: another clock
        ProgressRecord(iteration=40, step_time_s=0.5, num_iterations=10),
    ]
    obs = observations_from_progress(records, read_time_s=T0 + 99)
    assert [(o.iteration, o.step_time_s, o.num_iterations, o.time_s) for o in obs] == [
        (10, 3.0, 10, T0 + 30.0),
        (20, 1.0, 10, T0 + 40.0),
        (40, 0.5, 10, T0 + 99),  # the read clock measured nothing yet: the printed time stands in
    ]


def test_replay_recorded_tiny_gpt_run() -> None:
    """At 30 % progress the p50 completion time is within 15 % (of the time left) of the end."""
    records, _ = LogTailer(tz=UTC).read(TailCursor(path=str(DATA / "tiny_gpt_megatron_900it.log")))
    end_s = records[-1].timestamp_s
    assert end_s is not None
    assert records[-1].iteration == 900
    upto = [r for r in records if isinstance(r, ProgressRecord) and r.iteration <= 270]
    now_s = upto[-1].timestamp_s
    assert now_s is not None
    obs = observations_from_progress(upto, read_time_s=now_s)
    for prior, method in ((None, EtaMethod.OBSERVED), (0.004, EtaMethod.PRIOR_CONFLICT)):
        est = estimate_running(
            prior_step_time_s=prior,  # 0.004 s: what an H100 would need; the job runs on CPUs
            prior_log_sd=0.3,
            observations=obs,
            iteration=upto[-1].iteration,
            train_iters=900,
            last_progress_time_s=now_s,
            now_s=now_s,
        )
        assert est.method is method
        assert est.completion_time_s is not None
        assert abs(est.completion_time_s.p50 - end_s) <= 0.15 * (end_s - now_s)
        assert est.progress_ratio == pytest.approx(0.3)
