"""What the Megatron-LM and Megatron-DeepSpeed readers share: the documented defaults of
``planner/launch/data/megatron.yaml`` (:class:`Defaults`), a program's arguments with where each
came from (:class:`ArgSource`), and the reading of the model shape, batch, precision, tokenizer
vocabulary and step count, which both frameworks take from Megatron's ``validate_args`` rules.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from planner.errors import SpecError
from planner.launch.data import load_data
from planner.launch.reader import ReadContext
from planner.launch.readers.nemo_common import fp16_base_note
from planner.launch.release import release_at_least
from planner.launch.types import Facts
from planner.scenario.megatron_args import train_iters_from_samples
from planner.scenario.megatron_table import (
    Args,
    ArgValue,
    fp8_recipe,
    known_tokenizer_vocab,
    megatron_int,
    padded_vocab_size,
    precision_value,
    swiglu_ffn_hidden_size,
)

__all__ = [
    "ArgSource",
    "Defaults",
    "defaults_of",
    "earlier_default",
    "gpt2_vocab",
    "has_model_flags",
    "read_batch",
    "read_precision",
    "read_shape",
    "read_train_iters",
    "read_vocab",
    "release_default",
    "world_size",
]

_MODEL_FLAGS = ("--num-layers", "--hidden-size", "--num-attention-heads")


def _data() -> Mapping[str, object]:
    return load_data("megatron.yaml")


def _section(data: Mapping[str, object], *keys: str) -> Mapping[str, object]:
    node: object = data
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        raise SpecError("planner/launch/data/megatron.yaml", f"{'.'.join(keys)} is missing")
    return node


@dataclass(frozen=True, slots=True)
class Defaults:
    """The documented defaults of one framework (``planner/launch/data/megatron.yaml``):
    ``values`` maps an argparse name (``moe_router_topk``) to ``(value, source)``, the source
    reading ``default of <framework> <version> (<repo>/<path>@<short commit>)``."""

    framework: str
    values: Mapping[str, tuple[object, str]]
    repo: str = ""
    commit: str = ""
    files: Mapping[str, str] = field(default_factory=dict)

    def value(self, key: str) -> object:
        """The default of ``key`` (KeyError names a key the data file lacks)."""
        return self.values[key][0]

    def source(self, key: str) -> str:
        """Where the default of ``key`` is defined."""
        return self.values[key][1]

    def cite(self, role: str) -> str:
        """``<repo>/<path>@<short commit>`` of the framework's file for ``role``
        (``arguments``: where ``validate_args`` lives, ``training``: ``update_train_iters``,
        ``yaml``: ``validate_yaml``); a path itself for any other role."""
        return f"{self.repo}/{self.files.get(role, role)}@{self.commit[:7]}"

    def apply(self, facts: Facts, name: str, key: str, value: object = None) -> None:
        """``facts.default(name, value or the default of key, its source)``."""
        facts.default(name, self.value(key) if value is None else value, self.source(key))


@cache
def defaults_of(framework: str) -> Defaults:
    """The defaults of ``megatron_lm``, ``megatron_deepspeed`` or ``deepspeed``, with sources."""
    data = _data()
    about = _section(data, "frameworks", framework)
    repo, commit = str(about.get("repo", "")), str(about.get("commit", ""))
    label = f"{about.get('name', framework)} {about.get('version', '')}".strip()
    values: dict[str, tuple[object, str]] = {}
    for key, entry in _section(data, "defaults", framework).items():
        if isinstance(entry, Mapping) and "value" in entry:
            source = f"default of {label} ({repo}/{entry.get('path', '')}@{commit[:7]})"
            values[str(key)] = (entry["value"], source)
    roles = ("arguments", "training", "yaml")
    files = {role: str(about[role]) for role in roles if role in about}
    return Defaults(framework=framework, values=values, repo=repo, commit=commit, files=files)


def release_default(framework: str, key: str, release: str) -> tuple[object, str] | None:
    """The default of ``key`` in the NeMo Framework container ``release`` and where it is
    defined, where that container's Megatron Core predates the change the data file's
    ``release_defaults`` records (:func:`earlier_default`); None where the container has the
    default of ``defaults`` (its ``first_container`` or later)."""
    entry = _section(_data(), "release_defaults", framework, key)
    first = str(entry.get("first_container", ""))
    if release_at_least(release, first):
        return None
    why = f"NeMo Framework container {release} predates {first}, the first with it"
    return earlier_default(framework, key, why)


def earlier_default(framework: str, key: str, why: str) -> tuple[object, str]:
    """The default of ``key`` before the change the data file's ``release_defaults`` records
    (``earlier``, read at ``earlier_at``) and where it is defined, ``why`` it applies ending
    the source."""
    entry = _section(_data(), "release_defaults", framework, key)
    about = _section(_data(), "frameworks", framework)
    at = _section(entry, "earlier_at")
    changed = _section(entry, "changed_in")
    path = _section(_data(), "defaults", framework, key).get("path", "")
    source = (
        f"default of {about.get('name', framework)} {at.get('version', '')} "
        f"({about.get('repo', '')}/{path}@{str(at.get('commit', ''))[:7]}), until "
        f"{changed.get('version', '')} ({str(changed.get('commit', ''))[:10]}): {why}"
    )
    return entry.get("earlier"), source


def gpt2_vocab() -> tuple[int, str]:
    """GPT-2's BPE vocabulary and its source (the data file's catalog entry)."""
    entry = _section(_data(), "catalog", "gpt2_vocab")
    value = entry.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError("planner/launch/data/megatron.yaml", "catalog.gpt2_vocab needs a value")
    return value, str(entry.get("source", ""))


@dataclass(frozen=True, slots=True)
class ArgSource:
    """The arguments of one program, each with where it came from: ``values`` (argument name
    without dashes -> value as written, True for a switch), ``where`` (``file:line`` of the
    command), ``cited`` (argument -> ``file:line`` for values read from a config file) and
    ``names`` (argument -> the config file's key for it)."""

    values: Args
    where: str = ""
    cited: Mapping[str, str] = field(default_factory=dict)
    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, key: str) -> str:
        """How the launch spells argument ``key``: ``--key``, or its config file's key."""
        return self.names.get(key, f"--{key}")

    def source(self, *keys: str) -> str:
        """Where ``keys`` were given: ``<where> (--a, --b)``, a file's ``file:line``, or
        ``override: --a`` when the command's place is unknown."""
        if keys and keys[0] in self.cited:
            return self.cited[keys[0]]
        flags = ", ".join(f"--{key}" for key in keys)
        return f"{self.where} ({flags})" if self.where else f"override: {flags}"

    def int(self, key: str) -> int | None:
        """The argument as an integer, else None."""
        return megatron_int(self.values, key)

    def on(self, key: str) -> bool:
        """True when the switch ``--key`` is given."""
        return self.values.get(key) is True

    def text(self, key: str) -> str | None:
        """The argument's text, None when absent or a bare switch."""
        value = self.values.get(key)
        return value if isinstance(value, str) and value else None

    def set(self, facts: Facts, row: ArgValue, defaults: Defaults) -> None:
        """One table row into ``facts``: from its argument, or Megatron's default."""
        if row.arg:
            facts.set(row.field, row.value, self.source(row.arg))
        else:
            defaults.apply(facts, row.field, row.field.partition(".")[2], row.value)


