"""LLM Foundry launches: ``composer [-n N] [--world_size W ...] train.py cfg.yaml key=value ...``
and ``python scripts/train/train.py cfg.yaml`` (also under ``torchrun``).

Settings resolve as ``train_from_yaml`` resolves them: the yaml, then ``key=value`` overrides
merged over it (OmegaConf ``from_cli``), then ``${a.b}`` interpolations (``${variables.x}`` at
newer commits, top-level keys at older ones), resolved statically here. Defaults of what the yaml
leaves out come from LLM Foundry's ``TrainConfig``, Composer's ``FSDPConfig`` and ``MPTConfig``
(``planner/launch/data/foundry.yaml``, each with its repo, path and commit).

GPUs (Composer's launcher): ``--nproc``/``-n`` > ``LOCAL_WORLD_SIZE`` > the node's GPUs per node;
``--world_size`` > ``WORLD_SIZE`` (when it differs from ``LOCAL_WORLD_SIZE``) > nproc. Batch:
``global_train_batch_size`` / world = the device batch; ``device_train_microbatch_size`` (an
int, capped at the device batch, or ``auto``) and gradient accumulation = ceil(device batch /
microbatch) (``calculate_batch_size_info``). ``max_duration``: ``Nba`` batches are optimizer
steps, ``Ntok`` tokens, ``Nsp`` samples; epochs leave the steps to the dataset.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Mapping

from planner.errors import SpecError
from planner.launch.configs import dotted_overrides, read_config
from planner.launch.data import load_data
from planner.launch.models import resolve_model
from planner.launch.reader import ReadContext
from planner.launch.readers.foundry_yaml import FoundryConfig
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import as_int

__all__ = ["READER", "FoundryReader"]

_YAML = (".yaml", ".yml")
_PRECISIONS = {"amp_bf16": "bf16", "amp_fp16": "fp16", "amp_fp8": "fp8"}
_DURATION = re.compile(r"^(.+?)(iter|ep|ba|sp|tok|dur)$")
_HF_SHAPE_KEYS = {
    "num_hidden_layers": "model.num_layers",
    "hidden_size": "model.hidden_size",
    "num_attention_heads": "model.num_attention_heads",
    "num_key_value_heads": "model.num_query_groups",
    "intermediate_size": "model.ffn_hidden_size",
    "vocab_size": "model.vocab_size",
}


def _section(name: str) -> Mapping[str, object]:
    section = load_data("foundry.yaml").get(name)
    if not isinstance(section, Mapping):
        raise SpecError("planner/launch/data/foundry.yaml", f"{name} is missing")
    return section


def _cite(entry: Mapping[str, object]) -> str:
    """``default of <framework> (<repo>/<path>@<short commit>)`` of a data-file entry."""
    repo, path, commit = entry.get("repo"), entry.get("path"), str(entry.get("commit"))
    version = load_data("foundry.yaml").get("version")
    owner = "Composer 0.32" if repo == "mosaicml/composer" else f"LLM Foundry {version}"
    return f"default of {owner} ({repo}/{path}@{commit[:7]})"


def _default(key: str) -> tuple[object, str]:
    """A documented default from ``data/foundry.yaml`` with its citation."""
    entry = _section("defaults").get(key)
    if not isinstance(entry, Mapping):
        raise SpecError("planner/launch/data/foundry.yaml", f"defaults.{key} is missing")
    return entry.get("value"), _cite(entry)


class FoundryReader:
    """Reads LLM Foundry training launches (module docstring)."""

    name = "llm_foundry"

    def recognises(self, invocation: Invocation) -> bool:
        """A ``composer`` launch of a script given a yaml, or LLM Foundry's
        ``scripts/train/train.py`` (a ``train.py`` given a yaml under ``yamls/``)."""
        if posixpath.basename(invocation.program) == "composer":
            script, rest = _composer_script(invocation.args)
            return script is not None and bool(rest) and rest[0].endswith(_YAML)
        args = invocation.args
        if not invocation.program.endswith(".py") or not args or not args[0].endswith(_YAML):
            return False
        if invocation.launcher == "composer":
            return True
        program = invocation.program
        return posixpath.basename(program) == "train.py" and (
            "scripts/train" in program or "foundry" in program or "yamls/" in args[0]
        )

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the LLM Foundry run trains. Raises ``SourceError`` / ``SpecError`` when the
        yaml cannot be read or parsed."""
        facts = Facts()
        facts.set("training.framework", "llm_foundry", "launch: LLM Foundry")
        options = dict(invocation.launcher_args) if invocation.launcher == "composer" else {}
        args: tuple[str, ...] = invocation.args
        composer = invocation.launcher == "composer"
        if posixpath.basename(invocation.program) == "composer":
            composer = True
            options, args = _composer_options(invocation.args)
            args = args[1:]
        config = FoundryConfig(
            read_config(context.files, resolve_path(args[0], invocation.cwd)),
            {key: (value, arg) for key, value, arg in dotted_overrides(args[1:])},
        )
        world, per_node = self._world(invocation, context, facts, options, composer=composer)
        self._model(config, invocation, context, facts)
        self._batch(config, facts, world)
        self._duration(config, facts)
        self._precision(config, facts)
        self._sharding(config, facts, world, per_node)
        self._mode(config, facts)
        return facts

    def _world(
        self,
        invocation: Invocation,
        context: ReadContext,
        facts: Facts,
        options: Mapping[str, str],
        *,
        composer: bool,
    ) -> tuple[int | None, int | None]:
        """``(world size, processes per node)`` as the launcher settles them."""
        env = invocation.env
        allocation = context.allocation
        if not composer:
            world = allocation.int("launch.world_size")
            if world:
                return world, allocation.int("hardware.gpus_per_node")
            if invocation.launcher in {"python", ""}:
                world = as_int(env.get("WORLD_SIZE")) or 1
                facts.set("hardware.num_gpus", world, "launch: one python process")
                facts.set("launch.num_nodes", 1, "launch: one python process")
                return world, None
            return allocation.int("hardware.num_gpus"), allocation.int("hardware.gpus_per_node")
        cited = _cite(_section("launcher"))
        nproc = as_int(options.get("nproc") or options.get("n"))
        nproc_source = "launch: composer --nproc"
        if nproc is None and as_int(env.get("LOCAL_WORLD_SIZE")):
            nproc, nproc_source = as_int(env.get("LOCAL_WORLD_SIZE")), "launch: LOCAL_WORLD_SIZE"
        if nproc is None:
            nproc = allocation.int("hardware.gpus_per_node") or context.launch.gpus_per_node
            nproc_source = f"launch: the node's GPUs ({cited})"
        world = as_int(options.get("world_size"))
        world_source = "launch: composer --world_size"
        multinode = env.get("LOCAL_WORLD_SIZE") != env.get("WORLD_SIZE")
        if world is None and as_int(env.get("WORLD_SIZE")) and multinode:
            world, world_source = as_int(env.get("WORLD_SIZE")), "launch: WORLD_SIZE"
        if world is None and nproc:
            world, world_source = nproc, f"derived: the world size defaults to nproc ({cited})"
        if not world:
            return None, None
        facts.set("launch.world_size", world, world_source)
        facts.set("hardware.num_gpus", world, world_source)
        if nproc:
            facts.set("hardware.gpus_per_node", nproc, nproc_source)
            facts.set("launch.num_nodes", max(1, math.ceil(world / nproc)), "derived: world/nproc")
        return world, nproc or None

    def _model(
        self, config: FoundryConfig, invocation: Invocation, context: ReadContext, facts: Facts
    ) -> None:
        kind = config.value("model.name")
        if kind == "mpt_causal_lm":
            _mpt_shape(config, facts)
        elif isinstance(kind, str) and kind.startswith("hf_"):
            found = config.get("model.pretrained_model_name_or_path")
            if found is not None and isinstance(found[0], str):
                resolve_model(
                    found[0],
                    facts=facts,
                    files=context.files,
                    cwd=invocation.cwd,
                    source=found[1],
                )
                if not facts.has("launch.model_name"):
                    facts.set("launch.model_name", found[0], found[1])
            for key, name in _HF_SHAPE_KEYS.items():
                override = config.get(f"model.config_overrides.{key}")
                if override is not None and as_int(override[0]):
                    facts.set(name, as_int(override[0]), override[1])
        else:
            facts.note(f"model.name {kind!r}: only mpt_causal_lm and hf_* models are read")
        for key in ("max_seq_len", "model.max_seq_len", "train_loader.dataset.max_seq_len"):
            found = config.get(key)
            if found is not None and as_int(found[0]):
                facts.set("model.seq_length", as_int(found[0]), found[1])
                break

    def _batch(self, config: FoundryConfig, facts: Facts, world: int | None) -> None:
        found = config.get("global_train_batch_size")
        total = as_int(found[0]) if found is not None else None
        if found is None or not total:
            facts.note("global_train_batch_size is not set: LLM Foundry requires it")
            return
        facts.set("parallelism.global_batch_size", total, found[1])
        micro_found = config.get("device_train_microbatch_size")
        micro_value, micro_source = micro_found or _default("device_train_microbatch_size")
        if not world:
            if as_int(micro_value):
                facts.set("parallelism.micro_batch_size", as_int(micro_value), micro_source)
            return
        if total % world:
            facts.note(
                f"global_train_batch_size {total} does not divide over {world} ranks: "
                "LLM Foundry refuses to start"
            )
            return
        device = total // world
        micro = as_int(micro_value)
        if micro is None:
            facts.default(
                "parallelism.micro_batch_size",
                device,
                f"derived: microbatch {micro_value!r} searches down from the device batch "
                f"{total}/{world} ({micro_source})",
            )
            facts.note(
                "device_train_microbatch_size auto: Composer halves the microbatch on "
                "out-of-memory; the device batch is assumed to fit"
            )
            micro = device
        elif micro > device:
            facts.set(
                "parallelism.micro_batch_size",
                device,
                f"derived: {micro_source} capped at the device batch {total}/{world}",
            )
            micro = device
        else:
            facts.set("parallelism.micro_batch_size", micro, micro_source)
        facts.set(
            "launch.gradient_accumulation",
            math.ceil(device / micro),
            f"derived: ceil(global {total} / world {world} / microbatch {micro})",
        )

    def _duration(self, config: FoundryConfig, facts: Facts) -> None:
        found = config.get("max_duration")
        if found is None:
            facts.note("max_duration is not set: the run length is unknown")
            return
        value, source = found
        if as_int(value) is not None:
            facts.note(f"max_duration {value} is in epochs ({source}): steps depend on the data")
            return
        match = _DURATION.match(str(value).strip().lower())
        try:
            amount = float(match.group(1)) if match else None
        except ValueError:
            amount = None
        if match is None or amount is None:
            facts.note(f"max_duration {value!r} ({source}) is not read")
            return
        unit = match.group(2)
        if unit == "ba":
            facts.set("training.train_iters", int(amount), source)
        elif unit == "tok":
            facts.set("training.total_tokens", amount, source)
        elif unit == "sp":
            total = facts.int("parallelism.global_batch_size")
            if total:
                facts.set(
                    "training.train_iters",
                    math.ceil(amount / total),
                    f"derived: {source} samples / global batch",
                )
        else:
            facts.note(f"max_duration {value} ({source}): steps depend on the dataset size")

    def _precision(self, config: FoundryConfig, facts: Facts) -> None:
        found = config.get("precision")
        value, source = found or _default("precision")
        precision = _PRECISIONS.get(str(value).lower())
        if precision is None:
            facts.note(f"precision {value} ({source}) is not modelled; bf16 assumed")
        elif found is None:
            facts.default("parallelism.precision", precision, source)
        else:
            facts.set("parallelism.precision", precision, source)

    def _sharding(
        self, config: FoundryConfig, facts: Facts, world: int | None, per_node: int | None
    ) -> None:
        tp = config.get("tp_config.tensor_parallel_degree")
        if tp is not None and as_int(tp[0]) and as_int(tp[0]) != 1:
            facts.set("parallelism.tensor_parallel", as_int(tp[0]), tp[1])
            facts.note("tp_config: LLM Foundry still splits the global batch over every rank")
        if config.value("fsdp_config") is None:
            facts.set("parallelism.zero_stage", 0, "derived: no fsdp_config (DDP)")
            return
        if world == 1:
            facts.set("parallelism.zero_stage", 0, "derived: one rank (LLM Foundry drops FSDP)")
            return
        found = config.get("fsdp_config.sharding_strategy")
        strategy, source = found or _default("fsdp_config.sharding_strategy")
        name = str(strategy).upper()
        degree_found = config.get("fsdp_config.data_parallel_shard_degree")
        degree = as_int(degree_found[0]) if degree_found is not None else None
        if name == "NO_SHARD":
            facts.set("parallelism.zero_stage", 0, source)
            return
        facts.set(
            "parallelism.zero_stage", 2 if "GRAD_OP" in name or "ZERO2" in name else 3, source
        )
        if degree and degree > 0 and degree_found is not None:
            facts.set("launch.fsdp_shard", degree, degree_found[1])
        elif name.startswith(("HYBRID", "_HYBRID")):
            if per_node:
                facts.set("launch.fsdp_shard", per_node, f"derived: {name} shards in a node")
        elif world:
            facts.set("launch.fsdp_shard", world, f"derived: {name} over every rank")
        if config.value("fsdp_config.cpu_offload") is True:
            facts.note("fsdp_config.cpu_offload: parameters live in CPU memory")

    def _mode(self, config: FoundryConfig, facts: Facts) -> None:
        peft = config.value("model.peft_config")
        if isinstance(peft, Mapping) and str(peft.get("peft_type", "")).upper() == "LORA":
            facts.set("training.mode", "lora", config.where("model.peft_config"))
            rank = config.get("model.peft_config.r")
            if rank is not None and as_int(rank[0]):
                facts.set("training.lora_rank", as_int(rank[0]), rank[1])
            return
        loader = config.get("train_loader.name")
        if loader is not None and loader[0] == "finetuning":
            facts.set("training.mode", "sft", loader[1])
        else:
            source = loader[1] if loader is not None else "derived: no finetuning loader"
            facts.set("training.mode", "pretrain", source)
            if config.value("model.pretrained") is True:
                facts.note("pretrained weights on a text loader: continued pretraining")


