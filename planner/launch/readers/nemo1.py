"""NeMo 1.0 launches: ``python examples/nlp/language_modeling/megatron_gpt_pretraining.py
[--config-path P] [--config-name N] key=value ...`` (Hydra, through NeMo's ``hydra_runner``).

Settings resolve as Hydra composes them: the script's config (``@hydra_runner(config_path="conf",
config_name="megatron_gpt_config")``, or ``--config-path`` / ``--config-name``), its
``defaults:`` groups, then the command-line overrides in order (``a.b=v``, ``+a.b=v``,
``++a.b=v``, ``~a.b``); ``${...}`` interpolations are resolved from the composed config. A
relative ``--config-path`` is taken from the script's directory (Hydra's rule) and, when
nothing is there, from the working directory. When the config file is not in the job's tree,
the published defaults of NeMo's ``megatron_gpt_config.yaml`` stand in
(``planner/launch/data/nemo2_recipes.yaml`` ``nemo1``, NVIDIA/NeMo@9d86acd).

Derived: data parallel = GPUs / (TP x PP x CP) and gradient accumulation = global batch /
(micro batch x data parallel) (NeMo Megatron accumulates implicitly; ``trainer.
accumulate_grad_batches`` stays 1); GPUs = ``trainer.devices`` x ``trainer.num_nodes``; the
vocabulary is the tokenizer's (Megatron ``GPT2BPETokenizer``: 50257), padded to a multiple of
``make_vocab_size_divisible_by`` x TP.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence

from planner.errors import SourceError
from planner.launch.configs import ConfigTree, read_config, split_options
from planner.launch.data import load_data
from planner.launch.reader import ReadContext
from planner.launch.readers.nemo_common import (
    moe_routing_keys,
    padded_vocab,
    precision_of_trainer,
    set_activation,
    unexpanded,
)
from planner.launch.readers.nemo_hydra import HydraConfig, split_override
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import as_int, mapping_of

__all__ = ["NEMO1_READER", "Nemo1Reader", "apply_config"]

_DATA = "nemo2_recipes.yaml"
_VALUED = {"--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd"}
_RECOMPUTE = {"selective": "selective", "full": "full"}
_VOCAB_DIVISOR = 128
"""``make_vocab_size_divisible_by`` when the config leaves it out (``self._cfg.get(
'make_vocab_size_divisible_by', 128)``, nemo/collections/nlp/models/language_modeling/
megatron_base_model.py@9d86acd)."""


def _catalog() -> Mapping[str, object]:
    return mapping_of(load_data(_DATA).get("nemo1"))


def _scripts() -> Mapping[str, object]:
    return mapping_of(_catalog().get("scripts"))


def _cite(path: str) -> str:
    catalog = _catalog()
    return f"NVIDIA/NeMo/{path}@{str(catalog.get('commit', ''))[:7]}"


class Nemo1Reader:
    """Reads NeMo 1.0 Hydra training launches (module docstring)."""

    name = "nemo1"

    def recognises(self, invocation: Invocation) -> bool:
        """A NeMo 1.0 Megatron GPT training script (``megatron_gpt_pretraining.py``, ...)."""
        return posixpath.basename(invocation.program) in _scripts()

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the run trains. Raises ``SourceError`` when the Hydra config is neither in the
        job's tree nor a published default, ``SpecError`` when it cannot be parsed."""
        facts = Facts()
        facts.set("training.framework", "nemo", "launch: NeMo 1.0 (Hydra)")
        facts.set("training.mode", "pretrain", f"launch: {posixpath.basename(invocation.program)}")
        options, overrides = _split_args(invocation.args)
        config = self._compose(invocation, context, options, facts)
        for arg in overrides:
            if arg.startswith(("hydra.", "hydra/")):
                continue
            if unexpanded(arg):
                facts.note(f"{arg!r}: no value (a shell variable left unexpanded); ignored")
                continue
            _note_refused_override(config, arg, facts)
            if not config.apply_override(arg):
                facts.note(f"argument {arg!r} is not a Hydra override; ignored")
        apply_config(config, facts)
        for key in sorted(config.unknown):
            facts.note(f"{key}: its interpolation cannot be resolved from the files")
        return facts

    def _compose(
        self,
        invocation: Invocation,
        context: ReadContext,
        options: Mapping[str, str],
        facts: Facts,
    ) -> HydraConfig:
        script = posixpath.basename(invocation.program)
        entry = _scripts().get(script)
        defaults = mapping_of(entry)
        name = options.get("config_name") or str(defaults.get("config_name", ""))
        config_path = options.get("config_path") or str(defaults.get("config_path", "conf"))
        script_dir = posixpath.dirname(resolve_path(invocation.program, invocation.cwd))
        filename = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
        candidates = []
        if posixpath.isabs(config_path):
            candidates.append(config_path)
        else:
            candidates.append(posixpath.join(script_dir, config_path))
            candidates.append(resolve_path(config_path, invocation.cwd))
        if "config_dir" in options:
            candidates.append(resolve_path(options["config_dir"], invocation.cwd))
        for directory in candidates:
            path = posixpath.normpath(posixpath.join(directory, filename))
            if context.files.exists(path):
                tree = read_config(context.files, path)
                config = HydraConfig()
                _compose_defaults(config, tree, directory, context, facts)
                return config
        published = _published(posixpath.splitext(posixpath.basename(filename))[0])
        if published is None:
            raise SourceError(
                posixpath.join(candidates[0], filename),
                "the Hydra config is not in the job's files; put it at the --config-path the "
                "launch names (or describe the job with a scenario)",
            )
        values, path = published
        facts.note(
            f"{filename} is not in the job's files: NeMo's published defaults of {path} are used"
        )
        config = HydraConfig()
        config.merge_values(values, f"default of NeMo 1.0 ({_cite(path)})")
        return config