def has_model_flags(args: tuple[str, ...]) -> bool:
    """True when the tokens carry a Megatron model flag (``--num-layers``, ``--hidden-size``,
    ``--num-attention-heads``, with dashes as argparse spells them, or ``--yaml-cfg``)."""
    names = {token.partition("=")[0] for token in args if token.startswith("--")}
    return bool(names & {*_MODEL_FLAGS, "--yaml-cfg"})


def world_size(context: ReadContext) -> int | None:
    """Processes the launch starts: the launcher's world size, else the allocation's GPUs."""
    for name in ("launch.world_size", "hardware.num_gpus"):
        value = context.allocation.int(name)
        if value and value > 0:
            return value
    return context.launch.num_gpus or None


def read_shape(facts: Facts, args: ArgSource, defaults: Defaults) -> None:
    """Layers, width, heads, KV channels, sequence length, activation, FFN width and tied
    embeddings, as ``validate_args`` completes them."""
    for arg, name in (
        ("num-layers", "model.num_layers"),
        ("hidden-size", "model.hidden_size"),
        ("num-attention-heads", "model.num_attention_heads"),
        ("kv-channels", "model.kv_channels"),
    ):
        value = args.int(arg)
        if value is not None:
            facts.set(name, value, args.source(arg))
    for arg in ("seq-length", "encoder-seq-length"):  # seq_length = encoder_seq_length if unset
        if args.int(arg) is not None:
            facts.set("model.seq_length", args.int(arg), args.source(arg))
            break
    if args.on("swiglu"):
        facts.set("model.activation", "swiglu", args.source("swiglu"))
    elif args.on("squared-relu"):
        facts.set("model.activation", "squared_relu", args.source("squared-relu"))
    else:
        defaults.apply(facts, "model.activation", "activation")
    hidden = args.int("hidden-size")
    ffn = args.int("ffn-hidden-size")
    arguments = defaults.cite("yaml" if args.names else "arguments")
    if ffn is not None:
        facts.set("model.ffn_hidden_size", ffn, args.source("ffn-hidden-size"))
    elif hidden is not None and args.on("swiglu"):
        rule = f"derived: int(8 x hidden {hidden} / 3 / 64) x 64 with {args.name('swiglu')}"
        facts.set("model.ffn_hidden_size", swiglu_ffn_hidden_size(hidden), f"{rule} ({arguments})")
    elif hidden is not None:
        rule = f"derived: 4 x hidden {hidden} (no {args.name('ffn-hidden-size')})"
        facts.set("model.ffn_hidden_size", 4 * hidden, f"{rule} ({arguments})")
    if args.on("untie-embeddings-and-output-weights"):
        facts.set(
            "model.untie_embeddings", True, args.source("untie-embeddings-and-output-weights")
        )
    else:
        defaults.apply(facts, "model.untie_embeddings", "untie_embeddings_and_output_weights")


