"""Megatron-DeepSpeed launches (microsoft/Megatron-DeepSpeed): ``pretrain_gpt.py`` and the
other Python programs of that repository, run with ``--deepspeed`` / ``--deepspeed_config``.

The Megatron arguments are read as in :mod:`planner.launch.readers.megatron`, against
Megatron-DeepSpeed's own ``megatron/arguments.py`` (at the commit of
``planner/launch/data/megatron.yaml``), plus its own:

* ``--num-key-value-heads`` (grouped-query attention; default the head count),
  ``--ds-sequence-parallel-size`` (DeepSpeed-Ulysses, the context-parallel degree: it divides
  the data-parallel ranks), ``--checkpoint-activations`` (full recompute: DeepSpeed keeps the
  old activation-checkpointing path).
* DeepSpeed-MoE: ``--num-experts`` (one count, or one per MoE layer), ``--expert-interval``
  (default 2: layers 2, 4, ... are MoE, ``get_num_experts_per_layer``), ``--topk`` (default 1),
  ``--moe-expert-parallel-size`` (default 1; capped at the data-parallel ranks the expert
  groups are cut from), ``--enable-expert-tensor-parallelism``, ``--mlp-type residual``.
* ``--train-tokens``: the training loop (``megatron/training.py``) stops once
  ``consumed_train_tokens >= train_tokens``, i.e. after ``ceil(tokens / (global batch x seq))``
  steps, when that comes before ``--train-iters``.
* The DeepSpeed JSON named by ``--deepspeed_config`` (read through the launch's files, which
  include a JSON the script writes itself with a heredoc): ``zero_optimization.stage`` (the
  ZeRO stage DeepSpeed runs; DeepSpeed's default 0 when absent), ``bf16`` / ``fp16``
  ``enabled`` (precision when no ``--bf16`` / ``--fp16`` is given). Its batch values do not
  override Megatron's: the training loop sets DeepSpeed's batch from ``--micro-batch-size`` and
  ``--global-batch-size`` each step (``set_train_batch_size``); a disagreement is noted.
"""

from __future__ import annotations

import math
import posixpath

from planner.launch.configs import ConfigTree, read_config
from planner.launch.reader import ReadContext
from planner.launch.readers.megatron_common import (
    ArgSource,
    Defaults,
    defaults_of,
    has_model_flags,
    read_batch,
    read_precision,
    read_shape,
    read_train_iters,
    read_vocab,
    world_size,
)
from planner.launch.types import Facts, Invocation, resolve_path
from planner.launch.values import as_int
from planner.scenario.megatron_table import (
    LIST_ARGS,
    megatron_int,
    parse_megatron_args,
    recompute_values,
)

__all__ = ["READER", "MegatronDeepSpeedReader", "read_megatron_deepspeed"]

_DEEPSPEED_FLAGS = frozenset({"--deepspeed", "--deepspeed_config", "--deepspeed-config"})


def _deepspeed_config(
    facts: Facts, args: ArgSource, invocation: Invocation, context: ReadContext
) -> ConfigTree | None:
    """The DeepSpeed JSON of ``--deepspeed_config``; None (noted) when DeepSpeed is off or the
    file is not among the launch's files (a script may write it at run time)."""
    path = args.text("deepspeed-config")
    if not args.on("deepspeed"):
        if path is not None:
            facts.note(f"--deepspeed_config {path} without --deepspeed: DeepSpeed is off")
        return None
    if path is None:
        facts.note("--deepspeed without --deepspeed_config: DeepSpeed's defaults apply")
        return None
    full = resolve_path(path, invocation.cwd or context.launch.work_dir)
    if not context.files.exists(full):
        facts.note(
            f"DeepSpeed config {path} is not among the launch's files (written at run time?)"
        )
        return None
    return read_config(context.files, full, fmt="json")


def _parallel(facts: Facts, args: ArgSource, defaults: Defaults) -> tuple[int, int, int]:
    """TP, PP and DeepSpeed-Ulysses sequence parallel (the context-parallel degree)."""
    sizes: list[int] = []
    for arg, name, key in (
        ("tensor-model-parallel-size", "parallelism.tensor_parallel", "tensor_model_parallel_size"),
        (
            "pipeline-model-parallel-size",
            "parallelism.pipeline_parallel",
            "pipeline_model_parallel_size",
        ),
        ("ds-sequence-parallel-size", "parallelism.context_parallel", "ds_sequence_parallel_size"),
    ):
        value = args.int(arg)
        if value is not None and value > 0:
            facts.set(name, value, args.source(arg))
        else:
            defaults.apply(facts, name, key)
        sizes.append(value if value is not None and value > 0 else 1)
    tp, pp, sp = sizes
    if args.on("sequence-parallel"):
        facts.set("parallelism.sequence_parallel", tp > 1, args.source("sequence-parallel"))
    else:
        defaults.apply(facts, "parallelism.sequence_parallel", "sequence_parallel")
    return tp, pp, sp


