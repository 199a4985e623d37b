"""Launchers and distributed configs of the Hugging Face stack, shared by the HF Trainer / TRL,
Axolotl and LLaMA-Factory readers. The API:

* :func:`launcher_world`: the processes ``accelerate launch``, ``torchrun`` or ``deepspeed``
  start, from the launcher's own options; :func:`allocated_world`: what the allocation gives.
* :func:`read_accelerate` -> :class:`AccelerateSetup`: an accelerate config file
  (``--config_file``) with the launcher's command-line options over it: distributed type,
  DeepSpeed / FSDP plugin settings, ``parallelism_config`` (:class:`Mesh`), mixed precision,
  process and machine counts.
* :func:`read_deepspeed` / :func:`deepspeed_inline` -> :class:`DeepSpeedConfig`: a DeepSpeed
  config (ZeRO stage, offload, batch fields; ``"auto"`` fields are left to the HF Trainer,
  which fills them from its TrainingArguments).
* :func:`fsdp_zero_stage`, :func:`is_hybrid`, :func:`precision_name`: FSDP strategies and
  mixed-precision names in scenario terms.
* :func:`apply_sharding`: the facts a resolved backend gives (``training.framework``,
  ``parallelism.zero_stage``, ``launch.fsdp_shard``).

Every value comes back as a :class:`~planner.launch.types.Sourced` (``file:line``,
``override: --num_processes 4``, ``launch: ...``). Sources of the accelerate defaults:
``planner/launch/data/hf.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from planner.launch.configs import ConfigTree, load_config, parse_scalar, read_config
from planner.launch.reader import ReadContext
from planner.launch.types import Facts, LaunchFiles, Sourced, resolve_path
from planner.launch.values import as_bool, as_int

__all__ = [
    "AccelerateSetup",
    "DeepSpeedConfig",
    "Mesh",
    "World",
    "allocated_world",
    "apply_sharding",
    "deepspeed_inline",
    "fsdp_zero_stage",
    "is_hybrid",
    "launcher_world",
    "load_deepspeed_text",
    "precision_name",
    "read_accelerate",
    "read_deepspeed",
    "record_world",
]


@dataclass(frozen=True, slots=True)
class World:
    """Processes a launcher starts: ``processes`` in all, ``per_node`` and ``nodes`` when the
    launcher says, ``source`` the options that say it."""

    processes: int
    per_node: int | None
    nodes: int | None
    source: str


def launcher_world(launcher: str, options: Mapping[str, str]) -> World | None:
    """The world size of ``launcher`` from its options (names without dashes, ``-`` as
    ``_``): ``accelerate`` ``num_processes`` (all machines together) and ``num_machines``;
    ``torchrun`` ``nproc_per_node`` x ``nnodes`` (``gpu``/``auto`` per node, or an elastic
    ``min:max`` node range, leave it to the allocation); ``deepspeed`` ``num_gpus`` x
    ``num_nodes``. ``nodes`` is None when the options do not name it (one node is counted).
    None when the options do not fix the per-node count."""
    if launcher == "accelerate":
        processes = as_int(options.get("num_processes"))
        if not processes:
            return None
        nodes = as_int(options.get("num_machines"))
        per_node = processes // nodes if nodes and processes % nodes == 0 else None
        return World(processes, per_node, nodes, f"launch: accelerate --num_processes {processes}")
    if launcher in {"torchrun", "deepspeed"}:
        per_key, nodes_key = (
            ("nproc_per_node", "nnodes") if launcher == "torchrun" else ("num_gpus", "num_nodes")
        )
        per_node = as_int(options.get(per_key))
        raw_nodes = options.get(nodes_key)
        nodes = as_int(raw_nodes) if raw_nodes is not None else None
        if not per_node or (raw_nodes is not None and not nodes):
            return None
        said = f" --{nodes_key} {raw_nodes}" if raw_nodes is not None else ""
        return World(
            per_node * (nodes or 1),
            per_node,
            nodes,
            f"launch: {launcher} --{per_key} {per_node}{said}",
        )
    return None


def allocated_world(context: ReadContext) -> tuple[int | None, int | None]:
    """``(GPUs, GPUs per node)`` the launch's allocation gives (the launcher lines the shell
    layer read, else the scheduler's allocation), each None when unknown."""
    values = context.allocation.values
    total: int | None = None
    for name in ("launch.world_size", "hardware.num_gpus"):
        found = values.get(name)
        total = as_int(found.value) if found is not None else None
        if total:
            break
    total = total or context.launch.num_gpus or None
    found = values.get("hardware.gpus_per_node")
    per_node = as_int(found.value) if found is not None else None
    return total, per_node or context.launch.gpus_per_node or None