def read_batch(
    facts: Facts, args: ArgSource, *, world: int | None, model_parallel: int
) -> int | None:
    """Micro and global batch: ``--global-batch-size``, else micro x data parallel (the
    ``validate_args`` default), ``model_parallel`` being the ranks that share one sample.
    Returns the global batch when known."""
    micro = args.int("micro-batch-size")
    if micro is not None:
        facts.set("parallelism.micro_batch_size", micro, args.source("micro-batch-size"))
    global_batch = args.int("global-batch-size")
    if global_batch is not None:
        facts.set("parallelism.global_batch_size", global_batch, args.source("global-batch-size"))
        return global_batch
    if micro and world and model_parallel > 0 and world % model_parallel == 0:
        dp = world // model_parallel
        facts.set(
            "parallelism.global_batch_size",
            micro * dp,
            f"derived: no {args.name('global-batch-size')} -> micro batch x data parallel "
            "(validate_args)",
        )
        return micro * dp
    return None


def read_vocab(facts: Facts, args: ArgSource, defaults: Defaults, tp: int) -> None:
    """The tokenizer's vocabulary (``model.vocab_size``) and Megatron's padded embedding
    (``launch.padded_vocab_size``). Only tokenizers the launch determines count: GPT-2 BPE
    (50257), ``NullTokenizer`` (``--vocab-size`` + 1 end-of-document token), ``TikTokenizer``
    with ``--vocab-size``, or a tokenizer named in ``--tokenizer-model`` that the shared table
    knows; a tokenizer file outside the launch leaves the vocabulary unknown (noted)."""
    divisible = args.int("make-vocab-size-divisible-by")
    if divisible is None or divisible <= 0:
        divisible = int(str(defaults.value("make_vocab_size_divisible_by")))
    padded = args.int("padded-vocab-size")
    if padded:
        facts.set("launch.padded_vocab_size", padded, args.source("padded-vocab-size"))
    kind = args.text("tokenizer-type")
    kind_source = args.source("tokenizer-type")
    if kind is None:
        kind, kind_source = str(defaults.value("tokenizer_type")), defaults.source("tokenizer_type")
    vocab: int | None = None
    source = ""
    size = args.int("vocab-size")
    model = args.text("tokenizer-model") or ""
    if kind == "GPT2BPETokenizer":
        vocab, cited = gpt2_vocab()
        source = f"catalog:gpt2 (GPT2BPETokenizer vocabulary, {cited}; tokenizer: {kind_source})"
        vocab_file = args.text("vocab-file")
        if vocab_file is None:
            facts.note(f"{kind} without --vocab-file: GPT-2's vocabulary ({vocab}) assumed")
        elif "gpt2" not in posixpath.basename(vocab_file).lower():
            facts.note(f"--vocab-file {vocab_file}: taken as GPT-2's BPE vocabulary ({vocab})")
    elif kind == "NullTokenizer" and size is not None and size > 0:
        vocab = size + 1
        source = f"derived: {args.name('vocab-size')} {size} + 1 end-of-document token"
    elif kind == "TikTokenizer" and size is not None and size > 0:
        vocab, source = size, args.source("vocab-size")
    elif model and known_tokenizer_vocab(model):
        vocab = known_tokenizer_vocab(model)
        source = f"catalog:{model} (vocabulary of the tokenizer named by --tokenizer-model)"
    else:
        named = f" {model}" if model else ""
        facts.note(f"vocabulary not determined: tokenizer {kind}{named} is not part of the launch")
    if vocab is None:
        return
    facts.set("model.vocab_size", vocab, source)
    if not padded:
        facts.set(
            "launch.padded_vocab_size",
            padded_vocab_size(vocab, divisible, tp),
            f"derived: vocab {vocab} padded to a multiple of {divisible} x tensor parallel {tp}",
        )


