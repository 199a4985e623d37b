"""Predictions written back onto Kubernetes objects (opt-in), so ``kubectl``, dashboards and other
controllers see them where the job is:

* a **pending Kueue Workload** (``kueue.x-k8s.io/v1beta2``; the planner's job is the Workload's
  controlling owner) gets the condition ``PredictedAdmission`` (``status: "True"``, reason
  ``QueueForecast``, the p50 and p90 admission times in the message; ``Unknown`` with reason
  ``BeyondHorizon`` when the forecast sees no admission) and the annotations
  ``planner.llm/predicted-admission-p50`` / ``-p90`` (RFC 3339). Once the Workload is admitted
  (or finished, or deactivated) the condition turns ``False`` with that reason; the
  annotations stay, the last prediction made, to compare with the ``Admitted`` condition's
  ``lastTransitionTime``. (``QuotaReserved`` is its reason while admission checks still run.)
* a **running TrainJob** (``trainer.kubeflow.org/v1alpha1``) gets ``planner.llm/progress-ratio``
  (0..1) and ``planner.llm/eta-p10`` / ``-p50`` / ``-p90`` (RFC 3339 completion times);
* **every job** (batch Job, JobSet, PyTorchJob, TrainJob, pending or running) gets
  ``planner.llm/expected-runtime``: the p90 of its whole run's wall time as a Go duration
  (``26h40m``), the format KAI-Scheduler's proposed expected-runtime annotation uses. The planner
  never writes another project's annotation: a policy that copies this one opts a job in.

How each is written (the verbs Kueue's own controllers use):

* The condition: **server-side apply** to the ``workloads/status`` subresource (content type
  ``application/apply-patch+yaml``) under the field manager ``llm-capacity-planner-forecast``,
  holding only our condition. ``status.conditions`` is a list map keyed by ``type``, so Kueue's
  conditions (``QuotaReserved``, ``Admitted``, ...) are never touched. The field manager differs
  from the AdmissionCheck controller's (``llm-capacity-planner``): an apply under one manager
  that leaves out fields the same manager applied before removes them, so the two writers
  must not share one.
* Annotations: a **JSON merge patch** of ``metadata.annotations`` on the main resource: only the
  ``planner.llm/*`` keys change, everyone else's annotations stay.

Nothing is written unless a value moved by more than ``max(min_change_s, min_change_ratio x
time still ahead)`` (a time), 0.01 (a progress ratio) or ``min_change_ratio`` of itself (an
expected runtime): the forecast is redone every cycle and small moves would otherwise wake
every watcher of every Workload. What was written is read back from the watched objects, so
a new leader does not rewrite everything.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.kubernetes.admission import KIND_RESOURCES, rfc3339
from adapters.kubernetes.client import TRAINJOBS, WORKLOADS, KubeApi
from adapters.kubernetes.translate import (
    job_id,
    name_of,
    namespace_of,
    owner_key,
    parse_time,
    workload_view,
)
from adapters.kubernetes.translate.objects import annotations_of, as_map, condition, metadata
from planner.capacity.pending import Band, PublishedForecast
from planner.errors import PlannerError

PREFIX = "planner.llm/"
ANNOTATION_ADMISSION_P50 = PREFIX + "predicted-admission-p50"
ANNOTATION_ADMISSION_P90 = PREFIX + "predicted-admission-p90"
ANNOTATION_PROGRESS = PREFIX + "progress-ratio"
ANNOTATION_ETA_P10 = PREFIX + "eta-p10"
ANNOTATION_ETA_P50 = PREFIX + "eta-p50"
ANNOTATION_ETA_P90 = PREFIX + "eta-p90"
ANNOTATION_EXPECTED_RUNTIME = PREFIX + "expected-runtime"
DEFAULT_CONDITION_TYPE = "PredictedAdmission"
FORECAST_FIELD_MANAGER = "llm-capacity-planner-forecast"
#: Reasons of the condition (metav1.Condition: CamelCase, no spaces).
REASON_FORECAST = "QueueForecast"
REASON_BEYOND = "BeyondHorizon"
REASON_ADMITTED = "Admitted"
REASON_QUOTA = "QuotaReserved"
REASON_FINISHED = "Finished"
REASON_INACTIVE = "Deactivated"
#: Smallest move of a progress ratio worth writing.
PROGRESS_STEP = 0.01

_TIME_KEYS = frozenset(
    {
        ANNOTATION_ADMISSION_P50,
        ANNOTATION_ADMISSION_P90,
        ANNOTATION_ETA_P10,
        ANNOTATION_ETA_P50,
        ANNOTATION_ETA_P90,
    }
)
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?$")


def go_duration(seconds: float) -> str:
    """``seconds`` as a Go ``time.ParseDuration`` string rounded to the minute: ``26h40m``,
    ``45m``, ``0m``."""
    minutes = max(0, round(seconds / 60.0))
    hours, rest = divmod(minutes, 60)
    return f"{hours}h{rest}m" if hours else f"{rest}m"


def parse_go_duration(text: str) -> float | None:
    """Seconds of a duration :func:`go_duration` wrote (None: not one)."""
    match = _DURATION.match(text.strip())
    if not match or not (match[1] or match[2]):
        return None
    return 3600.0 * int(match[1] or 0) + 60.0 * int(match[2] or 0)


def _time_text(value: float | None) -> str | None:
    return rfc3339(value) if value is not None and math.isfinite(value) else None


def admission_annotations(forecast: PublishedForecast) -> dict[str, str | None]:
    """A pending job's ``predicted-admission-p50``/``-p90`` annotations (None: removed)."""
    band: Band = forecast.start_s or (None, None, None)
    return {
        ANNOTATION_ADMISSION_P50: _time_text(band[1]),
        ANNOTATION_ADMISSION_P90: _time_text(band[2]),
    }


