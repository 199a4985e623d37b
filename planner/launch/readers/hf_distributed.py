"""How an HF Trainer run is distributed: world size, backend (DeepSpeed, FSDP, DDP), mesh and
precision, resolved as ``accelerate launch`` and the Trainer resolve them.

* World size: ``--num_processes`` (or ``torchrun``/``deepspeed`` per-node x nodes) > the
  accelerate config's ``num_processes`` > the allocation.
* Backend: TrainingArguments ``deepspeed`` (a JSON path, JSON text or mapping) > the accelerate
  config's ``DEEPSPEED`` (``deepspeed_config``, or its ``deepspeed_config_file``) >
  TrainingArguments ``fsdp`` > the accelerate config's ``FSDP`` > ``MULTI_GPU`` (DDP); a
  multi-process run with none of them is DDP.
* Mesh: accelerate ``parallelism_config``: only ``dp_replicate x dp_shard`` take distinct
  samples; TP, CP and Ulysses SP ranks share them. FSDP shards over ``dp_shard`` there, else
  over every rank (hybrid strategies: over a node's ranks).
* Precision: the DeepSpeed JSON's enabled ``bf16``/``fp16`` > TrainingArguments ``fp16`` /
  ``bf16`` set true (TRL's configs default ``bf16`` to true) > accelerate ``mixed_precision``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from planner.launch.configs import ConfigTree
from planner.launch.data import load_data
from planner.launch.reader import ReadContext
from planner.launch.readers.hf_args import Settings, assume, cite_file
from planner.launch.readers.hf_args import hf_default as default_of
from planner.launch.readers.hf_parallel import (
    AccelerateSetup,
    DeepSpeedConfig,
    Mesh,
    World,
    allocated_world,
    apply_sharding,
    deepspeed_inline,
    fsdp_zero_stage,
    is_hybrid,
    launcher_world,
    load_deepspeed_text,
    precision_name,
    read_accelerate,
    read_deepspeed,
    record_world,
)
from planner.launch.types import Facts, Invocation, Sourced, resolve_path
from planner.launch.values import as_bool, as_int

__all__ = ["apply_distributed", "builtin_accelerate_config"]


def builtin_accelerate_config(name: str) -> ConfigTree | None:
    """TRL's built-in accelerate config ``name`` (``zero3``, ``fsdp2``, ``multi_gpu``, ...),
    as the settings ``hf.yaml`` holds of it; None for an unknown name."""
    table = load_data("hf.yaml").get("trl")
    configs = table.get("accelerate_configs") if isinstance(table, Mapping) else None
    found = configs.get(name) if isinstance(configs, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    what = cite_file("trl_accelerate_configs")
    return ConfigTree(data=found, path=f"catalog:{name} ({what}/{name}.yaml)")


def apply_distributed(
    facts: Facts,
    settings: Settings,
    *,
    options: dict[str, str] | None,
    invocation: Invocation,
    context: ReadContext,
) -> None:
    """Record world size, backend, mesh and precision (module docstring). ``options``: the
    ``accelerate launch`` options (None when accelerate does not launch the run)."""
    setup = _accelerate(options, invocation, context, facts)
    world = _world(facts, setup, options, invocation, context)
    total = world.processes if world is not None else allocated_world(context)[0]
    deepspeed = _deepspeed(settings, setup, invocation, context)
    mesh = setup.mesh if setup is not None and setup.mesh and setup.mesh.total > 1 else None
    if mesh is not None:
        _apply_mesh(facts, mesh, total)
    backend, zero, strategy = _backend(settings, setup, deepspeed, total)
    shard: Sourced | None = None
    if backend is not None and backend.value == "fsdp":
        shard = _fsdp_shard(mesh, strategy, total, world, context)
    apply_sharding(facts, backend=backend, zero_stage=zero, fsdp_shard=shard)
    _precision(facts, settings, setup, deepspeed)
    _check_batch(facts, settings, setup, deepspeed)


def _accelerate(
    options: dict[str, str] | None, invocation: Invocation, context: ReadContext, facts: Facts
) -> AccelerateSetup | None:
    if options is None:
        return None
    options = dict(options)
    builtin: ConfigTree | None = None
    named = options.pop("accelerate_config", None)
    if named and "config_file" not in options:
        if context.files.exists(resolve_path(named, invocation.cwd)):
            options["config_file"] = named
        else:
            builtin = builtin_accelerate_config(named)
            if builtin is None:
                facts.note(f"--accelerate_config {named}: not a file and not a TRL config name")
    return read_accelerate(context.files, options, invocation.cwd, builtin=builtin)


def _world(
    facts: Facts,
    setup: AccelerateSetup | None,
    options: dict[str, str] | None,
    invocation: Invocation,
    context: ReadContext,
) -> World | None:
    """The launcher's world size (``--num_processes`` > the accelerate config's
    ``num_processes``; ``num_machines`` the nodes), recorded by
    :func:`~planner.launch.readers.hf_parallel.record_world`."""
    world = launcher_world("accelerate", options) if options is not None else None
    if world is None and invocation.launcher in {"torchrun", "deepspeed"}:
        world = launcher_world(invocation.launcher, invocation.launcher_args)
    if world is None and setup is not None and setup.num_processes is not None:
        processes = as_int(setup.num_processes.value)
        if processes and processes > 0:
            world = World(processes, None, None, setup.num_processes.source)
    if world is None:
        return None
    if setup is not None and setup.num_machines is not None and world.nodes is None:
        machines = as_int(setup.num_machines.value)
        if machines and world.processes % machines == 0:
            source = f"{world.source}; num_machines {machines} ({setup.num_machines.source})"
            world = World(world.processes, world.processes // machines, machines, source)
    record_world(facts, world, context)
    return world


def _deepspeed(
    settings: Settings,
    setup: AccelerateSetup | None,
    invocation: Invocation,
    context: ReadContext,
) -> DeepSpeedConfig | None:
    """The DeepSpeed config of TrainingArguments ``deepspeed``, else of the accelerate
    config's ``deepspeed_config_file``."""
    found = settings.values.get("deepspeed")
    if found is not None and found.value not in (None, "", False):
        value = found.value
        if isinstance(value, Mapping):
            return deepspeed_inline(value, found.source)
        text = str(value).strip()
        if text.startswith("{"):
            return load_deepspeed_text(text, found.source)
        return read_deepspeed(context.files, resolve_path(text, invocation.cwd))
    if setup is None or setup.deepspeed_file is None:
        return None
    kind = setup.distributed_type
    if kind is not None and kind.value == "DEEPSPEED":
        return read_deepspeed(context.files, str(setup.deepspeed_file.value))
    return None


