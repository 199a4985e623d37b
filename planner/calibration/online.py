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
   4.5-10 % mean APE (``benchmarks/RESULTS.md``), i.e. a log-sd of about 0.06-0.13
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

Compute and network apart. A job whose ranks report their forward/backward
time (``rank_step`` lines or Prometheus step metrics) also tells how its step splits into
compute and exposed communication; ``observe_split`` turns that into a compute factor and a
network factor (``planner.calibration.online_split``), each learnt per key by its own
``RatioGroups`` with the statistics above, the model's compute (or network) terms as the
"predicted" and the factor times them as the "observed" time. ``apply`` then multiplies the
compute terms of a new prediction's ``breakdown_s`` by the compute factor and its network terms
by the network factor (``method: components``), when both are learnt at least as specifically
as the whole-step factor; a component learnt less specifically keeps the whole-step factor.
The corrected step's log-sd is the two log-sds weighted by their shares of it, added as errors
that move together: both factors are learnt from the same jobs' observed steps (one job's step
split by its window share), so they share those jobs' deviations and observation noise; adding
them in quadrature, as if independent, made one job's compute-and-network correction surer of
the step (log-sd 0.119 in the recorded queue of ``benchmarks/review_replay.py``) than the
whole-step correction learnt from that same job (0.156).
Without a breakdown or component estimates, the whole-step factor applies (``method: step``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final, NotRequired, TypedDict

import numpy as np

from planner.calibration.online_groups import (
    JOB_LEVEL_LOG_SD,
    GroupEstimateJson,
    Hyper,
    JobObservationJson,
    RatioGroups,
)
from planner.calibration.online_split import (
    ModelSplit,
    ObservedSplit,
    split_observed_step,
)
from planner.calibration.online_stats import group_estimates
from planner.calibration.online_types import (
    GROUP_LEVELS,
    CalibrationKey,
    CalibrationLevel,
    Component,
    Correction,
    CorrectionJson,
    ErrorStats,
    GroupEstimate,
    JobObservation,
    key_from_scenario,
)
from planner.errors import SpecError

__all__ = [
    "FORMAT_VERSION",
    "GROUP_LEVELS",
    "JOB_LEVEL_LOG_SD",
    "CalibrationInfoJson",
    "CalibrationKey",
    "CalibrationLevel",
    "Component",
    "ComponentStateJson",
    "Correction",
    "ErrorStats",
    "GroupEstimate",
    "JobObservation",
    "OnlineCalibration",
    "OnlineCalibrationJson",
    "group_estimates",
    "key_from_scenario",
]

FORMAT_VERSION: Final = 2
"""Version of the ``to_json`` document (2 adds ``components``; version 1 documents load)."""


class CalibrationInfoJson(TypedDict):
    """The ``calibration`` object ``OnlineCalibration.apply`` adds to a prediction: the
    whole-step ``factor`` and ``log_sd``, the ``level`` and ``num_jobs`` behind it, the
    ``method`` (``"step"``: one factor; ``"components"``: compute and network apart, each
    part's ``CorrectionJson`` then in ``components`` under ``compute``, ``network``,
    ``step``)."""

    factor: float
    log_sd: float
    level: str
    num_jobs: int
    method: str
    components: NotRequired[dict[str, CorrectionJson]]


class ComponentStateJson(TypedDict):
    """One component's state in ``OnlineCalibration.to_json``: its jobs and estimates."""

    jobs: list[JobObservationJson]
    estimates: list[GroupEstimateJson]


class OnlineCalibrationJson(TypedDict):
    """``OnlineCalibration.to_json``: ``format_version`` (``FORMAT_VERSION``), the
    hyper-parameters (``params``), the sample counter, the whole step's jobs and estimates and
    each component's state by ``Component`` value."""

    format_version: int
    params: dict[str, float | int]
    num_samples: int
    jobs: list[JobObservationJson]
    estimates: list[GroupEstimateJson]
    components: dict[str, ComponentStateJson]


_SPECIFICITY: Final = {
    CalibrationLevel.JOB: 4,
    CalibrationLevel.KEY: 3,
    CalibrationLevel.GPU: 2,
    CalibrationLevel.CLUSTER: 1,
    CalibrationLevel.NONE: 0,
}
_PARTS: Final = (Component.COMPUTE, Component.NETWORK)


class OnlineCalibration:
    """Per-key step-time corrections learnt from running jobs (see the module docstring).

    Hyper-parameters in ``__init__``; learnt state in ``jobs_`` (latest whole-step observation
    per ``(key, job_id)``), ``estimates_`` (per level and group), ``components_`` (the compute
    and network ``RatioGroups``) and ``num_samples_`` (observations received, replacements
    included: ``planner_calibration_samples_total``). Not thread-safe.
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
        hyper = Hyper(
            half_life_s=self.half_life_s,
            iterations_half_weight=self.iterations_half_weight,
            prior_spread_log_sd=self.prior_spread_log_sd,
            prior_spread_dof=self.prior_spread_dof,
            huber_k=self.huber_k,
            min_jobs=self.min_jobs,
            min_iterations=self.min_iterations,
            gpu_level_log_sd=self.gpu_level_log_sd,
            cluster_level_log_sd=self.cluster_level_log_sd,
            model_log_sd=self.model_log_sd,
        )
        self._step = RatioGroups(hyper)
        self.components_: dict[Component, RatioGroups] = {c: RatioGroups(hyper) for c in _PARTS}
        self.num_samples_ = 0

    @property
    def jobs_(self) -> dict[tuple[CalibrationKey, str], JobObservation]:
        """Latest whole-step observation per ``(key, job_id)``, in the order of updates."""
        return self._step.jobs

    @property
    def estimates_(self) -> dict[tuple[CalibrationLevel, tuple[str, ...]], GroupEstimate]:
        """Every group's whole-step estimate, keyed by ``(level, CalibrationKey.prefix(level))``
        (groups whose jobs all have fewer than ``min_iterations`` iterations have none)."""
        return self._step.estimates

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
        self._step.add(observation)
        self.num_samples_ += 1

    def observe_split(
        self,
        key: CalibrationKey,
        job_id: str,
        *,
        breakdown: Mapping[str, Any],
        observed_step_s: float,
        window_share: float,
        num_iterations: int,
        time_s: float,
    ) -> ObservedSplit:
        """Record the compute and network factors of job ``job_id`` (module docstring): its
        model ``breakdown`` (``breakdown_s`` of ``planner predict``, seconds), its observed
        step ``observed_step_s`` (s) and the share of it spent in the forward/backward window
        (``online_split.window_share``). Returns the factors found (None where the timings do
        not determine one; nothing is recorded for it). Raises ``SpecError`` for invalid
        values."""
        model = ModelSplit.from_breakdown(breakdown)
        if model is None:
            return ObservedSplit(compute_factor=None, network_factor=None)
        split = split_observed_step(model, observed_step_s, window_share)
        for component, factor, predicted in (
            (Component.COMPUTE, split.compute_factor, model.compute_s),
            (Component.NETWORK, split.network_factor, model.network_s),
        ):
            if factor is None or predicted <= 0:
                continue
            self.components_[component].add(
                JobObservation(
                    key=key,
                    job_id=job_id,
                    predicted_step_time_s=predicted,
                    observed_step_time_s=factor * predicted,
                    num_iterations=num_iterations,
                    time_s=time_s,
                )
            )
        return split

    def recalibrate(
        self,
        observations: Iterable[JobObservation],
        components: Mapping[Component, Iterable[JobObservation]] | None = None,
    ) -> None:
        """Rebuild the whole state from stored observations (any order; per ``(key, job_id)``
        the one with the latest ``time_s`` wins, ties: the later in the sequence), and the
        component states from ``components`` (left empty when not given). Vectorized:
        10,000 observations take well under a second (``benchmarks/recalibration.py``).
        ``num_samples_`` becomes the number of whole-step observations given."""
        self.num_samples_ = self._step.rebuild(observations)
        for component in _PARTS:
            self.components_[component].rebuild((components or {}).get(component, ()))

    # -- using ----------------------------------------------------------------------------------

    def estimate(self, level: CalibrationLevel, prefix: tuple[str, ...]) -> GroupEstimate | None:
        """The whole-step estimate of one group (``CalibrationKey.prefix(level)``), None without
        jobs."""
        return self.estimates_.get((level, prefix))

    def correction(self, key: CalibrationKey, job_id: str | None = None) -> Correction:
        """The whole-step correction for a job on ``key``: its own ratio when ``job_id`` has run
        at least ``min_iterations`` there, else the most specific group with ``min_jobs`` jobs,
        else none (factor 1, ``model_log_sd``). See the module docstring."""
        return self._step.correction(key, job_id)

    def component_correction(
        self, component: Component, key: CalibrationKey, job_id: str | None = None
    ) -> Correction:
        """The correction of one ``component`` (``step``, ``compute`` or ``network``), found as
        ``correction`` finds the whole step's."""
        if component is Component.STEP:
            return self._step.correction(key, job_id)
        return self.components_[component].correction(key, job_id)

    def apply(
        self, prediction: Mapping[str, object], key: CalibrationKey, job_id: str | None = None
    ) -> dict[str, object]:
        """A copy of a ``planner predict`` dict with the correction added (the model's own fields
        untouched): ``calibrated_iteration_time_s``, ``calibrated_tokens_per_s``,
        ``calibrated_mfu``, ``calibrated_time_to_train_s`` (each only when the model's field is a
        number) and ``calibration`` (``{factor, log_sd, level, num_jobs, method}``, with
        ``components`` when the compute and network factors were applied apart). Raises
        ``SpecError`` without a positive ``iteration_time_s``."""
        step = prediction.get("iteration_time_s")
        if not (isinstance(step, int | float) and math.isfinite(step) and step > 0):
            raise SpecError("iteration_time_s", f"must be a number > 0 to calibrate, got {step!r}")
        whole = self.correction(key, job_id)
        breakdown = prediction.get("breakdown_s")
        model = ModelSplit.from_breakdown(breakdown) if isinstance(breakdown, Mapping) else None
        info: CalibrationInfoJson = {
            "factor": whole.factor,
            "log_sd": whole.log_sd,
            "level": whole.level.value,
            "num_jobs": whole.num_jobs,
            "method": "step",
        }
        factor = whole.factor
        if model is not None:
            parts = {c: self.components_[c].correction(key, job_id) for c in _PARTS}
            used = {
                c: p if _SPECIFICITY[p.level] >= _SPECIFICITY[whole.level] else whole
                for c, p in parts.items()
            }
            if any(used[c] is not whole for c in _PARTS):
                factor, info = _combined(model, used, whole)
        out = dict(prediction)
        out["calibrated_iteration_time_s"] = step * factor
        for name, scale in (
            ("tokens_per_s", 1.0 / factor),
            ("mfu", 1.0 / factor),
            ("time_to_train_s", factor),
        ):
            value = prediction.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"calibrated_{name}"] = value * scale
        out["calibration"] = info
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

    def to_json(self) -> OnlineCalibrationJson:
        """The state as a JSON-ready dict: hyper-parameters, the jobs in update order, the group
        estimates (so that ``from_json`` restores them bit for bit), the sample counter and the
        compute and network components (their jobs and estimates)."""
        return {
            "format_version": FORMAT_VERSION,
            "params": self.params(),
            "num_samples": self.num_samples_,
            "jobs": self._step.jobs_json(),
            "estimates": self._step.estimates_json(),
            "components": {
                c.value: {"jobs": g.jobs_json(), "estimates": g.estimates_json()}
                for c, g in self.components_.items()
            },
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> OnlineCalibration:
        """Inverse of ``to_json`` (estimates missing from the document are recomputed); also
        reads version-1 documents (no components). Raises ``SpecError`` naming the bad
        field."""
        version = doc.get("format_version")
        if version not in (1, FORMAT_VERSION):
            raise SpecError(
                "format_version",
                f"expected {FORMAT_VERSION} (or 1), got {version!r}; "
                "rebuild the state with recalibrate() from the stored observations",
            )
        params = doc.get("params")
        jobs = doc.get("jobs")
        components = doc.get("components", {})
        if not isinstance(params, Mapping) or not isinstance(jobs, list):
            raise SpecError("jobs", "the document needs a 'params' object and a 'jobs' list")
        if not isinstance(components, Mapping):
            raise SpecError("components", "must be an object of component states")
        try:
            cal = cls(**params)
        except TypeError as exc:
            raise SpecError("jobs", f"malformed calibration state: {exc!r}") from exc
        cal._step.load_json(jobs, doc.get("estimates", []))
        for component in _PARTS:
            part = components.get(component.value) or {}
            if not isinstance(part, Mapping):
                raise SpecError(f"components.{component.value}", "must be an object")
            cal.components_[component].load_json(part.get("jobs", []), part.get("estimates", []))
        cal.num_samples_ = int(doc.get("num_samples", len(jobs)))
        return cal


def _combined(
    model: ModelSplit, used: Mapping[Component, Correction], whole: Correction
) -> tuple[float, CalibrationInfoJson]:
    """The whole-step factor and ``calibration`` object of a prediction whose compute and
    network terms are corrected apart (``apply``): the log-sds weighted by each part's share of
    the corrected step and added as errors that move together (module docstring); level and job
    count of the less specific part."""
    compute, network = used[Component.COMPUTE], used[Component.NETWORK]
    corrected_c = compute.factor * model.compute_s
    corrected_n = network.factor * model.network_s
    total = corrected_c + corrected_n
    factor = total / (model.compute_s + model.network_s)
    log_sd = (corrected_c * compute.log_sd + corrected_n * network.log_sd) / total
    least = min(used.values(), key=lambda c: _SPECIFICITY[c.level])
    info: CalibrationInfoJson = {
        "factor": factor,
        "log_sd": log_sd,
        "level": least.level.value,
        "num_jobs": least.num_jobs,
        "method": "components",
        "components": {
            Component.COMPUTE.value: compute.to_dict(),
            Component.NETWORK.value: network.to_dict(),
            Component.STEP.value: whole.to_dict(),
        },
    }
    return factor, info