def progress_annotations(forecast: PublishedForecast) -> dict[str, str | None]:
    """A running TrainJob's progress ratio and ETA band annotations (None: removed)."""
    band: Band = forecast.completion_s or (None, None, None)
    ratio = forecast.progress_ratio
    return {
        ANNOTATION_PROGRESS: f"{min(max(ratio, 0.0), 1.0):.3f}" if ratio is not None else None,
        ANNOTATION_ETA_P10: _time_text(band[0]),
        ANNOTATION_ETA_P50: _time_text(band[1]),
        ANNOTATION_ETA_P90: _time_text(band[2]),
    }


def runtime_annotation(forecast: PublishedForecast) -> dict[str, str | None]:
    """The ``expected-runtime`` annotation (None: removed)."""
    runtime = forecast.expected_runtime_s
    ok = runtime is not None and math.isfinite(runtime) and runtime > 0
    return {ANNOTATION_EXPECTED_RUNTIME: go_duration(runtime) if ok and runtime else None}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeRule:
    """When a published value is worth writing again (see the module docstring)."""

    min_change_s: float = 60.0
    min_change_ratio: float = 0.1

    def moved(self, key: str, old: str | None, new: str | None, *, now_s: float) -> bool:
        """Whether annotation ``key`` going from ``old`` to ``new`` is worth a write."""
        if old == new:
            return False
        if old is None or new is None:
            return True
        if key in _TIME_KEYS:
            before, after = parse_time(old), parse_time(new)
            if before is None or after is None:
                return True
            ahead = max(0.0, after - now_s)
            return abs(after - before) > max(self.min_change_s, self.min_change_ratio * ahead)
        if key == ANNOTATION_PROGRESS:
            try:
                return abs(float(new) - float(old)) >= PROGRESS_STEP
            except ValueError:
                return True
        if key == ANNOTATION_EXPECTED_RUNTIME:
            before_s, after_s = parse_go_duration(old), parse_go_duration(new)
            if before_s is None or after_s is None:
                return True
            return abs(after_s - before_s) > max(
                self.min_change_s, self.min_change_ratio * before_s
            )
        return True

    def annotation_patch(
        self, obj: Mapping[str, Any], wanted: Mapping[str, str | None], *, now_s: float
    ) -> dict[str, str | None] | None:
        """The annotations to merge-patch onto ``obj`` (all of ``wanted``, so they stay one
        consistent set) when any moved enough, else None."""
        current = annotations_of(obj)
        if any(self.moved(k, current.get(k), v, now_s=now_s) for k, v in wanted.items()):
            return dict(wanted)
        return None


