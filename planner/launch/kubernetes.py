"""Kubernetes manifests -> the programs their training container runs, with the allocation the
manifest asks for (:func:`plan_from_manifest`).

The training object is found among the manifest's documents (a file may also hold an etcd
Service, a ConfigMap, the training runtime a TrainJob names; ``kind: List`` items are read as
documents), in this order of kinds: TrainJob (``trainer.kubeflow.org``, see
:mod:`planner.launch.kubernetes_trainjob`), PyTorchJob (``kubeflow.org/v1``), JobSet
(``jobset.x-k8s.io``), Job (``batch/v1``); among objects of one kind, the first whose training
container asks for GPUs, else the first with a command. Its training container's ``command`` +
``args`` (``$(VAR)`` references expanded as the kubelet does; ``bash -c '<script>'`` runs the
script) go to :func:`planner.launch.shell.plan_from_command` with the container's environment
(the launch's env, the container's ``env`` values, then what the controller injects) and its
``workingDir`` (else the launch's work_dir).

Allocation (one pod is one node for these jobs): ``launch.num_nodes`` = training pods,
``hardware.gpus_per_node`` = GPUs of a training pod, ``hardware.num_gpus`` = GPUs of all
training pods; each sourced ``"<source>: <field path> (<value>)"``.

* PyTorchJob (Training Operator v1, kubeflow/training-operator release-1.9 at 078ec30ff266,
  ``pkg/controller.v1/pytorch/envvar.go``, ``master.go``, ``elastic.go``,
  ``pkg/apis/kubeflow.org/v1/pytorch_defaults.go``): pods = the replicas of
  ``spec.pytorchReplicaSpecs`` (``Master``, ``Worker``; replica type names in any case; default
  1 each); the container is read from the Master template (else Worker), the one named
  ``pytorch`` (else the first asking for GPUs, else the first). The operator injects
  ``PYTHONUNBUFFERED=1``; ``PET_NPROC_PER_NODE`` = ``spec.nprocPerNode`` (default ``auto``;
  ``elasticPolicy.nProcPerNode`` wins); ``PET_NNODES`` = all replicas, or ``min:max`` with an
  ``elasticPolicy`` (with ``PET_RDZV_BACKEND`` (default c10d), ``PET_RDZV_ENDPOINT``,
  ``PET_MAX_RESTARTS``, ``PET_RDZV_ID``, ``PET_RDZV_CONF``); with a Master:
  ``MASTER_ADDR``/``PET_MASTER_ADDR`` = ``<job>-master-0``, ``MASTER_PORT``/
  ``PET_MASTER_PORT`` = the ``pytorchjob-port`` (default 23456), ``WORLD_SIZE`` = replicas x
  the integer nprocPerNode (1 when it is not an integer), ``RANK`` = ``PET_NODE_RANK`` = 0 (the
  Master pod's values). ``PET_NPROC_PER_NODE`` ``auto``/``gpu`` is given as the pod's GPU count
  (what torchrun resolves them to).
* JobSet (``jobset.x-k8s.io/v1alpha2``): each replicated job runs ``replicas`` x
  ``template.spec.parallelism`` pods; training pods are those of the replicated jobs asking for
  GPUs; the container is read from the one asking the most GPUs per pod (the first of equals).
  Its Jobs are Indexed: ``JOB_COMPLETION_INDEX`` = 0.
* Job (``batch/v1``): ``spec.parallelism`` pods (default 1; at most ``completions``);
  ``JOB_COMPLETION_INDEX`` = 0 for an Indexed Job.

A manifest with no training object of these kinds, or whose object has no container with a
command, gives a plan without invocations (the description then says no reader recognises
it). A field of the wrong type raises ``SpecError`` naming ``<source>: <field path>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from planner.launch.kubernetes_pods import (
    Container,
    ManifestField,
    TrainingPods,
    command_text,
    expand_references,
    main_container,
    pod_containers,
    pod_gpus,
    upsert_env,
)
from planner.launch.kubernetes_trainjob import trainjob_pods
from planner.launch.shell import LaunchPlan, plan_from_command
from planner.launch.types import Facts, Launch, LaunchFiles, MemoryFiles

__all__ = ["plan_from_manifest"]

_PYTORCH_PORT = 23456
_KINDS = (
    ("TrainJob", "trainer.kubeflow.org"),
    ("PyTorchJob", "kubeflow.org"),
    ("JobSet", "jobset.x-k8s.io"),
    ("Job", "batch"),
)
_MAX_LIST_DEPTH = 4


def _documents(manifest: Sequence[object], depth: int = 0) -> list[Mapping[str, object]]:
    """The mapping documents of the manifest, ``kind: List`` items in place of their list."""
    found: list[Mapping[str, object]] = []
    for document in manifest:
        if not isinstance(document, Mapping):
            continue
        items = document.get("items")
        if document.get("kind") == "List" and isinstance(items, list) and depth < _MAX_LIST_DEPTH:
            found.extend(_documents(items, depth + 1))
        else:
            found.append(document)
    return found


def _group(document: Mapping[str, object]) -> str | None:
    version = document.get("apiVersion")
    if not isinstance(version, str):
        return None
    return version.rpartition("/")[0] if "/" in version else ""


def _with_env(
    container: Container | None, injected: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The container's env entries, then the controller's (an injected name replaces the
    container's entry of that name: the later entry wins in the pod)."""
    env = list(container.env) if container else []
    for name, value in injected:
        upsert_env(env, name, value)
    return env


