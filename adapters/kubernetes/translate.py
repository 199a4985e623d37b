"""Pure translators: Kubernetes API objects (plain dicts, as the API server sends them) into the
scheduler-neutral job model of :mod:`planner.specs.job`.

Nothing here does I/O; every function takes the objects it needs and never raises on odd input
(missing fields, wrong types, unknown GPU products): what cannot be read is left at its default.

Objects and versions (exact fields: ``tests/data/kubernetes/crds``):
``v1`` Node and Pod, ``batch/v1`` Job, ``jobset.x-k8s.io/v1alpha2`` JobSet,
``kubeflow.org/v1`` PyTorchJob (Training Operator v1.9), ``trainer.kubeflow.org/v1alpha1`` TrainJob
(Kubeflow Trainer v2; ``status.trainerStatus`` progress and ETA), ``kueue.x-k8s.io/v1beta2``
Workload, LocalQueue, ClusterQueue and ResourceFlavor.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from planner.specs.job import JobState, JobStatus, NodeState

SCHEDULER = "kubernetes"

#: Extended resources that count as GPUs, in the order they are looked up.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "gpu.intel.com/i915")

#: Node labels naming the GPU product (NVIDIA GPU feature discovery, AMD node labeller, GKE, EKS).
GPU_PRODUCT_LABELS = (
    "nvidia.com/gpu.product",
    "amd.com/gpu.product-name",
    "beta.amd.com/gpu.product-name",
    "cloud.google.com/gke-accelerator",
    "k8s.amazonaws.com/accelerator",
)

#: Node labels that place a node in the network/NVLink topology, when present.
TOPOLOGY_LABELS = (
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.clique",
    "network.topology.nvidia.com/accelerator",
    "network.topology.nvidia.com/block",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/datacenter",
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
)

#: Annotation carrying what the job trains (see :func:`description_fields`).
SCENARIO_ANNOTATION = "planner.llm/scenario"
TRACE_ANNOTATION = "planner.llm/trace"
TRACE_META_ANNOTATION = "planner.llm/trace-meta"
#: Prefix of the pseudo path under which an inline scenario annotation is read back.
ANNOTATION_SCHEME = "k8s-annotation:"
CONFIGMAP_SCHEME = "k8s-configmap:"

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

# Kinds (lower case, as in job ids) of the job objects this adapter reports.
KIND_JOB = "job"
KIND_JOBSET = "jobset"
KIND_PYTORCHJOB = "pytorchjob"
KIND_TRAINJOB = "trainjob"
JOB_KINDS = (KIND_TRAINJOB, KIND_JOBSET, KIND_PYTORCHJOB, KIND_JOB)

_POD_LABELS = {
    KIND_JOBSET: "jobset.sigs.k8s.io/jobset-name",
    KIND_TRAINJOB: "jobset.sigs.k8s.io/jobset-name",  # a TrainJob runs as a JobSet of its name
    KIND_PYTORCHJOB: "training.kubeflow.org/job-name",
    KIND_JOB: "batch.kubernetes.io/job-name",
}

# ------------------------------------------------------------------------------ small readers


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj["metadata"]`` or an empty mapping."""
    return _map(obj.get("metadata"))


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` ("" when missing)."""
    return _str(metadata(obj).get("name"))


def namespace_of(obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` ("" for cluster-scoped objects)."""
    return _str(metadata(obj).get("namespace"))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.labels`` with non-string values dropped."""
    return {k: v for k, v in _map(metadata(obj).get("labels")).items() if isinstance(v, str)}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` with non-string values dropped."""
    raw = _map(metadata(obj).get("annotations"))
    return {k: v for k, v in raw.items() if isinstance(v, str)}


_SUFFIXES = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]{0,2})$")


def parse_quantity(value: object) -> float | None:
    """A Kubernetes resource quantity (``8``, ``"8"``, ``"500m"``, ``"16Gi"``, ``"1e3"``) as a
    float in the base unit; None when it is not a quantity."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None or match.group(2) not in _SUFFIXES:
        return None
    return float(match.group(1)) * _SUFFIXES[match.group(2)]


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp (``metav1.Time``/``MicroTime``) as epoch seconds; None if absent or
    unparseable."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def gpus_in(resources: Mapping[str, Any]) -> int:
    """GPUs in a ``{resource: quantity}`` map (requests or limits); 0 when none or unreadable."""
    total = 0.0
    for key in GPU_RESOURCES:
        qty = parse_quantity(resources.get(key))
        if qty is not None and qty > 0:
            total += qty
    return int(total)


def container_gpus(container: Mapping[str, Any]) -> int:
    """GPUs one container asks for: its requests, else its limits (extended resources default
    their request to the limit)."""
    resources = _map(container.get("resources"))
    requested = gpus_in(_map(resources.get("requests")))
    return requested or gpus_in(_map(resources.get("limits")))


def pod_spec_gpus(pod_spec: Mapping[str, Any]) -> int:
    """GPUs one pod of this spec needs: sum over its containers (init containers run before and
    release theirs, so the larger of that sum and the largest init container)."""
    main = sum(container_gpus(_map(c)) for c in _list(pod_spec.get("containers")))
    init = max((container_gpus(_map(c)) for c in _list(pod_spec.get("initContainers"))), default=0)
    return max(main, init)


def template_gpus(template: Mapping[str, Any]) -> int:
    """GPUs per pod of a ``PodTemplateSpec``."""
    return pod_spec_gpus(_map(template.get("spec")))


def gpu_product_of(labels: Mapping[str, str]) -> str | None:
    """GPU product named by node labels or a node selector (first of ``GPU_PRODUCT_LABELS``)."""
    for key in GPU_PRODUCT_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def node_topology(node: Mapping[str, Any]) -> dict[str, str]:
    """The topology labels of ``TOPOLOGY_LABELS`` a node carries."""
    labels = labels_of(node)
    return {key: labels[key] for key in TOPOLOGY_LABELS if labels.get(key)}


def condition(obj: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    """The ``status.conditions[]`` entry of type ``ctype``, or None."""
    for cond in _list(_map(obj.get("status")).get("conditions")):
        cmap = _map(cond)
        if cmap.get("type") == ctype:
            return cmap
    return None


def condition_true(obj: Mapping[str, Any], ctype: str) -> bool:
    """True when condition ``ctype`` exists with status ``"True"``."""
    cond = condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def _condition_time(cond: Mapping[str, Any] | None) -> float | None:
    if cond is None:
        return None
    return parse_time(cond.get("lastTransitionTime")) or parse_time(cond.get("lastUpdateTime"))


# ------------------------------------------------------------------------------ pods and nodes


def pod_is_terminal(pod: Mapping[str, Any]) -> bool:
    """True for pods that hold no resources any more (Succeeded/Failed)."""
    return _map(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """GPUs the pod requests."""
    return pod_spec_gpus(_map(pod.get("spec")))


def pod_node(pod: Mapping[str, Any]) -> str:
    """The node the pod is bound to ("" when not scheduled)."""
    return _str(_map(pod.get("spec")).get("nodeName"))


def node_state(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = ()) -> NodeState:
    """A Node (``v1``) as :class:`NodeState`.

    ``num_gpus`` is the allocatable GPU count (capacity when allocatable is missing);
    ``num_gpus_allocated`` sums the GPU requests of the non-terminal ``pods`` bound to it.
    ``state``: ``ready``, ``not-ready``, ``unknown`` (no Ready condition), with ``+cordoned``
    when ``spec.unschedulable``. ``gpu_type`` is the GPU product label (see
    ``GPU_PRODUCT_LABELS``), as the label spells it; ``partitions`` the node pool label, if any.
    """
    name = name_of(node)
    status = _map(node.get("status"))
    allocatable = _map(status.get("allocatable"))
    capacity = _map(status.get("capacity"))
    num_gpus = gpus_in(allocatable) if allocatable else gpus_in(capacity)
    ready = condition(node, "Ready")
    if ready is None:
        state = "unknown"
    else:
        state = "ready" if ready.get("status") == "True" else "not-ready"
    if _map(node.get("spec")).get("unschedulable") is True:
        state += "+cordoned"
    used = sum(pod_gpus(p) for p in pods if pod_node(p) == name and not pod_is_terminal(p))
    cpus = parse_quantity(allocatable.get("cpu") or capacity.get("cpu"))
    memory = parse_quantity(allocatable.get("memory") or capacity.get("memory"))
    labels = labels_of(node)
    pool = next(
        (
            labels[k]
            for k in (
                "cloud.google.com/gke-nodepool",
                "eks.amazonaws.com/nodegroup",
                "karpenter.sh/nodepool",
                "agentpool",
            )
            if labels.get(k)
        ),
        None,
    )
    return NodeState(
        name=name,
        state=state,
        num_gpus=num_gpus,
        num_gpus_allocated=used,
        gpu_type=gpu_product_of(labels),
        num_cpus=int(cpus) if cpus is not None else 0,
        memory_bytes=memory if memory is not None else 0.0,
        partitions=(pool,) if pool else (),
    )


# ------------------------------------------------------------------------------ job objects


@dataclass(frozen=True, slots=True)
class PodGroup:
    """One group of identical pods of a job: ``count`` pods of ``gpus_per_pod`` GPUs each."""

    name: str
    count: int
    gpus_per_pod: int
    template: Mapping[str, Any] = field(default_factory=dict)


def job_kind(obj: Mapping[str, Any]) -> str | None:
    """The job kind (``KIND_*``) of an object by its apiVersion/kind, or None."""
    api_version = _str(obj.get("apiVersion"))
    kind = _str(obj.get("kind"))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return {
        ("batch", "Job"): KIND_JOB,
        ("jobset.x-k8s.io", "JobSet"): KIND_JOBSET,
        ("kubeflow.org", "PyTorchJob"): KIND_PYTORCHJOB,
        ("trainer.kubeflow.org", "TrainJob"): KIND_TRAINJOB,
    }.get((group, kind))


def pod_groups(kind: str, obj: Mapping[str, Any]) -> list[PodGroup]:
    """The pod groups a job object asks for, from its spec (main group first)."""
    spec = _map(obj.get("spec"))
    if kind == KIND_JOB:
        template = _map(spec.get("template"))
        count = _int(spec.get("parallelism"), 1)
        return [PodGroup("main", count, template_gpus(template), template)]
    if kind == KIND_JOBSET:
        groups = []
        for rjob in _list(spec.get("replicatedJobs")):
            rmap = _map(rjob)
            job_spec = _map(_map(rmap.get("template")).get("spec"))
            template = _map(job_spec.get("template"))
            count = _int(rmap.get("replicas"), 1) * _int(job_spec.get("parallelism"), 1)
            groups.append(
                PodGroup(_str(rmap.get("name")), count, template_gpus(template), template)
            )
        # The group with the most GPUs is the trainer (initialisers/launchers come first).
        return sorted(groups, key=lambda g: -g.count * g.gpus_per_pod)
    if kind == KIND_PYTORCHJOB:
        groups = []
        specs = _map(spec.get("pytorchReplicaSpecs"))
        for rtype in sorted(specs, key=lambda t: (t != "Master", t)):
            rmap = _map(specs[rtype])
            template = _map(rmap.get("template"))
            groups.append(
                PodGroup(rtype, _int(rmap.get("replicas"), 1), template_gpus(template), template)
            )
        return groups
    if kind == KIND_TRAINJOB:
        trainer = _map(spec.get("trainer"))
        resources = _map(trainer.get("resourcesPerNode"))
        gpus = gpus_in(_map(resources.get("requests"))) or gpus_in(_map(resources.get("limits")))
        container = {k: trainer[k] for k in ("image", "command", "args") if k in trainer}
        template = {"spec": {"containers": [{"name": "node", **container}]}}
        return [PodGroup("node", _int(trainer.get("numNodes"), 1), gpus, template)]
    return []


def workload_pod_groups(workload: Mapping[str, Any]) -> list[PodGroup]:
    """Pod groups of a Kueue Workload: ``spec.podSets``, with the admitted counts when admitted."""
    admitted = {
        _str(_map(a).get("name")): _int(_map(a).get("count"), -1)
        for a in _list(_map(_map(workload.get("status")).get("admission")).get("podSetAssignments"))
    }
    groups = []
    for pod_set in _list(_map(workload.get("spec")).get("podSets")):
        pmap = _map(pod_set)
        name = _str(pmap.get("name")) or "main"
        count = _int(pmap.get("count"), 1)
        if admitted.get(name, -1) >= 0:
            count = admitted[name]
        template = _map(pmap.get("template"))
        groups.append(PodGroup(name, count, template_gpus(template), template))
    return groups


def owner_key(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, name)`` of the controlling owner reference (kind lower case), or None."""
    refs = [_map(r) for r in _list(metadata(obj).get("ownerReferences"))]
    chosen = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if chosen is None:
        return None
    return _str(chosen.get("kind")).lower(), _str(chosen.get("name"))


def job_id(namespace: str, kind: str, name: str) -> str:
    """The planner's id of a Kubernetes job: ``namespace/kind/name``."""
    return f"{namespace}/{kind}/{name}"


def is_child_job(kind: str, obj: Mapping[str, Any]) -> bool:
    """True for objects another reported job owns (a JobSet's Jobs, a TrainJob's JobSet)."""
    owner = owner_key(obj)
    if owner is None:
        return False
    if kind == KIND_JOB:
        return owner[0] in (KIND_JOBSET, KIND_PYTORCHJOB, KIND_TRAINJOB, "cronjob")
    if kind == KIND_JOBSET:
        return owner[0] == KIND_TRAINJOB
    return False


def pods_of_job(kind: str, obj: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The pods of a job object, by the labels its controller puts on them (same namespace)."""
    label = _POD_LABELS.get(kind)
    if label is None:
        return []
    name, namespace = name_of(obj), namespace_of(obj)
    picked = []
    for pod in pods:
        labels = labels_of(pod)
        value = labels.get(label)
        if value is None and kind == KIND_JOB:
            value = labels.get("job-name")
        if value == name and namespace_of(pod) == namespace:
            picked.append(pod)
    return picked


# ------------------------------------------------------------------------------ status


def _job_own_status(kind: str, obj: Mapping[str, Any]) -> tuple[JobStatus, str, float | None]:
    """Status, reason and end time from the job object's own conditions; status UNKNOWN when
    they say nothing final (running or pending is decided from pods and the workload)."""
    if kind == KIND_PYTORCHJOB:
        finals = (("Succeeded", JobStatus.COMPLETED), ("Failed", JobStatus.FAILED))
    elif kind == KIND_JOBSET:
        finals = (("Completed", JobStatus.COMPLETED), ("Failed", JobStatus.FAILED))
    else:  # batch Job and TrainJob both use Complete/Failed
        finals = (("Complete", JobStatus.COMPLETED), ("Failed", JobStatus.FAILED))
    for ctype, final in finals:
        cond = condition(obj, ctype)
        if cond is not None and cond.get("status") == "True":
            reason = _str(cond.get("reason"))
            status = final
            if final is JobStatus.FAILED and reason == "DeadlineExceeded":
                status = JobStatus.TIMEOUT
            end = _condition_time(cond) or parse_time(_map(obj.get("status")).get("completionTime"))
            return status, reason, end
    # A suspended job is queued (Kueue suspends jobs until it admits them): decided by the caller.
    running = condition_true(obj, "Running") or condition_true(obj, "Restarting")
    if kind == KIND_PYTORCHJOB and running and not condition_true(obj, "Suspended"):
        return JobStatus.RUNNING, "", None
    return JobStatus.UNKNOWN, "", None


def _suspended(kind: str, obj: Mapping[str, Any]) -> bool:
    spec = _map(obj.get("spec"))
    if kind == KIND_PYTORCHJOB:
        return _map(spec.get("runPolicy")).get("suspend") is True
    return spec.get("suspend") is True


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadView:
    """What the planner reads from a Kueue Workload (``kueue.x-k8s.io/v1beta2``)."""

    namespace: str
    name: str
    queue_name: str
    cluster_queue: str
    quota_reserved: bool
    admitted: bool
    finished: bool
    evicted: bool
    active: bool
    reason: str
    message: str
    admitted_time_s: float | None
    finished_time_s: float | None
    max_execution_time_s: float | None
    flavors: tuple[str, ...]
    pod_groups: tuple[PodGroup, ...]


def workload_view(workload: Mapping[str, Any]) -> WorkloadView:
    """Read a Workload's queue, admission and conditions."""
    spec = _map(workload.get("spec"))
    status = _map(workload.get("status"))
    admission = _map(status.get("admission"))
    flavors: list[str] = []
    for assignment in _list(admission.get("podSetAssignments")):
        for flavor in _map(_map(assignment).get("flavors")).values():
            if isinstance(flavor, str) and flavor not in flavors:
                flavors.append(flavor)
    quota = condition(workload, "QuotaReserved")
    admitted = condition(workload, "Admitted")
    finished = condition(workload, "Finished")
    evicted = condition(workload, "Evicted")
    pending_cond = quota if quota is not None and quota.get("status") != "True" else None
    if evicted is not None and evicted.get("status") == "True":
        pending_cond = evicted
    elif pending_cond is None and admitted is not None and admitted.get("status") != "True":
        pending_cond = admitted
    max_exec = spec.get("maximumExecutionTimeSeconds")
    return WorkloadView(
        namespace=namespace_of(workload),
        name=name_of(workload),
        queue_name=_str(spec.get("queueName")),
        cluster_queue=_str(admission.get("clusterQueue")),
        quota_reserved=quota is not None and quota.get("status") == "True",
        admitted=admitted is not None and admitted.get("status") == "True",
        finished=finished is not None and finished.get("status") == "True",
        evicted=evicted is not None and evicted.get("status") == "True",
        active=spec.get("active") is not False,
        reason=_str(pending_cond.get("reason")) if pending_cond else "",
        message=_str(pending_cond.get("message")) if pending_cond else "",
        admitted_time_s=_condition_time(admitted)
        if admitted and admitted.get("status") == "True"
        else None,
        finished_time_s=_condition_time(finished) if finished else None,
        max_execution_time_s=float(max_exec) if isinstance(max_exec, int) else None,
        flavors=tuple(flavors),
        pod_groups=tuple(workload_pod_groups(workload)),
    )


# ------------------------------------------------------------------------------ description


def _scenario_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def description_fields(
    kind: str, obj: Mapping[str, Any], main_template: Mapping[str, Any] | None
) -> tuple[str, str | None, str | None, dict[str, str]]:
    """``(comment, command, batch_script, inline)`` that tell the planner what the job trains.

    In order (see ``planner.service.describe``):

    1. Annotation ``planner.llm/scenario``:
       * an absolute path (``/shared/scenarios/llama.yaml``): a file the planner can read
         (mounted into its pod); comment ``planner:scenario=PATH``;
       * ``configmap:NAME/KEY``: key KEY of ConfigMap NAME in the job's namespace; comment
         ``planner:scenario=k8s-configmap:NAMESPACE/NAME/KEY``;
       * anything else is the scenario itself, inline YAML or JSON; comment
         ``planner:scenario=k8s-annotation:NAMESPACE/KIND/NAME@DIGEST`` and ``inline`` maps that
         pseudo path to the text (:meth:`KubernetesSource.read_text_file` serves it; the digest
         makes the planner re-describe the job when the annotation changes).
    2. The main container's command and args (``shlex``-joined into ``command``; the script of a
       ``sh -c``/``bash -c`` command also into ``batch_script``): Megatron-LM arguments there are
       found as on Slurm.

    Annotations ``planner.llm/trace`` and ``planner.llm/trace-meta`` (paths) become
    ``planner:trace=``/``planner:trace-meta=`` tokens of the comment.
    """
    annotations = annotations_of(obj)
    namespace, name = namespace_of(obj), name_of(obj)
    tokens: list[str] = []
    inline: dict[str, str] = {}
    scenario = annotations.get(SCENARIO_ANNOTATION, "").strip()
    if scenario:
        if scenario.startswith("/") and not any(c.isspace() for c in scenario):
            tokens.append(f"planner:scenario={scenario}")
        elif scenario.startswith("configmap:") and not any(c.isspace() for c in scenario):
            ref = scenario.removeprefix("configmap:")
            tokens.append(f"planner:scenario={CONFIGMAP_SCHEME}{namespace}/{ref}")
        else:
            path = f"{ANNOTATION_SCHEME}{namespace}/{kind}/{name}@{_scenario_digest(scenario)}"
            inline[path] = scenario
            tokens.append(f"planner:scenario={path}")
    for key, token in ((TRACE_ANNOTATION, "trace"), (TRACE_META_ANNOTATION, "trace-meta")):
        value = annotations.get(key, "").strip()
        if value and not any(c.isspace() for c in value):
            tokens.append(f"planner:{token}={value}")
    command, script = _main_command(main_template)
    return " ".join(tokens), command, script, inline


def _main_command(template: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    if not template:
        return None, None
    containers = [_map(c) for c in _list(_map(template.get("spec")).get("containers"))]
    if not containers:
        return None, None
    main = next((c for c in containers if container_gpus(c) > 0), containers[0])
    argv = [a for a in _list(main.get("command")) + _list(main.get("args")) if isinstance(a, str)]
    if not argv:
        return None, None
    script = None
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-c", "-lc", "-ec", "-xc") and i <= 1:
            script = argv[i + 1]
            break
    return shlex.join(argv), script


# ------------------------------------------------------------------------------ progress


@dataclass(frozen=True, slots=True)
class TrainerProgress:
    """A TrainJob's own progress report (``status.trainerStatus``, Trainer v2.2+, alpha)."""

    progress_ratio: float | None
    remaining_s: float | None
    updated_s: float | None
    metrics: tuple[tuple[str, str], ...]


def trainer_progress(trainjob: Mapping[str, Any]) -> TrainerProgress | None:
    """``status.trainerStatus`` of a TrainJob: ``progressPercentage`` (0..100) as a 0..1 ratio,
    ``estimatedRemainingSeconds``, ``lastUpdatedTime`` and ``metrics[]{name,value}``."""
    status = _map(_map(trainjob.get("status")).get("trainerStatus"))
    if not status:
        return None
    pct = status.get("progressPercentage")
    ratio = min(1.0, max(0.0, pct / 100.0)) if isinstance(pct, int | float) and pct >= 0 else None
    remaining = status.get("estimatedRemainingSeconds")
    metrics = tuple(
        (_str(_map(m).get("name")), _str(_map(m).get("value")))
        for m in _list(status.get("metrics"))
        if _str(_map(m).get("name"))
    )
    return TrainerProgress(
        progress_ratio=ratio,
        remaining_s=float(remaining)
        if isinstance(remaining, int | float) and remaining >= 0
        else None,
        updated_s=parse_time(status.get("lastUpdatedTime")),
        metrics=metrics,
    )


# ------------------------------------------------------------------------------ job state


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """Objects related to one job object, gathered by the caller.

    ``pods``: the job's pods; ``workload``: its Kueue Workload, if any; ``local_queues``:
    ``{(namespace, name): cluster queue}``; ``queue_positions``: ``{(namespace, workload name):
    position in its ClusterQueue}``; ``node_products``: ``{node: GPU product label}``;
    ``flavor_products``: ``{ResourceFlavor name: GPU product label from its nodeLabels}``.
    """

    pods: Sequence[Mapping[str, Any]] = ()
    workload: Mapping[str, Any] | None = None
    local_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)
    queue_positions: Mapping[tuple[str, str], int] = field(default_factory=dict)
    node_products: Mapping[str, str] = field(default_factory=dict)
    flavor_products: Mapping[str, str] = field(default_factory=dict)


def _deadline_s(kind: str, obj: Mapping[str, Any]) -> float | None:
    spec = _map(obj.get("spec"))
    if kind == KIND_PYTORCHJOB:
        spec = _map(spec.get("runPolicy"))
    value = spec.get("activeDeadlineSeconds")
    return float(value) if isinstance(value, int) and value > 0 else None


def _template_product(template: Mapping[str, Any]) -> str | None:
    spec = _map(template.get("spec"))
    selector = {k: v for k, v in _map(spec.get("nodeSelector")).items() if isinstance(v, str)}
    product = gpu_product_of(selector)
    if product:
        return product
    affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = _map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in _list(required.get("nodeSelectorTerms")):
        for expr in _list(_map(term).get("matchExpressions")):
            emap = _map(expr)
            values = _list(emap.get("values"))
            if (
                emap.get("key") in GPU_PRODUCT_LABELS
                and emap.get("operator") == "In"
                and len(values) == 1
                and isinstance(values[0], str)
            ):
                return values[0]
    return None


def job_state(kind: str, obj: Mapping[str, Any], context: JobContext, *, cluster: str) -> JobState:
    """One job object (``kind`` one of ``JOB_KINDS``) as :class:`JobState`.

    * ``job_id`` ``namespace/kind/name``; ``account`` the namespace; ``partition`` the Kueue
      ClusterQueue (admission, else the LocalQueue's); ``queue_name`` the LocalQueue.
    * status: the job's final conditions (Complete/Succeeded → completed, Failed → failed,
      DeadlineExceeded → timeout) win; else a deactivated Workload → suspended; a Workload not
      admitted (or a suspended job) → pending, with the Workload's condition reason; else
      running when a pod runs, pending otherwise.
    * GPUs: while running, the GPU requests of the job's non-terminal bound pods
      (``gpus_allocated``); otherwise the requested total, from the Workload's pod sets when
      there is one, else from the job's spec. ``num_nodes``: distinct nodes of the running pods,
      else the number of pods asked for.
    * ``gpu_type``: GPU product of the nodes its pods run on, else the product selected by the
      pod template (nodeSelector/affinity), else that of the admitted ResourceFlavor.
    * times: submit = ``creationTimestamp``; start = job ``status.startTime``, else the Workload's
      Admitted time, else the earliest pod start; end = the final condition's time.
    * limit: ``activeDeadlineSeconds``, else the Workload's ``maximumExecutionTimeSeconds``.
    * description: :func:`description_fields`; progress: :func:`trainer_progress` (TrainJob).
    """
    meta = metadata(obj)
    namespace, name = namespace_of(obj), name_of(obj)
    status_doc = _map(obj.get("status"))
    groups = pod_groups(kind, obj)
    view = workload_view(context.workload) if context.workload is not None else None
    if (view is not None and view.pod_groups and kind != KIND_TRAINJOB) or (
        view is not None and view.pod_groups and not any(g.gpus_per_pod for g in groups)
    ):
        requested_groups = list(view.pod_groups)
    else:
        requested_groups = groups
    requested_gpus = sum(g.count * g.gpus_per_pod for g in requested_groups)
    requested_pods = sum(g.count for g in requested_groups)

    live_pods = [p for p in context.pods if not pod_is_terminal(p)]
    running = [p for p in live_pods if _map(p.get("status")).get("phase") == "Running"]
    bound = [p for p in live_pods if pod_node(p)]

    status, reason, end_time = _job_own_status(kind, obj)
    if status in (JobStatus.UNKNOWN, JobStatus.RUNNING):
        if view is not None and not view.active and not view.finished:
            status, reason = JobStatus.SUSPENDED, "WorkloadDeactivated"
        elif view is not None and view.finished:
            status, reason = JobStatus.COMPLETED, "WorkloadFinished"
            end_time = view.finished_time_s
        elif view is not None and not view.admitted:
            status = JobStatus.PENDING
            reason = view.reason or ("Evicted" if view.evicted else "WaitingForAdmission")
        elif _suspended(kind, obj):
            status, reason = JobStatus.PENDING, "Suspended"
        elif running or status is JobStatus.RUNNING:
            status = JobStatus.RUNNING
        else:
            status, reason = JobStatus.PENDING, reason or "PodsNotRunning"

    if status is JobStatus.RUNNING and bound:
        num_gpus = sum(pod_gpus(p) for p in bound)
        allocated = True
    else:
        num_gpus, allocated = requested_gpus, False
    node_pods = bound if status.is_active else [p for p in context.pods if pod_node(p)]
    node_list = tuple(sorted({pod_node(p) for p in node_pods}))
    num_nodes = len(node_list) if status is JobStatus.RUNNING and node_list else requested_pods

    gpu_type = next(
        (context.node_products[n] for n in node_list if context.node_products.get(n)), None
    )
    if gpu_type is None and requested_groups:
        main = max(requested_groups, key=lambda g: g.count * g.gpus_per_pod)
        gpu_type = _template_product(main.template)
    if gpu_type is None and view is not None:
        gpu_type = next(
            (context.flavor_products[f] for f in view.flavors if f in context.flavor_products),
            None,
        )

    start = parse_time(status_doc.get("startTime"))
    if start is None and view is not None:
        start = view.admitted_time_s
    if start is None:
        pod_starts = [parse_time(_map(p.get("status")).get("startTime")) for p in context.pods]
        start = min((t for t in pod_starts if t is not None), default=None)
    if status is JobStatus.PENDING:
        start = None
    if end_time is None and not status.is_active:
        end_time = parse_time(status_doc.get("completionTime"))

    labels = labels_of(obj)
    queue_name = (view.queue_name if view else "") or labels.get(QUEUE_LABEL, "")
    cluster_queue = (view.cluster_queue if view else "") or context.local_queues.get(
        (namespace, queue_name), ""
    )
    limit = _deadline_s(kind, obj)
    if limit is None and view is not None:
        limit = view.max_execution_time_s
    if limit is None:
        max_exec = _int(labels.get(MAX_EXEC_TIME_LABEL), 0)
        limit = float(max_exec) if max_exec > 0 else None

    main_template = groups[0].template if groups else None
    if kind == KIND_PYTORCHJOB:
        main_template = next((g.template for g in groups if g.name == "Master"), main_template)
    comment, command, script, _inline = description_fields(kind, obj, main_template)

    progress = trainer_progress(obj) if kind == KIND_TRAINJOB else None
    position = (
        context.queue_positions.get((namespace, view.name))
        if view is not None and status is JobStatus.PENDING
        else None
    )
    return JobState(
        scheduler=SCHEDULER,
        cluster=cluster,
        job_id=job_id(namespace, kind, name),
        name=name,
        user=annotations_of(obj).get("planner.llm/user", ""),
        partition=cluster_queue,
        account=namespace,
        status=status,
        state_reason=reason,
        node_list=node_list,
        num_nodes=num_nodes,
        num_gpus=num_gpus,
        gpus_allocated=allocated,
        gpu_type=gpu_type,
        submit_time_s=parse_time(meta.get("creationTimestamp")),
        start_time_s=start,
        end_time_s=end_time if not status.is_active else None,
        time_limit_s=limit,
        command=command,
        batch_script=script,
        comment=comment,
        namespace=namespace,
        queue_name=queue_name,
        queue_position=position,
        progress_ratio=progress.progress_ratio if progress else None,
        reported_remaining_s=progress.remaining_s if progress else None,
        progress_updated_s=progress.updated_s if progress else None,
    )


def flavor_product(flavor: Mapping[str, Any]) -> str | None:
    """GPU product a Kueue ResourceFlavor selects through ``spec.nodeLabels``."""
    labels = {
        k: v
        for k, v in _map(_map(flavor.get("spec")).get("nodeLabels")).items()
        if isinstance(v, str)
    }
    return gpu_product_of(labels)


def local_queue_target(local_queue: Mapping[str, Any]) -> str:
    """The ClusterQueue a LocalQueue points at (``spec.clusterQueue``)."""
    return _str(_map(local_queue.get("spec")).get("clusterQueue"))


def pending_positions(pending: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """``{(namespace, workload): positionInClusterQueue}`` from a Kueue visibility
    ``PendingWorkloadsSummary`` (``visibility.kueue.x-k8s.io/v1beta2``)."""
    out: dict[tuple[str, str], int] = {}
    for item in _list(pending.get("items")):
        imap = _map(item)
        pos = imap.get("positionInClusterQueue")
        if isinstance(pos, int) and not isinstance(pos, bool) and name_of(imap):
            out[(namespace_of(imap), name_of(imap))] = pos
    return out