def _attention(facts: Facts, args: ArgSource) -> None:
    heads = args.int("num-attention-heads")
    groups = args.int("num-key-value-heads")
    if groups is not None:
        facts.set("model.num_query_groups", groups, args.source("num-key-value-heads"))
    elif heads is not None:
        rule = "derived: no --num-key-value-heads -> the head count (validate_args)"
        facts.set("model.num_query_groups", heads, rule)


def _batch_notes(
    facts: Facts, config: ConfigTree | None, *, micro: int | None, dp: int | None
) -> None:
    """Notes where the DeepSpeed JSON's batch disagrees with Megatron's arguments."""
    if config is None:
        return
    gbs = facts.int("parallelism.global_batch_size")
    expected = {
        "train_batch_size": gbs,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gbs // (micro * dp) if gbs and micro and dp else None,
    }
    for key, want in expected.items():
        found = as_int(config.get(key))
        if found is not None and want is not None and found != want:
            facts.note(
                f"{config.where(key)}: {key} {found} differs from Megatron's {want}; the "
                "training loop sets DeepSpeed's batch from Megatron's arguments"
            )


def _precision(facts: Facts, args: ArgSource, config: ConfigTree | None) -> None:
    if read_precision(facts, args) is not None:
        return
    for key in ("bf16", "fp16"):
        if config is not None and config.get(f"{key}.enabled") is True:
            facts.set("parallelism.precision", key, config.where(f"{key}.enabled"))
            return
    facts.note("no --bf16 / --fp16 and no DeepSpeed bf16/fp16 section: fp32 training")


def _memory(
    facts: Facts, args: ArgSource, defaults: Defaults, config: ConfigTree | None, *, on: bool
) -> None:
    """Recompute and the ZeRO stage."""
    if args.on("checkpoint-activations"):
        facts.set("parallelism.recompute", "full", args.source("checkpoint-activations"))
    else:
        rows = recompute_values(args.values)
        for row in rows:
            args.set(facts, row, defaults)
        if not rows:
            defaults.apply(facts, "parallelism.recompute", "recompute_granularity")
    stage = as_int(config.get("zero_optimization.stage")) if config is not None else None
    flag = args.int("zero-stage")
    if not on:
        if args.on("use-distributed-optimizer"):
            facts.set("parallelism.zero_stage", 1, args.source("use-distributed-optimizer"))
        else:
            defaults.apply(facts, "parallelism.zero_stage", "use_distributed_optimizer", 0)
    elif config is not None and stage is not None:
        facts.set("parallelism.zero_stage", stage, config.where("zero_optimization.stage"))
        if flag is not None and flag != stage:
            facts.note(f"--zero-stage {flag} differs from the DeepSpeed config's stage {stage}")
    elif config is None and flag is not None:
        facts.set("parallelism.zero_stage", flag, args.source("zero-stage"))
        facts.note("ZeRO stage from --zero-stage: the DeepSpeed config was not read")
    else:
        ds = defaults_of("deepspeed")
        ds.apply(facts, "parallelism.zero_stage", "zero_stage")


def _moe(facts: Facts, args: ArgSource, defaults: Defaults, *, tp: int, dp: int | None) -> None:
    """DeepSpeed-MoE: experts, top-k, MoE layers every ``--expert-interval``, EP."""
    text = args.text("num-experts")
    counts = [megatron_int({"n": part}, "n") for part in (text or "").split()]
    experts = [count for count in counts if count is not None]
    if not experts or len(experts) != len(counts) or max(experts) <= 1:
        defaults.apply(facts, "parallelism.expert_parallel", "moe_expert_parallel_size")
        return
    layers = args.int("num-layers")
    interval = args.int("expert-interval")
    source = args.source("expert-interval")
    if interval is None or interval <= 0:
        interval = int(str(defaults.value("expert_interval")))
        source = defaults.source("expert_interval")
    facts.set("model.num_experts", max(experts), args.source("num-experts"))
    if len(set(experts)) > 1:
        facts.note(f"--num-experts {text}: expert counts vary by layer; the largest is used")
    topk = args.int("topk")
    if topk is not None and topk > 0:
        facts.set("model.moe_router_topk", topk, args.source("topk"))
    else:
        defaults.apply(facts, "model.moe_router_topk", "topk")
    ffn = facts.int("model.ffn_hidden_size")
    if ffn is not None:
        rule = "derived: DeepSpeed-MoE experts are copies of the FFN (ParallelMLP, moe=True)"
        facts.set("model.moe_ffn_hidden_size", ffn, rule)
        if args.text("mlp-type") == "residual":
            facts.set("model.num_shared_experts", 1, args.source("mlp-type"))
            facts.set("model.moe_shared_expert_intermediate_size", ffn, args.source("mlp-type"))
    if layers:
        pattern = [1 if (index + 1) % interval == 0 else 0 for index in range(layers)]
        facts.set(
            "model.moe_layer_freq",
            pattern,
            f"derived: layers {interval}, {2 * interval}, ... are MoE (expert interval "
            f"{interval}: {source}; get_num_experts_per_layer, "
            f"{defaults.cite('megatron/model/transformer.py')})",
        )
        facts.note(f"expert interval {interval}: {sum(pattern)} MoE layers of {layers}")
    _expert_parallel(facts, args, defaults, tp=tp, dp=dp)