def _training_pods(
    kind: str,
    source: str,
    containers: Sequence[Container],
    *,
    preferred: str = "",
    pods: int,
    pods_source: str,
    num_gpus: int,
    injected: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
) -> TrainingPods:
    container = main_container(containers, preferred)
    gpus = pod_gpus(containers)
    gpus_source = ""
    if gpus:
        gpus_source = f"{source}: " + " + ".join(c.gpus_path for c in containers if c.gpus)
    said = list(notes)
    if container is not None and container.env_unknown:
        unknown = ", ".join(container.env_unknown)
        said.append(f"{source}: {container.path}.env {unknown}: set from valueFrom, unknown here")
    if container is not None and container.env_from:
        said.append(f"{source}: {container.path}.envFrom: those variables are unknown here")
    if container is not None and container.args and not container.command:
        said.append(
            f"{source}: {container.path} has args but no command: the image's entrypoint "
            "runs them; read as the command line"
        )
    return TrainingPods(
        kind=kind,
        container=container,
        command=(container.command + container.args) if container else (),
        env=tuple(_with_env(container, injected)),
        cwd=container.working_dir if container else None,
        where=f"{source}: {container.path}" if container else source,
        pods=pods,
        pods_source=f"{source}: {pods_source}",
        gpus_per_pod=gpus,
        gpus_source=gpus_source,
        num_gpus=num_gpus,
        notes=tuple(said),
    )


def _pytorchjob(job: ManifestField) -> TrainingPods:
    spec = job.get("spec")
    name = job.get("metadata").get("name").text() or "pytorchjob"
    replica_specs = spec.get("pytorchReplicaSpecs")
    by_type = {key.capitalize(): replica_specs.get(key) for key in replica_specs.names()}
    order = sorted(by_type, key=lambda t: (t != "Master", t != "Worker", t))
    if not order:
        return TrainingPods(kind="PyTorchJob", container=None)
    counts: list[tuple[ManifestField, int, list[Container]]] = []
    for rtype in order:
        replica = by_type[rtype]
        count = replica.get("replicas").count()
        counts.append(
            (replica, 1 if count is None else count, pod_containers(replica.get("template")))
        )
    pods = sum(count for _, count, _ in counts)
    main_containers = counts[0][2]
    gpus = pod_gpus(main_containers)
    elastic = spec.get("elasticPolicy")
    nproc = spec.get("nprocPerNode").text() or "auto"
    elastic_nproc = elastic.get("nProcPerNode").count()
    if elastic_nproc is not None:
        nproc = str(elastic_nproc)
    injected: list[tuple[str, str]] = [("PYTHONUNBUFFERED", "1")]
    if "Master" in by_type:
        port = str(_port(by_type["Master"]) or _PYTORCH_PORT)
        address = f"{name}-master-0"
        world = pods * (int(nproc) if nproc.isdigit() else 1)
        injected += [
            ("MASTER_PORT", port),
            ("PET_MASTER_PORT", port),
            ("MASTER_ADDR", address),
            ("PET_MASTER_ADDR", address),
            ("WORLD_SIZE", str(world)),
            ("RANK", "0"),
            ("PET_NODE_RANK", "0"),
        ]
    # torchrun resolves auto/gpu to the GPUs the pod sees: its GPU limit.
    injected.append(
        ("PET_NPROC_PER_NODE", str(gpus) if nproc in {"auto", "gpu"} and gpus else nproc)
    )
    notes: list[str] = []
    if elastic.value is not None:
        injected += _elastic_env(elastic, by_type, name, notes)
    else:
        injected.append(("PET_NNODES", str(pods)))
    return _training_pods(
        "PyTorchJob",
        job.source,
        main_containers,
        preferred="pytorch",
        pods=pods,
        pods_source=" + ".join(
            f"{replica.get('replicas').path} ({count})" for replica, count, _ in counts
        ),
        num_gpus=sum(count * pod_gpus(containers) for _, count, containers in counts),
        injected=injected,
        notes=notes,
    )


