"""When will a training job finish? ETA with an uncertainty band; pure, no I/O.

The model: the job's remaining time is the number of remaining iterations times its mean step
time. The log of the mean step time, ``mu``, starts from the performance model's prediction (the
prior: log-normal, ``mu ~ N(log prior_step_time_s, prior_log_sd^2)``) and is updated with the
step times the job's log reports, by the normal-normal conjugate update in log space (Gelman et
al., *Bayesian Data Analysis*, 3rd ed., 2013, §2.5: posterior precision = prior precision + data
precision, posterior mean = precision-weighted mean).

Observed step times, in detail (``estimate_running``):

1. **Warm-up.** The first iterations of a run (or of a restart) are slow: graph capture,
   allocator and NCCL warm-up, data loader start. Observations whose averaging window starts
   within ``warmup_iterations`` (default 10) of the earliest window start seen are dropped, as long
   as later observations exist. When only warm-up observations exist they are used, with an extra
   ``WARMUP_LOG_SD`` (1.0) of log-sd added to their mean's variance, so they can reveal a gross
   prior-data conflict but hardly move a sound prior.
2. **Noise.** Each observation ``k`` is the mean over ``n_k`` iterations, so its log ``y_k`` has
   variance ``sigma^2 / n_k`` where ``sigma`` is the per-iteration log-sd. ``sigma`` is estimated
   robustly from the most recent ``NOISE_WINDOW`` (64) observations by the median absolute
   deviation of ``(y_k - median(y)) * sqrt(n_k)`` times 1.4826, which makes the MAD a consistent
   estimator of the normal sd (Rousseeuw & Croux 1993, JASA 88:1273). With few observations this is
   shrunk toward ``DEFAULT_LOG_SD`` (0.10) as with a scaled-inverse-chi^2 prior of
   ``NOISE_PRIOR_DOF`` (4) degrees of freedom (BDA3 §3.3):
   ``sigma^2 = (nu0 * 0.10^2 + (m - 1) * MAD^2) / (nu0 + m - 1)`` for ``m`` observations.
3. **Outliers.** One-step Huber M-estimate around the median (Huber 1964; Bickel 1975): an
   observation further than ``HUBER_K`` sigmas from the median gets weight
   ``HUBER_K * sigma / |residual|``. ``HUBER_K`` is 3, not the textbook 1.345: only gross
   outliers are down-weighted, because a moderately slow window (a checkpoint save, a data-loader
   hiccup) is time the job will spend again, and down-weighting it biases the ETA low (measured on
   the recorded tiny GPT run in ``tests/data/logs``). Each ``y_k`` is the log of a mean of ``n_k``
   iterations, which sits ``sigma^2 / (2 n_k)`` below the log of the mean step time (delta
   method); that is added back before averaging.
4. **Forgetting.** Weights halve every ``half_life_s`` of age (default 1800 s, measured back from
   the newest observation), so a job that speeds up or slows down is followed within about one
   half-life. Weight of observation ``k``: ``w_k = n_k * 0.5^(age_k / half_life_s) * huber_k``;
   the data mean is ``sum w y / sum w`` with variance ``sigma^2 sum(w_k^2 / n_k) / (sum w)^2``.
5. **Prior-data conflict.** Box's prior predictive check (Box 1980, JRSS A 143:383; Evans &
   Moshonov 2006, Bayesian Analysis 1:893): ``z = (ybar - mu0) / sqrt(prior_log_sd^2 + var)``.
   When ``|z| > conflict_z`` (default 3) the prior is dropped (``method="prior_conflict"``): the
   model predicted something the job plainly does not do (e.g. it assumed H100s and the job runs
   on CPUs).

The band. The remaining time is a sum of ``N`` steps: log of the sum ~ ``log N + mu + e`` with ``e``
normal (Fenton-Wilkinson approximation of a sum of log-normals, Fenton 1960) of variance ``var(mu) +
sigma^2 / N + drift``. ``drift`` is the variance of the average future level if ``mu`` follows a
random walk whose optimal filter is the exponential forgetting above (Muth 1960, JASA 55:299:
smoothing ``a`` per iteration matches a signal-to-noise ratio ``a^2 / (1 - a)``); the average of a
random walk over ``N`` steps has variance ``q N / 3``. So the band widens with the horizon. On top,
``level_log_sd`` (default 0.05) is a floor on how far the mean step time of the rest of the run may
differ from the mean seen so far (phases of a run differ by a few percent: on the recorded tiny GPT
run, 90-iteration means range 52-61 ms). The default was measured on that recorded run
(``tests/data/logs/tiny_gpt_megatron_900it.log``), replayed at 18 checkpoints from 10 % to 95 %
progress: the p10-p90 completion band held the real end at 1/18 checkpoints with 0, 6/18 with 0.03,
13/18 with 0.05 and 16/18 with 0.06 (p50 error -5 % on average, a run-specific slowdown). One run on
one machine (``benchmarks/eta_band_coverage.py``): to be recalibrated against finished jobs; set 0
to rely on the statistics alone. Quantiles use Student's t with ``NOISE_PRIOR_DOF + m - 1`` degrees
of freedom when ``sigma`` was estimated from ``m`` observations (the marginal predictive of the
normal model with unknown variance, BDA3 §3.3), the normal quantile 1.2816 for the prior alone.
``step_time_s`` quantiles describe the mean step time only (``exp(mu)``).

If there is neither a prior nor any observation there is nothing to estimate from:
``estimate_running`` raises ``SpecError`` rather than invent a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

import numpy as np

from planner.errors import SpecError

Z90: Final = 1.2815515655446004
"""Standard normal 0.9 quantile."""
DEFAULT_LOG_SD: Final = 0.10
"""Per-iteration log-sd of step time assumed before data says otherwise (10 % jitter)."""
NOISE_PRIOR_DOF: Final = 4.0
"""Pseudo-observations behind DEFAULT_LOG_SD in the noise estimate."""
NOISE_WINDOW: Final = 64
"""Most recent observations used for the MAD noise estimate."""
MAD_TO_SD: Final = 1.4826
"""MAD consistency factor for the normal distribution, 1 / Phi^-1(3/4)."""
HUBER_K: Final = 3.0
"""Huber's tuning constant: only observations beyond 3 sigma are down-weighted."""
WARMUP_LOG_SD: Final = 1.0
"""Extra log-sd of the data mean when only warm-up observations exist."""
_MAX_SMOOTHING: Final = 0.5


