"""The steady step time of a running job: its wall-clock pace between pauses, blended with the
performance model's prediction; pure (statistics documented in ``planner.forecast.eta``).

Steps, in order: drop pause intervals (``planner.forecast.history``) and warm-up; keep the
current phase (change points, below); estimate the per-iteration noise robustly; take the mean
pace (total time over total iterations) with exponential forgetting; blend with the model's
prior unless they conflict.

**Phases.** A run changes pace: a batch-size ramp-up (``--rampup-batch-size``), a sequence-length
warm-up, a slower phase (a degraded node, another job on the host). Only the observations since
the last change point are used. The change point is the split of the observations that best
separates the paces (time over iterations) of the two sides in log space, ``z = (log pace_after -
log pace_before) / sqrt(sigma^2 (1/W_a + 1/W_b) + blur)`` (``W``: iterations on each side,
``sigma``: per-iteration log-sd, ``blur``: the two sides' end blur when the log prints whole
seconds, see :func:`phase_start`), accepted when
``|z| > CHANGE_Z`` (6: a maximum over many splits of a noisy series needs a high bar, Page 1954,
Biometrika 41:100; the bar keeps noise from moving the estimate), the means differ by more than
``CHANGE_MIN_EFFECT`` (3 %) and at least ``CHANGE_MIN_OBS`` (3) observations follow it; the
search repeats on what follows (up to ``MAX_CHANGES`` times), so the newest phase is found. A
step change of a few tens of percent is thus followed after three logging intervals.

**Two clocks.** When the log prints the compute time of every interval as well, the same search
runs on those printed times and the later of the two change points wins: a log that prints whole
seconds blurs intervals shorter than a few seconds (a 50 ms step logged every 5 iterations), and
its wall clock alone cannot tell a slower phase from the blur, while the printed times of the
same iterations carry no blur. The wall clock decides the pace (what the ETA projects), except
when the current phase lasted less than ``SHORT_PHASE_RESOLUTIONS`` (100) printed resolutions:
its own blurred ends would then be off by up to 10 % (a 10 s phase), so its pace is its printed
compute times times the ratio of wall to compute time over the whole run (one ratio over a
longer span: the blur of two ends over it), or over the part since a change only the wall clock
saw (a stall the printed times leave out). Measured on the end-to-end test's job (50-90 ms
iterations, whole-second times, `tests/data/logs/tiny_gpt_e2e_stall_*`): at 30 % progress the
pace was 7 % high on the wall clock alone under a CPU hog, 3.5 % with the ratio.

The two clocks often place one change a few observations apart (the wall clock's blur moves
it, or a stall the printed times leave out begins an interval before a slower compute): the
sliver between their two change points is then no phase of its own (neither search puts a
phase of fewer than ``CHANGE_MIN_OBS`` observations), and the phase's pace is compared with
the stretch before the earlier of the two (``LevelFit.phase_ratio``). Compared with the sliver,
an x1.5 step that the wall clock saw one interval before the printed times read x1.02 (z 1: no
phase event), and on the recorded session ``noisy_eval_tempphase_900it`` a pace that fell from
0.18 to 0.13 s per iteration read x1.33, slower, against a sliver of two intervals at 0.10.

**Noise.** ``sigma`` is the MAD of successive differences of the recent log step times (scaled
by their iterations), not of their distance to the median: a phase change moves one difference,
while it moves half of the distances (the MAD of the distances of a run with a slow phase in its
middle was the size of the phase, and hid it). Under whole-second times the wall clock's
intervals are blurred (modelled apart, above), so ``sigma`` comes from the printed compute
times when there are some, and ``DEFAULT_LOG_SD`` is its floor.

**Pace noise.** ``sigma`` is the step-to-step noise; on a shared host the pace also swings for
tens of seconds at a time (another job's load comes and goes), and those swings do not average
out over a few intervals. What the ETA needs is how far the *mean* pace over ``W`` iterations
strays: ``pace_sd^2 / W`` for large ``W``, where ``pace_sd^2`` is the long-run variance of the
log pace per iteration (the spectral density at zero). It is measured by batch means (Flegal &
Jones 2010, Annals of Statistics 38:1034) on the newest ``PACE_WINDOW`` of ``m`` observations:
batches of ``B`` steady iterations (pauses and warm-up left out) anchored on fixed boundaries,
the multiples of ``B`` counted from the first steady observation the ETA is given (the service
keeps the newest ``OBSERVATION_WINDOW`` of them: past that the origin moves with the window), an
observation in the batch it ends in, ``B`` the power of two nearest ``W / max(MIN_BATCHES,
sqrt(m))`` for ``W`` iterations (so both the batches and their count grow as ``sqrt(m)``, as the
estimator's consistency asks), halved until ``MIN_BATCHES`` batches are whole (the newest one,
still filling, is left out); each batch's pace (time over iterations), and the MAD of successive
batch differences scaled by their iterations (a phase change moves one difference), weighed as
``max(MIN_BATCHES, floor(sqrt(m)))`` batches (a count that never falls as observations come: the
whole batches number about 0.7-1.4 times it and halve when pairs merge, and weighed as such they
widened a steady job's band) and shrunk toward ``sigma`` with ``NOISE_PRIOR_DOF``
pseudo-batches. Fixed boundaries make the estimate change only when a batch fills (one more
difference), ``B`` doubles (pairs of batches merge) or a change point (below) comes or moves,
not at every poll: batches re-cut from
the newest observation at every poll (every boundary moved by one observation, and all of them
when the batch size grew) gave each poll a fresh draw of a statistic of 3-4 differences of
whole-second-blurred batch paces: on the recorded session ``noisy_eval_tempphase_900it`` it read
0.17 at iteration 165 (three equal batch paces: a MAD of 0) and 1.65 at 170, and from 10 %
progress on it changed more than twofold between successive polls at 14 and 47 of 162 polls of
the two recorded sessions (5 and 3 anchored and cut as below). A batch that holds a change
point the ETA's
search found (:func:`phase_starts`, either clock) is cut in two there, so that no batch mixes
two phases: a step that falls inside a fixed batch gives that batch a pace between the two and
moves the two differences beside it, and with 4-6 batches two moved differences are a third to
a half of the MAD, which then measures the step itself. On a noiseless log whose pace steps
x1.5 at its 10th of 40 intervals (the metrics test's feed, ``tests/deploy/planner_feed.py``)
the uncut batches put the step at 3.4 sd of the noise it made (no phase event: 4 needed), the
cut ones at 61 sd; cut, a change moves one difference, as it does on a boundary. The search's
change points on a shared host are mostly its swings; each still moves the difference across
it, so the swings stay in the noise (less of them than when each moved two: at the first poll
after the recorded early session's change from iteration 135, 0.47 per iteration cut, 0.64
uncut). Leaving the differences across them out instead took the swings out of the noise: the
recorded late session's host swing from iteration 95 became a phase event. A log that prints
whole seconds blurs each batch at its two ends, which successive batches share: that variance is
the log's, not the pace's, and is taken out of the differences (:func:`long_run_sd`; left in,
a steady 90 ms pace logged every 5 iterations measured 0.45 per iteration instead of about
0.06, and the end of the end-to-end test job's stall under a CPU hog was 3 sd of it instead of
4). On a quiet host ``pace_sd`` is ``sigma``;
on the dev machine with other test suites beside the job it was 3-10 times ``sigma``. It sets
the variance of the fitted pace (``pace_sd^2 sum(w^2/n) / (sum w)^2``), the pace's term of the
band (``planner.forecast.eta``) and the significance of a phase event
(``planner.forecast.history``); the change-point search of the ETA keeps the step-to-step
``sigma`` (it follows a new pace within a few intervals, and a false change only costs the band
some width).

**The prior.** The model's step time (times the cluster's calibration) is a prior of log-sd
``prior_log_sd``; to it is added ``host^2``, how far the job's own pace strays between stretches
of its run beyond step-to-step noise (``level_spread`` with ``sigma``): a model predicts the job
on its hardware, the load of a shared host moves the whole run by about as much as it moves a
stretch of it. Unless the two conflict (Box's check, ``planner.forecast.eta``), the pace is
``mu = w0 mu0 + (1 - w0) ybar`` with the stated rule

    w0 = v / (v_prior + v),  v = pace_sd^2 / W,  v_prior = prior_log_sd^2 + host^2,

``W`` the iterations the job has run outside warm-up and pauses, all its phases: the prior
counts as ``n0 = pace_sd^2 / v_prior`` iterations of the job's own pace and its weight is
``n0 / (n0 + W)``, so it yields to the observed pace as the job runs, and faster on a host
whose pace swings (a wider ``v_prior``) or with a loose calibration. The variance of ``mu`` is
``(1 - w0)^2 var(ybar) + w0^2 v_prior``.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from planner.errors import SpecError
from planner.forecast.values import EtaMethod, StepObservation

DEFAULT_LOG_SD: Final = 0.10
"""Per-iteration log-sd of step time assumed before data says otherwise (10 % jitter)."""
NOISE_PRIOR_DOF: Final = 4.0
"""Pseudo-observations behind DEFAULT_LOG_SD in the noise estimate."""
NOISE_WINDOW: Final = 64
"""Most recent observations used for the MAD noise estimate."""
MAD_TO_SD: Final = 1.4826
"""MAD consistency factor for the normal distribution, 1 / Phi^-1(3/4)."""
HUBER_K: Final = 3.0
"""Reach of the winsorizing before a change-point scan, in sds of each observation."""
WARMUP_LOG_SD: Final = 1.0
"""Extra log-sd of the data mean when only warm-up observations exist."""
LEVEL_PRIOR_LOG_SD: Final = 0.03
"""Spread of the future pace around the pace seen, assumed before the job's own blocks say."""
LEVEL_PRIOR_DOF: Final = 1.0
LEVEL_BLOCKS: Final = 8
CHANGE_Z: Final = 6.0
CHANGE_MIN_EFFECT: Final = 0.03
CHANGE_MIN_OBS: Final = 3
MAX_CHANGES: Final = 3
MIN_BATCHES: Final = 4
"""Batches the long-run noise needs (below: the per-iteration noise stands in)."""
PACE_WINDOW: Final = 400
"""Newest observations the long-run noise is measured on."""
SHORT_PHASE_RESOLUTIONS: Final = 100.0
"""A phase shorter than this many printed-time resolutions (100 s of whole seconds) is paced on
the printed compute times (module docstring, "Two clocks")."""


