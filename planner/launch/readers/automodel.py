"""NVIDIA NeMo Automodel launches: ``automodel <config.yaml> [--nproc-per-node N]
[--a.b=value ...]`` (also ``am``, ``python -m nemo_automodel.cli.app`` and ``torchrun ... -m
nemo_automodel.cli.app``), and an LLM recipe module run directly with ``--config`` (``torchrun
... -m nemo_automodel.recipes.llm.train_ft --config <yaml>``, or the recipe's file path). The
command line and its overrides are read as :mod:`planner.launch.readers.automodel_config`
describes; the defaults come from ``planner/launch/data/automodel.yaml`` (NVIDIA-NeMo/Automodel
@36044ad3, each entry citing its file).

What the reader takes from the config: the recipe (``recipe:``; train_ft fine-tunes, the
benchmark recipe trains every weight on mock data; a ``peft:`` section trains LoRA adapters
with ``dim`` / ``alpha`` / ``target_modules``), the model (``model.pretrained_model_name_or_path``
or ``model.config.pretrained_model_name_or_path``, resolved as the other readers resolve a
Hugging Face id or local ``config.json``), ``distributed:`` (``tp_size``, ``cp_size``,
``pp_size``, ``ep_size``, ``dp_size`` (null: world / (TP x CP x PP)), ``dp_replicate_size``,
``strategy``, ``sequence_parallel``, ``enable_async_tensor_parallel`` -> ``tp_comm_overlap``,
``activation_checkpointing``, ``enable_compile``), the top-level ``compile:`` (torch.compile
of the whole model or of each decoder layer, whichever the strategy applies: the loss stays
outside, ``training.compiled_loss`` false; no scenario field holds the compiled model, noted),
``step_scheduler:`` (``global_batch_size``,
``local_batch_size``, ``max_steps``; accumulation = global / (local x data parallel)) and the
sequence length (``packed_sequence.packed_sequence_size`` when packing, else
``dataset.seq_len``). The framework is ``automodel``. The optimizer's implementation
(``parallelism.optimizer_implementation``): ``optimizer.fused: true`` fused, else
``optimizer.foreach`` true foreach / false for_loop (passed to ``torch.optim.Adam`` /
``AdamW``, over the ``foreach=False`` Automodel gives at ``tensor_parallel`` > 1); Transformer
Engine's ``FusedAdam`` (``optimizer._target_``) fused; unset, the profile's.

FSDP2 (the default strategy) shards parameters, gradients and optimizer state over the
``dp_shard`` x CP ranks: ZeRO stage 3 as the torchtitan and torchtune readers record FSDP2;
``reshard_after_forward: false`` (or its default under pipeline parallelism, where Automodel
keeps the gathered layers resident) is stage 2. ``megatron_fsdp`` sets
``parallelism.megatron_fsdp`` and takes ``zero_dp_strategy`` (0-3 or Megatron-FSDP's names,
default 3); ``ddp`` replicates (stage 0).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from fnmatch import fnmatchcase

from planner.errors import SourceError
from planner.launch.data import load_data
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.automodel_config import (
    AutomodelRun,
    AutoSettings,
    is_cli,
    load_settings,
    parse_run,
    recipe_module,
)
from planner.launch.readers.hf import HF_LORA_MODULES, lora_targets
from planner.launch.readers.torchrun import record_world, torchrun_world_size
from planner.launch.types import Facts, Invocation
from planner.launch.values import as_bool, as_int, mapping_of, torch_adam_implementation
from planner.scenario.megatron_table import MEGATRON_FSDP_STAGES

__all__ = ["READER", "AutomodelReader"]

_DATA = "automodel.yaml"
_MODEL_BUILDERS = (
    "nemo_automodel.NeMoAutoModelForCausalLM.",
    "nemo_automodel._transformers.NeMoAutoModelForCausalLM.",
    "nemo_automodel.components._transformers.auto_model.NeMoAutoModelForCausalLM.",
)


def _cite(data: Mapping[str, object], section: str) -> str:
    """``default of NeMo Automodel (<repo>/<path>@<short commit>)`` for a data section."""
    return _cite_path(data, mapping_of(data.get(section)).get("path", ""))


def _cite_path(data: Mapping[str, object], path: object) -> str:
    """``default of NeMo Automodel (<repo>/<path>@<short commit>)``."""
    return f"default of NeMo Automodel ({_at(data, path)})"


def _at(data: Mapping[str, object], path: object) -> str:
    """``<repo>/<path>@<short commit>`` of a file of the data's NeMo Automodel commit."""
    return f"{data.get('repo', '')}/{path}@{str(data.get('commit'))[:8]}"