class EtaMethod(StrEnum):
    """How an estimate was reached."""

    PRIOR = "prior"
    """Model prediction only (no usable observations)."""
    BLEND = "blend"
    """Model prediction updated with observed step times."""
    OBSERVED = "observed"
    """Observed step times only (no model prediction was given)."""
    PRIOR_CONFLICT = "prior_conflict"
    """Observed step times only: the model prediction was far off and was dropped."""
    DONE = "done"
    """The job has run all its iterations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantiles:
    """10th, 50th and 90th percentile of a quantity (its unit is in the owner's field name)."""

    p10: float
    p50: float
    p90: float

    def __post_init__(self) -> None:
        values = (self.p10, self.p50, self.p90)
        if not all(math.isfinite(v) for v in values):
            raise SpecError("quantiles", f"must be finite, got {values}")
        if not self.p10 <= self.p50 <= self.p90:
            raise SpecError("quantiles", f"must be ordered p10 <= p50 <= p90, got {values}")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepObservation:
    """One observed step time: the mean wall time ``step_time_s`` (s) of the ``num_iterations``
    iterations that ended at ``iteration``, observed at ``time_s`` (epoch s)."""

    iteration: int
    step_time_s: float
    num_iterations: int = 1
    time_s: float

    def __post_init__(self) -> None:
        if self.iteration < 0:
            raise SpecError("iteration", f"must be >= 0, got {self.iteration}")
        if not (math.isfinite(self.step_time_s) and self.step_time_s > 0):
            raise SpecError("step_time_s", f"must be finite and > 0, got {self.step_time_s}")
        if self.num_iterations < 1:
            raise SpecError("num_iterations", f"must be >= 1, got {self.num_iterations}")
        if not math.isfinite(self.time_s):
            raise SpecError("time_s", f"must be finite, got {self.time_s}")


@dataclass(frozen=True, slots=True, kw_only=True)
class EtaEstimate:
    """A job's expected step time, remaining time and completion time, with 10-90 % bands.

    ``step_time_s``: mean step time (s). ``remaining_s``: seconds from ``now_s`` to the end.
    ``completion_time_s``: epoch seconds of the end, None when the start time is unknown (pending
    jobs). ``progress_ratio``: ``iteration / train_iters`` (None when not started).
    ``num_observations``: observations used (after warm-up filtering).
    ``prior_step_time_s``: the model prediction given; ``observed_step_time_s``: the robust
    weighted estimate from the observations alone; ``step_time_log_sd``: per-iteration log-sd
    used; ``conflict_z``: the prior-data conflict score (None without both).
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
    observed_step_time_s: float | None = None
    step_time_log_sd: float | None = None
    conflict_z: float | None = None


@dataclass(frozen=True, slots=True)
class _Fit:
    method: EtaMethod
    mu: float
    var: float
    sigma: float
    dof: float | None
    num_used: int
    observed_mu: float | None
    conflict_z: float | None
    prior_step_time_s: float | None


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
    level_log_sd: float = 0.05,
) -> EtaEstimate:
    """ETA of a running job that has completed ``iteration`` of ``train_iters`` iterations.

    ``prior_step_time_s`` (s, or None) is the performance model's step time for the job's
    allocation, with log-sd ``prior_log_sd``; ``observations`` the step times seen so far (any
    order); ``last_progress_time_s`` (epoch s) when ``iteration`` was reached; ``now_s`` the
    current time. See the module docstring for the statistics.

    Completion quantiles are ``max(now_s, last_progress_time_s + R)`` for remaining-time quantiles
    ``R`` of the ``train_iters - iteration`` iterations left; ``remaining_s`` is that minus
    ``now_s`` (a stalled job thus drifts to 0). When ``iteration >= train_iters`` the job is done:
    remaining 0 and completion ``last_progress_time_s``.

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
    if not (math.isfinite(level_log_sd) and level_log_sd >= 0):
        raise SpecError("level_log_sd", f"must be finite and >= 0, got {level_log_sd}")
    if prior_step_time_s is None and not observations:
        raise SpecError(
            "prior_step_time_s",
            "no model prediction and no observed step time: nothing to estimate the ETA from; "
            "give a prediction or wait for the job to log progress",
        )

    fit = _fit(
        prior_step_time_s=prior_step_time_s,
        prior_log_sd=prior_log_sd,
        observations=observations,
        half_life_s=half_life_s,
        warmup_iterations=warmup_iterations,
        conflict_z=conflict_z,
    )
    remaining_iters = max(0, train_iters - iteration)
    step_q, rem_q = _bands(fit, remaining_iters, half_life_s, level_log_sd)
    if remaining_iters == 0:
        end = last_progress_time_s
        done = Quantiles(p10=end, p50=end, p90=end)
        return _estimate(
            fit=fit,
            method=EtaMethod.DONE,
            step=step_q,
            remaining=rem_q,
            completion=done,
            iteration=iteration,
            train_iters=train_iters,
        )
    ends = [max(now_s, last_progress_time_s + r) for r in (rem_q.p10, rem_q.p50, rem_q.p90)]
    completion = Quantiles(p10=ends[0], p50=ends[1], p90=ends[2])
    remaining = Quantiles(p10=ends[0] - now_s, p50=ends[1] - now_s, p90=ends[2] - now_s)
    return _estimate(
        fit=fit,
        method=fit.method,
        step=step_q,
        remaining=remaining,
        completion=completion,
        iteration=iteration,
        train_iters=train_iters,
    )


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
    (a requeued job may resume from a checkpoint the planner cannot see). Raises ``SpecError``.
    """
    _check_common(prior_step_time_s, prior_log_sd, train_iters)
    if expected_start_time_s is not None and not math.isfinite(expected_start_time_s):
        raise SpecError("expected_start_time_s", f"must be finite, got {expected_start_time_s}")
    fit = _prior_fit(prior_step_time_s, prior_log_sd)
    step_q, rem_q = _bands(fit, train_iters, half_life_s, level_log_sd)
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


def _prior_fit(prior_step_time_s: float, prior_log_sd: float) -> _Fit:
    return _Fit(
        method=EtaMethod.PRIOR,
        mu=math.log(prior_step_time_s),
        var=prior_log_sd**2,
        sigma=DEFAULT_LOG_SD,
        dof=None,
        num_used=0,
        observed_mu=None,
        conflict_z=None,
        prior_step_time_s=prior_step_time_s,
    )


def _fit(
    *,
    prior_step_time_s: float | None,
    prior_log_sd: float,
    observations: Sequence[StepObservation],
    half_life_s: float,
    warmup_iterations: int,
    conflict_z: float,
) -> _Fit:
    by_iteration = {o.iteration: o for o in observations}  # a repeated iteration: last one wins
    obs = [by_iteration[i] for i in sorted(by_iteration)]
    if not obs:
        if prior_step_time_s is None:
            raise SpecError("observations", "no observations and no prior")
        return _prior_fit(prior_step_time_s, prior_log_sd)

    first_start = min(o.iteration - o.num_iterations for o in obs)
    steady = [o for o in obs if o.iteration - o.num_iterations >= first_start + warmup_iterations]
    warmup_only = not steady
    used = obs if warmup_only else steady

    y = np.log(np.array([o.step_time_s for o in used]))
    n = np.array([float(o.num_iterations) for o in used])
    t = np.array([o.time_s for o in used])

    med = float(np.median(y))
    recent = slice(max(0, len(used) - NOISE_WINDOW), len(used))
    r = (y - med) * np.sqrt(n)
    m = len(y[recent])
    mad = MAD_TO_SD * float(np.median(np.abs(r[recent] - np.median(r[recent]))))
    sigma = math.sqrt(
        (NOISE_PRIOR_DOF * DEFAULT_LOG_SD**2 + (m - 1) * mad**2) / (NOISE_PRIOR_DOF + m - 1)
    )

    scaled = np.abs(r) / sigma
    huber = np.minimum(1.0, HUBER_K / np.maximum(scaled, 1e-12))
    decay = np.power(0.5, (t.max() - t) / half_life_s)
    w = n * decay * huber
    ybar = float(np.sum(w * (y + sigma**2 / (2.0 * n))) / np.sum(w))
    var = sigma**2 * float(np.sum(w**2 / n)) / float(np.sum(w)) ** 2
    if warmup_only:
        var += WARMUP_LOG_SD**2
    dof = NOISE_PRIOR_DOF + m - 1

    if prior_step_time_s is None:
        return _Fit(EtaMethod.OBSERVED, ybar, var, sigma, dof, len(used), ybar, None, None)
    mu0, var0 = math.log(prior_step_time_s), prior_log_sd**2
    z = (ybar - mu0) / math.sqrt(var0 + var)
    if abs(z) > conflict_z:
        return _Fit(
            EtaMethod.PRIOR_CONFLICT, ybar, var, sigma, dof, len(used), ybar, z, prior_step_time_s
        )
    precision = 1.0 / var0 + 1.0 / var
    mu = (mu0 / var0 + ybar / var) / precision
    return _Fit(
        EtaMethod.BLEND, mu, 1.0 / precision, sigma, dof, len(used), ybar, z, prior_step_time_s
    )


def _bands(
    fit: _Fit, remaining_iters: int, half_life_s: float, level_log_sd: float
) -> tuple[Quantiles, Quantiles]:
    """(mean step time quantiles, remaining-time quantiles for ``remaining_iters`` iterations)."""
    q = Z90 if fit.dof is None else t_quantile_90(fit.dof)
    sd_mu = math.sqrt(fit.var)
    step = Quantiles(
        p10=math.exp(fit.mu - q * sd_mu), p50=math.exp(fit.mu), p90=math.exp(fit.mu + q * sd_mu)
    )
    if remaining_iters == 0:
        return step, Quantiles(p10=0.0, p50=0.0, p90=0.0)
    n = float(remaining_iters)
    smoothing = min(_MAX_SMOOTHING, 1.0 - 0.5 ** (math.exp(fit.mu) / half_life_s))
    walk_var = fit.sigma**2 * smoothing**2 / (1.0 - smoothing)
    sd_sum = math.sqrt(fit.var + level_log_sd**2 + fit.sigma**2 / n + walk_var * n / 3.0)
    log_n = math.log(n)
    remaining = Quantiles(
        p10=math.exp(log_n + fit.mu - q * sd_sum),
        p50=math.exp(log_n + fit.mu),
        p90=math.exp(log_n + fit.mu + q * sd_sum),
    )
    return step, remaining


def _estimate(
    *,
    fit: _Fit,
    method: EtaMethod,
    step: Quantiles,
    remaining: Quantiles,
    completion: Quantiles,
    iteration: int,
    train_iters: int,
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
        observed_step_time_s=None if fit.observed_mu is None else math.exp(fit.observed_mu),
        step_time_log_sd=fit.sigma,
        conflict_z=fit.conflict_z,
    )
