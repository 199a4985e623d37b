"""torchtitan launches: ``python -m torchtitan.train`` / ``torchtitan/train.py`` with a TOML job
config (``--job.config_file``) and ``--section.key value`` overrides on the command line.

Resolution follows torchtitan's ``ConfigManager`` (torchtitan/config/manager.py@238fa99): the
JobConfig dataclass defaults, then the TOML file, then the command line (tyro: ``--a.b value``,
``--a.b=value``, bare boolean flags ``--compile.enable`` / ``--compile.no-enable``, ``-`` and
``_`` spellings alike, lists comma separated). The model is ``[model] name`` + ``flavor``,
resolved through the flavor catalog (``planner/launch/data/torchtitan.yaml``,
:mod:`planner.launch.readers.torchtitan_flavors`). Parallel degrees follow ``ParallelDims``
(torchtitan/distributed/parallel_dims.py@238fa99): ``data_parallel_shard_degree = -1`` takes the
ranks left over by replicate x CP x TP x PP; the batch is sharded over replicate x shard and
``local_batch_size`` is per data-parallel rank (PP splits it into microbatches); the global
batch is local x data parallel unless ``global_batch_size`` asks for gradient accumulation
(torchtitan/train.py@238fa99).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Mapping, Sequence

from planner.errors import SourceError
from planner.launch.configs import ConfigTree, parse_scalar, read_config
from planner.launch.data import load_data
from planner.launch.reader import ReadContext
from planner.launch.readers.torchrun import as_int as _int
from planner.launch.readers.torchrun import record_world, torchrun_world_size
from planner.launch.readers.torchtitan_flavors import flavor_fields
from planner.launch.types import Facts, Invocation, resolve_path

__all__ = ["READER", "TorchtitanReader", "cli_overrides"]

_DATA = "torchtitan.yaml"
_CONFIG_FLAGS = ("job.config_file",)
_LIST_KEYS = frozenset(
    {
        "model.converters",
        "compile.components",
        "quantize.linear.float8.filter_fqns",
        "quantize.linear.mx.filter_fqns",
        "quantize.grouped_mm.float8.fqns",
        "quantize.grouped_mm.mx.fqns",
    }
)
_RECOMPUTE = {"none": "none", "selective": "selective", "full": "full"}


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _normal_key(flag: str) -> str:
    """``--job.config-file`` -> ``job.config_file``."""
    return flag.lstrip("-").replace("-", "_")


def cli_overrides(args: Sequence[str]) -> list[tuple[str, object, str]]:
    """torchtitan's command-line overrides as ``(dotted key, value, the argument)``, in order.

    ``--a.b value`` and ``--a.b=value`` set ``a.b``; a flag followed by another flag (or last)
    is a boolean set true, ``--a.no-b`` / ``--a.no_b`` / ``--no-a.b`` false. List fields take
    comma-separated values. ``--job.config_file`` is included (as ``job.config_file``)."""
    found: list[tuple[str, object, str]] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("--") or arg == "--":
            continue
        if "=" in arg:
            flag, _, raw = arg.partition("=")
            key = _normal_key(flag)
            found.append((key, _value(key, raw), arg))
            continue
        key = _normal_key(arg)
        if index < len(args) and not args[index].startswith("--"):
            raw = args[index]
            index += 1
            found.append((key, _value(key, raw), f"{arg} {raw}"))
            continue
        head, _, last = key.rpartition(".")
        if last.startswith("no_"):
            found.append((f"{head}.{last[3:]}" if head else last[3:], False, arg))
        elif key.startswith("no_") and "." in key:
            found.append((key[3:], False, arg))
        else:
            found.append((key, True, arg))
    return found


def _value(key: str, raw: str) -> object:
    if key in _LIST_KEYS:
        text = raw.strip().strip("[]")
        return [item.strip().strip("'\"") for item in text.split(",") if item.strip()]
    return parse_scalar(raw)


class _Settings:
    """One value per JobConfig key: the command line over the TOML over the defaults."""

    def __init__(
        self,
        data: Mapping[str, object],
        tree: ConfigTree | None,
        overrides: list[tuple[str, object, str]],
    ) -> None:
        job = _mapping(data.get("job_config"))
        self.defaults = _mapping(job.get("defaults"))
        self.older = _mapping(job.get("older_keys"))
        self.tree = tree
        self.overrides = {key: (value, raw) for key, value, raw in overrides}
        commit = str(data.get("commit", ""))[:7]
        self.default_source = (
            f"default of torchtitan {data.get('version', '')} "
            f"({data.get('repo', '')}/{job.get('path', '')}@{commit})"
        )

    def _names(self, key: str) -> list[str]:
        older = self.older.get(key)
        return [key, *(str(name) for name in older)] if isinstance(older, list) else [key]

    def find(self, key: str) -> tuple[object, str, bool] | None:
        """``(value, source, is_default)`` of ``key``, or None when nothing gives it."""
        names = self._names(key)
        for name in names:
            if name in self.overrides:
                value, raw = self.overrides[name]
                return value, f"override: {raw}", False
        if self.tree is not None:
            for name in names:
                if self.tree.has(name):
                    return self.tree.get(name), self.tree.where(name), False
        if key in self.defaults:
            return self.defaults[key], self.default_source, True
        return None

    def value(self, key: str) -> object:
        found = self.find(key)
        return None if found is None else found[0]

    def put(
        self, facts: Facts, field: str, key: str, value: object = None, *, count: bool = False
    ) -> None:
        """Record ``field`` from ``key`` (``value`` replaces the found value when given;
        ``count``: the value must be a positive integer, else a note and nothing recorded)."""
        found = self.find(key)
        if found is None:
            return
        chosen = found[0] if value is None else value
        if count and not (_int(chosen) or 0) > 0:
            facts.note(f"torchtitan: {key} {chosen!r} is not a positive integer ({found[1]})")
            return
        chosen = _int(chosen) if count else chosen
        if found[2]:
            facts.default(field, chosen, found[1])
        else:
            facts.set(field, chosen, found[1])


def _config_path(invocation: Invocation) -> tuple[str, str] | None:
    """The job config the program reads and where that was said (torchtitan reads the first
    ``--job.config_file``; ``CONFIG_FILE`` is run_train.sh's variable)."""
    for key, value, raw in cli_overrides(invocation.args):
        if key in _CONFIG_FLAGS and isinstance(value, str) and value:
            return value, f"override: {raw}"
    env = invocation.env.get("CONFIG_FILE")
    if env:
        return env, "launch: CONFIG_FILE"
    return None


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
        return any(key in _CONFIG_FLAGS for key, _, _ in cli_overrides(invocation.args))

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        data = load_data(_DATA)
        facts = Facts()
        overrides = cli_overrides(invocation.args)
        tree = None
        config = _config_path(invocation)
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
        settings = _Settings(data, tree, overrides)
        facts.set("training.framework", "torchtitan", "launch: torchtitan.train")
        facts.set("training.mode", "pretrain", "launch: torchtitan.train pretrains")
        n_layers = _model(facts, settings, data)
        settings.put(facts, "model.seq_length", "training.seq_len", count=True)
        settings.put(facts, "training.train_iters", "training.steps", count=True)
        _parallel(facts, settings, invocation, context, n_layers)
        _precision(facts, settings, data)
        mode = settings.find("activation_checkpoint.mode")
        if mode is not None:
            recompute = _RECOMPUTE.get(str(mode[0]), "selective")
            if str(mode[0]) not in _RECOMPUTE:
                facts.note(f"torchtitan: activation_checkpoint.mode {mode[0]} read as selective")
            (facts.default if mode[2] else facts.set)("parallelism.recompute", recompute, mode[1])
        return facts


def _model(facts: Facts, settings: _Settings, data: Mapping[str, object]) -> int | None:
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


def _parallel(
    facts: Facts,
    settings: _Settings,
    invocation: Invocation,
    context: ReadContext,
    n_layers: int | None,
) -> None:
    degrees: dict[str, int] = {}
    for key in (
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
    ):
        raw = settings.value(f"parallelism.{key}")
        value = _int(raw)
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
    tp, pp, cp = (
        degrees["tensor_parallel_degree"],
        degrees["pipeline_parallel_degree"],
        degrees["context_parallel_degree"],
    )
    replicate = degrees["data_parallel_replicate_degree"]
    world = torchrun_world_size(invocation, context, extra_env=("NGPU",))
    record_world(facts, world, context, invocation.launcher_args)
    shard = _int(settings.value("parallelism.data_parallel_shard_degree"))
    shard_rule = "data_parallel_shard_degree"
    if shard is None or shard < 0:
        if world is None:
            facts.note(
                "torchtitan: data_parallel_shard_degree -1 takes the ranks left over, but the "
                "launch does not say how many processes it starts"
            )
            shard = None
        else:
            shard = world[0] // (replicate * cp * tp * pp)
            shard_rule = "world size / (replicate x CP x TP x PP), data_parallel_shard_degree -1"
    if world is not None and shard and replicate * shard * cp * tp * pp != world[0]:
        facts.note(
            f"torchtitan: replicate {replicate} x shard {shard} x CP {cp} x TP {tp} x "
            f"PP {pp} != world size {world[0]}; torchtitan refuses this layout"
        )
    if shard:
        data_parallel = replicate * shard
        facts.set(
            "parallelism.data_parallel",
            data_parallel,
            f"derived: data_parallel_replicate_degree x shard ({shard_rule})",
        )
        if shard > 1:
            facts.set("launch.fsdp_shard", shard, f"derived: {shard_rule}")
        never = settings.value("parallelism.fsdp_reshard_after_forward") == "never"
        stage = (2 if never else 3) if shard * cp > 1 else 0
        facts.set("parallelism.zero_stage", stage, "derived: FSDP2 over the shard x CP ranks")
        # Experts borrow the shard x CP (x TP unless ETP = TP) ranks (ParallelDims efsdp).
        ep, etp = degrees["expert_parallel_degree"], degrees["expert_tensor_parallel_degree"]
        if ep > 1 and (shard * cp * tp) % (ep * etp):
            facts.note(f"torchtitan: EP {ep} x ETP {etp} does not divide shard x CP x TP")
    _batch(facts, settings, replicate * shard if shard else None)
    if pp > 1:
        _virtual_pipeline(facts, settings, pp, n_layers)


def _batch(facts: Facts, settings: _Settings, data_parallel: int | None) -> None:
    """Micro batch = local_batch_size; global = local x DP (x accumulation when
    global_batch_size asks for it)."""
    settings.put(facts, "parallelism.micro_batch_size", "training.local_batch_size", count=True)
    local = _int(settings.value("training.local_batch_size"))
    if not local or not data_parallel:
        return
    wanted = _int(settings.value("training.global_batch_size"))
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


def _virtual_pipeline(facts: Facts, settings: _Settings, pp: int, n_layers: int | None) -> None:
    """Stages per pipeline rank (torchtitan/distributed/pipeline_parallel.py@238fa99)."""
    schedule = settings.find("parallelism.pipeline_parallel_schedule")
    if schedule is None:
        return
    facts.set("launch.pipeline_schedule", schedule[0], schedule[1])
    job = _mapping(load_data(_DATA).get("job_config"))
    singles = job.get("single_stage_schedules")
    if isinstance(singles, list) and str(schedule[0]) in {str(s) for s in singles}:
        facts.set("parallelism.virtual_pipeline", 1, f"derived: {schedule[0]} has one stage/rank")
        return
    per_stage = _int(settings.value("parallelism.pipeline_parallel_layers_per_stage"))
    if per_stage and n_layers:
        first = _int(settings.value("parallelism.pipeline_parallel_first_stage_less_layers")) or 0
        last = _int(settings.value("parallelism.pipeline_parallel_last_stage_less_layers")) or 0
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


def _converted(name: str, kind: object, settings: _Settings) -> str | None:
    """The precision converter ``name`` (of ``kind`` fp8 / mx) trains the GEMMs it takes in."""
    if kind == "fp8":
        return "fp8"
    if kind != "mx":
        return None
    where = "grouped_mm" if "grouped_mm" in name else "linear"
    recipe = str(settings.value(f"quantize.{where}.mx.recipe_name") or "mxfp8")
    return "mxfp8" if recipe.startswith("mxfp8") else "nvfp4" if "nvfp4" in recipe else None


def _precision(facts: Facts, settings: _Settings, data: Mapping[str, object]) -> None:
    """bf16 (FSDP mixed_precision_param) unless a float8 / MX converter quantizes the GEMMs."""
    kinds = _mapping(data.get("converters"))
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