def _defaults(data: Mapping[str, object], section: str) -> Mapping[str, object]:
    return mapping_of(mapping_of(data.get(section)).get("values"))


def _words(value: object) -> set[str]:
    """The items of a list in the data file, as text."""
    return {str(item) for item in value} if isinstance(value, list) else set()


class AutomodelReader:
    """The NeMo Automodel reader (module docstring)."""

    name = "automodel"

    def recognises(self, invocation: Invocation) -> bool:
        program = invocation.program
        if posixpath.basename(program) == "am":
            first = next((a for a in invocation.args if not a.startswith("-")), "")
            return first.endswith((".yaml", ".yml"))
        if is_cli(program):
            return True
        return recipe_module(program) in mapping_of(load_data(_DATA).get("recipes"))

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the invocation trains (module docstring). Raises ``SourceError`` / ``SpecError``
        when the config cannot be read or parsed."""
        data = load_data(_DATA)
        facts = Facts()
        run = parse_run(invocation)
        facts.set("training.framework", "automodel", "launch: NeMo Automodel")
        if run.config is None:
            facts.note(
                "automodel: the command names no config (automodel <config.yaml>, or --config "
                "for a recipe module); the recipe's built-in default path is not part of a "
                "release, so nothing of the run is read"
            )
            return facts
        try:
            settings, _path = load_settings(run, invocation, context.files)
        except SourceError as exc:
            raise SourceError(
                exc.source,
                f"{exc.message}; it is the Automodel config the command names "
                "(relative to the job's directory)",
            ) from None
        recipe_mode = _recipe(facts, settings, run, data)
        _unknown_keys(facts, settings, data)
        _model(facts, settings, invocation, context)
        world = _world(facts, run, invocation, context)
        dp, pp = _layout(facts, settings, data, world)
        _batch(facts, settings, data, dp, pp)
        _sequence(facts, settings, data)
        _mode(facts, settings, data, recipe_mode)
        _fp8(facts, settings)
        _optimizer_implementation(facts, settings)
        return facts


_FIELD_IMPLEMENTATION = "parallelism.optimizer_implementation"
_TORCH_ADAM = ("torch.optim.Adam", "torch.optim.AdamW")


def _optimizer_implementation(facts: Facts, settings: AutoSettings) -> None:
    """``parallelism.optimizer_implementation`` from the ``optimizer:`` section (module
    docstring). ``OptimizerFromFactoryConfig.build`` passes the section's keys to the factory
    and adds ``foreach`` only where the config has none (``_foreach_for_mesh``: False at
    ``tensor_parallel`` > 1; NVIDIA-NeMo/Automodel
    ``nemo_automodel/components/optim/optimizer.py`` @ ``36044ad3d1``); ``torch.optim.Adam``
    runs fused when ``fused`` is true (its recipes that set it also set ``foreach: false``, as
    torch refuses both true), ``_multi_tensor_adam`` for ``foreach`` true and
    ``_single_tensor_adam`` for false (``torch/optim/adam.py``). TE ``FusedAdam`` steps in
    multi-tensor CUDA kernels without a temporary list (``fused``)."""
    target = settings.find("optimizer._target_")
    if target is None or not isinstance(target[0], str):
        return
    if target[0].endswith(".FusedAdam"):
        facts.set(_FIELD_IMPLEMENTATION, "fused", target[1])
        return
    if target[0] not in _TORCH_ADAM:
        return
    found = torch_adam_implementation(
        settings.find("optimizer.fused"), settings.find("optimizer.foreach")
    )
    if found is not None:
        facts.set(_FIELD_IMPLEMENTATION, *found)


def _recipe(
    facts: Facts, settings: AutoSettings, run: AutomodelRun, data: Mapping[str, object]
) -> tuple[str, str]:
    """``(training mode, source)`` of the recipe: the module run directly, else the YAML's
    ``recipe:`` (a class name, a dotted path or a ``_target_``)."""
    recipes = mapping_of(data.get("recipes"))
    if run.command:
        legacy = mapping_of(data.get("legacy_cli"))
        entry = mapping_of(mapping_of(legacy.get("commands")).get(run.command))
        module = str(entry.get("module", ""))
        if run.domain != "llm" or module not in recipes:
            facts.note(
                f"automodel: `automodel {run.command} {run.domain}` runs a recipe the reader "
                "does not model (it reads the LLM train_ft and benchmark recipes); read as the "
                "fine-tuning recipe"
            )
        source = f"launch: automodel {run.command} {run.domain} ({legacy.get('path', '')})"
        return str(entry.get("mode", "sft")), source
    if run.module:
        entry = mapping_of(recipes.get(run.module))
        return str(entry.get("mode", "sft")), f"launch: recipe {run.module}"
    found = settings.find("recipe")
    raw: object = found[0] if found is not None else None
    if isinstance(raw, Mapping):
        raw = mapping_of(raw).get("_target_")
    if found is None or not isinstance(raw, str) or not raw.strip():
        facts.note(
            "automodel: the config names no recipe (recipe: <class>); the automodel CLI refuses "
            "it. Read as the fine-tuning recipe (train_ft)"
        )
        return "sft", "derived: no recipe named; read as train_ft"
    target = raw.strip()
    for module, item in recipes.items():
        name = str(mapping_of(item).get("class", ""))
        if target in {name, f"{module}.{name}"}:
            return str(mapping_of(item).get("mode", "sft")), f"{found[1]} (recipe {name})"
    facts.note(
        f"automodel: recipe {target} ({found[1]}) is not one the reader models (train_ft, "
        "benchmark); its model, layout and batch are read as the fine-tuning recipe's, and "
        "anything else it runs (a teacher model, a draft head) is not counted"
    )
    return "sft", f"{found[1]} (recipe {target}, read as train_ft)"


def _unknown_keys(facts: Facts, settings: AutoSettings, data: Mapping[str, object]) -> None:
    """A note for each top-level section the LLM recipes do not read."""
    known = _words(data.get("top_level_keys"))
    for key in settings.section_keys(""):
        if key not in known:
            facts.note(f"automodel: top-level key {key!r} is not read by the LLM recipes")


def _fp32_model(facts: Facts, settings: AutoSettings) -> None:
    """``model.torch_dtype: float32``: the model is built in fp32 (``"auto"`` builds bf16,
    ``_transformers/auto_model.py``) and FSDP2's ``mp_policy`` casts it to bf16 only for the
    compute ("Pair with ``model.torch_dtype: float32`` for fp32 optimizer state",
    ``nemo_automodel/components/distributed/config.py``; NVIDIA-NeMo/Automodel @ 36044ad3d),
    so ``torch.optim.Adam`` updates fp32 shards with fp32 moments (``zeros_like``): the
    scenario's optimizer dtypes, over the profile's bf16 ones."""
    dtype = settings.find("model.torch_dtype")
    if dtype is None or str(dtype[0]).replace("torch.", "") not in {"float32", "fp32"}:
        return
    for name in ("main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        facts.set(f"parallelism.{name}", "fp32", dtype[1])


def _model(
    facts: Facts, settings: AutoSettings, invocation: Invocation, context: ReadContext
) -> None:
    """The model the ``model:`` section loads (``_model_name_from_cfg``,
    ``nemo_automodel/recipes/_typed_config.py:119``)."""
    target = settings.value("model._target_")
    if isinstance(target, str) and not target.startswith(_MODEL_BUILDERS):
        facts.note(
            f"automodel: model builder {target} is read only through the model name it is given"
        )
    _fp32_model(facts, settings)
    for key in (
        "model.pretrained_model_name_or_path",
        "model.config.pretrained_model_name_or_path",
    ):
        found = settings.find(key)
        if found is not None and isinstance(found[0], str):
            resolve_model(
                found[0], facts=facts, files=context.files, cwd=invocation.cwd, source=found[1]
            )
            return
    config = settings.find("model.config")
    if config is not None and isinstance(config[0], str):
        resolve_model(
            config[0], facts=facts, files=context.files, cwd=invocation.cwd, source=config[1]
        )
        return
    facts.note(
        "automodel: the model: section names no pretrained_model_name_or_path; the model's "
        "shape is not read (describe it with a scenario)"
    )


def _world(
    facts: Facts, run: AutomodelRun, invocation: Invocation, context: ReadContext
) -> int | None:
    """The processes: torchrun's (when torchrun starts the program), else the automodel CLI's
    ``--nproc-per-node`` (without it, one per GPU of the node:
    ``components/launcher/interactive.py``), else one python process."""
    if invocation.launcher == "torchrun" or not run.cli:
        world = torchrun_world_size(invocation, context)
        if world is None and not run.cli and invocation.launcher in {"", "python"}:
            world = (1, "launch: one python process (no torchrun)")
        record_world(facts, world, context, invocation.launcher_args)
        return world[0] if world is not None else None
    options = {"nproc_per_node": run.nproc_per_node or "gpu", "nnodes": run.nnodes}
    world = torchrun_world_size(invocation, context, options=options, command="automodel")
    if world is None:
        facts.note(
            "automodel: without --nproc-per-node the CLI starts one process per GPU of the "
            "node, and the launch does not say how many the node has"
        )
    elif not run.nproc_per_node:
        facts.note("automodel: no --nproc-per-node: one process per GPU of the node")
    record_world(facts, world, context, options, command="automodel")
    return world[0] if world is not None else None


def _size(
    facts: Facts, settings: AutoSettings, data: Mapping[str, object], key: str, field: str = ""
) -> int | None:
    """A ``distributed.<key>`` size >= 1, recorded as ``field`` when one is named; the default
    when left out or null; None for an unset ``dp_size`` (inferred)."""
    found = settings.find(f"distributed.{key}")
    raw = found[0] if found is not None else None
    if isinstance(raw, str) and raw.lower() == "none":
        raw = None  # YAML ``none`` is text; the example configs use it for an inferred size
    value = as_int(raw)
    if raw is not None and (value is None or value < 1):
        facts.note(f"automodel: distributed.{key} {raw!r} is not a size >= 1; read as unset")
        value = None
    if value is not None and found is not None:
        if field:
            facts.set(field, value, found[1])
        return value
    fallback = as_int(_defaults(data, "distributed_defaults").get(key))
    if field and fallback is not None:
        facts.default(field, fallback, _cite(data, "distributed_defaults"))
    return fallback


def _layout(
    facts: Facts, settings: AutoSettings, data: Mapping[str, object], world: int | None
) -> tuple[int | None, int]:
    """The parallel layout of ``distributed:`` (module docstring): ``(data parallel, PP)``;
    with it what the strategy and layout decide: sharding, FSDP2's policies and TP options,
    recompute and torch.compile (:func:`_compile`)."""
    tp = _size(facts, settings, data, "tp_size", "parallelism.tensor_parallel") or 1
    cp = _size(facts, settings, data, "cp_size", "parallelism.context_parallel") or 1
    pp = _size(facts, settings, data, "pp_size", "parallelism.pipeline_parallel") or 1
    ep = _size(facts, settings, data, "ep_size", "parallelism.expert_parallel") or 1
    given_dp = _size(facts, settings, data, "dp_size")
    replicate = _size(facts, settings, data, "dp_replicate_size") or 1
    strategy = _strategy(facts, settings, data)
    dp = given_dp
    given = settings.find("distributed.dp_size")
    if dp is not None and given is not None:
        facts.set("parallelism.data_parallel", dp, given[1])
    elif world:
        if world % (tp * cp * pp):
            facts.note(
                f"automodel: world size {world} is not a multiple of TP {tp} x CP {cp} x PP "
                f"{pp}; Automodel refuses this layout"
            )
        else:
            dp = world // (tp * cp * pp)
            facts.set(
                "parallelism.data_parallel",
                dp,
                "derived: world size / (TP x CP x PP), dp_size unset "
                "(nemo_automodel/components/distributed/mesh_utils.py:105)",
            )
    if dp and world and dp * tp * cp * pp != world:
        facts.note(
            f"automodel: dp {dp} x TP {tp} x CP {cp} x PP {pp} != world size {world}; "
            "Automodel refuses this layout"
        )
    if dp and ep > 1 and (dp * cp * tp) % ep:
        facts.note(f"automodel: ep_size {ep} does not divide dp x CP x TP; Automodel refuses it")
    if dp and replicate > 1 and (dp % replicate or replicate >= dp):
        facts.note(
            f"automodel: dp_replicate_size {replicate} must divide dp_size {dp} and be smaller"
        )
    _sharding(facts, settings, data, strategy, (dp, replicate, cp, pp))
    if strategy == "fsdp2":
        _fsdp2_policies(facts, settings, data)
        _tensor_parallel(facts, settings, data, tp)
    _recompute(facts, settings, data)
    _compile(facts, settings, data, strategy, (tp, pp))
    return dp, pp


def _strategy(facts: Facts, settings: AutoSettings, data: Mapping[str, object]) -> str:
    """The strategy's kind (``fsdp2``, ``megatron_fsdp``, ``ddp``) and a note for each
    ``distributed:`` key its config dataclass does not take (Automodel refuses those)."""
    table = mapping_of(data.get("strategies"))
    names = mapping_of(table.get("names"))
    found = settings.find("distributed.strategy")
    written = str(found[0]).lower() if found is not None and found[0] is not None else "fsdp2"
    kind = str(names.get(written, ""))
    if not kind:
        facts.note(
            f"automodel: distributed.strategy {written!r} is not one Automodel knows "
            f"({', '.join(str(n) for n in names)}); read as fsdp2"
        )
        kind = "fsdp2"
    own = _words(table.get("section_keys"))
    takes = _words(mapping_of(table.get("keys")).get(kind))
    for key in settings.section_keys("distributed"):
        if key not in own and key not in takes:
            facts.note(
                f"automodel: distributed.{key} is not a {kind} setting; Automodel's strategy "
                "config refuses unknown keys"
            )
    return kind


def _sharding(
    facts: Facts,
    settings: AutoSettings,
    data: Mapping[str, object],
    strategy: str,
    mesh: tuple[int | None, int, int, int],
) -> None:
    """``parallelism.zero_stage`` (and ``launch.fsdp_shard``) of the strategy (module
    docstring)."""
    dp, replicate, cp, pp = mesh
    if dp is None:
        return
    shard = max(1, dp // replicate)
    rule = "derived: FSDP2 over the dp_shard x CP ranks"
    if strategy == "ddp":
        facts.set("parallelism.zero_stage", 0, "derived: distributed.strategy ddp replicates")
        return
    if strategy == "megatron_fsdp":
        _megatron_fsdp(facts, settings, data, sharded=dp * cp > 1)
        return
    reshard = settings.find("distributed.reshard_after_forward")
    kept = reshard is not None and as_bool(reshard[0]) is False
    if reshard is None or reshard[0] is None:
        kept = pp > 1
        if kept:
            rule += " (pipeline layers stay gathered after forward: reshard_after_forward unset)"
    elif kept:
        rule += f" (reshard_after_forward false, {reshard[1]})"
    stage = (2 if kept else 3) if shard * cp > 1 else 0
    facts.set("parallelism.zero_stage", stage, rule)
    if shard > 1:
        facts.set("launch.fsdp_shard", shard, "derived: dp_size / dp_replicate_size")


def _megatron_fsdp(
    facts: Facts, settings: AutoSettings, data: Mapping[str, object], *, sharded: bool
) -> None:
    """``parallelism.megatron_fsdp`` and the ZeRO stage of ``distributed.zero_dp_strategy``
    (default 3, ``MegatronFSDPConfig``), 0 over a single data-parallel x CP rank. Automodel
    passes the value to ``megatron_fsdp.fully_shard`` (``megatron_fsdp_strategy_parallelize``,
    nemo_automodel/components/distributed/parallelizer.py @
    36044ad3d139363fb6c73c24af2e7c6b65ec52f6), which takes ``ShardingStrategy`` 0-3 or its names
    (``no_shard`` 0, ``optim`` 1, ``optim_grads`` 2, ``optim_grads_params`` 3) as Megatron-FSDP's
    ``data_parallel_sharding_strategy`` and raises ``ValueError`` at any other (NVIDIA/Megatron-LM
    ``megatron/core/distributed/fsdp/src/megatron_fsdp/fully_shard.py`` @
    d98e8a64ddf34856e74b24714e3bedb2f5a39553): the stages of :data:`MEGATRON_FSDP_STAGES`."""
    on = settings.find("distributed.strategy")
    where = on[1] if on is not None else "derived: distributed.strategy megatron_fsdp"
    facts.set("parallelism.megatron_fsdp", True, where)
    found = settings.find("distributed.zero_dp_strategy")
    written = found[0] if found is not None else None
    named = isinstance(written, str) and written in MEGATRON_FSDP_STAGES
    stage = MEGATRON_FSDP_STAGES[str(written)] if named else as_int(written)
    if found is None or stage not in MEGATRON_FSDP_STAGES.values():
        if found is not None:
            facts.note(
                f"automodel: distributed.zero_dp_strategy {written!r} is not a Megatron-FSDP "
                f"sharding strategy (0-3 or {', '.join(MEGATRON_FSDP_STAGES)}; fully_shard "
                "raises ValueError); read as the default"
            )
        stage = as_int(_defaults(data, "megatron_fsdp_defaults").get("zero_dp_strategy")) or 3
        source = _cite(data, "megatron_fsdp_defaults")
    else:
        source = found[1]
    facts.set("parallelism.zero_stage", stage if sharded else 0, source)


def _fsdp2_policies(facts: Facts, settings: AutoSettings, data: Mapping[str, object]) -> None:
    """FSDP2's CPU offload (``offload_policy``) and compute precision (``mp_policy``'s
    ``param_dtype``, bf16 by default)."""
    offload = settings.find("distributed.offload_policy")
    if offload is not None and offload[0]:
        facts.set("launch.fsdp_cpu_offload", True, offload[1])
    param = settings.find("distributed.mp_policy.param_dtype")
    if param is None or param[0] is None:
        facts.default("parallelism.precision", "bf16", _cite(data, "fsdp2_defaults"))
    elif str(param[0]).replace("torch.", "") in {"bfloat16", "bf16"}:
        facts.set("parallelism.precision", "bf16", param[1])
    else:
        facts.note(f"automodel: mp_policy param_dtype {param[0]} has no scenario precision")


def _tensor_parallel(
    facts: Facts, settings: AutoSettings, data: Mapping[str, object], tp: int
) -> None:
    """``sequence_parallel`` and ``enable_async_tensor_parallel`` (-> ``tp_comm_overlap``)
    with TP > 1; both default off (``FSDP2Config``). Async TP without sequence parallelism is
    refused by Automodel (``components/distributed/parallelizer.py:331``)."""
    if tp <= 1:
        return
    default_source = _cite(data, "fsdp2_defaults")
    values: dict[str, bool] = {}
    for key, field in (
        ("sequence_parallel", "parallelism.sequence_parallel"),
        ("enable_async_tensor_parallel", "parallelism.tp_comm_overlap"),
    ):
        found = settings.find(f"distributed.{key}")
        value = as_bool(found[0]) if found is not None else None
        if found is not None and value is None:
            facts.note(f"automodel: distributed.{key} {found[0]!r} is not a boolean; read as off")
        if found is not None and value is not None:
            facts.set(field, value, found[1])
        else:
            facts.default(field, False, default_source)
        values[key] = bool(value)
    if values["enable_async_tensor_parallel"] and not values["sequence_parallel"]:
        facts.note(
            "automodel: enable_async_tensor_parallel needs sequence_parallel: true; Automodel "
            "refuses to start without it"
        )


def _compile(
    facts: Facts,
    settings: AutoSettings,
    data: Mapping[str, object],
    strategy: str,
    sizes: tuple[int, int],
) -> None:
    """torch.compile (the data's ``compile`` entry): the top-level ``compile.enabled`` compiles
    the whole model under megatron_fsdp and ddp, fsdp2's ``distributed.enable_compile`` (or
    async TP at TP ``sizes[0]`` > 1) each decoder layer; neither runs with a pipeline
    (PP ``sizes[1]`` > 1) and ``compile.enabled`` is not applied under fsdp2 (both noted). What
    does run compiled sets ``training.compiled_loss`` false, the loss being outside the
    compiled module, and is noted: no scenario field says a compiled model, which is timed as
    the automodel profile's eager PyTorch."""
    tp, pp = sizes
    entry = mapping_of(data.get("compile"))
    whole, layer = (mapping_of(entry.get(part)) for part in ("whole_model", "per_layer"))
    compiled: list[tuple[str, str]] = []
    found = settings.find(str(whole.get("key")))
    if found is not None and as_bool(found[0]) is True:
        where = _at(data, whole.get("path"))
        takes = sorted(_words(whole.get("strategies")))
        if pp > 1:
            facts.note(
                f"automodel: compile.enabled ({found[1]}) compiles nothing with pipeline "
                f"parallelism (pp_size {pp}): the pipeline path does not compile ({where})"
            )
        elif strategy not in takes:
            facts.note(
                f"automodel: compile.enabled ({found[1]}) is not applied under {strategy}: "
                f"Automodel compiles the whole model only under {' and '.join(takes)} ({where}; "
                f"releases before {whole.get('fsdp2_until')} under fsdp2 too); fsdp2 compiles "
                f"each decoder layer with {layer.get('key')}"
            )
        else:
            compiled.append(("the whole model", found[1]))
    if strategy in _words(layer.get("strategies")):
        per = settings.find(str(layer.get("key")))
        label = str(layer.get("key"))
        if per is None or as_bool(per[0]) is not True:
            per = settings.find("distributed.enable_async_tensor_parallel") if tp > 1 else None
            label = "async TP"
        if per is not None and as_bool(per[0]) is True:
            if pp > 1:
                facts.note(
                    f"automodel: the per-layer compile of {label} ({per[1]}) does not run with "
                    f"pipeline parallelism (pp_size {pp}; {_at(data, layer.get('path'))})"
                )
            else:
                compiled.append(("each decoder layer", f"{label}, {per[1]}"))
    if not compiled:
        return
    what = " and ".join(name for name, _ in compiled)
    sources = ", ".join(source for _, source in compiled)
    facts.set(
        "training.compiled_loss",
        False,
        f"derived: Automodel compiles {what} ({sources}); loss_fn runs on the logits outside "
        f"it ({_at(data, entry.get('loss_path'))})",
    )
    facts.note(
        f"automodel: torch.compile of {what} ({sources}) fuses the element-wise ops between "
        "the GEMMs; no scenario field says a compiled model, so the step is timed as the "
        "automodel profile's eager PyTorch"
    )