def record_world(facts: Facts, world: World, context: ReadContext) -> None:
    """Record a launcher's ``world`` as ``hardware.num_gpus`` and ``launch.world_size``, with
    ``launch.num_nodes`` / ``hardware.gpus_per_node`` from the launcher when it names them,
    else from the allocation's GPUs per node."""
    facts.set("hardware.num_gpus", world.processes, world.source)
    facts.set("launch.world_size", world.processes, world.source)
    per_node, nodes, source = world.per_node, world.nodes, world.source
    if per_node and not nodes and world.processes % per_node == 0:
        nodes = world.processes // per_node
    if not per_node:
        found = context.allocation.values.get("hardware.gpus_per_node")
        allocated = as_int(found.value) if found is not None else None
        per_node = allocated or context.launch.gpus_per_node or None
        source = found.source if found is not None and allocated else "launch"
        if per_node and world.processes % per_node == 0:
            nodes = max(1, world.processes // per_node)
        elif per_node and world.processes < per_node:
            per_node, nodes = world.processes, 1
    if per_node:
        facts.set("hardware.gpus_per_node", per_node, source)
    if nodes:
        facts.set("launch.num_nodes", nodes, source)


@dataclass(frozen=True, slots=True)
class Mesh:
    """A device mesh as accelerate's ``ParallelismConfig`` and Axolotl name it:
    ``dp_replicate`` x ``dp_shard`` (the data dimensions: only they take distinct samples) x
    ``tp`` x ``cp`` (ring context parallel) x ``sp`` (DeepSpeed Ulysses sequence parallel)."""

    dp_replicate: int = 1
    dp_shard: int = 1
    tp: int = 1
    cp: int = 1
    sp: int = 1
    source: str = ""

    @property
    def data_parallel(self) -> int:
        """Ranks that take distinct samples."""
        return self.dp_replicate * self.dp_shard

    @property
    def total(self) -> int:
        """Ranks the mesh spans."""
        return self.dp_replicate * self.dp_shard * self.tp * self.cp * self.sp


@dataclass(slots=True)
class AccelerateSetup:
    """What ``accelerate launch`` runs with: each setting with its source, None when neither
    the config file nor the command line gives it. ``distributed_type`` is upper case
    (``DEEPSPEED``, ``FSDP``, ``MULTI_GPU``, ``NO``); ``fsdp_strategy`` an FSDP1 strategy name
    or an FSDP2 ``reshard_after_forward`` bool; ``deepspeed_file`` an absolute path."""

    config: ConfigTree | None = None
    distributed_type: Sourced | None = None
    num_processes: Sourced | None = None
    num_machines: Sourced | None = None
    mixed_precision: Sourced | None = None
    zero_stage: Sourced | None = None
    deepspeed_file: Sourced | None = None
    offload: Sourced | None = None
    fsdp_version: Sourced | None = None
    fsdp_strategy: Sourced | None = None
    mesh: Mesh | None = None
    gradient_accumulation: Sourced | None = None


_MESH_DIMS = ("dp_replicate", "dp_shard", "tp", "cp", "sp")
_CLI_TYPES = {"use_deepspeed": "DEEPSPEED", "use_fsdp": "FSDP", "multi_gpu": "MULTI_GPU"}


def read_accelerate(
    files: LaunchFiles,
    options: Mapping[str, str],
    cwd: str | None,
    *,
    builtin: ConfigTree | None = None,
) -> AccelerateSetup:
    """accelerate's settings: the config file ``options["config_file"]`` (relative to ``cwd``)
    or ``builtin`` (a named config resolved by the caller), with the command-line ``options``
    over it (``num_processes``, ``num_machines``, ``mixed_precision``, ``use_deepspeed`` /
    ``use_fsdp`` / ``multi_gpu``, ``zero_stage``, ``deepspeed_config_file``, ``fsdp_version``,
    ``fsdp_sharding_strategy``, ``fsdp_reshard_after_forward``, ``gradient_accumulation_steps``,
    ``parallelism_config_*``). Raises ``SourceError``/``SpecError`` when the named file cannot
    be read or parsed."""
    setup = AccelerateSetup()
    tree = builtin
    if options.get("config_file"):
        tree = read_config(files, resolve_path(options["config_file"], cwd))
    setup.config = tree
    if tree is not None:
        _from_tree(setup, tree, cwd)
    for flag, kind in _CLI_TYPES.items():
        if as_bool(options.get(flag, "false") or "true"):
            setup.distributed_type = Sourced(kind, f"override: --{flag}")

    def cli(name: str) -> Sourced | None:
        raw = options.get(name)
        return Sourced(parse_scalar(raw), f"override: --{name} {raw}") if raw else None

    setup.num_processes = cli("num_processes") or setup.num_processes
    setup.num_machines = cli("num_machines") or setup.num_machines
    setup.mixed_precision = cli("mixed_precision") or setup.mixed_precision
    setup.zero_stage = cli("zero_stage") or setup.zero_stage
    setup.fsdp_version = cli("fsdp_version") or setup.fsdp_version
    setup.fsdp_strategy = (
        cli("fsdp_reshard_after_forward") or cli("fsdp_sharding_strategy") or setup.fsdp_strategy
    )
    setup.gradient_accumulation = cli("gradient_accumulation_steps") or setup.gradient_accumulation
    ds_file = cli("deepspeed_config_file")
    if ds_file is not None:
        setup.deepspeed_file = Sourced(resolve_path(str(ds_file.value), cwd), ds_file.source)
    sizes = {k: cli(f"parallelism_config_{k}_size") for k in _MESH_DIMS}
    if any(sizes.values()):
        base = setup.mesh or Mesh()
        setup.mesh = Mesh(
            **{k: as_int(v.value) or 1 if v else getattr(base, k) for k, v in sizes.items()},
            source="override: --parallelism_config_*",
        )
    return setup


def _from_tree(setup: AccelerateSetup, tree: ConfigTree, cwd: str | None) -> None:
    def at(key: str) -> Sourced | None:
        value = tree.get(key)
        return Sourced(value, tree.where(key)) if value is not None else None

    kind = at("distributed_type")
    if kind is not None:
        setup.distributed_type = Sourced(str(kind.value).upper(), kind.source)
    setup.num_processes = at("num_processes")
    setup.num_machines = at("num_machines")
    setup.mixed_precision = at("mixed_precision")
    setup.zero_stage = at("deepspeed_config.zero_stage")
    setup.gradient_accumulation = at("deepspeed_config.gradient_accumulation_steps")
    offload = at("deepspeed_config.offload_optimizer_device")
    if offload is not None and str(offload.value).lower() not in {"none", ""}:
        setup.offload = offload
    ds_file = at("deepspeed_config.deepspeed_config_file")
    if ds_file is not None and str(ds_file.value).lower() != "none":
        setup.deepspeed_file = Sourced(resolve_path(str(ds_file.value), cwd), ds_file.source)
    setup.fsdp_version = at("fsdp_config.fsdp_version")
    setup.fsdp_strategy = at("fsdp_config.fsdp_sharding_strategy") or at(
        "fsdp_config.fsdp_reshard_after_forward"
    )
    prefix = "parallelism_config.parallelism_config_"
    if tree.has("parallelism_config"):
        sizes = {k: as_int(tree.get(f"{prefix}{k}_size")) or 1 for k in _MESH_DIMS}
        setup.mesh = Mesh(**sizes, source=tree.where("parallelism_config"))


@dataclass(frozen=True, slots=True)
class DeepSpeedConfig:
    """A DeepSpeed JSON config: ``zero_stage``, ``micro_batch``
    (``train_micro_batch_size_per_gpu``), ``accumulation`` (``gradient_accumulation_steps``),
    ``train_batch`` (``train_batch_size``), ``precision`` (``bf16``/``fp16`` when its
    ``enabled`` is true), ``offload`` (optimizer offload device); fields set to ``"auto"`` are
    None and named in ``auto`` (the HF Trainer fills them from its TrainingArguments)."""

    path: str
    zero_stage: Sourced | None = None
    micro_batch: Sourced | None = None
    accumulation: Sourced | None = None
    train_batch: Sourced | None = None
    precision: Sourced | None = None
    offload: Sourced | None = None
    auto: tuple[str, ...] = ()


def read_deepspeed(files: LaunchFiles, path: str) -> DeepSpeedConfig:
    """The DeepSpeed JSON at absolute ``path``. Raises ``SourceError``/``SpecError`` when it
    cannot be read or parsed."""
    tree = read_config(files, path, "json")
    return deepspeed_from_tree(tree)


def deepspeed_from_tree(tree: ConfigTree) -> DeepSpeedConfig:
    """:class:`DeepSpeedConfig` of a parsed DeepSpeed config (a JSON file, or a mapping given
    inline in a YAML config)."""
    auto: list[str] = []

    def at(key: str) -> Sourced | None:
        value = tree.get(key)
        if isinstance(value, str) and value.lower() == "auto":
            auto.append(key)
            return None
        return Sourced(value, tree.where(key)) if value is not None else None

    precision: Sourced | None = None
    for name in ("bf16", "fp16"):
        enabled = tree.get(f"{name}.enabled")
        if isinstance(enabled, str) and enabled.lower() == "auto":
            auto.append(f"{name}.enabled")
        elif as_bool(enabled) is True:
            precision = Sourced(name, tree.where(f"{name}.enabled"))
    offload = at("zero_optimization.offload_optimizer.device")
    if offload is not None and str(offload.value).lower() == "none":
        offload = None
    return DeepSpeedConfig(
        path=tree.path,
        zero_stage=at("zero_optimization.stage"),
        micro_batch=at("train_micro_batch_size_per_gpu"),
        accumulation=at("gradient_accumulation_steps"),
        train_batch=at("train_batch_size"),
        precision=precision,
        offload=offload,
        auto=tuple(auto),
    )


def deepspeed_inline(value: Mapping[str, object], where: str) -> DeepSpeedConfig:
    """:class:`DeepSpeedConfig` of a DeepSpeed config given inline as a mapping at ``where``."""
    return deepspeed_from_tree(ConfigTree(data=value, path=where))


def load_deepspeed_text(text: str, where: str) -> DeepSpeedConfig:
    """:class:`DeepSpeedConfig` of DeepSpeed JSON given as text (a ``--deepspeed '{...}'``
    argument), cited as ``where``."""
    return deepspeed_from_tree(load_config(text, where, "json"))


_STRATEGY_STAGE = {
    "FULL_SHARD": 3,
    "HYBRID_SHARD": 3,
    "SHARD_GRAD_OP": 2,
    "HYBRID_SHARD_ZERO2": 2,
    "_HYBRID_SHARD_ZERO2": 2,
    "NO_SHARD": 0,
}


def fsdp_zero_stage(strategy: object) -> int | None:
    """The ZeRO stage an FSDP sharding setting amounts to: FSDP1 strategy names (``FULL_SHARD``
    and ``HYBRID_SHARD`` 3, ``SHARD_GRAD_OP`` 2, ``NO_SHARD`` 0; accelerate's numbers 1-5 for
    them) or FSDP2 ``reshard_after_forward`` (true 3, false 2); None when not one of those."""
    flag = as_bool(strategy) if isinstance(strategy, bool | str) else None
    if isinstance(strategy, str) and strategy.upper() in _STRATEGY_STAGE:
        return _STRATEGY_STAGE[strategy.upper()]
    if isinstance(strategy, int) and not isinstance(strategy, bool) and 1 <= strategy <= 5:
        return (3, 2, 0, 3, 2)[strategy - 1]
    if flag is not None:
        return 3 if flag else 2
    return None


def is_hybrid(strategy: object) -> bool:
    """True for FSDP hybrid strategies (shard within a node, replicate across nodes)."""
    if isinstance(strategy, int) and not isinstance(strategy, bool):
        return strategy in (4, 5)
    return isinstance(strategy, str) and "HYBRID" in strategy.upper()


_PRECISIONS = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "fp8": "fp8"}


