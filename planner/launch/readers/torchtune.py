"""torchtune launches: ``tune run [torchrun options] <recipe> --config <name or path>
[key=value ...]`` (and a recipe script run directly with ``--config``).

Resolution follows torchtune 0.7 (pytorch/torchtune@bd2a0fc): ``tune run`` takes torchrun's
options before the recipe (torchtune/_cli/run.py; without any it runs one process); ``--config``
is a built-in name (``llama3_1/8B_full`` = recipes/configs/llama3_1/8B_full.yaml, read from the
job's tree when it holds that file, else from the catalog ``planner/launch/data/torchtune.yaml``)
or a path; ``key=value`` overrides beat the YAML, ``model=<builder>`` sets
``model._component_`` and ``~key`` removes a key (torchtune/config/_utils.py
``_merge_yaml_and_cli_args``), as :mod:`planner.launch.readers.torchtune_config` reads them.
The model shape comes from the ``model._component_`` builder through the catalog; LoRA builders
add ``lora_rank`` / ``lora_alpha`` / targets. The distributed recipes shard with FSDP2 over
``data_parallel_shard_dim`` (-1: the ranks left by replicate x TP x CP,
torchtune/training/_distributed.py ``ParallelDims``); ``batch_size`` is per data-parallel rank.
Training length is epoch based: the optimizer steps depend on the dataset's size, so
``train_iters`` is left unknown unless ``max_steps_per_epoch`` bounds it. torchtune's decoders
project query, key and value, and gate and up, with separate linears, stated by builder family
as :mod:`planner.launch.model_code` gives them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from planner.launch.configs import ConfigTree
from planner.launch.data import load_data
from planner.launch.model_code import TORCHTUNE, state_projections
from planner.launch.reader import ReadContext
from planner.launch.readers.torchrun import record_world, torchrun_world_size
from planner.launch.readers.torchtune_config import (
    TuneConfig,
    TuneRun,
    load_tune_config,
    parse_tune_run,
)
from planner.launch.types import Facts, Invocation
from planner.launch.values import (
    PURE_BF16_STATES,
    as_bool,
    as_int,
    mapping_of,
    torch_adam_implementation,
)

__all__ = ["READER", "TorchtuneReader", "config_facts"]

_DATA = "torchtune.yaml"
_LORA_TARGETS = {
    "q_proj": "linear_qkv",
    "k_proj": "linear_qkv",
    "v_proj": "linear_qkv",
    "output_proj": "linear_proj",
}


def _recipes(data: Mapping[str, object]) -> set[str]:
    """The recipes the catalog's built-in configs run with."""
    names: set[str] = set()
    for entry in mapping_of(data.get("configs")).values():
        recipe = mapping_of(entry).get("recipe")
        names.update(str(r) for r in (recipe if isinstance(recipe, list) else [recipe]))
    return names


def _short(data: Mapping[str, object]) -> str:
    return str(data.get("commit", ""))[:7]


def _default_source(data: Mapping[str, object], path: object, what: str = "") -> str:
    """``default of torchtune <version> (<repo>/<path>@<short commit>[ <what>])``."""
    suffix = f" {what}" if what else ""
    return (
        f"default of torchtune {data.get('version', '')} ({data.get('repo', '')}/"
        f"{path or ''}@{_short(data)}{suffix})"
    )


class TorchtuneReader:
    """The torchtune reader (module docstring)."""

    name = "torchtune"

    def recognises(self, invocation: Invocation) -> bool:
        program = posixpath.basename(invocation.program)
        if program == "tune":
            return bool(invocation.args) and invocation.args[0] == "run"
        if program.endswith(".py") and "--config" in invocation.args:
            return program[:-3] in _recipes(load_data(_DATA))
        return False

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        data = load_data(_DATA)
        facts = Facts()
        script = posixpath.basename(invocation.program) != "tune"
        run = parse_tune_run(
            ("run", invocation.program, *invocation.args) if script else invocation.args
        )
        if run is None or not run.recipe:
            facts.note("torchtune: tune run names no recipe")
            return facts
        recipe = posixpath.splitext(posixpath.basename(run.recipe))[0]
        facts.set("training.framework", "fsdp", "launch: torchtune recipes train with FSDP2")
        if run.config is None:
            facts.note("torchtune: no --config; the recipe cannot run")
            return facts
        config = load_tune_config(run, invocation, context, data, facts)
        distributed = not recipe.endswith("single_device")
        _model(facts, config, data, recipe)
        _world(facts, run, invocation, context, distributed)
        _layout(facts, config, data, distributed)
        _training(facts, config, data)
        return facts