def _recompute(facts: Facts, settings: AutoSettings, data: Mapping[str, object]) -> None:
    """``distributed.activation_checkpointing``: true / full, selective, or off (default)."""
    found = settings.find("distributed.activation_checkpointing")
    if found is None or found[0] is None:
        facts.default("parallelism.recompute", "none", _cite(data, "distributed_defaults"))
        return
    word = str(found[0]).lower().replace("-", "_")
    if found[0] is True or word in {"true", "on", "full", "enabled", "yes"}:
        facts.set("parallelism.recompute", "full", found[1])
    elif word == "selective":
        facts.set("parallelism.recompute", "selective", found[1])
    elif found[0] is False or word in {"false", "off", "none", "disabled", "no"}:
        facts.set("parallelism.recompute", "none", found[1])
    else:
        facts.note(f"automodel: activation_checkpointing {found[0]!r} is refused by Automodel")


def _batch(
    facts: Facts,
    settings: AutoSettings,
    data: Mapping[str, object],
    dp: int | None,
    pp: int,
) -> None:
    """Micro batch (``local_batch_size``; under PP the pipeline microbatch, the local batch
    being the pipeline batch), global batch, accumulation and steps (``step_scheduler:``)."""
    defaults = _defaults(data, "step_scheduler_defaults")
    default_source = _cite(data, "step_scheduler_defaults")

    def put(field: str, key: str) -> int:
        found = settings.find(f"step_scheduler.{key}")
        value = as_int(found[0]) if found is not None else None
        if found is not None and value is not None and value > 0:
            facts.set(field, value, found[1])
            return value
        if found is not None and found[0] is not None:
            facts.note(f"automodel: step_scheduler.{key} {found[0]!r} is not a count > 0")
        fallback = as_int(defaults.get(key)) or 1
        facts.default(field, fallback, default_source)
        return fallback

    local_field = "parallelism.pipeline_batch_size" if pp > 1 else "parallelism.micro_batch_size"
    local = put(local_field, "local_batch_size")
    if pp > 1:
        found = settings.find("distributed.pipeline.pp_microbatch_size")
        micro = as_int(found[0]) if found is not None else None
        if found is not None and micro and micro > 0:
            facts.set("parallelism.micro_batch_size", micro, found[1])
        else:
            micro = as_int(_defaults(data, "pipeline_defaults").get("pp_microbatch_size")) or 1
            facts.default("parallelism.micro_batch_size", micro, _cite(data, "pipeline_defaults"))
        if local % micro:
            facts.note(
                f"automodel: local_batch_size {local} is not a multiple of pp_microbatch_size "
                f"{micro}"
            )
    total = put("parallelism.global_batch_size", "global_batch_size")
    if dp:
        if total % (local * dp):
            facts.note(
                f"automodel: global_batch_size {total} is not a multiple of local_batch_size "
                f"{local} x data parallel {dp}; Automodel refuses it"
            )
        else:
            facts.set(
                "launch.gradient_accumulation",
                total // (local * dp),
                "derived: global_batch_size / (local_batch_size x data parallel)",
            )
    steps = settings.find("step_scheduler.max_steps")
    count = as_int(steps[0]) if steps is not None else None
    if steps is not None and count and count > 0:
        facts.set("training.train_iters", count, steps[1])
    else:
        facts.note(
            "automodel: no step_scheduler.max_steps: the run trains num_epochs over its dataset "
            "(steps left open)"
        )


