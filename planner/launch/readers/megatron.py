"""Megatron-LM launches: ``pretrain_gpt.py`` and Megatron-Core based launchers (a Python program
with ``--num-layers`` / ``--hidden-size`` or ``--yaml-cfg``), GPT-family and MoE models.

The arguments are read as Megatron-LM's argparse and ``validate_args`` read them
(NVIDIA/Megatron-LM ``megatron/training/arguments.py`` at the commit of
``planner/launch/data/megatron.yaml``), each value cited as ``<where> (--flag)`` (the command's
line in the launch), a default of Megatron-LM (the data file names the file defining it) or a
``derived:`` rule:

* FFN width: ``--ffn-hidden-size``, else ``int(8h/3/64)*64`` with ``--swiglu``, else ``4h``.
* KV heads: ``--num-query-groups`` only with ``--group-query-attention`` (else = heads).
* Vocabulary: the tokenizer (``pretrain_gpt.py`` defaults to ``GPT2BPETokenizer``: GPT-2's
  50257), padded to ``--make-vocab-size-divisible-by`` (128) x TP -> ``launch.padded_vocab_size``.
* Steps: ``--train-iters``, else ``--train-samples`` over the global batch, walking
  ``--rampup-batch-size`` as ``update_train_iters`` does (``megatron/training/training.py``).
* ZeRO: ``--use-torch-fsdp2`` 3; Megatron-FSDP (``--use-megatron-fsdp``, earlier
  ``--use-custom-fsdp``) the stage its ``--data-parallel-sharding-strategy`` shards
  (``no_shard`` 0, ``optim`` 1, ``optim_grads`` 2, ``optim_grads_params`` 3; unset: the
  default of the NeMo Framework container the launch runs in, ``no_shard`` before Megatron
  Core 0.18.0, as under ``--use-custom-fsdp``, else the newest, ``optim_grads_params``);
  ``--use-distributed-optimizer`` 1; else 0.
* FP8 weights: ``--fp8-param-gather`` under ``--fp8-format`` (fp8 or mxfp8), off under
  ``--use-torch-fsdp2``; where Megatron-LM stops at it (no FP8 GEMMs, or no distributed
  optimizer or FSDP) a note says so.
* ``--yaml-cfg FILE``: Megatron then ignores every other argument and reads all of them from
  the YAML (keys are argparse names; ``language_model`` and ``model_parallel`` sections),
  completing it as ``megatron/training/yaml_arguments.py`` ``validate_yaml`` does.

What it shares with the Megatron-DeepSpeed reader lives in
:mod:`planner.launch.readers.megatron_common`.
"""

from __future__ import annotations

import posixpath

from planner.launch.configs import ConfigTree, read_config
from planner.launch.reader import ReadContext
from planner.launch.readers.megatron_common import (
    ArgSource,
    Defaults,
    defaults_of,
    earlier_default,
    has_model_flags,
    read_batch,
    read_precision,
    read_shape,
    read_train_iters,
    read_vocab,
    release_default,
    world_size,
)
from planner.launch.release import launch_release
from planner.launch.types import Facts, Invocation, resolve_path
from planner.scenario.megatron_args import arguments_from_yaml
from planner.scenario.megatron_table import (
    MEGATRON_FSDP_STAGES,
    attention_values,
    cuda_graph_values,
    fp8_param_gather_refusal,
    fp8_param_gather_values,
    grad_reduce_in_bf16_ignored,
    gradient_reduction_values,
    main_grads_bf16_refused,
    megatron_fsdp_flag,
    megatron_fsdp_master,
    megatron_fsdp_optimizer_note,
    moe_values,
    optimizer_dtypes_refused,
    optimizer_state_values,
    parse_megatron_args,
    pipeline_values,
    recompute_values,
    zero_stage_value,
)

__all__ = ["READER", "MegatronReader", "read_megatron", "yaml_source"]

_OTHER_PROGRAMS = ("pretrain_bert", "pretrain_t5", "pretrain_mamba", "pretrain_vlm", "pretrain_ict")


