"""Pauses, phases and restarts: the history tells pauses from a slower phase, pauses
are projected from the history or the arguments, change points move the pace quickly but not
on noise, restarts are recorded with their overhead."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.forecast.arguments import TrainingSchedule, schedule_from_arguments
from planner.forecast.eta import EtaEstimate, estimate_running, persistence_log_sd
from planner.forecast.history import Pause, ProgressHistory
from planner.forecast.level import phase_start
from planner.forecast.observations import Restart, step_observations
from planner.forecast.pauses import (
    PauseForecast,
    evaluation_prior_s,
    infer_interval,
    project_pauses,
)
from planner.forecast.values import StepObservation
from planner.specs.job import ProgressRecord

T0 = 1_800_000_000.5  # not a whole second: the log's times are precise


def intervals(
    steps: list[float], *, every: int = 10, pause_after: dict[int, float] | None = None
) -> list[StepObservation]:
    """Observations of ``every`` iterations at the given per-iteration times, with a pause of
    ``pause_after[i]`` seconds in the interval after iteration ``i``."""
    out, t = [], T0
    for k, step in enumerate(steps):
        begin = k * every
        extra = (pause_after or {}).get(begin, 0.0)
        t += every * step + extra
        out.append(
            StepObservation(
                iteration=begin + every,
                step_time_s=step + extra / every,
                num_iterations=every,
                time_s=t,
            )
        )
    return out


def observed_eta(
    observations: list[StepObservation], *, iteration: int, train_iters: int, **kw: Any
) -> EtaEstimate:
    """The ETA from ``observations`` alone (no model prior), read at the newest one."""
    return estimate_running(
        prior_step_time_s=None,
        prior_log_sd=0.3,
        observations=observations,
        iteration=iteration,
        train_iters=train_iters,
        last_progress_time_s=observations[-1].time_s,
        now_s=observations[-1].time_s,
        **kw,
    )


def history_of(observations: list[StepObservation]) -> ProgressHistory:
    history = ProgressHistory()
    history.start(0, T0)
    for obs in observations:
        history.observe(obs)
    return history


def test_an_isolated_slow_interval_is_a_pause_a_sustained_one_a_phase() -> None:
    pauses = history_of(intervals([1.0] * 30, pause_after={100: 30.0, 200: 30.0}))
    assert [(p.after_iteration, round(p.duration_s)) for p in pauses.pauses] == [
        (100, 30),
        (200, 30),
    ]
    slower = history_of(intervals([1.0] * 15 + [1.6] * 15))
    assert slower.pauses == []
    assert slower.level_s() == pytest.approx(1.6, rel=0.05)  # the new pace joined the recent one


def test_with_a_printed_compute_time_the_pause_is_told_at_once() -> None:
    obs = intervals([1.0] * 20, pause_after={100: 30.0})
    logged = [
        StepObservation(
            iteration=o.iteration,
            step_time_s=o.step_time_s,
            num_iterations=o.num_iterations,
            time_s=o.time_s,
            logged_step_time_s=1.0,
        )
        for o in obs
    ]
    history = ProgressHistory()
    history.start(0, T0)
    for o in logged[:11]:  # up to the interval with the pause, nothing after it
        history.observe(o)
    assert [round(p.duration_s) for p in history.pauses] == [30]
    assert history.pending is None


@given(noise=st.floats(min_value=0.0, max_value=0.15), seed=st.integers(0, 10_000))
@settings(max_examples=60, deadline=None)
def test_noise_alone_makes_no_pause_and_no_phase(noise: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps = list(np.exp(rng.normal(0.0, noise / math.sqrt(10), size=60)))
    history = history_of(intervals(steps))
    assert history.pauses == []
    y = np.log(np.array(steps))
    assert phase_start(y, np.full(60, 10.0), sigma=max(noise, 0.02)) == 0


def test_a_step_change_moves_the_pace_within_a_few_intervals() -> None:
    obs = intervals([1.0] * 40 + [1.5] * 4)
    estimate = observed_eta(obs, iteration=440, train_iters=1000)
    assert estimate.phase_start_iteration == 400
    assert estimate.step_time_s.p50 == pytest.approx(1.5, rel=0.03)


@pytest.mark.parametrize("lead", [0, 1, 2])
def test_a_change_the_two_clocks_place_apart_is_measured_against_the_pace_before_it(
    lead: int,
) -> None:
    # The pace steps x1.5 after 40 intervals of 5 iterations; the printed compute times see it
    # there, the wall clock ``lead`` intervals earlier (a stall the printed times leave out
    # began first). The two change points are one change: its ratio is against the 40
    # intervals before it, not against the sliver between the two clocks' change points
    # (which read x1.02, under 2 sd: no phase event).
    obs, t = [], T0
    for k in range(1, 61):
        jitter = 1.0 + 0.02 * math.sin(1.7 * k)
        wall = (1.0 if k <= 40 - lead else 1.5) * jitter
        t += 5 * wall
        logged = (1.0 if k <= 40 else 1.5) * jitter
        obs.append(
            StepObservation(
                iteration=5 * k,
                step_time_s=0.1 * wall,
                num_iterations=5,
                time_s=t,
                logged_step_time_s=0.1 * logged,
            )
        )
    estimate = observed_eta(obs, iteration=300, train_iters=1000)
    assert estimate.phase_start_iteration == 200
    assert estimate.phase_ratio == pytest.approx(1.5, rel=0.03 * (1 + lead))
    assert estimate.phase_z is not None
    assert estimate.phase_z > 10.0


@pytest.mark.parametrize("after", [1.5, 0.6])
def test_a_new_pace_is_projected_and_the_band_reaches_toward_the_pace_before_it(
    after: float,
) -> None:
    # 400 iterations at 1 s, then 40 at ``after``: the p50 projects the new pace over the 560
    # iterations left; the phase may end, so the band's side toward the pace before it reaches
    # the remaining time at that pace, and the other side stays as narrow as the noise says.
    obs = intervals([1.0] * 40 + [after] * 4)
    estimate = observed_eta(obs, iteration=440, train_iters=1000)
    remaining = estimate.remaining_s
    assert estimate.phase_start_iteration == 400
    assert remaining.p50 == pytest.approx(560 * after, rel=0.03)
    if after > 1.0:  # slower now: the run may end sooner
        assert remaining.p10 <= 560 * 1.0
        assert math.log(remaining.p90 / remaining.p50) < 0.5 * math.log(
            remaining.p50 / remaining.p10
        )
    else:  # faster now: it may end later
        assert remaining.p90 >= 560 * 1.0
        assert math.log(remaining.p50 / remaining.p10) < 0.5 * math.log(
            remaining.p90 / remaining.p50
        )


def test_the_persistence_of_a_phase_follows_the_delta_t_argument() -> None:
    # A phase that has lasted L lasts a further T with probability L / (L + T) (Gott 1993): the
    # closed form against the share of the remaining iterations still in the phase, integrated
    # numerically; no phase, no term; an older phase is trusted more.
    ratio, age, left = 1.5, 40, 560
    t = np.linspace(0.0, left, 200_001)
    survival = age / (age + t)
    dt = t[1] - t[0]
    share = float(np.sum(survival) * dt) / left
    share2 = 2.0 * float(np.sum(t * survival) * dt) / left**2
    want = abs(math.log(ratio)) * math.sqrt(1.0 - 2.0 * share + share2)
    got = persistence_log_sd(ratio=ratio, phase_iterations=age, remaining_iters=left)
    assert got == pytest.approx(want, rel=1e-3)
    assert persistence_log_sd(ratio=None, phase_iterations=age, remaining_iters=left) == 0.0
    older = persistence_log_sd(ratio=ratio, phase_iterations=10 * age, remaining_iters=left)
    assert 0.0 < older < got


def test_pauses_are_projected_at_their_interval_and_mean() -> None:
    obs = intervals([1.0] * 40, pause_after={100: 20.0, 200: 22.0, 300: 18.0})
    history = history_of(obs)
    assert infer_interval(history.pauses) == 100
    forecast = project_pauses(
        history.pauses,
        schedule=None,
        first_iteration=0,
        iteration=400,
        train_iters=1000,
        steady_iterations=history.steady_iterations,
        step_time_s=1.0,
    )
    # slots 100, 200, 300 seen; 400 (right after the current line) to 1000 ahead: 7 of 20 s
    (period,) = forecast.periods
    assert (period.interval, period.slots_seen, period.slots_ahead) == (100, 3, 7)
    assert forecast.mean_s == pytest.approx(7 * 20.0)
    estimate = observed_eta(obs, iteration=400, train_iters=1000, history=history)
    assert estimate.remaining_s.p50 == pytest.approx(600 + 140, rel=0.03)
    assert estimate.step_time_s.p50 == pytest.approx(1.0, rel=0.01)


def _before_any_pause(schedule: TrainingSchedule) -> PauseForecast:
    """The pauses ahead at iteration 50 of 1,000 at 1 s per step, none seen yet."""
    return project_pauses(
        [],
        schedule=schedule,
        first_iteration=0,
        iteration=50,
        train_iters=1000,
        steady_iterations=50,
        step_time_s=1.0,
    )


def test_arguments_give_the_pauses_before_any_is_seen() -> None:
    schedule = TrainingSchedule(eval_interval=100, eval_iters=30)
    forecast = _before_any_pause(schedule)
    # 10 evaluations ahead, each 30 forward passes at a third of the step time
    assert forecast.mean_s == pytest.approx(10 * 30 / 3)
    assert forecast.var_s2 > 0
    seen = project_pauses(
        [Pause(after_iteration=100, iteration=110, duration_s=25.0, time_s=T0)],
        schedule=schedule,
        first_iteration=0,
        iteration=150,
        train_iters=1000,
        steady_iterations=150,
        step_time_s=1.0,
    )
    assert seen.periods[0].per_slot_s == pytest.approx(25.0)  # what was seen replaces the guess


def test_an_evaluation_batch_larger_than_the_training_batch_lengthens_the_prior() -> None:
    # Megatron-LM's evaluate(): eval_iters forward-only iterations of --eval-global-batch-size
    # samples (default the training's global batch); the step time is per training batch
    launch = (
        "pretrain_gpt.py --global-batch-size 256 --eval-global-batch-size 1024 "
        "--eval-interval 100 --eval-iters 30 --train-iters 1000"
    )
    schedule = schedule_from_arguments(launch)
    assert (schedule.global_batch_size, schedule.eval_global_batch_size) == (256, 1024)
    assert schedule_from_arguments(
        "  eval_global_batch_size .......................... 512\n"
        "  global_batch_size ............................... 256\n"
    ) == TrainingSchedule(global_batch_size=256, eval_global_batch_size=512)
    forecast = _before_any_pause(schedule)
    # 10 evaluations ahead, each 30 forward passes of 4 training batches at a third of a step
    assert forecast.mean_s == pytest.approx(10 * 30 * 4 / 3)
    same = schedule_from_arguments(launch.replace("1024", "256"))
    assert evaluation_prior_s(same, 1.0) == pytest.approx(30 / 3)


def test_irregular_pauses_are_projected_at_their_rate() -> None:
    pauses = [
        Pause(after_iteration=130, iteration=140, duration_s=10.0, time_s=T0),
        Pause(after_iteration=170, iteration=180, duration_s=10.0, time_s=T0),
        Pause(after_iteration=390, iteration=400, duration_s=10.0, time_s=T0),
    ]
    assert infer_interval(pauses) is None
    forecast = project_pauses(
        pauses,
        schedule=None,
        first_iteration=0,
        iteration=400,
        train_iters=800,
        steady_iterations=400,
        step_time_s=1.0,
    )
    assert forecast.irregular_s == pytest.approx(30.0 / 400 * 400)


def test_a_restart_is_recorded_with_its_overhead() -> None:
    history = history_of(intervals([1.0] * 30))
    history.restart(
        Restart(from_iteration=300, to_iteration=250, from_time_s=T0 + 300, time_s=T0 + 400),
        start_time_s=T0 + 340,  # requeued: it waited 40 s in the queue
    )
    (record,) = history.restarts
    assert record.gap_s == pytest.approx(60.0)
    assert record.overhead_s == pytest.approx(60.0 + 50 * 1.0, rel=0.01)
    assert history.segment_start == 250
    again = ProgressHistory.from_json(history.to_json())
    assert again == history


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "torchrun pretrain_gpt.py --eval-interval 1000 --eval-iters=10 --save-interval 500",
            TrainingSchedule(eval_interval=1000, eval_iters=10, save_interval=500),
        ),
        (
            "  eval_interval ................................... 100\n"
            "  eval_iters ...................................... 10\n"
            "  save_interval ................................... 10000\n"
            "  train_iters ..................................... 1716613\n",
            TrainingSchedule(
                eval_interval=100, eval_iters=10, save_interval=10000, train_iters=1716613
            ),
        ),
        (
            "python megatron_gpt_pretraining.py trainer.val_check_interval=2000 "
            "trainer.limit_val_batches=32 trainer.max_steps=100000 "
            "exp_manager.checkpoint_callback_params.every_n_train_steps=1000",
            TrainingSchedule(
                eval_interval=2000, eval_iters=32, save_interval=1000, train_iters=100000
            ),
        ),
        (
            "torchrun -m torchtitan.train --validation.freq 500 --validation.steps 20 "
            "--checkpoint.interval 250 --training.steps 3000",
            TrainingSchedule(eval_interval=500, eval_iters=20, save_interval=250, train_iters=3000),
        ),
        # a fraction of an epoch is no iteration interval; --eval-iters 0 turns evaluation off
        ("trainer.val_check_interval=0.25", TrainingSchedule()),
        ("--eval-interval 100 --eval-iters 0", TrainingSchedule(eval_iters=0)),
    ],
)
def test_schedules_from_arguments(text: str, expected: TrainingSchedule) -> None:
    assert schedule_from_arguments(text) == expected


def test_a_batch_size_ramp_up_is_work_not_a_change_of_pace() -> None:
    schedule = schedule_from_arguments(
        "pretrain_gpt.py --global-batch-size 64 --rampup-batch-size 16 16 4800 --train-iters 400"
    )
    assert schedule.rampup_batch_size == (16, 16, 4800)
    assert schedule.ramp() == (16, 16, 4800, 64)
    # simulate: 1 s per full batch of 64, the batch read off Megatron-LM's ramp
    batch: list[int] = []
    consumed, obs = 0, []
    for _ in range(400):
        b = min(64, 16 + int(consumed / 1600) * 16)
        consumed += b
        batch.append(b)
    times = np.cumsum([b / 64 for b in batch])
    for i in range(10, 401, 10):
        obs.append(
            StepObservation(
                iteration=i,
                step_time_s=float(times[i - 1] - (times[i - 11] if i > 10 else 0.0)) / 10,
                num_iterations=10,
                time_s=T0 + float(times[i - 1]),
            )
        )
    at = 60  # during the ramp
    upto = [o for o in obs if o.iteration <= at]
    estimate = observed_eta(upto, iteration=at, train_iters=400, schedule=schedule)
    real_remaining = float(times[-1] - times[at - 1])
    assert estimate.step_time_s.p50 == pytest.approx(1.0, rel=0.02)  # per full batch
    assert estimate.remaining_s.p50 == pytest.approx(real_remaining, rel=0.02)


def whole_second_log(steps: list[float], *, every: int = 5, seed: int = 0) -> list[StepObservation]:
    """Observations of a log that prints whole seconds and the compute time of each interval of
    ``every`` iterations (``steps[k]`` s per iteration in interval ``k``, 3 % jitter), read by
    the service's rule: each new printed second is a point."""
    rng = np.random.default_rng(seed)
    records, t = [], 1_800_000_000.0
    for k, step in enumerate(steps):
        took = step * math.exp(rng.normal(0.0, 0.03))
        t += every * took
        records.append(
            ProgressRecord(
                iteration=(k + 1) * every,
                step_time_s=took,
                num_iterations=every,
                timestamp_s=float(math.floor(t)),
            )
        )
    observations, _ = step_observations(records, read_time_s=t)
    return [o for o in observations if o is not None]


