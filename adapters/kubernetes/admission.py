"""Kueue AdmissionCheck controller: the planner's say at admission, and job hint annotations.

How it works (Kueue ``v1beta2``, ``site/.../concepts/admission_check``):

* An ``AdmissionCheck`` whose ``spec.controllerName`` is ours is kept ``Active``
  (``status.conditions[type=Active]``); without it Kueue marks the ClusterQueues that use the
  check inactive.
* Kueue adds each configured check to ``Workload.status.admissionChecks[]`` as ``Pending`` once
  the workload reserved quota. For each of ours that is ``Pending``, :meth:`reconcile_workload`
  asks ``decide(WorkloadSnapshot) -> CheckDecision`` and writes the state with **server-side
  apply** to the ``workloads/status`` subresource under field manager ``llm-capacity-planner``.
  ``admissionChecks`` is a list map keyed by ``name``, so the applied configuration, which holds
  only our entry, never touches other controllers' entries; ``force=True`` takes over only the
  fields of our entry (Kueue itself wrote them as ``Pending``). JSON merge patches are never used
  here (they would replace the whole list).

Never blocking admission (the policy is ``planner.recommend.admission``; this module reads
Workloads and writes their status):

* Advisory by default: a ``Retry``/``Rejected`` decision for a queue that did not opt in to
  gating (``gating_queues``, LocalQueue ``namespace/name`` or ClusterQueue name) is written as
  ``Ready`` with the would-be decision in the message.
* When the planner cannot decide (``decide`` raises, returns ``Pending``, or the prediction is
  stale, which the service's ``decide`` should report as ``Pending``), the check stays
  ``Pending`` for at most ``grace_period_s`` after Kueue added it, then is set ``Ready`` with
  "no prediction" in the message. A planner bug or a slow model therefore delays admission by at
  most the grace period, never forever.
* If the planner is down altogether nothing writes: workloads of ClusterQueues using the check
  wait in ``Pending`` until a replica is back (leader election hands over within the lease
  duration). The runbook's emergency step is to remove the check from the ClusterQueue's
  ``admissionChecksStrategy``. We do not mark the AdmissionCheck inactive on shutdown: an
  inactive check makes Kueue stop admitting to the whole ClusterQueue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from adapters.kubernetes.client import (
    ADMISSIONCHECKS,
    FIELD_MANAGER,
    JOBS,
    JOBSETS,
    PYTORCHJOBS,
    TRAINJOBS,
    WORKLOADS,
    KubeApi,
    Resource,
)
from adapters.kubernetes.translate import (
    PodGroup,
    job_id,
    name_of,
    namespace_of,
    owner_key,
    parse_time,
    workload_view,
)
from planner.errors import PlannerError
from planner.recommend.admission import CheckDecision, CheckState, final_decision, is_gated

_log = logging.getLogger(__name__)

DEFAULT_CONTROLLER_NAME = "planner.llm/llm-capacity-planner"
MAX_MESSAGE_CHARS = 32768  # Workload.status.admissionChecks[].message maxLength


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSnapshot:
    """What ``decide`` gets about one workload.

    ``job_id`` is the planner's id of the owning job (``namespace/kind/name``) or "" when the
    owner is unknown; ``check_name`` the AdmissionCheck being decided; ``pending_since_s`` when
    Kueue set it Pending (epoch s); ``num_gpus`` the total GPUs asked for; ``raw`` the Workload.
    """

    namespace: str
    name: str
    job_id: str
    queue_name: str
    cluster_queue: str
    check_name: str
    check_state: str
    pending_since_s: float | None
    num_gpus: int
    pod_groups: tuple[PodGroup, ...]
    raw: Mapping[str, Any] = field(repr=False)


Decider = Callable[[WorkloadSnapshot], CheckDecision]


def advisory_decider(message: Callable[[WorkloadSnapshot], str | None]) -> Decider:
    """A decider that always says ``Ready`` with ``message(snapshot)``; a None message means
    "no prediction yet" (``Pending``: the controller waits up to its grace period)."""

    def decide(snapshot: WorkloadSnapshot) -> CheckDecision:
        text = message(snapshot)
        if text is None:
            return CheckDecision(state=CheckState.PENDING, message="prediction not ready")
        return CheckDecision(state=CheckState.READY, message=text)

    return decide


def rfc3339(epoch_s: float) -> str:
    """A Unix time (s) as Kubernetes writes times: RFC 3339 in UTC, whole seconds."""
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def check_entries(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``{name: entry}`` of ``status.admissionChecks``."""
    entries = _dict(workload.get("status")).get("admissionChecks")
    out: dict[str, Mapping[str, Any]] = {}
    for entry in entries if isinstance(entries, list) else []:
        emap = _dict(entry)
        if isinstance(emap.get("name"), str):
            out[emap["name"]] = emap
    return out