def config_facts(facts: Facts, tree: ConfigTree, recipe: str, recipe_source: str) -> None:
    """A resolved torchtune config (the YAML a recipe logs at start, command-line overrides
    merged in) -> the model, LoRA, batch, precision, recomputation, sequence and steps, as
    :class:`TorchtuneReader` reads them; ``recipe``: the recipe's name (LoRA recipes train
    adapters), cited as ``recipe_source``."""
    data = load_data(_DATA)
    config = TuneConfig(tree, {}, "", ())
    _model(facts, config, data, recipe, recipe_source)
    _training(facts, config, data)


def _model(
    facts: Facts,
    config: TuneConfig,
    data: Mapping[str, object],
    recipe: str,
    recipe_source: str = "",
) -> None:
    found = config.find("model._component_")
    component = str(found[0]) if found is not None else ""
    builder = component.rpartition(".")[2]
    lora = builder.startswith(("lora_", "qlora_"))
    base = builder.partition("_")[2] if lora else builder
    base = str(mapping_of(data.get("aliases")).get(base, base))
    mode_source = recipe_source or f"launch: recipe {recipe}"
    if "lora" in recipe or (lora and "full" not in recipe):
        facts.set("training.mode", "lora", mode_source)
    else:
        facts.set("training.mode", "sft", mode_source)
    if found is None:
        facts.note("torchtune: the config names no model._component_")
        return
    facts.set("launch.model_name", builder, found[1])
    shape = mapping_of(mapping_of(data.get("models")).get(base))
    if not shape:
        facts.note(f"torchtune: model builder {component} is not in the catalog")
        return
    source = (
        f"catalog:{builder} (torchtune {data.get('version', '')} model builder, "
        f"{data.get('repo', '')}/{shape.get('path', '')}:{shape.get('line', '')}@{_short(data)})"
    )
    facts.set("model.activation", "swiglu", source)
    for key, value in shape.items():
        if key in {"path", "line", "moe_every_n_layers"}:
            continue
        facts.set(f"model.{key}", value, source)
    family = str(shape.get("path", "")).split("/")[2:3]  # torchtune/models/<family>/...
    state_projections(facts, TORCHTUNE, family[0] if family else builder, code="torchtune")
    every = as_int(shape.get("moe_every_n_layers"))
    layers = as_int(shape.get("num_layers")) or 0
    if every and every > 1:
        pattern = [1 if (i + 1) % every == 0 else 0 for i in range(layers)]
        facts.set("model.moe_layer_freq", pattern, source)
    if lora:
        _lora(facts, config, data, builder)


def _lora(facts: Facts, config: TuneConfig, data: Mapping[str, object], builder: str) -> None:
    defaults = mapping_of(data.get("lora_defaults"))
    values = mapping_of(defaults.get("values"))
    default_source = _default_source(data, defaults.get("path"), "lora builders")

    def put(field: str, key: str) -> None:
        found = config.find(f"model.{key}")
        if found is not None:
            facts.set(field, found[0], found[1])
        elif key in values:
            facts.default(field, values[key], default_source)

    put("training.lora_rank", "lora_rank")
    put("launch.lora_alpha", "lora_alpha")
    modules = config.find("model.lora_attn_modules")
    mlp = config.find("model.apply_lora_to_mlp")
    targets: list[str] = []
    if modules is not None and isinstance(modules[0], list):
        for module in modules[0]:
            target = _LORA_TARGETS.get(str(module))
            if target and target not in targets:
                targets.append(target)
        if {"q_proj", "k_proj", "v_proj"} - {str(m) for m in modules[0]} and any(
            str(m) in {"q_proj", "k_proj", "v_proj"} for m in modules[0]
        ):
            facts.note("torchtune: LoRA on part of q/k/v recorded as linear_qkv")
    if mlp is not None and mlp[0] is True:
        targets += ["linear_fc1", "linear_fc2"]
    if targets:
        where = modules[1] if modules is not None else mlp[1] if mlp is not None else ""
        facts.set("training.lora_targets", targets, where)
    if config.value("model.apply_lora_to_output") is True:
        facts.note("torchtune: LoRA on the output projection is not in the scenario's targets")
    if builder.startswith("qlora_"):
        facts.note("torchtune: QLoRA (NF4 base weights, bf16 compute) recorded as bf16")