def _expert_parallel(
    facts: Facts, args: ArgSource, defaults: Defaults, *, tp: int, dp: int | None
) -> None:
    """EP (default 1; capped at the data-parallel ranks the expert groups are cut from) and
    expert tensor parallelism (TP with ``--enable-expert-tensor-parallelism``, else 1)."""
    ep = args.int("moe-expert-parallel-size")
    if ep is None or ep <= 0:
        defaults.apply(facts, "parallelism.expert_parallel", "moe_expert_parallel_size")
    elif dp and ep > dp:
        facts.set(
            "parallelism.expert_parallel",
            dp,
            f"derived: --moe-expert-parallel-size {ep} capped at the {dp} data-parallel ranks",
        )
        facts.note(
            f"--moe-expert-parallel-size {ep} exceeds the {dp} data-parallel ranks the expert "
            f"groups are cut from; described with expert parallel {dp}"
        )
    else:
        facts.set("parallelism.expert_parallel", ep, args.source("moe-expert-parallel-size"))
    flag = "enable-expert-tensor-parallelism"
    if args.on(flag):
        facts.set("parallelism.expert_tensor_parallel", tp, args.source(flag))
    else:
        rule = f"derived: no --{flag} -> experts are not split over tensor parallel"
        facts.set("parallelism.expert_tensor_parallel", 1, rule)


def _train_tokens(
    facts: Facts, args: ArgSource, defaults: Defaults, config: ConfigTree | None
) -> None:
    """``--train-tokens``: steps until the consumed tokens reach it, when before the
    ``--train-iters`` bound."""
    tokens = args.int("train-tokens")
    if not tokens or tokens <= 0:
        return
    facts.set("training.total_tokens", tokens, args.source("train-tokens"))
    gbs = facts.int("parallelism.global_batch_size")
    seq = facts.int("model.seq_length")
    if config is not None and config.get("curriculum_learning.enabled") is True:
        facts.note("curriculum learning shortens early sequences: --train-tokens steps not derived")
        return
    if args.text("rampup-batch-size") is not None or not gbs or not seq or seq <= 0:
        return
    steps = math.ceil(tokens / (gbs * seq))
    bound = facts.int("training.train_iters")
    if bound is not None and bound <= steps:
        return
    facts.set(
        "training.train_iters",
        steps,
        f"derived: ceil(--train-tokens {tokens} / (global batch {gbs} x seq {seq})): the "
        f"training loop stops at the token budget ({defaults.cite('training')})",
    )
    if bound is not None:
        facts.note(
            f"--train-iters {bound} is not reached: --train-tokens {tokens} ends training "
            f"after {steps} steps"
        )


class MegatronDeepSpeedReader:
    """Megatron-DeepSpeed programs (module docstring)."""

    name = "megatron_deepspeed"

    def recognises(self, invocation: Invocation) -> bool:
        """A Python program with Megatron model flags and ``--deepspeed`` or
        ``--deepspeed_config``."""
        if not posixpath.basename(invocation.program).endswith(".py"):
            return False
        names = {token.partition("=")[0] for token in invocation.args}
        return bool(names & _DEEPSPEED_FLAGS) and has_model_flags(invocation.args)

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the program trains (module docstring). Raises ``SpecError`` when the DeepSpeed
        config is present but is not valid JSON."""
        facts = Facts()
        tokens = parse_megatron_args(invocation.args, lists=LIST_ARGS | {"num-experts"})
        args = ArgSource(tokens, where=invocation.where)
        program = posixpath.basename(invocation.program)
        facts.set("training.framework", "deepspeed", f"derived: {program} with --deepspeed")
        facts.set("training.mode", "pretrain", f"derived: {program} pretrains")
        config = _deepspeed_config(facts, args, invocation, context)
        read_megatron_deepspeed(facts, args, config=config, world=world_size(context))
        return facts


def read_megatron_deepspeed(
    facts: Facts, args: ArgSource, *, config: ConfigTree | None, world: int | None
) -> None:
    """Every Megatron-DeepSpeed argument the planner uses, with the DeepSpeed JSON ``config``
    when it was read, into ``facts`` (module docstring); ``world``: the processes started."""
    defaults = defaults_of("megatron_deepspeed")
    read_shape(facts, args, defaults)
    _attention(facts, args)
    tp, pp, sp = _parallel(facts, args, defaults)
    model_parallel = tp * pp * sp
    dp = world // model_parallel if world and world % model_parallel == 0 else None
    global_batch = read_batch(facts, args, world=world, model_parallel=model_parallel)
    _batch_notes(facts, config, micro=args.int("micro-batch-size"), dp=dp)
    _precision(facts, args, config)
    _memory(facts, args, defaults, config, on=args.on("deepspeed"))
    _moe(facts, args, defaults, tp=tp, dp=dp)
    read_vocab(facts, args, defaults, tp)
    read_train_iters(facts, args, defaults, global_batch=global_batch, stop_at_train_samples=False)
    _train_tokens(facts, args, defaults, config)


READER = MegatronDeepSpeedReader()
