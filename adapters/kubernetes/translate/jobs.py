"""Job objects as :class:`~planner.specs.job.JobState`: ``batch/v1`` Job,
``jobset.x-k8s.io/v1alpha2`` JobSet, ``kubeflow.org/v1`` PyTorchJob (Training Operator v1.9) and
``trainer.kubeflow.org/v1alpha1`` TrainJob (Kubeflow Trainer v2; ``status.trainerStatus`` progress
and ETA), with their pods and Kueue Workload."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from adapters.kubernetes.translate.kueue import MAX_EXEC_TIME_LABEL, QUEUE_LABEL, workload_view
from adapters.kubernetes.translate.nodes import pod_gpus, pod_is_terminal, pod_node
from adapters.kubernetes.translate.objects import (
    GPU_PRODUCT_LABELS,
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
    parse_time,
    template_gpus,
)
from planner.specs.job import JobState, JobStatus

#: Annotation carrying what the job trains (see :func:`description_fields`).
SCENARIO_ANNOTATION = "planner.llm/scenario"
TRACE_ANNOTATION = "planner.llm/trace"
TRACE_META_ANNOTATION = "planner.llm/trace-meta"
#: Prefix of the pseudo path under which an inline scenario annotation is read back.
ANNOTATION_SCHEME = "k8s-annotation:"
CONFIGMAP_SCHEME = "k8s-configmap:"

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


def pod_groups(kind: str, obj: Mapping[str, Any]) -> list[PodGroup]:
    """The pod groups a job object asks for, from its spec (main group first)."""
    spec = as_map(obj.get("spec"))
    if kind == KIND_JOB:
        template = as_map(spec.get("template"))
        count = as_int(spec.get("parallelism"), 1)
        return [PodGroup("main", count, template_gpus(template), template)]
    if kind == KIND_JOBSET:
        groups = []
        for rjob in as_list(spec.get("replicatedJobs")):
            rmap = as_map(rjob)
            job_spec = as_map(as_map(rmap.get("template")).get("spec"))
            template = as_map(job_spec.get("template"))
            count = as_int(rmap.get("replicas"), 1) * as_int(job_spec.get("parallelism"), 1)
            groups.append(
                PodGroup(as_str(rmap.get("name")), count, template_gpus(template), template)
            )
        # The group with the most GPUs is the trainer (initialisers/launchers come first).
        return sorted(groups, key=lambda g: -g.count * g.gpus_per_pod)
    if kind == KIND_PYTORCHJOB:
        groups = []
        specs = as_map(spec.get("pytorchReplicaSpecs"))
        for rtype in sorted(specs, key=lambda t: (t != "Master", t)):
            rmap = as_map(specs[rtype])
            template = as_map(rmap.get("template"))
            groups.append(
                PodGroup(rtype, as_int(rmap.get("replicas"), 1), template_gpus(template), template)
            )
        return groups
    if kind == KIND_TRAINJOB:
        trainer = as_map(spec.get("trainer"))
        resources = as_map(trainer.get("resourcesPerNode"))
        gpus = gpus_in(as_map(resources.get("requests"))) or gpus_in(
            as_map(resources.get("limits"))
        )
        container = {k: trainer[k] for k in ("image", "command", "args") if k in trainer}
        template = {"spec": {"containers": [{"name": "node", **container}]}}
        return [PodGroup("node", as_int(trainer.get("numNodes"), 1), gpus, template)]
    return []


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
            reason = as_str(cond.get("reason"))
            status = final
            if final is JobStatus.FAILED and reason == "DeadlineExceeded":
                status = JobStatus.TIMEOUT
            end = condition_time(cond) or parse_time(
                as_map(obj.get("status")).get("completionTime")
            )
            return status, reason, end
    # A suspended job is queued (Kueue suspends jobs until it admits them): decided by the caller.
    running = condition_true(obj, "Running") or condition_true(obj, "Restarting")
    if kind == KIND_PYTORCHJOB and running and not condition_true(obj, "Suspended"):
        return JobStatus.RUNNING, "", None
    return JobStatus.UNKNOWN, "", None


def _suspended(kind: str, obj: Mapping[str, Any]) -> bool:
    spec = as_map(obj.get("spec"))
    if kind == KIND_PYTORCHJOB:
        return as_map(spec.get("runPolicy")).get("suspend") is True
    return spec.get("suspend") is True


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


MAX_LAUNCH_MANIFEST_CHARS: Final = 256 * 1024
"""Longest reduced object kept as a job's ``launch_manifest`` (JSON characters)."""