def _rampup(args: ArgSource) -> tuple[int, int, int] | None:
    text = args.text("rampup-batch-size")
    if text is None:
        return None
    parts = [megatron_int({"v": part}, "v") for part in text.replace(",", " ").split()]
    if len(parts) != 3 or any(part is None for part in parts):
        raise ValueError(f"--rampup-batch-size {text!r} needs three integers")
    start, step, samples = (int(part) for part in parts if part is not None)
    return start, step, samples


def read_train_iters(
    facts: Facts,
    args: ArgSource,
    defaults: Defaults,
    *,
    global_batch: int | None,
    stop_at_train_samples: bool,
) -> None:
    """``training.train_iters``: ``--train-iters``, else ``--train-samples`` by
    ``update_train_iters`` (with ``--rampup-batch-size`` stepped through); also
    ``launch.train_samples``."""
    iters = args.int("train-iters")
    samples = args.int("train-samples")
    if samples is not None:
        facts.set("launch.train_samples", samples, args.source("train-samples"))
    if iters is not None:
        facts.set("training.train_iters", iters, args.source("train-iters"))
        if samples is not None:
            facts.note(
                f"{args.name('train-iters')} and {args.name('train-samples')} both given: "
                "Megatron refuses the pair"
            )
        return
    if samples is None or not global_batch:
        return
    try:
        rampup = _rampup(args)
        steps = train_iters_from_samples(
            samples, global_batch, rampup, stop_at_train_samples=stop_at_train_samples
        )
    except ValueError as exc:
        facts.note(f"training steps not derived: {exc}")
        return
    code = defaults.cite("training")
    if rampup is None:
        rule = f"derived: {args.name('train-samples')} {samples} // global batch {global_batch}"
    else:
        ramp = " ".join(str(v) for v in rampup)
        rule = (
            f"derived: {args.name('train-samples')} {samples} with "
            f"{args.name('rampup-batch-size')} {ramp} stepped "
            f"through update_train_iters"
        )
        facts.note(
            f"batch ramp-up {rampup[0]} -> {global_batch} by {rampup[1]} over {rampup[2]} "
            f"samples: {steps} steps, not {samples // global_batch} at the full batch"
        )
    facts.set("training.train_iters", steps, f"{rule} ({code})")


def read_precision(facts: Facts, args: ArgSource) -> str | None:
    """``parallelism.precision`` (and ``fp8_recipe``) from ``--bf16`` / ``--fp16`` /
    ``--fp8-format`` / ``--fp4-format``; None (noted) when none is given: Megatron then keeps
    fp32 parameters, which the scenario format does not model. ``--fp16`` under fp8 or fp4 GEMMs
    is read as the low precision, with a note (``nemo_common.fp16_base_note``)."""
    row = precision_value(args.values)
    if row is None:
        return None
    facts.set(row.field, row.value, args.source(row.arg))
    if row.value != "fp16" and args.values.get("fp16") is True:
        facts.note(fp16_base_note(str(row.value), args.source("fp16", row.arg)))
    recipe = fp8_recipe(args.values, str(row.value))
    if recipe is not None:
        source = args.source("fp8-recipe") if "fp8-recipe" in args.values else args.source(row.arg)
        facts.set("parallelism.fp8_recipe", recipe, source)
    return str(row.value)