def _port(replica: ManifestField) -> int | None:
    """The ``pytorchjob-port`` of the replica's ``pytorch`` container, when it names one."""
    for item in replica.get("template").get("spec").get("containers").items():
        if item.get("name").text() != "pytorch":
            continue
        for port in item.get("ports").items():
            if port.get("name").text() == "pytorchjob-port":
                return port.get("containerPort").count()
    return None


def _elastic_env(
    elastic: ManifestField, by_type: Mapping[str, ManifestField], name: str, notes: list[str]
) -> list[tuple[str, str]]:
    low = elastic.get("minReplicas").count()
    high = elastic.get("maxReplicas").count()
    worker = by_type.get("Worker")
    workers = worker.get("replicas").count() if worker is not None else None
    low = low if low is not None else high if high is not None else workers or 1
    high = high if high is not None else low
    host = elastic.get("rdzvHost").text() or f"{name}-worker-0"
    port = elastic.get("rdzvPort").count()
    if port is None and worker is not None:
        port = _port(worker)
    env = [
        ("PET_RDZV_ENDPOINT", f"{host}:{port or _PYTORCH_PORT}"),
        ("PET_RDZV_BACKEND", elastic.get("rdzvBackend").text() or "c10d"),
        ("PET_NNODES", f"{low}:{high}"),
    ]
    restarts = elastic.get("maxRestarts").count()
    if restarts is not None:
        env.append(("PET_MAX_RESTARTS", str(restarts)))
    rdzv_id = elastic.get("rdzvId").text()
    if rdzv_id:
        env.append(("PET_RDZV_ID", rdzv_id))
    conf = [
        f"{item.get('key').text() or ''}={item.get('value').text() or ''}"
        for item in elastic.get("rdzvConf").items()
    ]
    if conf:
        env.append(("PET_RDZV_CONF", ",".join(conf)))
    if elastic.get("standalone").flag():
        env.append(("PET_STANDALONE", ""))
    if low != high:
        notes.append(
            f"{elastic.label}: elastic job ({low} to {high} nodes); planned with the pods its "
            "replicas ask for"
        )
    return env


def _jobset(job: ManifestField) -> TrainingPods:
    groups: list[tuple[int, list[Container], str]] = []
    for rjob in job.get("spec").get("replicatedJobs").items():
        job_spec = rjob.get("template").get("spec")
        replicas = rjob.get("replicas").count()
        parallelism = job_spec.get("parallelism").count()
        count = (1 if replicas is None else replicas) * (1 if parallelism is None else parallelism)
        label = f"{rjob.get('replicas').path} x {job_spec.get('parallelism').path} ({count})"
        groups.append((count, pod_containers(job_spec.get("template")), label))
    if not groups:
        return TrainingPods(kind="JobSet", container=None)
    training = [group for group in groups if pod_gpus(group[1]) > 0] or groups[:1]
    main = max(training, key=lambda group: pod_gpus(group[1]))
    return _training_pods(
        "JobSet",
        job.source,
        main[1],
        pods=sum(group[0] for group in training),
        pods_source=" + ".join(group[2] for group in training),
        num_gpus=sum(group[0] * pod_gpus(group[1]) for group in training),
        injected=[("JOB_COMPLETION_INDEX", "0")],
    )