@dataclass(frozen=True, slots=True)
class LevelFit:
    """The fitted log mean step time ``mu`` (log s) and its variance ``var``; ``sigma`` the
    per-iteration log-sd; ``pace_sd`` the long-run log-sd of the pace (the mean pace over ``W``
    iterations scatters by ``pace_sd / sqrt(W)``: "Pace noise" in the module docstring);
    ``dof`` their degrees of freedom (None: prior only); ``num_used`` observations used;
    ``observed_mu`` the data mean alone; ``conflict_z`` Box's check; ``prior_weight`` the
    prior's share of ``mu`` (0: not blended); ``phase_start_iteration`` where the current
    phase began (None: no change point), ``phase_ratio`` its pace over the pace of the
    stretch before it and ``phase_z`` that shift in sd of the two stretches' mean paces under
    the long-run noise (both None: no change point)."""

    method: EtaMethod
    mu: float
    var: float
    sigma: float
    dof: float | None
    num_used: int
    observed_mu: float | None
    conflict_z: float | None
    prior_step_time_s: float | None
    phase_start_iteration: int | None = None
    level_log_sd: float = LEVEL_PRIOR_LOG_SD
    pace_sd: float | None = None
    prior_weight: float = 0.0
    phase_ratio: float | None = None
    phase_z: float | None = None


