"""Online recalibration: learn each cluster's step-time correction from the jobs it runs; pure.

The performance model predicts a step time ``p`` for a job; the job's log then shows a robust mean
step time ``o`` (the ETA's ``observed_step_time_s``). The model errs by a factor that is largely
shared by the jobs of one cluster, GPU type and framework (the software stack, clocks, network,
data loaders, the efficiency curve of that GPU generation) and partly specific to each job's
configuration. So, per key ``(scheduler, cluster, gpu, framework)``, the planner keeps the log
ratios ``y_i = log(o_i / p_i)`` of the jobs seen there (one vote per job: a job's latest
observation replaces its earlier ones) and predicts the next job's step time as
``p * exp(mu)`` with a log-sd, where ``mu`` is the key's robust mean log ratio.

The statistics (one-way random-effects model, as in the ETA's normal model of
``planner.forecast.eta``):

1. **Model.** ``y_i = mu + b_i + e_i``: ``b_i ~ N(0, tau^2)`` is job ``i``'s configuration-specific
   deviation, ``e_i`` the noise of its mean over ``n_i`` iterations (warm-up included) with
   variance ``s^2 / n_i`` (Gelman et al., *Bayesian Data Analysis*, 3rd ed., 2013, §5.4).
   Its inverse variance is ``(1 / tau^2) * n_i / (n_i + n_half)`` with ``n_half = s^2 / tau^2``:
   a job's weight saturates with its iteration count, reaching half its final weight after
   ``iterations_half_weight`` iterations (default 20). A job counts only once it has run
   ``min_iterations`` (20): before that, its observed mean is mostly warm-up (the ETA uses
   warm-up iterations, the first 10, while there is nothing else), which biases the ratio high
   by the warm-up slowdown (2x in the benchmark: a correction learnt from a job's first 10
   iterations doubled the next job's error).
2. **Forgetting.** Weights halve every ``half_life_s`` (default 14 days) of age, measured back from
   the newest job of the group, so a driver, library or firmware change is followed within weeks
   while a quiet cluster keeps what it learnt. Base weight ``a_i = 0.5^(age_i / half_life_s) *
   n_i / (n_i + n_half)``.
3. **Location.** Start from the weighted median of ``y`` (interpolated between the midpoints of
   the cumulative weights, so two equal jobs give their mean) and refine by a Huber M-estimate
   (Huber 1964), iteratively reweighted: a job further than ``huber_k`` (1.5) standard deviations
   ``tau / sqrt(n_i / (n_i + n_half))`` from the estimate gets weight ``huber_k * sd / |residual|``
   (a misdescribed job, e.g. one that ran on fewer GPUs than the scenario says, hardly moves it).
4. **Spread.** ``tau`` is the weighted MAD of the residuals from the weighted median times 1.4826
   (Rousseeuw & Croux 1993, JASA 88:1273), shrunk toward ``prior_spread_log_sd`` (0.10) as with a
   scaled-inverse-chi^2 prior of ``prior_spread_dof`` (4) pseudo-jobs (BDA3 §3.3):
   ``tau^2 = (nu0 * tau0^2 + (m - 1) * MAD^2) / (nu0 + m - 1)`` with ``m`` the effective number of
   jobs ``(sum a)^2 / sum a^2`` (Kish 1965). One job alone thus says nothing about the spread:
   ``tau = tau0``. ``tau0 = 0.10``: the model's held-out error within one published source is
   4.5-10 % mean APE (``benchmarks/RESULTS.md``, issue 3), i.e. a log-sd of about 0.06-0.13
   (mean |e| = 0.8 sd for a normal e). Where the model's shape scaling is plainly wrong for the
   hardware the spread is larger: the three tiny GPT runs recorded on CPUs but described as
   H100 jobs (``tests/data/logs``) spread by 0.29, and with more jobs ``tau`` learns that
   (``benchmarks/results/recalibration.md``).
5. **Uncertainty.** The standard error of ``mu``: ``se^2 = sum(w_i^2 v_i) / (sum w_i)^2`` with the
   final weights ``w_i`` and ``v_i = tau^2 (n_i + n_half) / n_i``. A new job's log ratio is
   ``mu`` plus its own deviation, so the correction's log-sd is ``sqrt(tau^2 + se^2)``.

Hierarchical fallback. ``correction(key)`` uses the most specific level with at least
``min_jobs`` jobs: the key; else all frameworks on ``(scheduler, cluster, gpu)``, with
``gpu_level_log_sd`` (0.10) added in quadrature (frameworks differ by ten percent or so in step
time on the same hardware); else all GPU types of ``(scheduler, cluster)``, adding
``cluster_level_log_sd`` (0.25: what the cluster shares across GPU generations, its network and
stack, is a weaker guide); else no correction: factor 1 with ``model_log_sd`` (0.3, the service's
``model_prior_log_sd``). Asked for a job that has itself run ``min_iterations`` (20), it returns
the job's own ratio (level ``job``) with log-sd ``sqrt(0.05^2 + 0.10^2 / n)``: the ETA's
level floor and per-iteration noise (``planner.forecast.eta``); for a restart of the same job.

What is corrected. ``apply`` leaves the model's fields as the model computed them (they are the
``planner predict`` contract and what the error metric compares) and adds
``calibrated_iteration_time_s`` (times the factor), ``calibrated_tokens_per_s``,
``calibrated_mfu`` and ``calibrated_time_to_train_s`` (throughput and MFU divided by it, time to
train multiplied by it) and a ``calibration`` object ``{factor, log_sd, level, num_jobs}``: the
ETA's prior is then ``calibrated_iteration_time_s`` with ``prior_log_sd = calibration.log_sd``.

The predicted step time fed to ``observe`` must be the uncorrected model's, or the correction
would correct itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from planner.errors import SpecError
from planner.forecast.eta import DEFAULT_LOG_SD, MAD_TO_SD

FORMAT_VERSION: Final = 1
"""Version of the ``to_json`` document."""
HUBER_ITERATIONS: Final = 8
"""IRLS steps of the Huber estimate, started from the weighted median (a fixed count keeps the
vectorized pass branch-free; each step moves the estimate less, Huber 1981 §7.8)."""
JOB_LEVEL_LOG_SD: Final = 0.05
"""Floor of a job's own correction: how far its later mean may differ (the ETA's level_log_sd)."""
_MIN_WEIGHT: Final = 1e-300

Float = NDArray[np.float64]
Int = NDArray[np.int64]


class CalibrationLevel(StrEnum):
    """Where a correction comes from, from the most to the least specific."""

    JOB = "job"
    """The job's own observed ratio (a restart of a job that has run)."""
    KEY = "key"
    """Jobs on the same scheduler, cluster, GPU type and framework."""
    GPU = "gpu"
    """Jobs on the same scheduler, cluster and GPU type, any framework."""
    CLUSTER = "cluster"
    """Jobs on the same scheduler and cluster, any GPU type and framework."""
    NONE = "none"
    """No job to learn from: the model as it is."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationKey:
    """What a correction is kept per: ``scheduler`` and ``cluster`` (as the service names them),
    ``gpu`` (the catalog key, e.g. ``h100-sxm``) and ``framework`` (e.g. ``megatron``)."""

    scheduler: str
    cluster: str
    gpu: str
    framework: str

    def __post_init__(self) -> None:
        for name in ("scheduler", "cluster", "gpu", "framework"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(name, f"must be a string, got {getattr(self, name)!r}")

    def prefix(self, level: CalibrationLevel) -> tuple[str, ...]:
        """The group this key belongs to at ``level`` (``key``, ``gpu`` or ``cluster``)."""
        if level is CalibrationLevel.KEY:
            return (self.scheduler, self.cluster, self.gpu, self.framework)
        if level is CalibrationLevel.GPU:
            return (self.scheduler, self.cluster, self.gpu)
        if level is CalibrationLevel.CLUSTER:
            return (self.scheduler, self.cluster)
        raise SpecError("level", f"no group at level {level.value!r}; use key, gpu or cluster")


_GROUP_LEVELS: Final = (CalibrationLevel.KEY, CalibrationLevel.GPU, CalibrationLevel.CLUSTER)
_Group = tuple[CalibrationLevel, tuple[str, ...]]


def key_from_scenario(
    scheduler: str, cluster: str, scenario: Mapping[str, Any]
) -> CalibrationKey | None:
    """The key of a job described by a scenario document (``hardware.gpu``,
    ``training.framework``, which defaults to ``megatron`` as in the scenario format); None when
    the document names no GPU (the job cannot be calibrated)."""
    hardware = scenario.get("hardware")
    training = scenario.get("training")
    gpu = hardware.get("gpu") if isinstance(hardware, Mapping) else None
    framework = training.get("framework", "megatron") if isinstance(training, Mapping) else None
    if framework is None:
        framework = "megatron"
    if not isinstance(gpu, str) or not isinstance(framework, str):
        return None
    return CalibrationKey(scheduler=scheduler, cluster=cluster, gpu=gpu, framework=framework)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobObservation:
    """What one job showed: the uncorrected model's step time ``predicted_step_time_s`` (s), its
    robust observed mean step time ``observed_step_time_s`` (s) over ``num_iterations``
    iterations, as of ``time_s`` (epoch s)."""

    key: CalibrationKey
    job_id: str
    predicted_step_time_s: float
    observed_step_time_s: float
    num_iterations: int
    time_s: float

    def __post_init__(self) -> None:
        for name in ("predicted_step_time_s", "observed_step_time_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise SpecError(name, f"must be a finite number > 0 (seconds), got {value!r}")
        if not isinstance(self.num_iterations, int) or self.num_iterations < 1:
            raise SpecError("num_iterations", f"must be an integer >= 1, got {self.num_iterations}")
        if not (isinstance(self.time_s, int | float) and math.isfinite(self.time_s)):
            raise SpecError("time_s", f"must be finite epoch seconds, got {self.time_s!r}")

    @property
    def log_ratio(self) -> float:
        """``log(observed / predicted)``."""
        return math.log(self.observed_step_time_s / self.predicted_step_time_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Correction:
    """Multiply the model's step time by ``factor``; ``log_sd`` is the log-sd of the truth around
    the corrected value; ``num_jobs`` the jobs behind it; ``level`` where it comes from."""

    factor: float
    log_sd: float
    num_jobs: int
    level: CalibrationLevel

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{factor, log_sd, level, num_jobs}``."""
        return {
            "factor": self.factor,
            "log_sd": self.log_sd,
            "level": self.level.value,
            "num_jobs": self.num_jobs,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEstimate:
    """A group's robust mean log ratio ``log_ratio`` with its between-job spread
    ``spread_log_sd`` (tau), standard error ``log_se``, ``num_jobs`` and the newest job's
    ``latest_time_s``."""

    log_ratio: float
    spread_log_sd: float
    log_se: float
    num_jobs: int
    latest_time_s: float

    @property
    def predictive_log_sd(self) -> float:
        """Log-sd of a new job's ratio: ``sqrt(tau^2 + se^2)``."""
        return math.hypot(self.spread_log_sd, self.log_se)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorStats:
    """The uncorrected model's error on the jobs of a group: median over jobs of
    ``|predicted / observed - 1|`` (``median_abs_error_ratio``, None without jobs)."""

    median_abs_error_ratio: float | None
    num_jobs: int


class OnlineCalibration:
    """Per-key step-time corrections learnt from running jobs (see the module docstring).

    Hyper-parameters in ``__init__``; learnt state in ``jobs_`` (latest observation per
    ``(key, job_id)``), ``estimates_`` (per level and group) and ``num_samples_`` (observations
    received, replacements included: ``planner_calibration_samples_total``). Not thread-safe.
    """

    def __init__(
        self,
        *,
        half_life_s: float = 14 * 86400.0,
        iterations_half_weight: float = 20.0,
        prior_spread_log_sd: float = 0.10,
        prior_spread_dof: float = 4.0,
        huber_k: float = 1.5,
        min_jobs: int = 1,
        min_iterations: int = 20,
        gpu_level_log_sd: float = 0.10,
        cluster_level_log_sd: float = 0.25,
        model_log_sd: float = 0.3,
    ) -> None:
        positive = {
            "half_life_s": half_life_s,
            "iterations_half_weight": iterations_half_weight,
            "prior_spread_log_sd": prior_spread_log_sd,
            "prior_spread_dof": prior_spread_dof,
            "huber_k": huber_k,
            "model_log_sd": model_log_sd,
        }
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise SpecError(name, f"must be finite and > 0, got {value}")
        for name, value in (
            ("gpu_level_log_sd", gpu_level_log_sd),
            ("cluster_level_log_sd", cluster_level_log_sd),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise SpecError(name, f"must be finite and >= 0, got {value}")
        for name, count in (("min_jobs", min_jobs), ("min_iterations", min_iterations)):
            if count < 1:
                raise SpecError(name, f"must be >= 1, got {count}")
        self.half_life_s = float(half_life_s)
        self.iterations_half_weight = float(iterations_half_weight)
        self.prior_spread_log_sd = float(prior_spread_log_sd)
        self.prior_spread_dof = float(prior_spread_dof)
        self.huber_k = float(huber_k)
        self.min_jobs = int(min_jobs)
        self.min_iterations = int(min_iterations)
        self.gpu_level_log_sd = float(gpu_level_log_sd)
        self.cluster_level_log_sd = float(cluster_level_log_sd)
        self.model_log_sd = float(model_log_sd)
        self.jobs_: dict[tuple[CalibrationKey, str], JobObservation] = {}
        self.num_samples_ = 0
        self._estimates: dict[_Group, GroupEstimate] = {}
        self._members: dict[_Group, set[tuple[CalibrationKey, str]]] = {}
        self._dirty: set[_Group] = set()

    @property
    def estimates_(self) -> dict[_Group, GroupEstimate]:
        """Every group's estimate, keyed by ``(level, CalibrationKey.prefix(level))`` (groups
        whose jobs all have fewer than ``min_iterations`` iterations have none)."""
        self._refresh()
        return self._estimates

    # -- learning -------------------------------------------------------------------------------

    def observe(
        self,
        key: CalibrationKey,
        job_id: str,
        *,
        predicted_step_s: float,
        observed_step_s: float,
        num_iterations: int,
        time_s: float,
    ) -> None:
        """Record job ``job_id``'s latest observation on ``key`` (replacing its earlier one);
        the estimates of its three groups are recomputed when next asked for. Step times in s,
        ``time_s`` epoch s. Raises ``SpecError`` for invalid values."""
        self.add(
            JobObservation(
                key=key,
                job_id=job_id,
                predicted_step_time_s=predicted_step_s,
                observed_step_time_s=observed_step_s,
                num_iterations=num_iterations,
                time_s=time_s,
            )
        )

    def add(self, observation: JobObservation) -> None:
        """``observe`` with a ready ``JobObservation``."""
        ident = (observation.key, observation.job_id)
        self.jobs_.pop(ident, None)  # re-insert: dict order stays the order of latest updates
        self.jobs_[ident] = observation
        self.num_samples_ += 1
        for level in _GROUP_LEVELS:
            group = (level, observation.key.prefix(level))
            self._members.setdefault(group, set()).add(ident)
            self._dirty.add(group)

    def _refresh(self) -> None:
        """Recompute the groups touched since the last refresh (each from its own jobs)."""
        for group in sorted(self._dirty):
            level, prefix = group
            jobs = [self.jobs_[m] for m in self._members.get(group, ())]
            jobs = [o for o in jobs if o.num_iterations >= self.min_iterations]
            jobs.sort(key=lambda o: (o.time_s, o.job_id))
            self._estimates.pop(group, None)
            if jobs:
                self._estimates[group] = self._estimate(jobs, level)[prefix]
        self._dirty.clear()

    def recalibrate(self, observations: Iterable[JobObservation]) -> None:
        """Rebuild the whole state from stored observations (any order; per ``(key, job_id)``
        the one with the latest ``time_s`` wins, ties: the later in the sequence). Vectorized:
        10,000 observations take well under a second (``benchmarks/recalibration.py``).
        ``num_samples_`` becomes the number of observations given."""
        latest: dict[tuple[CalibrationKey, str], JobObservation] = {}
        count = 0
        for o in observations:
            count += 1
            ident = (o.key, o.job_id)
            prev = latest.get(ident)
            if prev is None or o.time_s >= prev.time_s:
                latest[ident] = o
        jobs = sorted(latest.values(), key=lambda o: (o.time_s, o.job_id))
        self.jobs_ = {(o.key, o.job_id): o for o in jobs}
        self.num_samples_ = count
        self._estimates = {}
        self._members = {}
        self._dirty = set()
        eligible = [o for o in jobs if o.num_iterations >= self.min_iterations]
        for level in _GROUP_LEVELS:
            for prefix, estimate in self._estimate(eligible, level).items():
                self._estimates[(level, prefix)] = estimate
        for ident, o in self.jobs_.items():
            for level in _GROUP_LEVELS:
                self._members.setdefault((level, o.key.prefix(level)), set()).add(ident)

    # -- using ----------------------------------------------------------------------------------

    def estimate(self, level: CalibrationLevel, prefix: tuple[str, ...]) -> GroupEstimate | None:
        """The estimate of one group (``CalibrationKey.prefix(level)``), None without jobs."""
        return self.estimates_.get((level, prefix))

    def correction(self, key: CalibrationKey, job_id: str | None = None) -> Correction:
        """The correction for a job on ``key``: its own ratio when ``job_id`` has run at least
        ``min_iterations`` there, else the most specific group with ``min_jobs`` jobs, else
        none (factor 1, ``model_log_sd``). See the module docstring."""
        if job_id is not None:
            own = self.jobs_.get((key, job_id))
            if own is not None and own.num_iterations >= self.min_iterations:
                return Correction(
                    factor=math.exp(own.log_ratio),
                    log_sd=math.hypot(
                        JOB_LEVEL_LOG_SD, DEFAULT_LOG_SD / math.sqrt(own.num_iterations)
                    ),
                    num_jobs=1,
                    level=CalibrationLevel.JOB,
                )
        inflation = {
            CalibrationLevel.KEY: 0.0,
            CalibrationLevel.GPU: self.gpu_level_log_sd,
            CalibrationLevel.CLUSTER: math.hypot(self.gpu_level_log_sd, self.cluster_level_log_sd),
        }
        for level in _GROUP_LEVELS:
            est = self.estimates_.get((level, key.prefix(level)))
            if est is not None and est.num_jobs >= self.min_jobs:
                return Correction(
                    factor=math.exp(est.log_ratio),
                    log_sd=math.hypot(est.predictive_log_sd, inflation[level]),
                    num_jobs=est.num_jobs,
                    level=level,
                )
        return Correction(
            factor=1.0, log_sd=self.model_log_sd, num_jobs=0, level=CalibrationLevel.NONE
        )

    def apply(
        self, prediction: Mapping[str, Any], key: CalibrationKey, job_id: str | None = None
    ) -> dict[str, Any]:
        """A copy of a ``planner predict`` dict with the correction added (the model's own fields
        untouched): ``calibrated_iteration_time_s``, ``calibrated_tokens_per_s``,
        ``calibrated_mfu``, ``calibrated_time_to_train_s`` (each only when the model's field is a
        number) and ``calibration``. Raises ``SpecError`` without a positive
        ``iteration_time_s``."""
        step = prediction.get("iteration_time_s")
        if not (isinstance(step, int | float) and math.isfinite(step) and step > 0):
            raise SpecError("iteration_time_s", f"must be a number > 0 to calibrate, got {step!r}")
        c = self.correction(key, job_id)
        out = dict(prediction)
        out["calibrated_iteration_time_s"] = step * c.factor
        for name, scale in (
            ("tokens_per_s", 1.0 / c.factor),
            ("mfu", 1.0 / c.factor),
            ("time_to_train_s", c.factor),
        ):
            value = prediction.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"calibrated_{name}"] = value * scale
        out["calibration"] = c.to_dict()
        return out

    def error_stats(
        self, scheduler: str, cluster: str | None = None, key: CalibrationKey | None = None
    ) -> ErrorStats:
        """The uncorrected model's median ``|predicted / observed - 1|`` over the jobs of
        ``key`` if given, else of ``(scheduler, cluster)``, else of ``scheduler``: the gauge
        ``planner_model_error_ratio``."""
        if key is not None:
            jobs = [o for (k, _), o in self.jobs_.items() if k == key]
        else:
            jobs = [
                o
                for (k, _), o in self.jobs_.items()
                if k.scheduler == scheduler and (cluster is None or k.cluster == cluster)
            ]
        if not jobs:
            return ErrorStats(median_abs_error_ratio=None, num_jobs=0)
        errors = np.array([o.predicted_step_time_s / o.observed_step_time_s - 1.0 for o in jobs])
        return ErrorStats(
            median_abs_error_ratio=float(np.median(np.abs(errors))), num_jobs=len(jobs)
        )

    # -- persistence ----------------------------------------------------------------------------

    def params(self) -> dict[str, float | int]:
        """The hyper-parameters, as ``__init__`` takes them."""
        return {
            "half_life_s": self.half_life_s,
            "iterations_half_weight": self.iterations_half_weight,
            "prior_spread_log_sd": self.prior_spread_log_sd,
            "prior_spread_dof": self.prior_spread_dof,
            "huber_k": self.huber_k,
            "min_jobs": self.min_jobs,
            "min_iterations": self.min_iterations,
            "gpu_level_log_sd": self.gpu_level_log_sd,
            "cluster_level_log_sd": self.cluster_level_log_sd,
            "model_log_sd": self.model_log_sd,
        }

    def to_json(self) -> dict[str, Any]:
        """The state as a JSON-ready dict: hyper-parameters, the jobs in update order, the group
        estimates (so that ``from_json`` restores them bit for bit) and the sample counter."""
        return {
            "format_version": FORMAT_VERSION,
            "params": self.params(),
            "num_samples": self.num_samples_,
            "jobs": [
                {
                    "scheduler": o.key.scheduler,
                    "cluster": o.key.cluster,
                    "gpu": o.key.gpu,
                    "framework": o.key.framework,
                    "job_id": o.job_id,
                    "predicted_step_time_s": o.predicted_step_time_s,
                    "observed_step_time_s": o.observed_step_time_s,
                    "num_iterations": o.num_iterations,
                    "time_s": o.time_s,
                }
                for o in self.jobs_.values()
            ],
            "estimates": [
                {
                    "level": level.value,
                    "group": list(prefix),
                    "log_ratio": e.log_ratio,
                    "spread_log_sd": e.spread_log_sd,
                    "log_se": e.log_se,
                    "num_jobs": e.num_jobs,
                    "latest_time_s": e.latest_time_s,
                }
                for (level, prefix), e in sorted(self.estimates_.items(), key=lambda kv: kv[0])
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> OnlineCalibration:
        """Inverse of ``to_json`` (estimates missing from the document are recomputed).
        Raises ``SpecError`` naming the bad field."""
        if doc.get("format_version") != FORMAT_VERSION:
            raise SpecError(
                "format_version",
                f"expected {FORMAT_VERSION}, got {doc.get('format_version')!r}; "
                "rebuild the state with recalibrate() from the stored observations",
            )
        params = doc.get("params")
        jobs = doc.get("jobs")
        if not isinstance(params, Mapping) or not isinstance(jobs, list):
            raise SpecError("jobs", "the document needs a 'params' object and a 'jobs' list")
        try:
            cal = cls(**params)
            observations = [
                JobObservation(
                    key=CalibrationKey(
                        scheduler=j["scheduler"],
                        cluster=j["cluster"],
                        gpu=j["gpu"],
                        framework=j["framework"],
                    ),
                    job_id=j["job_id"],
                    predicted_step_time_s=j["predicted_step_time_s"],
                    observed_step_time_s=j["observed_step_time_s"],
                    num_iterations=j["num_iterations"],
                    time_s=j["time_s"],
                )
                for j in jobs
            ]
            estimates = {
                (CalibrationLevel(e["level"]), tuple(str(g) for g in e["group"])): GroupEstimate(
                    log_ratio=float(e["log_ratio"]),
                    spread_log_sd=float(e["spread_log_sd"]),
                    log_se=float(e["log_se"]),
                    num_jobs=int(e["num_jobs"]),
                    latest_time_s=float(e["latest_time_s"]),
                )
                for e in doc.get("estimates", [])
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError("jobs", f"malformed calibration state: {exc!r}") from exc
        cal.recalibrate(observations)
        cal.jobs_ = {(o.key, o.job_id): o for o in observations}
        if set(estimates) == set(cal.estimates_):
            cal._estimates = estimates
        cal.num_samples_ = int(doc.get("num_samples", len(observations)))
        return cal

    # -- statistics -----------------------------------------------------------------------------

    def _estimate(
        self, jobs: Sequence[JobObservation], level: CalibrationLevel
    ) -> dict[tuple[str, ...], GroupEstimate]:
        """Estimates of every group at ``level`` among ``jobs`` (one vectorized pass)."""
        if not jobs:
            return {}
        index: dict[tuple[str, ...], int] = {}
        group = np.fromiter(
            (index.setdefault(o.key.prefix(level), len(index)) for o in jobs),
            dtype=np.int64,
            count=len(jobs),
        )
        y = np.log(
            np.fromiter((o.observed_step_time_s for o in jobs), np.float64, len(jobs))
            / np.fromiter((o.predicted_step_time_s for o in jobs), np.float64, len(jobs))
        )
        n = np.fromiter((o.num_iterations for o in jobs), np.float64, len(jobs))
        t = np.fromiter((o.time_s for o in jobs), np.float64, len(jobs))
        mu, tau, se, count, latest = group_estimates(
            group,
            y,
            n,
            t,
            num_groups=len(index),
            half_life_s=self.half_life_s,
            iterations_half_weight=self.iterations_half_weight,
            prior_spread_log_sd=self.prior_spread_log_sd,
            prior_spread_dof=self.prior_spread_dof,
            huber_k=self.huber_k,
        )
        return {
            prefix: GroupEstimate(
                log_ratio=float(mu[g]),
                spread_log_sd=float(tau[g]),
                log_se=float(se[g]),
                num_jobs=int(count[g]),
                latest_time_s=float(latest[g]),
            )
            for prefix, g in index.items()
        }


def group_estimates(
    group: Int,
    y: Float,
    n: Float,
    t: Float,
    *,
    num_groups: int,
    half_life_s: float,
    iterations_half_weight: float,
    prior_spread_log_sd: float,
    prior_spread_dof: float,
    huber_k: float,
) -> tuple[Float, Float, Float, Int, Float]:
    """Robust random-effects estimates for many groups at once (module docstring, steps 1-5).

    Inputs, shape ``(J,)`` for ``J`` jobs: ``group`` ids in ``[0, num_groups)`` (every id present),
    log ratios ``y``, iteration counts ``n`` (>= 1), times ``t`` (epoch s). Returns arrays of shape
    ``(num_groups,)``: mean log ratio ``mu``, spread ``tau``, standard error ``se``, job count and
    newest time. Cost O(J log J): two sorts, no Python loop over groups.
    """
    count = np.bincount(group, minlength=num_groups).astype(np.int64)
    latest = np.full(num_groups, -np.inf)
    np.maximum.at(latest, group, t)
    decay = np.power(0.5, (latest[group] - t) / half_life_s)
    saturation = n / (n + iterations_half_weight)
    a = np.maximum(decay * saturation, _MIN_WEIGHT)

    median = _weighted_median(group, y, a, num_groups)
    sum_a = np.bincount(group, weights=a, minlength=num_groups)
    sum_a2 = np.bincount(group, weights=a * a, minlength=num_groups)
    m_eff = sum_a * sum_a / sum_a2
    mad = MAD_TO_SD * _weighted_median(group, np.abs(y - median[group]), a, num_groups)
    dof = np.maximum(m_eff - 1.0, 0.0)
    tau = np.sqrt(
        (prior_spread_dof * prior_spread_log_sd**2 + dof * mad * mad) / (prior_spread_dof + dof)
    )

    sd_job = tau[group] / np.sqrt(saturation)
    mu = median
    w = a
    for _ in range(HUBER_ITERATIONS):
        residual = np.abs(y - mu[group])
        huber = np.minimum(1.0, huber_k * sd_job / np.maximum(residual, 1e-300))
        w = a * huber
        mu = np.bincount(group, weights=w * y, minlength=num_groups) / np.bincount(
            group, weights=w, minlength=num_groups
        )
    sum_w = np.bincount(group, weights=w, minlength=num_groups)
    var_num = np.bincount(group, weights=w * w * sd_job * sd_job, minlength=num_groups)
    se = np.sqrt(var_num) / sum_w
    return mu, tau, se, count, latest


def _weighted_median(group: Int, values: Float, weights: Float, num_groups: int) -> Float:
    """Per-group weighted median, interpolated between the midpoints of the cumulative weights
    (two equal weights give the mean; one value gives itself). ``weights`` > 0."""
    order = np.lexsort((values, group))
    g = group[order]
    v = values[order]
    w = weights[order]
    cum = np.cumsum(w)
    mid = cum - 0.5 * w  # strictly increasing
    starts = np.searchsorted(g, np.arange(num_groups), side="left")
    ends = np.searchsorted(g, np.arange(num_groups), side="right") - 1
    before = cum[starts] - w[starts]
    total = cum[ends] - before
    target = before + 0.5 * total
    j = np.clip(np.searchsorted(mid, target, side="left"), starts, ends)
    prev = np.maximum(j - 1, starts)
    span = mid[j] - mid[prev]
    inside = (j > starts) & (mid[j] >= target) & (span > 0)
    frac = np.where(inside, (target - mid[prev]) / np.where(span > 0, span, 1.0), 1.0)
    result: Float = v[prev] + frac * (v[j] - v[prev])
    return result