def _job(job: ManifestField) -> TrainingPods:
    spec = job.get("spec")
    parallelism = spec.get("parallelism").count()
    completions = spec.get("completions").count()
    pods = 1 if parallelism is None else parallelism
    if completions is not None:
        pods = min(pods, completions)
    containers = pod_containers(spec.get("template"))
    indexed = spec.get("completionMode").text() == "Indexed"
    return _training_pods(
        "Job",
        job.source,
        containers,
        pods=pods,
        pods_source=f"{spec.get('parallelism').path} ({pods})",
        num_gpus=pods * pod_gpus(containers),
        injected=[("JOB_COMPLETION_INDEX", "0")] if indexed else [],
    )


def _product(pods: str, gpus: str) -> str:
    """``pods x gpus`` with a shared ``<source>: `` written once."""
    head, sep, rest = pods.partition(": ")
    if sep and gpus.startswith(head + ": "):
        return f"{head}: {rest} x {gpus[len(head) + 2 :]}"
    return f"{pods} x {gpus}"


def _allocation(training: TrainingPods) -> Facts:
    facts = Facts()
    if training.pods > 0:
        facts.set("launch.num_nodes", training.pods, training.pods_source)
    if training.gpus_per_pod > 0:
        facts.set("hardware.gpus_per_node", training.gpus_per_pod, training.gpus_source)
    if training.num_gpus > 0:
        source = training.num_gpus_source or _product(training.pods_source, training.gpus_source)
        facts.set("hardware.num_gpus", training.num_gpus, source)
    image = training.container.image if training.container is not None else None
    if image:
        facts.set("launch.container_image", image, f"{training.where}.image")
    for note in training.notes:
        facts.note(note)
    return facts


def _select(documents: Sequence[Mapping[str, object]], source: str) -> TrainingPods | None:
    """The training object's pods: by kind (module docstring), the first with GPUs, else the
    first with a command."""
    readers: dict[str, Callable[[ManifestField], TrainingPods]] = {
        "PyTorchJob": _pytorchjob,
        "JobSet": _jobset,
        "Job": _job,
        "TrainJob": lambda job: trainjob_pods(job, documents, source),
    }
    for kind, group in _KINDS:
        candidates: list[TrainingPods] = []
        for index, document in enumerate(documents):
            found = _group(document)
            if document.get("kind") != kind or (found is not None and found != group):
                continue
            label = source if len(documents) == 1 else f"{source} (document {index + 1})"
            candidates.append(readers[kind](ManifestField(document, "", label)))
        with_command = [c for c in candidates if c.container is not None and c.command]
        chosen = next((c for c in with_command if c.num_gpus > 0), None)
        if chosen is None and with_command:
            chosen = with_command[0]
        if chosen is not None:
            return chosen
        if candidates:
            return candidates[0]
    return None


def plan_from_manifest(
    manifest: Sequence[Mapping[str, object]],
    *,
    source: str,
    launch: Launch,
    files: LaunchFiles,
) -> LaunchPlan:
    """The programs a Kubernetes manifest's training container runs (module docstring).

    ``manifest``: the parsed documents (other objects may sit beside the training object);
    ``source``: how the manifest is cited (``job.yaml``); ``launch``: the launch (its ``env``
    under the container's, its ``work_dir`` when the container names no ``workingDir``);
    ``files``: what the command's scripts and configs are read through.

    Returns the shell layer's plan for the container's command with the manifest's allocation
    (``launch.num_nodes``, ``hardware.gpus_per_node``, ``hardware.num_gpus``), or a plan with
    no invocations when the manifest holds no training container. Raises ``SpecError`` (a
    ``PlannerError``) naming ``<source>: <field path>`` for a field of the wrong type.
    """
    documents = _documents(manifest)
    training = _select(documents, source)
    if training is None or training.container is None or not training.command:
        allocation = _allocation(training) if training is not None else Facts()
        return LaunchPlan(allocation=allocation, files=MemoryFiles(fallback=files))
    env = dict(launch.env)
    for name, value in training.env:
        env[name] = expand_references(value, env)
    argv = [expand_references(word, env) for word in training.command]
    return plan_from_command(
        command_text(argv),
        source=training.where,
        env=env,
        cwd=training.cwd or launch.work_dir,
        files=files,
        allocation=_allocation(training),
        per_node=True,
    )