def prior_fit(prior_step_time_s: float, prior_log_sd: float) -> LevelFit:
    """The fit of the model's prediction alone."""
    return LevelFit(
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


def long_run_sd(
    y: np.ndarray,
    n: np.ndarray,
    sigma: float,
    *,
    window: int = PACE_WINDOW,
    resolution_s: float = 0.0,
    changes: Sequence[int] = (),
) -> tuple[float, int]:
    """(long-run per-iteration log-sd of the pace, batches it counts as): robust batch means
    (module docstring, "Pace noise"). ``y``: log step times of ``n`` iterations each, in
    order, all of the run's steady ones (the batches are anchored on their running count of
    iterations; the newest ``window`` of them are measured); ``sigma``: the per-iteration
    log-sd it is shrunk toward; ``resolution_s``: how finely the log prints its times (1 for
    whole seconds: each end of a batch is then off by a uniform error of variance
    ``resolution_s^2 / 12``, and two successive batches of ``D0`` and ``D1`` seconds share one
    end, so the difference of their log paces carries a variance ``resolution_s^2 / 12 *
    (1/D0^2 + (1/D0 + 1/D1)^2 + 1/D1^2)`` that is the log's, not the pace's: it is taken out of
    the batch differences' variance); ``changes``: indexes into ``y`` of the first observation
    of each phase the change-point search found (:func:`phase_starts`): a batch holding one is
    cut in two there. With fewer than ``2 * MIN_BATCHES`` observations or ``MIN_BATCHES`` whole
    batches, ``(sigma, 0)``."""
    last = np.rint(np.cumsum(n)).astype(np.int64)
    dropped = max(0, len(y) - window)
    y, n, last = y[-window:], n[-window:], last[-window:]
    m = len(y)
    if m < 2 * MIN_BATCHES:
        return sigma, 0
    which, first, stop = _batches(last, n, m)
    if stop - first < MIN_BATCHES:
        return sigma, 0
    inside = (which >= first) & (which < stop)
    # A batch is cut at each change point in it (module docstring, "Pace noise"): a piece
    # begins where the batch number or the phase number (both non-decreasing) changes.
    cuts = np.array(sorted({c - dropped for c in changes if 0 < c - dropped < m}), dtype=np.int64)
    phase = np.searchsorted(cuts, np.arange(m), side="right")[inside]
    new_piece = (np.diff(which[inside]) != 0) | (np.diff(phase) != 0)
    slot = np.concatenate(([0], np.cumsum(new_piece)))
    w = np.bincount(slot, weights=n[inside])
    seconds = np.bincount(slot, weights=(n * np.exp(y))[inside])
    k = len(w)
    if k < MIN_BATCHES:
        return sigma, 0
    pace = np.log(seconds / w)
    scale = 1.0 / w[1:] + 1.0 / w[:-1]
    d = np.diff(pace) / np.sqrt(scale)
    batch = MAD_TO_SD * float(np.median(np.abs(d)))
    if resolution_s > 0:  # the blur of the batches' ends is no swing of the pace
        a, b = 1.0 / seconds[:-1], 1.0 / seconds[1:]  # two batches share an end
        blur = resolution_s**2 / 12.0 * (a**2 + (a + b) ** 2 + b**2)
        batch = math.sqrt(max(0.0, batch**2 - float(np.median(blur / scale))))
    # Weighed as the batches the size aims at, which never fall as observations come: the
    # whole batches halve when pairs of them merge, and a steady job's band then widened.
    count = max(MIN_BATCHES, math.isqrt(m))
    shrunk = (NOISE_PRIOR_DOF * sigma**2 + (count - 1) * batch**2) / (NOISE_PRIOR_DOF + count - 1)
    return math.sqrt(shrunk), count


def _batches(last: np.ndarray, n: np.ndarray, m: int) -> tuple[np.ndarray, int, int]:
    """(batch of each observation, first and one past the last whole batch) for the ``m``
    observations of ``n`` iterations each ending at steady iteration ``last`` (the running
    count): batch ``b`` holds those that ended in ``(b B, (b + 1) B]``, ``B`` the power of
    two nearest ``sum(n) / max(MIN_BATCHES, sqrt(m))`` (halved until there are
    ``MIN_BATCHES`` whole ones). A batch is whole once an observation ended past it (the
    newest is still filling) and when the first observation began at or before its start."""
    target = float(n.sum()) / max(MIN_BATCHES, math.sqrt(m))
    size = 2 ** max(0, round(math.log2(max(1.0, target))))
    begin = int(last[0]) - round(float(n[0]))
    while True:
        which = (last - 1) // size
        first = int(which[0]) + (1 if begin > int(which[0]) * size else 0)
        stop = int(which[-1]) + (1 if int(last[-1]) % size == 0 else 0)
        if stop - first >= MIN_BATCHES or size == 1:
            return which, first, stop
        size //= 2


def phase_start(y: np.ndarray, n: np.ndarray, sigma: float, *, resolution_s: float = 0.0) -> int:
    """Index of the first observation of the current phase of ``y`` (log step times of ``n``
    iterations each, in order); 0 when there is no change point (module docstring).
    ``sigma``: the per-iteration log-sd a segment's pace is judged by (the ETA gives the
    step-to-step one, so it follows a new pace within a few intervals; "Pace noise")."""
    starts = phase_starts(y, n, sigma, resolution_s=resolution_s)
    return starts[-1] if starts else 0


def phase_starts(
    y: np.ndarray, n: np.ndarray, sigma: float, *, resolution_s: float = 0.0
) -> list[int]:
    """Indexes of the change points of ``y`` found one after the other (each in what follows
    the previous one), as :func:`phase_start` searches; empty when there is none.

    A segment's pace is its time over its iterations (the ratio of sums: what the ETA projects),
    with log variance ``sigma^2 / W + (resolution_s^2 / 6) / D^2`` for ``W`` iterations lasting
    ``D`` seconds: a log that prints whole seconds (``resolution_s`` 1) blurs each interval by up
    to a second, but over a segment only its two ends are blurred. Values are first winsorized at
    ``HUBER_K`` times their own sd (at least twice ``CHANGE_MIN_EFFECT``) from the median, so a
    lone outlier is no phase."""
    start = 0
    starts: list[int] = []
    blur = resolution_s**2 / 6.0
    for _ in range(MAX_CHANGES):
        ns = n[start:]
        m = len(ns)
        if m < 2 * CHANGE_MIN_OBS:
            break
        med = float(np.median(y[start:]))
        own = np.sqrt(sigma**2 / ns + blur / (ns * np.exp(y[start:])) ** 2)
        reach = np.maximum(HUBER_K * own, 2.0 * CHANGE_MIN_EFFECT)
        ys = np.clip(y[start:], med - reach, med + reach)  # one outlier is not a phase
        w = np.cumsum(ns)
        d = np.cumsum(ns * np.exp(ys))
        splits = np.arange(CHANGE_MIN_OBS, m - CHANGE_MIN_OBS + 1)
        wb, db = w[splits - 1], d[splits - 1]
        wa, da = w[-1] - wb, d[-1] - db
        diff = np.log(da / wa) - np.log(db / wb)
        var = sigma**2 * (1.0 / wa + 1.0 / wb) + blur * (1.0 / da**2 + 1.0 / db**2)
        z = diff / np.sqrt(var)
        ok = np.abs(diff) > CHANGE_MIN_EFFECT
        if not ok.any():
            break
        scores = np.where(ok, np.abs(z), 0.0)
        best = int(np.argmax(scores))
        if scores[best] < CHANGE_Z:
            break
        start += int(splits[best])
        starts.append(start)
    return starts


def fit_level(
    *,
    prior_step_time_s: float | None,
    prior_log_sd: float,
    observations: Sequence[StepObservation],
    half_life_s: float,
    warmup_iterations: int,
    conflict_z: float,
    exclude: Collection[int] = (),
    run_start_iteration: int | None = None,
    restarts: Sequence[tuple[float, int]] = (),
    resolution_s: float = 0.0,
) -> LevelFit:
    """Fit the steady step time (see ``planner.forecast.eta`` and the module docstring).

    ``exclude``: end iterations of intervals that held a pause; ``run_start_iteration``: the
    iteration the run started from (None: the earliest observed); ``restarts``: ``(time_s,
    iteration)`` of each restart, whose first ``warmup_iterations`` are warm-up again;
    ``resolution_s``: how finely the log prints its times (1 for whole seconds: the per-interval
    noise is then mostly that blur, and the MAD of intervals that share a few values says
    nothing: ``DEFAULT_LOG_SD`` is its floor). Raises
    ``SpecError`` when there is neither a prior nor an observation.
    """
    by_iteration = {o.iteration: o for o in observations if o.iteration not in exclude}
    obs = [by_iteration[i] for i in sorted(by_iteration)]
    if not obs:
        if prior_step_time_s is None:
            raise SpecError("observations", "no observations and no prior")
        return prior_fit(prior_step_time_s, prior_log_sd)

    first_start = (
        run_start_iteration
        if run_start_iteration is not None
        else min(o.iteration - o.num_iterations for o in obs)
    )

    def warm(o: StepObservation) -> bool:
        begin = o.iteration - o.num_iterations
        if begin < first_start + warmup_iterations:
            return True
        return any(o.time_s > t and begin < i + warmup_iterations for t, i in restarts)

    steady = [o for o in obs if not warm(o)]
    warmup_only = not steady
    used = obs if warmup_only else steady

    y = np.log(np.array([o.step_time_s for o in used]))
    n = np.array([float(o.num_iterations) for o in used])
    t = np.array([o.time_s for o in used])
    logged = _logged(used)
    sigma, m = _noise(y, n, resolution_s, logged)
    wall_starts: list[int] = []
    logged_starts: list[int] = []
    if not warmup_only:
        wall_starts = phase_starts(y, n, sigma, resolution_s=resolution_s)
        if logged is not None:  # the compute clock sees a change the coarse wall clock blurs
            logged_starts = phase_starts(logged, n, _noise(logged, n)[0])
    pace_sd, batches = (
        (sigma, 0)
        if warmup_only
        else long_run_sd(
            y, n, sigma, resolution_s=resolution_s, changes=sorted({*wall_starts, *logged_starts})
        )
    )
    seen_iterations = float(n.sum())  # all the job's own evidence, every phase
    spread = LEVEL_PRIOR_LOG_SD if warmup_only else level_spread(y, n, pace_sd)
    host = LEVEL_PRIOR_LOG_SD if warmup_only else level_spread(y, n, sigma)
    wall_begin = wall_starts[-1] if wall_starts else 0
    logged_begin = logged_starts[-1] if logged_starts else 0
    begin = max(wall_begin, logged_begin)
    ratio_of_phase = z_of_phase = None
    if begin > 0:  # the current phase's pace over the pace of the stretch before it
        # The stretch before it begins at the newest other change point at least
        # CHANGE_MIN_OBS observations earlier (module docstring, "Two clocks"): one nearer is
        # the same change as the other clock placed it.
        before = max(
            [0, *(b for b in (*wall_starts, *logged_starts) if b <= begin - CHANGE_MIN_OBS)]
        )
        seconds = n * np.exp(y)
        w_after, w_before = float(n[begin:].sum()), float(n[before:begin].sum())
        ratio_of_phase = float(
            (seconds[begin:].sum() / w_after) / (seconds[before:begin].sum() / w_before)
        )
        z_of_phase = math.log(ratio_of_phase) / (
            pace_sd * math.sqrt(1.0 / w_after + 1.0 / w_before)
        )
    span_s = float(np.sum(n[begin:] * np.exp(y[begin:])))
    if logged is not None and resolution_s > 0 and span_s < SHORT_PHASE_RESOLUTIONS * resolution_s:
        # A phase of a few blurred seconds: its compute times, scaled by the wall clock's
        # ratio to them (module docstring, "Two clocks") over the whole run, or since a change
        # that only the wall clock saw (a stall the compute times leave out).
        since = wall_begin if wall_begin > logged_begin else 0
        ratio_n, ratio_y, ratio_l = n[since:], y[since:], logged[since:]
        span_s = float(np.sum(ratio_n * np.exp(ratio_y)))
        ratio = span_s / float(np.sum(ratio_n * np.exp(ratio_l)))
        y = logged + math.log(ratio)
    phase_iteration = None
    if begin > 0:
        phase_iteration = used[begin].iteration - used[begin].num_iterations
        y, n, t = y[begin:], n[begin:], t[begin:]
        used = used[begin:]
        logged = None if logged is None else logged[begin:]
        sigma, m = _noise(y, n, resolution_s, logged)

    decay = np.power(0.5, (t.max() - t) / half_life_s)
    w = n * decay
    ybar = math.log(float(np.sum(w * np.exp(y)) / np.sum(w)))
    var = pace_sd**2 * float(np.sum(w**2 / n)) / float(np.sum(w)) ** 2
    var += resolution_s**2 / 6.0 / span_s**2  # the two blurred ends
    if warmup_only:
        var += WARMUP_LOG_SD**2
    # The band's degrees of freedom are those of its least measured noise. The long-run noise
    # has NOISE_PRIOR_DOF pseudo-batches plus k - 1 batch differences; before there are
    # batches it is assumed (the step-to-step sigma), not measured, and has the prior's
    # alone: counting the observations there made the band's quantile jump wider (t at 10 to
    # t at 7 dof) when the 8th observation brought the first batches.
    dof = NOISE_PRIOR_DOF + max(0, min(m, batches) - 1)

    def done(
        method: EtaMethod, mu: float, v: float, z: float | None, weight: float = 0.0
    ) -> LevelFit:
        return LevelFit(
            method,
            mu,
            v,
            sigma,
            dof,
            len(used),
            ybar,
            z,
            prior_step_time_s,
            phase_iteration,
            spread,
            pace_sd,
            weight,
            ratio_of_phase,
            z_of_phase,
        )

    if prior_step_time_s is None:
        return done(EtaMethod.OBSERVED, ybar, var, None)
    # The prior's variance: the model's and its calibration's, plus how far this job's pace
    # strays between stretches of its run (module docstring, "The prior").
    mu0, var0 = math.log(prior_step_time_s), prior_log_sd**2 + host**2
    z = (ybar - mu0) / math.sqrt(var0 + var)
    if abs(z) > conflict_z:
        return done(EtaMethod.PRIOR_CONFLICT, ybar, var, z)
    # The prior's weight is judged against everything the job has shown (module docstring,
    # "The prior"): n0 / (n0 + W) for W iterations seen and n0 = pace_sd^2 / var0.
    if warmup_only:
        evidence = var
    else:
        evidence = pace_sd**2 / seen_iterations + resolution_s**2 / 6.0 / span_s**2
    weight = evidence / (var0 + evidence)
    mu = weight * mu0 + (1.0 - weight) * ybar
    return done(EtaMethod.BLEND, mu, (1.0 - weight) ** 2 * var + weight**2 * var0, z, weight)


def _logged(used: Sequence[StepObservation]) -> np.ndarray | None:
    """Log compute times the log printed for ``used`` (None unless every one printed one)."""
    values = [o.logged_step_time_s for o in used]
    if not values or any(v is None for v in values):
        return None
    logged: np.ndarray = np.log(np.array(values, dtype=float))
    return logged


def _noise(
    y: np.ndarray, n: np.ndarray, resolution_s: float = 0.0, logged: np.ndarray | None = None
) -> tuple[float, int]:
    """(per-iteration log-sd shrunk toward DEFAULT_LOG_SD, observations it used): the MAD of
    successive differences of the newest ``NOISE_WINDOW`` values (module docstring, "Noise").

    A log printing coarse times (``resolution_s`` > 0) blurs each interval by up to that much:
    its intervals take a few values, and their MAD says nothing (0 when half of them share one);
    the noise then comes from ``logged`` (the log compute times of the same intervals) when
    given, and ``DEFAULT_LOG_SD`` is a floor (the blur itself is modelled apart:
    ``phase_start``)."""
    if resolution_s > 0 and logged is not None:
        # The wall clock's intervals are blurred by the printed resolution (modelled apart);
        # the printed compute times of the same iterations carry the jitter without the blur.
        sigma, m = _noise(logged, n)
        return max(sigma, DEFAULT_LOG_SD), m
    recent = slice(max(0, len(y) - NOISE_WINDOW), len(y))
    yr, nr = y[recent], n[recent]
    m = len(yr)
    if m >= 3:  # successive differences: a phase change moves one of them, not the MAD
        d = np.diff(yr) / np.sqrt(1.0 / nr[1:] + 1.0 / nr[:-1])
        mad = MAD_TO_SD * float(np.median(np.abs(d)))
    else:
        r = (yr - float(np.median(yr))) * np.sqrt(nr)
        mad = MAD_TO_SD * float(np.median(np.abs(r - np.median(r))))
    sigma = math.sqrt(
        (NOISE_PRIOR_DOF * DEFAULT_LOG_SD**2 + (m - 1) * mad**2) / (NOISE_PRIOR_DOF + m - 1)
    )
    if resolution_s > 0:
        sigma = max(sigma, DEFAULT_LOG_SD)
    return sigma, m


def level_spread(y: np.ndarray, n: np.ndarray, sigma: float) -> float:
    """How far the mean pace of a stretch of the run strays from the whole's, beyond noise: the
    log-sd ``tau`` of the means of up to ``LEVEL_BLOCKS`` (8) consecutive blocks of equal
    iterations (one-way random-effects ANOVA: the between-block variance minus the noise's share
    ``sigma^2 / W_block``), shrunk toward ``LEVEL_PRIOR_LOG_SD`` (0.03) with ``LEVEL_PRIOR_DOF``
    (1) pseudo-blocks. Past phase changes count: they say the job changes pace. A steady job
    (a CI run on a dedicated cluster) gets a narrow band, one on a busy machine a wide one."""
    blocks = min(LEVEL_BLOCKS, len(y) // 3)
    if blocks < 2:
        return LEVEL_PRIOR_LOG_SD
    edges = np.linspace(0.0, float(n.sum()), blocks + 1)
    which = np.minimum(np.searchsorted(edges, np.cumsum(n) - n / 2.0, side="right") - 1, blocks - 1)
    weights = np.bincount(which, weights=n, minlength=blocks)
    sums = np.bincount(which, weights=n * y, minlength=blocks)
    keep = weights > 0
    means, weights = sums[keep] / weights[keep], weights[keep]
    k = len(means)
    if k < 2:
        return LEVEL_PRIOR_LOG_SD
    grand = float(np.sum(weights * means) / np.sum(weights))
    between = float(np.sum(weights * (means - grand) ** 2) / np.sum(weights)) * k / (k - 1)
    tau2 = max(0.0, between - sigma**2 / float(np.mean(weights)))
    shrunk = (LEVEL_PRIOR_DOF * LEVEL_PRIOR_LOG_SD**2 + (k - 1) * tau2) / (LEVEL_PRIOR_DOF + k - 1)
    return math.sqrt(shrunk)