def _world(
    facts: Facts,
    run: TuneRun,
    invocation: Invocation,
    context: ReadContext,
    distributed: bool,
) -> None:
    """GPUs: torchrun's options on ``tune run`` (``tune run`` without any runs one process)."""
    if not distributed:
        facts.set("hardware.num_gpus", 1, "launch: single-device recipe")
        return
    options = dict(invocation.launcher_args) or dict(run.options)
    if not options:
        facts.note("torchtune: tune run without torchrun options runs one process")
        facts.set("hardware.num_gpus", 1, "launch: tune run without torchrun options")
        return
    command = "torchrun" if invocation.launcher_args else "tune run"
    world = torchrun_world_size(invocation, context, options=options, command=command)
    record_world(facts, world, context, options, command)


def _layout(
    facts: Facts, config: TuneConfig, data: Mapping[str, object], distributed: bool
) -> None:
    defaults = mapping_of(data.get("recipe_defaults"))
    values = mapping_of(defaults.get("values"))
    default_source = _default_source(data, defaults.get("path"))

    def degree(field: str | None, key: str) -> int:
        found = config.find(key)
        value = as_int(found[0]) if found is not None else as_int(values.get(key))
        if value is not None and value < 1 and key != "data_parallel_shard_dim":
            facts.note(f"torchtune: {key} {value} is not a degree >= 1; read as 1")
            value = 1
        if field is not None and value is not None:
            if found is not None:
                facts.set(field, value, found[1])
            else:
                facts.default(field, value, default_source)
        return 1 if value is None else value

    if not distributed:
        for name in ("tensor_parallel", "context_parallel", "data_parallel"):
            facts.set(f"parallelism.{name}", 1, "launch: single-device recipe")
        facts.set("parallelism.zero_stage", 0, "launch: single-device recipe")
        return
    tp = degree("parallelism.tensor_parallel", "tensor_parallel_dim")
    cp = degree("parallelism.context_parallel", "context_parallel_dim")
    replicate = degree(None, "data_parallel_replicate_dim")
    shard = degree(None, "data_parallel_shard_dim")
    facts.default("parallelism.pipeline_parallel", 1, "launch: torchtune has no pipeline")
    world = facts.int("hardware.num_gpus")
    rule = "data_parallel_shard_dim"
    if shard < 0 and world:
        shard = world // (replicate * tp * cp)
        rule = "world size / (replicate x TP x CP), data_parallel_shard_dim -1"
    if shard > 0:
        if world and replicate * shard * tp * cp != world:
            facts.note(
                f"torchtune: replicate {replicate} x shard {shard} x TP {tp} x CP {cp} != "
                f"world size {world}; torchtune refuses this layout"
            )
        facts.set("parallelism.data_parallel", replicate * shard, f"derived: replicate x ({rule})")
        if shard > 1:
            facts.set("launch.fsdp_shard", shard, f"derived: {rule}")
    reshard = config.value("fsdp_reshard_after_forward", True)
    stage = (3 if reshard is not False else 2) if shard * cp > 1 else 0
    facts.set("parallelism.zero_stage", stage, "derived: FSDP2 over the shard x CP ranks")
    offload = config.find("fsdp_cpu_offload")
    if offload is not None and offload[0] is True:
        facts.set("launch.fsdp_cpu_offload", True, offload[1])