def _backend(
    settings: Settings,
    setup: AccelerateSetup | None,
    deepspeed: DeepSpeedConfig | None,
    total: int | None,
) -> tuple[Sourced | None, Sourced | None, Sourced | None]:
    """``(backend, ZeRO stage, FSDP strategy)``."""
    kind = setup.distributed_type if setup is not None else None
    fsdp = settings.values.get("fsdp")
    if deepspeed is not None:
        where = settings.values.get("deepspeed")
        source = where.source if where is not None else deepspeed.path
        return Sourced("deepspeed", source), deepspeed.zero_stage, None
    if setup is not None and kind is not None and kind.value == "DEEPSPEED":
        zero = setup.zero_stage or default_of("accelerate.zero_stage")
        return Sourced("deepspeed", kind.source), zero, None
    if fsdp is not None and fsdp.value not in (None, "", False, []):
        chosen = _trainer_fsdp_strategy(fsdp, settings.values.get("fsdp_config"))
        return Sourced("fsdp", fsdp.source), _zero_of(chosen), chosen
    if setup is not None and kind is not None and kind.value == "FSDP":
        strategy: Sourced | None = setup.fsdp_strategy
        if strategy is None:
            version = as_int(setup.fsdp_version.value) if setup.fsdp_version else 1
            if version == 2:
                strategy = Sourced(True, setup.fsdp_version.source if setup.fsdp_version else "")
            else:
                strategy = default_of("accelerate.fsdp_sharding_strategy")
        return Sourced("fsdp", kind.source), _zero_of(strategy), strategy
    if kind is not None and str(kind.value).startswith("MULTI_"):
        return Sourced("ddp", kind.source), None, None
    if total is not None and total > 1:
        return Sourced("ddp", "derived: the Trainer wraps a multi-process run in DDP"), None, None
    return None, None, None