def precision_name(value: object) -> str | None:
    """The scenario precision of an accelerate ``mixed_precision`` value (``bf16``, ``fp16``,
    ``fp8``); None for ``no`` and anything else."""
    return _PRECISIONS.get(str(value).strip().lower()) if value is not None else None


def apply_sharding(
    facts: Facts,
    *,
    backend: Sourced | None,
    zero_stage: Sourced | None,
    fsdp_shard: Sourced | None,
) -> None:
    """Record a resolved backend: ``backend`` (``deepspeed``, ``fsdp`` or ``ddp``) ->
    ``training.framework`` (DDP runs eager PyTorch: ``other``); ``zero_stage`` ->
    ``parallelism.zero_stage`` (plain DDP shards nothing: 0); ``fsdp_shard`` ->
    ``launch.fsdp_shard``."""
    if backend is not None:
        name = str(backend.value)
        facts.set("training.framework", "other" if name == "ddp" else name, backend.source)
        if name == "ddp" and zero_stage is None:
            facts.set("parallelism.zero_stage", 0, f"derived: DDP replicates ({backend.source})")
    if zero_stage is not None:
        stage = as_int(zero_stage.value)
        if stage is not None and 0 <= stage <= 3:
            facts.set("parallelism.zero_stage", stage, zero_stage.source)
    if fsdp_shard is not None:
        facts.set("launch.fsdp_shard", fsdp_shard.value, fsdp_shard.source)