def _training(facts: Facts, config: TuneConfig, data: Mapping[str, object]) -> None:
    for name, key in (
        ("parallelism.micro_batch_size", "batch_size"),
        ("launch.gradient_accumulation", "gradient_accumulation_steps"),
    ):
        found = config.find(key)
        if found is not None and as_int(found[0]):
            facts.set(name, as_int(found[0]), found[1])
    micro = facts.int("parallelism.micro_batch_size")
    steps = facts.int("launch.gradient_accumulation")
    dp = facts.int("parallelism.data_parallel")
    if micro and steps and dp:
        facts.set(
            "parallelism.global_batch_size",
            micro * steps * dp,
            "derived: batch_size x gradient_accumulation_steps x data parallel",
        )
    _optimizer_implementation(facts, config)
    dtype = config.find("dtype")
    if dtype is not None and str(dtype[0]) in {"bf16", "bfloat16"}:
        facts.set("parallelism.precision", "bf16", dtype[1])
        _pure_bf16(facts, config, dtype[1])
    elif dtype is not None:
        facts.note(f"torchtune: dtype {dtype[0]} has no scenario precision")
    checkpointing = config.find("enable_activation_checkpointing")
    if checkpointing is not None:
        mode = config.value("ac_mode")
        recompute = "none" if checkpointing[0] is not True else str(mode or "full")
        facts.set("parallelism.recompute", recompute, checkpointing[1])
    _sequence(facts, config, data)
    epochs = as_int(config.value("epochs"))
    per_epoch = as_int(config.value("max_steps_per_epoch"))
    if epochs and per_epoch:
        facts.set(
            "training.train_iters",
            epochs * per_epoch,
            "derived: epochs x max_steps_per_epoch (an epoch of a smaller dataset ends sooner)",
        )
    else:
        facts.note("torchtune: epoch-based training; the step count depends on the dataset")


def _optimizer_implementation(facts: Facts, config: TuneConfig) -> None:
    """``parallelism.optimizer_implementation`` of a ``torch.optim.Adam`` / ``AdamW``
    optimizer (``config.instantiate(cfg_optimizer, params)``,
    ``recipes/full_finetune_distributed.py`` ``_setup_optimizer``; pytorch/torchtune @
    bd2a0fc): ``fused: true`` fused, ``foreach`` true / false foreach / for_loop, neither
    torch's default on CUDA, foreach (assumed;
    ``_default_to_fused_or_foreach``, ``torch/optim/optimizer.py``). ``optimizer_in_bwd``
    builds one optimizer per parameter, stepped in its gradient hook, so no step spans every
    parameter: nothing stated (the profile has no foreach list)."""
    component = config.find("optimizer._component_")
    if component is None or str(component[0]) not in {"torch.optim.Adam", "torch.optim.AdamW"}:
        return
    if as_bool(config.value("optimizer_in_bwd")) is True:
        return
    field = "parallelism.optimizer_implementation"
    found = torch_adam_implementation(
        config.find("optimizer.fused"), config.find("optimizer.foreach")
    )
    if found is not None:
        facts.set(field, *found)
        return
    facts.default(
        field,
        "foreach",
        f"{component[1]}: {component[0]} without fused or foreach, torch's default on CUDA",
    )


def _pure_bf16(facts: Facts, config: TuneConfig, source: str) -> None:
    """``dtype: bf16`` trains in pure bf16: the recipes build the model under
    ``training.set_default_dtype(self._dtype)`` and shard it with ``fully_shard`` and no
    ``mp_policy`` (``recipes/full_finetune_distributed.py``,
    ``torchtune/training/_distributed.py`` ``shard_model``; pytorch/torchtune @ bd2a0fc), so
    the sharded bf16 parameters are what ``torch.optim.AdamW`` updates (no master), its moments
    ``zeros_like`` them (bf16) and the gradients are bf16. Another optimizer (8-bit, paged:
    ``bitsandbytes``, ``torchao``) keeps states of its own: only a note."""
    optimizer = config.value("optimizer._component_")
    if optimizer is not None and not str(optimizer).startswith("torch.optim.Adam"):
        facts.note(
            f"torchtune: optimizer {optimizer} keeps states of its own; the optimizer memory "
            "is read as the framework's (fp32 master and moments)"
        )
        return
    for name, value in PURE_BF16_STATES.items():
        facts.set(name, value, source)


def _sequence(facts: Facts, config: TuneConfig, data: Mapping[str, object]) -> None:
    """``tokenizer.max_seq_len`` caps (or, packed, fixes) the sequence length; absent, the
    tokenizer builder's default applies."""
    found = config.find("tokenizer.max_seq_len")
    if found is not None:
        if as_int(found[0]):
            facts.set("model.seq_length", as_int(found[0]), found[1])
            return
    else:
        tokenizer = str(config.value("tokenizer._component_", ""))
        known = mapping_of(mapping_of(data.get("tokenizers")).get(tokenizer))
        if as_int(known.get("max_seq_len")):
            facts.default(
                "model.seq_length",
                as_int(known.get("max_seq_len")),
                _default_source(data, known.get("path"), tokenizer.rpartition(".")[2]),
            )
            return
    facts.note("torchtune: tokenizer.max_seq_len is null; samples keep their own lengths")


READER = TorchtuneReader()