def launch_manifest(obj: Mapping[str, Any]) -> str | None:
    """The object reduced to how its pods start, as JSON for ``JobState.launch_manifest``:
    ``apiVersion``, ``kind``, ``metadata.name``/``namespace`` and ``spec`` without ``suspend``
    (``spec.suspend``, ``spec.runPolicy.suspend``: Kueue flips them at admission, which does
    not change what the job trains). None when it does not serialise or exceeds
    ``MAX_LAUNCH_MANIFEST_CHARS``."""
    meta = as_map(obj.get("metadata"))
    spec = {k: v for k, v in as_map(obj.get("spec")).items() if k != "suspend"}
    run_policy = as_map(spec.get("runPolicy"))
    if "suspend" in run_policy:
        spec["runPolicy"] = {k: v for k, v in run_policy.items() if k != "suspend"}
    reduced = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "spec": spec,
    }
    try:
        text = json.dumps(reduced, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= MAX_LAUNCH_MANIFEST_CHARS else None


def _main_command(template: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    if not template:
        return None, None
    containers = [as_map(c) for c in as_list(as_map(template.get("spec")).get("containers"))]
    if not containers:
        return None, None
    main = next((c for c in containers if container_gpus(c) > 0), containers[0])
    argv = [
        a for a in as_list(main.get("command")) + as_list(main.get("args")) if isinstance(a, str)
    ]
    if not argv:
        return None, None
    script = None
    for i, arg in enumerate(argv[:-1]):
        if arg in ("-c", "-lc", "-ec", "-xc") and i <= 1:
            script = argv[i + 1]
            break
    return shlex.join(argv), script


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
    status = as_map(as_map(trainjob.get("status")).get("trainerStatus"))
    if not status:
        return None
    pct = status.get("progressPercentage")
    ratio = min(1.0, max(0.0, pct / 100.0)) if isinstance(pct, int | float) and pct >= 0 else None
    remaining = status.get("estimatedRemainingSeconds")
    metrics = tuple(
        (as_str(as_map(m).get("name")), as_str(as_map(m).get("value")))
        for m in as_list(status.get("metrics"))
        if as_str(as_map(m).get("name"))
    )
    return TrainerProgress(
        progress_ratio=ratio,
        remaining_s=float(remaining)
        if isinstance(remaining, int | float) and remaining >= 0
        else None,
        updated_s=parse_time(status.get("lastUpdatedTime")),
        metrics=metrics,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """Objects related to one job object, gathered by the caller.

    ``pods``: the job's pods; ``workload``: its Kueue Workload, if any; ``local_queues``:
    ``{(namespace, name): cluster queue}``; ``queue_positions``: ``{(namespace, workload name):
    position in its ClusterQueue}``; ``node_products``: ``{node: GPU product label}``;
    ``flavor_products``: ``{ResourceFlavor name: GPU product label from its nodeLabels}``;
    ``queue_products``: ``{ClusterQueue name: GPU product of its first flavor that selects one}``
    (what a pending Workload, not yet assigned a flavor, will most likely run on).
    """

    pods: Sequence[Mapping[str, Any]] = ()
    workload: Mapping[str, Any] | None = None
    local_queues: Mapping[tuple[str, str], str] = field(default_factory=dict)
    queue_positions: Mapping[tuple[str, str], int] = field(default_factory=dict)
    node_products: Mapping[str, str] = field(default_factory=dict)
    flavor_products: Mapping[str, str] = field(default_factory=dict)
    queue_products: Mapping[str, str] = field(default_factory=dict)


def _deadline_s(kind: str, obj: Mapping[str, Any]) -> float | None:
    spec = as_map(obj.get("spec"))
    if kind == KIND_PYTORCHJOB:
        spec = as_map(spec.get("runPolicy"))
    value = spec.get("activeDeadlineSeconds")
    return float(value) if isinstance(value, int) and value > 0 else None


def _template_product(template: Mapping[str, Any]) -> str | None:
    spec = as_map(template.get("spec"))
    selector = {k: v for k, v in as_map(spec.get("nodeSelector")).items() if isinstance(v, str)}
    product = gpu_product_of(selector)
    if product:
        return product
    affinity = as_map(as_map(spec.get("affinity")).get("nodeAffinity"))
    required = as_map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in as_list(required.get("nodeSelectorTerms")):
        for expr in as_list(as_map(term).get("matchExpressions")):
            emap = as_map(expr)
            values = as_list(emap.get("values"))
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
      pod template (nodeSelector/affinity), else that of the admitted ResourceFlavor, else
      (a Workload still waiting) that of its ClusterQueue's first GPU flavor.
    * times: submit = ``creationTimestamp``; start = job ``status.startTime``, else the Workload's
      Admitted time, else the earliest pod start; end = the final condition's time.
    * limit: ``activeDeadlineSeconds``, else the Workload's ``maximumExecutionTimeSeconds``.
    * description: :func:`description_fields`; progress: :func:`trainer_progress` (TrainJob).
    """
    meta = metadata(obj)
    namespace, name = namespace_of(obj), name_of(obj)
    status_doc = as_map(obj.get("status"))
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
    running = [p for p in live_pods if as_map(p.get("status")).get("phase") == "Running"]
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
        pod_starts = [parse_time(as_map(p.get("status")).get("startTime")) for p in context.pods]
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
    if gpu_type is None and status is JobStatus.PENDING:
        gpu_type = context.queue_products.get(cluster_queue)
    limit = _deadline_s(kind, obj)
    if limit is None and view is not None:
        limit = view.max_execution_time_s
    if limit is None:
        max_exec = as_int(labels.get(MAX_EXEC_TIME_LABEL), 0)
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
        launch_manifest=launch_manifest(obj),
    )
