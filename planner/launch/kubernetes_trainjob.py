"""Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``) -> the pods that train
and the command their ``node`` container runs.

A TrainJob names a training runtime (``spec.runtimeRef``: a ClusterTrainingRuntime, or a
namespaced TrainingRuntime) and may override its trainer (``spec.trainer``: image, command,
args, env, numNodes, numProcPerNode, resourcesPerNode). The runtime is taken from the manifest's
documents when they hold it (the service passes the runtime it fetched), else from the catalog
of the runtimes Kubeflow Trainer ships (``planner/launch/data/kubeflow_runtimes.yaml``).

How the controller combines them (kubeflow/trainer at 8c0f5059bd51,
``pkg/runtime/framework/plugins/jobset/builder.go`` ``Trainer``,
``pkg/runtime/framework/plugins/torch/torch.go`` ``EnforceMLPolicy``,
``pkg/runtime/framework/plugins/torch/torchtune.go``, ``pkg/runtime/framework/plugins/mpi/mpi.go``):

* the trainer is the replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step:
  trainer`` (else the one named ``node``), its container named ``node``; ``spec.trainer``'s
  image, command and args each replace the container's when set, its env entries are upserted;
* nodes: ``spec.trainer.numNodes``, else ``spec.mlPolicy.numNodes``, else 1; GPUs per node:
  ``spec.trainer.resourcesPerNode`` (requests, else limits), else the container's resources;
* torch policy, when the TrainJob has a trainer: ``PET_NNODES``, ``PET_NPROC_PER_NODE``
  (``numProcPerNode``, default ``auto``), ``PET_NODE_RANK`` and, unless the command is
  torchtune's ``tune run``, ``PET_MASTER_ADDR`` (``<job>-node-0-0.<job>``) and
  ``PET_MASTER_PORT`` (29500). A trainer command of exactly ``tune run`` is completed by the
  controller: rendezvous endpoint, recipe and ``--config`` chosen from nodes, processes and
  LoRA/QLoRA arguments, and the runtime's path overrides;
* mpi policy: the OpenMPI ``OMPI_MCA_*`` settings, slots per node = ``numProcPerNode`` (a
  runtime value of 1 becomes the GPU count when that is larger).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from planner.launch.data import load_data
from planner.launch.kubernetes_pods import (
    Container,
    ManifestField,
    TrainingPods,
    env_entries,
    main_container,
    pod_containers,
    resource_gpus,
    upsert_env,
)

__all__ = ["CATALOG_FILE", "catalog_runtime", "trainjob_pods"]

CATALOG_FILE = "kubeflow_runtimes.yaml"
"""The catalog of built-in ClusterTrainingRuntimes (package data of ``planner.launch.data``)."""

_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
_TRAINER_PORT = 29500
_TUNE_RUN = ("tune", "run")
_TUNE_IMMUTABLE = {
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
}


_DEFAULT_NODES = (
    "default of Kubeflow Trainer v2 (kubeflow/trainer/pkg/apis/trainer/v1alpha1/"
    "trainingruntime_types.go@8c0f5059bd51): mlPolicy.numNodes 1"
)


@dataclass(frozen=True, slots=True)
class _Runtime:
    """A training runtime: ``field`` (the object, from the manifest or built from the
    catalog), ``name`` and, for a built-in one, ``cited`` (``repo/path@commit``)."""

    field: ManifestField
    name: str
    cited: str = ""

    def cite(self, what: str, node: ManifestField | str) -> str:
        """Where the runtime's ``what`` comes from: ``catalog:<name> (<what>; <repo/path@commit>)``
        for a built-in runtime, else the field's label."""
        if self.cited:
            return f"catalog:{self.name} ({what}; {self.cited})"
        if isinstance(node, str):
            return f"{self.field.source}: {node}" if node else self.field.source
        return node.label


