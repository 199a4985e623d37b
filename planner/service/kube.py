"""Kubernetes in the service: the source, leader election, the AdmissionCheck and hint annotations.

``build_kubernetes`` turns ``settings.kubernetes`` into a :class:`KubernetesRuntime`:

* a ``KubernetesSource`` (informer caches of Nodes, Pods, Jobs, JobSets, PyTorchJobs, TrainJobs
  and Kueue objects) registered with the ingest loop like the Slurm source;
* a ``LeaseElector`` (coordination.k8s.io Lease): only the leader runs the ingest loop and
  writes; every replica serves reads from the shared store (PostgreSQL for HA);
* on the leader, after each ingest cycle: the Kueue AdmissionCheck controller (opt-in) with a
  decider reading the stored predictions, and the ``planner.llm/*`` hint annotations (opt-in),
  written only when they change.

The decider (:func:`decide_from_store`) never blocks admission on its own: no prediction or a
stale source gives ``Pending``, which the controller turns into ``Ready`` after its grace period;
``Rejected`` (predicted out of memory) takes effect only for queues that opted in to gating.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.kubernetes import (
    DEFAULT_RESOURCES,
    AdmissionCheckController,
    CheckDecision,
    CheckState,
    JobHints,
    KubeApi,
    KubernetesSource,
    LeaseElector,
    WorkloadSnapshot,
    write_hints,
)
from adapters.kubernetes.client import ADMISSIONCHECKS
from adapters.kubernetes.config import api_client_from_config
from planner.errors import PlannerError, SourcePermanentError
from planner.service.models import JobRow
from planner.service.settings import KubernetesSettings, Toggle
from planner.service.store import Store

log = logging.getLogger(__name__)

SCHEDULER = "kubernetes"


def kubernetes_wanted(settings: KubernetesSettings) -> bool:
    """``on``, or ``auto`` inside a pod or with a kubeconfig named in settings or KUBECONFIG."""
    if settings.enabled == Toggle.OFF:
        return False
    if settings.enabled == Toggle.ON:
        return True
    return bool(
        os.environ.get("KUBERNETES_SERVICE_HOST")
        or settings.kubeconfig
        or os.environ.get("KUBECONFIG")
    )


def _fmt_hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def prediction_message(row: JobRow) -> str:
    """The advisory text of a job: predicted runtime, step time, MFU, memory and fit."""
    pred = row.prediction or {}
    parts = []
    step = pred.get("iteration_time_s")
    if isinstance(step, int | float) and row.train_iters:
        parts.append(f"predicted runtime {_fmt_hours(step * row.train_iters)}")
    if isinstance(step, int | float):
        parts.append(f"{step:.3f} s/iteration")
    mfu = pred.get("mfu")
    if isinstance(mfu, int | float):
        parts.append(f"MFU {100 * mfu:.0f}%")
    memory = pred.get("memory_per_gpu_bytes")
    if isinstance(memory, int | float):
        fits = "fits" if pred.get("fits_in_memory") else "does NOT fit"
        parts.append(f"{memory / 2**30:.1f} GiB/GPU ({fits})")
    remaining = ((row.eta or {}).get("remaining_s") or {}).get("p50")
    if isinstance(remaining, int | float):
        parts.append(f"ETA {_fmt_hours(remaining)}")
    return "llm-capacity-planner: " + ", ".join(parts)


def decide_from_store(
    store: Store, *, is_fresh: Callable[[], bool]
) -> Callable[[WorkloadSnapshot], CheckDecision]:
    """A decider over the stored predictions (see the module docstring)."""

    def decide(workload: WorkloadSnapshot) -> CheckDecision:
        if not workload.job_id:
            return CheckDecision(state=CheckState.PENDING, message="owner job unknown")
        if not is_fresh():
            return CheckDecision(state=CheckState.PENDING, message="predictions are stale")
        rows = store.find_jobs(workload.job_id, scheduler=SCHEDULER)
        if not rows or rows[0].prediction is None:
            reason = rows[0].description_detail if rows else "job not ingested yet"
            return CheckDecision(state=CheckState.PENDING, message=f"no prediction: {reason}")
        row = rows[0]
        message = prediction_message(row)
        if row.prediction is not None and row.prediction.get("fits_in_memory") is False:
            return CheckDecision(state=CheckState.REJECTED, message=message)
        return CheckDecision(state=CheckState.READY, message=message)

    return decide


@dataclass
class KubernetesRuntime:
    """The Kubernetes pieces of one service process (see the module docstring)."""

    source: KubernetesSource
    elector: LeaseElector | None = None
    controller: AdmissionCheckController | None = None
    hints_api: KubeApi | None = None
    _written_hints: dict[str, JobHints] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        """True without leader election, else whether this replica holds the Lease."""
        return self.elector is None or self.elector.is_leader

    def start(self) -> None:
        """Start the informers and the elector."""
        self.source.start()
        if self.elector is not None:
            self.elector.start()

    def stop(self) -> None:
        """Stop the elector (releasing the Lease) and the informers."""
        if self.elector is not None:
            self.elector.stop()
        self.source.stop()

    def after_cycle(self, store: Store) -> None:
        """Leader only: reconcile the AdmissionCheck and write changed hint annotations."""
        if not self.is_leader:
            return
        if self.controller is not None:
            workloads = self.source.informers.get("workloads")
            checks = self.source.informers.get(ADMISSIONCHECKS.key)
            if workloads is not None and checks is not None:
                report = self.controller.reconcile(workloads.items(), checks.items())
                if report.errors:
                    log.warning(
                        "admission check: %d errors: %s", len(report.errors), report.errors[:3]
                    )
        if self.hints_api is not None:
            self._write_hints(store)

    def _write_hints(self, store: Store) -> None:
        assert self.hints_api is not None
        for row in store.list_jobs(active_only=True):
            if row.scheduler != SCHEDULER or row.prediction is None:
                continue
            step = row.prediction.get("iteration_time_s")
            completion = ((row.eta or {}).get("completion_time_s") or {}).get("p50")
            hints = JobHints(
                predicted_runtime_s=step * row.train_iters
                if isinstance(step, int | float) and row.train_iters
                else None,
                eta_s=completion if isinstance(completion, int | float) else None,
                recommended_gpus=(row.state or {}).get("num_gpus") or None,
            )
            if self._written_hints.get(row.job_id) == hints:
                continue
            try:
                write_hints(self.hints_api, row.job_id, hints)
            except (PlannerError, ValueError) as exc:
                log.warning("hints for %s not written: %s", row.job_id, exc)
                continue
            self._written_hints[row.job_id] = hints


def build_kubernetes(
    settings: KubernetesSettings,
    store: Store,
    *,
    is_fresh: Callable[[], bool],
    api_client: Any = None,
) -> KubernetesRuntime | None:
    """The runtime for ``settings`` (None when Kubernetes is off); ``api_client`` overrides the
    configuration lookup (tests). Raises ``SourcePermanentError`` without a configuration."""
    if api_client is None:
        if not kubernetes_wanted(settings):
            return None
        try:
            api_client = api_client_from_config(settings.kubeconfig)
        except SourcePermanentError as exc:
            if settings.enabled == Toggle.ON:
                raise
            log.warning("source not found: kubernetes (%s)", exc)
            return None
    admission = settings.admission_check
    resources = (*DEFAULT_RESOURCES, ADMISSIONCHECKS) if admission.enabled else DEFAULT_RESOURCES
    source = KubernetesSource(
        api_client, cluster=settings.cluster, namespace=settings.namespace, resources=resources
    )
    elector = None
    if settings.leader_election:
        elector = LeaseElector(
            api_client,
            name=settings.lease_name,
            namespace=settings.lease_namespace,
            identity=settings.identity or socket.gethostname(),
        )
    controller = None
    if admission.enabled:
        controller = AdmissionCheckController(
            api_client,
            controller_name=admission.controller_name,
            decide=decide_from_store(store, is_fresh=is_fresh),
            gating_queues=admission.gating_queues,
            grace_period_s=admission.grace_period_s,
        )
    hints_api = KubeApi(api_client) if settings.hint_annotations else None
    return KubernetesRuntime(
        source=source, elector=elector, controller=controller, hints_api=hints_api
    )