def _mpt_shape(config: FoundryConfig, facts: Facts) -> None:
    """``mpt_causal_lm``: ``MPTConfig`` keys over its constructor's defaults."""
    mpt = _section("mpt")
    cited = _cite(mpt)
    values = mpt.get("values")
    defaults: Mapping[str, object] = values if isinstance(values, Mapping) else {}
    found: dict[str, tuple[object, str]] = {}
    for key in ("d_model", "n_heads", "n_layers", "vocab_size", "max_seq_len", "expansion_ratio"):
        given = config.get(f"model.{key}")
        if given is not None and given[0] is not None:
            found[key] = given
        else:
            found[key] = (defaults.get(key), cited)
    for key, name in (
        ("n_layers", "model.num_layers"),
        ("d_model", "model.hidden_size"),
        ("n_heads", "model.num_attention_heads"),
        ("vocab_size", "model.vocab_size"),
        ("max_seq_len", "model.seq_length"),
    ):
        value, source = found[key]
        (facts.default if source == cited else facts.set)(name, as_int(value), source)
    d_model, ratio = as_int(found["d_model"][0]), found["expansion_ratio"][0]
    width = config.get("model.ffn_config.ffn_hidden_size")
    if width is not None and as_int(width[0]):
        facts.set("model.ffn_hidden_size", as_int(width[0]), width[1])
    elif d_model and isinstance(ratio, int | float) and not isinstance(ratio, bool):
        facts.set(
            "model.ffn_hidden_size",
            int(d_model * ratio),
            f"derived: d_model x expansion_ratio ({found['d_model'][1]}; "
            f"{found['expansion_ratio'][1]})",
        )
    heads, heads_source = as_int(found["n_heads"][0]), found["n_heads"][1]
    attention = config.value("model.attn_config.attn_type") or mpt.get("attn_type")
    kv = config.get("model.attn_config.kv_n_heads")
    if attention == "multiquery_attention":
        facts.set("model.num_query_groups", 1, config.where("model.attn_config.attn_type"))
    elif attention == "grouped_query_attention" and kv is not None and as_int(kv[0]):
        facts.set("model.num_query_groups", as_int(kv[0]), kv[1])
    else:
        facts.set("model.num_query_groups", heads, heads_source)
    head_dim = config.get("model.head_dim")
    if head_dim is not None and as_int(head_dim[0]):
        facts.set("model.kv_channels", as_int(head_dim[0]), head_dim[1])
    ffn_type = config.value("model.ffn_config.ffn_type") or mpt.get("ffn_type")
    facts.set("model.activation", "swiglu" if ffn_type == "mptglu" else "gelu", cited)
    tied = config.value("model.tie_word_embeddings")
    facts.set("model.untie_embeddings", tied is False, cited)
    experts = config.get("model.ffn_config.moe_num_experts")
    if ffn_type in {"mb_moe", "mb_dmoe"} and experts is not None and as_int(experts[0]):
        facts.set("model.num_experts", as_int(experts[0]), experts[1])
        topk = config.get("model.ffn_config.moe_top_k")
        if topk is not None and as_int(topk[0]):
            facts.set("model.moe_router_topk", as_int(topk[0]), topk[1])
    facts.set("launch.model_name", "mpt_causal_lm", config.where("model.name"))


def _composer_script(args: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    _options, rest = _composer_options(args)
    if rest and rest[0].endswith(".py"):
        return rest[0], rest[1:]
    return None, ()


_VALUED = frozenset(
    {
        "n",
        "nproc",
        "world_size",
        "base_rank",
        "node_rank",
        "master_addr",
        "master_port",
        "stdout",
        "stderr",
    }
)


def _composer_options(args: tuple[str, ...]) -> tuple[dict[str, str], tuple[str, ...]]:
    """Composer launcher options before the script (``-n 8``, ``--world_size=16``) as
    name -> value, and the script with its arguments."""
    options: dict[str, str] = {}
    index = 0
    while index < len(args) and args[index].startswith("-"):
        name, eq, value = args[index].lstrip("-").partition("=")
        name = name.replace("-", "_")
        index += 1
        if eq:
            options[name] = value
        elif name in _VALUED and index < len(args):
            options[name] = args[index]
            index += 1
        else:
            options[name] = "true"
    return options, args[index:]


READER = FoundryReader()