def _memory(
    facts: Facts, args: ArgSource, defaults: Defaults, release: tuple[str, str] | None
) -> None:
    """Recompute, ZeRO stage (:func:`_zero_stage`) and gradient reduction."""
    rows = recompute_values(args.values)
    for row in rows:
        args.set(facts, row, defaults)
    if args.on("checkpoint-activations"):
        facts.note("--checkpoint-activations: Megatron-LM exits (use --recompute-activations)")
    if not rows:
        defaults.apply(facts, "parallelism.recompute", "recompute_granularity")
    _zero_stage(facts, args, defaults, release)
    for row in gradient_reduction_values(args.values):
        args.set(facts, row, defaults)
    if args.on("grad-reduce-in-bf16") and grad_reduce_in_bf16_ignored(args.values):
        facts.note(
            "--grad-reduce-in-bf16 is ignored without --bf16 or --use-megatron-fsdp "
            "(validate_args): gradients are reduced in the parameters' dtype"
        )
    if main_grads_bf16_refused(args.values):
        facts.note(
            "--main-grads-dtype bf16 with --accumulate-allreduce-grads-in-fp32 under --bf16: "
            "Megatron-LM stops (validate_args: --main-grads-dtype can only be fp32 when "
            "--accumulate-allreduce-grads-in-fp32 is set); drop one of them"
        )


def _optimizer_states(
    facts: Facts, args: ArgSource, defaults: Defaults, release: tuple[str, str] | None
) -> None:
    """The optimizer's dtypes under ``--use-precision-aware-optimizer``
    (``optimizer_state_values``, under Megatron-FSDP as ``megatron_fsdp_master`` says for the
    NeMo Framework container ``release``, else the newest), and a note where Megatron-Core
    refuses them or where they are left to the framework."""
    name = None if release is None else release[0]
    for row in optimizer_state_values(args.values, name):
        args.set(facts, row, defaults)
    if optimizer_dtypes_refused(args.values):
        facts.note(
            "optimizer dtypes: Megatron-LM stops (--main-params-dtype takes fp32 or fp16, "
            "--exp-avg-dtype / --exp-avg-sq-dtype fp32, fp16, bf16 or fp8; OptimizerConfig: "
            "other than fp32 they need --use-precision-aware-optimizer, which needs "
            "--use-distributed-optimizer)"
        )
    if not args.on("use-precision-aware-optimizer"):
        return
    if args.on("optimizer-cpu-offload"):
        facts.note(
            "--optimizer-cpu-offload keeps optimizer states in host memory, which the scenario "
            "does not model: the GPU's optimizer memory is predicted as without it"
        )
    elif args.on("use-torch-fsdp2"):
        facts.note(
            "--use-precision-aware-optimizer under --use-torch-fsdp2: the optimizer dtypes are "
            "read as the framework's"
        )
    elif megatron_fsdp_flag(args.values):
        note = megatron_fsdp_optimizer_note(
            megatron_fsdp_master(name, clears_preserve=True),
            name,
            "parallelism.main_params_dtype" in facts.values,
            "--megatron-fsdp-main-params-dtype",
        )
        if note:
            facts.note(note)


def _fp8_weights(facts: Facts, args: ArgSource, precision: str) -> None:
    """``parallelism.fp8_param_gather`` (``fp8_param_gather_values``), with a note where
    Megatron-LM stops at ``--fp8-param-gather`` (``fp8_param_gather_refusal``) or turns it off
    under ``--use-torch-fsdp2``."""
    for row in fp8_param_gather_values(args.values, precision):
        facts.set(row.field, row.value, args.source(row.arg))
        if row.value is False:
            facts.note(
                "--fp8-param-gather under --use-torch-fsdp2: Megatron-LM turns it off with "
                "Transformer Engine 2.0 or later (validate_args, core 0.14 on) and gathers "
                "16-bit weights"
            )
    refusal = fp8_param_gather_refusal(args.values, precision)
    if refusal is not None:
        facts.note(refusal)


def _zero_stage(
    facts: Facts, args: ArgSource, defaults: Defaults, release: tuple[str, str] | None
) -> None:
    """``parallelism.zero_stage`` (``zero_stage_value``). Under Megatron-FSDP without a valid
    ``--data-parallel-sharding-strategy`` the stage of its default, assumed and noted: the
    default of the NeMo Framework container ``release`` the launch runs in (``no_shard``
    before Megatron Core 0.18.0), else the newest (``optim_grads_params``)."""
    key = "data_parallel_sharding_strategy"
    fsdp = megatron_fsdp_flag(args.values)
    strategy, source = defaults.value(key), defaults.source(key)
    earlier = release_default("megatron_lm", key, release[0]) if release else None
    if fsdp == "use-custom-fsdp":  # argparse knows the name at core_v0.12.0-0.13.x only
        earlier = earlier_default("megatron_lm", key, "--use-custom-fsdp names core 0.12-0.13")
    if earlier is not None:
        strategy, source = earlier
    row = zero_stage_value(args.values, str(strategy))
    if fsdp is not None:
        facts.set("parallelism.megatron_fsdp", True, args.source(fsdp))
    if fsdp is None or row.arg != fsdp:
        if row.arg:
            facts.set(row.field, row.value, args.source(row.arg))
        else:
            defaults.apply(facts, row.field, "use_distributed_optimizer", row.value)
        return
    where = (
        "core 0.12-0.13, the releases that take --use-custom-fsdp"
        if fsdp == "use-custom-fsdp"
        else f"the NeMo Framework container {release[0]} ({release[1]})"
        if release
        else "the newest release (the launch names none)"
    )
    given = args.text("data-parallel-sharding-strategy")
    why = (
        f"--data-parallel-sharding-strategy {given} is not one of Megatron-LM's choices "
        f"({', '.join(MEGATRON_FSDP_STAGES)}; argparse stops)"
        if given is not None
        else f"{args.name(fsdp)} without a --data-parallel-sharding-strategy"
    )
    facts.note(f"{why}: {strategy} assumed (ZeRO {row.value}), Megatron-LM's default in {where}")
    facts.default(row.field, row.value, f"{args.source(fsdp)}; {strategy}: {source}")