def admission_condition(
    workload: Mapping[str, Any],
    forecast: PublishedForecast | None,
    *,
    condition_type: str,
    now_s: float,
) -> dict[str, Any] | None:
    """The condition to apply on ``workload`` (None: leave it alone): the forecast's admission
    band while it waits, ``False`` with the reason once it no longer does (only when our
    condition is there and still ``True``)."""
    view = workload_view(workload)
    current = condition(workload, condition_type)
    waiting = view.active and not (view.quota_reserved or view.admitted or view.finished)
    if not waiting:
        if current is None or current.get("status") != "True":
            return None
        if view.finished:
            reason = REASON_FINISHED
        elif not view.active:
            reason = REASON_INACTIVE
        elif view.admitted:
            reason = REASON_ADMITTED
        else:
            reason = REASON_QUOTA
        last = annotations_of(workload).get(ANNOTATION_ADMISSION_P50)
        message = (
            f"{reason.lower()}; the last prediction was admission at {last or 'unknown'} (p50)"
        )
        return _condition(
            condition_type,
            "False",
            reason=reason,
            message=message,
            current=current,
            workload=workload,
            now_s=now_s,
        )
    if forecast is None or forecast.made_at_s is None:  # no queue forecast made yet
        return None
    band: Band = forecast.start_s or (None, None, None)
    p50, p90 = _time_text(band[1]), _time_text(band[2])
    made = _time_text(forecast.made_at_s) or "unknown"
    if p50 is None:
        message = (
            f"the queue forecast made at {made} sees no admission within its horizon "
            "(the running jobs ahead have no predicted end, or the queue is long)"
        )
        return _condition(
            condition_type,
            "Unknown",
            reason=REASON_BEYOND,
            message=message,
            current=current,
            workload=workload,
            now_s=now_s,
        )
    message = (
        f"admission predicted at {p50} (p50), by {p90 or 'beyond the horizon'} (p90); "
        f"queue forecast of llm-capacity-planner made at {made}"
    )
    return _condition(
        condition_type,
        "True",
        reason=REASON_FORECAST,
        message=message,
        current=current,
        workload=workload,
        now_s=now_s,
    )


def _condition(
    ctype: str,
    status: str,
    *,
    reason: str,
    message: str,
    current: Mapping[str, Any] | None,
    workload: Mapping[str, Any],
    now_s: float,
) -> dict[str, Any]:
    last = (current or {}).get("lastTransitionTime")
    changed = current is None or current.get("status") != status or not isinstance(last, str)
    cond: dict[str, Any] = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now_s) if changed else last,
    }
    generation = metadata(workload).get("generation")
    if isinstance(generation, int) and not isinstance(generation, bool):
        cond["observedGeneration"] = generation
    return cond


def condition_body(workload: Mapping[str, Any], cond: Mapping[str, Any]) -> dict[str, Any]:
    """The server-side apply configuration of ``workloads/status`` holding only ``cond``."""
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {"name": name_of(workload), "namespace": namespace_of(workload)},
        "status": {"conditions": [dict(cond)]},
    }


@dataclass(slots=True)
class PublishReport:
    """Counts of one publishing pass: objects written per kind of write, errors."""

    written: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def count(self, what: str) -> None:
        """One more write of ``what``."""
        self.written[what] = self.written.get(what, 0) + 1


