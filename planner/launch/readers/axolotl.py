"""Axolotl launches: ``axolotl train cfg.yaml [--key value ...] [--launcher accelerate|torchrun|
python] [-- launcher options]``, ``accelerate launch -m axolotl.cli.train cfg.yaml`` and
``python -m axolotl.cli.train cfg.yaml``.

Settings resolve as Axolotl resolves them: its config schema's defaults (``micro_batch_size``
1, ``gradient_accumulation_steps`` 1, ``sequence_len`` 512, ``bf16: auto``) < the YAML < the
command line's ``--key value`` / ``--key=value`` (dashes or underscores). The world size comes
from the launcher options after ``--`` (``--num_processes``; ``--nnodes`` x
``--nproc_per_node``), else the allocation (``accelerate launch`` without options starts one
process per GPU of the node).

The mesh is Axolotl's (``utils/distributed.py``): expert parallel, TP and CP take their ranks
first; ``dp_shard_size`` (FSDP) is the rest of the world when not given (with
``dp_replicate_size``, what remains after it). The ranks that take distinct samples are
``world / (CP x TP)`` (``normalize_config``'s batch size: EP ranks each take their own
micro-batch). Global batch = micro x accumulation x those ranks.

The model runs ``transformers``' own code for its ``model_type``, whose separate or fused
projections are stated as :mod:`planner.launch.model_code` gives them, except where Axolotl's
``flash_attn_fuse_qkv`` / ``flash_attn_fuse_mlp`` patches swap in fused modules.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from planner.launch.configs import read_config
from planner.launch.data import load_data
from planner.launch.model_code import state_transformers_projections
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.hf import lora_targets
from planner.launch.readers.hf_args import (
    Settings,
    cite_file,
    flag_args,
    hf_default,
)
from planner.launch.readers.hf_parallel import (
    World,
    allocated_world,
    apply_sharding,
    deepspeed_inline,
    fsdp_zero_stage,
    launcher_world,
    precision_name,
    read_accelerate,
    read_deepspeed,
    record_world,
)
from planner.launch.types import Facts, Invocation, Sourced, resolve_path
from planner.launch.values import as_bool, as_int

__all__ = ["READER", "AxolotlReader"]

_MODULE = "axolotl.cli.train"
_BOOL_KEYS = frozenset(
    {
        "load_in_4bit",
        "load_in_8bit",
        "sample_packing",
        "bf16",
        "fp16",
        "fp8",
        "tf32",
        "gradient_checkpointing",
        "flash_attention",
        "lora_target_linear",
        "debug",
        "shard",
    }
)
_MESH_SOURCE = "axolotl_mesh"
_NORMALIZE_SOURCE = "axolotl_normalize"


class AxolotlReader:
    """The ``axolotl`` reader (module docstring)."""

    name = "axolotl"

    def recognises(self, invocation: Invocation) -> bool:
        """``axolotl train ...``, the ``axolotl.cli.train`` module or its file."""
        program = invocation.program
        if posixpath.basename(program) == "axolotl":
            return bool(invocation.args) and invocation.args[0] == "train"
        return program == _MODULE or program.endswith("axolotl/cli/train.py")

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the invocation trains (module docstring). Raises ``SourceError`` /
        ``SpecError`` when the config (or a DeepSpeed JSON it names) cannot be read."""
        facts = Facts()
        settings, launcher, options = _arguments(invocation, context, facts)
        model = settings.values.get("base_model")
        if model is not None and isinstance(model.value, str):
            resolve_model(
                model.value,
                facts=facts,
                files=context.files,
                cwd=invocation.cwd,
                source=model.source,
            )
            _model_code(facts, settings)
        settings.record(
            facts, "model.seq_length", "sequence_len", as_int(settings.get("sequence_len"))
        )
        _batch(facts, settings)
        _mode(facts, settings)
        world = _world(facts, launcher, options, invocation, context)
        total = world.processes if world is not None else allocated_world(context)[0]
        _mesh(facts, settings, total)
        _backend(facts, settings, invocation, context, total)
        return facts