def _note_refused_override(config: HydraConfig, arg: str, facts: Facts) -> None:
    """Note an override Hydra refuses on NeMo's config (composed in struct mode): ``a.b=v`` for
    a key the config lacks ("Could not override 'a.b' ... To append to your config use
    +a.b=v") and ``+a.b=v`` for a key it has ("Could not append to config. An item is already
    at 'a.b'"). The value is still read (what the launch meant), and the note says the run
    would stop at start and how to write it."""
    parsed = split_override(arg)
    if parsed is None:
        return
    action, key, _ = parsed
    if action == "set" and not config.has(key):
        facts.note(
            f"{arg!r}: the config has no {key}, so Hydra refuses this override and the run "
            f"stops at start; write +{arg} to add the key (read here as if added)"
        )
    elif action == "add" and config.has(key):
        facts.note(
            f"{arg!r}: the config already has {key}, so Hydra refuses to add it and the run "
            f"stops at start; write {arg[1:]} (or +{arg}) to set it (read here as set)"
        )


def _split_args(args: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Hydra's own options (``--config-path``, ``--config-name``, ``--config-dir``, with
    ``=`` or a separate value) and the overrides, in order."""
    given, overrides = split_options(args, _VALUED)
    short = {"-cp": "config_path", "-cn": "config_name", "-cd": "config_dir"}
    options = {short.get(name, name[2:].replace("-", "_")): value for name, value in given}
    return options, overrides


def _published(name: str) -> tuple[dict[str, object], str] | None:
    configs = _catalog().get("configs")
    entry = configs.get(name) if isinstance(configs, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    values = entry.get("values")
    if not isinstance(values, Mapping):
        return None
    return {str(k): v for k, v in values.items()}, str(entry.get("path", name))


def _compose_defaults(
    config: HydraConfig, tree: ConfigTree, directory: str, context: ReadContext, facts: Facts
) -> None:
    """The primary config and its ``defaults:`` list in Hydra's order: each group's file
    (``<config dir>/<group>/<option>.yaml``, merged at the group's package) and the primary
    config where ``_self_`` stands (last when the list omits it, as Hydra 1.1+ does); an
    ``optional`` group whose file is absent is skipped."""
    entries = tree.get("defaults")
    if not isinstance(entries, list):
        config.merge_tree(tree)
        config.delete("defaults")
        return
    if "_self_" not in entries:
        entries = [*entries, "_self_"]
    for entry in entries:
        if entry == "_self_":
            config.merge_tree(tree)
            config.delete("defaults")
            continue
        if not isinstance(entry, Mapping) or len(entry) != 1:
            facts.note(f"Hydra defaults entry {entry!r} not composed")
            continue
        ((group, option),) = entry.items()
        group = str(group)
        optional = group.startswith("optional ")
        group = group.removeprefix("optional ").strip()
        package = group.split("@", 1)[1] if "@" in group else group.replace("/", ".")
        group = group.split("@", 1)[0]
        if option is None or option == "":
            continue
        path = posixpath.join(directory, group, f"{option}.yaml")
        if context.files.exists(path):
            config.merge_tree(read_config(context.files, path), prefix=package)
        elif not optional:
            facts.note(f"Hydra defaults group {group}: {option} not found at {path}; skipped")


_SHAPE_AND_LAYOUT = (
    ("model.num_layers", "model.num_layers"),
    ("model.hidden_size", "model.hidden_size"),
    ("model.num_attention_heads", "model.num_attention_heads"),
    ("model.ffn_hidden_size", "model.ffn_hidden_size"),
    ("model.kv_channels", "model.kv_channels"),
    ("model.seq_length", "model.encoder_seq_length"),
    ("model.num_experts", "model.num_moe_experts"),
    ("model.moe_router_topk", "model.moe_router_topk"),
    *moe_routing_keys("model"),
    ("parallelism.tensor_parallel", "model.tensor_model_parallel_size"),
    ("parallelism.pipeline_parallel", "model.pipeline_model_parallel_size"),
    ("parallelism.virtual_pipeline", "model.virtual_pipeline_model_parallel_size"),
    ("parallelism.context_parallel", "model.context_parallel_size"),
    ("parallelism.expert_parallel", "model.expert_model_parallel_size"),
    ("parallelism.sequence_parallel", "model.sequence_parallel"),
    ("parallelism.micro_batch_size", "model.micro_batch_size"),
    ("parallelism.global_batch_size", "model.global_batch_size"),
)
"""Scenario field <- the key of NeMo's Megatron GPT config that holds it as is."""


def apply_config(config: HydraConfig, facts: Facts) -> None:
    """A composed NeMo 1.0 Megatron GPT config (the job's, or the one its log prints) ->
    facts (module docstring)."""
    for name, key in _SHAPE_AND_LAYOUT:
        found = config.lookup(key)
        if found is not None and found.value is not None:
            facts.set(name, found.value, found.source)
    _attention_and_width(config, facts)
    activation = config.lookup("model.activation")
    if activation is not None:
        set_activation(facts, activation.value, activation.source)
    shared = config.lookup("model.share_embeddings_and_output_weights")
    if shared is not None and isinstance(shared.value, bool):
        facts.set("model.untie_embeddings", not shared.value, shared.source)
    granularity = config.lookup("model.activations_checkpoint_granularity")
    if granularity is not None and granularity.value in _RECOMPUTE:
        facts.set("parallelism.recompute", _RECOMPUTE[str(granularity.value)], granularity.source)
    _precision(config, facts)
    _sharding(config, facts)
    _vocab(config, facts)
    _steps_and_gpus(config, facts)


def _attention_and_width(config: HydraConfig, facts: Facts) -> None:
    """KV heads (``num_query_groups`` null: multi-head), the FFN width (null: 4 x hidden) and
    the data's sequence length against the model's."""
    heads = config.lookup("model.num_attention_heads")
    groups = config.lookup("model.num_query_groups")
    if groups is not None and groups.value is not None:
        facts.set("model.num_query_groups", groups.value, groups.source)
    elif heads is not None and heads.value is not None:
        facts.set(
            "model.num_query_groups",
            heads.value,
            f"derived: num_query_groups null -> multi-head attention ({heads.source})",
        )
    hidden = as_int(facts.get("model.hidden_size"))
    if not facts.has("model.ffn_hidden_size") and hidden:
        facts.set(
            "model.ffn_hidden_size", 4 * hidden, "derived: ffn_hidden_size null -> 4 x hidden"
        )
    data_seq = config.lookup("model.data.seq_length")
    if data_seq is not None and data_seq.value != facts.get("model.seq_length"):
        facts.note(
            f"model.data.seq_length {data_seq.value} differs from model.encoder_seq_length "
            f"{facts.get('model.seq_length')}"
        )


def _precision(config: HydraConfig, facts: Facts) -> None:
    fp8 = config.lookup("model.fp8")
    if fp8 is not None and fp8.value is True:
        facts.set("parallelism.precision", "fp8", fp8.source)
        return
    precision = config.lookup("trainer.precision")
    if precision is None:
        return
    name = precision_of_trainer(precision.value)
    if name is None:
        facts.note(f"trainer.precision {precision.value!r}: not a bf16/fp16 setting; left open")
        return
    facts.set("parallelism.precision", name, precision.source)


def _sharding(config: HydraConfig, facts: Facts) -> None:
    fsdp = config.lookup("model.fsdp")
    if fsdp is not None and fsdp.value is True:
        facts.set("parallelism.zero_stage", 3, fsdp.source)
        return
    optimizer = config.lookup("model.optim.name")
    if optimizer is not None and isinstance(optimizer.value, str):
        stage = 1 if optimizer.value.startswith("distributed_fused_adam") else 0
        facts.set("parallelism.zero_stage", stage, optimizer.source)


def _vocab(config: HydraConfig, facts: Facts) -> None:
    table = _catalog().get("tokenizer_vocab")
    known = mapping_of(table)
    tokenizer_type = config.lookup("model.tokenizer.type")
    library = config.lookup("model.tokenizer.library")
    name = tokenizer_type.value if tokenizer_type is not None else None
    if not isinstance(name, str) or name not in known:
        facts.note(
            f"tokenizer {library.value if library else '?'}/{name}: its vocabulary size is not "
            "fixed by the launch"
        )
        return
    assert tokenizer_type is not None
    vocab = as_int(known[name])
    if vocab is None:
        return
    facts.set(
        "model.vocab_size", vocab, f"{tokenizer_type.source}: the {name} vocabulary ({vocab})"
    )
    divisor = config.lookup("model.make_vocab_size_divisible_by")
    tp = as_int(facts.get("parallelism.tensor_parallel")) or 1
    multiple = as_int(divisor.value) if divisor is not None else None
    padded_vocab(
        facts,
        vocab,
        multiple or _VOCAB_DIVISOR,
        tp,
        _cite("nemo/collections/nlp/models/language_modeling/megatron_base_model.py")
        + " _vocab_size_with_padding",
    )


def _steps_and_gpus(config: HydraConfig, facts: Facts) -> None:
    steps = config.lookup("trainer.max_steps")
    iters = as_int(steps.value) if steps is not None else None
    if steps is not None and iters and iters > 0:
        facts.set("training.train_iters", iters, steps.source)
    else:
        facts.note("trainer.max_steps is not set: the run's length follows trainer.max_epochs")
    devices = config.lookup("trainer.devices")
    nodes = config.lookup("trainer.num_nodes")
    per_node = as_int(devices.value) if devices is not None else None
    count = as_int(nodes.value) if nodes is not None else None
    if devices is not None and per_node and per_node > 0:
        facts.set("hardware.gpus_per_node", per_node, devices.source)
        if nodes is not None and count and count > 0:
            facts.set("launch.num_nodes", count, nodes.source)
            facts.set(
                "hardware.num_gpus",
                per_node * count,
                f"derived: trainer.devices x trainer.num_nodes ({devices.source}; {nodes.source})",
            )
    elif devices is not None:
        facts.note(f"trainer.devices {devices.value!r}: the GPU count follows the allocation")


NEMO1_READER = Nemo1Reader()