def _attention(facts: Facts, args: ArgSource, defaults: Defaults) -> None:
    """KV heads (``--num-query-groups`` only with ``--group-query-attention``; none for
    multi-latent attention), MLA ranks, sliding windows, MTP layers."""
    rows = attention_values(args.values)
    for row in rows:
        args.set(facts, row, defaults)
    mtp = args.int("mtp-num-layers")
    if mtp:
        facts.set("model.mtp_num_layers", mtp, args.source("mtp-num-layers"))
    if args.on("multi-latent-attention"):
        return
    heads = args.int("num-attention-heads")
    if args.on("group-query-attention"):
        groups = args.int("num-query-groups")
        if groups is not None:
            facts.set("model.num_query_groups", groups, args.source("num-query-groups"))
        else:
            defaults.apply(facts, "model.num_query_groups", "num_query_groups")
    elif heads is not None:
        facts.set(
            "model.num_query_groups",
            heads,
            "derived: no grouped-query attention asked -> multi-head attention (groups = heads)",
        )
        if args.int("num-query-groups") is not None:
            facts.note("--num-query-groups is ignored without --group-query-attention")


def _moe(facts: Facts, args: ArgSource, defaults: Defaults, *, tp: int) -> None:
    """Experts, router top-k (default 2), expert width (default the FFN width), MoE layer
    pattern (default every layer), the other MoE options (expert biases unless
    ``--disable-bias-linear``) and expert tensor parallelism (default the tensor-parallel
    size), with a note where biased experts meet expert tensor parallelism, which Megatron-Core
    refuses."""
    experts = args.int("num-experts")
    if not experts:
        return
    facts.set("model.num_experts", experts, args.source("num-experts"))
    topk = args.int("moe-router-topk")
    if topk is not None:
        facts.set("model.moe_router_topk", topk, args.source("moe-router-topk"))
    else:
        defaults.apply(facts, "model.moe_router_topk", "moe_router_topk")
    width = args.int("moe-ffn-hidden-size")
    ffn = facts.int("model.ffn_hidden_size")
    if width is not None:
        facts.set("model.moe_ffn_hidden_size", width, args.source("moe-ffn-hidden-size"))
    elif ffn is not None:
        rule = f"derived: no {args.name('moe-ffn-hidden-size')} -> the FFN width (validate_args)"
        facts.set("model.moe_ffn_hidden_size", ffn, rule)
    for row in moe_values(args.values):
        args.set(facts, row, defaults)
    defaults.apply(facts, "model.moe_layer_freq", "moe_layer_freq")
    etp = args.int("expert-tensor-parallel-size")
    if etp is not None:
        facts.set(
            "parallelism.expert_tensor_parallel", etp, args.source("expert-tensor-parallel-size")
        )
    else:
        rule = (
            f"derived: no {args.name('expert-tensor-parallel-size')} -> the tensor-parallel size "
            "(validate_args)"
        )
        facts.set("parallelism.expert_tensor_parallel", tp, rule)
    if (etp if etp is not None else tp) > 1 and not args.on("disable-bias-linear"):
        facts.note(
            "biased experts (no --disable-bias-linear) with expert tensor parallelism > 1: "
            "Megatron-Core stops (TransformerConfig: 'Bias in Moe is only supported when "
            "ETP==1'); pass --disable-bias-linear or --expert-tensor-parallel-size 1"
        )