class PredictionPublisher:
    """Writes the planner's predictions onto Workloads and job objects (module docstring).

    Parameters:
        api: the adapter's client.
        workloads: write the admission condition and annotations on pending Workloads.
        progress: write progress and ETA annotations on running TrainJobs.
        expected_runtime: write the expected-runtime annotation on every job.
        condition_type: the Workload condition's type.
        rule: when a value moved enough to be written again.
        field_manager: the server-side apply field manager of the condition.
        clock: epoch seconds.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        workloads: bool = True,
        progress: bool = True,
        expected_runtime: bool = True,
        condition_type: str = DEFAULT_CONDITION_TYPE,
        rule: ChangeRule | None = None,
        field_manager: str = FORECAST_FIELD_MANAGER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.workloads = workloads
        self.progress = progress
        self.expected_runtime = expected_runtime
        self.condition_type = condition_type
        self.rule = rule or ChangeRule()
        self.field_manager = field_manager
        self._clock = clock

    def publish(
        self,
        workloads: Iterable[Mapping[str, Any]],
        jobs: Mapping[str, Iterable[Mapping[str, Any]]],
        forecasts: Mapping[str, PublishedForecast],
    ) -> PublishReport:
        """One pass over the watched ``workloads`` and ``jobs`` (by resource key: ``jobs``,
        ``jobsets``, ``pytorchjobs``, ``trainjobs``) with ``forecasts`` by job id. Errors are
        collected per object, never raised."""
        report = PublishReport()
        now_s = self._clock()
        if self.workloads:
            for workload in workloads:
                self._guard(
                    report, "workload", workload, self._workload, workload, forecasts, now_s
                )
        if self.progress or self.expected_runtime:
            for kind, res in KIND_RESOURCES.items():
                for obj in jobs.get(res.key, ()):
                    forecast = forecasts.get(job_id(namespace_of(obj), kind, name_of(obj)))
                    if forecast is not None:
                        self._guard(report, kind, obj, self._job, kind, obj, forecast, now_s)
        return report

    @staticmethod
    def _guard(
        report: PublishReport,
        what: str,
        obj: Mapping[str, Any],
        write: Callable[..., list[str]],
        *args: Any,
    ) -> None:
        try:
            for done in write(report, *args):
                report.count(done)
        except PlannerError as exc:
            report.errors.append(f"{what} {namespace_of(obj)}/{name_of(obj)}: {exc}")

    def _workload(
        self,
        _report: PublishReport,
        workload: Mapping[str, Any],
        forecasts: Mapping[str, PublishedForecast],
        now_s: float,
    ) -> list[str]:
        owner = owner_key(workload)
        if owner is None:
            return []
        namespace, name = namespace_of(workload), name_of(workload)
        forecast = forecasts.get(job_id(namespace, owner[0], owner[1]))
        done = []
        cond = admission_condition(
            workload, forecast, condition_type=self.condition_type, now_s=now_s
        )
        patch = None
        if forecast is not None and forecast.pending and cond is not None:
            patch = self.rule.annotation_patch(
                workload, admission_annotations(forecast), now_s=now_s
            )
        current = condition(workload, self.condition_type)
        # the message names the times: it is rewritten with them, or when the state changes
        if cond is not None and (patch is not None or _state_differs(current, cond)):
            self.api.apply_status(
                WORKLOADS,
                name,
                condition_body(workload, cond),
                namespace=namespace,
                field_manager=self.field_manager,
                force=True,
            )
            done.append("workload_condition")
        if patch is not None:
            self.api.merge_patch(
                WORKLOADS, name, {"metadata": {"annotations": patch}}, namespace=namespace
            )
            done.append("workload_annotations")
        return done

    def _job(
        self,
        _report: PublishReport,
        kind: str,
        obj: Mapping[str, Any],
        forecast: PublishedForecast,
        now_s: float,
    ) -> list[str]:
        wanted: dict[str, str | None] = {}
        if self.progress and KIND_RESOURCES[kind] is TRAINJOBS and not forecast.pending:
            wanted.update(progress_annotations(forecast))
        if self.expected_runtime:
            wanted.update(runtime_annotation(forecast))
        current = annotations_of(obj)
        # never add a removal of a key that is not there
        wanted = {k: v for k, v in wanted.items() if v is not None or k in current}
        patch = self.rule.annotation_patch(obj, wanted, now_s=now_s) if wanted else None
        if patch is None:
            return []
        body = {"metadata": {"annotations": patch}}
        self.api.merge_patch(KIND_RESOURCES[kind], name_of(obj), body, namespace=namespace_of(obj))
        return [f"{kind}_annotations"]


def _state_differs(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> bool:
    """Whether the condition is missing or says another status, reason or generation."""
    if current is None:
        return True
    keys = ("status", "reason", "observedGeneration")
    return any(as_map(current).get(k) != wanted.get(k) for k in keys)


__all__ = [
    "ANNOTATION_ADMISSION_P50",
    "ANNOTATION_ADMISSION_P90",
    "ANNOTATION_ETA_P10",
    "ANNOTATION_ETA_P50",
    "ANNOTATION_ETA_P90",
    "ANNOTATION_EXPECTED_RUNTIME",
    "ANNOTATION_PROGRESS",
    "DEFAULT_CONDITION_TYPE",
    "FORECAST_FIELD_MANAGER",
    "ChangeRule",
    "PredictionPublisher",
    "PublishReport",
    "admission_annotations",
    "admission_condition",
    "condition_body",
    "go_duration",
    "parse_go_duration",
    "progress_annotations",
    "runtime_annotation",
]