def _trainer_fsdp_strategy(fsdp: Sourced, config: Sourced | None) -> Sourced:
    """The strategy of TrainingArguments ``fsdp`` (``"full_shard auto_wrap"``, a list, or
    true), with ``fsdp_config.reshard_after_forward`` of FSDP2 over it."""
    value = fsdp.value
    words = value if isinstance(value, list) else str(value).replace(",", " ").split()
    strategy: object = "FULL_SHARD"
    for word in (str(w).upper() for w in words):
        if word in {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"}:
            strategy = word
            break
    cfg = config.value if config is not None and isinstance(config.value, Mapping) else {}
    version = as_int(cfg.get("version", cfg.get("fsdp_version")))
    reshard = cfg.get("reshard_after_forward", cfg.get("fsdp_reshard_after_forward"))
    if version == 2 and as_bool(reshard) is not None and config is not None:
        return Sourced(as_bool(reshard), config.source)
    return Sourced(strategy, fsdp.source)


def _zero_of(strategy: Sourced | None) -> Sourced | None:
    if strategy is None:
        return None
    stage = fsdp_zero_stage(strategy.value)
    return Sourced(stage, strategy.source) if stage is not None else None


def _fsdp_shard(
    mesh: Mesh | None,
    strategy: Sourced | None,
    total: int | None,
    world: World | None,
    context: ReadContext,
) -> Sourced | None:
    """FSDP's sharding degree: the mesh's ``dp_shard``; a node's ranks for hybrid strategies;
    every rank otherwise (``NO_SHARD``: none)."""
    if mesh is not None:
        return Sourced(mesh.dp_shard, f"{mesh.source} (dp_shard)")
    value = strategy.value if strategy is not None else None
    if isinstance(value, str) and value.upper() == "NO_SHARD":
        return None
    if is_hybrid(value):
        per_node = (world.per_node if world else None) or allocated_world(context)[1]
        if per_node:
            return Sourced(per_node, "derived: hybrid sharding shards within a node")
        return None
    if total:
        return Sourced(total, "derived: FSDP shards over every rank")
    return None


def _apply_mesh(facts: Facts, mesh: Mesh, total: int | None) -> None:
    """TP, CP (ring CP x Ulysses SP) and the batch-carrying data parallel of a mesh."""
    source = mesh.source
    facts.set("parallelism.tensor_parallel", mesh.tp, f"{source} (tp_size)")
    facts.set("parallelism.context_parallel", mesh.cp * mesh.sp, f"{source} (cp_size x sp_size)")
    facts.set(
        "parallelism.data_parallel",
        mesh.data_parallel,
        f"{source} (dp_replicate_size x dp_shard_size, the ranks that take distinct samples: "
        f"{cite_file('accelerate_parallelism')})",
    )
    if mesh.sp > 1:
        facts.note(f"sequence parallel {mesh.sp} is DeepSpeed Ulysses (counted as context)")
    if total and mesh.total != total:
        facts.note(
            f"the parallelism_config spans {mesh.total} ranks but {total} processes run: "
            "accelerate stops with a size mismatch"
        )


def _precision(
    facts: Facts,
    settings: Settings,
    setup: AccelerateSetup | None,
    deepspeed: DeepSpeedConfig | None,
) -> None:
    if deepspeed is not None and deepspeed.precision is not None:
        facts.set("parallelism.precision", deepspeed.precision.value, deepspeed.precision.source)
        return
    mixed = setup.mixed_precision if setup is not None else None
    mixed_name = precision_name(mixed.value) if mixed is not None else None
    for name in ("fp16", "bf16"):
        found = settings.values.get(name)
        if found is None or as_bool(found.value) is not True:
            continue
        if name not in settings.assumed:
            facts.set("parallelism.precision", name, found.source)
        elif mixed is not None and mixed_name == name:
            facts.set("parallelism.precision", name, mixed.source)
        else:
            assume(facts, "parallelism.precision", name, found.source)
            if mixed_name is not None and mixed_name != name:
                facts.note(f"TrainingArguments {name} (default) overrides accelerate {mixed_name}")
        return
    if mixed is not None and mixed_name is not None:
        facts.set("parallelism.precision", mixed_name, mixed.source)
        return
    facts.note("no mixed precision is set: the run trains in fp32 (precision left open)")


def _check_batch(
    facts: Facts,
    settings: Settings,
    setup: AccelerateSetup | None,
    deepspeed: DeepSpeedConfig | None,
) -> None:
    """Notes where a DeepSpeed or accelerate value disagrees with TrainingArguments (the
    Trainer fills ``"auto"`` fields from TrainingArguments and refuses a mismatch)."""
    pairs = (
        ("per_device_train_batch_size", "micro_batch"),
        ("gradient_accumulation_steps", "accumulation"),
    )
    for name, field_name in pairs:
        ours = as_int(settings.get(name))
        theirs = getattr(deepspeed, field_name) if deepspeed is not None else None
        if theirs is not None and as_int(theirs.value) not in (None, ours):
            facts.note(
                f"{posixpath.basename(deepspeed.path) if deepspeed else ''} sets {theirs.value} "
                f"({theirs.source}) against TrainingArguments {name} {ours}: the Trainer stops "
                "with a mismatch error"
            )
    if setup is not None and setup.gradient_accumulation is not None:
        theirs_ga = as_int(setup.gradient_accumulation.value)
        ours_ga = as_int(settings.get("gradient_accumulation_steps"))
        if theirs_ga is not None and theirs_ga != ours_ga:
            facts.note(
                f"accelerate gradient_accumulation_steps {theirs_ga} "
                f"({setup.gradient_accumulation.source}) differs from TrainingArguments' "
                f"{ours_ga}, which the Trainer uses"
            )