def workload_snapshot(workload: Mapping[str, Any], check_name: str) -> WorkloadSnapshot:
    """Build the :class:`WorkloadSnapshot` of ``workload`` for ``check_name`` (pure)."""
    view = workload_view(workload)
    entry = check_entries(workload).get(check_name, {})
    owner = owner_key(workload)
    return WorkloadSnapshot(
        namespace=view.namespace,
        name=view.name,
        job_id=job_id(view.namespace, owner[0], owner[1]) if owner else "",
        queue_name=view.queue_name,
        cluster_queue=view.cluster_queue,
        check_name=check_name,
        check_state=str(entry.get("state", "")),
        pending_since_s=parse_time(entry.get("lastTransitionTime")),
        num_gpus=sum(g.count * g.gpus_per_pod for g in view.pod_groups),
        pod_groups=view.pod_groups,
        raw=workload,
    )


def apply_body(
    workload: Mapping[str, Any],
    check_name: str,
    decision: CheckDecision,
    *,
    now_s: float,
) -> dict[str, Any] | None:
    """The server-side apply configuration that sets our check's entry, or None when the entry
    already says the same (no write). ``lastTransitionTime`` moves only when the state changes."""
    current = check_entries(workload).get(check_name, {})
    message = decision.message[:MAX_MESSAGE_CHARS]
    requeue = decision.requeue_after_s if decision.state is CheckState.RETRY else None
    if (
        current.get("state") == decision.state.value
        and current.get("message", "") == message
        and current.get("requeueAfterSeconds") == requeue
    ):
        return None
    changed = current.get("state") != decision.state.value
    last = current.get("lastTransitionTime")
    entry: dict[str, Any] = {
        "name": check_name,
        "state": decision.state.value,
        "message": message,
        "lastTransitionTime": rfc3339(now_s) if changed or not isinstance(last, str) else last,
    }
    if requeue is not None:
        entry["requeueAfterSeconds"] = max(0, int(requeue))
    return {
        "apiVersion": f"{WORKLOADS.group}/{WORKLOADS.version}",
        "kind": WORKLOADS.kind,
        "metadata": {"name": name_of(workload), "namespace": namespace_of(workload)},
        "status": {"admissionChecks": [entry]},
    }


@dataclass(slots=True)
class ReconcileReport:
    """Counts of one reconcile pass: checks marked active, workloads written per state,
    workloads left pending (grace period running), errors."""

    active_checks: list[str] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=dict)
    waiting: int = 0
    unchanged: int = 0
    errors: list[str] = field(default_factory=list)


