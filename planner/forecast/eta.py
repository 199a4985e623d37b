"""When will a training job finish? ETA with an uncertainty band; pure, no I/O.

The model: the job's remaining time is its remaining iterations at its steady wall-clock pace,
plus the pauses still ahead (evaluations, checkpoints), plus its shutdown (the last checkpoint and
teardown after the last iteration):

    R = N * exp(mu)  +  pauses ahead  +  shutdown

**Wall clock.** The step times are wall-clock progress (``planner.forecast.observations``: the
one rule), not the compute time a log prints, which leaves out evaluation, checkpointing and
data stalls. Intervals that held a pause are told apart by ``planner.forecast.history`` and left
out of the pace; the pauses are projected by ``planner.forecast.pauses`` from the job's history
and arguments; the shutdown is learnt from the cluster's finished jobs (the service's
``planner.service.loops.outcomes``), 0 without them.

**The pace** (``planner.forecast.level``): ``mu``, the log of the mean steady step time, starts
from the performance model's prediction (the prior: log-normal, ``mu ~ N(log prior_step_time_s,
prior_log_sd^2)``) and is updated with the observed step times by the normal-normal conjugate
update in log space (Gelman et al., *Bayesian Data Analysis*, 3rd ed., 2013, §2.5), in detail:

1. **Warm-up.** The first iterations of a run (or of a restart) are slow: graph capture,
   allocator and NCCL warm-up, data loader start. Observations whose averaging window starts
   within ``warmup_iterations`` (default 10) of the start of the run or of a restart are dropped,
   as long as later observations exist. When only warm-up observations exist they are used, with
   an extra ``WARMUP_LOG_SD`` (1.0) of log-sd added to their mean's variance, so they can reveal a
   gross prior-data conflict but hardly move a sound prior.
2. **Phases.** Only the observations since the last change point of the pace are used (a
   batch-size ramp-up, a sequence-length warm-up, a slower phase: ``planner.forecast.level``).
   A batch-size ramp-up the arguments state is no change of pace: step times are taken per
   full-batch iteration and projected over the work left (``planner.forecast.rampup``).
3. **Noise.** Each observation ``k`` is the mean over ``n_k`` iterations, so its log ``y_k`` has
   variance ``sigma^2 / n_k`` where ``sigma`` is the per-iteration log-sd. ``sigma`` is estimated
   robustly from the most recent ``NOISE_WINDOW`` (64) observations by the median absolute
   deviation of ``(y_k - median(y)) * sqrt(n_k)`` times 1.4826, which makes the MAD a consistent
   estimator of the normal sd (Rousseeuw & Croux 1993, JASA 88:1273). With few observations this is
   shrunk toward ``DEFAULT_LOG_SD`` (0.10) as with a scaled-inverse-chi^2 prior of
   ``NOISE_PRIOR_DOF`` (4) degrees of freedom (BDA3 §3.3):
   ``sigma^2 = (nu0 * 0.10^2 + (m - 1) * MAD^2) / (nu0 + m - 1)`` for ``m`` observations. A log
   that prints whole seconds blurs each interval by up to a second, but a stretch of intervals
   only at its two ends: that blur's variance ``1 / (6 D^2)`` for a stretch of ``D`` seconds is
   added where stretches are compared and to the pace's variance.
4. **The mean pace.** The pace projected is the mean wall time per iteration, total time over
   total iterations of the phase (weighted as below), not a robust centre: the remaining time
   is a sum of step times, and a slow interval is time the job will spend again. Gross outliers
   are pauses, told apart by the history and projected apart (step 1 of the module docstring).
5. **Forgetting.** Weights halve every ``half_life_s`` of age (default 1800 s, measured back from
   the newest observation). Weight of observation ``k``: ``w_k = n_k * 0.5^(age_k /
   half_life_s)``; the pace is ``exp(ybar)`` with ``ybar = log(sum w_k s_k / sum w_k)`` for step
   times ``s_k``, of variance ``pace_sd^2 sum(w_k^2 / n_k) / (sum w)^2`` (``pace_sd``: the
   long-run noise of the pace, ``planner.forecast.level``, "Pace noise"; ``sigma`` on a quiet
   host).
6. **Prior-data conflict.** Box's prior predictive check (Box 1980, JRSS A 143:383; Evans &
   Moshonov 2006, Bayesian Analysis 1:893): ``z = (ybar - mu0) / sqrt(v_prior + var)``.
   When ``|z| > conflict_z`` (default 3) the prior is dropped (``method="prior_conflict"``): the
   model predicted something the job plainly does not do (e.g. it assumed H100s and the job runs
   on CPUs). Otherwise the prior's weight is ``n0 / (n0 + W)`` after ``W`` iterations of the
   job's own pace (the stated rule of ``planner.forecast.level``, "The prior"); the noise
   behind ``var`` and ``n0`` is the pace's long-run noise (``planner.forecast.level``, "Pace
   noise"), so a shared host's swings widen the pace's uncertainty rather than being taken
   for evidence.

**The band.** The pace term is a sum of ``N`` steps: log of the sum ~ ``log N + mu + e`` with ``e``
normal (Fenton-Wilkinson approximation of a sum of log-normals, Fenton 1960) of variance ``var(mu) +
pace_sd^2 / N + drift + level_log_sd^2`` (``pace_sd``: the long-run noise of the pace, so the
band widens with the observed dispersion of a swinging pace, in ``var(mu)`` and in the pace
still ahead). ``drift`` is the variance of the average future level if ``mu`` follows a random
walk whose optimal filter is the exponential forgetting above (Muth 1960, JASA 55:299: smoothing
``a`` per iteration matches a signal-to-noise ratio ``a^2 / (1 - a)``); the average of a random
walk over ``N`` steps has variance ``q N / 3``. ``level_log_sd`` is how far the pace of the rest
of the run may differ from the pace seen so far: by default the spread of the job's own pace
over stretches of its run (``planner.forecast.level.level_spread``). The
pauses ahead and the shutdown add their means and variances; the sum is matched to a log-normal by
its first two moments (Fenton-Wilkinson again). Quantiles use Student's t with ``NOISE_PRIOR_DOF +
m - 1`` degrees of freedom when ``sigma`` was estimated from ``m`` observations (``m`` the
batches when ``pace_sd`` came from fewer: BDA3 §3.3; ``NOISE_PRIOR_DOF`` alone before there are
batches, when ``pace_sd`` is assumed rather than measured), the normal quantile 1.2816 for the
prior alone. That band is the model's (``model_remaining_s``); the
one published is calibrated on the cluster's finished jobs (``planner.forecast.bands``), the
model's own when there are none. ``step_time_s`` quantiles describe the mean step time only.

**A pace that just changed.** After a change point the remaining run is projected at the new
phase's pace (the p50), but the phase may end before the job does and the pace return to where
it was: the band's side toward the pace before the phase (its lower side after a slowdown, its
upper side after a speed-up) is widened by that uncertainty, the other side is not (a two-piece
normal in log space, John 1982, Communications in Statistics A 11:879). How long a phase lasts
is unknown; by the delta-t argument (Gott 1993, Nature 363:315) a phase seen at a random moment
of its life, having lasted ``L`` iterations, lasts ``T`` more with probability ``L / (L + T)``,
so the younger the phase and the longer the run ahead, the wider that side
(:func:`persistence_log_sd`). The p50 is not moved toward the earlier pace: after a stall that
ended, the pace before the current phase is the stall's, and a drift goes on; projecting that
expectation made the replays of recorded logs worse, and on the recorded sessions of a noisy
host it helped only while the phase was compared with the sliver between the two clocks' change
points (``planner.forecast.level``, "Two clocks"; ``benchmarks/RESULTS.md``, "Live ETA on a
noisy host").

If there is neither a prior nor any observation there is nothing to estimate from:
``estimate_running`` raises ``SpecError`` rather than invent a number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from planner.errors import SpecError
from planner.forecast.arguments import TrainingSchedule
from planner.forecast.bands import BandOffsets
from planner.forecast.history import ProgressHistory
from planner.forecast.level import (
    DEFAULT_LOG_SD,
    HUBER_K,
    MAD_TO_SD,
    NOISE_PRIOR_DOF,
    NOISE_WINDOW,
    WARMUP_LOG_SD,
    LevelFit,
    fit_level,
    prior_fit,
)
from planner.forecast.pauses import PauseForecast, project_pauses
from planner.forecast.rampup import work
from planner.forecast.values import EtaMethod, Quantiles, StepObservation

__all__ = [
    "DEFAULT_LOG_SD",
    "HUBER_K",
    "MAD_TO_SD",
    "NOISE_PRIOR_DOF",
    "NOISE_WINDOW",
    "OBSERVATION_WINDOW",
    "WARMUP_LOG_SD",
    "Z90",
    "EtaEstimate",
    "EtaMethod",
    "Quantiles",
    "StepObservation",
    "estimate_pending",
    "estimate_running",
    "history_of",
    "persistence_log_sd",
    "t_quantile_90",
]

Z90: Final = 1.2815515655446004
"""Standard normal 0.9 quantile."""
OBSERVATION_WINDOW: Final = 500
"""Newest step observations one ETA uses (the service's and the replay's window)."""
_MAX_SMOOTHING: Final = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class EtaEstimate:
    """A job's expected step time, remaining time and completion time, with 10-90 % bands.

    ``step_time_s``: mean steady wall time per iteration (s). ``remaining_s``: seconds from
    ``now_s`` to the end. ``completion_time_s``: epoch seconds of the end, None when the start
    time is unknown (pending jobs). ``progress_ratio``: ``iteration / train_iters`` (None when
    not started). ``num_observations``: observations used (after warm-up, pauses and phases).
    ``prior_step_time_s``: the model prediction given and ``prior_log_sd`` its log-sd;
    ``observed_step_time_s``: the robust
    weighted estimate from the observations alone; ``step_time_log_sd``: per-iteration log-sd
    used; ``conflict_z``: the prior-data conflict score (None without both).
    ``pauses_s``: mean pause time still ahead (s) and ``pauses``: how it was projected;
    ``shutdown_s``: the shutdown added (s) and ``shutdown_sd_s`` its sd (what the cluster's
    finished jobs taught: given both, a replay of the job's log makes the same band);
    ``phase_start_iteration``: where the current pace
    began (None: no change point), ``phase_ratio`` its pace over the pace before it and
    ``phase_z`` that shift in long-run sd (``planner.forecast.level``); ``pace_log_sd``: the
    long-run log-sd of the pace per iteration; ``prior_weight``: the prior's share of the
    pace (0..1, None without a prior); ``model_remaining_s``: the model's band of the
    remaining time before calibration (s); ``band_calibrated``: whether finished jobs
    calibrated the band.
    """

    method: EtaMethod
    step_time_s: Quantiles
    remaining_s: Quantiles
    completion_time_s: Quantiles | None
    progress_ratio: float | None
    iteration: int | None
    train_iters: int | None
    num_observations: int
    prior_step_time_s: float | None = None
    prior_log_sd: float | None = None
    observed_step_time_s: float | None = None
    step_time_log_sd: float | None = None
    pace_log_sd: float | None = None
    prior_weight: float | None = None
    conflict_z: float | None = None
    pauses_s: float | None = None
    pauses: PauseForecast | None = None
    shutdown_s: float | None = None
    shutdown_sd_s: float | None = None
    phase_start_iteration: int | None = None
    phase_ratio: float | None = None
    phase_z: float | None = None
    model_remaining_s: Quantiles | None = None
    band_calibrated: bool = False


def estimate_running(
    *,
    prior_step_time_s: float | None,
    prior_log_sd: float,
    observations: Sequence[StepObservation],
    iteration: int,
    train_iters: int,
    last_progress_time_s: float,
    now_s: float,
    half_life_s: float = 1800.0,
    warmup_iterations: int = 10,
    conflict_z: float = 3.0,
    level_log_sd: float | None = None,
    history: ProgressHistory | None = None,
    schedule: TrainingSchedule | None = None,
    shutdown_s: float = 0.0,
    shutdown_sd_s: float = 0.0,
    band: BandOffsets | None = None,
) -> EtaEstimate:
    """ETA of a running job that has completed ``iteration`` of ``train_iters`` iterations.

    ``prior_step_time_s`` (s, or None) is the performance model's step time for the job's
    allocation, with log-sd ``prior_log_sd``; ``observations`` the wall-clock step times seen so
    far (any order); ``last_progress_time_s`` (epoch s) when ``iteration`` was reached; ``now_s``
    the current time. ``history``: the job's pauses and restarts (None: :func:`history_of` the
    observations; when the job
    has fewer than 3 observations of its own, the history's recent pace stands in: a job that
    continues another's run); ``schedule``: evaluation and checkpoint intervals from its
    arguments; ``shutdown_s`` / ``shutdown_sd_s``: expected time (and sd) from the last iteration
    to the job's end; ``band``: the cluster's band offsets (None: the model's band). See the
    module docstring for the statistics.

    Completion quantiles are ``max(now_s, last_progress_time_s + R)`` for remaining-time quantiles
    ``R``; ``remaining_s`` is that minus ``now_s`` (a stalled job thus drifts to 0). When
    ``iteration >= train_iters`` the job is done: remaining 0 and completion
    ``last_progress_time_s``.

    Raises ``SpecError`` for invalid arguments, and when there is neither a prior nor an
    observation (nothing to estimate from).
    """
    _check_common(prior_step_time_s, prior_log_sd, train_iters)
    if iteration < 0:
        raise SpecError("iteration", f"must be >= 0, got {iteration}")
    for name, value in (("last_progress_time_s", last_progress_time_s), ("now_s", now_s)):
        if not math.isfinite(value):
            raise SpecError(name, f"must be finite, got {value}")
    if not (math.isfinite(half_life_s) and half_life_s > 0):
        raise SpecError("half_life_s", f"must be finite and > 0, got {half_life_s}")
    if warmup_iterations < 0:
        raise SpecError("warmup_iterations", f"must be >= 0, got {warmup_iterations}")
    if not conflict_z > 0:
        raise SpecError("conflict_z", f"must be > 0, got {conflict_z}")
    if level_log_sd is not None and not (math.isfinite(level_log_sd) and level_log_sd >= 0):
        raise SpecError("level_log_sd", f"must be finite and >= 0 (or None), got {level_log_sd}")
    for name, value in (("shutdown_s", shutdown_s), ("shutdown_sd_s", shutdown_sd_s)):
        if not (math.isfinite(value) and value >= 0):
            raise SpecError(name, f"must be finite and >= 0, got {value}")
    if history is None:
        history = history_of(observations)
    elif len(observations) < 3 and history.recent:
        observations = [*history.recent_observations(), *observations]
    if prior_step_time_s is None and not observations:
        raise SpecError(
            "prior_step_time_s",
            "no model prediction and no observed step time: nothing to estimate the ETA from; "
            "give a prediction or wait for the job to log progress",
        )

    observations = per_full_batch(observations, schedule)
    fit = fit_level(
        prior_step_time_s=prior_step_time_s,
        prior_log_sd=prior_log_sd,
        observations=observations,
        half_life_s=half_life_s,
        warmup_iterations=warmup_iterations,
        conflict_z=conflict_z,
        exclude=history.excluded_iterations(),
        run_start_iteration=history.first_iteration,
        restarts=[(r.time_s, r.to_iteration) for r in history.restarts],
        resolution_s=1.0 if history.integer_times and history.first_time_s is not None else 0.0,
    )
    remaining_iters = max(0, train_iters - iteration)
    spread = fit.level_log_sd if level_log_sd is None else level_log_sd
    remaining_work = work(schedule, iteration, train_iters) if remaining_iters else 0.0
    step_q, pace = _pace(fit, remaining_work, half_life_s, spread)
    pauses = project_pauses(
        history.pauses,
        schedule=schedule,
        first_iteration=history.first_iteration if history.first_iteration is not None else 0,
        iteration=iteration,
        train_iters=train_iters,
        steady_iterations=history.steady_iterations,
        step_time_s=step_q.p50,
    )
    if remaining_iters == 0:
        end = last_progress_time_s
        zero = Quantiles(p10=0.0, p50=0.0, p90=0.0)
        done = Quantiles(p10=end, p50=end, p90=end)
        return _estimate(
            fit,
            EtaMethod.DONE,
            step_q,
            zero,
            zero,
            done,
            iteration,
            train_iters,
            prior_log_sd=prior_log_sd,
        )
    q = Z90 if fit.dof is None else t_quantile_90(fit.dof)
    raw = _total(pace, pauses, shutdown_s, shutdown_sd_s, q)
    persist = persistence_log_sd(
        ratio=fit.phase_ratio,
        phase_iterations=(
            0 if fit.phase_start_iteration is None else iteration - fit.phase_start_iteration
        ),
        remaining_iters=remaining_iters,
    )
    if persist > 0 and fit.phase_ratio is not None:  # the side toward the pace before the phase
        wide = _total(
            _Pace(pace.median_s, math.hypot(pace.log_sd, persist)),
            pauses,
            shutdown_s,
            shutdown_sd_s,
            q,
        )
        if fit.phase_ratio > 1.0:
            raw = Quantiles(p10=min(raw.p10, wide.p10), p50=raw.p50, p90=raw.p90)
        else:
            raw = Quantiles(p10=raw.p10, p50=raw.p50, p90=max(raw.p90, wide.p90))
    rem_q = raw if band is None else band.adjust(iteration / train_iters, raw)
    ends = [max(now_s, last_progress_time_s + r) for r in (rem_q.p10, rem_q.p50, rem_q.p90)]
    return _estimate(
        fit,
        fit.method,
        step_q,
        Quantiles(p10=ends[0] - now_s, p50=ends[1] - now_s, p90=ends[2] - now_s),
        raw,
        Quantiles(p10=ends[0], p50=ends[1], p90=ends[2]),
        iteration,
        train_iters,
        pauses=pauses,
        shutdown_s=shutdown_s,
        shutdown_sd_s=shutdown_sd_s,
        calibrated=band is not None and band.num_jobs > 0,
        prior_log_sd=prior_log_sd,
    )


def history_of(observations: Sequence[StepObservation]) -> ProgressHistory:
    """The history ``observations`` show when read in iteration order (what
    ``estimate_running`` uses when it is given none)."""
    history = ProgressHistory()
    for obs in sorted(observations, key=lambda o: o.iteration):
        history.observe(obs)
    return history


def estimate_pending(
    *,
    prior_step_time_s: float,
    prior_log_sd: float,
    train_iters: int,
    expected_start_time_s: float | None,
    half_life_s: float = 1800.0,
    level_log_sd: float = 0.05,
) -> EtaEstimate:
    """Predicted runtime of a job that has not started, under the allocation it requested.

    ``remaining_s`` is the runtime of all ``train_iters`` iterations at the model's step time
    ``prior_step_time_s`` (log-sd ``prior_log_sd``, plus per-step jitter and drift as in
    ``estimate_running``); ``completion_time_s`` is ``expected_start_time_s`` plus it, or None
    when the scheduler gave no start estimate. ``iteration`` and ``progress_ratio`` are None
    (a requeued job resumes from its history: the service then uses ``estimate_running``).
    Raises ``SpecError``.
    """
    _check_common(prior_step_time_s, prior_log_sd, train_iters)
    if expected_start_time_s is not None and not math.isfinite(expected_start_time_s):
        raise SpecError("expected_start_time_s", f"must be finite, got {expected_start_time_s}")
    fit = prior_fit(prior_step_time_s, prior_log_sd)
    step_q, pace = _pace(fit, float(train_iters), half_life_s, level_log_sd)
    rem_q = _total(pace, PauseForecast(), 0.0, 0.0, Z90)
    completion = None
    if expected_start_time_s is not None:
        start = expected_start_time_s
        completion = Quantiles(p10=start + rem_q.p10, p50=start + rem_q.p50, p90=start + rem_q.p90)
    return EtaEstimate(
        method=EtaMethod.PRIOR,
        step_time_s=step_q,
        remaining_s=rem_q,
        completion_time_s=completion,
        progress_ratio=None,
        iteration=None,
        train_iters=train_iters,
        num_observations=0,
        prior_step_time_s=prior_step_time_s,
        step_time_log_sd=fit.sigma,
        model_remaining_s=rem_q,
    )


def t_quantile_90(dof: float) -> float:
    """0.9 quantile of Student's t with ``dof`` >= 3 degrees of freedom (inf: normal).

    Cornish-Fisher expansion to 1/dof^4, Abramowitz & Stegun (1964) 26.7.5; error < 2e-3 for
    dof >= 3 (t_0.9 = 1.638 at 3, 1.533 at 4, 1.372 at 10).
    """
    if math.isinf(dof):
        return Z90
    if dof < 3:
        raise SpecError("dof", f"must be >= 3, got {dof}")
    z = Z90
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3 + g4 / dof**4


def persistence_log_sd(
    *, ratio: float | None, phase_iterations: int, remaining_iters: int
) -> float:
    """Log-sd the pace of the remaining run may stray from the current phase's toward the pace
    before it, because the phase may end (module docstring, "A pace that just changed").

    ``ratio``: the phase's pace over the pace before it (None: no phase); ``phase_iterations``:
    ``L``, iterations since the phase began; ``remaining_iters``: ``N``. Under the delta-t
    argument (Gott 1993, Nature 363:315) a phase seen at a random moment of its life, having
    lasted ``L``, lasts a further ``T`` or more with probability ``L / (L + T)``; the share ``G``
    of the remaining iterations still in the phase then has ``E[G] = ln(1 + x) / x`` and
    ``E[G^2] = 2 (x - ln(1 + x)) / x^2`` for ``x = N / L``, and the remaining run's mean log pace
    differs from the phase's by ``(1 - G) log(ratio)``, of root mean square
    ``|log ratio| sqrt(1 - 2 E[G] + E[G^2])``. 0 without a phase."""
    if ratio is None or ratio <= 0 or phase_iterations <= 0 or remaining_iters <= 0:
        return 0.0
    x = remaining_iters / phase_iterations
    share = math.log1p(x) / x
    share2 = 2.0 * (x - math.log1p(x)) / x**2
    return abs(math.log(ratio)) * math.sqrt(max(0.0, 1.0 - 2.0 * share + share2))


def _check_common(prior_step_time_s: float | None, prior_log_sd: float, train_iters: int) -> None:
    if prior_step_time_s is not None and not (
        math.isfinite(prior_step_time_s) and prior_step_time_s > 0
    ):
        raise SpecError(
            "prior_step_time_s", f"must be finite and > 0 (or None), got {prior_step_time_s}"
        )
    if not (math.isfinite(prior_log_sd) and prior_log_sd > 0):
        raise SpecError("prior_log_sd", f"must be finite and > 0, got {prior_log_sd}")
    if train_iters < 1:
        raise SpecError("train_iters", f"must be >= 1, got {train_iters}")


@dataclass(frozen=True, slots=True)
class _Pace:
    """The pace term of the remaining time: median (s) and log-sd."""

    median_s: float
    log_sd: float


def per_full_batch(
    observations: Sequence[StepObservation], schedule: TrainingSchedule | None
) -> Sequence[StepObservation]:
    """The observations' step times per full-batch iteration under a batch-size ramp-up
    (``planner.forecast.rampup``); unchanged without one."""
    if schedule is None or schedule.ramp() is None:
        return observations
    out = []
    for o in observations:
        done = work(schedule, o.iteration - o.num_iterations, o.iteration)
        scale = o.num_iterations / done if done > 0 else 1.0
        out.append(dataclasses.replace(o, step_time_s=o.step_time_s * scale))
    return out


def _pace(
    fit: LevelFit, remaining_iters: float, half_life_s: float, level_log_sd: float
) -> tuple[Quantiles, _Pace]:
    """(mean step time quantiles, the pace term for ``remaining_iters`` (full-batch)
    iterations)."""
    q = Z90 if fit.dof is None else t_quantile_90(fit.dof)
    sd_mu = math.sqrt(fit.var)
    step = Quantiles(
        p10=math.exp(fit.mu - q * sd_mu), p50=math.exp(fit.mu), p90=math.exp(fit.mu + q * sd_mu)
    )
    if remaining_iters == 0:
        return step, _Pace(0.0, 0.0)
    n = float(remaining_iters)
    smoothing = min(_MAX_SMOOTHING, 1.0 - 0.5 ** (math.exp(fit.mu) / half_life_s))
    walk_var = fit.sigma**2 * smoothing**2 / (1.0 - smoothing)
    pace_sd = fit.sigma if fit.pace_sd is None else fit.pace_sd
    sd_sum = math.sqrt(fit.var + level_log_sd**2 + pace_sd**2 / n + walk_var * n / 3.0)
    return step, _Pace(math.exp(math.log(n) + fit.mu), sd_sum)


def _total(
    pace: _Pace, pauses: PauseForecast, shutdown_s: float, shutdown_sd_s: float, q: float
) -> Quantiles:
    """Quantiles (``q``: the 0.9 quantile factor) of pace + pauses + shutdown, matched to a
    log-normal by its first two moments."""
    if pace.median_s <= 0:
        return Quantiles(p10=0.0, p50=0.0, p90=0.0)
    if pauses.mean_s <= 0 and shutdown_s <= 0:
        median, log_sd = pace.median_s, pace.log_sd
    else:
        growth = math.exp(pace.log_sd**2)
        mean_pace = pace.median_s * math.sqrt(growth)
        mean = mean_pace + pauses.mean_s + shutdown_s
        var = mean_pace**2 * (growth - 1.0) + pauses.var_s2 + shutdown_sd_s**2
        ratio = 1.0 + var / mean**2
        median, log_sd = mean / math.sqrt(ratio), math.sqrt(math.log(ratio))
    return Quantiles(
        p10=median * math.exp(-q * log_sd), p50=median, p90=median * math.exp(q * log_sd)
    )


def _estimate(  # noqa: PLR0917 - the parts of an estimate, in order
    fit: LevelFit,
    method: EtaMethod,
    step: Quantiles,
    remaining: Quantiles,
    raw: Quantiles,
    completion: Quantiles,
    iteration: int,
    train_iters: int,
    *,
    pauses: PauseForecast | None = None,
    shutdown_s: float = 0.0,
    shutdown_sd_s: float = 0.0,
    calibrated: bool = False,
    prior_log_sd: float | None = None,
) -> EtaEstimate:
    return EtaEstimate(
        method=method,
        step_time_s=step,
        remaining_s=remaining,
        completion_time_s=completion,
        progress_ratio=min(1.0, iteration / train_iters),
        iteration=iteration,
        train_iters=train_iters,
        num_observations=fit.num_used,
        prior_step_time_s=fit.prior_step_time_s,
        prior_log_sd=None if fit.prior_step_time_s is None else prior_log_sd,
        observed_step_time_s=None if fit.observed_mu is None else math.exp(fit.observed_mu),
        step_time_log_sd=fit.sigma,
        pace_log_sd=fit.pace_sd,
        prior_weight=None if fit.prior_step_time_s is None else fit.prior_weight,
        conflict_z=fit.conflict_z,
        pauses_s=None if pauses is None else pauses.mean_s,
        pauses=pauses,
        shutdown_s=shutdown_s,
        shutdown_sd_s=shutdown_sd_s,
        phase_start_iteration=fit.phase_start_iteration,
        phase_ratio=fit.phase_ratio,
        phase_z=fit.phase_z,
        model_remaining_s=raw,
        band_calibrated=calibrated,
    )