def _model_code(facts: Facts, settings: Settings) -> None:
    """The ``transformers`` model code's projections (:mod:`planner.launch.model_code`), each
    left unset where ``flash_attention`` with ``flash_attn_fuse_qkv`` / ``flash_attn_fuse_mlp``
    asks Axolotl to patch the Llama attention / MLP with fused modules."""
    flash = as_bool(settings.get("flash_attention")) is True
    patched = {
        name: flash and as_bool(settings.get(name)) is True
        for name in ("flash_attn_fuse_qkv", "flash_attn_fuse_mlp")
    }
    for name in sorted(name for name, on in patched.items() if on):
        facts.note(
            f"axolotl: {name} with flash_attention patches the Llama model code with a fused "
            "module; that projection is not stated"
        )
    state_transformers_projections(
        facts,
        skip_qkv=patched["flash_attn_fuse_qkv"],
        skip_gate_up=patched["flash_attn_fuse_mlp"],
    )


def _arguments(
    invocation: Invocation, context: ReadContext, facts: Facts
) -> tuple[Settings, str, dict[str, str]]:
    """``(settings, launcher, launcher options)``: defaults < YAML < ``--key value``."""
    args = list(invocation.args)
    cli = posixpath.basename(invocation.program) == "axolotl"
    if cli:
        args = args[1:]
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1 :]
    flags = flag_args(args, bool_keys=_BOOL_KEYS)
    if not flags.positionals:
        facts.note(f"{invocation.where or invocation.program}: no config file is named")
    settings = Settings()
    defaults = load_data("hf.yaml").get("axolotl")
    for name in defaults if isinstance(defaults, Mapping) else {}:
        settings.default(str(name), hf_default(f"axolotl.{name}"))
    if flags.positionals:
        tree = read_config(context.files, resolve_path(flags.positionals[0], invocation.cwd))
        for key, value in tree.data.items():
            settings.put(str(key), value, tree.where(str(key)))
    launcher = invocation.launcher
    options = {str(k): str(v) for k, v in invocation.launcher_args.items()}
    for key, (value, text) in flags.values.items():
        if key == "launcher" and cli:
            launcher = str(value)
        elif key in {"num_processes", "main_process_port"} and cli:
            options[key] = str(value)
        elif key.startswith("no_") and key[3:] in _BOOL_KEYS:
            settings.put(key[3:], False, f"override: {text}")
        elif "__" not in key:
            settings.put(key, value, f"override: {text}")
    if cli and not launcher.startswith(("accelerate", "torchrun", "python")):
        launcher = "accelerate"
    if cli:
        parsed = flag_args(extra)
        options.update({k: "" if v is True else str(v) for k, (v, _t) in parsed.values.items()})
    return settings, launcher, options