def _sequence(facts: Facts, settings: AutoSettings, data: Mapping[str, object]) -> None:
    """The training sequence: ``packed_sequence.packed_sequence_size`` when packing, else
    ``dataset.seq_len`` (or the dataset's default); else noted."""
    packed = settings.find("packed_sequence.packed_sequence_size")
    size = as_int(packed[0]) if packed is not None else None
    if packed is not None and size and size > 0:
        facts.set("model.seq_length", size, packed[1])
        return
    found = settings.find("dataset.seq_len")
    if found is not None and as_int(found[0]):
        facts.set("model.seq_length", as_int(found[0]), found[1])
        return
    target = str(settings.value("dataset._target_", ""))
    known = mapping_of(mapping_of(data.get("dataset_seq_len_defaults")).get(target))
    length = as_int(known.get("seq_len"))
    if length:
        facts.default("model.seq_length", length, _cite_path(data, known.get("path", "")))
        return
    facts.note(
        "automodel: no packed_sequence_size or dataset.seq_len; samples keep their own lengths "
        "(the sequence length is left open)"
    )


def _mode(
    facts: Facts, settings: AutoSettings, data: Mapping[str, object], recipe: tuple[str, str]
) -> None:
    """``lora`` with a ``peft:`` section (rank ``dim``, ``alpha``, targets), else the
    recipe's mode."""
    peft = settings.find("peft")
    if peft is None or not isinstance(peft[0], Mapping):
        facts.set("training.mode", recipe[0], recipe[1])
        return
    facts.set("training.mode", "lora", peft[1])
    defaults = _defaults(data, "peft_defaults")
    default_source = _cite(data, "peft_defaults")
    for field, key in (("training.lora_rank", "dim"), ("launch.lora_alpha", "alpha")):
        found = settings.find(f"peft.{key}")
        if found is not None and as_int(found[0]):
            facts.set(field, as_int(found[0]), found[1])
        else:
            facts.default(field, as_int(defaults.get(key)), default_source)
    targets, source = _lora_targets(facts, settings, defaults, default_source)
    if targets:
        (facts.default if source == default_source else facts.set)(
            "training.lora_targets", targets, source
        )


