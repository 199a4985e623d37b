"""torchtitan launches: ``python -m torchtitan.train`` / ``torchtitan/train.py`` with a TOML job
config (``--job.config_file``) and ``--section.key value`` overrides on the command line.

Resolution follows torchtitan's ``ConfigManager`` (torchtitan/config/manager.py@238fa99): the
JobConfig dataclass defaults, then the TOML file, then the command line
(:mod:`planner.launch.readers.torchtitan_settings`). The model is ``[model] name`` + ``flavor``,
resolved through the flavor catalog (``planner/launch/data/torchtitan.yaml``,
:mod:`planner.launch.readers.torchtitan_flavors`). Parallel degrees follow ``ParallelDims``
(torchtitan/distributed/parallel_dims.py@238fa99): ``data_parallel_shard_degree = -1`` takes the
ranks left over by replicate x CP x TP x PP; the batch is sharded over replicate x shard and
``local_batch_size`` is per data-parallel rank; the global batch is local x data parallel unless
``global_batch_size`` asks for gradient accumulation (torchtitan/train.py@238fa99). Without
pipeline parallelism the local batch is the micro batch. With PP > 1 each gradient-accumulation
step runs the pipeline schedule once over the local batch (``train_step`` ->
``forward_backward_step`` -> ``pp_schedule.step``, torchtitan/train.py@238fa99), split into
microbatches of ``parallelism.pipeline_parallel_microbatch_size`` (default 1;
torchtitan/distributed/pipeline_parallel.py@238fa99 builds the schedule with ``local_batch_size
// pipeline_parallel_microbatch_size`` microbatches): the micro batch is that size and the
scenario's ``pipeline_batch_size`` the local batch.

With TP > 1, ``parallelism.enable_async_tensor_parallel`` (``experimental.`` in releases up to
early 2025) is the scenario's ``tp_comm_overlap``: async TP turns on torch._inductor's
``micro_pipeline_tp`` pass (torchtitan/distributed/tensor_parallel.py@238fa99), which splits the
sequence-parallel all-gathers before the column-parallel linears and the reduce-scatters after
the row-parallel ones into SymmetricMemory chunks interleaved with the partial GEMMs, forward
and backward; plain TP runs them as whole NCCL collectives. The pass runs only on compiled
graphs: torchtitan refuses async TP unless ``compile.enable`` with ``model`` in
``compile.components`` (``training.compile`` in earlier releases), and the reader then notes
the refusal and states no overlap.

``compile.enable`` with ``loss`` in ``compile.components`` (the default ``[model, loss]``) is
the scenario's ``training.compiled_loss``: the loss function is wrapped in ``torch.compile``
(``build_cross_entropy_loss``, torchtitan/components/loss.py@238fa99). The earlier
``training.compile`` compiled the loss only in releases from pytorch/torchtitan@bbb1b616e
(2025-04-02) until the ``compile`` section (@08b8b244f, 2025-08-20); before, ``train.py`` left
it eager. A job that sets the earlier key is not dated by it, so the reader notes that and
states nothing.

The AdamW implementation is ``optimizer.implementation`` (``fused``, ``foreach``, ``for-loop``;
``fused`` by default since pytorch/torchtitan@6e4988550, 2025-02-24, before every tagged
release; ``fused_opt_states_bf16`` since @0610235bb, 2026-04-15: fused with bf16 moments), in
releases from mid 2024 until then the boolean ``optimizer.fused`` (false: foreach), and earlier
always foreach. It is the scenario's ``parallelism.optimizer_implementation`` (``for_loop`` for
``for-loop``; ``fused_opt_states_bf16`` as ``fused`` with ``exp_avg_dtype`` and
``exp_avg_sq_dtype`` bf16), the release default as a default with a note that checkouts before
@6e4988550 ran foreach.

A TOML job config (and the ``--section.key`` command line read over it) dates the checkout:
pytorch/torchtitan@9810191bb (2026-02-23) replaced them with a Python config registry, so the
job runs the code of the releases this reader follows,
not the current code the ``torchtitan`` framework profile describes. Its attention projects
query, key and value with separate ``wq`` / ``wk`` / ``wv`` linears (one fused ``wqkv`` became
the default only at @3396a4b37; ``torchtitan/models/*/model/model.py`` @ 238fa99), stated as
``parallelism.separate_qkv_projections``; and with tensorwise float8 under TP, Llama 3, Llama 4
and Qwen3 all-gather FP8 through torchao's float8 tensor-parallel styles
(``enable_float8_tensorwise_tp``, ``torchtitan/models/<model>/infra/parallelize.py`` @ 238fa99;
GPT-OSS passes false, DeepSeek V3 raises ``NotImplementedError``), stated as
``parallelism.fp8_tp_all_gather``.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping

from planner.errors import SourceError
from planner.launch.configs import ConfigTree, read_config
from planner.launch.data import load_data
from planner.launch.reader import ReadContext
from planner.launch.readers.torchrun import record_world, torchrun_world_size
from planner.launch.readers.torchtitan_flavors import flavor_fields
from planner.launch.readers.torchtitan_settings import (
    CONFIG_FLAGS,
    JobSettings,
    cli_overrides,
    config_path,
)
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import as_bool, as_int, mapping_of

__all__ = ["READER", "TorchtitanReader", "config_facts"]

_DATA = "torchtitan.yaml"
_RECOMPUTE = {"none": "none", "selective": "selective", "full": "full"}


class TorchtitanReader:
    """The torchtitan reader (module docstring)."""

    name = "torchtitan"

    def recognises(self, invocation: Invocation) -> bool:
        program = invocation.program
        if program.startswith("torchtitan.") and program.endswith(".train"):
            return True
        if posixpath.basename(program) != "train.py":
            return False
        if program.endswith("torchtitan/train.py"):
            return True
        return any(key in CONFIG_FLAGS for key, _, _ in cli_overrides(invocation.args))

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        data = load_data(_DATA)
        facts = Facts()
        overrides = cli_overrides(invocation.args)
        tree = None
        config = config_path(invocation)
        if config is None:
            facts.note(
                "torchtitan: no --job.config_file and no CONFIG_FILE; JobConfig defaults apply "
                "(model llama3 debugmodel)"
            )
        else:
            path = resolve_path(config[0], invocation.cwd)
            try:
                tree = read_config(context.files, path, "toml")
            except SourceError as exc:
                raise SourceError(
                    path,
                    f"{exc.message}; it is the torchtitan job config named by {config[1]} "
                    "(relative to the job's directory)",
                ) from None
        settings = JobSettings(data, tree, overrides)
        facts.set("training.framework", "torchtitan", "launch: torchtitan.train")
        facts.set("training.mode", "pretrain", "launch: torchtitan.train pretrains")
        n_layers = _model(facts, settings, data)
        settings.put(facts, "model.seq_length", "training.seq_len", count=True)
        settings.put(facts, "training.train_iters", "training.steps", count=True)
        _parallel(facts, settings, invocation, context, n_layers)
        _precision(facts, settings, data)
        _recompute(facts, settings)
        _optimizer(facts, settings, data)
        _config_era_code(facts, settings)
        return facts


def config_facts(facts: Facts, tree: ConfigTree) -> None:
    """A resolved JobConfig (the one a job's log prints with ``job.print_config``) -> the
    model, sequence length, steps, micro batch (and pipeline batch under PP), precision,
    recomputation and async TP, as
    :class:`TorchtitanReader` reads them (the parallel layout needs the world size: the log's
    device-mesh line gives it)."""
    data = load_data(_DATA)
    settings = JobSettings(data, tree, [])
    _model(facts, settings, data)
    settings.put(facts, "model.seq_length", "training.seq_len", count=True)
    settings.put(facts, "training.train_iters", "training.steps", count=True)
    _micro_batch(
        facts, settings, as_int(settings.value("parallelism.pipeline_parallel_degree")) or 1
    )
    _precision(facts, settings, data)
    _recompute(facts, settings)
    _async_tensor_parallel(facts, settings)
    _compiled_loss(facts, settings)
    _optimizer(facts, settings, data)
    _config_era_code(facts, settings)


def _optimizer(facts: Facts, settings: JobSettings, data: Mapping[str, object]) -> None:
    """``parallelism.optimizer_implementation`` (module docstring): ``optimizer.implementation``,
    else the earlier ``optimizer.fused``, else the default of the catalogued release (fused),
    stated as a default. An implementation ``build_optimizers`` refuses is noted, nothing
    stated."""
    entry = mapping_of(data.get("optimizer_implementation"))
    field = "parallelism.optimizer_implementation"
    found = settings.find("optimizer.implementation")
    older = settings.find(str(entry.get("older_flag")))
    if (found is None or found[2]) and older is not None:
        chosen = "fused" if as_bool(older[0]) else "foreach"
        source = (
            f"{older[1]}, {entry.get('older_flag')} of releases {entry.get('older_flag_releases')}"
        )
        is_default = older[2]
    elif found is not None:
        chosen, source, is_default = str(found[0]), found[1], found[2]
    else:
        return
    takes = entry.get("takes")
    names = [str(name) for name in takes] if isinstance(takes, list) else []
    if chosen not in names:
        facts.note(
            f"torchtitan: optimizer.implementation {chosen!r} ({source}) is not one "
            f"build_optimizers takes ({', '.join(names)}): it stops before the first step"
        )
        return
    state = facts.default if is_default else facts.set
    if chosen == entry.get("bf16_states"):
        state(field, "fused", source)
        for moment in ("exp_avg_dtype", "exp_avg_sq_dtype"):
            state(f"parallelism.{moment}", "bf16", f"{source}: bf16 Adam moments")
        facts.note(
            f"torchtitan: optimizer.implementation {chosen} ({source}) runs the fused AdamW "
            f"with both moments in bf16, a name of releases since pytorch/torchtitan@"
            f"{entry.get('bf16_states_since')}"
        )
        return
    state(field, chosen.replace("-", "_"), source)
    if is_default:
        facts.note(
            f"torchtitan: optimizer.implementation unset: {chosen}, the default since "
            f"pytorch/torchtitan@{entry.get('fused_default_since')}; checkouts before it ran "
            "foreach (set parallelism.optimizer_implementation: foreach for those)"
        )


_FP8_TP_MODELS = frozenset({"llama3", "llama4", "qwen3"})
"""Models whose ``apply_tp`` all-gathers FP8 under tensorwise float8 at 238fa99 (module
docstring)."""


def _config_era_code(facts: Facts, settings: JobSettings) -> None:
    """What a TOML-config checkout runs apart from current torchtitan (module docstring):
    separate ``wq`` / ``wk`` / ``wv``, and FP8 tensor-parallel all-gathers under tensorwise
    float8 for the models of ``_FP8_TP_MODELS``."""
    era = "derived: a TOML job config predates pytorch/torchtitan@9810191bb"
    facts.set("parallelism.separate_qkv_projections", True, f"{era}; wq/wk/wv until @3396a4b37")
    if facts.get("parallelism.fp8_recipe") != "tensorwise":
        return
    if (as_int(settings.value("parallelism.tensor_parallel_degree")) or 1) <= 1:
        return
    if str(settings.value("model.name")) in _FP8_TP_MODELS:
        facts.set(
            "parallelism.fp8_tp_all_gather",
            True,
            f"{era}; float8 tensorwise TP (enable_float8_tensorwise_tp @ 238fa99)",
        )


def _recompute(facts: Facts, settings: JobSettings) -> None:
    """``activation_checkpoint.mode`` (an unknown mode is read as selective)."""
    mode = settings.find("activation_checkpoint.mode")
    if mode is not None:
        recompute = _RECOMPUTE.get(str(mode[0]), "selective")
        if str(mode[0]) not in _RECOMPUTE:
            facts.note(f"torchtitan: activation_checkpoint.mode {mode[0]} read as selective")
        (facts.default if mode[2] else facts.set)("parallelism.recompute", recompute, mode[1])


def _model(facts: Facts, settings: JobSettings, data: Mapping[str, object]) -> int | None:
    """Fill ``model.*`` from ``[model] name`` + ``flavor``; the layer count, when known."""
    name = settings.find("model.name")
    flavor = settings.find("model.flavor")
    if name is None or flavor is None:
        return None
    settings.put(facts, "launch.model_name", "model.name", f"{name[0]} {flavor[0]}")
    found = flavor_fields(data, str(name[0]), str(flavor[0]))
    if isinstance(found, str):
        facts.note(found)
        return None
    fields, source = found
    for field, value in fields.items():
        facts.set(field, value, source)
    layers = fields.get("model.num_layers")
    return layers if isinstance(layers, int) else None


_DEGREES = (
    "data_parallel_replicate_degree",
    "data_parallel_shard_degree",
    "tensor_parallel_degree",
    "pipeline_parallel_degree",
    "context_parallel_degree",
    "expert_parallel_degree",
    "expert_tensor_parallel_degree",
)


def _degrees(facts: Facts, settings: JobSettings) -> dict[str, int]:
    """Each ``parallelism.*_degree`` (1 when unset or below 1; the shard degree keeps -1, the
    ranks left over), with TP, PP, CP, EP (and ETP for an MoE model) put into ``facts``."""
    degrees: dict[str, int] = {}
    for key in _DEGREES:
        raw = settings.value(f"parallelism.{key}")
        value = as_int(raw)
        if raw is not None and (value is None or (value < 1 and "shard" not in key)):
            facts.note(f"torchtitan: parallelism.{key} {raw!r} is not a degree >= 1; read as 1")
        degrees[key] = value if value is not None and (value >= 1 or "shard" in key) else 1
    for field, key in (
        ("parallelism.tensor_parallel", "tensor_parallel_degree"),
        ("parallelism.pipeline_parallel", "pipeline_parallel_degree"),
        ("parallelism.context_parallel", "context_parallel_degree"),
        ("parallelism.expert_parallel", "expert_parallel_degree"),
    ):
        settings.put(facts, field, f"parallelism.{key}", degrees[key])
    if facts.int("model.num_experts"):
        settings.put(
            facts,
            "parallelism.expert_tensor_parallel",
            "parallelism.expert_tensor_parallel_degree",
            degrees["expert_tensor_parallel_degree"],
        )
    return degrees


def _shard(
    facts: Facts, settings: JobSettings, degrees: Mapping[str, int], world: int | None
) -> int | None:
    """The FSDP shard degree: as given, or (-1) the ranks left over by replicate x CP x TP x
    PP; None when that needs a world size the launch does not give (noted)."""
    replicate = degrees["data_parallel_replicate_degree"]
    tp, pp, cp = (
        degrees["tensor_parallel_degree"],
        degrees["pipeline_parallel_degree"],
        degrees["context_parallel_degree"],
    )
    shard = as_int(settings.value("parallelism.data_parallel_shard_degree"))
    if shard is None or shard < 0:
        if world is None:
            facts.note(
                "torchtitan: data_parallel_shard_degree -1 takes the ranks left over, but the "
                "launch does not say how many processes it starts"
            )
            return None
        shard = world // (replicate * cp * tp * pp)
        rule = "world size / (replicate x CP x TP x PP), data_parallel_shard_degree -1"
    else:
        rule = "data_parallel_shard_degree"
    if world is not None and shard and replicate * shard * cp * tp * pp != world:
        facts.note(
            f"torchtitan: replicate {replicate} x shard {shard} x CP {cp} x TP {tp} x "
            f"PP {pp} != world size {world}; torchtitan refuses this layout"
        )
    if shard:
        facts.set(
            "parallelism.data_parallel",
            replicate * shard,
            f"derived: data_parallel_replicate_degree x shard ({rule})",
        )
        if shard > 1:
            facts.set("launch.fsdp_shard", shard, f"derived: {rule}")
    return shard


def _parallel(
    facts: Facts,
    settings: JobSettings,
    invocation: Invocation,
    context: ReadContext,
    n_layers: int | None,
) -> None:
    degrees = _degrees(facts, settings)
    world = torchrun_world_size(invocation, context, extra_env=("NGPU",))
    record_world(facts, world, context, invocation.launcher_args)
    shard = _shard(facts, settings, degrees, world[0] if world is not None else None)
    replicate = degrees["data_parallel_replicate_degree"]
    if shard:
        cp, tp = degrees["context_parallel_degree"], degrees["tensor_parallel_degree"]
        never = settings.value("parallelism.fsdp_reshard_after_forward") == "never"
        stage = (2 if never else 3) if shard * cp > 1 else 0
        facts.set("parallelism.zero_stage", stage, "derived: FSDP2 over the shard x CP ranks")
        # Experts borrow the shard x CP (x TP unless ETP = TP) ranks (ParallelDims efsdp).
        ep, etp = degrees["expert_parallel_degree"], degrees["expert_tensor_parallel_degree"]
        if ep > 1 and (shard * cp * tp) % (ep * etp):
            facts.note(f"torchtitan: EP {ep} x ETP {etp} does not divide shard x CP x TP")
    _async_tensor_parallel(facts, settings)
    _compiled_loss(facts, settings)
    pp = degrees["pipeline_parallel_degree"]
    _micro_batch(facts, settings, pp)
    _batch(facts, settings, replicate * shard if shard else None)
    if pp > 1:
        _virtual_pipeline(facts, settings, pp, n_layers)


_ASYNC_TP = "parallelism.enable_async_tensor_parallel"


def _async_tensor_parallel(facts: Facts, settings: JobSettings) -> None:
    """``parallelism.tp_comm_overlap`` from ``parallelism.enable_async_tensor_parallel`` when
    TP > 1 (module docstring): true only with the model compiled, the condition torchtitan
    checks before it enables the micro-pipelined collectives."""
    if (as_int(settings.value("parallelism.tensor_parallel_degree")) or 1) <= 1:
        return
    found = settings.find(_ASYNC_TP)
    if found is None:
        return
    value, source, is_default = found
    if as_bool(value) is None:
        facts.note(f"torchtitan: {_ASYNC_TP} {value!r} is not a boolean ({source}); read as off")
    if not as_bool(value):
        (facts.default if is_default else facts.set)("parallelism.tp_comm_overlap", False, source)
        return
    components = settings.value("compile.components")
    compiled = as_bool(settings.value("compile.enable")) and (
        not isinstance(components, list) or "model" in components
    )
    if not compiled:
        facts.note(
            f"torchtitan: {_ASYNC_TP} ({source}) needs the model compiled; torchtitan refuses "
            "to start without compile.enable and 'model' in compile.components "
            "(--training.compile in earlier releases): set them, or drop async TP"
        )
        return
    facts.set("parallelism.tp_comm_overlap", True, source)


def _compiled_loss(facts: Facts, settings: JobSettings) -> None:
    """``training.compiled_loss`` from ``compile.enable`` and ``compile.components`` (module
    docstring); the earlier ``training.compile`` is a note."""
    found = settings.find("compile.enable")
    if found is None or not as_bool(found[0]):
        return
    _, source, is_default = found
    if is_default:
        return
    current = "compile.enable" in settings.overrides or (
        settings.tree is not None and settings.tree.has("compile.enable")
    )
    if not current:
        facts.note(
            f"torchtitan: training.compile ({source}) compiles the loss only in releases from "
            "2025-04 to 2025-08: training.compiled_loss not stated"
        )
        return
    components = settings.value("compile.components")
    if not isinstance(components, list) or "loss" in components:
        facts.set("training.compiled_loss", True, source)


_MICROBATCH_SIZE = "parallelism.pipeline_parallel_microbatch_size"
_MICROBATCH_COUNTS = (
    "parallelism.pipeline_parallel_microbatches",
    "experimental.pipeline_parallel_microbatches",
)
"""Releases before pytorch/torchtitan@5e2033c75 (2025-04-07) gave the number of pipeline
microbatches instead of their size (``torchtitan/config_manager.py``); without one they took a
microbatch per pipeline stage (``torchtitan/distributed/pipeline.py`` @ 5e2033c75^), which the
reader cannot tell from a current job config, so it assumes the current default size instead."""


def _micro_batch(facts: Facts, settings: JobSettings, pp: int) -> None:
    """``parallelism.micro_batch_size`` (and ``pipeline_batch_size`` with PP > 1, module
    docstring): the local batch without PP; with PP the pipeline microbatch size and the local
    batch. A local batch the microbatch does not divide is a note (torchtitan raises
    ``ValueError``) and leaves both unset."""
    if pp <= 1:
        settings.put(facts, "parallelism.micro_batch_size", "training.local_batch_size", count=True)
        return
    local = as_int(settings.value("training.local_batch_size"))
    if local is None or local <= 0:
        settings.put(facts, "parallelism.micro_batch_size", "training.local_batch_size", count=True)
        return
    size = _pipeline_microbatch(facts, settings, local)
    if size is None:
        return
    if local % size[0]:
        facts.note(
            f"torchtitan: local_batch_size {local} is not a multiple of the pipeline microbatch "
            f"size {size[0]} ({size[1]}); torchtitan refuses it"
        )
        return
    (facts.default if size[2] else facts.set)("parallelism.micro_batch_size", size[0], size[1])
    settings.put(facts, "parallelism.pipeline_batch_size", "training.local_batch_size", count=True)


def _pipeline_microbatch(
    facts: Facts, settings: JobSettings, local: int
) -> tuple[int, str, bool] | None:
    """``(size, source, is_default)`` of the pipeline microbatch: ``pipeline_parallel_
    microbatch_size``, or local / an earlier release's microbatch count; None (noted) when the
    value given is not a positive integer or the count does not divide the local batch."""
    size = settings.find(_MICROBATCH_SIZE)
    if size is None or size[2]:
        for key in _MICROBATCH_COUNTS:
            count = settings.find(key)
            if count is None:
                continue
            value = as_int(count[0])
            if value is None or value <= 0 or local % value:
                facts.note(
                    f"torchtitan: {key} {count[0]!r} is not a microbatch count that divides "
                    f"local_batch_size {local} ({count[1]}); torchtitan refuses it"
                )
                return None
            return local // value, f"derived: local_batch_size / {key} ({count[1]})", False
    if size is None:
        return None
    value = as_int(size[0])
    if value is None or value <= 0:
        facts.note(
            f"torchtitan: {_MICROBATCH_SIZE} {size[0]!r} is not a positive integer ({size[1]})"
        )
        return None
    return value, size[1], size[2]


def _batch(facts: Facts, settings: JobSettings, data_parallel: int | None) -> None:
    """Global = local_batch_size x DP (x accumulation when global_batch_size asks for it)."""
    local = as_int(settings.value("training.local_batch_size"))
    if not local or not data_parallel:
        return
    wanted = as_int(settings.value("training.global_batch_size"))
    if wanted is None or wanted <= 0:
        facts.set(
            "parallelism.global_batch_size",
            local * data_parallel,
            "derived: local_batch_size x data parallel (global_batch_size -1)",
        )
        facts.set("launch.gradient_accumulation", 1, "derived: global_batch_size -1")
        return
    settings.put(facts, "parallelism.global_batch_size", "training.global_batch_size")
    if wanted % (local * data_parallel):
        facts.note(
            f"torchtitan: global_batch_size {wanted} is not a multiple of local_batch_size "
            f"{local} x data parallel {data_parallel}; torchtitan refuses it"
        )
        return
    facts.set(
        "launch.gradient_accumulation",
        wanted // (local * data_parallel),
        "derived: global_batch_size / (local_batch_size x data parallel)",
    )


def _virtual_pipeline(facts: Facts, settings: JobSettings, pp: int, n_layers: int | None) -> None:
    """Stages per pipeline rank (torchtitan/distributed/pipeline_parallel.py@238fa99)."""
    schedule = settings.find("parallelism.pipeline_parallel_schedule")
    if schedule is None:
        return
    facts.set("launch.pipeline_schedule", schedule[0], schedule[1])
    job = mapping_of(load_data(_DATA).get("job_config"))
    singles = job.get("single_stage_schedules")
    if isinstance(singles, list) and str(schedule[0]) in {str(s) for s in singles}:
        facts.set("parallelism.virtual_pipeline", 1, f"derived: {schedule[0]} has one stage/rank")
        return
    per_stage = as_int(settings.value("parallelism.pipeline_parallel_layers_per_stage"))
    if per_stage and n_layers:
        first = as_int(settings.value("parallelism.pipeline_parallel_first_stage_less_layers")) or 0
        last = as_int(settings.value("parallelism.pipeline_parallel_last_stage_less_layers")) or 0
        stages = math.ceil((n_layers + first + last) / per_stage)
        if stages % pp == 0:
            facts.set(
                "parallelism.virtual_pipeline",
                stages // pp,
                "derived: ceil((layers + first/last stage weights) / layers_per_stage) / PP",
            )
        return
    facts.set(
        "parallelism.virtual_pipeline",
        2,
        f"derived: {schedule[0]} is a multi-stage schedule, 2 stages per rank by default",
    )


def _converted(name: str, kind: object, settings: JobSettings) -> str | None:
    """The precision converter ``name`` (of ``kind`` fp8 / mx) trains the GEMMs it takes in."""
    if kind == "fp8":
        return "fp8"
    if kind != "mx":
        return None
    where = "grouped_mm" if "grouped_mm" in name else "linear"
    recipe = str(settings.value(f"quantize.{where}.mx.recipe_name") or "mxfp8")
    return "mxfp8" if recipe.startswith("mxfp8") else "nvfp4" if "nvfp4" in recipe else None


def _precision(facts: Facts, settings: JobSettings, data: Mapping[str, object]) -> None:
    """bf16 (FSDP mixed_precision_param) unless a float8 / MX converter quantizes the GEMMs."""
    kinds = mapping_of(data.get("converters"))
    converters = settings.find("model.converters")
    names = converters[0] if converters is not None else []
    chosen: tuple[str, str] | None = None
    for item in names if isinstance(names, list) else [names]:
        name = str(item)
        precision = _converted(name, kinds.get(name), settings)
        if precision is not None:
            chosen = (precision, name)
        elif name:
            facts.note(f"torchtitan: model converter {name} gives no scenario precision")
    tree = settings.tree
    if chosen is None and tree is not None and tree.get("float8.enable_float8_linear") is True:
        facts.set("parallelism.precision", "fp8", tree.where("float8.enable_float8_linear"))
        return
    if chosen is not None and converters is not None:
        facts.set("parallelism.precision", chosen[0], f"{converters[1]} ({chosen[1]})")
        recipe = settings.value("quantize.linear.float8.recipe_name")
        if chosen[0] == "fp8" and "grouped_mm" not in chosen[1] and recipe in (None, "tensorwise"):
            facts.set("parallelism.fp8_recipe", "tensorwise", "derived: float8 tensorwise")
        if "grouped_mm" in chosen[1]:
            facts.note(f"torchtitan: {chosen[1]} quantizes only the MoE expert GEMMs")
        return
    param = settings.find("training.mixed_precision_param")
    if param is not None and str(param[0]) == "bfloat16":
        (facts.default if param[2] else facts.set)("parallelism.precision", "bf16", param[1])
    elif param is not None:
        facts.note(f"torchtitan: mixed_precision_param {param[0]}: fp32 training")


READER = TorchtitanReader()