def _batch(facts: Facts, settings: Settings) -> None:
    """Micro batch, accumulation (``batch_size // micro_batch_size`` when ``batch_size`` is
    given instead), steps, recomputation."""
    settings.record(facts, "parallelism.micro_batch_size", "micro_batch_size")
    micro = as_int(settings.get("micro_batch_size")) or 1
    per_device = as_int(settings.get("batch_size"))
    if per_device and not settings.explicit("gradient_accumulation_steps"):
        facts.set(
            "launch.gradient_accumulation",
            max(1, per_device // micro),
            f"derived: batch_size // micro_batch_size ({cite_file(_NORMALIZE_SOURCE)})",
        )
    else:
        settings.record(facts, "launch.gradient_accumulation", "gradient_accumulation_steps")
    steps = as_int(settings.get("max_steps"))
    if steps is not None and steps > 0:
        settings.record(facts, "training.train_iters", "max_steps", steps)
    else:
        facts.note("no max_steps: the run trains num_epochs over its dataset (steps left open)")
    checkpointing = settings.get("gradient_checkpointing")
    if checkpointing is not None:
        on = (
            as_bool(checkpointing) is not False
            if isinstance(checkpointing, str)
            else bool(checkpointing)
        )
        if settings.explicit("gradient_checkpointing"):
            facts.set(
                "parallelism.recompute",
                "full" if on else "none",
                settings.values["gradient_checkpointing"].source,
            )


def _mode(facts: Facts, settings: Settings) -> None:
    """``lora`` for ``adapter: lora|qlora`` (rank ``lora_r``), else full fine-tuning."""
    adapter = settings.values.get("adapter")
    if adapter is not None and str(adapter.value or "").lower() in {"lora", "qlora"}:
        facts.set("training.mode", "lora", adapter.source)
        rank = settings.values.get("lora_r")
        if rank is not None and as_int(rank.value):
            facts.set("training.lora_rank", as_int(rank.value), rank.source)
        else:
            facts.note("adapter without lora_r: the LoRA rank is not given (left open)")
        if as_bool(settings.get("lora_target_linear")):
            targets = lora_targets("all-linear")
            facts.set(
                "training.lora_targets", targets, settings.values["lora_target_linear"].source
            )
        elif settings.explicit("lora_target_modules"):
            targets = lora_targets(settings.get("lora_target_modules"))
            if targets:
                facts.set(
                    "training.lora_targets", targets, settings.values["lora_target_modules"].source
                )
    else:
        facts.set("training.mode", "sft", "derived: no adapter: every weight trains")
    if as_bool(settings.get("load_in_4bit")) or as_bool(settings.get("load_in_8bit")):
        facts.note("the base model is loaded quantised (bitsandbytes) and frozen under the adapter")


def _world(
    facts: Facts,
    launcher: str,
    options: Mapping[str, str],
    invocation: Invocation,
    context: ReadContext,
) -> World | None:
    """The launcher's world size (options after ``--``, an accelerate config file's
    ``num_processes``), recorded as ``hardware.num_gpus``; None: the allocation's."""
    world: World | None = None
    if launcher.startswith("python"):
        world = World(1, 1, 1, "launch: the python launcher runs one process")
    elif launcher in {"accelerate", "torchrun", "deepspeed"}:
        world = launcher_world(launcher, options)
        if world is None and launcher == "accelerate" and options.get("config_file"):
            setup = read_accelerate(context.files, options, invocation.cwd)
            processes = as_int(setup.num_processes.value) if setup.num_processes else None
            if processes and setup.num_processes is not None:
                world = World(processes, None, None, setup.num_processes.source)
    if world is None:
        return None
    record_world(facts, world, context)
    return world


def _mesh(facts: Facts, settings: Settings, total: int | None) -> None:
    """TP, CP, EP and the batch-carrying data parallel (module docstring)."""
    tp = _size(settings, facts, "tensor_parallel_size", "parallelism.tensor_parallel")
    cp_key = (
        "context_parallel_size"
        if settings.explicit("context_parallel_size")
        else ("sequence_parallel_degree")
    )
    cp = _size(settings, facts, cp_key, "parallelism.context_parallel")
    _size(settings, facts, "expert_parallel_size", "parallelism.expert_parallel")
    replicas = as_int(settings.get("dp_replicate_size")) or 1
    if replicas > 1:
        facts.note(
            f"dp_replicate_size {replicas}: FSDP replicas (HSDP), each taking its own samples"
        )
    if total and total % (tp * cp) == 0:
        facts.set(
            "parallelism.data_parallel",
            total // (tp * cp),
            f"derived: world / (context x tensor parallel) ({cite_file(_NORMALIZE_SOURCE)})",
        )


def _size(settings: Settings, facts: Facts, key: str, fact: str) -> int:
    found = settings.values.get(key)
    size = as_int(found.value) if found is not None else None
    if found is not None and size and size > 0:
        facts.set(fact, size, found.source)
        return size
    return 1


def _fsdp_shard(settings: Settings, total: int | None) -> Sourced | None:
    """``dp_shard_size``, else the world left after EP, TP, CP and ``dp_replicate_size``
    (Axolotl's ``_get_parallel_config_kwargs``)."""
    given = settings.values.get("dp_shard_size")
    if given is not None and as_int(given.value):
        return Sourced(as_int(given.value), given.source)
    if not total:
        return None
    rest = total
    for key in (
        "expert_parallel_size",
        "tensor_parallel_size",
        "context_parallel_size",
        "dp_replicate_size",
    ):
        size = as_int(settings.get(key)) or 1
        if size > 1 and rest % size == 0:
            rest //= size
    return Sourced(rest, f"derived: the ranks left for dp_shard ({cite_file(_MESH_SOURCE)})")


_FSDP_WORDS = ("full_shard", "shard_grad_op", "hybrid_shard", "no_shard")


def _backend(
    facts: Facts,
    settings: Settings,
    invocation: Invocation,
    context: ReadContext,
    total: int | None,
) -> None:
    """DeepSpeed (``deepspeed: path.json``) or FSDP (``fsdp`` / ``fsdp_config``), and the
    precision."""
    deepspeed = settings.values.get("deepspeed")
    ds_precision: Sourced | None = None
    fsdp_config = settings.get("fsdp_config")
    if deepspeed is not None and deepspeed.value:
        stage, ds_precision = _deepspeed(facts, deepspeed, invocation, context)
        apply_sharding(
            facts, backend=Sourced("deepspeed", deepspeed.source), zero_stage=stage, fsdp_shard=None
        )
    elif settings.get("fsdp") or isinstance(fsdp_config, Mapping) or settings.get("fsdp_version"):
        source = (
            settings.values.get("fsdp")
            or settings.values.get("fsdp_config")
            or settings.values["fsdp_version"]
        ).source
        apply_sharding(
            facts,
            backend=Sourced("fsdp", source),
            zero_stage=_fsdp_stage(settings),
            fsdp_shard=_fsdp_shard(settings, total),
        )
    elif total and total > 1:
        apply_sharding(
            facts,
            backend=Sourced("ddp", "derived: a multi-process run without FSDP or DeepSpeed is DDP"),
            zero_stage=None,
            fsdp_shard=None,
        )
    _precision(facts, settings, ds_precision)


def _deepspeed(
    facts: Facts, found: Sourced, invocation: Invocation, context: ReadContext
) -> tuple[Sourced | None, Sourced | None]:
    """``(ZeRO stage, precision)`` of the DeepSpeed JSON the config names."""
    if isinstance(found.value, Mapping):
        config = deepspeed_inline(found.value, found.source)
        return config.zero_stage, config.precision
    path = resolve_path(str(found.value), invocation.cwd)
    if not context.files.exists(path):
        named = re.search(r"zero([0-3])", posixpath.basename(path))
        facts.note(f"{found.value} ({found.source}) is not in the job's files")
        if named:
            return Sourced(int(named.group(1)), f"derived: the file name {found.value}"), None
        return None, None
    config = read_deepspeed(context.files, path)
    return config.zero_stage, config.precision


def _fsdp_stage(settings: Settings) -> Sourced | None:
    """The ZeRO stage of the FSDP settings: the ``fsdp`` list's strategy, ``fsdp_config``'s
    ``(fsdp_)sharding_strategy`` or FSDP2 ``reshard_after_forward``; full sharding when none."""
    config = settings.get("fsdp_config")
    where = settings.values.get("fsdp_config") or settings.values.get("fsdp")
    if isinstance(config, Mapping):
        for key in (
            "fsdp_sharding_strategy",
            "sharding_strategy",
            "reshard_after_forward",
            "fsdp_reshard_after_forward",
        ):
            stage = fsdp_zero_stage(config.get(key)) if key in config else None
            if stage is not None and where is not None:
                return Sourced(stage, f"{where.source} ({key})")
    words = settings.get("fsdp")
    for word in words if isinstance(words, list) else str(words or "").split():
        stage = fsdp_zero_stage(str(word).upper()) if str(word) in _FSDP_WORDS else None
        if stage is not None:
            return Sourced(stage, settings.values["fsdp"].source)
    if where is None:
        return None
    return Sourced(3, f"derived: FSDP shards fully by default ({where.source})")


def _precision(facts: Facts, settings: Settings, ds_precision: Sourced | None) -> None:
    """DeepSpeed's enabled precision > ``fp8`` > ``fp16`` > ``bf16`` (``auto``: bf16 on GPUs
    that support it, Ampere and newer)."""
    if ds_precision is not None:
        facts.set("parallelism.precision", ds_precision.value, ds_precision.source)
        return
    for name in ("fp8", "fp16"):
        found = settings.values.get(name)
        if found is not None and as_bool(found.value):
            facts.set("parallelism.precision", precision_name(name), found.source)
            return
    found = settings.values.get("bf16")
    if found is None:
        return
    if str(found.value).lower() == "auto":
        facts.note("bf16: auto -> bf16 on Ampere and newer GPUs (fp16 before them)")
        settings.record(facts, "parallelism.precision", "bf16", "bf16")
    elif as_bool(found.value):
        facts.set("parallelism.precision", "bf16", found.source)
    else:
        facts.note("bf16 is off and no fp16/fp8: the run trains in fp32 (precision left open)")


READER = AxolotlReader()