def _fp8(facts: Facts, settings: AutoSettings) -> None:
    """``fp8.enabled``: torchao float8 linears (``components/quantization/fp8.py``
    ``apply_fp8_to_model``): tensorwise scaling unless ``recipe_name`` names a torchao recipe
    (rowwise ones have no scenario recipe: noted, the recipe left open); ``emulate`` runs the
    casts without FP8 GEMMs (the precision stays bf16)."""
    enabled = settings.find("fp8.enabled")
    if enabled is None or as_bool(enabled[0]) is not True:
        return
    if as_bool(settings.value("fp8.emulate")) is True:
        facts.note("automodel: fp8.emulate runs the float8 casts without FP8 GEMMs; read as bf16")
        return
    facts.set("parallelism.precision", "fp8", enabled[1])
    recipe = settings.find("fp8.recipe_name")
    if recipe is None or recipe[0] in {None, "tensorwise"}:
        where = recipe[1] if recipe is not None else "derived: fp8.recipe_name unset"
        facts.set("parallelism.fp8_recipe", "tensorwise", f"{where} (torchao tensorwise)")
    else:
        facts.note(
            f"automodel: fp8.recipe_name {recipe[0]} ({recipe[1]}) has no scenario fp8 recipe; "
            "the recipe is left open"
        )


