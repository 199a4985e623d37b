"""Online straggler detection over live per-rank step or compute times (pure, incremental).

Each step, every rank's time is compared (in log space) with

* its **peers**: the median of its peer group (ranks with the same work, e.g. the same pipeline
  stage; in a pair each rank is compared with the other: the one-sided CUSUM picks the
  persistently slower one, a pair that trades places accumulates nothing), the
  *relative score* of MegaScale's per-rank heat maps and NVIDIA's straggler detector; and
* its **own history**: a robust baseline (median of its first ``warmup_steps`` steps, then a slow
  exponential average of healthy steps), the *individual score*, which also catches job-wide
  slowdowns that peer comparison misses.

Each score feeds a one-sided CUSUM (Page 1954) with reference ``k = log(1 + min_effect)/2`` and
threshold ``h`` set for one false alarm per ``false_alarm_rank_steps`` rank-steps (Siegmund's
run-length approximation; at least ``threshold_sigmas * sigma`` and ``log(1 + min_effect)``),
where ``sigma`` is the robust spread (1.4826 x MAD) of the scores, tracked as an exponential
average; for a pair, whose two peer scores are +-half their difference (their spread is the
difference itself, which a slow rank would inflate), the step-to-step change of the scores
instead (von Neumann's mean successive difference). Scores are winsorised and increments
capped at ``h/2`` so that one spike (a GC pause, one long sequence) never raises a flag alone: a
shift must persist for at least two steps. A flag
is confirmed only when the mean score since the change point is at least 90% of
``log(1 + min_effect)``, so smaller real shifts (a job that becomes 8% slower everywhere, as ST
does between its sampled windows) raise none. Expected delay for a shift ``d`` above ``k`` is
about ``h / (d - k)`` steps: 2 steps for a 10% slow rank when the spread is below 1%, about 25
when it is 11% (variable-length batches), following the sample-size rule of the research brief
(Falcon's >= 10% confirmation, ATC '25).

``StragglerDetector.update(times_s)`` takes one step's times (NaN = rank missing) and returns the
current flags; ``to_json()`` / ``from_json()`` round-trip the whole state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np

from planner.errors import SpecError
from planner.specs.trace import OP_TYPES, FloatArray, IntArray, OpTrace, OpType, StepTimeSeries
from planner.stragglers.stored import integer, integer_list, number, number_list, text_list
from planner.stragglers.stored import optional_number as _optional_number

_MAD_TO_SIGMA = 1.4826
# normal-theory sigma from a mean absolute deviation about the centre (sqrt(pi/2)) and from a
# mean absolute successive difference of independent draws (sqrt(pi)/2, von Neumann)
_MEAN_ABS_TO_SIGMA = math.sqrt(math.pi / 2.0)
_MEAN_ABS_DIFF_TO_SIGMA = math.sqrt(math.pi) / 2.0
_MIN_GROUP = 3
_MIN_PAIR = 2  # peer scores of a pair: each rank against the other (one-sided CUSUM picks the
# persistently slower one; a pair that trades places accumulates nothing)
_SIGMA_FLOOR = 1e-3
_CONFIRM = 0.9  # a flag needs an estimated shift of 90% of the minimum effect


@dataclass(frozen=True, slots=True, kw_only=True)
class RankFlag:
    """A rank flagged at ``step``: ``kind`` is ``"peer"`` (slower than its peers) or ``"self"``
    (slower than its own history); ``slowdown`` is the estimated time ratio; ``since_step`` is
    the step the CUSUM run started (the change point)."""

    rank: int
    name: str
    kind: str
    slowdown: float
    since_step: int


class DetectorJson(TypedDict):
    """A ``StragglerDetector`` as stored (``to_json``): its parameters, then its learned state
    (NaN and infinities as null; per-rank lists in rank order; ``warmup`` row-major, steps x
    ranks)."""

    version: Literal[1]
    ranks: list[str]
    groups: list[int]
    min_effect_ratio: float
    threshold_sigmas: float
    false_alarm_rank_steps: float
    warmup_steps: int
    ewma_alpha: float
    winsor_sigmas: float
    baseline_margin_sigmas: float
    num_steps: int
    last_step: int
    sigma_peer: float | None
    sigma_self: float | None
    warmup: list[float | None]
    baseline: list[float | None]
    cusum_peer: list[float | None]
    cusum_self: list[float | None]
    run_sum_peer: list[float | None]
    run_sum_self: list[float | None]
    run_len_peer: list[int]
    run_len_self: list[int]
    run_start_peer: list[int]
    run_start_self: list[int]
    last_peer: list[float | None]


class StragglerDetector:
    """Incremental per-rank straggler detector (see the module docstring).

    ``ranks`` names the ranks (their count fixes the input width); ``groups`` gives each rank's
    peer group (default: one group). ``min_effect_ratio`` is the smallest slowdown worth a flag
    (0.10 = 10%), ``threshold_sigmas`` the CUSUM threshold in noise units, ``warmup_steps`` the
    steps used to learn each rank's own baseline, ``ewma_alpha`` the adaptation rate of noise and
    baselines. Raises ``SpecError`` on bad parameters or inputs of the wrong width.
    """

    def __init__(
        self,
        ranks: tuple[str, ...] | list[str],
        *,
        groups: tuple[int, ...] | list[int] | None = None,
        min_effect_ratio: float = 0.10,
        threshold_sigmas: float = 4.0,
        false_alarm_rank_steps: float = 1e5,
        warmup_steps: int = 5,
        ewma_alpha: float = 0.05,
        winsor_sigmas: float = 2.5,
        baseline_margin_sigmas: float = 1.0,
    ) -> None:
        if not ranks:
            raise SpecError("detector.ranks", "needs at least one rank")
        if not 0 < min_effect_ratio < 10:
            raise SpecError("detector.min_effect_ratio", f"must be in (0, 10): {min_effect_ratio}")
        if threshold_sigmas <= 0 or warmup_steps < 1 or not 0 < ewma_alpha <= 1:
            raise SpecError(
                "detector", "threshold_sigmas > 0, warmup_steps >= 1, 0 < ewma_alpha <= 1"
            )
        self.ranks = tuple(str(r) for r in ranks)
        n = len(self.ranks)
        group = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups, np.int64)
        if group.shape != (n,):
            raise SpecError("detector.groups", f"needs one group per rank ({n})")
        self.groups = group
        self.min_effect_ratio = float(min_effect_ratio)
        self.threshold_sigmas = float(threshold_sigmas)
        if not false_alarm_rank_steps > 1:
            raise SpecError("detector.false_alarm_rank_steps", "must be > 1")
        self.false_alarm_rank_steps = float(false_alarm_rank_steps)
        self.warmup_steps = int(warmup_steps)
        self.ewma_alpha = float(ewma_alpha)
        self.winsor_sigmas = float(winsor_sigmas)
        self.baseline_margin_sigmas = float(baseline_margin_sigmas)
        # Learned state (trailing underscore, scikit-learn style).
        self.num_steps_ = 0
        self.sigma_peer_ = math.nan
        self.sigma_self_ = math.nan
        self.warmup_: FloatArray = np.full((self.warmup_steps, n), np.nan)
        self.baseline_: FloatArray = np.full(n, np.nan)
        self.cusum_peer_: FloatArray = np.zeros(n)
        self.cusum_self_: FloatArray = np.zeros(n)
        self.run_sum_peer_: FloatArray = np.zeros(n)
        self.run_sum_self_: FloatArray = np.zeros(n)
        self.run_len_peer_: IntArray = np.zeros(n, dtype=np.int64)
        self.run_len_self_: IntArray = np.zeros(n, dtype=np.int64)
        self.run_start_peer_: IntArray = np.zeros(n, dtype=np.int64)
        self.run_start_self_: IntArray = np.zeros(n, dtype=np.int64)
        self.last_step_ = -1
        self.last_peer_: FloatArray = np.full(n, np.nan)

    @property
    def _k(self) -> float:
        return 0.5 * math.log1p(self.min_effect_ratio)

    def _h(self, sigma: float) -> float:
        """CUSUM threshold: Siegmund's approximation of the in-control run length,
        ARL0 = exp(2k'(h' + 1.166)) / (2k'^2) in noise units, solved for h' at
        ``false_alarm_rank_steps``; never below ``threshold_sigmas`` or the minimum effect."""
        k = max(self._k / sigma, 1e-6)
        h_sigmas = math.log(self.false_alarm_rank_steps * 2 * k * k) / (2 * k) - 1.166
        h_sigmas = max(h_sigmas, self.threshold_sigmas)
        return max(h_sigmas * sigma, math.log1p(self.min_effect_ratio))

    def _peer_scores(self, x: FloatArray) -> FloatArray:
        scores = np.full(x.size, np.nan)
        for g in np.unique(self.groups):
            members = self.groups == g
            values = x[members]
            if np.isfinite(values).sum() >= _MIN_PAIR:
                scores[members] = values - np.nanmedian(values)
        return scores

    def _track_peer(self, peer: FloatArray) -> float:
        """The peer-score noise: the spread across ranks (``_track``) with ``_MIN_GROUP`` or
        more scores; with a pair, whose two scores are +-half their difference, that spread is
        the difference itself (a persistently slow rank would raise the noise it is judged
        against), so the pair's noise is the step-to-step change of its scores instead (von
        Neumann's mean successive difference: ``sigma = sqrt(pi) / 2 * mean |x_t - x_(t-1)|``
        for independent normal scores), which a persistent shift moves only once."""
        last, self.last_peer_ = self.last_peer_, peer.copy()
        if np.isfinite(peer).sum() >= _MIN_GROUP:
            return self._track(peer, self.sigma_peer_, minimum=_MIN_PAIR)
        both = np.isfinite(peer) & np.isfinite(last)
        if not both.any():
            return self._track(peer, self.sigma_peer_, minimum=_MIN_PAIR)
        spread = _MEAN_ABS_DIFF_TO_SIGMA * float(np.mean(np.abs(peer[both] - last[both])))
        return self._smooth(self.sigma_peer_, spread)

    def _smooth(self, sigma: float, spread: float) -> float:
        """The tracked noise after one step whose spread is ``spread``: the exponential average
        (``ewma_alpha``), the spread itself at the first step; never below ``_SIGMA_FLOOR``."""
        if math.isnan(sigma):
            return max(spread, _SIGMA_FLOOR)
        return max((1 - self.ewma_alpha) * sigma + self.ewma_alpha * spread, _SIGMA_FLOOR)

    def _track(self, scores: FloatArray, sigma: float, minimum: int = _MIN_GROUP) -> float:
        finite = scores[np.isfinite(scores)]
        if finite.size < minimum:
            return sigma
        spread = max(_MAD_TO_SIGMA * float(np.median(np.abs(finite - np.median(finite)))), 0.0)
        return self._smooth(sigma, spread)

    def _track_own(self, own: FloatArray) -> float:
        """The own-history noise: the spread across ranks (``_track``) when there are enough of
        them; with fewer (a 2-rank job) the mean absolute deviation of the ranks not in a
        CUSUM run, so the noise learnt in a noisy warm-up (a job's first iterations, a busy
        host) does not freeze the threshold for the rest of the job."""
        finite = np.isfinite(own)
        if finite.sum() >= _MIN_GROUP:
            return self._track(own, self.sigma_self_)
        healthy = finite & (self.cusum_self_ <= 0)
        if not healthy.any() or math.isnan(self.sigma_self_):
            return self.sigma_self_
        spread = _MEAN_ABS_TO_SIGMA * float(np.mean(np.abs(own[healthy])))
        return self._smooth(self.sigma_self_, spread)

    def _cusum(self, kind: str, scores: FloatArray, sigma: float, step: int) -> None:
        cusum = getattr(self, f"cusum_{kind}_")
        run_sum = getattr(self, f"run_sum_{kind}_")
        run_len = getattr(self, f"run_len_{kind}_")
        run_start = getattr(self, f"run_start_{kind}_")
        h = self._h(sigma)
        k = self._k if kind == "peer" else self._k + self.baseline_margin_sigmas * sigma
        ok = np.isfinite(scores)
        clip = max(self.winsor_sigmas * sigma, 2 * math.log1p(self.min_effect_ratio))
        clipped = np.clip(np.where(ok, scores, 0.0), -clip, clip)
        increment = np.minimum(clipped - k, h / 2)
        fresh = ok & (cusum <= 0)
        run_start[fresh] = step
        run_sum[fresh] = 0.0
        run_len[fresh] = 0
        new = np.where(ok, np.maximum(cusum + increment, 0.0), cusum)
        run_sum[ok] += scores[ok]
        run_len[ok] += 1
        cusum[:] = new

    def update(self, times_s: FloatArray | list[float], step: int | None = None) -> list[RankFlag]:
        """Feed one step's per-rank times (seconds, NaN = no report); return current flags.

        ``step`` numbers the step (default: one more than the last). Raises ``SpecError`` on a
        wrong width, negative or infinite times, or a step that does not increase.
        """
        t = np.asarray(times_s, dtype=np.float64)
        if t.shape != (len(self.ranks),):
            raise SpecError("times_s", f"expected {len(self.ranks)} values, got {t.shape}")
        if np.any(np.isinf(t)) or np.any(t[np.isfinite(t)] <= 0):
            raise SpecError("times_s", "times must be positive and finite (NaN when missing)")
        step = self.last_step_ + 1 if step is None else int(step)
        if step <= self.last_step_:
            raise SpecError("step", f"{step} does not follow {self.last_step_}")
        self.last_step_ = step
        x = np.log(t)
        peer = self._peer_scores(x)
        self.sigma_peer_ = self._track_peer(peer)
        if np.isfinite(self.sigma_peer_):
            self._cusum("peer", peer, self.sigma_peer_, step)
        if self.num_steps_ < self.warmup_steps:
            self.warmup_[self.num_steps_] = x
            self.num_steps_ += 1
            if self.num_steps_ == self.warmup_steps:
                self.baseline_ = np.nanmedian(self.warmup_, axis=0)
                deviations = self.warmup_ - self.baseline_
                self.sigma_self_ = self._track(deviations.ravel(), math.nan)
            return self.flags()
        self.num_steps_ += 1
        own = x - self.baseline_
        self.sigma_self_ = self._track_own(own)
        self._cusum("self", own, self.sigma_self_, step)
        healthy = np.isfinite(own) & (self.cusum_self_ <= 0)
        self.baseline_[healthy] += self.ewma_alpha * own[healthy]
        return self.flags()

    def flags(self) -> list[RankFlag]:
        """Ranks whose CUSUM is above its threshold, peer flags first."""
        result = []
        for kind, sigma in (("peer", self.sigma_peer_), ("self", self.sigma_self_)):
            if math.isnan(sigma):
                continue
            cusum = getattr(self, f"cusum_{kind}_")
            run_sum = getattr(self, f"run_sum_{kind}_")
            run_len = getattr(self, f"run_len_{kind}_")
            run_start = getattr(self, f"run_start_{kind}_")
            for r in np.flatnonzero(cusum > self._h(sigma)):
                mean = run_sum[r] / max(int(run_len[r]), 1)
                if mean < _CONFIRM * math.log1p(self.min_effect_ratio):
                    continue  # a real but smaller shift than the minimum effect
                result.append(
                    RankFlag(
                        rank=int(r),
                        name=self.ranks[r],
                        kind=kind,
                        slowdown=float(math.exp(mean)),
                        since_step=int(run_start[r]),
                    )
                )
        return result

    def to_json(self) -> DetectorJson:
        """The whole detector (parameters and state) as a JSON-ready dict."""

        def floats(a: FloatArray) -> list[float | None]:
            return [None if not math.isfinite(v) else float(v) for v in np.ravel(a)]

        def num(v: float) -> float | None:
            return None if math.isnan(v) else v

        return {
            "version": 1,
            "ranks": list(self.ranks),
            "groups": [int(g) for g in self.groups],
            "min_effect_ratio": self.min_effect_ratio,
            "threshold_sigmas": self.threshold_sigmas,
            "false_alarm_rank_steps": self.false_alarm_rank_steps,
            "warmup_steps": self.warmup_steps,
            "ewma_alpha": self.ewma_alpha,
            "winsor_sigmas": self.winsor_sigmas,
            "baseline_margin_sigmas": self.baseline_margin_sigmas,
            "num_steps": self.num_steps_,
            "last_step": self.last_step_,
            "sigma_peer": num(self.sigma_peer_),
            "sigma_self": num(self.sigma_self_),
            "warmup": floats(self.warmup_),
            "baseline": floats(self.baseline_),
            "cusum_peer": floats(self.cusum_peer_),
            "cusum_self": floats(self.cusum_self_),
            "run_sum_peer": floats(self.run_sum_peer_),
            "run_sum_self": floats(self.run_sum_self_),
            "run_len_peer": [int(v) for v in self.run_len_peer_],
            "run_len_self": [int(v) for v in self.run_len_self_],
            "run_start_peer": [int(v) for v in self.run_start_peer_],
            "run_start_self": [int(v) for v in self.run_start_self_],
            "last_peer": floats(self.last_peer_),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> StragglerDetector:
        """Rebuild a detector from ``to_json()``'s dict (a state stored before ``last_peer``
        existed has none yet); ``SpecError`` naming the field on a malformed dict."""
        path = "detector"
        if data.get("version") != 1:
            raise SpecError("detector.version", f"unsupported: {data.get('version')!r}")
        det = cls(
            text_list(data, "ranks", path),
            groups=integer_list(data, "groups", path),
            min_effect_ratio=number(data, "min_effect_ratio", path),
            threshold_sigmas=number(data, "threshold_sigmas", path),
            false_alarm_rank_steps=number(data, "false_alarm_rank_steps", path),
            warmup_steps=integer(data, "warmup_steps", path),
            ewma_alpha=number(data, "ewma_alpha", path),
            winsor_sigmas=number(data, "winsor_sigmas", path),
            baseline_margin_sigmas=number(data, "baseline_margin_sigmas", path),
        )
        n = len(det.ranks)

        def floats(name: str) -> FloatArray:
            values = number_list(data, name, path)
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        def per_rank(name: str, values: FloatArray) -> None:
            if values.shape != (n,):
                raise SpecError(f"detector.{name}", f"needs {n} values")
            setattr(det, f"{name}_", values)

        det.num_steps_ = integer(data, "num_steps", path)
        det.last_step_ = integer(data, "last_step", path)
        sigma_peer = _optional_number(data, "sigma_peer", path)
        sigma_self = _optional_number(data, "sigma_self", path)
        det.sigma_peer_ = math.nan if sigma_peer is None else sigma_peer
        det.sigma_self_ = math.nan if sigma_self is None else sigma_self
        warmup = floats("warmup")
        if warmup.size != det.warmup_steps * n:
            raise SpecError("detector.warmup", f"needs {det.warmup_steps} x {n} values")
        det.warmup_ = warmup.reshape(det.warmup_steps, n)
        for name in ("baseline", "cusum_peer", "cusum_self", "run_sum_peer", "run_sum_self"):
            per_rank(name, floats(name))
        for name in ("run_len_peer", "run_len_self", "run_start_peer", "run_start_self"):
            setattr(det, f"{name}_", np.array(integer_list(data, name, path), dtype=np.int64))
        if "last_peer" in data:  # state stored before the pair noise rule: none yet
            det.last_peer_ = floats("last_peer")
        return det


def compute_time_series(trace: OpTrace) -> tuple[StepTimeSeries, IntArray]:
    """Per-step, per-worker forward+backward compute time of a trace, and each worker's stage.

    Returns the series (columns named ``dp{d}-pp{s}``, one per worker, NaN where a worker has no
    compute op in a step) and the stages (a natural peer grouping for ``StragglerDetector``).
    """
    layout = trace.layout
    codes = [OP_TYPES.index(OpType.FORWARD_COMPUTE), OP_TYPES.index(OpType.BACKWARD_COMPUTE)]
    mask = np.isin(trace.optype, codes)
    steps, step_index = np.unique(trace.step[mask], return_inverse=True)
    workers = layout.num_workers
    cell = step_index * workers + trace.worker[mask]
    sums = np.bincount(cell, weights=trace.duration_s[mask], minlength=steps.size * workers)
    seen = np.bincount(cell, minlength=steps.size * workers) > 0
    grid = np.where(seen, sums, np.nan).reshape(steps.size, workers)
    pp = layout.pipeline_parallel
    names = tuple(f"dp{w // pp}-pp{w % pp}" for w in range(workers))
    stages = np.arange(workers, dtype=np.int64) % pp
    return StepTimeSeries(steps=steps, ranks=names, times_s=grid), stages
