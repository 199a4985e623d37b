"""Kubernetes adapter: Nodes, Pods, batch Jobs, JobSet, PyTorchJob, TrainJob and Kueue, through
the official ``kubernetes`` client.

* :class:`KubernetesSource` implements :class:`planner.ports.SchedulerSource` over informer
  caches (list + watch); the translators in :mod:`adapters.kubernetes.translate` are pure.
* :class:`AdmissionCheckController` writes the planner's Kueue AdmissionCheck states;
  :func:`write_hints` annotates job objects (opt-in).
* :class:`LeaseElector` elects one leader among replicas over a coordination.k8s.io Lease.
"""

from adapters.kubernetes.admission import (
    DEFAULT_CONTROLLER_NAME,
    AdmissionCheckController,
    CheckDecision,
    CheckState,
    Decider,
    JobHints,
    ReconcileReport,
    WorkloadSnapshot,
    advisory_decider,
    apply_body,
    hint_annotations,
    workload_snapshot,
    write_hints,
)
from adapters.kubernetes.client import (
    FIELD_MANAGER,
    ApiPermanentError,
    ApiTemporaryError,
    ConflictError,
    GoneError,
    KubeApi,
    NotFoundError,
    Resource,
)
from adapters.kubernetes.informer import Informer, InformerStats
from adapters.kubernetes.leader import LeaseElector
from adapters.kubernetes.source import DEFAULT_RESOURCES, KubernetesSource
from adapters.kubernetes.translate import (
    SCENARIO_ANNOTATION,
    job_state,
    node_state,
    parse_quantity,
    trainer_progress,
)

__all__ = [
    "DEFAULT_CONTROLLER_NAME",
    "DEFAULT_RESOURCES",
    "FIELD_MANAGER",
    "SCENARIO_ANNOTATION",
    "AdmissionCheckController",
    "ApiPermanentError",
    "ApiTemporaryError",
    "CheckDecision",
    "CheckState",
    "ConflictError",
    "Decider",
    "GoneError",
    "Informer",
    "InformerStats",
    "JobHints",
    "KubeApi",
    "KubernetesSource",
    "LeaseElector",
    "NotFoundError",
    "ReconcileReport",
    "Resource",
    "WorkloadSnapshot",
    "advisory_decider",
    "apply_body",
    "hint_annotations",
    "job_state",
    "node_state",
    "parse_quantity",
    "trainer_progress",
    "workload_snapshot",
    "write_hints",
]