class AdmissionCheckController:
    """Writes this planner's AdmissionCheck states on Kueue Workloads (see the module docstring).

    Parameters:
        api_client: an official ``kubernetes.client.ApiClient`` (or pass ``api``).
        controller_name: the ``spec.controllerName`` of our AdmissionChecks.
        decide: the decision function; default :func:`advisory_decider` with a fixed message.
        gating_queues: queues where ``Retry``/``Rejected`` are written as decided (LocalQueue as
            ``namespace/name`` or ClusterQueue name); elsewhere they become ``Ready``.
        grace_period_s: how long an undecided check may stay ``Pending`` before ``Ready``.
        field_manager: the server-side apply field manager.
        clock: epoch seconds.
    """

    def __init__(
        self,
        api_client: Any = None,
        *,
        api: KubeApi | None = None,
        controller_name: str = DEFAULT_CONTROLLER_NAME,
        decide: Decider | None = None,
        gating_queues: Collection[str] = (),
        grace_period_s: float = 120.0,
        field_manager: str = FIELD_MANAGER,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if api is None:
            if api_client is None:
                raise ValueError("pass api_client or api")
            api = KubeApi(api_client)
        self.api = api
        self.controller_name = controller_name
        self.decide: Decider = decide or advisory_decider(
            lambda _s: "llm-capacity-planner: advisory, no prediction attached"
        )
        self.gating_queues = frozenset(gating_queues)
        self.grace_period_s = grace_period_s
        self.field_manager = field_manager
        self._clock = clock

    # ------------------------------------------------------------------ admission checks

    def our_checks(self, admission_checks: Iterable[Mapping[str, Any]]) -> list[str]:
        """Names of the AdmissionChecks whose ``spec.controllerName`` is ours."""
        return sorted(
            name_of(ac)
            for ac in admission_checks
            if _dict(ac.get("spec")).get("controllerName") == self.controller_name and name_of(ac)
        )

    def mark_active(
        self, admission_checks: Iterable[Mapping[str, Any]], message: str = "planner is running"
    ) -> list[str]:
        """Set ``Active=True`` on each of our AdmissionChecks that is not already so (SSA on
        ``admissionchecks/status``); returns the names of our checks. Raises the client's
        errors."""
        names = []
        for ac in admission_checks:
            if _dict(ac.get("spec")).get("controllerName") != self.controller_name:
                continue
            name = name_of(ac)
            names.append(name)
            conditions = _dict(ac.get("status")).get("conditions")
            active = next(
                (
                    c
                    for c in (conditions if isinstance(conditions, list) else [])
                    if _dict(c).get("type") == "Active"
                ),
                None,
            )
            if active is not None and _dict(active).get("status") == "True":
                continue
            generation = _dict(ac.get("metadata")).get("generation")
            cond: dict[str, Any] = {
                "type": "Active",
                "status": "True",
                "reason": "Active",
                "message": message,
                "lastTransitionTime": rfc3339(self._clock()),
            }
            if isinstance(generation, int):
                cond["observedGeneration"] = generation
            self.api.apply_status(
                ADMISSIONCHECKS,
                name,
                {
                    "apiVersion": f"{ADMISSIONCHECKS.group}/{ADMISSIONCHECKS.version}",
                    "kind": ADMISSIONCHECKS.kind,
                    "metadata": {"name": name},
                    "status": {"conditions": [cond]},
                },
                field_manager=self.field_manager,
                force=True,
            )
        return sorted(names)

    # ------------------------------------------------------------------ workloads

    def _gated(self, snapshot: WorkloadSnapshot) -> bool:
        return is_gated(
            self.gating_queues,
            namespace=snapshot.namespace,
            queue_name=snapshot.queue_name,
            cluster_queue=snapshot.cluster_queue,
        )

    def final_decision(self, snapshot: WorkloadSnapshot) -> CheckDecision | None:
        """The decision to write for ``snapshot``, or None to leave the check Pending (grace
        period running): ``decide``, then the policy of ``planner.recommend.admission``
        (gating only in opted-in queues, never blocking past the grace period). Never raises."""
        try:
            decision = self.decide(snapshot)
        except Exception as exc:
            _log.warning(
                "decide failed for workload %s/%s: %s", snapshot.namespace, snapshot.name, exc
            )
            decision = CheckDecision(state=CheckState.PENDING, message=f"planner error: {exc}")
        return final_decision(
            decision,
            gated=self._gated(snapshot),
            pending_since_s=snapshot.pending_since_s,
            now_s=self._clock(),
            grace_period_s=self.grace_period_s,
        )

    def reconcile_workload(self, workload: Mapping[str, Any], our_checks: Collection[str]) -> str:
        """Decide and write our checks on one workload; returns what happened: ``skipped``,
        ``waiting``, ``unchanged`` or the state written. Raises the client's errors."""
        view = workload_view(workload)
        if view.finished or not view.quota_reserved or not view.active:
            return "skipped"
        result = "skipped"
        for check_name, entry in check_entries(workload).items():
            if check_name not in our_checks or entry.get("state") != CheckState.PENDING.value:
                continue
            snapshot = workload_snapshot(workload, check_name)
            decision = self.final_decision(snapshot)
            if decision is None:
                result = "waiting"
                continue
            body = apply_body(workload, check_name, decision, now_s=self._clock())
            if body is None:
                result = "unchanged"
                continue
            self.api.apply_status(
                WORKLOADS,
                view.name,
                body,
                namespace=view.namespace,
                field_manager=self.field_manager,
                force=True,
            )
            result = decision.state.value
        return result

    def reconcile(
        self,
        workloads: Iterable[Mapping[str, Any]],
        admission_checks: Iterable[Mapping[str, Any]],
    ) -> ReconcileReport:
        """One pass: keep our AdmissionChecks active, then reconcile every workload (from the
        informer caches). Errors are collected per object, never raised."""
        report = ReconcileReport()
        checks = list(admission_checks)
        try:
            report.active_checks = self.mark_active(checks)
        except PlannerError as exc:
            report.errors.append(f"admission checks: {exc}")
            report.active_checks = self.our_checks(checks)
        ours = frozenset(report.active_checks)
        if not ours:
            return report
        for workload in workloads:
            try:
                result = self.reconcile_workload(workload, ours)
            except PlannerError as exc:
                report.errors.append(
                    f"workload {namespace_of(workload)}/{name_of(workload)}: {exc}"
                )
                continue
            if result == "waiting":
                report.waiting += 1
            elif result == "unchanged":
                report.unchanged += 1
            elif result != "skipped":
                report.written[result] = report.written.get(result, 0) + 1
        return report


# ---------------------------------------------------------------------------- job annotations

ANNOTATION_RUNTIME = "planner.llm/predicted-runtime-seconds"
ANNOTATION_ETA = "planner.llm/eta"
ANNOTATION_GPUS = "planner.llm/recommended-gpus"
ANNOTATION_PARALLELISM = "planner.llm/recommended-parallelism"

#: The resource of each job kind the planner annotates, by the kind's lower-case name.
KIND_RESOURCES: dict[str, Resource] = {
    "job": JOBS,
    "jobset": JOBSETS,
    "pytorchjob": PYTORCHJOBS,
    "trainjob": TRAINJOBS,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobHints:
    """Hints written as annotations on a job object (None: remove that annotation).

    ``predicted_runtime_s`` seconds; ``eta_s`` epoch seconds (written RFC 3339);
    ``recommended_gpus`` a count; ``recommended_parallelism`` e.g. ``"tp=8,pp=4,dp=16"``.
    """

    predicted_runtime_s: float | None = None
    eta_s: float | None = None
    recommended_gpus: int | None = None
    recommended_parallelism: str | None = None


def hint_annotations(hints: JobHints) -> dict[str, str | None]:
    """The ``planner.llm/*`` annotations for ``hints`` (None values delete the key)."""
    return {
        ANNOTATION_RUNTIME: f"{round(hints.predicted_runtime_s)}"
        if hints.predicted_runtime_s is not None
        else None,
        ANNOTATION_ETA: rfc3339(hints.eta_s) if hints.eta_s is not None else None,
        ANNOTATION_GPUS: str(hints.recommended_gpus)
        if hints.recommended_gpus is not None
        else None,
        ANNOTATION_PARALLELISM: hints.recommended_parallelism,
    }


def write_hints(api: KubeApi, job_id_: str, hints: JobHints) -> dict[str, Any]:
    """Annotate the job ``namespace/kind/name`` with ``hints`` (opt-in; JSON merge patch of
    ``metadata.annotations``: only the ``planner.llm/*`` keys change, others' annotations stay).
    Raises ``ValueError`` for a malformed id or kind, the client's errors otherwise."""
    parts = job_id_.split("/")
    if len(parts) != 3 or parts[1] not in KIND_RESOURCES or not parts[0] or not parts[2]:
        raise ValueError(f"not a Kubernetes job id (namespace/kind/name): {job_id_!r}")
    namespace, kind, name = parts
    body = {"metadata": {"annotations": hint_annotations(hints)}}
    return api.merge_patch(KIND_RESOURCES[kind], name, body, namespace=namespace)


__all__ = [
    "ANNOTATION_ETA",
    "ANNOTATION_GPUS",
    "ANNOTATION_PARALLELISM",
    "ANNOTATION_RUNTIME",
    "DEFAULT_CONTROLLER_NAME",
    "MAX_MESSAGE_CHARS",
    "AdmissionCheckController",
    "CheckDecision",
    "CheckState",
    "Decider",
    "JobHints",
    "ReconcileReport",
    "WorkloadSnapshot",
    "advisory_decider",
    "apply_body",
    "check_entries",
    "hint_annotations",
    "workload_snapshot",
    "write_hints",
]
