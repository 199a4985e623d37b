"""The service learns from every job it sees finish: finished jobs become observed runs, each
cluster's observed-runs calibration is fitted again from them, and predictions use it.

Recording (``record_finished_run``, called by the ingest loop when a job ends): a job with a
description (its scenario document) becomes one row of ``observed_runs`` with its measured step
time (the ETA's ``observed_step_time_s``: the robust mean of the wall-clock step times its log
showed, the same number the online calibration learns from), the iterations behind it and the
most framebuffer memory one of its GPUs used when DCGM reported it. A run that cannot be
learnt from is kept with its reason and never fitted: no step time, a step time that is zero,
negative or not a number, fewer than ``min_iterations`` iterations (the mean is then mostly
warm-up), a scenario the parser refuses (a GPU the catalog does not know), a step that cannot
be the scenario's (longer than the job ran, or its model FLOPs beyond the GPUs' peak: a
description too large for the job, one run of which would otherwise move its key by orders of
magnitude). The reason names every field that stops it.

Fitting (``Learner.run``, on its own schedule, off the ingest cycle): a cluster whose newest
run changed since its last fit is fitted again from its newest ``max_runs`` usable runs by
``planner.calibration.observed.observe_runs`` (the function of ``planner calibrate observe``;
the runs' ``cluster`` is the cluster's name, so the key level is per cluster, GPU, recipe,
framework and model family); its held-out error (5-fold cross-validation, ``cross_validated_
errors``) is computed when the fit left room for five more in ``fit_cpu_budget_s`` CPU
seconds. The result goes to the ``calibrations`` table as ``observed/<scheduler>/<cluster>``
(the runs themselves stay in their own table: the stored calibration is its factors only).

Using it (``calibrate_prediction``; ``LearntCalibrations`` for ``POST /v1/predict``): a
cluster's learnt calibration is applied (corrects a prediction nothing else corrects: every
``POST /v1/predict``, a job's key the online calibration never saw) when its held-out error
is no worse than the uncorrected model's, or there are too few runs to tell (one run moves
its key only as far as the prior lets it). A job's prediction the online calibration
corrected keeps that correction unless the learnt one (a) has a held-out error no worse than
the online calibration's on the same folds (the online one, learnt from the other folds'
runs; a run it has no correction for counts with the model's error) and (b) is at least as
specific (``SPECIFICITY``: both learn from the same cluster's jobs, so one of them is used,
never both; on a tie the learnt one, which keeps compute and network apart and corrects each
configuration by its residual model). Two comparisons for two choices: a fit that beats the
model but not the online calibration (three runs of CPUs described as H100s, 180-700 times
slower: ``tests/service/test_learning_store.py``) still corrects the API's predictions,
which would otherwise be the model's. Without folds (fewer than 2 runs, or a fit that left no
CPU time for them) nothing shows the learnt one is the better of the two, and the online
one, which learnt from the same run's many steps, is not shrunk toward the prior as a key seen
once is: after one HF Trainer run 3.0 times slower than the model the online correction was
3.000x and the learnt one 2.957x (``tests/service/test_learning_launches.py``; a Megatron run
2.947 times slower: 2.947x and 2.906x, ``test_learning_calibration_choice.py``). The online
correction then stays; a prediction the online calibration leaves uncorrected (a key it never
saw, and every ``POST /v1/predict``) takes the learnt one. From 2 runs the comparison is
held out (with fewer runs than ``FOLDS`` each fold is one run: leave-one-out). A new fit
reaches the active jobs' predictions in the next ingest cycles
(``loops.calibration.reapply_learnt``).

On by default (``learning.apply``): the online calibration, on by default too, already
corrects predictions from the same cluster's jobs; the learnt one takes its place, or
corrects what it leaves uncorrected, only where its held-out error on the cluster's own
finished runs says it does no harm.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypedDict

from planner.calibration.observed import (
    FORMAT as OBSERVED_FORMAT,
)
from planner.calibration.observed import (
    ObservedCalibration,
    ObservedRun,
    cross_validated_errors,
    observe_runs,
    outlier_reason,
)
from planner.calibration.observed_runs import beyond_peak, run_document, run_of
from planner.errors import PlannerError, SpecError
from planner.scenario.parse import parse_scenario
from planner.service import stored_json
from planner.service.models import CalibrationRow, JobRow, ObservedRunCount, ObservedRunRow
from planner.service.store import Store, UnitOfWork
from planner.specs.scenario import Scenario

log = logging.getLogger(__name__)

PREFIX: Final = "observed/"
"""Names of the learnt calibrations in the ``calibrations`` table start with this."""
NAME_CHARS: Final = 64
"""The length of the ``calibrations`` table's name column."""
SKIPPED_SHOWN: Final = 20
"""Skipped runs whose reasons a learnt calibration lists (the newest)."""
FOLDS: Final = 5
REASON_CHARS: Final = 300
"""Characters a skipped run's reason keeps of each field's message (``run_row``)."""
REAPPLY_MAX_JOBS: Final = 1000
"""Active jobs whose predictions one ingest cycle corrects again after a new fit."""
SPECIFICITY: Final = {
    "job": 4,
    "release": 3,
    "key": 3,
    "gpu_recipe": 2,
    "gpu": 2,
    "architecture_bits": 1,
    "architecture": 1,
    "family": 1,
    "global": 1,
    "cluster": 1,
    "none": 0,
}
"""How specific a correction's ``calibration.level`` is, for the online calibration's levels
(``job``, ``key``: cluster, GPU and framework; ``gpu``; ``cluster``) and the learnt one's
(``release``: the runs of one framework release on a key, as specific as a key for this
choice; ``key``: cluster, GPU, recipe, framework and family; ``gpu_recipe``; the levels above
it, which are the whole cluster's runs of a family or architecture). Every level of the
learnt calibration's tree (``planner.calibration.observed_runs.LEVELS``) is here: one missing
counted as no correction, so a job stating its release kept the online correction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LearningConfig:
    """The knobs of learning (``planner.service.settings.LearningSettings``)."""

    enabled: bool = True
    apply: bool = True
    interval_s: float = 60.0
    max_runs: int = 2000
    keep_runs: int = 10_000
    fit_cpu_budget_s: float = 10.0
    min_iterations: int = 20


def calibration_name(scheduler: str, cluster: str) -> str:
    """The ``calibrations`` row of a cluster's learnt calibration: ``observed/<scheduler>/
    <cluster>``, or its SHA-256 prefix where that is longer than the column."""
    name = f"{PREFIX}{scheduler}/{cluster}"
    if len(name) <= NAME_CHARS:
        return name
    return PREFIX + "#" + hashlib.sha256(name.encode()).hexdigest()[:32]


# -- recording ------------------------------------------------------------------------------


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def run_row(row: JobRow, *, min_iterations: int, now_s: float) -> ObservedRunRow | None:
    """The observed run of a finished job, with ``skip_reason`` when it cannot be learnt
    from (module docstring): every field that stops it, each as ``<field>: <why>`` cut to
    ``REASON_CHARS``, joined by ``"; "``; None for a job without a description or one that
    never started (no start time nor progress: a queued job cancelled; nothing to learn)."""
    if not isinstance(row.scenario, dict):
        return None
    started = stored_json.number(stored_json.fields(row.state).get("start_time_s"))
    if started is None and not row.iteration:
        return None
    step = _number(stored_json.fields(row.eta).get("observed_step_time_s"))
    memory = _number(stored_json.fields(row.gpus).get("memory_used_bytes"))
    if memory is not None and not (math.isfinite(memory) and memory > 0):
        memory = None  # an unusable memory reading leaves the run without one
    iterations = int(row.iteration or 0)
    reasons: list[str] = []
    try:
        run_of(
            run_document(row.scenario, step, memory_per_gpu_bytes=memory),
            source=f"job {row.job_id}",
        )
    except SpecError as exc:
        reasons.append(
            "iteration_time_s: the job's log gave no step time" if step is None else str(exc)
        )
    gpu = ""
    try:
        gpu = parse_scenario(row.scenario).hardware.gpu.key
    except SpecError as exc:
        reasons.append(str(exc))
    except (PlannerError, ValueError, TypeError, ArithmeticError, RecursionError) as exc:
        reasons.append(f"scenario: cannot be read: {type(exc).__name__}: {exc}")
    if iterations < min_iterations:
        reasons.append(
            f"num_iterations: ran {iterations}, fewer than learning.min_iterations "
            f"({min_iterations}): its mean step time is mostly warm-up"
        )
    if not reasons and step is not None:
        reasons += _impossible_step(row, step)
    return ObservedRunRow(
        scheduler=row.scheduler,
        cluster=row.cluster,
        job_id=row.job_id,
        recorded_s=now_s,
        ended_s=row.ended_s,
        gpu=gpu,
        scenario=row.scenario,
        iteration_time_s=step if step is not None and math.isfinite(step) else None,
        num_iterations=iterations,
        memory_per_gpu_bytes=memory,
        skip_reason="; ".join(_cut(r) for r in reasons) or None,
    )


def _impossible_step(row: JobRow, step_s: float) -> list[str]:
    """Why a finished job's step time ``step_s`` (s, finite and > 0) cannot be what its
    scenario ran (at most one reason): one step longer than the job ran (``start_time_s`` of
    its state to ``ended_s``), or the model FLOPs of the scenario in that step beyond its GPUs'
    dense peak (``planner.calibration.observed_runs.beyond_peak``, on the job's stored
    prediction; the fit refuses such a run too). Either says the step time or the scenario is
    not the job's."""
    start = stored_json.number(stored_json.fields(row.state).get("start_time_s"))
    if start is not None and row.ended_s is not None and step_s > row.ended_s - start:
        return [
            f"iteration_time_s: {step_s:.4g} s per step is longer than the job ran "
            f"({row.ended_s - start:.4g} s)"
        ]
    prediction = stored_json.fields(row.prediction)
    reason = beyond_peak(
        stored_json.number(prediction.get("mfu")),
        stored_json.number(prediction.get("iteration_time_s")),
        step_s,
    )
    return [] if reason is None else [reason]