def _patterns(value: object) -> list[str]:
    items = value if isinstance(value, list) else [value] if value else []
    return [str(item) for item in items]


def _lora_targets(
    facts: Facts,
    settings: AutoSettings,
    defaults: Mapping[str, object],
    default_source: str,
) -> tuple[list[str], str]:
    """The scenario's LoRA targets of Automodel's ``ModuleMatcher``
    (``components/_peft/module_matcher.py``): ``match_all_linear``; ``target_modules`` (a
    module name, or a wildcard over the module's dotted name, matched here on the last
    component); ``exclude_modules`` (every linear layer but those); none: ``'*_proj'``."""
    everything = settings.find("peft.match_all_linear")
    if everything is not None and as_bool(everything[0]):
        facts.note("automodel: match_all_linear adapts lm_head too (not in the scenario's targets)")
        return lora_targets("all-linear"), everything[1]
    found = settings.find("peft.target_modules")
    excluded = settings.find("peft.exclude_modules")
    if found is not None and _patterns(found[0]):
        patterns = _patterns(found[0])
        if any("." in pattern.rstrip("*") for pattern in patterns):
            facts.note(
                "automodel: a target_modules pattern names a module path (layers, blocks); "
                "the targets are read from its last component, on every layer"
            )
        names = [n for n in HF_LORA_MODULES if _matches(n, patterns)]
        return lora_targets(names), found[1]
    if excluded is not None and _patterns(excluded[0]):
        patterns = _patterns(excluded[0])
        names = [n for n in HF_LORA_MODULES if not _matches(n, patterns)]
        return lora_targets(names), excluded[1]
    return lora_targets(
        [n for n in HF_LORA_MODULES if _matches(n, _patterns(defaults.get("target_modules")))]
    ), default_source


def _matches(name: str, patterns: list[str]) -> bool:
    return any(
        name == pattern or fnmatchcase(name, pattern.rpartition(".")[2]) for pattern in patterns
    )


READER = AutomodelReader()
