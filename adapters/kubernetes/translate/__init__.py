"""Pure translators: Kubernetes API objects (plain dicts, as the API server sends them) into the
scheduler-neutral job model of :mod:`planner.specs.job`, one module per concern.

* :mod:`~adapters.kubernetes.translate.objects`: metadata, conditions, quantities, times, GPUs;
* :mod:`~adapters.kubernetes.translate.nodes`: ``v1`` Nodes and the pods bound to them;
* :mod:`~adapters.kubernetes.translate.jobs`: batch Job, JobSet, PyTorchJob and TrainJob;
* :mod:`~adapters.kubernetes.translate.kueue`: Workloads, LocalQueues, ResourceFlavors.

Nothing here does I/O; every function takes the objects it needs and never raises on odd input
(missing fields, wrong types, unknown GPU products): what cannot be read is left at its default.

Objects and versions (exact fields: ``tests/data/kubernetes/crds``):
``v1`` Node and Pod, ``batch/v1`` Job, ``jobset.x-k8s.io/v1alpha2`` JobSet,
``kubeflow.org/v1`` PyTorchJob (Training Operator v1.9), ``trainer.kubeflow.org/v1alpha1`` TrainJob
(Kubeflow Trainer v2; ``status.trainerStatus`` progress and ETA), ``kueue.x-k8s.io/v1beta2``
Workload, LocalQueue, ClusterQueue and ResourceFlavor.
"""

from adapters.kubernetes.translate.jobs import (
    ANNOTATION_SCHEME,
    CONFIGMAP_SCHEME,
    JOB_KINDS,
    KIND_JOB,
    KIND_JOBSET,
    KIND_PYTORCHJOB,
    KIND_TRAINJOB,
    SCENARIO_ANNOTATION,
    TRACE_ANNOTATION,
    TRACE_META_ANNOTATION,
    JobContext,
    TrainerProgress,
    description_fields,
    is_child_job,
    job_id,
    job_state,
    pod_groups,
    pods_of_job,
    trainer_progress,
)
from adapters.kubernetes.translate.kueue import (
    MAX_EXEC_TIME_LABEL,
    QUEUE_LABEL,
    WorkloadView,
    flavor_product,
    local_queue_target,
    pending_positions,
    workload_pod_groups,
    workload_view,
)
from adapters.kubernetes.translate.nodes import (
    TOPOLOGY_LABELS,
    node_state,
    node_topology,
    pod_gpus,
    pod_is_terminal,
    pod_node,
)
from adapters.kubernetes.translate.objects import (
    GPU_PRODUCT_LABELS,
    GPU_RESOURCES,
    SCHEDULER,
    PodGroup,
    annotations_of,
    as_int,
    as_list,
    as_map,
    as_str,
    condition,
    condition_time,
    condition_true,
    container_gpus,
    gpu_product_of,
    gpus_in,
    labels_of,
    metadata,
    name_of,
    namespace_of,
    owner_key,
    parse_quantity,
    parse_time,
    pod_spec_gpus,
    template_gpus,
)

__all__ = [
    "ANNOTATION_SCHEME",
    "CONFIGMAP_SCHEME",
    "GPU_PRODUCT_LABELS",
    "GPU_RESOURCES",
    "JOB_KINDS",
    "KIND_JOB",
    "KIND_JOBSET",
    "KIND_PYTORCHJOB",
    "KIND_TRAINJOB",
    "MAX_EXEC_TIME_LABEL",
    "QUEUE_LABEL",
    "SCENARIO_ANNOTATION",
    "SCHEDULER",
    "TOPOLOGY_LABELS",
    "TRACE_ANNOTATION",
    "TRACE_META_ANNOTATION",
    "JobContext",
    "PodGroup",
    "TrainerProgress",
    "WorkloadView",
    "annotations_of",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "condition",
    "condition_time",
    "condition_true",
    "container_gpus",
    "description_fields",
    "flavor_product",
    "gpu_product_of",
    "gpus_in",
    "is_child_job",
    "job_id",
    "job_state",
    "labels_of",
    "local_queue_target",
    "metadata",
    "name_of",
    "namespace_of",
    "node_state",
    "node_topology",
    "owner_key",
    "parse_quantity",
    "parse_time",
    "pending_positions",
    "pod_gpus",
    "pod_groups",
    "pod_is_terminal",
    "pod_node",
    "pod_spec_gpus",
    "pods_of_job",
    "template_gpus",
    "trainer_progress",
    "workload_pod_groups",
    "workload_view",
]