def _cut(reason: str) -> str:
    """``reason`` with what is not printable escaped (a message names a key the user wrote
    as written: a NUL in it is one PostgreSQL's text refuses) and cut to ``REASON_CHARS`` (a
    message that quotes a value the user wrote is as long as that value)."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in reason[:REASON_CHARS])
    if len(shown) <= REASON_CHARS and len(reason) <= REASON_CHARS:
        return shown
    return shown[: REASON_CHARS - 3] + "..."


def record_finished_run(
    uow: UnitOfWork, row: JobRow, *, config: LearningConfig, now_s: float
) -> None:
    """Keep the job that just ended as an observed run (skipped ones with their reason);
    never raises for what the job holds."""
    if not config.enabled:
        return
    try:
        run = run_row(row, min_iterations=config.min_iterations, now_s=now_s)
    except (PlannerError, ValueError, TypeError) as exc:  # a job's fields are its user's
        log.warning("job %s: not kept as an observed run: %s", row.job_id, exc)
        return
    if run is None:
        return
    uow.put_observed_run(run)
    if run.skip_reason:
        log.info("job %s: observed run skipped: %s", row.job_id, run.skip_reason)


# -- fitting --------------------------------------------------------------------------------


class SkippedRunJson(TypedDict):
    """A finished job a learnt calibration left out, and why (``job_id`` empty for a run
    the fit itself refused)."""

    job_id: str
    reason: str


class LearntStateJson(TypedDict):
    """A cluster's learnt calibration as the ``calibrations`` table keeps it
    (``observed/<scheduler>/<cluster>``): when it was fitted (epoch s) and from which newest
    run, the runs used and skipped (the newest ``SKIPPED_SHOWN`` with their reasons), the
    held-out error (``cross_validated_errors``; None when not computed), whether predictions
    use it and why, the fit's CPU seconds, the per-key ``summary`` and the ``calibration``
    (``ObservedCalibration.to_json`` without its runs). Stored with every non-finite number
    as null."""

    scheduler: str
    cluster: str
    fitted_s: float
    newest_id: int
    num_runs: int
    num_skipped: int
    skipped: list[SkippedRunJson]
    held_out: dict[str, float | int] | None
    applied: bool
    reason: str
    cpu_s: float
    summary: Sequence[Mapping[str, object]]
    calibration: Mapping[str, object]


def fit_cluster(
    store: Store, count: ObservedRunCount, config: LearningConfig, *, now_s: float
) -> LearntStateJson:
    """Fit one cluster's calibration from its newest runs and store it; returns the state
    stored (before its non-finite numbers became null). The fit's CPU time is its thread's
    (``time.thread_time``)."""
    started = time.thread_time()
    rows = store.observed_runs(count.scheduler, count.cluster, limit=config.max_runs)
    runs = [
        ObservedRun(
            document=r.scenario,
            iteration_time_s=r.iteration_time_s,
            memory_per_gpu_bytes=r.memory_per_gpu_bytes,
            cluster=count.cluster,
            source=f"job {r.job_id}",
        )
        for r in rows
    ]
    fit = observe_runs(runs)
    # which row each sample came from: the online calibration's held-out error weighs a job
    # by its iterations and age
    samples, indices, errors, calibration = fit.samples, fit.indices, fit.errors, fit.calibration
    fit_s = time.thread_time() - started
    held_out: dict[str, float | int] | None = None
    note = ""
    if len(samples) >= 2 and fit_s * (FOLDS + 1) <= config.fit_cpu_budget_s:
        jobs = [(rows[i].num_iterations, rows[i].ended_s or rows[i].recorded_s) for i in indices]
        held_out = dict(cross_validated_errors(samples, folds=FOLDS, online_jobs=jobs))
    elif len(samples) >= 2:
        note = (
            f"held-out error not computed: the fit took {fit_s:.2f} CPU s of the "
            f"learning.fit_cpu_budget_s of {config.fit_cpu_budget_s:g} s; corrects only "
            "what the online calibration leaves uncorrected"
        )
    applied = True
    reason = (
        ""
        if held_out
        else "no held-out error yet: fewer than 2 runs; corrects only what the online "
        "calibration leaves uncorrected"
    )
    if held_out is not None:
        prior = held_out["prior_mean_abs_error_ratio"]
        learnt = held_out["calibrated_mean_abs_error_ratio"]
        online = held_out["online_mean_abs_error_ratio"]
        applied = bool(learnt <= prior)
        reason = (
            f"held-out error {100 * learnt:.1f} % against the uncorrected model's "
            f"{100 * prior:.1f} % and the online calibration's {100 * online:.1f} %"
        )
        if applied and not learnt <= online:
            reason += "; corrects only what the online calibration leaves uncorrected"
    if not samples:
        applied, reason = False, "no usable run"
    skipped: list[SkippedRunJson] = [
        {"job_id": r.job_id, "reason": r.skip_reason or ""}
        for r in store.observed_runs(
            count.scheduler, count.cluster, limit=SKIPPED_SHOWN, skipped=True
        )
    ]
    skipped += [{"job_id": "", "reason": _cut(e)} for e in errors]
    skipped += [
        {"job_id": rows[indices[i]].job_id, "reason": outlier_reason(ratio, num)}
        for i, (ratio, num) in sorted(calibration.outliers.items())
    ]
    doc = calibration.to_json()
    doc["runs"] = []  # the runs are the observed_runs table's; the factors are the state
    state: LearntStateJson = {
        "scheduler": count.scheduler,
        "cluster": count.cluster,
        "fitted_s": now_s,
        "newest_id": count.newest_id,
        "num_runs": len(samples) - len(calibration.outliers),
        "num_skipped": count.num_skipped + len(errors) + len(calibration.outliers),
        "skipped": skipped[-SKIPPED_SHOWN:],
        "held_out": held_out,
        "applied": applied,
        "reason": note or reason,
        "cpu_s": time.thread_time() - started,
        "summary": calibration.summary(),
        "calibration": doc,
    }
    stored = {key: _finite(value) for key, value in state.items()}  # PostgreSQL's json: no NaN
    store.put_calibration(calibration_name(count.scheduler, count.cluster), stored, now_s)
    store.prune_observed_runs(count.scheduler, count.cluster, keep=config.keep_runs)
    return state


def _finite(value: object) -> object:
    """``value`` with every float that is not finite replaced by None (valid JSON)."""
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Learner:
    """Fits each cluster's calibration again when it has new runs (``run``: the scheduled
    job; on the leader only, as the ingest loop)."""

    def __init__(self, store: Store, clock: Callable[[], float], config: LearningConfig) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self._lock = threading.Lock()

    def due(self) -> list[ObservedRunCount]:
        """The clusters whose newest run is not the one their stored fit saw, and those whose
        stored fit is in a format this planner does not read (written by an older version):
        their runs are still stored, so the fit is made again from them rather than the
        cluster going without its corrections until its next run ends."""
        out = []
        for count in self.store.observed_run_counts():
            row = self.store.calibration(calibration_name(count.scheduler, count.cluster))
            state = stored_json.fields(row.state) if row is not None else {}
            fit = state.get("calibration")
            readable = isinstance(fit, Mapping) and fit.get("format") == OBSERVED_FORMAT
            if state.get("newest_id") != count.newest_id or not readable:
                out.append(count)
        return out

    def run(self) -> dict[str, str]:
        """Fit every cluster that is due; per cluster ``ok`` or the error (logged, never
        raised: one cluster's failure leaves the others and its last fit as they were)."""
        if not self.config.enabled:
            return {}
        results: dict[str, str] = {}
        with self._lock:
            for count in self.due():
                name = f"{count.scheduler}/{count.cluster}"
                try:
                    state = fit_cluster(self.store, count, self.config, now_s=self.clock())
                except Exception as exc:  # one cluster's failure: the others go on
                    results[name] = f"{type(exc).__name__}: {exc}"[:500]
                    # what the runs hold is reported; anything else is a defect: its traceback
                    expected = isinstance(exc, PlannerError | ValueError | ArithmeticError)
                    log.error(
                        "learning on %s failed, its last fit stays: %s",
                        name,
                        exc,
                        exc_info=not expected,
                    )
                    continue
                results[name] = "ok"
                log.info(
                    "learnt calibration of %s: %d runs (%d skipped) in %.2f CPU s; %s",
                    name,
                    state["num_runs"],
                    state["num_skipped"],
                    state["cpu_s"],
                    state["reason"],
                )
        return results


# -- using it -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Learnt:
    """A cluster's learnt calibration as read back: the ``calibration``, when it was fitted,
    whether it is applied (held-out error no worse than the model's, or too few runs to
    tell) and whether it replaces the online calibration's corrections (its held-out error
    measured against the online calibration's and no worse; False with fewer than 2 runs or
    no CPU time left for the folds: it then corrects only what the online calibration leaves
    uncorrected)."""

    scheduler: str
    cluster: str
    calibration: ObservedCalibration
    fitted_s: float
    applied: bool
    replaces_online: bool


def learnt_of(row: CalibrationRow | None) -> Learnt | None:
    """The learnt calibration a stored row holds; None when none or unusable (logged)."""
    if row is None or not row.name.startswith(PREFIX):
        return None
    state = stored_json.fields(row.state)
    try:
        calibration = ObservedCalibration.from_json(stored_json.fields(state["calibration"]))
        fitted_s = stored_json.number(state["fitted_s"])
        if fitted_s is None:
            raise TypeError(f"fitted_s: not a number: {state['fitted_s']!r}")
        held_out = stored_json.fields(state.get("held_out"))
        return Learnt(
            scheduler=str(state["scheduler"]),
            cluster=str(state["cluster"]),
            calibration=calibration,
            fitted_s=fitted_s,
            applied=bool(state.get("applied")),
            replaces_online=replaces_online(held_out),
        )
    except (PlannerError, KeyError, TypeError, ValueError) as exc:
        log.error("stored calibration %s unusable: %s", row.name, exc)
        return None


def replaces_online(held_out: Mapping[str, object]) -> bool:
    """Whether a fit's stored ``held_out`` errors show it no worse than the online
    calibration on the same runs (both measured: 2 runs or more, folds run; a stored value
    that is not a number counts as not measured)."""
    learnt = stored_json.number(held_out.get("calibrated_mean_abs_error_ratio"))
    online = stored_json.number(held_out.get("online_mean_abs_error_ratio"))
    return learnt is not None and online is not None and learnt <= online


@dataclass(slots=True)
class LearntCache:
    """Parsed learnt calibrations by row name, parsed again only when the row changed."""

    parsed: dict[str, tuple[float, Learnt | None]] = field(default_factory=dict)
    #: per row name: the fit whose corrections the active jobs got, and the jobs done
    reapplied: dict[str, tuple[float, set[str]]] = field(default_factory=dict)

    def get(self, row: CalibrationRow | None) -> Learnt | None:
        """The learnt calibration of ``row`` (cached by its ``updated_s``)."""
        if row is None:
            return None
        cached = self.parsed.get(row.name)
        if cached is not None and cached[0] == row.updated_s:
            return cached[1]
        learnt = learnt_of(row)
        self.parsed[row.name] = (row.updated_s, learnt)
        return learnt


@dataclass(slots=True)
class Learning:
    """What the ingest loop needs of learning: its knobs and the parsed calibrations."""

    config: LearningConfig = field(default_factory=LearningConfig)
    cache: LearntCache = field(default_factory=LearntCache)


def model_fields(prediction: Mapping[str, object]) -> dict[str, object]:
    """A prediction without any calibration's fields (``calibrated_*``, ``calibration``)."""
    return {
        k: v
        for k, v in prediction.items()
        if k != "calibration" and not k.startswith("calibrated_")
    }


def _level(prediction: Mapping[str, object]) -> int:
    info = prediction.get("calibration")
    level = info.get("level") if isinstance(info, Mapping) else None
    return SPECIFICITY.get(str(level), 0)


def corrected(
    learnt: Learnt, prediction: Mapping[str, object], scenario: Scenario, cluster: str
) -> dict[str, object] | None:
    """The model's ``prediction`` corrected by ``learnt`` (with its ``fitted_s`` in the
    ``calibration`` object), None when it corrects nothing there."""
    out: dict[str, object] = learnt.calibration.apply(
        model_fields(prediction), scenario, cluster=cluster
    )
    info = out.get("calibration")
    if not isinstance(info, dict) or info.get("level") in (None, "none"):
        return None
    info["fitted_s"] = learnt.fitted_s
    return out


def calibrate_prediction(
    learning: Learning,
    uow: UnitOfWork,
    *,
    scheduler: str,
    cluster: str,
    document: Mapping[str, object],
    online: Mapping[str, object],
) -> dict[str, object]:
    """A job's prediction: ``online`` (the prediction as the online calibration corrected
    it), or the cluster's learnt correction of the same model prediction where that is
    applied, at least as specific and, where the online calibration corrected it, no worse
    than it on held-out runs (module docstring)."""
    if not learning.config.apply:
        return dict(online)
    learnt = learning.cache.get(uow.calibration(calibration_name(scheduler, cluster)))
    if learnt is None or not learnt.applied:
        return dict(online)
    if _level(online) > 0 and not learnt.replaces_online:
        return dict(online)  # nothing shows the learnt one does better than this correction
    try:
        better = corrected(learnt, online, parse_scenario(document), cluster)
    except (PlannerError, ValueError, TypeError, ArithmeticError) as exc:
        log.warning("prediction not corrected by the learnt calibration: %s", exc)
        return dict(online)
    if better is None or _level(better) < _level(online):
        return dict(online)
    return better


class LearntCalibrations:
    """The learnt calibrations as ``POST /v1/predict`` applies them: by the request's
    ``cluster`` (the newest fit of a cluster of that name), read from the store at most every
    ``ttl_s`` seconds of ``clock`` (the API may run in other processes than the learner); a
    ``planner.scenario.documents.PredictionCalibration``."""

    def __init__(
        self,
        store: Store,
        *,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.clock = clock
        self._cache = LearntCache()
        self._by_cluster: dict[str, Learnt] = {}
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def refresh(self) -> None:
        """Read the stored calibrations again now."""
        rows = self.store.calibrations(prefix=PREFIX)
        by_cluster: dict[str, Learnt] = {}
        for row in rows:
            learnt = self._cache.get(row)
            if learnt is None or not learnt.applied:
                continue
            known = by_cluster.get(learnt.cluster)
            if known is None or learnt.fitted_s > known.fitted_s:
                by_cluster[learnt.cluster] = learnt
        self._by_cluster = by_cluster
        self._read_at = self.clock()

    def for_cluster(self, cluster: str) -> Learnt | None:
        """The applied learnt calibration of ``cluster`` (None: none)."""
        with self._lock:
            if self._read_at is None or self.clock() - self._read_at >= self.ttl_s:
                self.refresh()
            return self._by_cluster.get(cluster)

    def apply(
        self, prediction: Mapping[str, object], scenario: Scenario, *, cluster: str = ""
    ) -> dict[str, object]:
        """``prediction`` with the calibrated fields of ``cluster``'s learnt calibration (as
        it is without one)."""
        learnt = self.for_cluster(cluster) if cluster else None
        if learnt is None:
            return dict(prediction)
        return corrected(learnt, prediction, scenario, cluster) or dict(prediction)
