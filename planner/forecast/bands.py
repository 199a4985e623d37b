"""Calibrated ETA bands: the p10-p90 band of the remaining time, corrected by how the planner's
own bands did on finished jobs; pure, kept as JSON.

Conformalized quantile regression (Romano, Patterson & Candès 2019, NeurIPS, "Conformalized
Quantile Regression", asymmetric form): the model gives a band ``[lo, hi]`` of the remaining
time; on a finished job whose real remaining time was ``y`` at each of its ETAs, the scores
``s_lo = log(lo / y)`` and ``s_hi = log(y / hi)`` say how far outside each edge the truth fell
(negative: inside). The calibrated band is ``[lo * exp(-Q_lo), hi * exp(Q_hi)]`` with ``Q`` the
0.9 quantile of the scores: each edge then misses 10 % of the time, as a p10 and a p90 should.

* **By progress.** Early ETAs miss more (phases and pauses still ahead) than late ones, so the
  scores are kept per progress bucket (``BUCKETS``: 0-10, 10-25, 25-50, 50-75, 75-100 %; Mondrian
  conformal prediction, Vovk et al. 2005, *Algorithmic Learning in a Random World*, §4.5), and per
  cluster (the service keeps one calibration per scheduler/cluster).
* **Jobs, not points.** A job's ETAs are strongly correlated, so each finished job weighs the
  same: its scores in a bucket are reduced to at most 9 deciles, each weighted ``1 / count``.
* **The prior.** With no history there is nothing to calibrate from: the model's own band is
  used. It enters the quantile as ``PRIOR_JOBS`` (2) pseudo-jobs with scores 0 (its band edges as
  they are), so one odd finished job cannot swing the band, and the model's band fades as history
  grows. The level is the plain 0.9 quantile: split conformal's finite-sample level
  ``ceil((n + 1) 0.9) / n`` is a lower bound on coverage that, with the few jobs of a cluster,
  over-covers; the target is nominal coverage.
* **Coverage.** Each finished job also records how many of its published (calibrated) bands held
  its real end: the share over the kept jobs (each job weighing the same) is the achieved coverage
  (``planner_eta_band_coverage_ratio``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, TypedDict

import numpy as np

from planner.forecast.stored import items, number, object_of
from planner.forecast.values import Quantiles

BUCKETS: Final = (0.0, 0.10, 0.25, 0.50, 0.75)
"""Lower edges of the progress buckets."""
LEVEL: Final = 0.9
PRIOR_JOBS: Final = 2.0
MAX_JOBS: Final = 200
_DECILES: Final = np.linspace(0.1, 0.9, 9)


def bucket_of(progress: float) -> int:
    """Index of the progress bucket of ``progress`` (0..1)."""
    return max(0, bisect.bisect_right(BUCKETS, min(max(progress, 0.0), 1.0)) - 1)


def bucket_label(index: int) -> str:
    """``"10-25%"`` for bucket 1, ..."""
    low = BUCKETS[index]
    high = BUCKETS[index + 1] if index + 1 < len(BUCKETS) else 1.0
    return f"{round(100 * low)}-{round(100 * high)}%"


@dataclass(frozen=True, slots=True, kw_only=True)
class BandPoint:
    """One ETA of a finished job: its ``progress`` (0..1), the model's band of the remaining
    time ``raw`` (s), the published band ``published`` (s, after calibration; None: as raw) and
    the real remaining time ``actual_s`` from when it was made."""

    progress: float
    raw: Quantiles
    actual_s: float
    published: Quantiles | None = None


@dataclass(slots=True, kw_only=True)
class JobScores:
    """One finished job's scores: per bucket, ``[s_lo, s_hi]`` pairs (at most 9 each, the
    deciles of its points); ``covered`` of ``total`` published bands held its end."""

    job: str
    ended_s: float
    scores: dict[int, list[list[float]]] = field(default_factory=dict)
    covered: int = 0
    total: int = 0


def _compress(values: list[float]) -> list[float]:
    if len(values) <= len(_DECILES):
        return values
    return [float(v) for v in np.quantile(np.array(values), _DECILES)]


@dataclass(frozen=True, slots=True)
class BandOffsets:
    """The offsets of each progress bucket, ``{bucket: (Q_lo, Q_hi, jobs)}``, as
    :meth:`BandCalibration.table` computes them (what an ETA needs, cheap to store)."""

    by_bucket: dict[int, tuple[float, float, int]]

    @property
    def num_jobs(self) -> int:
        """Most finished jobs behind any bucket (0: the model's band as it is)."""
        return max((n for _, _, n in self.by_bucket.values()), default=0)

    def adjust(self, progress: float, remaining: Quantiles) -> Quantiles:
        """The calibrated band of a remaining time (its p50 unchanged)."""
        q_lo, q_hi, _ = self.by_bucket.get(bucket_of(progress), (0.0, 0.0, 0))
        low = min(remaining.p50, remaining.p10 * math.exp(-q_lo))
        high = max(remaining.p50, remaining.p90 * math.exp(q_hi))
        return Quantiles(p10=low, p50=remaining.p50, p90=high)

    def to_json(self) -> dict[str, list[float]]:
        """``{"0": [Q_lo, Q_hi, jobs], ...}``."""
        return {str(b): [lo, hi, float(n)] for b, (lo, hi, n) in self.by_bucket.items()}

    @classmethod
    def from_json(cls, doc: object) -> BandOffsets:
        """The offsets of a :meth:`to_json` dict (none, i.e. the model's band, when it does not
        read, e.g. None)."""
        try:
            offsets = {b: items(v) for b, v in object_of(doc).items()}
            return cls(
                {
                    int(b): (number(v[0]), number(v[1]), int(number(v[2])))
                    for b, v in offsets.items()
                }
            )
        except (TypeError, ValueError, IndexError):
            return cls({})


@dataclass(slots=True)
class BandCalibration:
    """The band calibration of one cluster (module docstring): the scores of its finished jobs,
    newest ``MAX_JOBS`` kept."""

    jobs: list[JobScores] = field(default_factory=list)

    def add_job(self, job: str, ended_s: float, points: Sequence[BandPoint]) -> None:
        """Score a finished job's ETAs (replacing an earlier entry of the same job)."""
        per_bucket: dict[int, tuple[list[float], list[float]]] = {}
        covered = total = 0
        for point in points:
            if not (point.actual_s > 0 and point.raw.p10 > 0 and point.raw.p90 > 0):
                continue
            lo, hi = per_bucket.setdefault(bucket_of(point.progress), ([], []))
            lo.append(math.log(point.raw.p10 / point.actual_s))
            hi.append(math.log(point.actual_s / point.raw.p90))
            shown = point.published or point.raw
            total += 1
            covered += shown.p10 <= point.actual_s <= shown.p90
        if total == 0:
            return
        scores = {
            b: [_compress(sorted(lo)), _compress(sorted(hi))] for b, (lo, hi) in per_bucket.items()
        }
        self.jobs = [j for j in self.jobs if j.job != job]
        self.jobs.append(
            JobScores(job=job, ended_s=ended_s, scores=scores, covered=covered, total=total)
        )
        self.jobs.sort(key=lambda j: j.ended_s)
        del self.jobs[:-MAX_JOBS]

    def offsets(self, bucket: int) -> tuple[float, float, int]:
        """``(Q_lo, Q_hi, jobs)`` of a bucket: log offsets of the lower and upper edges and the
        number of finished jobs behind them (0: the prior alone, offsets 0)."""
        values_lo: list[float] = [0.0]
        values_hi: list[float] = [0.0]
        weights: list[float] = [PRIOR_JOBS]
        jobs = 0
        for job in self.jobs:
            pair = job.scores.get(bucket)
            if not pair or not pair[0]:
                continue
            jobs += 1
            lo, hi = pair
            values_lo += lo
            values_hi += hi
            weights += [1.0 / len(lo)] * len(lo)
        if jobs == 0:
            return 0.0, 0.0, 0
        w = np.array(weights)
        return _weighted_quantile(values_lo, w), _weighted_quantile(values_hi, w), jobs

    def table(self) -> BandOffsets:
        """The offsets of every bucket."""
        return BandOffsets({b: self.offsets(b) for b in range(len(BUCKETS))})

    def coverage(self) -> float | None:
        """Share of published bands that held the real end, each job weighing the same (None:
        no finished job)."""
        shares = [j.covered / j.total for j in self.jobs if j.total > 0]
        return float(np.mean(shares)) if shares else None

    def summary(self) -> list[BandBucketJson]:
        """Per bucket: its label, offsets and number of jobs (for ``/v1/calibrations``)."""
        out: list[BandBucketJson] = []
        for index, (q_lo, q_hi, jobs) in sorted(self.table().by_bucket.items()):
            out.append(
                {
                    "progress": bucket_label(index),
                    "lower_log_offset": q_lo,
                    "upper_log_offset": q_hi,
                    "num_jobs": jobs,
                }
            )
        return out

    def to_json(self) -> BandCalibrationJson:
        """A JSON-safe dict (:meth:`from_json` reads it back)."""
        return {
            "jobs": [
                {
                    "job": j.job,
                    "ended_s": j.ended_s,
                    "scores": {str(b): v for b, v in j.scores.items()},
                    "covered": j.covered,
                    "total": j.total,
                }
                for j in self.jobs
            ]
        }

    @classmethod
    def from_json(cls, doc: object) -> BandCalibration:
        """The calibration a :meth:`to_json` dict holds (an empty one when it does not read,
        e.g. None)."""
        out = cls()
        try:
            for item in items(object_of(doc).get("jobs", [])):
                j = object_of(item)
                out.jobs.append(
                    JobScores(
                        job=str(j["job"]),
                        ended_s=number(j["ended_s"]),
                        scores={
                            int(b): [
                                [number(x) for x in items(items(pair)[0])],
                                [number(x) for x in items(items(pair)[1])],
                            ]
                            for b, pair in object_of(j["scores"]).items()
                        },
                        covered=int(number(j["covered"])),
                        total=int(number(j["total"])),
                    )
                )
        except (KeyError, TypeError, ValueError, IndexError):
            return cls()
        return out


class BandBucketJson(TypedDict):
    """One progress bucket of a band calibration (``/v1/calibrations``): its ``progress``
    range (``"0-10%"``, ...), the log offsets of the lower and upper edges and the finished
    jobs behind them."""

    progress: str
    lower_log_offset: float
    upper_log_offset: float
    num_jobs: int


class JobScoresJson(TypedDict):
    """One finished job's scores as stored (:class:`JobScores`; bucket indices as text)."""

    job: str
    ended_s: float
    scores: dict[str, list[list[float]]]
    covered: int
    total: int


class BandCalibrationJson(TypedDict):
    """A band calibration as stored: its finished jobs' scores, oldest end first."""

    jobs: list[JobScoresJson]


def _weighted_quantile(values: list[float], weights: np.ndarray) -> float:
    """The ``LEVEL`` quantile of ``values`` under ``weights`` (lowest value whose cumulative
    weight reaches it)."""
    v = np.array(values)
    order = np.argsort(v)
    cum = np.cumsum(weights[order])
    index = int(np.searchsorted(cum, LEVEL * cum[-1]))
    return float(v[order][min(index, len(v) - 1)])