@pytest.mark.parametrize("seed", range(5))
def test_a_phase_blurred_by_whole_second_times_is_found_on_the_printed_compute_times(
    seed: int,
) -> None:
    # CI of 2026-11-26: a job of 50 ms iterations logging every 5 (0.25 s) under a log
    # that prints whole seconds, x1.5 slower from iteration 75 to 225, read at 450. The wall
    # clock alone blurs the phase away (the mean pace mixed it in: the ETA 16 % late).
    steps = [0.05] * 15 + [0.075] * 30 + [0.05] * 45
    obs = whole_second_log(steps, seed=seed)
    history = history_of(obs)
    assert history.integer_times
    estimate = observed_eta(obs, iteration=450, train_iters=1500, history=history)
    assert estimate.phase_start_iteration is not None
    assert 225 <= estimate.phase_start_iteration <= 260
    # paced on the printed compute times scaled by the wall clock's ratio to them over the run:
    # the phase's own 11 blurred seconds would be up to 10 % off
    assert estimate.step_time_s.p50 == pytest.approx(0.05, rel=0.025)


@pytest.mark.parametrize("seed", range(5))
def test_whole_second_times_and_steady_compute_make_no_phase(seed: int) -> None:
    obs = whole_second_log([0.05] * 90, seed=seed)
    estimate = observed_eta(obs, iteration=450, train_iters=1500, history=history_of(obs))
    assert estimate.phase_start_iteration is None
    assert estimate.step_time_s.p50 == pytest.approx(0.05, rel=0.06)