def _parallel(facts: Facts, args: ArgSource, defaults: Defaults) -> tuple[int, int, int]:
    """TP, PP, CP, EP (each 1 by default), sequence parallel (only with TP > 1) and the
    pipeline split; returns (tp, pp, cp)."""
    sizes: dict[str, int] = {}
    for arg, name in (
        ("tensor-model-parallel-size", "parallelism.tensor_parallel"),
        ("pipeline-model-parallel-size", "parallelism.pipeline_parallel"),
        ("context-parallel-size", "parallelism.context_parallel"),
        ("expert-model-parallel-size", "parallelism.expert_parallel"),
    ):
        value = args.int(arg)
        if value is not None and value > 0:
            facts.set(name, value, args.source(arg))
        else:
            defaults.apply(facts, name, arg.replace("-", "_"))
        sizes[arg] = value if value is not None and value > 0 else 1
    tp = sizes["tensor-model-parallel-size"]
    pp = sizes["pipeline-model-parallel-size"]
    if args.on("sequence-parallel"):
        facts.set("parallelism.sequence_parallel", tp > 1, args.source("sequence-parallel"))
        if tp == 1:
            facts.note(f"{args.name('sequence-parallel')} is off at tensor parallel 1")
    else:
        defaults.apply(facts, "parallelism.sequence_parallel", "sequence_parallel")
    layers = args.int("num-layers")
    if layers:
        for row in pipeline_values(args.values, layers, pp):
            args.set(facts, row, defaults)
    return tp, pp, sizes["context-parallel-size"]


def read_megatron(
    facts: Facts,
    args: ArgSource,
    *,
    world: int | None,
    release: tuple[str, str] | None = None,
) -> None:
    """Every Megatron-LM argument the planner uses, into ``facts``; ``release`` is the NeMo
    Framework container the launch runs in and where it says so, for the defaults that
    changed between releases."""
    defaults = defaults_of("megatron_lm")
    read_shape(facts, args, defaults)
    tp, pp, cp = _parallel(facts, args, defaults)
    global_batch = read_batch(facts, args, world=world, model_parallel=tp * pp * cp)
    precision = read_precision(facts, args)
    if precision is None:
        facts.note(
            "no --bf16 / --fp16: Megatron-LM keeps fp32 parameters, which the scenario format "
            "does not model; the precision is left to the scenario default"
        )
    _memory(facts, args, defaults, release)
    _fp8_weights(facts, args, precision or "fp32")
    _optimizer_states(facts, args, defaults, release)
    _attention(facts, args, defaults)
    _moe(facts, args, defaults, tp=tp)
    read_vocab(facts, args, defaults, tp)
    read_train_iters(facts, args, defaults, global_batch=global_batch, stop_at_train_samples=True)
    for row in cuda_graph_values(args.values):
        args.set(facts, row, defaults)


class MegatronReader:
    """Megatron-LM's ``pretrain_gpt.py`` and Megatron-Core launchers (module docstring)."""

    name = "megatron"

    def recognises(self, invocation: Invocation) -> bool:
        """``pretrain_gpt*.py``, or any Python program with Megatron model flags or
        ``--yaml-cfg``; not the BERT, T5, Mamba or vision pretraining programs."""
        base = posixpath.basename(invocation.program)
        if base.startswith(_OTHER_PROGRAMS):
            return False
        if base.startswith("pretrain_gpt") and base.endswith(".py"):
            return True
        return base.endswith(".py") and has_model_flags(invocation.args)

    def read(self, invocation: Invocation, context: ReadContext) -> Facts:
        """What the program trains (module docstring). Raises ``SourceError`` /
        ``SpecError`` when the ``--yaml-cfg`` file cannot be read or parsed."""
        facts = Facts()
        tokens = parse_megatron_args(invocation.args)
        args = ArgSource(tokens, where=invocation.where)
        config = args.text("yaml-cfg")
        if config is not None:
            cwd = invocation.cwd or context.launch.work_dir
            tree = read_config(context.files, resolve_path(config, cwd))
            ignored = sorted(key for key in tokens if key != "yaml-cfg")
            if ignored:
                facts.note(
                    f"--yaml-cfg {config}: Megatron-LM ignores the other {len(ignored)} "
                    f"arguments (--{ignored[0]}, ...) and reads every value from the YAML"
                )
            args = yaml_source(tree)
        program = posixpath.basename(invocation.program)
        facts.set("training.framework", "megatron", f"derived: {program} is Megatron-LM")
        facts.set("training.mode", "pretrain", f"derived: {program} pretrains")
        release = launch_release(context.allocation, invocation)
        read_megatron(facts, args, world=world_size(context), release=release)
        return facts


def yaml_source(tree: ConfigTree) -> ArgSource:
    """A ``--yaml-cfg`` file as arguments, each cited by its ``file:line``."""
    values, keys = arguments_from_yaml(tree.data)
    cited = {arg: tree.where(dotted) for arg, dotted in keys.items()}
    return ArgSource(values, where=tree.where(""), cited=cited, names=keys)


READER = MegatronReader()