def catalog_runtime(name: str) -> tuple[Mapping[str, object], str] | None:
    """The built-in ClusterTrainingRuntime ``name`` as a runtime object (the fields this
    module reads, in the runtime's own shape) and its citation (``repo/path@commit``); None
    when the catalog has no runtime of that name."""
    entry = load_data(CATALOG_FILE).get(name)
    if not isinstance(entry, Mapping):
        return None
    source = entry.get("source")
    cited = "kubeflow/trainer manifests/base/runtimes"
    if isinstance(source, Mapping):
        commit = str(source.get("commit", ""))[:12]
        cited = f"{source.get('repo')}/{source.get('path')}@{commit}"
    container: dict[str, object] = {"name": "node"}
    for key in ("image", "command", "args"):
        if entry.get(key) is not None:
            container[key] = entry[key]
    env = entry.get("env")
    if isinstance(env, Mapping):
        container["env"] = [{"name": str(k), "value": str(v)} for k, v in env.items()]
    gpus = entry.get("gpus_per_node")
    if isinstance(gpus, int) and gpus > 0:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    policy = str(entry.get("ml_policy", "torch"))
    settings: dict[str, object] = {}
    if policy == "mpi":
        settings = {
            "numProcPerNode": entry.get("num_proc_per_node", 1),
            "runLauncherAsNode": entry.get("run_launcher_as_node", False),
        }
    trainer_job = {
        "name": entry.get("trainer_job", "node"),
        "template": {
            "metadata": {"labels": {_ANCESTOR_LABEL: "trainer"}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }
    runtime: dict[str, object] = {
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": entry.get("num_nodes", 1), policy: settings},
            "template": {"spec": {"replicatedJobs": [trainer_job]}},
        },
    }
    return runtime, cited


def _find_runtime(
    kind: str, name: str, documents: Sequence[Mapping[str, object]], source: str
) -> _Runtime | None:
    for index, document in enumerate(documents):
        meta = document.get("metadata")
        if document.get("kind") == kind and isinstance(meta, Mapping) and meta.get("name") == name:
            label = f"{source} (document {index + 1}: {kind} {name})"
            return _Runtime(ManifestField(document, "", label), name)
    if kind == "ClusterTrainingRuntime":
        found = catalog_runtime(name)
        if found is not None:
            return _Runtime(ManifestField(found[0], "", f"catalog:{name}"), name, found[1])
    return None


def _trainer_container(runtime: ManifestField) -> Container | None:
    jobs = runtime.get("spec").get("template").get("spec").get("replicatedJobs").items()
    labelled = [
        job
        for job in jobs
        if job.get("template").get("metadata").get("labels").get(_ANCESTOR_LABEL).text()
        == "trainer"
    ]
    named = [job for job in jobs if job.get("name").text() == "node"]
    chosen = labelled or named
    if not chosen:
        return None
    job = chosen[0]
    containers = pod_containers(job.get("template").get("spec").get("template"))
    return main_container(containers, "node")


def _cpus(resources: ManifestField) -> int:
    for section in ("requests", "limits"):
        text = resources.get(section).get("cpu").text()
        if text and text.isdigit():
            return int(text)
    return 0


def _enabled(args: Sequence[str], item: str) -> bool:
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and item in key and value.strip().lower() == "true":
            return True
    return False


def _tune_command(
    *,
    job: str,
    runtime_name: str,
    nodes: int,
    procs: int | None,
    gpus: int,
    args: Sequence[str],
    runtime_command: Sequence[str],
) -> tuple[str, ...]:
    """``tune run`` as the torch plugin completes it (``torchtune.go`` getRecipeAndConfig)."""
    qlora = not _enabled(args, "model.use_dora") and _enabled(args, "model.quantize_base")
    lora = any("model.lora_attn_modules" in arg for arg in args)
    recipe, suffix = "full_finetune_distributed", "_full"
    if nodes == 1 and (procs == 1 or gpus == 1):
        if qlora:
            recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
        elif lora:
            recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
        else:
            recipe, suffix = "full_finetune_single_device", "_full_single_device"
    elif nodes == 1 and qlora:
        recipe, suffix = "lora_finetune_distributed", "_qlora"
    elif nodes == 1 and lora:
        recipe, suffix = "lora_finetune_distributed", "_lora"
    elif nodes > 1:
        suffix = "_full_multinode"
    fields = runtime_name.split("-")
    model = f"{fields[1].replace('.', '_')}/{fields[2].upper()}" if len(fields) == 3 else ""
    command = list(_TUNE_RUN)
    if nodes > 1 or (procs is not None and procs > 1) or (procs is None and gpus > 1):
        command.append(f"--rdzv_endpoint={job}-node-0-0.{job}:{_TRAINER_PORT}")
    command += [recipe, "--config", model + suffix]
    command += [word for word in runtime_command if word.split("=")[0] in _TUNE_IMMUTABLE]
    return tuple(command)


@dataclass(frozen=True, slots=True)
class _Nodes:
    """How many nodes the trainer runs on and the GPUs of each, with their sources;
    ``resources``: the ``resourcesPerNode`` field the count came from (its CPUs size
    ``numProcPerNode: auto`` on CPU nodes); ``total_source``: the citation of the GPU total when
    a built-in runtime gives both numbers."""

    count: int
    count_source: str
    gpus: int
    gpus_source: str
    total_source: str
    resources: ManifestField


def _nodes(
    trainjob: ManifestField,
    trainer: ManifestField,
    runtime: _Runtime | None,
    policy: ManifestField,
    container: Container | None,
) -> _Nodes:
    """``spec.trainer.numNodes``, else the runtime's ``mlPolicy.numNodes``, else 1; GPUs per
    node from ``spec.trainer.resourcesPerNode`` (requests before limits, as the torch plugin's
    ``runtime.GetNumGPUPerNode`` reads them), else the runtime container's resources."""
    nodes = trainer.get("numNodes").count()
    nodes_source = trainer.get("numNodes").label
    if nodes is None and runtime is not None:
        nodes = policy.get("numNodes").count()
        nodes_source = runtime.cite(f"numNodes {nodes}", policy.get("numNodes"))
    if nodes is None:
        nodes, nodes_source = 1, _DEFAULT_NODES
    resources = trainer.get("resourcesPerNode")
    gpus, found = resource_gpus(resources, ("requests", "limits"))
    gpus_source = f"{found.label} ({gpus})" if found is not None else ""
    total_source = ""
    if not gpus and runtime is not None and container is not None and container.gpus:
        gpus = container.gpus
        gpus_source = runtime.cite(f"{gpus} GPUs per node", container.gpus_path)
        resources = ManifestField(None, "", trainjob.source)
        if runtime.cited and trainer.get("numNodes").value is None:
            total_source = runtime.cite(f"numNodes {nodes} x {gpus} GPUs per node", "")
    return _Nodes(nodes, nodes_source, gpus, gpus_source, total_source, resources)


def _trainer_env(
    base: Container, trainer: ManifestField, notes: list[str]
) -> list[tuple[str, str]]:
    """The container's env with ``spec.trainer.env`` upserted; names set through
    ``valueFrom`` are noted."""
    env = list(base.env)
    values, referenced = env_entries(trainer.get("env"))
    for name, value in values:
        upsert_env(env, name, value)
    unknown = [*base.env_unknown, *referenced]
    if unknown:
        notes.append(f"env {', '.join(unknown)}: set from valueFrom, unknown here")
    return env


def _torch_policy(
    env: list[tuple[str, str]],
    nodes: _Nodes,
    procs_text: str | None,
    job_name: str,
    *,
    tune: bool,
) -> None:
    """The torch plugin's ``PET_*`` environment (``EnforceMLPolicy``): ``numProcPerNode``
    ``auto``/``gpu`` is the node's GPU count (torchrun resolves it to the GPUs the pod sees), or
    its CPU count on a node without GPUs; no rendezvous address for ``tune run`` (the
    completed command carries its endpoint)."""
    procs = _count(procs_text)
    per_node = procs_text or "auto"
    if procs is None and not nodes.gpus:
        per_node = str(max(1, _cpus(nodes.resources)))
    elif procs is None and per_node in {"auto", "gpu"}:
        per_node = str(nodes.gpus)
    upsert_env(env, "PET_NNODES", str(nodes.count))
    upsert_env(env, "PET_NPROC_PER_NODE", per_node)
    upsert_env(env, "PET_NODE_RANK", "0")
    if not tune:
        upsert_env(env, "PET_MASTER_ADDR", f"{job_name}-node-0-0.{job_name}")
        upsert_env(env, "PET_MASTER_PORT", str(_TRAINER_PORT))


def _mpi_policy(
    env: list[tuple[str, str]], mpi: ManifestField, procs: int | None, gpus: int
) -> None:
    """The mpi plugin's OpenMPI settings; slots per node = ``numProcPerNode`` (a runtime value
    of 1 becomes the GPU count when that is larger)."""
    slots = procs if procs is not None else (mpi.get("numProcPerNode").count() or 1)
    if procs is None and slots == 1 and gpus > 1:
        slots = gpus
    upsert_env(env, "OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile")
    upsert_env(env, "OMPI_MCA_orte_keep_fqdn_hostnames", "true")
    upsert_env(env, "OMPI_MCA_orte_set_default_slots", str(slots))
    upsert_env(env, "OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10")


def _count(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def _runtime(
    trainjob: ManifestField,
    documents: Sequence[Mapping[str, object]],
    source: str,
    notes: list[str],
) -> tuple[_Runtime | None, ManifestField, Container | None]:
    """The runtime ``spec.runtimeRef`` names, its ``mlPolicy`` and its trainer container;
    a runtime found nowhere is noted (then only ``spec.trainer`` is read)."""
    ref = trainjob.get("spec").get("runtimeRef")
    ref_name = ref.get("name").text() or ""
    ref_kind = ref.get("kind").text() or "ClusterTrainingRuntime"
    runtime = _find_runtime(ref_kind, ref_name, documents, source) if ref_name else None
    if runtime is None:
        notes.append(
            f"{ref.label}: {ref_kind} {ref_name!r} is neither in the manifest nor a built-in "
            "Kubeflow Trainer runtime; only spec.trainer is read"
            if ref_name
            else f"{ref.label}: names no runtime; only spec.trainer is read"
        )
        return None, ManifestField(None, "spec.mlPolicy", trainjob.source), None
    policy = runtime.field.get("spec").get("mlPolicy")
    return runtime, policy, _trainer_container(runtime.field)


def _trainer_command(
    trainer: ManifestField, runtime: _Runtime | None, container: Container | None
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, str]:
    """``spec.trainer``'s command and args (None where the runtime container's stand) and
    where the command that runs is written."""
    field = trainer.get("command")
    command = field.texts() if field.value is not None else None
    args = trainer.get("args").texts() if trainer.get("args").value is not None else None
    if command is not None:
        where = field.label
    elif runtime is not None and container is not None:
        where = runtime.cite("trainer command", container.path)
    else:
        where = trainer.label
    return command, args, where


def trainjob_pods(
    trainjob: ManifestField, documents: Sequence[Mapping[str, object]], source: str
) -> TrainingPods:
    """The pods the TrainJob ``trainjob`` trains on and what their ``node`` container runs
    (module docstring); ``documents``: the manifest's documents (where its runtime may be),
    ``source``: how the manifest is cited. A runtime neither in ``documents`` nor in the
    catalog, with no trainer command, gives no container (and a note)."""
    job_name = trainjob.get("metadata").get("name").text() or "trainjob"
    trainer = trainjob.get("spec").get("trainer")
    trainer.mapping()
    notes: list[str] = []
    runtime, policy, container = _runtime(trainjob, documents, source, notes)
    base = container or Container(name="node", path="spec.trainer")
    nodes = _nodes(trainjob, trainer, runtime, policy, container)

    command, args, where = _trainer_command(trainer, runtime, container)
    words = command if command is not None else base.command

    env = _trainer_env(base, trainer, notes)
    procs_field = trainer.get("numProcPerNode")
    if procs_field.value is None:
        procs_field = policy.get("torch").get("numProcPerNode")
    procs_text = procs_field.text()
    procs = _count(procs_text)
    if policy.get("torch").value is not None and trainer.value is not None:
        tune = command is not None and tuple(command) == _TUNE_RUN
        _torch_policy(env, nodes, procs_text, job_name, tune=tune)
        if tune:
            words = _tune_command(
                job=job_name,
                runtime_name=trainjob.get("spec").get("runtimeRef").get("name").text() or "",
                nodes=nodes.count,
                procs=procs,
                gpus=nodes.gpus,
                args=args or (),
                runtime_command=base.command,
            )
    mpi = policy.get("mpi")
    if mpi.value is not None:
        _mpi_policy(env, mpi, procs, nodes.gpus)

    argv = tuple(words) + (args if args is not None else base.args)
    return TrainingPods(
        kind="TrainJob",
        container=base if argv else None,
        command=argv,
        env=tuple(env),
        cwd=base.working_dir,
        where=where,
        pods=nodes.count,
        pods_source=nodes.count_source,
        gpus_per_pod=nodes.gpus,
        gpus_source=nodes.gpus_source,
        num_gpus=nodes.count * nodes.gpus,
        num_gpus_source=nodes.total_source,
        notes=tuple(notes),
    )
